/*
 * core/ops/matmul_rows.c - row-sparse matmul (padding of variable-length batches,
 * masked tokens): the rows of A holding a non-zero are found on the device
 * (one 1 x K micro-tile per row, gathered along M), gathered into dense tiles,
 * multiplied by B and scattered back to their rows of C.
 */
#include <string.h>

#include "choice.h"
#include "ops.h"

static const char *const FN = "pit_matmul_rows";

/* A [b,M,K] or [M,K]; B [K,N] (shared by the batch) or [b,K,N]; C like A's rank. */
static pit_status check_rows(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                             const pit_tensor *C)
{
    PIT_TRY(ops_check_tensor(ctx, A, FN, "A", 2, 3));
    PIT_TRY(ops_check_tensor(ctx, B, FN, "B", 2, A->d.rank));
    PIT_TRY(ops_check_output(ctx, C, FN, "C", A->d.rank, A->d.rank));
    PIT_TRY(ops_check_float(ctx, A, FN, "A"));
    PIT_TRY(ops_check_same_dtype(A, B, FN, "A", "B"));
    PIT_TRY(ops_check_same_dtype(A, C, FN, "A", "C"));
    int64_t batch = ops_batch(&A->d), n = ops_cols(&B->d);
    if (A->d.rank == 3) {
        PIT_TRY(ops_check_dim(C, 0, batch, FN, "C"));
        if (B->d.rank == 3)
            PIT_TRY(ops_check_dim(B, 0, batch, FN, "B"));
    }
    PIT_TRY(ops_check_dim(B, -2, ops_cols(&A->d), FN, "B"));
    PIT_TRY(ops_check_dim(C, -2, ops_rows(&A->d), FN, "C"));
    PIT_TRY(ops_check_dim(C, -1, n, FN, "C"));
    PIT_TRY(ops_check_no_overlap(C, A, FN, "C", "A"));
    return ops_check_no_overlap(C, B, FN, "C", "B");
}

PIT_API pit_status pit_matmul_rows(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                   const pit_tensor *B, pit_tensor *C, int keep_skipped_rows,
                                   pit_report *report)
{
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, FN, report, &bs));
    PIT_TRY(check_rows(ctx, A, B, C));
    if (keep_skipped_rows != 0 && keep_skipped_rows != 1)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: keep_skipped_rows = %d (0 or 1)", FN,
                         keep_skipped_rows);
    if (!ctx->be->matmul_rows || !ctx->be->detect)
        return ops_unsupported(ctx, !ctx->be->detect ? "detect" : "matmul_rows");
    int64_t batch = ops_batch(&A->d), m = ops_rows(&A->d), k = ops_cols(&A->d);
    if (batch == 0 || m == 0 || ops_cols(&C->d) == 0)
        return PIT_SUCCESS;
    if (k == 0) /* every row of A is empty: every row is skipped */
        return keep_skipped_rows ? PIT_SUCCESS : ops_zero(ctx, bs, &C->d);
    /* One micro-tile spans a whole row: the index has one group per batch
     * listing the non-zero rows. */
    pit_microtile tile = {1, (int32_t)k, PIT_AXIS_M};
    pit_index idx;
    int32_t max_entries;
    int64_t nonzero;
    PIT_TRY(pit_index_alloc(ctx, bs, "rows", tile, batch, 1, m, &idx));
    PIT_TRY(ctx->be->detect(ctx->bctx, bs, &A->d, &idx, 1));
    PIT_TRY(pit_index_stats(ctx, bs, &idx, &max_entries, &nonzero));
    pit_index_report(report, &idx, nonzero, 1, PIT_CHOICE_ROWS);
    pit_tile gemm;
    PIT_TRY(pit_select_gathered(ctx->db, PIT_TILE_ROWS, A->d.dtype, &gemm));
    if (nonzero == 0)
        return keep_skipped_rows ? PIT_SUCCESS : ops_zero(ctx, bs, &C->d);
    PIT_TRY(ctx->be->matmul_rows(ctx->bctx, bs, &gemm, &idx, max_entries, &A->d, &B->d, &C->d,
                                 keep_skipped_rows));
    ops_report_tile(report, &gemm); /* the tile that ran */
    return PIT_SUCCESS;
}
