/*
 * core/ops/transpose.c - swaps the last two dimensions of a tensor (any
 * batch in front); the backward of a sparse matmul uses it for A^T.
 */
#include "ops.h"

static pit_status check_transpose(pit_context *ctx, const pit_tensor *X, const pit_tensor *Y)
{
    static const char *const fn = "pit_transpose";
    PIT_TRY(ops_check_tensor(ctx, X, fn, "X", 2, PIT_MAX_RANK));
    PIT_TRY(ops_check_output(ctx, Y, fn, "Y", X->d.rank, X->d.rank));
    if (X->d.dtype != PIT_I32)
        PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    PIT_TRY(ops_check_same_dtype(X, Y, fn, "X", "Y"));
    int r = X->d.rank;
    for (int i = 0; i < r - 2; i++)
        PIT_TRY(ops_check_dim(Y, i, X->d.shape[i], fn, "Y"));
    PIT_TRY(ops_check_dim(Y, -2, X->d.shape[r - 1], fn, "Y"));
    PIT_TRY(ops_check_dim(Y, -1, X->d.shape[r - 2], fn, "Y"));
    return ops_check_no_overlap(Y, X, fn, "Y", "X");
}

PIT_API pit_status pit_transpose(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                 pit_tensor *Y)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, "pit_transpose", &bs));
    PIT_TRY(check_transpose(ctx, X, Y));
    if (!ctx->be->transpose)
        return ops_unsupported(ctx, "transpose");
    if (pit_tensor_numel(&X->d) == 0)
        return PIT_SUCCESS;
    return ctx->be->transpose(ctx->bctx, bs, &X->d, &Y->d);
}
