/*
 * tools/conf_moe.c - conformance cases of the Mixture-of-Experts operators:
 * pit_moe_forward / pit_moe_backward (one expert GEMM) and the expert FFN
 * pit_moe_ffn / pit_moe_ffn_backward (every activation, top-1/2/8, skewed
 * routing with empty experts and ids out of range, every token on one
 * expert, no id in range, odd sizes, the caller's scratch poisoned, a
 * backward with outputs left out), all against the double references of
 * core/reference, outputs poisoned with NaN.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

static pit_status moe_probe(pit_context *c, const conf_probe_kit *k)
{
    return conf_either(
        pit_moe_forward(c, NULL, k->m[0], k->ids, k->gates, k->b[0], k->m[1], NULL),
        pit_moe_backward(c, NULL, k->m[0], k->ids, k->gates, k->b[0], k->m[2], k->m[3], k->b[1],
                         NULL));
}

/* ---- MoE --------------------------------------------------------------------------------- */

typedef struct moe_shape { int64_t t, h, n, e, k; } moe_shape;
static const moe_shape moe_shapes[] = {
    {1, 1, 1, 1, 1}, {7, 5, 3, 2, 1}, {33, 17, 20, 4, 2}, {100, 33, 40, 8, 2}, {64, 32, 16, 3, 1}};
#define NMOE_SHAPES (int)(sizeof moe_shapes / sizeof moe_shapes[0])

/* Skewed routing of t tokens to k of e experts: about 60% of slots to
 * expert 0, the last expert (when there are more than two) never chosen,
 * ~5% of ids out of range (-1 or e). */
static void route_tokens(pit_rng *rng, int64_t t, int64_t e, int64_t k, int32_t *ids)
{
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < k; j++) {
            double u = (pit_rng_uniform(rng) + 1.0) / 2.0;
            int64_t usable = e > 2 ? e - 1 : e;
            int32_t x = u < 0.6 ? 0 : (int32_t)(pit_rng_next(rng) % (uint64_t)usable);
            if (u > 0.95)
                x = (pit_rng_next(rng) & 1) ? -1 : (int32_t)e;
            if (j > 0 && x == ids[i * k] && e > 1) /* top-k experts are distinct */
                x = (x + 1) % (int32_t)e;
            ids[i * k + j] = x;
        }
}

typedef struct moe_bufs {
    dbuf X, ids, G, W, Y, dY, dX, dW, dG;
    int32_t *id_host;
} moe_bufs;

static void moe_free(moe_bufs *b)
{
    dbuf *all[9] = {&b->X, &b->ids, &b->G, &b->W, &b->Y, &b->dY, &b->dX, &b->dW, &b->dG};
    for (int i = 0; i < 9; i++)
        dbuf_free(all[i]);
    free(b->id_host);
}

static pit_status moe_make(pit_context *ctx, pit_dtype dt, const moe_shape *s, moe_bufs *b)
{
    memset(b, 0, sizeof *b);
    int64_t xs[2] = {s->t, s->h}, ks[2] = {s->t, s->k}, ws[3] = {s->e, s->h, s->n},
            ys[2] = {s->t, s->n};
    pit_status st = dbuf_make(ctx, dt, 2, xs, &b->X);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, PIT_I32, 2, ks, &b->ids);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, PIT_F32, 2, ks, &b->G);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 3, ws, &b->W);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, ys, &b->Y);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, ys, &b->dY);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, xs, &b->dX);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 3, ws, &b->dW);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, PIT_F32, 2, ks, &b->dG);
    b->id_host = calloc((size_t)(s->t * s->k) + 1, sizeof(int32_t));
    return st == PIT_SUCCESS && !b->id_host ? PIT_ERR_OUT_OF_MEMORY : st;
}

static pit_status moe_inputs(moe_bufs *b, const moe_shape *s, pit_rng *rng)
{
    route_tokens(rng, s->t, s->e, s->k, b->id_host);
    pit_status st = pit_tensor_upload(b->ids.t, NULL, b->id_host,
                                      (size_t)(s->t * s->k) * sizeof(int32_t));
    dbuf *rnd[4] = {&b->X, &b->G, &b->W, &b->dY};
    for (int i = 0; i < 4 && st == PIT_SUCCESS; i++)
        st = dbuf_random(rnd[i], rng);
    return st;
}

