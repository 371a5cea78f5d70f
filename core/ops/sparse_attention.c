/*
 * core/ops/sparse_attention.c - pit_sparse_attention, a wrapper of
 * pit_attention's call (attention_run.c) with an element mask and block x
 * block micro-tiles, and the path of backends without attention_ex: the
 * calls that reduce to attention_sparse. There one block index of the mask,
 * built on the device each call, serves the backend's fused kernel, or the
 * three steps core composes: SDDMM (only the allowed score blocks), the
 * sparse softmax, and P . V with P gathered along K by the same blocks (tile
 * bm = block, so a row block of P is one group of the index).
 */
#include <string.h>

#include "attention.h"
#include "choice.h"

static const char *const FN = "pit_sparse_attention";

static pit_status check_attention(pit_context *ctx, const pit_tensor *Q, const pit_tensor *K,
                                  const pit_tensor *V, const pit_tensor *mask,
                                  const pit_tensor *O, int32_t block)
{
    PIT_TRY(ops_check_tensor(ctx, Q, FN, "Q", 2, 3));
    int r = Q->d.rank;
    PIT_TRY(ops_check_tensor(ctx, K, FN, "K", r, r));
    PIT_TRY(ops_check_tensor(ctx, V, FN, "V", r, r));
    PIT_TRY(ops_check_output(ctx, O, FN, "O", r, r));
    PIT_TRY(ops_check_float(ctx, Q, FN, "Q"));
    PIT_TRY(ops_check_same_dtype(Q, K, FN, "Q", "K"));
    PIT_TRY(ops_check_same_dtype(Q, V, FN, "Q", "V"));
    PIT_TRY(ops_check_same_dtype(Q, O, FN, "Q", "O"));
    int64_t bh = ops_batch(&Q->d), l = ops_rows(&Q->d), d = ops_cols(&Q->d);
    int64_t dv = ops_cols(&V->d);
    if (r == 3) {
        PIT_TRY(ops_check_dim(K, 0, bh, FN, "K"));
        PIT_TRY(ops_check_dim(V, 0, bh, FN, "V"));
        PIT_TRY(ops_check_dim(O, 0, bh, FN, "O"));
    }
    PIT_TRY(ops_check_dim(K, -2, l, FN, "K"));
    PIT_TRY(ops_check_dim(K, -1, d, FN, "K"));
    PIT_TRY(ops_check_dim(V, -2, l, FN, "V"));
    PIT_TRY(ops_check_dim(O, -2, l, FN, "O"));
    PIT_TRY(ops_check_dim(O, -1, dv, FN, "O"));
    PIT_TRY(ops_check_mask(ctx, mask, FN, r, bh, l, l));
    if (block < 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: block %d must be > 0 (0: %d)", FN, block,
                         ATTENTION_DEFAULT_BLOCK);
    const pit_tensor *in[4] = {Q, K, V, mask};
    const char *names[4] = {"Q", "K", "V", "mask"};
    for (int i = 0; i < 4; i++)
        PIT_TRY(ops_check_no_overlap(O, in[i], FN, "O", names[i]));
    return PIT_SUCCESS;
}

/* The dense tile of P . V for the index's micro-tile (bm must equal the block). */
static pit_status pv_tile(pit_context *ctx, const pit_tdesc *V, const pit_index *idx,
                          pit_tile *tile)
{
    pit_problem p;
    memset(&p, 0, sizeof p);
    p.op = PIT_OP_BATCH_MATMUL;
    p.dtype = V->dtype;
    p.batch = ops_batch(V);
    p.m = ops_rows(V);
    p.n = ops_cols(V);
    p.k = ops_rows(V);
    p.sparse = PIT_SPARSE_A;
    return pit_select_fixed(ctx->db, &p, &idx->tile, tile);
}

