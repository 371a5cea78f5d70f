/*
 * core/ops/relu_ffn.c - the ReLU-activation-sparse FFN (OPT): the zeros of
 * H = relu(X . W1) appear only at run time, so H . W2 runs through pit_matmul
 * with H as the sparse operand (detection after the ReLU, PIT along K).
 */
#include <string.h>

#include "ops.h"

/* X [T,D], W1 [D,F], W2 [F,D2], H [T,F], Y [T,D2], one dtype; H and Y
 * overlap nothing. */
static pit_status check_ffn(pit_context *ctx, const pit_tensor *X, const pit_tensor *W1,
                            const pit_tensor *W2, const pit_tensor *H, const pit_tensor *Y)
{
    static const char *const fn = "pit_relu_ffn";
    const pit_tensor *all[5] = {X, W1, W2, H, Y};
    const char *names[5] = {"X", "W1", "W2", "H", "Y"};
    for (int i = 0; i < 5; i++) {
        PIT_TRY(i < 3 ? ops_check_tensor(ctx, all[i], fn, names[i], 2, 2)
                      : ops_check_output(ctx, all[i], fn, names[i], 2, 2));
        PIT_TRY(ops_check_same_dtype(X, all[i], fn, "X", names[i]));
    }
    PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    int64_t t = X->d.shape[0], d = X->d.shape[1], f = W1->d.shape[1], d2 = W2->d.shape[1];
    PIT_TRY(ops_check_dim(W1, 0, d, fn, "W1"));
    PIT_TRY(ops_check_dim(W2, 0, f, fn, "W2"));
    PIT_TRY(ops_check_dim(H, 0, t, fn, "H"));
    PIT_TRY(ops_check_dim(H, 1, f, fn, "H"));
    PIT_TRY(ops_check_dim(Y, 0, t, fn, "Y"));
    PIT_TRY(ops_check_dim(Y, 1, d2, fn, "Y"));
    for (int out = 3; out < 5; out++)
        for (int i = 0; i < 5; i++)
            if (i != out)
                PIT_TRY(ops_check_no_overlap(all[out], all[i], fn, names[out], names[i]));
    return PIT_SUCCESS;
}

PIT_API pit_status pit_relu_ffn(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                const pit_tensor *W1, const pit_tensor *W2, pit_tensor *H,
                                pit_tensor *Y, pit_report *report)
{
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, "pit_relu_ffn", report, &bs));
    PIT_TRY(check_ffn(ctx, X, W1, W2, H, Y));
    if (!ctx->be->relu)
        return ops_unsupported(ctx, "relu");
    /* The first product is dense: X has no dynamic zeros to exploit. */
    PIT_TRY(pit_matmul_dense(ctx, stream, X, W1, H));
    if (pit_tensor_numel(&H->d) > 0)
        PIT_TRY(ctx->be->relu(ctx->bctx, bs, &H->d, &H->d));
    return pit_matmul(ctx, stream, H, W2, Y, NULL, report);
}
