/*
 * core/ops/moe_ffn.c - the Mixture-of-Experts expert FFN in one call, and its
 * backward, composed from the backend's MoE entries: moe_route once, then
 * moe_matmul with slot rows (one row a token-slot, PIT_MOE_SLOT_X/Y of
 * core/backend.h) for the gathered first product, moe_activation on those
 * rows, and moe_matmul again for the second product, which scatters with
 * the gate and sums each token's k results. The intermediate rows live in
 * the scratch (options->scratch, or the context's workspace). This is the
 * portable path of every backend with those entries; a backend that fuses
 * the steps replaces it behind the same contract.
 */
#include <string.h>

#include "choice.h"
#include "ops.h"

typedef struct ffn_shape {
    int64_t t, h, f, w, e, k; /* w: the first product's width, 2f gated or f */
    int act;
} ffn_shape;

PIT_API pit_moe_ffn_options pit_moe_ffn_options_default(void)
{
    pit_moe_ffn_options o;
    memset(&o, 0, sizeof o);
    o.activation = PIT_ACT_SWIGLU;
    return o;
}

static int act_gated(int act)
{
    return act == PIT_ACT_SWIGLU || act == PIT_ACT_GEGLU;
}

static const char *act_name(int act)
{
    static const char *const names[] = {"SwiGLU", "GeGLU", "GELU", "ReLU", "SiLU"};
    return names[act];
}

static pit_status check_options(const pit_moe_ffn_options *o, const char *fn)
{
    if ((int)o->activation < PIT_ACT_SWIGLU || (int)o->activation > PIT_ACT_SILU)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: activation %d (a pit_activation: %d..%d)",
                         fn, (int)o->activation, PIT_ACT_SWIGLU, PIT_ACT_SILU);
    return PIT_SUCCESS;
}

/* X [T,H], expert_ids i32 [T,k], gates f32 [T,k], W_gate_up [E,H,W], W_down
 * [E,F,H]; W = 2F for a gated activation, F otherwise. */
static pit_status check_ffn_inputs(pit_context *ctx, const char *fn, const pit_tensor *X,
                                   const pit_tensor *ids, const pit_tensor *gates,
                                   const pit_tensor *W1, const pit_tensor *W2, int act,
                                   ffn_shape *s)
{
    PIT_TRY(ops_check_tensor(ctx, X, fn, "X", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, ids, fn, "expert_ids", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, gates, fn, "gates", 2, 2));
    PIT_TRY(ops_check_tensor(ctx, W1, fn, "W_gate_up", 3, 3));
    PIT_TRY(ops_check_tensor(ctx, W2, fn, "W_down", 3, 3));
    PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    PIT_TRY(ops_check_same_dtype(X, W1, fn, "X", "W_gate_up"));
    PIT_TRY(ops_check_same_dtype(X, W2, fn, "X", "W_down"));
    PIT_TRY(ops_check_dtype(ids, PIT_I32, fn, "expert_ids"));
    PIT_TRY(ops_check_dtype(gates, PIT_F32, fn, "gates"));
    s->act = act;
    s->t = X->d.shape[0];
    s->h = X->d.shape[1];
    s->k = ids->d.shape[1];
    s->e = W1->d.shape[0];
    s->w = W1->d.shape[2];
    s->f = W2->d.shape[1];
    PIT_TRY(ops_check_dim(ids, 0, s->t, fn, "expert_ids"));
    PIT_TRY(ops_check_dim(gates, 0, s->t, fn, "gates"));
    PIT_TRY(ops_check_dim(gates, 1, s->k, fn, "gates"));
    PIT_TRY(ops_check_dim(W1, 1, s->h, fn, "W_gate_up"));
    PIT_TRY(ops_check_dim(W2, 0, s->e, fn, "W_down"));
    PIT_TRY(ops_check_dim(W2, 2, s->h, fn, "W_down"));
    const int64_t want = act_gated(act) ? 2 * s->f : s->f;
    if (s->w != want)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: W_gate_up [%lld,%lld,%lld]: %s takes %s = "
                         "%lld columns (F = %lld from W_down [E,F,H])", fn, (long long)s->e,
                         (long long)s->h, (long long)s->w, act_name(act),
                         act_gated(act) ? "2F (gate then up)" : "F", (long long)want,
                         (long long)s->f);
    return PIT_SUCCESS;
}

/* A tensor of the options (the scratch, the kept first product): of rank
 * min_rank..max_rank, X's dtype, contiguous (when it holds anything),
 * overlapping none of the call's arguments. */
