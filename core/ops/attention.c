/*
 * core/ops/attention.c - pit_attention: its options and their checks. The
 * call itself runs in attention_run.c.
 */
#include <math.h>
#include <string.h>

#include "attention.h"

static const char *const FN = "pit_attention";
static const char *const BFN = "pit_attention_backward";

PIT_API pit_attention_options pit_attention_options_default(void)
{
    pit_attention_options o;
    memset(&o, 0, sizeof o);
    o.window_left = -1;
    o.window_right = -1;
    o.microtile.axis = PIT_AXIS_AUTO;
    return o;
}

/* ---- masks' leading dimensions ------------------------------------------------ */

ops_mask_lead ops_attention_lead(const pit_tdesc *m)
{
    ops_mask_lead l = {1, 1, 0, 0};
    if (m->rank >= 3) {
        l.heads = m->shape[m->rank - 3];
        l.head_stride = l.heads > 1 ? m->strides[m->rank - 3] : 0;
    }
    if (m->rank == 4) {
        l.batch = m->shape[0];
        l.batch_stride = l.batch > 1 ? m->strides[0] : 0;
    }
    return l;
}

pit_tdesc ops_attention_mask_view3(const pit_tdesc *m)
{
    ops_mask_lead l = ops_attention_lead(m);
    pit_tdesc v = ops_view3(m, l.batch * l.heads);
    v.strides[0] = l.heads > 1 ? l.head_stride : l.batch_stride;
    return v;
}

/* ---- checks ------------------------------------------------------------------ */

typedef struct attn_dims {
    int64_t b, hq, hkv, lq, lk, d, dv;
} attn_dims;

static pit_status check_operands(const char *fn, pit_context *ctx, const pit_tensor *Q,
                                 const pit_tensor *K, const pit_tensor *V, const pit_tensor *O,
                                 attn_dims *s)
{
    PIT_TRY(ops_check_view(ctx, Q, fn, "Q", 4, 4));
    PIT_TRY(ops_check_view(ctx, K, fn, "K", 4, 4));
    PIT_TRY(ops_check_view(ctx, V, fn, "V", 4, 4));
    PIT_TRY(ops_check_view(ctx, O, fn, "O", 4, 4));
    PIT_TRY(ops_check_float(ctx, Q, fn, "Q"));
    PIT_TRY(ops_check_same_dtype(Q, K, fn, "Q", "K"));
    PIT_TRY(ops_check_same_dtype(Q, V, fn, "Q", "V"));
    PIT_TRY(ops_check_same_dtype(Q, O, fn, "Q", "O"));
    *s = (attn_dims){Q->d.shape[0], Q->d.shape[1], K->d.shape[1], Q->d.shape[2],
                     K->d.shape[2], Q->d.shape[3], V->d.shape[3]};
    PIT_TRY(ops_check_dim(K, 0, s->b, fn, "K"));
    PIT_TRY(ops_check_dim(K, 3, s->d, fn, "K"));
    PIT_TRY(ops_check_dim(V, 0, s->b, fn, "V"));
    PIT_TRY(ops_check_dim(V, 1, s->hkv, fn, "V"));
    PIT_TRY(ops_check_dim(V, 2, s->lk, fn, "V"));
    PIT_TRY(ops_check_dim(O, 0, s->b, fn, "O"));
    PIT_TRY(ops_check_dim(O, 1, s->hq, fn, "O"));
    PIT_TRY(ops_check_dim(O, 2, s->lq, fn, "O"));
    PIT_TRY(ops_check_dim(O, 3, s->dv, fn, "O"));
    if (s->hkv == 0 ? s->hq != 0 : s->hq % s->hkv != 0)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: Q's %lld heads are not a multiple of K and "
                         "V's %lld heads (grouped-query attention needs Hq = n x Hkv)", fn,
                         (long long)s->hq, (long long)s->hkv);
    return PIT_SUCCESS;
}

static pit_status check_options(const char *fn, const pit_attention_options *o)
{
    if (!isfinite(o->scale))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: scale %g is not finite", fn,
                         (double)o->scale);
    if (o->causal != 0 && o->causal != 1)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: causal is %d; 0 or 1", fn, o->causal);
    if (o->window_left < -1 || o->window_right < -1)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: window_left %d, window_right %d: each "
                         "must be >= 0, or -1 for no bound", fn, o->window_left, o->window_right);
    if (o->block_mask ? o->block_q < 1 || o->block_k < 1 : o->block_q != 0 || o->block_k != 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: block_q %d, block_k %d: both > 0 with a "
                         "block_mask, both 0 without", fn, o->block_q, o->block_k);
    const pit_microtile *t = &o->microtile;
    if (t->rows < 0 || t->cols < 0 || (t->rows == 0) != (t->cols == 0) ||
        (t->axis != PIT_AXIS_AUTO && t->axis != PIT_AXIS_K))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: micro-tile %dx%d (axis %d): rows and "
                         "cols both > 0, or both 0 for automatic; axis AUTO or K", fn, t->rows,
                         t->cols, (int)t->axis);
    return PIT_SUCCESS;
}