/* sddmm -> softmax (in place) -> sparse P . V, all on one index. */
static pit_status compose(pit_context *ctx, void *bs, const pit_index *idx, int32_t max_entries,
                          const pit_tensor *Q, const pit_tensor *K, const pit_tensor *V,
                          const pit_tensor *mask, const pit_tensor *O, float scale,
                          pit_report *report)
{
    const pit_backend *be = ctx->be;
    if (!be->sddmm || !be->softmax_sparse || !be->matmul_sparse)
        return ops_unsupported(ctx, !be->sddmm ? "sddmm (for attention)"
                                    : !be->softmax_sparse ? "softmax_sparse (for attention)"
                                                          : "matmul_sparse (for attention)");
    int64_t bh = ops_batch(&Q->d), l = ops_rows(&Q->d);
    int64_t shape[3] = {bh, l, l};
    void *mem;
    PIT_TRY(pit_workspace_get(ctx, bs, "attention.S", (size_t)(bh * l * l) *
                              pit_dtype_size(Q->d.dtype), &mem));
    pit_tdesc S = ops_scratch_desc(mem, Q->d.dtype, 3, shape);
    pit_tdesc q = ops_view3(&Q->d, bh), k = ops_view3(&K->d, bh), v = ops_view3(&V->d, bh);
    pit_tdesc o = ops_view3(&O->d, bh);
    pit_tile tile;
    PIT_TRY(pv_tile(ctx, &V->d, idx, &tile));
    ops_report_tile(report, &tile);
    PIT_TRY(be->sddmm(ctx->bctx, bs, idx, &q, &k, &mask->d, &S));
    PIT_TRY(be->softmax_sparse(ctx->bctx, bs, idx, &S, &mask->d, &S, scale));
    if (pit_index_repeat(idx, bh) == 1)
        return be->matmul_sparse(ctx->bctx, bs, &tile, idx, max_entries, 0, &S, &v, &o);
    /* matmul_sparse reads batch b's groups at b * groups_per_batch: an index
     * shared by every batch (rank-2 mask) goes one batch at a time */
    for (int64_t b = 0; b < bh; b++) {
        pit_tdesc sb = S, vb = v, ob = o;
        sb.shape[0] = vb.shape[0] = ob.shape[0] = 1;
        sb.offset += (size_t)(b * S.strides[0]) * pit_dtype_size(S.dtype);
        vb.offset += (size_t)(b * v.strides[0]) * pit_dtype_size(v.dtype);
        ob.offset += (size_t)(b * o.strides[0]) * pit_dtype_size(o.dtype);
        PIT_TRY(be->matmul_sparse(ctx->bctx, bs, &tile, idx, max_entries, 0, &sb, &vb, &ob));
    }
    return PIT_SUCCESS;
}

/* The backend's fused kernel over an index of the mask at block x block.
 * The kernel loops over counts[g] itself and writes zero rows for an empty
 * group (every key masked: O = 0), so nothing is read back between detection
 * and the kernel. Blocks whose mask is all non-zero come marked (flag_full)
 * and skip the kernel's mask loads; only attention_sparse ever sees this
 * index. PIT_ERR_UNSUPPORTED: the backend cannot fuse this shape. */
static pit_status attend_fused(pit_context *ctx, void *bs, const pit_tensor *Q, const pit_tensor *K,
                               const pit_tensor *V, const pit_tensor *mask, pit_tensor *O,
                               float scale, pit_microtile t, int64_t bh, pit_report *report)
{
    const pit_backend *be = ctx->be;
    pit_index idx;
    pit_tdesc view;
    PIT_TRY(pit_index_prepare(ctx, bs, "attention", &mask->d, bh, t, 1, &idx, &view));
    pit_tdesc q = ops_view3(&Q->d, bh), k = ops_view3(&K->d, bh), v = ops_view3(&V->d, bh);
    pit_tdesc o = ops_view3(&O->d, bh);
    pit_status s = PIT_ERR_UNSUPPORTED;
    if (be->attention_detect) /* the backend may overlap the two */
        s = be->attention_detect(ctx->bctx, bs, &view, &idx, &q, &k, &v, &mask->d, &o, scale);
    if (s == PIT_ERR_UNSUPPORTED) {
        pit_clear_error();
        PIT_TRY(be->detect(ctx->bctx, bs, &view, &idx, 1));
        s = be->attention_sparse(ctx->bctx, bs, &idx, &q, &k, &v, &mask->d, &o, scale);
    }
    if (s != PIT_SUCCESS || !report)
        return s;
    /* after the launch, so the kernel is already queued; this read waits for
     * it (only calls that ask for a report) */
    int32_t total = 0;
    PIT_TRY(be->mem_read(ctx->bctx, bs, idx.total, 0, &total, sizeof total));
    pit_index_report(report, &idx, total, pit_index_repeat(&idx, bh), PIT_CHOICE_ATTENTION);
    return PIT_SUCCESS;
}