static pit_status check_option_tensor(pit_context *ctx, const char *fn, const pit_tensor *t,
                                      const char *name, int min_rank, int max_rank, pit_dtype dt,
                                      const pit_tensor *const *args, const char *const *names,
                                      int nargs)
{
    PIT_TRY(ops_check_output(ctx, t, fn, name, min_rank, max_rank));
    PIT_TRY(ops_check_dtype(t, dt, fn, name));
    if (pit_tensor_numel(&t->d) > 0 && !pit_tdesc_contiguous(&t->d))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: %s must be contiguous", fn, name);
    for (int i = 0; i < nargs; i++)
        PIT_TRY(ops_check_no_overlap(t, args[i], fn, name, names[i]));
    return PIT_SUCCESS;
}

/* The caller's scratch: at least `need` elements. */
static pit_status check_scratch(pit_context *ctx, const char *fn, const pit_tensor *scratch,
                                pit_dtype dt, int64_t need, const pit_tensor *const *args,
                                const char *const *names, int nargs)
{
    PIT_TRY(check_option_tensor(ctx, fn, scratch, "options->scratch", 1, PIT_MAX_RANK, dt, args, names,
                                nargs));
    if (pit_tensor_numel(&scratch->d) < need)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: options->scratch holds %lld elements, the "
                         "call needs %lld", fn, (long long)pit_tensor_numel(&scratch->d),
                         (long long)need);
    return PIT_SUCCESS;
}

/* The forward's first product kept for the backward: [T*k, W], apart from
 * the scratch too. */
static pit_status check_saved(pit_context *ctx, const char *fn, const pit_moe_ffn_options *o,
                              const ffn_shape *s, pit_dtype dt, const pit_tensor *const *args,
                              const char *const *names, int nargs)
{
    const pit_tensor *h = o->saved_h;
    PIT_TRY(check_option_tensor(ctx, fn, h, "options->saved_h", 2, 2, dt, args, names, nargs));
    PIT_TRY(ops_check_dim(h, 0, s->t * s->k, fn, "options->saved_h"));
    PIT_TRY(ops_check_dim(h, 1, s->w, fn, "options->saved_h"));
    if (o->scratch)
        PIT_TRY(ops_check_no_overlap(h, o->scratch, fn, "options->saved_h", "options->scratch"));
    return PIT_SUCCESS;
}

/* rows x cols of the scratch, starting `skip` elements in (contiguous) */
static pit_tdesc scratch_rows(const pit_tdesc *base, int64_t skip, int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    pit_tdesc d = ops_scratch_desc(base->mem, base->dtype, 2, shape);
    d.offset = base->offset + (size_t)skip * pit_dtype_size(base->dtype);
    return d;
}

/* The first `need` elements of the caller's scratch, or of the workspace. */
static pit_status scratch_base(pit_context *ctx, void *bs, const pit_moe_ffn_options *o,
                               pit_dtype dt, int64_t need, pit_tdesc *base)
{
    if (o->scratch) {
        *base = o->scratch->d;
        return PIT_SUCCESS;
    }
    void *mem;
    PIT_TRY(pit_workspace_get(ctx, bs, "moe_ffn", (size_t)need * pit_dtype_size(dt), &mem));
    *base = ops_scratch_desc(mem, dt, 1, &need);
    return PIT_SUCCESS;
}

/* A [R, F] in place over U [R, W]: U's first F columns. */
static pit_tdesc first_columns(const pit_tdesc *U, int64_t f)
{
    pit_tdesc a = *U;
    a.shape[1] = f;
    return a;
}

static pit_status need_activation(const pit_context *ctx)
{
    return ctx->be->moe_activation ? PIT_SUCCESS : ops_unsupported(ctx, "moe_activation");
}

/* 1 where both products of the forward plan on the device (no read-back).
 * first: the first product's output (U, or A where the activation is fused) */
static int forward_on_device(const pit_context *ctx, const pit_tdesc *X, const pit_tdesc *W1,
                             const pit_tdesc *first, const pit_tdesc *A, const pit_tdesc *W2,
                             const pit_tdesc *Y)
{
    const pit_backend *be = ctx->be;
    return be->moe_plans_on_device &&
           be->moe_plans_on_device(ctx->bctx, 0 | PIT_MOE_SLOT_Y, X, W1, first) &&
           be->moe_plans_on_device(ctx->bctx, 0 | PIT_MOE_SLOT_X, A, W2, Y);
}