static void moe_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                     const moe_shape *s, pit_rng *rng)
{
    moe_bufs b;
    char what[200];
    snprintf(what, sizeof what, "moe %s T%lld H%lld N%lld E%lld top-%lld skewed", pit_dtype_name(dt),
             (long long)s->t, (long long)s->h, (long long)s->n, (long long)s->e, (long long)s->k);
    pit_status st = moe_make(ctx, dt, s, &b);
    if (st == PIT_SUCCESS)
        st = moe_inputs(&b, s, rng);
    double *y = conf_ref_alloc(b.Y.n), *dx = conf_ref_alloc(b.dX.n), *dw = conf_ref_alloc(b.dW.n),
           *dg = conf_ref_alloc(b.dG.n);
    if (st == PIT_SUCCESS && y && dx && dw && dg) {
        pit_ref_moe_forward(s->t, s->h, s->n, s->e, s->k, b.X.h, b.id_host, b.G.h, b.W.h, y);
        pit_ref_moe_backward(s->t, s->h, s->n, s->e, s->k, b.X.h, b.id_host, b.G.h, b.W.h, b.dY.h,
                             dx, dw, dg);
        pit_report rep;
        if (conf_call_ok(t, what, conf_poison(b.Y.t, b.Y.n)) &&
            conf_call_ok(t, what, pit_moe_forward(ctx, NULL, b.X.t, b.ids.t, b.G.t, b.W.t, b.Y.t, &rep)))
            conf_compare(t, o, what, &b.Y, y, dt);
        /* without a report core reads no counts back (the backend may) */
        char w2[220];
        snprintf(w2, sizeof w2, "%s, no report", what);
        if (conf_call_ok(t, w2, conf_poison(b.Y.t, b.Y.n)) &&
            conf_call_ok(t, w2, pit_moe_forward(ctx, NULL, b.X.t, b.ids.t, b.G.t, b.W.t, b.Y.t, NULL)))
            conf_compare(t, o, w2, &b.Y, y, dt);
        snprintf(w2, sizeof w2, "%s backward", what);
        dbuf *outs[3] = {&b.dX, &b.dW, &b.dG};
        for (int i = 0; i < 3; i++)
            conf_call_ok(t, w2, conf_poison(outs[i]->t, outs[i]->n));
        if (conf_call_ok(t, w2, pit_moe_backward(ctx, NULL, b.X.t, b.ids.t, b.G.t, b.W.t, b.dY.t,
                                            b.dX.t, b.dW.t, b.dG.t))) {
            snprintf(w2, sizeof w2, "%s dX", what);
            conf_compare(t, o, w2, &b.dX, dx, dt);
            snprintf(w2, sizeof w2, "%s dW", what);
            conf_compare(t, o, w2, &b.dW, dw, dt);
            snprintf(w2, sizeof w2, "%s dgates", what);
            conf_compare(t, o, w2, &b.dG, dg, dt);
        }
    }
    if (st != PIT_SUCCESS || !y || !dx || !dw || !dg)
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(y);
    free(dx);
    free(dw);
    free(dg);
    moe_free(&b);
}

void conf_moe(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 4);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, NMOE_SHAPES * 4,
                                  "pit_moe_forward", moe_probe))
            continue;
        for (int s = 0; s < NMOE_SHAPES; s++)
            moe_case(ctx, o, t, conf_dtypes[d], &moe_shapes[s], &rng);
    }
}


/* ---- the expert FFN ---------------------------------------------------------------------- */

/* Probes with GELU: W_gate_up [1,2,2] is then [E,H,F], like W_down. */
static pit_status ffn_probe(pit_context *c, const conf_probe_kit *k)
{
    pit_moe_ffn_options o = pit_moe_ffn_options_default();
    o.activation = PIT_ACT_GELU;
    return conf_either(
        pit_moe_ffn(c, NULL, k->m[0], k->ids, k->gates, k->b[0], k->b[1], k->m[1], &o, NULL),
        pit_moe_ffn_backward(c, NULL, k->m[0], k->ids, k->gates, k->b[0], k->b[1], k->m[2],
                             k->m[3], k->b[2], k->b[3], NULL, &o));
}

typedef struct ffn_shape { int64_t t, h, f, e, k; } ffn_shape;
/* odd sizes; top-1, 2 and 8; one expert; experts left with no token */
static const ffn_shape ffn_shapes[] = {
    {1, 1, 1, 1, 1}, {7, 5, 3, 2, 1}, {33, 17, 9, 4, 2}, {50, 19, 13, 9, 8}, {64, 24, 10, 3, 2}};