/* The three steps over an index of the mask at block x block (no marks). */
static pit_status attend_composed(pit_context *ctx, void *bs, const pit_tensor *Q,
                                  const pit_tensor *K, const pit_tensor *V, const pit_tensor *mask,
                                  pit_tensor *O, float scale, pit_microtile t, int64_t bh,
                                  pit_report *report)
{
    pit_index idx;
    int32_t max_entries;
    int64_t nonzero;
    PIT_TRY(pit_index_pattern(ctx, bs, "attention", &mask->d, bh, t, 0, &idx));
    PIT_TRY(pit_index_stats(ctx, bs, &idx, &max_entries, &nonzero));
    pit_index_report(report, &idx, nonzero, pit_index_repeat(&idx, bh), PIT_CHOICE_ATTENTION);
    if (nonzero == 0) {
        pit_log_debug("%s: every key is masked: O set to zero", FN);
        return ops_zero(ctx, bs, &O->d);
    }
    return compose(ctx, bs, &idx, max_entries, Q, K, V, mask, O, scale, report);
}

/* The fused kernel where the backend has one and takes the shape; else,
 * with compose, core composes the three steps (the one place attention is
 * composed), and without it the fused kernel's PIT_ERR_UNSUPPORTED. */
static pit_status attend(pit_context *ctx, void *bs, const pit_tensor *Q, const pit_tensor *K,
                         const pit_tensor *V, const pit_tensor *mask, pit_tensor *O, float scale,
                         int32_t block, int64_t bh, int compose, pit_report *report)
{
    pit_microtile t = {block, block, PIT_AXIS_K};
    if (ctx->be->attention_sparse) {
        pit_status s = attend_fused(ctx, bs, Q, K, V, mask, O, scale, t, bh, report);
        if (s != PIT_ERR_UNSUPPORTED || !compose)
            return s;
        pit_log_debug("%s: no fused kernel for block %d (%s): composing", FN, block,
                      pit_last_error());
        pit_clear_error();
        if (report)
            memset(report, 0, sizeof *report);
    }
    if (!compose)
        return pit_error(PIT_ERR_UNSUPPORTED, "%s: backend %s has no fused attention kernel", FN,
                         ctx->be->name);
    return attend_composed(ctx, bs, Q, K, V, mask, O, scale, t, bh, report);
}

/* ---- calls that reduce to attention_sparse ------------------------------------ */

/* How a reduced call is cut into calls of attention_sparse's rank-3 views:
 * one call (batch and heads merged into one dimension), one a batch ([H, L,
 * cols] views), or one a (batch, head) ([L, cols] views); the coarsest the
 * views and the mask allow. */
typedef enum attention_cut { CUT_NONE, CUT_BATCH, CUT_HEAD } attention_cut;