/* 1 where the backend applies the gated activation in the first product's
 * epilogue (A [R, F] straight from X and W_gate_up). */
static int fuses_activation(const pit_context *ctx, int act, const pit_tile *tile,
                            const pit_tdesc *X, const pit_tdesc *W1, const pit_tdesc *A)
{
    const pit_backend *be = ctx->be;
    return act_gated(act) && be->moe_fuses_activation &&
           be->moe_fuses_activation(ctx->bctx, act, tile, X, W1, A);
}

PIT_API pit_status pit_moe_ffn(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                               const pit_tensor *expert_ids, const pit_tensor *gates,
                               const pit_tensor *W_gate_up, const pit_tensor *W_down,
                               pit_tensor *Y, const pit_moe_ffn_options *options,
                               pit_report *report)
{
    static const char *const fn = "pit_moe_ffn";
    const pit_moe_ffn_options o = options ? *options : pit_moe_ffn_options_default();
    void *bs;
    ffn_shape s;
    PIT_TRY(ops_begin_report(ctx, stream, fn, report, &bs));
    PIT_TRY(check_options(&o, fn));
    PIT_TRY(check_ffn_inputs(ctx, fn, X, expert_ids, gates, W_gate_up, W_down, o.activation, &s));
    const pit_tensor *args[6] = {X, expert_ids, gates, W_gate_up, W_down, Y};
    const char *names[6] = {"X", "expert_ids", "gates", "W_gate_up", "W_down", "Y"};
    const int64_t yshape[2] = {s.t, s.h}, rows = s.t * s.k;
    PIT_TRY(ops_check_result(ctx, fn, Y, "Y", X->d.dtype, 2, yshape, args, names, 5));
    if (o.scratch)
        PIT_TRY(check_scratch(ctx, fn, o.scratch, X->d.dtype, rows * s.w, args, names, 6));
    if (o.saved_h)
        PIT_TRY(check_saved(ctx, fn, &o, &s, X->d.dtype, args, names, 6));
    if (s.t == 0 || s.h == 0 || s.e == 0 || s.k == 0 || s.f == 0) {
        /* nothing routed, or an empty product: every kept row is 0 */
        if (o.saved_h && rows > 0 && s.w > 0)
            PIT_TRY(ops_zero(ctx, bs, &o.saved_h->d));
        return s.t == 0 || s.h == 0 ? PIT_SUCCESS : ops_zero(ctx, bs, &Y->d);
    }
    pit_tile tile, tile2;
    PIT_TRY(pit_select_gathered(ctx->db, PIT_TILE_MOE, X->d.dtype, &tile));
    tile2 = tile;
    /* the intermediate: A [R, F] alone where the activation is fused, else U
     * [R, W] with A over its first F columns (the scratch's first elements
     * either way: a fused call needs less of it); U kept for the backward
     * (saved_h): U there, A alone in the scratch */
    pit_tdesc base;
    PIT_TRY(scratch_base(ctx, bs, &o, X->d.dtype, rows * s.f, &base));
    const pit_tdesc Af = scratch_rows(&base, 0, rows, s.f); /* A alone, contiguous */
    const int fused = !o.saved_h && fuses_activation(ctx, s.act, &tile, &X->d, &W_gate_up->d, &Af);
    if (!fused) {
        PIT_TRY(need_activation(ctx));
        if (!o.saved_h)
            PIT_TRY(scratch_base(ctx, bs, &o, X->d.dtype, rows * s.w, &base));
    }
    const pit_tdesc U = o.saved_h ? o.saved_h->d : scratch_rows(&base, 0, rows, s.w);
    const pit_tdesc A = o.saved_h ? Af : first_columns(&U, s.f);
    const pit_tdesc *first = fused ? &Af : &U, *act_out = fused ? &Af : &A;
    const int on_device =
        forward_on_device(ctx, &X->d, &W_gate_up->d, first, act_out, &W_down->d, &Y->d);
    pit_index idx;
    int32_t max_entries;
    int64_t routed = 0;
    PIT_TRY(ops_moe_route(ctx, bs, expert_ids, s.t, s.h, s.e, &idx, &max_entries,
                          report || !on_device ? &routed : NULL));
    pit_index_report(report, &idx, routed, 1, PIT_CHOICE_MOE_FFN);
    const pit_backend *be = ctx->be;
    const int glu = fused ? PIT_MOE_GLU(s.act) : 0;
    PIT_TRY(be->moe_matmul(ctx->bctx, bs, 0 | PIT_MOE_SLOT_Y | glu, &tile, &idx, max_entries,
                           &X->d, &W_gate_up->d, NULL, first));
    if (!fused)
        PIT_TRY(be->moe_activation(ctx->bctx, bs, s.act, &U, NULL, NULL, &A, NULL, NULL));
    PIT_TRY(be->moe_matmul(ctx->bctx, bs, 0 | PIT_MOE_SLOT_X, &tile2, &idx, max_entries, act_out,
                           &W_down->d, &gates->d, &Y->d));
    ops_report_tile(report, &tile); /* the first product's, the larger one for a GLU */
    return PIT_SUCCESS;
}