/* ones the tensor cores take: H and F multiples of 8; F past one
 * 128-column tile, experts past one 128-row tile (on sm_90 the gated
 * activations run in the first product's epilogue); and top-8 over 16
 * experts (each token's 8 slot rows summed). Their cases draw from a random
 * stream of their own, so the other cases' inputs do not depend on them. */
static const ffn_shape ffn_tc_shapes[] = {{300, 64, 200, 5, 2}, {96, 64, 64, 16, 8}};
#define NFFN_TC_SHAPES (int)(sizeof ffn_tc_shapes / sizeof ffn_tc_shapes[0])
#define FFN_TC_SEED 16
static const ffn_shape ffn_quick_shapes[] = {{7, 5, 3, 2, 1}, {33, 17, 9, 4, 2}, {50, 19, 13, 9, 8}};
/* nothing to compute: T, F, E or k 0 */
static const ffn_shape ffn_empty_shapes[] = {{0, 4, 3, 2, 2}, {5, 4, 0, 2, 2}, {5, 4, 3, 0, 2}, {5, 4, 3, 2, 0}};
#define NFFN_SHAPES (int)(sizeof ffn_shapes / sizeof ffn_shapes[0])
#define NFFN_EMPTY (int)(sizeof ffn_empty_shapes / sizeof ffn_empty_shapes[0])
#define NFFN_QUICK_SHAPES (int)(sizeof ffn_quick_shapes / sizeof ffn_quick_shapes[0])
#define NFFN_ACTS 5
static const char *const act_names[NFFN_ACTS] = {"SwiGLU", "GeGLU", "GELU", "ReLU", "SiLU"};

typedef enum ffn_routing {
    ROUTE_SKEWED,     /* route_tokens: skew, an expert without tokens, ids out of range */
    ROUTE_ONE_EXPERT, /* every token's first slot on the last expert */
    ROUTE_NONE        /* every id out of range, negative and >= E: Y and gradients 0 */
} ffn_routing;
static const char *const routing_names[] = {"skewed", "one expert", "no id in range"};

typedef enum ffn_variant {
    FFN_PLAIN,
    FFN_SCRATCH, /* the caller's scratch, NaN-poisoned before each call */
    FFN_PARTIAL, /* the backward computes dW_down and dgates only */
    FFN_SAVED,   /* the first product kept by the forward (poisoned before it) for the backward */
    FFN_SAVED_DW /* the same, the backward computing dW_down alone */
} ffn_variant;
static const char *const variant_names[] = {"", ", caller's scratch", ", dW_down and dgates only",
                                            ", first product kept", ", first product kept, dW_down only"};

typedef struct ffn_case {
    const ffn_shape *s;
    pit_dtype dt;
    int act;
    ffn_routing routing;
    ffn_variant variant;
} ffn_case;

static void route_ffn(pit_rng *rng, const ffn_case *c, int32_t *ids)
{
    const ffn_shape *s = c->s;
    const int none = c->routing == ROUTE_NONE || s->e == 0;
    if (!none)
        route_tokens(rng, s->t, s->e, s->k, ids);
    for (int64_t i = 0; i < s->t; i++)
        for (int64_t j = 0; j < s->k; j++) {
            int32_t *x = &ids[i * s->k + j];
            if (none)
                *x = (i + j) % 2 ? (int32_t)(-1 - i) : (int32_t)(s->e + i);
            else if (c->routing == ROUTE_ONE_EXPERT && j == 0)
                *x = (int32_t)(s->e - 1);
            else if (c->routing == ROUTE_ONE_EXPERT && *x == s->e - 1)
                *x = -1; /* the expert once a token: the slot is skipped instead */
        }
}

enum { FB_X, FB_IDS, FB_G, FB_W1, FB_W2, FB_Y, FB_DY, FB_DX, FB_DW1, FB_DW2, FB_DG, FB_SCRATCH,
       FB_SAVED, FB_COUNT };

typedef struct ffn_bufs {
    dbuf b[FB_COUNT];
    int32_t *ids;
} ffn_bufs;

static void ffn_free(ffn_bufs *f)
{
    for (int i = 0; i < FB_COUNT; i++)
        dbuf_free(&f->b[i]);
    free(f->ids);
}