/* The part of a rank-4 view [B, H, L, cols] a cut gives for (b, h). */
static pit_tdesc slice(const pit_tdesc *d, attention_cut c, int64_t b, int64_t h)
{
    pit_tdesc v = *d;
    const int64_t s0 = d->shape[0] > 1 ? d->strides[0] : 0, s1 = d->shape[1] > 1 ? d->strides[1] : 0;
    if (c == CUT_NONE) {
        v.rank = 3;
        v.shape[0] = d->shape[0] * d->shape[1];
        v.strides[0] = d->shape[1] > 1 ? s1 : s0;
    } else {
        v.offset += (size_t)(b * s0 + (c == CUT_HEAD ? h * s1 : 0)) * pit_dtype_size(d->dtype);
        v.rank = c == CUT_BATCH ? 3 : 2;
        v.shape[0] = d->shape[1];
        v.strides[0] = d->strides[1];
    }
    const int first = v.rank - 2; /* L and cols follow */
    v.shape[first] = d->shape[2];
    v.strides[first] = d->strides[2];
    v.shape[first + 1] = d->shape[3];
    v.strides[first + 1] = 1;
    for (int i = v.rank; i < PIT_MAX_RANK; i++)
        v.shape[i] = v.strides[i] = 0;
    return v;
}

/* The mask of the part (b, h): [n, L, L] where it differs along the part's
 * batch dimension, else [L, L] (indexed once for the part). */
static pit_tdesc mask_slice(const pit_tdesc *m, attention_cut c, int64_t b, int64_t h)
{
    ops_mask_lead l = ops_attention_lead(m);
    pit_tdesc v = ops_attention_mask_view3(m);
    if (c != CUT_NONE) {
        v.offset += (size_t)(b * l.batch_stride + (c == CUT_HEAD ? h * l.head_stride : 0)) *
                    pit_dtype_size(m->dtype);
        v.shape[0] = c == CUT_BATCH ? l.heads : 1;
        v.strides[0] = l.head_stride;
    }
    if (v.shape[0] > 1)
        return v;
    v.rank = 2;
    v.shape[0] = v.shape[1];
    v.strides[0] = v.strides[1];
    v.shape[1] = v.shape[2];
    v.strides[1] = 1;
    v.shape[2] = v.strides[2] = 0;
    return v;
}

static int cut_fits(const ops_attention *a, attention_cut c)
{
    const pit_tdesc *all[4] = {&a->Q, &a->K, &a->V, &a->O};
    for (int i = 0; i < 4; i++) {
        const pit_tdesc *d = all[i];
        if (c == CUT_NONE && d->shape[0] > 1 && d->shape[1] > 1 &&
            d->strides[0] != d->shape[1] * d->strides[1])
            return 0; /* batch and heads do not merge */
        pit_tdesc v = slice(d, c, 0, 0);
        if (!pit_tdesc_row_major(&v))
            return 0;
    }
    if (c != CUT_NONE)
        return 1;
    ops_mask_lead l = ops_attention_lead(a->mask);
    const int64_t sets = l.batch * l.heads;
    return sets == 1 || sets == a->Q.shape[0] * a->Q.shape[1];
}

/* What attention_sparse lacks for this call, or NULL. */
static const char *beyond_attention_sparse(const ops_attention *a)
{
    if (a->causal)
        return "the causal bound (pit_attention_options.causal)";
    if (a->window_left >= 0 || a->window_right >= 0)
        return "a window (pit_attention_options.window_left / window_right)";
    if (a->block_mask)
        return "a block mask (pit_attention_options.block_mask)";
    if (a->lse)
        return "the log-sum-exp output (lse)";
    if (!a->mask)
        return "attention without an element mask";
    if (a->Q.shape[2] != a->K.shape[2])
        return "a query length other than the key length (Lq != Lk)";
    if (a->Q.shape[1] != a->K.shape[1])
        return "grouped-query attention (Hq != Hkv)";
    if (a->tile.rows != a->tile.cols)
        return "a micro-tile that is not square";
    return NULL;
}

int ops_attention_reduces(const ops_attention *a)
{
    return beyond_attention_sparse(a) == NULL;
}

