/*
 * core/ops/attention.c - pit_attention: its options and their checks. The
 * call itself runs in attention_run.c.
 */
#include <math.h>
#include <string.h>

#include "attention.h"

static const char *const FN = "pit_attention";

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

static pit_status check_operands(pit_context *ctx, const pit_tensor *Q, const pit_tensor *K,
                                 const pit_tensor *V, const pit_tensor *O, attn_dims *s)
{
    PIT_TRY(ops_check_view(ctx, Q, FN, "Q", 4, 4));
    PIT_TRY(ops_check_view(ctx, K, FN, "K", 4, 4));
    PIT_TRY(ops_check_view(ctx, V, FN, "V", 4, 4));
    PIT_TRY(ops_check_output_view(ctx, O, FN, "O", 4, 4));
    PIT_TRY(ops_check_float(ctx, Q, FN, "Q"));
    PIT_TRY(ops_check_same_dtype(Q, K, FN, "Q", "K"));
    PIT_TRY(ops_check_same_dtype(Q, V, FN, "Q", "V"));
    PIT_TRY(ops_check_same_dtype(Q, O, FN, "Q", "O"));
    *s = (attn_dims){Q->d.shape[0], Q->d.shape[1], K->d.shape[1], Q->d.shape[2],
                     K->d.shape[2], Q->d.shape[3], V->d.shape[3]};
    PIT_TRY(ops_check_dim(K, 0, s->b, FN, "K"));
    PIT_TRY(ops_check_dim(K, 3, s->d, FN, "K"));
    PIT_TRY(ops_check_dim(V, 0, s->b, FN, "V"));
    PIT_TRY(ops_check_dim(V, 1, s->hkv, FN, "V"));
    PIT_TRY(ops_check_dim(V, 2, s->lk, FN, "V"));
    PIT_TRY(ops_check_dim(O, 0, s->b, FN, "O"));
    PIT_TRY(ops_check_dim(O, 1, s->hq, FN, "O"));
    PIT_TRY(ops_check_dim(O, 2, s->lq, FN, "O"));
    PIT_TRY(ops_check_dim(O, 3, s->dv, FN, "O"));
    if (s->hkv == 0 ? s->hq != 0 : s->hq % s->hkv != 0)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: Q's %lld heads are not a multiple of K and "
                         "V's %lld heads (grouped-query attention needs Hq = n x Hkv)", FN,
                         (long long)s->hq, (long long)s->hkv);
    return PIT_SUCCESS;
}

static pit_status check_options(const pit_attention_options *o)
{
    if (!isfinite(o->scale))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: scale %g is not finite", FN,
                         (double)o->scale);
    if (o->causal != 0 && o->causal != 1)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: causal is %d; 0 or 1", FN, o->causal);
    if (o->window_left < -1 || o->window_right < -1)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: window_left %d, window_right %d: each "
                         "must be >= 0, or -1 for no bound", FN, o->window_left, o->window_right);
    if (o->block_mask ? o->block_q < 1 || o->block_k < 1 : o->block_q != 0 || o->block_k != 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: block_q %d, block_k %d: both > 0 with a "
                         "block_mask, both 0 without", FN, o->block_q, o->block_k);
    const pit_microtile *t = &o->microtile;
    if (t->rows < 0 || t->cols < 0 || (t->rows == 0) != (t->cols == 0) ||
        (t->axis != PIT_AXIS_AUTO && t->axis != PIT_AXIS_K))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: micro-tile %dx%d (axis %d): rows and "
                         "cols both > 0, or both 0 for automatic; axis AUTO or K", FN, t->rows,
                         t->cols, (int)t->axis);
    return PIT_SUCCESS;
}

/* A leading dimension of a mask: the call's extent, or 1 (every one). */
static pit_status check_lead_dim(const pit_tensor *m, const char *name, int dim, int64_t want,
                                 const char *what)
{
    int64_t got = m->d.shape[dim];
    if (got == want || got == 1)
        return PIT_SUCCESS;
    return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: dimension %d of '%s' is %lld; %s = %lld or 1 "
                     "expected", FN, dim, name, (long long)got, what, (long long)want);
}

/* mask or block_mask: a pattern dtype, rank 2..4 with leading dimensions of
 * the heads and batch (or 1), last two rows x cols, and a batch and head that
 * merge into one dimension (the index is built on a rank-3 view). */