static pit_status ffn_make(pit_context *ctx, const ffn_case *c, ffn_bufs *f)
{
    const ffn_shape *s = c->s;
    const int64_t w = c->act == PIT_ACT_SWIGLU || c->act == PIT_ACT_GEGLU ? 2 * s->f : s->f;
    const int64_t x[2] = {s->t, s->h}, tk[2] = {s->t, s->k}, w1[3] = {s->e, s->h, w},
                  w2[3] = {s->e, s->f, s->h}, scratch[1] = {s->t * s->k * (w + s->f)},
                  saved[2] = {s->t * s->k, w};
    const struct { pit_dtype dt; int rank; const int64_t *shape; } spec[FB_COUNT] = {
        {c->dt, 2, x},  {PIT_I32, 2, tk}, {PIT_F32, 2, tk}, {c->dt, 3, w1},
        {c->dt, 3, w2}, {c->dt, 2, x},    {c->dt, 2, x},    {c->dt, 2, x},
        {c->dt, 3, w1}, {c->dt, 3, w2},   {PIT_F32, 2, tk}, {c->dt, 1, scratch},
        {c->dt, 2, saved}};
    memset(f, 0, sizeof *f);
    pit_status st = PIT_SUCCESS;
    for (int i = 0; i < FB_COUNT && st == PIT_SUCCESS; i++)
        st = dbuf_make(ctx, spec[i].dt, spec[i].rank, spec[i].shape, &f->b[i]);
    f->ids = calloc((size_t)(s->t * s->k) + 1, sizeof(int32_t));
    return st == PIT_SUCCESS && !f->ids ? PIT_ERR_OUT_OF_MEMORY : st;
}

static pit_status ffn_inputs(ffn_bufs *f, const ffn_case *c, pit_rng *rng)
{
    route_ffn(rng, c, f->ids);
    pit_status st = pit_tensor_upload(f->b[FB_IDS].t, NULL, f->ids,
                                      (size_t)(c->s->t * c->s->k) * sizeof(int32_t));
    const int rnd[5] = {FB_X, FB_G, FB_W1, FB_W2, FB_DY};
    for (int i = 0; i < 5 && st == PIT_SUCCESS; i++)
        st = dbuf_random(&f->b[rnd[i]], rng);
    return st;
}

/* The token-slots with an id in range: what the report must count (0 where
 * the call has nothing to compute and routes nothing). */
static int64_t routed_slots(const ffn_case *c, const int32_t *ids)
{
    int64_t n = 0;
    if (c->s->h == 0 || c->s->f == 0)
        return 0;
    for (int64_t i = 0; i < c->s->t * c->s->k; i++)
        n += ids[i] >= 0 && ids[i] < c->s->e;
    return n;
}

static pit_moe_ffn_options ffn_options(const ffn_case *c, ffn_bufs *f)
{
    pit_moe_ffn_options o = pit_moe_ffn_options_default();
    o.activation = (pit_activation)c->act;
    o.scratch = c->variant == FFN_SCRATCH ? f->b[FB_SCRATCH].t : NULL;
    o.saved_h = c->variant == FFN_SAVED || c->variant == FFN_SAVED_DW ? f->b[FB_SAVED].t : NULL;
    return o;
}

/* Forward with a report (its count of routed slots checked) and without. */
static void ffn_forward(pit_context *ctx, const conf_opts *o, conf_tally *t, const ffn_case *c,
                        ffn_bufs *f, const double *ref, const char *what)
{
    pit_moe_ffn_options opt = ffn_options(c, f);
    dbuf *b = f->b;
    char w2[240];
    for (int with_report = 1; with_report >= 0; with_report--) {
        pit_report rep;
        snprintf(w2, sizeof w2, "%s%s", what, with_report ? "" : ", no report");
        if (opt.scratch && !conf_call_ok(t, w2, conf_poison(opt.scratch, b[FB_SCRATCH].n)))
            continue;
        if (opt.saved_h && !conf_call_ok(t, w2, conf_poison(opt.saved_h, b[FB_SAVED].n)))
            continue;
        if (!conf_call_ok(t, w2, conf_poison(b[FB_Y].t, b[FB_Y].n)) ||
            !conf_call_ok(t, w2, pit_moe_ffn(ctx, NULL, b[FB_X].t, b[FB_IDS].t, b[FB_G].t,
                                             b[FB_W1].t, b[FB_W2].t, b[FB_Y].t, &opt,
                                             with_report ? &rep : NULL)))
            continue;
        conf_compare(t, o, w2, &b[FB_Y], ref, c->dt);
        if (with_report) {
            snprintf(w2, sizeof w2, "%s: the report's routed slots", what);
            conf_check(t, o, w2, rep.nonzero_tiles == routed_slots(c, f->ids) ? 0.0 : 1.0, 0.0);
        }
    }
}

