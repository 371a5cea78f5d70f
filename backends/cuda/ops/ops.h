/*
 * ops.h - what the CUDA backend's operator files (backends/cuda/ops/) share:
 * the one kernel view of a tensor, launching a kernel variant, scratch
 * memory, and the entries each file gives the backend's table. The HIP
 * plug-in compiles these files too, through hip_shim.h.
 */
#ifndef PIT_CUDA_OPS_H
#define PIT_CUDA_OPS_H

#include <stdint.h>

#include "cuda_internal.h"
#include "cuda_model.h"

/* ---- views --------------------------------------------------------------- */
/* A tensor as [batch, rows, cols] with strides (elements); rank 2 has batch
 * stride 0. */
typedef struct pit_cuda_view {
    uint64_t ptr; /* element 0 */
    pit_dtype dt;
    int64_t batch, rows, cols, ld, bs;
} pit_cuda_view;

/* The view of t for operator op (name: the operand, for messages). Rank 2
 * or 3 with unit-stride rows; flat: any rank, above 3 only contiguous
 * (element-wise operators), taken as its rows of the last dimension. */
pit_status pit_cuda_view_of(const pit_tdesc *t, const char *op, const char *name, int flat, pit_cuda_view *v);

size_t pit_cuda_el_bytes(pit_dtype d);
/* Whole vectors of vec_bytes along the rows of v: aligned base, row and
 * batch strides, and a row length len, all multiples of the vector. */
int pit_cuda_rows_aligned(const pit_cuda_view *v, int64_t len, int vec_bytes);
/* rows of v start 16-byte aligned (base, row and batch strides) */
int pit_cuda_aligned16(const pit_cuda_view *v);
/* Batch stride of an operand broadcast over `batch` (rank 2: shared). */
pit_status pit_cuda_batch_stride(const pit_cuda_view *v, int64_t batch, const char *op, const char *name,
                                 int64_t *s);
/* The block index over an output of `batch` x rows x cols: one set of
 * groups per batch, or one set shared by all (index of a rank-2 mask). */
pit_status pit_cuda_index_arg(const pit_index *idx, int64_t batch, int64_t rows, int64_t cols, const char *op,
                              pit_ix *ix);
pit_status pit_cuda_error(pit_status st, const char *fmt, const char *a, const char *b);

static inline int64_t pit_cuda_cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static inline CUstream pit_cuda_stream_of(void *stream)
{
    return ((pit_cuda_stream *)stream)->s;
}

/* ---- launching ------------------------------------------------------------- */
/* The kernel of variant v (compiled or cached) on grid gx x gy x gz. */
pit_status pit_cuda_launch_variant(pit_cuda_ctx *c, CUstream s, const pit_cuda_variant *v, int64_t gx, int64_t gy,
                                   int64_t gz, unsigned threads, void *args);
/* A kernel without a tile: kind, dtype and its op_param (NULL: zeros). */
pit_status pit_cuda_launch_kind(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, pit_dtype dt,
                                const int *param, int64_t gx, int64_t gy, int64_t gz, unsigned threads, void *args);
/* pit_op_zero over a, batch b (a->ids set: only the rows no expert routed) */
pit_status pit_cuda_launch_zero(pit_cuda_ctx *c, CUstream s, pit_dtype dt, pit_ew_args *a, int64_t batch);
pit_status pit_cuda_zero_view(pit_cuda_ctx *c, CUstream s, const pit_cuda_view *v);
/* f32 [rows, cols] scratch -> the output view (pit_util.cu's converter) */
pit_status pit_cuda_convert_into(pit_cuda_ctx *c, CUstream s, CUdeviceptr f32, const pit_cuda_view *out);

/* Runs body between push and pop of the context. */
#define PIT_CUDA_WITH_CONTEXT(c, body)                      \
    do {                                                    \
        pit_status st_push_ = pit_cuda_push(c);             \
        if (st_push_ != PIT_SUCCESS) return st_push_;       \
        pit_status st_body_ = (body);                       \
        pit_cuda_pop();                                     \
        return st_body_;                                    \
    } while (0)

/* ---- scratch ----------------------------------------------------------------- */
/* Scratch of `bytes` ordered on s: from the context's allocator when one is
 * set (pit_context_set_allocator), else the device's stream-ordered pool;
 * what names it in a failure (running out of device memory is
 * PIT_ERR_OUT_OF_MEMORY naming the size and the driver's error). *p is 0 on
 * failure. */
pit_status pit_cuda_scratch_alloc(pit_cuda_ctx *c, CUstream s, size_t bytes, const char *what, CUdeviceptr *p);
/* Scratch of n 4-byte words each set to `word` (0: f32 sums, int counters),
 * ordered on s; nothing left allocated on failure */
pit_status pit_cuda_scratch_fill(pit_cuda_ctx *c, CUstream s, size_t n, uint32_t word, const char *what,
                                 CUdeviceptr *p);
/* Frees p (when set) on s; returns st, or the free's failure when st is
 * PIT_SUCCESS. */
pit_status pit_cuda_free_scratch(pit_cuda_ctx *c, CUstream s, CUdeviceptr p, pit_status st);

/* Zeroes the counts and totals of idx[0..n-1], one memset a run of adjacent
 * words (what detect does first; detect.c). */
pit_status pit_cuda_zero_index(CUstream s, const pit_index *idx, int n);