/* A leading dimension of a mask: the call's extent, or 1 (every one). */
static pit_status check_lead_dim(const char *fn, const pit_tensor *m, const char *name, int dim,
                                 int64_t want, const char *what)
{
    int64_t got = m->d.shape[dim];
    if (got == want || got == 1)
        return PIT_SUCCESS;
    return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: dimension %d of '%s' is %lld; %s = %lld or 1 "
                     "expected", fn, dim, name, (long long)got, what, (long long)want);
}

/* mask or block_mask: a pattern dtype, rank 2..4 with leading dimensions of
 * the heads and batch (or 1), last two rows x cols, and a batch and head that
 * merge into one dimension (the index is built on a rank-3 view). */
static pit_status check_pattern(const char *fn, pit_context *ctx, const pit_tensor *m,
                                const char *name, const attn_dims *s, int64_t rows, int64_t cols)
{
    PIT_TRY(ops_check_tensor(ctx, m, fn, name, 2, 4));
    pit_dtype dt = m->d.dtype;
    if (dt != PIT_F32 && dt != PIT_F16 && dt != PIT_BF16 && dt != PIT_I32 && dt != PIT_U8)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: '%s' is %s (f32, f16, bf16, i32 or u8)",
                         fn, name, pit_dtype_name(dt));
    int r = m->d.rank;
    if (r >= 3)
        PIT_TRY(check_lead_dim(fn, m, name, r - 3, s->hq, "Hq"));
    if (r == 4)
        PIT_TRY(check_lead_dim(fn, m, name, 0, s->b, "B"));
    PIT_TRY(ops_check_dim(m, r - 2, rows, fn, name));
    PIT_TRY(ops_check_dim(m, r - 1, cols, fn, name));
    ops_mask_lead l = ops_attention_lead(&m->d);
    if (l.batch > 1 && l.heads > 1 && l.batch_stride != l.heads * l.head_stride)
        return pit_error(PIT_ERR_BAD_STRIDES, "%s: '%s' has batch stride %lld and head stride "
                         "%lld; the batch stride must be %lld heads x the head stride", fn, name,
                         (long long)l.batch_stride, (long long)l.head_stride,
                         (long long)l.heads);
    return PIT_SUCCESS;
}

static pit_status check_lse(const char *fn, pit_context *ctx, const pit_tensor *lse,
                            const attn_dims *s)
{
    PIT_TRY(ops_check_view(ctx, lse, fn, "lse", 3, 3));
    PIT_TRY(ops_check_dtype(lse, PIT_F32, fn, "lse"));
    PIT_TRY(ops_check_dim(lse, 0, s->b, fn, "lse"));
    PIT_TRY(ops_check_dim(lse, 1, s->hq, fn, "lse"));
    return ops_check_dim(lse, 2, s->lq, fn, "lse");
}

/* The forward's outputs, O and lse: writable, overlapping no input and not
 * each other. */
static pit_status check_outputs(const pit_tensor *Q, const pit_tensor *K, const pit_tensor *V,
                                const pit_tensor *O, const pit_attention_options *o,
                                const pit_tensor *lse)
{
    PIT_TRY(pit_tensor_check_writable(O, FN, "O"));
    PIT_TRY(pit_tensor_check_writable(lse, FN, "lse"));
    const pit_tensor *in[5] = {Q, K, V, o->mask, o->block_mask};
    const char *names[5] = {"Q", "K", "V", "mask", "block_mask"};
    for (int i = 0; i < 5; i++) {
        PIT_TRY(ops_check_no_overlap(O, in[i], FN, "O", names[i]));
        PIT_TRY(ops_check_no_overlap(lse, in[i], FN, "lse", names[i]));
    }
    return ops_check_no_overlap(lse, O, FN, "lse", "O");
}

static int64_t blocks_of(int64_t n, int32_t side)
{
    return (n + side - 1) / side;
}

/* Operands, options, masks and lse, as inputs (the forward's outputs are
 * check_outputs'). */
static pit_status check_attention(const char *fn, pit_context *ctx, const pit_tensor *Q,
                                  const pit_tensor *K, const pit_tensor *V, const pit_tensor *O,
                                  const pit_attention_options *o, const pit_tensor *lse,
                                  attn_dims *s)
{
    PIT_TRY(check_operands(fn, ctx, Q, K, V, O, s));
    PIT_TRY(check_options(fn, o));
    if (o->mask)
        PIT_TRY(check_pattern(fn, ctx, o->mask, "mask", s, s->lq, s->lk));
    if (o->block_mask)
        PIT_TRY(check_pattern(fn, ctx, o->block_mask, "block_mask", s,
                              blocks_of(s->lq, o->block_q), blocks_of(s->lk, o->block_k)));
    if (lse)
        PIT_TRY(check_lse(fn, ctx, lse, s));
    return PIT_SUCCESS;
}

/* ---- the call ---------------------------------------------------------------- */

/* causal is a right bound of 0 on the aligned diagonal, never looser than a
 * window's (window_right >= 0) */
static int64_t right_bound(const pit_attention_options *o)
{
    return o->causal ? 0 : o->window_right;
}