static void ffn_backward(pit_context *ctx, const conf_opts *o, conf_tally *t, const ffn_case *c,
                         ffn_bufs *f, double *const *ref, const char *what)
{
    static const char *const names[4] = {"dX", "dW_gate_up", "dW_down", "dgates"};
    pit_moe_ffn_options opt = ffn_options(c, f);
    dbuf *b = f->b;
    dbuf *outs[4] = {&b[FB_DX], &b[FB_DW1], &b[FB_DW2], &b[FB_DG]};
    const int partial = c->variant == FFN_PARTIAL, dw_only = c->variant == FFN_SAVED_DW;
    char w2[256];
    snprintf(w2, sizeof w2, "%s backward", what);
    for (int i = 0; i < 4; i++)
        conf_call_ok(t, w2, conf_poison(outs[i]->t, outs[i]->n));
    if (opt.scratch)
        conf_call_ok(t, w2, conf_poison(opt.scratch, b[FB_SCRATCH].n));
    /* the kept rows as the forward left them: the backward only reads them */
    double *kept = opt.saved_h ? conf_ref_alloc(b[FB_SAVED].n) : NULL;
    if (opt.saved_h && (!kept || !conf_call_ok(t, w2, conf_download(opt.saved_h, kept, b[FB_SAVED].n)))) {
        if (!kept)
            conf_call_failed(t, w2, PIT_ERR_OUT_OF_MEMORY);
        free(kept);
        return;
    }
    if (conf_call_ok(t, w2, pit_moe_ffn_backward(ctx, NULL, b[FB_X].t, b[FB_IDS].t, b[FB_G].t,
                                                 b[FB_W1].t, b[FB_W2].t, b[FB_DY].t,
                                                 partial || dw_only ? NULL : b[FB_DX].t,
                                                 partial || dw_only ? NULL : b[FB_DW1].t, b[FB_DW2].t,
                                                 dw_only ? NULL : b[FB_DG].t, &opt))) {
        for (int i = partial ? 2 : 0; i < (dw_only ? 3 : 4); i++) {
            if (dw_only && i != 2)
                continue;
            snprintf(w2, sizeof w2, "%s %s", what, names[i]);
            conf_compare(t, o, w2, outs[i], ref[i], c->dt);
        }
        if (kept) {
            snprintf(w2, sizeof w2, "%s: options->saved_h unchanged by the backward", what);
            conf_compare_tensor(t, o, w2, opt.saved_h, b[FB_SAVED].h, kept, b[FB_SAVED].n, 0.0);
        }
    }
    free(kept);
}

static void ffn_case_run(pit_context *ctx, const conf_opts *o, conf_tally *t, const ffn_case *c,
                         pit_rng *rng)
{
    const ffn_shape *s = c->s;
    char what[200];
    snprintf(what, sizeof what, "moe_ffn %s T%lld H%lld F%lld E%lld top-%lld %s %s%s",
             pit_dtype_name(c->dt), (long long)s->t, (long long)s->h, (long long)s->f,
             (long long)s->e, (long long)s->k, act_names[c->act], routing_names[c->routing],
             variant_names[c->variant]);
    ffn_bufs f;
    pit_status st = ffn_make(ctx, c, &f);
    if (st == PIT_SUCCESS)
        st = ffn_inputs(&f, c, rng);
    double *ref[5];
    int have = 1;
    for (int i = 0; i < 5; i++)
        have &= (ref[i] = conf_ref_alloc(f.b[i == 0 ? FB_Y : FB_DX + i - 1].n)) != NULL;
    if (st == PIT_SUCCESS && have) {
        const pit_ref_ffn shape = {s->t, s->h, s->f, s->e, s->k, c->act};
        dbuf *b = f.b;
        pit_ref_ffn_grads g = {ref[1], ref[2], ref[3], ref[4]};
        pit_ref_moe_ffn(&shape, b[FB_X].h, f.ids, b[FB_G].h, b[FB_W1].h, b[FB_W2].h, ref[0]);
        pit_ref_moe_ffn_backward(&shape, b[FB_X].h, f.ids, b[FB_G].h, b[FB_W1].h, b[FB_W2].h,
                                 b[FB_DY].h, &g);
        ffn_forward(ctx, o, t, c, &f, ref[0], what);
        ffn_backward(ctx, o, t, c, &f, ref + 1, what);
    } else {
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    }
    for (int i = 0; i < 5; i++)
        free(ref[i]);
    ffn_free(&f);
}

