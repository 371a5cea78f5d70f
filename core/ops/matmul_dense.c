/*
 * core/ops/matmul_dense.c - the dense matmul through the backend's dense GEMM
 * (vendor library or pit's own dense tile): the same operands as pit_matmul,
 * no detection.
 */
#include "ops.h"

PIT_API pit_status pit_matmul_dense(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                    const pit_tensor *B, pit_tensor *C)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "pit_matmul_dense: stream belongs to another context");
    pit_problem prob;
    PIT_TRY(ops_check_matmul(ctx, A, B, C, &prob));
    void *bs = pit_stream_or_default(ctx, stream)->bs;
    if (prob.m == 0 || prob.n == 0 || prob.batch == 0)
        return PIT_SUCCESS;
    if (prob.k == 0)
        return ops_zero(ctx, bs, &C->d);
    return ops_matmul_dense_run(ctx, bs, A, B, C);
}
