/*
 * core/ops/attention_run.c - one validated attention call (attention.h):
 * which key blocks each query block visits, and which backend entry runs it.
 *
 * Core decides the index the kernel walks, from the structure the options
 * give and the masks:
 *  - a block_mask is its own index: its non-zero elements, detected at 1 x 1,
 *    are the blocks of block_q x block_k that may be visited; an element
 *    mask given too is read inside them;
 *  - an element mask alone goes first, where the backend has them, to
 *    key-column micro-tiles (64 x 1: each query block's allowed keys
 *    gathered, the backend's own detection; automatic or hinted 64 x 1),
 *    else is detected at the micro-tile (the hint, else 64 x 64), as
 *    pit_sparse_attention always did;
 *  - neither: no index, every key block.
 * The causal bound and the window never read a mask: the backend skips the
 * key blocks that lie outside them for a query block and masks the rest
 * from coordinates. Nothing is read back before the kernel.
 */
#include <string.h>

#include "attention.h"
#include "choice.h"

static int64_t blocks_of(int64_t n, int32_t side)
{
    return (n + side - 1) / side;
}

/* The backend's rank-4 view of a mask: [B, Hq, Lq, Lk], stride 0 on the
 * dimensions it is shared along. */
static pit_tdesc mask_view4(const pit_tdesc *m, const pit_tdesc *Q)
{
    ops_mask_lead l = ops_attention_lead(m);
    pit_tdesc v = *m;
    v.rank = 4;
    v.shape[0] = Q->shape[0];
    v.shape[1] = Q->shape[1];
    v.shape[2] = m->shape[m->rank - 2];
    v.shape[3] = m->shape[m->rank - 1];
    v.strides[0] = l.batch_stride;
    v.strides[1] = l.head_stride;
    v.strides[2] = m->strides[m->rank - 2];
    v.strides[3] = 1;
    return v;
}

/* Detects a pattern (mask or block mask) at `tile` into an index of one set
 * of groups per batch and head it holds; the group strides go to d. */
static pit_status index_pattern(pit_context *ctx, void *bs, const char *key,
                                const pit_tdesc *pattern, pit_microtile tile, int flag_full,
                                pit_index *idx, pit_attention_desc *d)
{
    ops_mask_lead l = ops_attention_lead(pattern);
    pit_tdesc view = ops_attention_mask_view3(pattern);
    int64_t gpb = blocks_of(view.shape[1], tile.rows);
    PIT_TRY(pit_index_alloc(ctx, bs, key, tile, l.batch * l.heads, gpb,
                            blocks_of(view.shape[2], tile.cols), idx));
    idx->flag_full = flag_full;
    d->idx_head_stride = l.heads > 1 ? gpb : 0;
    d->idx_batch_stride = l.batch > 1 ? l.heads * gpb : 0;
    return ctx->be->detect(ctx->bctx, bs, &view, idx, 1);
}

/* Key blocks of one (batch, head) that the causal bound and window leave. */
static int64_t band_blocks(const pit_attention_desc *d)
{
    const int64_t lq = d->Q.shape[2], lk = d->K.shape[2], diag = lk - lq;
    int64_t n = 0;
    for (int64_t q0 = 0; q0 < lq; q0 += d->tile.rows) {
        int64_t q1 = (q0 + d->tile.rows < lq ? q0 + d->tile.rows : lq) - 1;
        int64_t lo = d->window_left >= 0 ? q0 + diag - d->window_left : 0;
        int64_t hi = d->window_right >= 0 ? q1 + diag + d->window_right + 1 : lk;
        lo = lo > 0 ? lo : 0;
        hi = hi < lk ? hi : lk;
        if (hi > lo)
            n += (hi - 1) / d->tile.cols - lo / d->tile.cols + 1;
    }
    return n;
}

/* After the kernel is queued: the index's count (a read that waits for it),
 * or the blocks the bounds leave when there is no index. */
