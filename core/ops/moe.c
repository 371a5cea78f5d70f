/*
 * core/ops/moe.c - Mixture-of-Experts expert layer without padding. The
 * routing (expert_ids) is the dynamic sparsity: moe_route builds, on the
 * device, one group per expert listing its token-slots (out of order, with
 * atomics); moe_matmul gathers each expert's tokens (SRead along M), runs all
 * experts in one launch and scatters the gated results back (SWrite).
 */
#include <string.h>

#include "choice.h"
#include "ops.h"

typedef struct moe_shape {
    int64_t t, h, n, e, k;
} moe_shape;

/* X [T,H], expert_ids i32 [T,k], gates f32 [T,k], W [E,H,N]. */
static pit_status check_moe_inputs(pit_context *ctx, const char *fn, const pit_tensor *X,
                                   const pit_tensor *ids, const pit_tensor *gates,
                                   const pit_tensor *W, moe_shape *s)
{
    PIT_TRY(ops_check_tensor(ctx, X, fn, "X", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, ids, fn, "expert_ids", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, gates, fn, "gates", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, W, fn, "W", 3, 3));
    PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    PIT_TRY(ops_check_same_dtype(X, W, fn, "X", "W"));
    PIT_TRY(ops_check_dtype(ids, PIT_I32, fn, "expert_ids"));
    PIT_TRY(ops_check_dtype(gates, PIT_F32, fn, "gates"));
    s->t = X->d.shape[0];
    s->h = X->d.shape[1];
    s->e = W->d.shape[0];
    s->n = W->d.shape[2];
    s->k = ids->d.shape[1];
    PIT_TRY(ops_check_dim(ids, 0, s->t, fn, "expert_ids"));
    PIT_TRY(ops_check_dim(gates, 0, s->t, fn, "gates"));
    PIT_TRY(ops_check_dim(gates, 1, s->k, fn, "gates"));
    return ops_check_dim(W, 1, s->h, fn, "W");
}

PIT_API pit_status pit_moe_forward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                   const pit_tensor *expert_ids, const pit_tensor *gates,
                                   const pit_tensor *W, pit_tensor *Y, pit_report *report)
{
    static const char *const fn = "pit_moe_forward";
    void *bs;
    moe_shape s;
    PIT_TRY(ops_begin_report(ctx, stream, fn, report, &bs));
    PIT_TRY(check_moe_inputs(ctx, fn, X, expert_ids, gates, W, &s));
    const pit_tensor *in[4] = {X, expert_ids, gates, W};
    const char *names[4] = {"X", "expert_ids", "gates", "W"};
    int64_t yshape[2] = {s.t, s.n};
    PIT_TRY(ops_check_result(ctx, fn, Y, "Y", X->d.dtype, 2, yshape, in, names, 4));
    if (s.t == 0 || s.n == 0)
        return PIT_SUCCESS;
    if (s.e == 0 || s.k == 0 || s.h == 0) /* nothing routed, or empty products */
        return ops_zero(ctx, bs, &Y->d);
    pit_tile tile;
    PIT_TRY(pit_select_gathered(ctx->db, PIT_TILE_MOE, X->d.dtype, &tile));
    pit_index idx;
    int32_t max_entries;
    int64_t routed = 0;
    /* the counts come back to the host for a report, or where the backend's
     * grid is sized by them */
    const int on_device = ctx->be->moe_plans_on_device &&
                          ctx->be->moe_plans_on_device(ctx->bctx, 0, &X->d, &W->d, &Y->d);
    PIT_TRY(ops_moe_route(ctx, bs, expert_ids, s.t, s.h, s.e, &idx, &max_entries,
                  report || !on_device ? &routed : NULL));
    pit_index_report(report, &idx, routed, 1, PIT_CHOICE_MOE);
    PIT_TRY(ctx->be->moe_matmul(ctx->bctx, bs, 0, &tile, &idx, max_entries, &X->d, &W->d,
                                &gates->d, &Y->d));
    ops_report_tile(report, &tile); /* the tile that ran */
    return PIT_SUCCESS;
}

