/*
 * core/ops/ops.h - what the public operators (one file each in core/ops/)
 * share: argument checks and the per-context workspace cache. Building the
 * block index of a pattern tensor on the device is core/pit/index.h.
 */
#ifndef PIT_CORE_OPS_H
#define PIT_CORE_OPS_H

#include "index.h"
#include "internal.h"

/* ---- workspace: device buffers cached in the context ---------------------- *
 * Keyed by (name, stream): work on one stream runs in order, so a buffer is
 * never used by two calls at once; different streams get different buffers.
 * A buffer grows when a larger one is asked for (the old one is released;
 * backends defer the release until queued work is done). */
pit_status pit_workspace_get(pit_context *ctx, void *stream, const char *key, size_t bytes,
                             void **mem);

/* ---- checks --------------------------------------------------------------- */
/* Common start of a public operator: clears the error, checks ctx and that the
 * stream belongs to it, and returns the backend stream in *bs. */
pit_status ops_begin(pit_context *ctx, pit_stream *stream, const char *fn, void **bs);
/* ops_begin for an operator with a report: the report is cleared first, so
 * it holds zeros whenever the call is refused. */
pit_status ops_begin_report(pit_context *ctx, pit_stream *stream, const char *fn,
                            pit_report *report, void **bs);
/* A tensor argument: non-NULL, of ctx, rank in lo..hi, row-major. */
pit_status ops_check_tensor(pit_context *ctx, const pit_tensor *t, const char *fn,
                            const char *name, int rank_lo, int rank_hi);
/* ops_check_tensor for an operator that takes its dimensions in any stride
 * order (pit_attention's Q, K, V, O and lse). */
pit_status ops_check_view(pit_context *ctx, const pit_tensor *t, const char *fn,
                          const char *name, int rank_lo, int rank_hi);
/* A tensor the operator writes: ops_check_tensor, and not read-only (a
 * DLPack import flagged read-only is an input only). */
pit_status ops_check_output(pit_context *ctx, const pit_tensor *t, const char *fn,
                            const char *name, int rank_lo, int rank_hi);
/* ops_check_output in any stride order (ops_check_view). */
pit_status ops_check_output_view(pit_context *ctx, const pit_tensor *t, const char *fn,
                                 const char *name, int rank_lo, int rank_hi);
/* f32/f16/bf16 and supported by the device (PIT_ERR_UNSUPPORTED otherwise). */
pit_status ops_check_float(pit_context *ctx, const pit_tensor *t, const char *fn,
                           const char *name);
/* PIT_ERR_UNSUPPORTED when the device does not store the dtype
 * (pit_device_stores: has_f16_storage, has_bf16); f32 and the integer dtypes
 * always pass. */
pit_status ops_check_on_device(const pit_context *ctx, pit_dtype dt, const char *fn);
/* Exact dtype match. */
pit_status ops_check_dtype(const pit_tensor *t, pit_dtype want, const char *fn,
                           const char *name);
/* Two tensors of the same dtype. */
pit_status ops_check_same_dtype(const pit_tensor *a, const pit_tensor *b, const char *fn,
                                const char *na, const char *nb);
/* A pattern tensor: f32, f16, bf16 or i32; rank 2 or out_rank with the same
 * batch; its last two dimensions rows x cols. */
pit_status ops_check_mask(pit_context *ctx, const pit_tensor *mask, const char *fn, int out_rank,
                          int64_t batch, int64_t rows, int64_t cols);
/* Dimension d (negative: from the end) of t must be `want`. */
pit_status ops_check_dim(const pit_tensor *t, int d, int64_t want, const char *fn,
                         const char *name);
/* PIT_ERR_ALIASING when out's bytes overlap in's. */
pit_status ops_check_no_overlap(const pit_tensor *out, const pit_tensor *in, const char *fn,
                                const char *nout, const char *nin);
/* An output of dtype dt and the given shape, overlapping none of the
 * ninputs inputs (names: theirs, for messages; a NULL input is skipped). */
pit_status ops_check_result(pit_context *ctx, const char *fn, const pit_tensor *out,
                            const char *name, pit_dtype dt, int rank, const int64_t *shape,
                            const pit_tensor *const *inputs, const char *const *names,
                            int ninputs);
/* Accepts out == in exactly (an in-place call); any other overlap is
 * PIT_ERR_ALIASING. */
pit_status ops_check_inplace_or_disjoint(const pit_tensor *out, const pit_tensor *in,
                                         const char *fn, const char *nout, const char *nin);
/* PIT_ERR_UNSUPPORTED naming the backend and the operator (a NULL entry). */
pit_status ops_unsupported(const pit_context *ctx, const char *op);

/* Batch of a rank-2/3 tensor (1 for rank 2). */
int64_t ops_batch(const pit_tdesc *d);
int64_t ops_rows(const pit_tdesc *d);
int64_t ops_cols(const pit_tdesc *d);

/* Sets every element of a (possibly strided) tensor to zero on stream bs. */
pit_status ops_zero(pit_context *ctx, void *bs, const pit_tdesc *d);

/* A rank-3 [batch, rows, cols] view of a rank-2 or rank-3 tensor; a rank-2
 * one is broadcast over the batch (batch stride 0). */
pit_tdesc ops_view3(const pit_tdesc *d, int64_t batch);
/* A contiguous tensor description over a workspace buffer. */
pit_tdesc ops_scratch_desc(void *mem, pit_dtype dtype, int rank, const int64_t *shape);
/* Wraps a backend description as a temporary pit_tensor (no ownership), for
 * calling public operators on internal buffers. */
pit_tensor ops_tensor_of(pit_context *ctx, const pit_tdesc *d);

/* The dense computation tile that ran, into a report (NULL: nothing). */
void ops_report_tile(pit_report *r, const pit_tile *tile);

/* ---- operators other operators reuse (after validation) ---------------- */
/* The operands of pit_matmul and pit_matmul_dense (matmul.c): A [..., M, K],
 * B [..., K, N], C [..., M, N], one batch and dtype; fills the problem. */
pit_status ops_check_matmul(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                            const pit_tensor *C, pit_problem *p);
/* C = A . B through the backend's dense GEMM, on validated operands. */
pit_status ops_matmul_dense_run(pit_context *ctx, void *bs, const pit_tensor *A,
                                const pit_tensor *B, const pit_tensor *C);
/* SDDMM of validated operands (sddmm.c): C[b] = (A[b] . B[b]^T) masked,
 * with output micro-tile `tile`; key names the workspace of its index. */
pit_status ops_sddmm_run(pit_context *ctx, void *bs, const pit_tdesc *A, const pit_tdesc *B,
                         const pit_tdesc *mask, const pit_tdesc *C, pit_microtile tile,
                         const char *key, pit_report *report);

/* MoE routing of validated ids [t,k] (moe.c) into the index of e experts
 * (micro-tile 1 x h), on the device; with routed non-NULL the counts are
 * read back: *max_entries = most token-slots of one expert, *routed = all of
 * them. Without, nothing waits for the device (*max_entries = -1, for a
 * backend whose moe_matmul plans on the device). PIT_ERR_UNSUPPORTED where
 * the backend lacks moe_route or moe_matmul. */
pit_status ops_moe_route(pit_context *ctx, void *bs, const pit_tensor *ids, int64_t t, int64_t h,
                         int64_t e, pit_index *idx, int32_t *max_entries, int64_t *routed);

#endif /* PIT_CORE_OPS_H */