static pit_status report_ex(pit_context *ctx, void *bs, const pit_attention_desc *d,
                            pit_report *report)
{
    if (!report)
        return PIT_SUCCESS;
    const int64_t heads = d->Q.shape[0] * d->Q.shape[1];
    if (d->idx) {
        int32_t total = 0;
        PIT_TRY(ctx->be->mem_read(ctx->bctx, bs, d->idx->total, 0, &total, sizeof total));
        int64_t sets = d->idx->groups_per_batch > 0
                           ? d->idx->groups / d->idx->groups_per_batch : 1;
        pit_index_report(report, d->idx, total, heads / (sets > 0 ? sets : 1),
                         PIT_CHOICE_ATTENTION);
        return PIT_SUCCESS;
    }
    pit_index band;
    memset(&band, 0, sizeof band);
    band.tile = d->tile;
    band.groups = band.groups_per_batch = (int32_t)blocks_of(d->Q.shape[2], d->tile.rows);
    band.capacity = (int32_t)blocks_of(d->K.shape[2], d->tile.cols);
    pit_index_report(report, &band, band_blocks(d), heads, PIT_CHOICE_ATTENTION);
    return PIT_SUCCESS;
}

/* The descriptor of a call and the index core builds for it (file
 * comment), for the forward and the backward alike. mask4 and idx hold what
 * d points to. */
static pit_status describe_call(pit_context *ctx, void *bs, const ops_attention *a,
                                pit_microtile tile, int index_mask, pit_attention_desc *d,
                                pit_tdesc *mask4, pit_index *idx)
{
    memset(d, 0, sizeof *d);
    d->Q = a->Q;
    d->K = a->K;
    d->V = a->V;
    d->O = a->O;
    d->lse = a->lse;
    d->scale = a->scale;
    d->window_left = a->window_left;
    d->window_right = a->window_right;
    d->tile = tile;
    /* no key at all: nothing to index, every row is 0 (lse -inf) */
    const int keys = a->K.shape[2] > 0;
    if (a->mask && keys) {
        *mask4 = mask_view4(a->mask, &a->Q);
        d->mask = mask4;
    }
    if (a->block_mask && keys) {
        PIT_TRY(index_pattern(ctx, bs, "attention.block", a->block_mask,
                              (pit_microtile){1, 1, PIT_AXIS_K}, 0, idx, d));
        idx->tile = (pit_microtile){a->block_q, a->block_k, PIT_AXIS_K};
        d->idx = idx;
    } else if (a->mask && keys && index_mask) {
        /* marks of all-allowed blocks spare their mask loads (backend.h) */
        PIT_TRY(index_pattern(ctx, bs, "attention", a->mask, tile, 1, idx, d));
        d->idx = idx;
    }
    if (d->idx)
        d->tile = d->idx->tile;
    return PIT_SUCCESS;
}

static pit_microtile tile_of(const ops_attention *a)
{
    if (a->tile.rows > 0)
        return (pit_microtile){a->tile.rows, a->tile.cols, PIT_AXIS_K};
    return (pit_microtile){ATTENTION_DEFAULT_BLOCK, ATTENTION_DEFAULT_BLOCK, PIT_AXIS_K};
}

/* The backend's attention_ex with the index core builds. */
static pit_status attend_ex(pit_context *ctx, void *bs, const ops_attention *a,
                            pit_microtile tile, pit_report *report)
{
    pit_attention_desc d;
    pit_tdesc mask4;
    pit_index idx;
    PIT_TRY(describe_call(ctx, bs, a, tile, 1, &d, &mask4, &idx));
    PIT_TRY(ctx->be->attention_ex(ctx->bctx, bs, &d));
    return report_ex(ctx, bs, &d, report);
}

/* The backend's key-column micro-tiles of the element mask (attention_columns),
 * no index built by core; the report counts the (query tile, key) pairs. */
static pit_status attend_columns(pit_context *ctx, void *bs, const ops_attention *a,
                                 pit_report *report)
{
    const pit_microtile tile = {ATTENTION_DEFAULT_BLOCK, 1, PIT_AXIS_K};
    pit_attention_desc d;
    pit_tdesc mask4;
    int64_t listed = 0;
    PIT_TRY(describe_call(ctx, bs, a, tile, 0, &d, &mask4, NULL));
    PIT_TRY(ctx->be->attention_columns(ctx->bctx, bs, &d, report ? &listed : NULL));
    if (report) {
        pit_index cols;
        memset(&cols, 0, sizeof cols);
        cols.tile = tile;
        cols.groups = (int32_t)blocks_of(a->Q.shape[2], tile.rows);
        cols.capacity = (int32_t)a->K.shape[2];
        pit_index_report(report, &cols, listed, a->Q.shape[0] * a->Q.shape[1],
                         PIT_CHOICE_ATTENTION_COLUMNS);
        report->nonzero_tiles = listed;
        report->skipped_compute = listed == 0;
    }
    return PIT_SUCCESS;
}