/* ---- backward ------------------------------------------------------------------ */

typedef struct ffn_grads {
    pit_tensor *dX, *dW1, *dW2, *dgates;
} ffn_grads;

static pit_status check_grads(pit_context *ctx, const char *fn, const ffn_shape *s,
                              const pit_tensor *X, const pit_tensor *dY, const ffn_grads *g,
                              const pit_tensor *const *in, const char *const *names, int nin)
{
    PIT_TRY(ops_check_tensor(ctx, dY, fn, "dY", 2, 2));
    PIT_TRY(ops_check_same_dtype(X, dY, fn, "X", "dY"));
    PIT_TRY(ops_check_dim(dY, 0, s->t, fn, "dY"));
    PIT_TRY(ops_check_dim(dY, 1, s->h, fn, "dY"));
    const int64_t xs[2] = {s->t, s->h}, w1s[3] = {s->e, s->h, s->w}, w2s[3] = {s->e, s->f, s->h},
                  gs[2] = {s->t, s->k};
    const pit_dtype dt = X->d.dtype;
    if (g->dX)
        PIT_TRY(ops_check_result(ctx, fn, g->dX, "dX", dt, 2, xs, in, names, nin));
    if (g->dW1)
        PIT_TRY(ops_check_result(ctx, fn, g->dW1, "dW_gate_up", dt, 3, w1s, in, names, nin));
    if (g->dW2)
        PIT_TRY(ops_check_result(ctx, fn, g->dW2, "dW_down", dt, 3, w2s, in, names, nin));
    if (g->dgates)
        PIT_TRY(ops_check_result(ctx, fn, g->dgates, "dgates", PIT_F32, 2, gs, in, names, nin));
    const pit_tensor *outs[4] = {g->dX, g->dW1, g->dW2, g->dgates};
    const char *onames[4] = {"dX", "dW_gate_up", "dW_down", "dgates"};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            PIT_TRY(ops_check_no_overlap(outs[i], outs[j], fn, onames[i], onames[j]));
    return PIT_SUCCESS;
}

static pit_status zero_grads(pit_context *ctx, void *bs, const ffn_grads *g)
{
    const pit_tensor *outs[4] = {g->dX, g->dW1, g->dW2, g->dgates};
    for (int i = 0; i < 4; i++)
        if (outs[i])
            PIT_TRY(ops_zero(ctx, bs, &outs[i]->d));
    return PIT_SUCCESS;
}

/* The routed backward over scratch rows U [R, W] and dA [R, F]:
 *   U = X . W1 (slot rows), dA = dY . W2^T (slot rows, before the gate),
 *   activation backward: dU (over U), A = act(U) (over dA), dgates;
 *   dW2 = sum gate * A^T . dY, dX = sum dU . W1^T, dW1 = sum X^T . dU. */
typedef struct ffn_backward {
    pit_context *ctx;
    void *bs;
    const ffn_shape *s;
    const pit_index *idx;
    int32_t max_entries;
    pit_tile tile;
} ffn_backward;

static pit_status moe_product(const ffn_backward *b, int mode, const pit_tdesc *X,
                              const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y)
{
    pit_tile tile = b->tile;
    return b->ctx->be->moe_matmul(b->ctx->bctx, b->bs, mode, &tile, b->idx, b->max_entries, X, W,
                                  gates, Y);
}

/* saved: the forward's U (options->saved_h), read only; NULL: U is
 * recomputed into the scratch rows, and dU and A overwrite it in place. */
