/*
 * cuda_model.h - the operators of dynamic-sparse models on CUDA: their
 * kernels' -D defines and CI variants and the tiles of the gathered GEMM
 * (cuda_model_kernels.c, no driver needed), and the registration of the
 * backend entries (ops/).
 *
 * op_param of a variant, per kind:
 *   OP_ATTENTION          [0] block, [1] head dim, [2] V head dim, [3] mask dtype,
 *                         [4] 1: detection inside the kernel (ATT_DETECT), 2: the
 *                         warp-specialised kernel (ATT_WS: sm_90, block 128,
 *                         Q, K and V by TMA), 3: key-column tiles (ATT_COLS:
 *                         block 64, the u8 variant)
 *   OP_ATTN_COLS_SCAN (pit_attention_cols.cu)   [3] mask dtype
 *   OP_ATTN_DECODE, OP_ATTN_COMBINE (pit_attention_decode.cu)   [0] key block,
 *                         [1] head dim (the combine: [0] 64)
 *   OP_ATTN_BWD_DQ, OP_ATTN_BWD_DKV (pit_attention_bwd.cu)   [1] head dim
 *   OP_SDDMM, OP_SOFTMAX*, OP_ATTN_EX* (pit_attention_ex.cu)       [3] mask dtype
 *                         (the data's dtype when there is no mask)
 *   OP_GMM_TC   [0] warp-specialised wgmma with B by TMA (the 384-thread
 *               tile), [1] gated epilogue (0 none, 1 SwiGLU, 2 GeGLU:
 *               warp-specialised only), [2] B^T (warp-specialised only: MoE
 *               mode 1); tile bm bn bk stages. It stores; sums of a token's
 *               k results are summed apart (gmm.c)
 *   OP_GMM_CC   [0] accumulate, [1] MoE mode (0 also serves matmul_rows)
 * Mask dtype codes: 0 f32, 1 f16, 2 bf16, 3 i32, 4 u8.
 */
#ifndef PIT_CUDA_MODEL_H
#define PIT_CUDA_MODEL_H

#include "cuda_kernels.h"

/* ---- tiles of the gathered GEMM (MoE forward and backward, matmul_rows) ---
 * The tensor-core kernel (pit_op_gmm_tc, 16-bit, sm_80+) takes two shapes:
 *   threads 384: the warp-specialised wgmma kernel, sm_90 only: bm 128,
 *                bk 64, bn 128 or 256, stages 3..8 within shared memory;
 *                it needs a TMA map of B, and where the driver makes none
 *                the sm_80 tile below runs instead;
 *   threads 256: mma.sync, 2 x 4 warps: bm a multiple of 32, bn of 64, bk
 *                of 16, whole 16-byte copies a thread (bm * bk / 8 and
 *                bk * bn / 8 multiples of 256), stages 2..8 within shared
 *                memory.
 * The CUDA-core kernel (pit_op_gmm_cc, any dtype, every MoE mode) has one
 * tile: 64 x 64 x 16, 256 threads, 1 stage. */
#define PIT_CUDA_GMM_WS_THREADS 384

/* The tiles shipped in the tile database: sm_90 16-bit, sm_80 16-bit, and
 * the CUDA cores (f32, or tensor_core 0). */
pit_tile pit_cuda_gmm_tile_sm90(void);
pit_tile pit_cuda_gmm_tile_sm80(void);
pit_tile pit_cuda_gmm_tile_cuda_core(void);
/* The default tile for arch and dtype (the shipped row). */
pit_tile pit_cuda_gmm_default_tile(int arch, pit_dtype dt);
/* 1 when a gathered-GEMM kernel runs tile t of dtype dt on arch (major *
 * 10 + minor); why says what fails. */
int pit_cuda_gmm_tile_valid(int arch, pit_dtype dt, const pit_tile *t, const char **why);
/* 1 when t is the warp-specialised wgmma tile */
int pit_cuda_gmm_ws(const pit_tile *t);
/* shared memory of pit_op_gmm_tc with tile t, bytes */
long pit_cuda_gmm_smem(const pit_tile *t);

/* The -D defines of an operator kernel (after the kernel's own). */
char *pit_cuda_model_defines(const pit_cuda_variant *v, char *buf, size_t size);
/* Every operator-kernel variant CI compiles for arch; returns how many. */
int pit_cuda_model_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user);

/* Fills the operator entries of the CUDA backend's table. */
void pit_cuda_register_ops(pit_backend *be);

#endif /* PIT_CUDA_MODEL_H */
