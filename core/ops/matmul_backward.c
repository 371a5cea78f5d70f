/*
 * core/ops/matmul_backward.c - sparse training: the backward of a dynamic-sparse
 * matmul.
 *
 * For C = A . B with A sparse: dA = (dC . B^T) only on A's non-zero
 * micro-tiles (an SDDMM whose mask is A itself), and dB = A^T . dC with A^T
 * as the sparse operand of pit_matmul (A's M axis becomes the reduction axis).
 */
#include "ops.h"

static pit_status check_backward(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                                 const pit_tensor *dC, const pit_tensor *dA, const pit_tensor *dB)
{
    static const char *const fn = "pit_matmul_backward";
    PIT_TRY(ops_check_tensor(ctx, A, fn, "A", 2, 3));
    int r = A->d.rank;
    PIT_TRY(ops_check_tensor(ctx, B, fn, "B", r, r));
    PIT_TRY(ops_check_tensor(ctx, dC, fn, "dC", r, r));
    PIT_TRY(ops_check_float(ctx, A, fn, "A"));
    PIT_TRY(ops_check_same_dtype(A, B, fn, "A", "B"));
    PIT_TRY(ops_check_same_dtype(A, dC, fn, "A", "dC"));
    if (r == 3) {
        PIT_TRY(ops_check_dim(B, 0, A->d.shape[0], fn, "B"));
        PIT_TRY(ops_check_dim(dC, 0, A->d.shape[0], fn, "dC"));
    }
    PIT_TRY(ops_check_dim(B, -2, ops_cols(&A->d), fn, "B"));
    PIT_TRY(ops_check_dim(dC, -2, ops_rows(&A->d), fn, "dC"));
    PIT_TRY(ops_check_dim(dC, -1, ops_cols(&B->d), fn, "dC"));
    const pit_tensor *in[3] = {A, B, dC}, *out[2] = {dA, dB}, *like[2] = {A, B};
    const char *in_names[3] = {"A", "B", "dC"}, *out_names[2] = {"dA", "dB"};
    for (int o = 0; o < 2; o++) {
        if (!out[o])
            continue;
        PIT_TRY(ops_check_output(ctx, out[o], fn, out_names[o], r, r));
        PIT_TRY(ops_check_same_dtype(A, out[o], fn, "A", out_names[o]));
        for (int i = 0; i < r; i++)
            PIT_TRY(ops_check_dim(out[o], i, like[o]->d.shape[i], fn, out_names[o]));
        for (int i = 0; i < 3; i++)
            PIT_TRY(ops_check_no_overlap(out[o], in[i], fn, out_names[o], in_names[i]));
    }
    return ops_check_no_overlap(dA, dB, fn, "dA", "dB");
}

/* dB = A^T . dC: A^T into a workspace, then the PIT matmul with it sparse. */
static pit_status backward_db(pit_context *ctx, pit_stream *stream, void *bs, const pit_tensor *A,
                              const pit_tensor *dC, pit_tensor *dB)
{
    if (!ctx->be->transpose)
        return ops_unsupported(ctx, "transpose (for dB of pit_matmul_backward)");
    int r = A->d.rank;
    int64_t shape[3] = {ops_batch(&A->d), ops_cols(&A->d), ops_rows(&A->d)};
    void *mem;
    PIT_TRY(pit_workspace_get(ctx, bs, "backward.At", (size_t)(shape[0] * shape[1] * shape[2]) *
                              pit_dtype_size(A->d.dtype), &mem));
    pit_tdesc at = ops_scratch_desc(mem, A->d.dtype, r, r == 3 ? shape : shape + 1);
    if (pit_tensor_numel(&at) > 0)
        PIT_TRY(ctx->be->transpose(ctx->bctx, bs, &A->d, &at));
    pit_tensor At = ops_tensor_of(ctx, &at);
    return pit_matmul(ctx, stream, &At, dC, dB, NULL, NULL);
}

PIT_API pit_status pit_matmul_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                       const pit_tensor *B, const pit_tensor *dC, pit_tensor *dA,
                                       pit_tensor *dB)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, "pit_matmul_backward", &bs));
    PIT_TRY(check_backward(ctx, A, B, dC, dA, dB));
    if (dA) {
        /* sddmm(dC [M,N], B as [K rows, N], mask A) = dC . B^T on A's pattern. */
        pit_microtile tile = {32, 32, PIT_AXIS_K};
        PIT_TRY(ops_sddmm_run(ctx, bs, &dC->d, &B->d, &A->d, &dA->d, tile, "backward.dA", NULL));
    }
    if (dB)
        PIT_TRY(backward_db(ctx, stream, bs, A, dC, dB));
    return PIT_SUCCESS;
}