/* The validated call of pit_attention's arguments. */
static ops_attention call_of(const pit_tensor *Q, const pit_tensor *K, const pit_tensor *V,
                             const pit_tensor *O, const pit_attention_options o,
                             const pit_tensor *lse, const attn_dims *s)
{
    ops_attention a = {
        .fn = FN, .Q = Q->d, .K = K->d, .V = V->d, .O = O->d,
        .mask = o.mask ? &o.mask->d : NULL,
        .block_mask = o.block_mask ? &o.block_mask->d : NULL,
        .lse = lse ? &lse->d : NULL,
        .block_q = o.block_q, .block_k = o.block_k,
        /* 1/sqrt(D); a head dimension of 0 scores every key 0 whatever the scale */
        .scale = o.scale != 0.0f ? o.scale : s->d > 0 ? 1.0f / sqrtf((float)s->d) : 1.0f,
        .causal = o.causal,
        .window_left = o.window_left,
        .window_right = right_bound(&o),
        .tile = o.microtile,
    };
    return a;
}

PIT_API pit_status pit_attention(pit_context *ctx, pit_stream *stream, const pit_tensor *Q,
                                 const pit_tensor *K, const pit_tensor *V, pit_tensor *O,
                                 const pit_attention_options *opt, pit_tensor *lse,
                                 pit_report *report)
{
    void *bs;
    PIT_TRY(ops_begin_report(ctx, stream, FN, report, &bs));
    const pit_attention_options o = opt ? *opt : pit_attention_options_default();
    attn_dims s;
    PIT_TRY(check_attention(FN, ctx, Q, K, V, O, &o, lse, &s));
    PIT_TRY(check_outputs(Q, K, V, O, &o, lse));
    const ops_attention a = call_of(Q, K, V, O, o, lse, &s);
    return ops_attention_run(ctx, bs, &a, report);
}

/* ---- the backward --------------------------------------------------------------- */

/* A gradient (may be NULL): the dtype and shape of `like`, writable,
 * overlapping none of the n inputs. */
static pit_status check_gradient(pit_context *ctx, const pit_tensor *g, const char *name,
                                 const pit_tensor *like, const pit_tensor *const *in,
                                 const char *const *names, int n)
{
    if (!g)
        return PIT_SUCCESS;
    PIT_TRY(ops_check_output_view(ctx, g, BFN, name, 4, 4));
    PIT_TRY(ops_check_same_dtype(like, g, BFN, "Q", name));
    for (int i = 0; i < 4; i++)
        PIT_TRY(ops_check_dim(g, i, like->d.shape[i], BFN, name));
    for (int i = 0; i < n; i++)
        PIT_TRY(ops_check_no_overlap(g, in[i], BFN, name, names[i]));
    return PIT_SUCCESS;
}

static pit_status check_backward(pit_context *ctx, const pit_tensor *Q, const pit_tensor *K,
                                 const pit_tensor *V, const pit_tensor *O, const pit_tensor *dO,
                                 const pit_tensor *lse, const pit_attention_options *o,
                                 const pit_tensor *dQ, const pit_tensor *dK,
                                 const pit_tensor *dV, attn_dims *s)
{
    PIT_TRY(check_attention(BFN, ctx, Q, K, V, O, o, lse, s));
    if (!lse)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: tensor argument 'lse' is NULL (the "
                         "forward's log-sum-exp is needed)", BFN);
    PIT_TRY(ops_check_view(ctx, dO, BFN, "dO", 4, 4));
    PIT_TRY(ops_check_same_dtype(Q, dO, BFN, "Q", "dO"));
    for (int i = 0; i < 4; i++)
        PIT_TRY(ops_check_dim(dO, i, O->d.shape[i], BFN, "dO"));
    const pit_tensor *in[11] = {Q, K, V, O, dO, lse, o->mask, o->block_mask, dQ, dK, dV};
    const char *const names[11] = {"Q", "K", "V", "O", "dO", "lse", "mask", "block_mask",
                                   "dQ", "dK", "dV"};
    PIT_TRY(check_gradient(ctx, dQ, "dQ", Q, in, names, 8));
    PIT_TRY(check_gradient(ctx, dK, "dK", K, in, names, 9));
    return check_gradient(ctx, dV, "dV", V, in, names, 10);
}

PIT_API pit_status pit_attention_backward(pit_context *ctx, pit_stream *stream,
                                          const pit_tensor *Q, const pit_tensor *K,
                                          const pit_tensor *V, const pit_tensor *O,
                                          const pit_tensor *dO, const pit_tensor *lse,
                                          const pit_attention_options *opt, pit_tensor *dQ,
                                          pit_tensor *dK, pit_tensor *dV)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, BFN, &bs));
    const pit_attention_options o = opt ? *opt : pit_attention_options_default();
    attn_dims s;
    PIT_TRY(check_backward(ctx, Q, K, V, O, dO, lse, &o, dQ, dK, dV, &s));
    const ops_attention a = call_of(Q, K, V, O, o, lse, &s);
    return ops_attention_backward_run(ctx, bs, &a, &dO->d, dQ ? &dQ->d : NULL,
                                      dK ? &dK->d : NULL, dV ? &dV->d : NULL);
}