pit_status ops_attention_reducible(const pit_context *ctx, const ops_attention *a)
{
    const char *what = beyond_attention_sparse(a);
    if (!what)
        return PIT_SUCCESS;
    return pit_error(PIT_ERR_UNSUPPORTED, "%s: backend %s does not implement %s (it has no "
                     "attention_ex entry; its attention takes an element mask alone)", a->fn,
                     ctx->be->name, what);
}

/* A part's report added to the call's: counts over every part. */
static void add_report(pit_report *to, const pit_report *part, int first)
{
    if (first) {
        *to = *part;
        return;
    }
    to->nonzero_tiles += part->nonzero_tiles;
    to->total_tiles += part->total_tiles;
    to->skipped_compute &= part->skipped_compute;
}

/* One part: the fused kernel or the composition, on rank-3 (or 2) views. */
static pit_status attend_part(pit_context *ctx, void *bs, const ops_attention *a, attention_cut c,
                              int64_t b, int64_t h, int32_t block, int compose, pit_report *report)
{
    pit_tdesc q = slice(&a->Q, c, b, h), k = slice(&a->K, c, b, h), v = slice(&a->V, c, b, h);
    pit_tdesc o = slice(&a->O, c, b, h), m = mask_slice(a->mask, c, b, h);
    pit_tensor Q = ops_tensor_of(ctx, &q), K = ops_tensor_of(ctx, &k), V = ops_tensor_of(ctx, &v);
    pit_tensor O = ops_tensor_of(ctx, &o), M = ops_tensor_of(ctx, &m);
    return attend(ctx, bs, &Q, &K, &V, &M, &O, a->scale, block, ops_batch(&q), compose, report);
}

pit_status ops_attention_reduced(pit_context *ctx, void *bs, const ops_attention *a,
                                 int32_t block, int compose, pit_report *report)
{
    const attention_cut c = cut_fits(a, CUT_NONE) ? CUT_NONE
                            : cut_fits(a, CUT_BATCH) ? CUT_BATCH : CUT_HEAD;
    const int64_t nb = c == CUT_NONE ? 1 : a->Q.shape[0], nh = c == CUT_HEAD ? a->Q.shape[1] : 1;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++) {
            pit_report part;
            PIT_TRY(attend_part(ctx, bs, a, c, b, h, block, compose, report ? &part : NULL));
            if (report)
                add_report(report, &part, b == 0 && h == 0);
        }
    return PIT_SUCCESS;
}

/* ---- pit_sparse_attention ------------------------------------------------------ */

/* [1, n, rows, cols] of a rank-3 [n, rows, cols] (or rank-2) tensor. */
static pit_tdesc heads_view4(const pit_tdesc *d)
{
    pit_tdesc v = ops_view3(d, ops_batch(d));
    for (int i = 3; i > 0; i--) {
        v.shape[i] = v.shape[i - 1];
        v.strides[i] = v.strides[i - 1];
    }
    v.rank = 4;
    v.shape[0] = 1;
    v.strides[0] = v.shape[1] * v.strides[1];
    if (d->rank == 2)
        v.strides[1] = v.shape[2] * v.strides[2];
    return v;
}

PIT_API pit_status pit_sparse_attention(pit_context *ctx, pit_stream *stream, const pit_tensor *Q,
                                        const pit_tensor *K, const pit_tensor *V,
                                        const pit_tensor *mask, pit_tensor *O, float scale,
                                        int32_t block, pit_report *report)
{
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, FN, report, &bs));
    PIT_TRY(check_attention(ctx, Q, K, V, mask, O, block));
    /* [BH, L, D] is one batch of BH heads; a [BH, L, L] mask one per head */
    ops_attention a = {
        .fn = FN, .Q = heads_view4(&Q->d), .K = heads_view4(&K->d), .V = heads_view4(&V->d),
        .O = heads_view4(&O->d), .mask = &mask->d, .scale = scale, .window_left = -1,
        .window_right = -1, .tile = {block, block, PIT_AXIS_K},
    };
    return ops_attention_run(ctx, bs, &a, report);
}