static pit_status backward_run(const ffn_backward *b, const pit_tdesc *base, const pit_tdesc *saved,
                               const pit_tensor *X, const pit_tensor *gates, const pit_tensor *W1,
                               const pit_tensor *W2, const pit_tensor *dY, const ffn_grads *g)
{
    const ffn_shape *s = b->s;
    const int64_t rows = s->t * s->k;
    const pit_tdesc dU = scratch_rows(base, 0, rows, s->w), dA = scratch_rows(base, rows * s->w,
                                                                              rows, s->f);
    const pit_tdesc U = saved ? *saved : dU;
    const int need_da = g->dX || g->dW1 || g->dgates;
    if (!saved)
        PIT_TRY(moe_product(b, 0 | PIT_MOE_SLOT_Y, &X->d, &W1->d, NULL, &dU));
    const pit_backend *be = b->ctx->be;
    pit_tdesc A = need_da || saved ? dA : first_columns(&dU, s->f);
    if (need_da) {
        PIT_TRY(moe_product(b, 1 | PIT_MOE_SLOT_Y, &dY->d, &W2->d, NULL, &dA));
        PIT_TRY(be->moe_activation(b->ctx->bctx, b->bs, s->act, &U, &dA, &gates->d, &A, &dU,
                                   g->dgates ? &g->dgates->d : NULL));
    } else {
        PIT_TRY(be->moe_activation(b->ctx->bctx, b->bs, s->act, &U, NULL, NULL, &A, NULL, NULL));
    }
    if (g->dW2)
        PIT_TRY(moe_product(b, 2 | PIT_MOE_SLOT_X, &A, &g->dW2->d, &gates->d, &dY->d));
    if (g->dX)
        PIT_TRY(moe_product(b, 1 | PIT_MOE_SLOT_X, &dU, &W1->d, NULL, &g->dX->d));
    if (g->dW1)
        PIT_TRY(moe_product(b, 2 | PIT_MOE_SLOT_Y, &X->d, &g->dW1->d, NULL, &dU));
    return PIT_SUCCESS;
}

PIT_API pit_status pit_moe_ffn_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                        const pit_tensor *expert_ids, const pit_tensor *gates,
                                        const pit_tensor *W_gate_up, const pit_tensor *W_down,
                                        const pit_tensor *dY, pit_tensor *dX,
                                        pit_tensor *dW_gate_up, pit_tensor *dW_down,
                                        pit_tensor *dgates, const pit_moe_ffn_options *options)
{
    static const char *const fn = "pit_moe_ffn_backward";
    const pit_moe_ffn_options o = options ? *options : pit_moe_ffn_options_default();
    void *bs;
    ffn_shape s;
    PIT_TRY(ops_begin(ctx, stream, fn, &bs));
    PIT_TRY(check_options(&o, fn));
    PIT_TRY(check_ffn_inputs(ctx, fn, X, expert_ids, gates, W_gate_up, W_down, o.activation, &s));
    const ffn_grads g = {dX, dW_gate_up, dW_down, dgates};
    const pit_tensor *args[10] = {X, expert_ids, gates, W_gate_up, W_down, dY,
                                  dX, dW_gate_up, dW_down, dgates};
    const char *names[10] = {"X", "expert_ids", "gates", "W_gate_up", "W_down", "dY",
                             "dX", "dW_gate_up", "dW_down", "dgates"};
    PIT_TRY(check_grads(ctx, fn, &s, X, dY, &g, args, names, 6));
    const int64_t rows = s.t * s.k, need = rows * (s.w + s.f);
    if (o.scratch)
        PIT_TRY(check_scratch(ctx, fn, o.scratch, X->d.dtype, need, args, names, 10));
    if (o.saved_h)
        PIT_TRY(check_saved(ctx, fn, &o, &s, X->d.dtype, args, names, 10));
    if (!dX && !dW_gate_up && !dW_down && !dgates)
        return PIT_SUCCESS;
    pit_index idx;
    ffn_backward b = {ctx, bs, &s, &idx, 0, {0}};
    int64_t routed = 0;
    if (s.e > 0 && s.t > 0 && s.k > 0 && s.h > 0 && s.f > 0) {
        PIT_TRY(need_activation(ctx));
        PIT_TRY(ops_moe_route(ctx, bs, expert_ids, s.t, s.h, s.e, &idx, &b.max_entries, &routed));
    }
    if (routed == 0) /* nothing routed, or empty products: every gradient is zero */
        return zero_grads(ctx, bs, &g);
    PIT_TRY(pit_select_gathered(ctx->db, PIT_TILE_MOE, X->d.dtype, &b.tile));
    pit_tdesc base;
    PIT_TRY(scratch_base(ctx, bs, &o, X->d.dtype, need, &base));
    return backward_run(&b, &base, o.saved_h ? &o.saved_h->d : NULL, X, gates, W_gate_up, W_down, dY,
                        &g);
}