static pit_status check_pattern(pit_context *ctx, const pit_tensor *m, const char *name,
                                const attn_dims *s, int64_t rows, int64_t cols)
{
    PIT_TRY(ops_check_tensor(ctx, m, FN, name, 2, 4));
    pit_dtype dt = m->d.dtype;
    if (dt != PIT_F32 && dt != PIT_F16 && dt != PIT_BF16 && dt != PIT_I32 && dt != PIT_U8)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: '%s' is %s (f32, f16, bf16, i32 or u8)",
                         FN, name, pit_dtype_name(dt));
    int r = m->d.rank;
    if (r >= 3)
        PIT_TRY(check_lead_dim(m, name, r - 3, s->hq, "Hq"));
    if (r == 4)
        PIT_TRY(check_lead_dim(m, name, 0, s->b, "B"));
    PIT_TRY(ops_check_dim(m, r - 2, rows, FN, name));
    PIT_TRY(ops_check_dim(m, r - 1, cols, FN, name));
    ops_mask_lead l = ops_attention_lead(&m->d);
    if (l.batch > 1 && l.heads > 1 && l.batch_stride != l.heads * l.head_stride)
        return pit_error(PIT_ERR_BAD_STRIDES, "%s: '%s' has batch stride %lld and head stride "
                         "%lld; the batch stride must be %lld heads x the head stride", FN, name,
                         (long long)l.batch_stride, (long long)l.head_stride,
                         (long long)l.heads);
    return PIT_SUCCESS;
}

static pit_status check_lse(pit_context *ctx, const pit_tensor *lse, const attn_dims *s)
{
    PIT_TRY(ops_check_output_view(ctx, lse, FN, "lse", 3, 3));
    PIT_TRY(ops_check_dtype(lse, PIT_F32, FN, "lse"));
    PIT_TRY(ops_check_dim(lse, 0, s->b, FN, "lse"));
    PIT_TRY(ops_check_dim(lse, 1, s->hq, FN, "lse"));
    return ops_check_dim(lse, 2, s->lq, FN, "lse");
}

/* O and lse overlap no input, and not each other. */
static pit_status check_aliasing(const pit_tensor *Q, const pit_tensor *K, const pit_tensor *V,
                                 const pit_tensor *O, const pit_attention_options *o,
                                 const pit_tensor *lse)
{
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

static pit_status check_attention(pit_context *ctx, const pit_tensor *Q, const pit_tensor *K,
                                  const pit_tensor *V, const pit_tensor *O,
                                  const pit_attention_options *o, const pit_tensor *lse,
                                  attn_dims *s)
{
    PIT_TRY(check_operands(ctx, Q, K, V, O, s));
    PIT_TRY(check_options(o));
    if (o->mask)
        PIT_TRY(check_pattern(ctx, o->mask, "mask", s, s->lq, s->lk));
    if (o->block_mask)
        PIT_TRY(check_pattern(ctx, o->block_mask, "block_mask", s, blocks_of(s->lq, o->block_q),
                              blocks_of(s->lk, o->block_k)));
    if (lse)
        PIT_TRY(check_lse(ctx, lse, s));
    return check_aliasing(Q, K, V, O, o, lse);
}

/* ---- the call ---------------------------------------------------------------- */

/* causal is a right bound of 0 on the aligned diagonal, never looser than a
 * window's (window_right >= 0) */
static int64_t right_bound(const pit_attention_options *o)
{
    return o->causal ? 0 : o->window_right;
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
    PIT_TRY(check_attention(ctx, Q, K, V, O, &o, lse, &s));
    ops_attention a = {
        .fn = FN, .Q = Q->d, .K = K->d, .V = V->d, .O = O->d,
        .mask = o.mask ? &o.mask->d : NULL,
        .block_mask = o.block_mask ? &o.block_mask->d : NULL,
        .lse = lse ? &lse->d : NULL,
        .block_q = o.block_q, .block_k = o.block_k,
        /* 1/sqrt(D); a head dimension of 0 scores every key 0 whatever the scale */
        .scale = o.scale != 0.0f ? o.scale : s.d > 0 ? 1.0f / sqrtf((float)s.d) : 1.0f,
        .causal = o.causal,
        .window_left = o.window_left,
        .window_right = right_bound(&o),
        .tile = o.microtile,
    };
    return ops_attention_run(ctx, bs, &a, report);
}