/* ---- the entries of each operator file ------------------------------------------ */
void pit_cuda_register_sddmm(pit_backend *be);
void pit_cuda_register_softmax(pit_backend *be);
void pit_cuda_register_attention(pit_backend *be);
/* attention_ex and attention_backward (attention_ex.c) */
void pit_cuda_register_attention_ex(pit_backend *be);
/* pit_attention's call on the fused tensor-core kernel (attention.c):
 * rank-3 operands, query and output sets [B * Hq, Lq, cols], key and value
 * sets [B * Hkv, Lk, cols] (query set b reads kv set
 * (b / heads_q) * (heads_q / group) + (b % heads_q) / group); mask (NULL:
 * none) one set or one a query set; idx (NULL: every key block inside the
 * window bounds) with groups in query-set order; block: the kernel's square
 * block, the index's key block (its query block the same, or one holding
 * every query);
 * wl, wr the window bounds (-1: none); lse (NULL: none) rank 3 [B, Hq, Lq]. */
typedef struct pit_cuda_attention_call {
    const pit_index *idx;
    int block;
    int columns; /* key-column micro-tiles of the element mask (attention_cols.c), block rows a tile */
    pit_tdesc q, k, v, o;
    const pit_tdesc *mask, *lse;
    int64_t heads_q, group, wl, wr;
    float scale;
} pit_cuda_attention_call;
/* Whether the fused kernel takes the call (sets no error), and the call. */
int pit_cuda_attention_takes(const pit_cuda_ctx *c, const pit_cuda_attention_call *call);
/* listed: with columns, where to read back the (query tile, key) pairs listed (NULL: not wanted) */
pit_status pit_cuda_attention_fused_call(pit_cuda_ctx *c, CUstream s, const pit_cuda_attention_call *call,
                                         int64_t *listed);
/* The key-column micro-tiles of call (attention_cols.c): a the fused
 * kernel's arguments as pit_cuda_attention_fused_call filled them. */
int pit_cuda_attention_cols_takes(const pit_cuda_attention_call *call, const pit_cuda_view *q,
                                  const pit_cuda_view *k);
pit_status pit_cuda_attention_cols(pit_cuda_ctx *c, CUstream s, const pit_cuda_attention_call *call,
                                   const pit_cuda_view *q, const pit_cuda_view *k, const pit_cuda_view *v,
                                   const pit_cuda_view *m, pit_attention_args *a, int64_t *listed);
void pit_cuda_register_moe(pit_backend *be);
void pit_cuda_register_rows(pit_backend *be);
void pit_cuda_register_elementwise(pit_backend *be);

/* ---- cuBLAS (matmul.c) ------------------------------------------------------------- */
/* Column-major C = op(A) . op(B) (ta, tb: transposed), m x n x k, batch
 * strided GEMMs, f32 accumulation */
typedef struct pit_cuda_blas_gemm {
    pit_dtype dt;
    int ta, tb;
    int64_t m, n, k;
    uint64_t a;
    int64_t lda, sa;
    uint64_t b;
    int64_t ldb, sb;
    uint64_t c;
    int64_t ldc, sc, batch;
} pit_cuda_blas_gemm;
/* g[0..n-1] in order on s through the context's cuBLAS handle (made at
 * first use) */
pit_status pit_cuda_blas_gemms(pit_cuda_ctx *c, CUstream s, const pit_cuda_blas_gemm *g, int n);

/* ---- the gathered GEMM (gmm.c), run by moe.c and rows.c ---------------------------- */
typedef struct pit_cuda_gmm_job {
    pit_gmm_args a;
    pit_dtype dt;
    pit_tile tile;            /* the tile asked for (pit_cuda_gmm_tile_valid) */
    int mode, acc;
    int glu;                  /* the gated epilogue (cuda_model.h's OP_GMM_TC [1]); B is then [K, 2N] */
    int bt;                   /* B^T (OP_GMM_TC [2]): B is W [N, K], the MoE mode 1 */
    int64_t groups, max_rows; /* max_rows: most rows of one group (grid of the CUDA-core path) */
    int64_t listed_max;       /* most listed slots of all groups together */
    int64_t mark_stride;      /* output rows per group (matmul_rows) or 0 (MoE: one output) */
} pit_cuda_gmm_job;

/* The tile core asked for, checked against the kernels; NULL: the default
 * for the device and dtype. */
pit_status pit_cuda_gmm_tile_of(const pit_cuda_ctx *c, const char *op, pit_dtype dt, const pit_tile *asked,
                                pit_tile *t);
/* 1 where the warp-specialised kernel (the only one with the gated
 * epilogue, j->glu, and B^T, j->bt) runs tile t of dtype dt here: sm_90
 * with B's tensor map */
int pit_cuda_gmm_ws_runs(const pit_cuda_ctx *c, pit_dtype dt, const pit_tile *t);
/* The CUDA-core kernel over j (any mode) */
pit_status pit_cuda_gmm_cuda_core(pit_cuda_ctx *c, CUstream s, const pit_cuda_gmm_job *j);
/* Modes 0, 1 and matmul_rows. Store (k == 1): zero the unlisted rows unless
 * keep; accumulate: with 16-bit rows, every slot's row stored by the tensor
 * cores and a token's k rows summed by pit_op_sum_slots (no atomics);
 * otherwise on the CUDA cores into out zeroed (f32) or an f32 scratch
 * converted into out afterwards. tensor_core: on pit_op_gmm_tc with j->tile. */
pit_status pit_cuda_gmm_scatter(pit_cuda_ctx *c, CUstream s, pit_cuda_gmm_job *j, const pit_cuda_view *out,
                                int tensor_core, int keep);

#endif /* PIT_CUDA_OPS_H */
