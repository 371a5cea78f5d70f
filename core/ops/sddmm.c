/*
 * core/ops/sddmm.c - output-sparse matmul: C = (A . B^T) masked. The mask's
 * non-zero output micro-tiles are found on the device (detect), and only
 * those are computed (backend sddmm: SRead of A's rows and B's rows of the
 * block, dense tile, SWrite of the block).
 */
#include <string.h>

#include "choice.h"
#include "ops.h"

#define SDDMM_AUTO_BLOCK 32

static const char *const FN = "pit_sddmm";

/* A [b,M,K] or [M,K], B [b,N,K] or [N,K], C [b,M,N] or [M,N] (A's rank). */
static pit_status check_sddmm(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                              const pit_tensor *mask, const pit_tensor *C)
{
    PIT_TRY(ops_check_tensor(ctx, A, FN, "A", 2, 3));
    PIT_TRY(ops_check_tensor(ctx, B, FN, "B", A->d.rank, A->d.rank));
    PIT_TRY(ops_check_output(ctx, C, FN, "C", A->d.rank, A->d.rank));
    PIT_TRY(ops_check_float(ctx, A, FN, "A"));
    PIT_TRY(ops_check_same_dtype(A, B, FN, "A", "B"));
    PIT_TRY(ops_check_same_dtype(A, C, FN, "A", "C"));
    int64_t batch = ops_batch(&A->d), m = ops_rows(&A->d), k = ops_cols(&A->d);
    int64_t n = ops_rows(&B->d);
    if (A->d.rank == 3) {
        PIT_TRY(ops_check_dim(B, 0, batch, FN, "B"));
        PIT_TRY(ops_check_dim(C, 0, batch, FN, "C"));
    }
    PIT_TRY(ops_check_dim(B, -1, k, FN, "B"));
    PIT_TRY(ops_check_dim(C, -2, m, FN, "C"));
    PIT_TRY(ops_check_dim(C, -1, n, FN, "C"));
    PIT_TRY(ops_check_mask(ctx, mask, FN, C->d.rank, batch, m, n));
    PIT_TRY(ops_check_no_overlap(C, A, FN, "C", "A"));
    PIT_TRY(ops_check_no_overlap(C, B, FN, "C", "B"));
    return ops_check_no_overlap(C, mask, FN, "C", "mask");
}

static pit_status block_of(int32_t rows, int32_t cols, int64_t m, int64_t n, pit_microtile *t)
{
    if (rows < 0 || cols < 0 || (rows == 0) != (cols == 0))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: block %dx%d; both sides > 0, or both 0 "
                         "(automatic)", FN, rows, cols);
    if (rows == 0) {
        /* Automatic: a square block, no larger than the output. */
        rows = m < SDDMM_AUTO_BLOCK ? (int32_t)(m > 0 ? m : 1) : SDDMM_AUTO_BLOCK;
        cols = n < SDDMM_AUTO_BLOCK ? (int32_t)(n > 0 ? n : 1) : SDDMM_AUTO_BLOCK;
    }
    *t = (pit_microtile){rows, cols, PIT_AXIS_K};
    return PIT_SUCCESS;
}

pit_status ops_sddmm_run(pit_context *ctx, void *bs, const pit_tdesc *A, const pit_tdesc *B,
                         const pit_tdesc *mask, const pit_tdesc *C, pit_microtile tile,
                         const char *key, pit_report *report)
{
    if (!ctx->be->sddmm)
        return ops_unsupported(ctx, "sddmm");
    int64_t batch = ops_batch(C);
    if (batch == 0 || ops_rows(C) == 0 || ops_cols(C) == 0)
        return PIT_SUCCESS;
    if (ops_cols(A) == 0) /* empty reduction: every product is 0 */
        return ops_zero(ctx, bs, C);
    pit_index idx;
    int32_t max_entries;
    int64_t nonzero;
    PIT_TRY(pit_index_pattern(ctx, bs, key, mask, batch, tile, 0, &idx));
    PIT_TRY(pit_index_stats(ctx, bs, &idx, &max_entries, &nonzero));
    pit_index_report(report, &idx, nonzero, pit_index_repeat(&idx, batch), PIT_CHOICE_SDDMM);
    if (nonzero == 0) {
        pit_log_debug("%s: empty pattern: C set to zero, no compute launched", FN);
        return ops_zero(ctx, bs, C);
    }
    return ctx->be->sddmm(ctx->bctx, bs, &idx, A, B, mask, C);
}

PIT_API pit_status pit_sddmm(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                             const pit_tensor *B, const pit_tensor *mask, pit_tensor *C,
                             int32_t block_rows, int32_t block_cols, pit_report *report)
{
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, FN, report, &bs));
    PIT_TRY(check_sddmm(ctx, A, B, mask, C));
    pit_microtile tile;
    PIT_TRY(block_of(block_rows, block_cols, ops_rows(&C->d), ops_cols(&C->d), &tile));
    return ops_sddmm_run(ctx, bs, &A->d, &B->d, &mask->d, &C->d, tile, "sddmm", report);
}
