/*
 * core/ops/relu.c - element-wise ReLU (in place or into a disjoint output).
 */
#include "ops.h"

static pit_status check_relu(pit_context *ctx, const pit_tensor *X, const pit_tensor *Y)
{
    static const char *const fn = "pit_relu";
    PIT_TRY(ops_check_tensor(ctx, X, fn, "X", 1, PIT_MAX_RANK));
    PIT_TRY(ops_check_output(ctx, Y, fn, "Y", X->d.rank, X->d.rank));
    PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    PIT_TRY(ops_check_same_dtype(X, Y, fn, "X", "Y"));
    for (int i = 0; i < X->d.rank; i++)
        PIT_TRY(ops_check_dim(Y, i, X->d.shape[i], fn, "Y"));
    return ops_check_inplace_or_disjoint(Y, X, fn, "Y", "X");
}

PIT_API pit_status pit_relu(pit_context *ctx, pit_stream *stream, const pit_tensor *X, pit_tensor *Y)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, "pit_relu", &bs));
    PIT_TRY(check_relu(ctx, X, Y));
    if (!ctx->be->relu)
        return ops_unsupported(ctx, "relu");
    if (pit_tensor_numel(&X->d) == 0)
        return PIT_SUCCESS;
    return ctx->be->relu(ctx->bctx, bs, &X->d, &Y->d);
}
