/*
 * cuda_model.h - the operators of dynamic-sparse models on CUDA: their
 * kernels' names, -D defines and CI variants (cuda_model_kernels.c, no
 * driver needed) and the registration of the backend entries
 * (cuda_model_ops.c).
 *
 * op_param of a variant, per kind:
 *   OP_ATTENTION          [0] block, [1] head dim, [2] V head dim, [3] mask dtype,
 *                         [4] 1: detection inside the kernel (ATT_DETECT)
 *   OP_SDDMM, OP_SOFTMAX*                                        [3] mask dtype
 *   OP_GMM_TC   [0] accumulate (1: f32 atomics, 0: store), [1] B by TMA,
 *               [2] warp-specialised (384 threads; with [1]), [3] CTA pairs in
 *               clusters sharing B (with [2]; items of 2 bm rows); tile bm bn bk stages
 *   OP_GMM_CC   [0] accumulate, [1] MoE mode (0 also serves matmul_rows)
 * Mask dtype codes: 0 f32, 1 f16, 2 bf16, 3 i32, 4 u8.
 */
#ifndef PIT_CUDA_MODEL_H
#define PIT_CUDA_MODEL_H

#include "cuda_kernels.h"

/* The gathered GEMM tile on tensor cores (pit_op_gmm_tc): mma.sync from
 * sm_80; on sm_90 (compiled for sm_90a) the wgmma tile. */
#define PIT_CUDA_GMM_BM 128
#define PIT_CUDA_GMM_BN 256
#define PIT_CUDA_GMM_BK 32
#define PIT_CUDA_GMM_STAGES 3
#define PIT_CUDA_GMM_WGMMA_BK 64
#define PIT_CUDA_GMM_WGMMA_STAGES 4
#define PIT_CUDA_GMM_WS_STAGES 3 /* warp-specialised: the output tile is staged too */

/* The gmm tile for arch (major * 10 + minor) and the plain or the
 * warp-specialised (ws) kernel: the one above, or
 * PIT_CUDA_GMM_TILE="BMxBNxBKxSTAGES" (for tile sweeps; a value the kernel
 * cannot take leaves the default). */
pit_tile pit_cuda_gmm_tile(int arch, int ws);
/* 1 when pit_op_gmm_tc runs tile t on wgmma (the kernel's own test) */
int pit_cuda_gmm_wgmma(int arch, pit_tile t);
/* shared memory of pit_op_gmm_tc with tile t, bytes (ws: warp-specialised) */
long pit_cuda_gmm_smem(int arch, pit_tile t, int ws);

const char *pit_cuda_model_kernel_name(pit_cuda_kernel_kind kind);
char *pit_cuda_model_defines(const pit_cuda_variant *v, char *buf, size_t size);
/* Every pit_ops.cu variant CI compiles for arch; returns how many. */
int pit_cuda_model_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user);

/* Fills the operator entries of the CUDA backend's table. */
void pit_cuda_register_ops(pit_backend *be);

#endif /* PIT_CUDA_MODEL_H */