/* Every activation on every shape, skewed and on one expert (quick: the
 * two routings by turns); then no id in range, the caller's scratch, a
 * backward with outputs left out, and the empty shapes. */
static void ffn_dtype_cases(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                            pit_rng *rng)
{
    const ffn_shape *shapes = o->quick ? ffn_quick_shapes : ffn_shapes;
    const int nshapes = o->quick ? NFFN_QUICK_SHAPES : NFFN_SHAPES;
    for (int si = 0; si < nshapes; si++)
        for (int a = 0; a < NFFN_ACTS; a++)
            for (int r = 0; r < 2; r++) {
                if (o->quick && r != (si + a) % 2)
                    continue;
                ffn_case c = {&shapes[si], dt, a, (ffn_routing)r, FFN_PLAIN};
                ffn_case_run(ctx, o, t, &c, rng);
            }
    const ffn_shape *wide = &shapes[nshapes - 1];
    const ffn_case extra[6] = {{wide, dt, PIT_ACT_SWIGLU, ROUTE_NONE, FFN_PLAIN},
                               {wide, dt, PIT_ACT_GEGLU, ROUTE_SKEWED, FFN_SCRATCH},
                               {wide, dt, PIT_ACT_SWIGLU, ROUTE_SKEWED, FFN_PARTIAL},
                               {wide, dt, PIT_ACT_SWIGLU, ROUTE_SKEWED, FFN_SAVED},
                               {wide, dt, PIT_ACT_RELU, ROUTE_ONE_EXPERT, FFN_SAVED},
                               {wide, dt, PIT_ACT_GEGLU, ROUTE_SKEWED, FFN_SAVED_DW}};
    for (int i = 0; i < 6; i++)
        ffn_case_run(ctx, o, t, &extra[i], rng);
    for (int i = 0; i < NFFN_EMPTY; i++) { /* every other one keeping the first product */
        ffn_case c = {&ffn_empty_shapes[i], dt, PIT_ACT_SWIGLU, ROUTE_SKEWED, i % 2 ? FFN_SAVED : FFN_PLAIN};
        ffn_case_run(ctx, o, t, &c, rng);
    }
    pit_rng tc_rng;
    pit_rng_seed(&tc_rng, o->seed + FFN_TC_SEED + (uint64_t)dt);
    for (int sh = 0; sh < NFFN_TC_SHAPES; sh++) {
        for (int a = 0; a < NFFN_ACTS; a++)
            for (int r = 0; r < 2; r++) {
                if (o->quick && (a > PIT_ACT_GEGLU || r))
                    continue;
                ffn_case c = {&ffn_tc_shapes[sh], dt, a, (ffn_routing)r, FFN_PLAIN};
                ffn_case_run(ctx, o, t, &c, &tc_rng);
            }
        const ffn_case scratch = {&ffn_tc_shapes[sh], dt, PIT_ACT_SWIGLU, ROUTE_SKEWED, FFN_SCRATCH};
        ffn_case_run(ctx, o, t, &scratch, &tc_rng);
        const ffn_case saved = {&ffn_tc_shapes[sh], dt, PIT_ACT_SWIGLU, ROUTE_SKEWED, FFN_SAVED};
        ffn_case_run(ctx, o, t, &saved, &tc_rng);
    }
}

void conf_moe_ffn(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 9);
    const int ncases = (o->quick ? NFFN_QUICK_SHAPES * NFFN_ACTS + 2 : (NFFN_SHAPES + 1) * NFFN_ACTS * 2) + 6 +
                       NFFN_EMPTY + 2;
    for (int d = 0; d < 3; d++)
        if (conf_dtype_supported(ctx, conf_dtypes[d], t, ncases * 7, "pit_moe_ffn", ffn_probe))
            ffn_dtype_cases(ctx, o, t, conf_dtypes[d], &rng);
}
