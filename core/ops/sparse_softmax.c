/*
 * core/ops/sparse_softmax.c - sparse row softmax and its backward. The row reductions
 * visit only the mask's non-zero micro-tiles, listed by a block index built on
 * the device (one row per group: 1 x SOFTMAX_BLOCK_COLS micro-tiles).
 */
#include <string.h>

#include "choice.h"
#include "ops.h"

/* 32 columns: at least one memory transaction of f32 per micro-tile row. */
#define SOFTMAX_BLOCK_COLS 32

/* X-like tensors: same rank (2 or 3), shape and dtype as X. */
static pit_status check_like(pit_context *ctx, const pit_tensor *X, const pit_tensor *t,
                             const char *fn, const char *nx, const char *name)
{
    PIT_TRY(ops_check_tensor(ctx, t, fn, name, X->d.rank, X->d.rank));
    PIT_TRY(ops_check_same_dtype(X, t, fn, nx, name));
    for (int i = 0; i < X->d.rank; i++)
        PIT_TRY(ops_check_dim(t, i, X->d.shape[i], fn, name));
    return PIT_SUCCESS;
}

static pit_status check_rows_operand(pit_context *ctx, const pit_tensor *X, const pit_tensor *mask,
                                     const char *fn, const char *nx)
{
    PIT_TRY(ops_check_tensor(ctx, X, fn, nx, 2, 3));
    PIT_TRY(ops_check_float(ctx, X, fn, nx));
    return ops_check_mask(ctx, mask, fn, X->d.rank, ops_batch(&X->d), ops_rows(&X->d),
                          ops_cols(&X->d));
}

static pit_microtile row_tile(int64_t cols)
{
    int32_t c = cols < SOFTMAX_BLOCK_COLS ? (int32_t)(cols > 0 ? cols : 1) : SOFTMAX_BLOCK_COLS;
    return (pit_microtile){1, c, PIT_AXIS_K};
}

/* Index of the mask; *empty when the output is all zero (no compute). */
static pit_status index_rows(pit_context *ctx, void *bs, const char *key, const pit_tdesc *X,
                             const pit_tdesc *mask, pit_report *report, pit_index *idx,
                             int *empty)
{
    int32_t max_entries;
    int64_t nonzero;
    PIT_TRY(pit_index_pattern(ctx, bs, key, mask, ops_batch(X), row_tile(ops_cols(X)), 0, idx));
    PIT_TRY(pit_index_stats(ctx, bs, idx, &max_entries, &nonzero));
    pit_index_report(report, idx, nonzero, pit_index_repeat(idx, ops_batch(X)),
                     PIT_CHOICE_SOFTMAX);
    *empty = nonzero == 0;
    return PIT_SUCCESS;
}

static int is_empty(const pit_tdesc *X)
{
    return ops_batch(X) == 0 || ops_rows(X) == 0 || ops_cols(X) == 0;
}

PIT_API pit_status pit_sparse_softmax(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                      const pit_tensor *mask, pit_tensor *Y, float scale,
                                      pit_report *report)
{
    static const char *const fn = "pit_sparse_softmax";
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, fn, report, &bs));
    PIT_TRY(check_rows_operand(ctx, X, mask, fn, "X"));
    PIT_TRY(check_like(ctx, X, Y, fn, "X", "Y"));
    PIT_TRY(pit_tensor_check_writable(Y, fn, "Y"));
    PIT_TRY(ops_check_inplace_or_disjoint(Y, X, fn, "Y", "X"));
    PIT_TRY(ops_check_no_overlap(Y, mask, fn, "Y", "mask"));
    if (!ctx->be->softmax_sparse)
        return ops_unsupported(ctx, "softmax_sparse");
    if (is_empty(&X->d))
        return PIT_SUCCESS;
    pit_index idx;
    int empty;
    PIT_TRY(index_rows(ctx, bs, "softmax", &X->d, &mask->d, report, &idx, &empty));
    if (empty)
        return ops_zero(ctx, bs, &Y->d);
    return ctx->be->softmax_sparse(ctx->bctx, bs, &idx, &X->d, &mask->d, &Y->d, scale);
}

PIT_API pit_status pit_sparse_softmax_backward(pit_context *ctx, pit_stream *stream,
                                               const pit_tensor *Y, const pit_tensor *dY,
                                               const pit_tensor *mask, pit_tensor *dX, float scale)
{
    static const char *const fn = "pit_sparse_softmax_backward";
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, fn, &bs));
    PIT_TRY(check_rows_operand(ctx, Y, mask, fn, "Y"));
    PIT_TRY(check_like(ctx, Y, dY, fn, "Y", "dY"));
    PIT_TRY(check_like(ctx, Y, dX, fn, "Y", "dX"));
    PIT_TRY(pit_tensor_check_writable(dX, fn, "dX"));
    PIT_TRY(ops_check_inplace_or_disjoint(dX, Y, fn, "dX", "Y"));
    PIT_TRY(ops_check_inplace_or_disjoint(dX, dY, fn, "dX", "dY"));
    PIT_TRY(ops_check_no_overlap(dX, mask, fn, "dX", "mask"));
    if (!ctx->be->softmax_sparse_backward)
        return ops_unsupported(ctx, "softmax_sparse_backward");
    if (is_empty(&Y->d))
        return PIT_SUCCESS;
    pit_index idx;
    int empty;
    PIT_TRY(index_rows(ctx, bs, "softmax_bwd", &Y->d, &mask->d, NULL, &idx, &empty));
    if (empty)
        return ops_zero(ctx, bs, &dX->d);
    return ctx->be->softmax_sparse_backward(ctx->bctx, bs, &idx, &Y->d, &dY->d, &mask->d, &dX->d,
                                            scale);
}