/* The three products of the backward, each skipped when its output is NULL. */
static pit_status moe_backward_run(pit_context *ctx, void *bs, const moe_shape *s,
                                   const pit_index *idx, int32_t max_entries, const pit_tensor *X,
                                   const pit_tensor *gates, const pit_tensor *W,
                                   const pit_tensor *dY, pit_tensor *dX, pit_tensor *dW,
                                   pit_tensor *dgates)
{
    const pit_backend *be = ctx->be;
    pit_tile tile;
    PIT_TRY(pit_select_gathered(ctx->db, PIT_TILE_MOE, X->d.dtype, &tile));
    if (dX && s->n == 0)
        PIT_TRY(ops_zero(ctx, bs, &dX->d));
    else if (dX)
        PIT_TRY(be->moe_matmul(ctx->bctx, bs, 1, &tile, idx, max_entries, &dY->d, &W->d,
                               &gates->d, &dX->d));
    if (dW)
        PIT_TRY(be->moe_matmul(ctx->bctx, bs, 2, &tile, idx, max_entries, &X->d, &dW->d,
                               &gates->d, &dY->d));
    if (dgates)
        PIT_TRY(be->moe_matmul(ctx->bctx, bs, 3, &tile, idx, max_entries, &X->d, &W->d,
                               &dgates->d, &dY->d));
    return PIT_SUCCESS;
}

PIT_API pit_status pit_moe_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                    const pit_tensor *expert_ids, const pit_tensor *gates,
                                    const pit_tensor *W, const pit_tensor *dY, pit_tensor *dX,
                                    pit_tensor *dW, pit_tensor *dgates)
{
    static const char *const fn = "pit_moe_backward";
    void *bs;
    moe_shape s;
    PIT_TRY(ops_begin(ctx, stream, fn, &bs));
    PIT_TRY(check_moe_inputs(ctx, fn, X, expert_ids, gates, W, &s));
    PIT_TRY(ops_check_tensor(ctx, dY, fn, "dY", 2, 2));
    PIT_TRY(ops_check_same_dtype(X, dY, fn, "X", "dY"));
    PIT_TRY(ops_check_dim(dY, 0, s.t, fn, "dY"));
    PIT_TRY(ops_check_dim(dY, 1, s.n, fn, "dY"));
    const pit_tensor *in[5] = {X, expert_ids, gates, W, dY};
    const char *names[5] = {"X", "expert_ids", "gates", "W", "dY"};
    int64_t xshape[2] = {s.t, s.h}, wshape[3] = {s.e, s.h, s.n}, gshape[2] = {s.t, s.k};
    if (dX)
        PIT_TRY(ops_check_result(ctx, fn, dX, "dX", X->d.dtype, 2, xshape, in, names, 5));
    if (dW)
        PIT_TRY(ops_check_result(ctx, fn, dW, "dW", X->d.dtype, 3, wshape, in, names, 5));
    if (dgates)
        PIT_TRY(ops_check_result(ctx, fn, dgates, "dgates", PIT_F32, 2, gshape, in, names, 5));
    const pit_tensor *outs[3] = {dX, dW, dgates};
    const char *onames[3] = {"dX", "dW", "dgates"};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            PIT_TRY(ops_check_no_overlap(outs[i], outs[j], fn, onames[i], onames[j]));
    if (s.e == 0 && !dX && !dgates)
        return PIT_SUCCESS;
    pit_index idx;
    int32_t max_entries = 0;
    int64_t routed = 0;
    if (s.e > 0 && s.t > 0 && s.k > 0)
        PIT_TRY(ops_moe_route(ctx, bs, expert_ids, s.t, s.h, s.e, &idx, &max_entries, &routed));
    if (routed == 0) {
        /* Nothing routed: every gradient is zero. */
        for (int i = 0; i < 3; i++)
            if (outs[i])
                PIT_TRY(ops_zero(ctx, bs, &outs[i]->d));
        return PIT_SUCCESS;
    }
    return moe_backward_run(ctx, bs, &s, &idx, max_entries, X, gates, W, dY, dX, dW, dgates);
}

pit_status ops_moe_route(pit_context *ctx, void *bs, const pit_tensor *ids, int64_t t, int64_t h,
                         int64_t e, pit_index *idx, int32_t *max_entries, int64_t *routed)
{
    if (!ctx->be->moe_route || !ctx->be->moe_matmul)
        return ops_unsupported(ctx, !ctx->be->moe_route ? "moe_route" : "moe_matmul");
    pit_microtile tile = {1, (int32_t)(h > 0 ? h : 1), PIT_AXIS_M};
    PIT_TRY(pit_index_alloc(ctx, bs, "moe", tile, 1, e, t * ids->d.shape[1], idx));
    PIT_TRY(ctx->be->moe_route(ctx->bctx, bs, &ids->d, idx));
    *max_entries = -1;
    return routed ? pit_index_stats(ctx, bs, idx, max_entries, routed) : PIT_SUCCESS;
}