/* Whether the call goes to key-column micro-tiles first: an element mask
 * alone (no block mask: its blocks are the index), the tile automatic or
 * hinted R x 1, and a backend that has them. */
static int columns_first(const pit_context *ctx, const ops_attention *a, pit_microtile tile)
{
    return ctx->be->attention_columns && a->mask && !a->block_mask && a->K.shape[2] > 0 &&
           ((a->tile.rows == 0 && tile.rows == ATTENTION_DEFAULT_BLOCK) || tile.cols == 1);
}

static pit_status attend_once(pit_context *ctx, void *bs, const ops_attention *a,
                              pit_microtile tile, pit_report *report)
{
    if (!ctx->be->attention_ex)
        return ops_attention_reduced(ctx, bs, a, tile.rows, 1, report);
    if (columns_first(ctx, a, tile)) {
        pit_status s = attend_columns(ctx, bs, a, report);
        if (s != PIT_ERR_UNSUPPORTED)
            return s;
        pit_clear_error();
        if (report)
            memset(report, 0, sizeof *report);
    }
    /* A call the fused kernel of pit_sparse_attention takes keeps it where
     * that kernel detects the mask's blocks itself (attention_detect),
     * overlapping detection with attention: attention_ex is given the index
     * core builds first. Its refusal (a shape that kernel lacks) goes on to
     * attention_ex, never to a composition that stores scores. */
    if (ctx->be->attention_detect && ops_attention_reduces(a) && tile.rows == tile.cols) {
        pit_status s = ops_attention_reduced(ctx, bs, a, tile.rows, 0, report);
        if (s != PIT_ERR_UNSUPPORTED)
            return s;
        pit_clear_error();
        if (report)
            memset(report, 0, sizeof *report);
    }
    return attend_ex(ctx, bs, a, tile, report);
}

pit_status ops_attention_run(pit_context *ctx, void *bs, const ops_attention *a,
                             pit_report *report)
{
    const int64_t rows = a->Q.shape[0] * a->Q.shape[1] * a->Q.shape[2];
    if (rows == 0 || (a->O.shape[3] == 0 && !a->lse))
        return PIT_SUCCESS;
    if (!ctx->be->attention_ex)
        PIT_TRY(ops_attention_reducible(ctx, a));
    pit_microtile t = tile_of(a);
    /* The micro-tile an element mask is indexed in is not part of the
     * result: a finer index of the same mask is exact. When the device
     * cannot stage a block this large (local memory), halve it. */
    for (;;) {
        pit_status s = attend_once(ctx, bs, a, t, report);
        if (s != PIT_ERR_UNSUPPORTED || !a->mask || a->block_mask ||
            (t.rows <= 16 && t.cols <= 16))
            return s;
        pit_log_debug("%s: micro-tile %dx%d refused (%s): halving it", a->fn, t.rows, t.cols,
                      pit_last_error());
        pit_clear_error();
        if (report)
            memset(report, 0, sizeof *report);
        t.rows = t.rows > 16 ? t.rows / 2 : t.rows;
        t.cols = t.cols > 16 ? t.cols / 2 : t.cols;
    }
}

static int64_t elements(const pit_tdesc *t)
{
    return t ? pit_tensor_numel(t) : 0;
}

pit_status ops_attention_backward_run(pit_context *ctx, void *bs, const ops_attention *a,
                                      const pit_tdesc *dO, const pit_tdesc *dQ,
                                      const pit_tdesc *dK, const pit_tdesc *dV)
{
    if (!ctx->be->attention_backward)
        return ops_unsupported(ctx, "attention_backward (pit_attention_backward)");
    /* a gradient without an element is not asked for */
    dQ = elements(dQ) > 0 ? dQ : NULL;
    dK = elements(dK) > 0 ? dK : NULL;
    dV = elements(dV) > 0 ? dV : NULL;
    if (!dQ && !dK && !dV)
        return PIT_SUCCESS;
    pit_attention_desc d;
    pit_tdesc mask4;
    pit_index idx;
    PIT_TRY(describe_call(ctx, bs, a, tile_of(a), 1, &d, &mask4, &idx));
    return ctx->be->attention_backward(ctx->bctx, bs, &d, dO, dQ, dK, dV);
}
