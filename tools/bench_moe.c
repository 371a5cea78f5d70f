/*
 * tools/bench_moe.c - `pit bench --suite moe`: the MoE expert FFN in one
 * call (pit_moe_ffn, SwiGLU) at the shapes of MoE models, against
 * baselines measured in the same run without any framework:
 *   dense  the up and down GEMMs of all T*k token-slots through one expert's
 *          weights: the layer's FLOPs as dense GEMMs (pit_matmul_dense, the
 *          vendor's GEMM)
 *   loop   per expert with tokens, the up and down GEMMs of its tokens
 *          (pit_matmul_dense); the tokens are gathered by expert before the
 *          timing, and the activation and the gated scatter are left out,
 *          so the loop's time is a lower bound of a real loop's
 *   floor  the routed experts' weights read once, X read and Y written, at
 *          the device-to-device copy bandwidth measured in the run
 * and pit_moe_ffn_backward (every gradient: dX, dW_gate_up, dW_down, dgates,
 * from a random dY) against the forward; its results are checked by the
 * conformance suite, not here.
 * Routing is a softmax router's top-k over random logits with a per-expert
 * bias (expert 0 the most popular), new for each input set. pit's output
 * (input set 0, NaN before the call) is checked against the double
 * reference on sampled tokens (all of them with --quick) before anything is
 * timed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "example_gen.h"

#define MAX_SETS 4
/* Tokens checked at full size: the double reference of one Mixtral expert
 * holds 176M weights. */
#define FULL_SAMPLE 8
/* --quick divides T (down to QUICK_MIN_T), H and F by this. */
#define QUICK_DIV 32
#define QUICK_MIN_T 16
/* The router's per-expert bias falls by this much from expert 0 to expert
 * E-1; with logits of unit spread the busiest expert gets 2-3x the mean
 * load, and a few of 128 or 160 experts next to none. */
#define ROUTER_BIAS 1.5
/* Random values drawn once per dtype and scale: weights are rows copied
 * from them at random places (drawing billions of values would take the
 * host longer than the whole suite's device time). */
#define POOL_VALUES ((size_t)1 << 20)

typedef struct moe_shape {
    const char *model;
    int64_t t, h, f;
    int e, k;
} moe_shape;

/* The routed experts of each model (shared experts are a dense FFN beside
 * them); a model's points follow each other so that they share its weights.
 * Mixtral and Qwen3-30B-A3B (fine-grained: 128 experts, top-8) at 8192
 * tokens are the targets of docs/PERF.md. */
static const moe_shape moe_shapes[] = {
    {"mixtral-8x7b", 8192, 4096, 14336, 8, 2},    {"mixtral-8x7b", 512, 4096, 14336, 8, 2},
    {"qwen3-30b-a3b", 8192, 2048, 768, 128, 8},   {"qwen3-30b-a3b", 512, 2048, 768, 128, 8},
    {"qwen1.5-moe-a2.7b", 8192, 2048, 1408, 60, 4}, {"deepseek-v2-lite", 8192, 2048, 1408, 64, 6},
    {"deepseek-v2-lite", 512, 2048, 1408, 64, 6}, {"deepseek-v2", 4096, 5120, 1536, 160, 6},
};
#define NSHAPES ((int)(sizeof moe_shapes / sizeof moe_shapes[0]))

int bench_moe_has_model(const char *name)
{
    for (int i = 0; i < NSHAPES; i++)
        if (!strcmp(name, moe_shapes[i].model))
            return 1;
    return 0;
}

const char *bench_moe_model_list(void)
{
    static char list[256];
    if (!list[0]) /* a model's points follow each other: a name differs from the one before */
        for (int i = 0; i < NSHAPES; i++)
            if (!i || strcmp(moe_shapes[i].model, moe_shapes[i - 1].model))
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         moe_shapes[i].model);
    return list;
}

/* Whether --only (a model, or nothing of this suite's) runs shape i. */
static int selected(const bench_opts *o, int i)
{
    return !o->only || !bench_moe_has_model(o->only) || !strcmp(o->only, moe_shapes[i].model);
}

static moe_shape scaled_shape(const bench_opts *o, const moe_shape *s)
{
    moe_shape q = *s;
    if (o->quick) {
        q.t = s->t / QUICK_DIV > QUICK_MIN_T ? s->t / QUICK_DIV : QUICK_MIN_T;
        q.h = s->h / QUICK_DIV;
        q.f = s->f / QUICK_DIV;
    }
    return q;
}

/* A point's figures, and the failure's message (kept before the clean-up
 * calls clear it). */
typedef struct moe_result {
    moe_shape shape;
    pit_dtype dt;
    double busiest, routed; /* the busiest expert's load over the mean; experts with tokens (set means) */
    double flops, floor_bytes;
    double pit_ms, pit_spread, dense_ms, dense_spread, loop_ms, loop_spread, floor_ms, err;
    double bwd_ms, bwd_spread; /* pit_moe_ffn_backward, every gradient */
    /* the training pair: the forward keeping its first product (options->saved_h), the backward reading it */
    double keep_ms, keep_spread, kept_bwd_ms, kept_bwd_spread;
    int ok;
    char choice[96];
    char error[320];
} moe_result;

/* Every pit call and host allocation is checked; the first failure is kept in r->error. */
#define TRY(call) BENCH_TRY(r->error, call)

/* ---- random values -------------------------------------------------------------------- */

typedef struct value_pool {
    size_t es;
    unsigned char *v;
} value_pool;

/* POOL_VALUES values in [-scale, scale] stored as dt. */
static pit_status pool_make(pit_rng *rng, pit_dtype dt, double scale, value_pool *p)
{
    double *x = malloc(POOL_VALUES * sizeof *x);
    p->es = pit_dtype_size(dt);
    p->v = malloc(POOL_VALUES * p->es);
    if (!x || !p->v) {
        free(x);
        return PIT_ERR_OUT_OF_MEMORY;
    }
    pit_ref_fill_random(rng, x, POOL_VALUES);
    for (size_t i = 0; i < POOL_VALUES; i++)
        x[i] *= scale;
    pit_ref_from_double(dt, x, POOL_VALUES, p->v);
    free(x);
    return PIT_SUCCESS;
}

/* dst [rows, cols] (cols <= POOL_VALUES): each row the pool's values from a random place on. */
static void pool_fill(const value_pool *p, pit_rng *rng, int64_t rows, int64_t cols, void *dst)
{
    for (int64_t r = 0; r < rows; r++) {
        size_t at = (size_t)(pit_rng_next(rng) % (POOL_VALUES - (size_t)cols + 1));
        memcpy((unsigned char *)dst + (size_t)(r * cols) * p->es, p->v + at * p->es, (size_t)cols * p->es);
    }
}

/* ---- device buffers ------------------------------------------------------------------- */

/* Rows [first, first + rows) of t's memory seen as a [*, cols] matrix. */
static pit_status view_rows(pit_context *ctx, const pit_tensor *t, int64_t first, int64_t rows, int64_t cols,
                            pit_tensor **v)
{
    pit_tensor_desc d;
    pit_status s = pit_tensor_get_desc(t, &d);
    size_t at = d.byte_offset + (size_t)(first * cols) * pit_dtype_size(d.dtype);
    return s != PIT_SUCCESS ? s : pit_tensor_wrap(ctx, d.dtype, 2, (int64_t[]){rows, cols}, NULL, d.data, at, v);
}

static void destroy_views(pit_tensor **v, int n)
{
    for (int i = 0; v && i < n; i++)
        pit_tensor_destroy(v[i]);
    free(v);
}


/* A model's weights, kept on the device for the points that share them. */
typedef struct moe_weights {
    pit_dtype dt;
    int64_t h, f;
    int e;
    pit_tensor *W1, *W2;   /* W_gate_up [E, H, 2F], W_down [E, F, H] */
    pit_tensor **w1, **w2; /* expert e's [H, 2F] and [F, H] */
} moe_weights;

static void weights_free(moe_weights *w)
{
    destroy_views(w->w1, w->e);
    destroy_views(w->w2, w->e);
    pit_tensor_destroy(w->W1);
    pit_tensor_destroy(w->W2);
    memset(w, 0, sizeof *w);
}

static int weights_fit(const moe_weights *w, pit_dtype dt, const moe_shape *s)
{
    return w->W1 && w->dt == dt && w->h == s->h && w->f == s->f && w->e == s->e;
}

/* Uniform weights scaled by 1/sqrt(fan-in), uploaded an expert at a time. */
static pit_status weights_make(pit_context *ctx, pit_dtype dt, const moe_shape *s, pit_rng *rng, moe_weights *w,
                               moe_result *r)
{
    const int64_t H = s->h, F = s->f;
    value_pool p1 = {0}, p2 = {0};
    unsigned char *buf = malloc((size_t)(H * 2 * F) * pit_dtype_size(dt));
    pit_status st = PIT_SUCCESS;
    *w = (moe_weights){.dt = dt, .h = H, .f = F, .e = s->e};
    w->w1 = calloc((size_t)s->e, sizeof *w->w1);
    w->w2 = calloc((size_t)s->e, sizeof *w->w2);
    TRY(bench_host_ok(buf && w->w1 && w->w2));
    TRY(pool_make(rng, dt, 1.0 / sqrt((double)H), &p1));
    TRY(pool_make(rng, dt, 1.0 / sqrt((double)F), &p2));
    TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){s->e, H, 2 * F}, &w->W1));
    TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){s->e, F, H}, &w->W2));
    for (int e = 0; e < s->e; e++) {
        TRY(view_rows(ctx, w->W1, e * H, H, 2 * F, &w->w1[e]));
        TRY(view_rows(ctx, w->W2, e * F, F, H, &w->w2[e]));
        pool_fill(&p1, rng, H, 2 * F, buf);
        TRY(pit_tensor_upload(w->w1[e], NULL, buf, (size_t)(H * 2 * F) * p1.es));
        pool_fill(&p2, rng, F, H, buf);
        TRY(pit_tensor_upload(w->w2[e], NULL, buf, (size_t)(F * H) * p2.es));
    }
done:
    free(p1.v);
    free(p2.v);
    free(buf);
    if (st != PIT_SUCCESS)
        weights_free(w);
    return st;
}

/* ---- input sets ------------------------------------------------------------------------- */

/* One input set: new tokens, new routing, and the tokens gathered by expert
 * for the baselines. */
typedef struct moe_set {
    pit_tensor *X, *ids, *gates; /* [T, H], [T, k] i32, [T, k] f32 */
    pit_tensor *Xg;              /* X's rows by expert, one a token-slot: [T*k, H] */
    pit_tensor **xg, **hg, **ag, **yg; /* expert e's rows of Xg, Hg, Ag, Yg; NULL without tokens */
} moe_set;

/* What the baselines write: Hg [T*k, 2F], Ag its first T*k*F values seen
 * as [T*k, F] (the down GEMM's input), Yg [T*k, H]. */
typedef struct moe_bench {
    pit_context *ctx;
    const moe_weights *w;
    int sets;
    pit_tensor *Y, *Hg, *Ag, *Yg;
    pit_tensor *dY, *dX, *dW1, *dW2, *dgates; /* the backward's */
    pit_tensor *saved[MAX_SETS];              /* each input set's first product, kept by the forward */
    moe_set set[MAX_SETS];
} moe_bench;

/* The host side of the input set made last (set 0's, for the check). */
typedef struct moe_host {
    unsigned char *x, *xg; /* X [T, H] and Xg [T*k, H] as the dtype */
    int32_t *ids;
    double *gates, *logit;
    int64_t *load, *first; /* expert e's token-slots, and its first row of Xg */
} moe_host;

static void host_free(moe_host *h)
{
    free(h->x);
    free(h->xg);
    free(h->ids);
    free(h->gates);
    free(h->logit);
    free(h->load);
    free(h->first);
}

static pit_status host_alloc(const moe_shape *s, size_t es, moe_host *h)
{
    const size_t slots = (size_t)(s->t * s->k);
    h->x = malloc((size_t)(s->t * s->h) * es);
    h->xg = malloc(slots * (size_t)s->h * es);
    h->ids = malloc(slots * sizeof *h->ids);
    h->gates = malloc(slots * sizeof *h->gates);
    h->logit = malloc((size_t)(s->t * s->e) * sizeof *h->logit);
    h->load = calloc((size_t)s->e, sizeof *h->load);
    h->first = calloc((size_t)s->e, sizeof *h->first);
    return bench_host_ok(h->x && h->xg && h->ids && h->gates && h->logit && h->load && h->first);
}

/* The router: logits of unit spread (a sum of three uniform values) plus a
 * bias falling by ROUTER_BIAS from expert 0 to expert E-1, the top-k taken,
 * gates a softmax over them (examples/example_gen.h). */
static void route(pit_rng *rng, const moe_shape *s, moe_host *h)
{
    for (int64_t i = 0; i < s->t * s->e; i++)
        h->logit[i] = pit_rng_uniform(rng) + pit_rng_uniform(rng) + pit_rng_uniform(rng);
    memset(h->load, 0, (size_t)s->e * sizeof *h->load);
    ex_gen_route(h->logit, s->t, s->e, s->k, s->e > 1 ? ROUTER_BIAS / (s->e - 1) : 0.0, h->ids, h->gates,
                 h->load);
}

/* h->xg = X's token-slots by expert, in token order within an expert. */
static void gather_by_expert(const moe_shape *s, size_t es, moe_host *h)
{
    const size_t row = (size_t)s->h * es;
    int64_t next = 0;
    for (int e = 0; e < s->e; e++) {
        h->first[e] = next;
        next += h->load[e];
    }
    for (int64_t i = 0; i < s->t * s->k; i++) {
        int64_t at = h->first[h->ids[i]]++;
        memcpy(h->xg + (size_t)at * row, h->x + (size_t)(i / s->k) * row, row);
    }
    for (int e = 0; e < s->e; e++)
        h->first[e] -= h->load[e];
}

static void set_free(moe_set *s, int e)
{
    pit_tensor *t[] = {s->X, s->ids, s->gates, s->Xg};
    for (int i = 0; i < 4; i++)
        pit_tensor_destroy(t[i]);
    destroy_views(s->xg, e);
    destroy_views(s->hg, e);
    destroy_views(s->ag, e);
    destroy_views(s->yg, e);
    memset(s, 0, sizeof *s);
}

static pit_status set_make(moe_bench *b, const moe_shape *s, pit_rng *rng, const value_pool *xp, moe_host *h,
                           moe_set *set, moe_result *r)
{
    const pit_dtype dt = b->w->dt;
    const int64_t T = s->t, H = s->h, F = s->f, slots = s->t * s->k;
    const size_t es = pit_dtype_size(dt);
    pit_status st = PIT_SUCCESS;
    pool_fill(xp, rng, T, H, h->x);
    route(rng, s, h);
    gather_by_expert(s, es, h);
    set->xg = calloc((size_t)s->e, sizeof *set->xg);
    set->hg = calloc((size_t)s->e, sizeof *set->hg);
    set->ag = calloc((size_t)s->e, sizeof *set->ag);
    set->yg = calloc((size_t)s->e, sizeof *set->yg);
    TRY(bench_host_ok(set->xg && set->hg && set->ag && set->yg));
    TRY(pit_tensor_create(b->ctx, dt, 2, (int64_t[]){T, H}, &set->X));
    TRY(pit_tensor_create(b->ctx, PIT_I32, 2, (int64_t[]){T, s->k}, &set->ids));
    TRY(pit_tensor_create(b->ctx, PIT_F32, 2, (int64_t[]){T, s->k}, &set->gates));
    TRY(pit_tensor_create(b->ctx, dt, 2, (int64_t[]){slots, H}, &set->Xg));
    TRY(pit_tensor_upload(set->X, NULL, h->x, (size_t)(T * H) * es));
    TRY(pit_tensor_upload(set->ids, NULL, h->ids, (size_t)slots * sizeof *h->ids));
    TRY(bench_upload(set->gates, PIT_F32, h->gates, (size_t)slots));
    TRY(pit_tensor_upload(set->Xg, NULL, h->xg, (size_t)(slots * H) * es));
    for (int e = 0; e < s->e; e++) {
        const int64_t at = h->first[e], n = h->load[e];
        if (n == 0)
            continue;
        TRY(view_rows(b->ctx, set->Xg, at, n, H, &set->xg[e]));
        TRY(view_rows(b->ctx, b->Hg, at, n, 2 * F, &set->hg[e]));
        TRY(view_rows(b->ctx, b->Ag, at, n, F, &set->ag[e]));
        TRY(view_rows(b->ctx, b->Yg, at, n, H, &set->yg[e]));
    }
done:
    return st;
}

/* The set's routing in r: the busiest expert's load over the mean, the
 * experts with tokens (averaged over the sets). */
static void note_routing(const moe_shape *s, const moe_host *h, int sets, moe_result *r)
{
    int64_t busiest = 0;
    int routed = 0;
    for (int e = 0; e < s->e; e++) {
        busiest = h->load[e] > busiest ? h->load[e] : busiest;
        routed += h->load[e] > 0;
    }
    r->busiest += (double)busiest * s->e / (double)(s->t * s->k) / sets;
    r->routed += (double)routed / sets;
}

/* ---- what is timed ------------------------------------------------------------------------ */

/* Without a report, as a framework calls it: the call reads nothing back
 * where the backend allows. */
static pit_status run_pit(void *arg, int i)
{
    moe_bench *b = arg;
    const moe_set *s = &b->set[i % b->sets];
    return pit_moe_ffn(b->ctx, NULL, s->X, s->ids, s->gates, b->w->W1, b->w->W2, b->Y, NULL, NULL);
}

static pit_status run_backward(void *arg, int i)
{
    moe_bench *b = arg;
    const moe_set *s = &b->set[i % b->sets];
    return pit_moe_ffn_backward(b->ctx, NULL, s->X, s->ids, s->gates, b->w->W1, b->w->W2, b->dY, b->dX, b->dW1,
                                b->dW2, b->dgates, NULL);
}

/* The training pair: the forward keeping input set i's first product, and
 * the backward reading it. */
static pit_moe_ffn_options kept_options(const moe_bench *b, int i)
{
    pit_moe_ffn_options o = pit_moe_ffn_options_default();
    o.saved_h = b->saved[i % b->sets];
    return o;
}

static pit_status run_keeping(void *arg, int i)
{
    moe_bench *b = arg;
    const moe_set *s = &b->set[i % b->sets];
    const pit_moe_ffn_options o = kept_options(b, i);
    return pit_moe_ffn(b->ctx, NULL, s->X, s->ids, s->gates, b->w->W1, b->w->W2, b->Y, &o, NULL);
}

static pit_status run_backward_kept(void *arg, int i)
{
    moe_bench *b = arg;
    const moe_set *s = &b->set[i % b->sets];
    const pit_moe_ffn_options o = kept_options(b, i);
    return pit_moe_ffn_backward(b->ctx, NULL, s->X, s->ids, s->gates, b->w->W1, b->w->W2, b->dY, b->dX, b->dW1,
                                b->dW2, b->dgates, &o);
}

static pit_status run_dense(void *arg, int i)
{
    moe_bench *b = arg;
    pit_status s = pit_matmul_dense(b->ctx, NULL, b->set[i % b->sets].Xg, b->w->w1[0], b->Hg);
    return s != PIT_SUCCESS ? s : pit_matmul_dense(b->ctx, NULL, b->Ag, b->w->w2[0], b->Yg);
}

static pit_status run_loop(void *arg, int i)
{
    moe_bench *b = arg;
    const moe_set *s = &b->set[i % b->sets];
    pit_status st = PIT_SUCCESS;
    for (int e = 0; e < b->w->e && st == PIT_SUCCESS; e++) {
        if (!s->xg[e])
            continue;
        st = pit_matmul_dense(b->ctx, NULL, s->xg[e], b->w->w1[e], s->hg[e]);
        if (st == PIT_SUCCESS)
            st = pit_matmul_dense(b->ctx, NULL, s->ag[e], b->w->w2[e], s->yg[e]);
    }
    return st;
}

/* ---- the check ------------------------------------------------------------------------------- */

/* Y (NaN before the call, so a row left unwritten shows) against the double
 * reference on sampled tokens of set 0, whose host side h holds. The
 * reference runs an expert at a time (its weights downloaded and widened to
 * double), the other experts' slots given an id out of range. */
static pit_status check_point(moe_bench *b, const bench_opts *o, const moe_shape *s, const moe_host *h,
                              moe_result *r)
{
    const pit_dtype dt = b->w->dt;
    const int64_t T = s->t, H = s->h, F = s->f, K = s->k, ns = bench_sample_count(o, T, FULL_SAMPLE);
    const size_t es = pit_dtype_size(dt);
    const double nan = NAN;
    pit_report rep;
    pit_status st = PIT_SUCCESS;
    unsigned char *y = malloc((size_t)(T * H) * es), *wbuf = malloc((size_t)(H * 2 * F) * es);
    double *xs = malloc((size_t)(ns * H) * sizeof *xs), *got = malloc((size_t)(ns * H) * sizeof *got);
    double *ref = calloc((size_t)(ns * H), sizeof *ref), *part = malloc((size_t)(ns * H) * sizeof *part);
    double *gs = malloc((size_t)(ns * K) * sizeof *gs), *w1 = malloc((size_t)(H * 2 * F) * sizeof *w1);
    double *w2 = malloc((size_t)(F * H) * sizeof *w2);
    int32_t *ids = malloc((size_t)(ns * K) * sizeof *ids);
    TRY(bench_host_ok(y && wbuf && xs && got && ref && part && gs && w1 && w2 && ids));
    pit_ref_from_double(dt, &nan, 1, y);
    for (int64_t i = 1; i < T * H; i++)
        memcpy(y + (size_t)i * es, y, es);
    TRY(pit_tensor_upload(b->Y, NULL, y, (size_t)(T * H) * es));
    TRY(pit_moe_ffn(b->ctx, NULL, b->set[0].X, b->set[0].ids, b->set[0].gates, b->w->W1, b->w->W2, b->Y, NULL,
                    &rep));
    snprintf(r->choice, sizeof r->choice, "%s", rep.choice);
    TRY(pit_tensor_download(b->Y, NULL, y, (size_t)(T * H) * es));
    for (int64_t i = 0; i < ns; i++) {
        int64_t row = bench_sample_row(o, T, FULL_SAMPLE, i);
        pit_ref_to_double(dt, h->x + (size_t)(row * H) * es, (size_t)H, xs + i * H);
        pit_ref_to_double(dt, y + (size_t)(row * H) * es, (size_t)H, got + i * H);
        for (int64_t j = 0; j < K; j++)
            gs[i * K + j] = (float)h->gates[row * K + j]; /* the device has f32 gates */
    }
    const pit_ref_ffn one = {.t = ns, .h = H, .f = F, .e = 1, .k = K, .act = PIT_ACT_SWIGLU};
    for (int e = 0; e < s->e; e++) {
        int used = 0;
        for (int64_t i = 0; i < ns * K; i++) {
            int64_t row = bench_sample_row(o, T, FULL_SAMPLE, i / K);
            ids[i] = h->ids[row * K + i % K] == e ? 0 : -1;
            used |= ids[i] == 0;
        }
        if (!used)
            continue;
        TRY(pit_tensor_download(b->w->w1[e], NULL, wbuf, (size_t)(H * 2 * F) * es));
        pit_ref_to_double(dt, wbuf, (size_t)(H * 2 * F), w1);
        TRY(pit_tensor_download(b->w->w2[e], NULL, wbuf, (size_t)(F * H) * es));
        pit_ref_to_double(dt, wbuf, (size_t)(F * H), w2);
        pit_ref_moe_ffn(&one, xs, ids, gs, w1, w2, part);
        for (int64_t i = 0; i < ns * H; i++)
            ref[i] += part[i];
    }
    r->err = pit_ref_rel_error(ref, got, (size_t)(ns * H));
    r->ok = r->err <= pit_ref_tolerance(dt);
done:
    free(y);
    free(wbuf);
    free(xs);
    free(got);
    free(ref);
    free(part);
    free(gs);
    free(w1);
    free(w2);
    free(ids);
    return st;
}

/* ---- one point ------------------------------------------------------------------------------- */

static void bench_free(moe_bench *b, int e)
{
    for (int i = 0; i < MAX_SETS; i++) {
        set_free(&b->set[i], e);
        pit_tensor_destroy(b->saved[i]);
    }
    pit_tensor *t[] = {b->Y, b->Hg, b->Ag, b->Yg, b->dY, b->dX, b->dW1, b->dW2, b->dgates};
    for (int i = 0; i < 9; i++)
        pit_tensor_destroy(t[i]);
}

/* The backward's tensors: dY random (values of the input pool), the
 * gradients written by every call. */
static pit_status backward_make(moe_bench *b, const moe_shape *s, pit_rng *rng, const value_pool *xp,
                                moe_host *h, moe_result *r)
{
    const pit_dtype dt = b->w->dt;
    pit_status st = PIT_SUCCESS;
    TRY(pit_tensor_create(b->ctx, dt, 2, (int64_t[]){s->t, s->h}, &b->dY));
    TRY(pit_tensor_create(b->ctx, dt, 2, (int64_t[]){s->t, s->h}, &b->dX));
    TRY(pit_tensor_create(b->ctx, dt, 3, (int64_t[]){s->e, s->h, 2 * s->f}, &b->dW1));
    TRY(pit_tensor_create(b->ctx, dt, 3, (int64_t[]){s->e, s->f, s->h}, &b->dW2));
    TRY(pit_tensor_create(b->ctx, PIT_F32, 2, (int64_t[]){s->t, s->k}, &b->dgates));
    pool_fill(xp, rng, s->t, s->h, h->x); /* set 0's X is uploaded already: its host copy is free */
    TRY(pit_tensor_upload(b->dY, NULL, h->x, (size_t)(s->t * s->h) * pit_dtype_size(dt)));
done:
    return st;
}

/* The layer's FLOPs (every slot routed: the router's ids are all in range)
 * and its memory floor's bytes. */
static void note_bounds(const moe_shape *s, pit_dtype dt, double read_gbps, moe_result *r)
{
    const double es = (double)pit_dtype_size(dt), slots = (double)(s->t * s->k);
    const double expert = 3.0 * (double)s->h * (double)s->f; /* H x 2F + F x H */
    r->flops = 2.0 * slots * expert;
    r->floor_bytes = es * (r->routed * expert + 2.0 * (double)(s->t * s->h));
    r->floor_ms = read_gbps > 0 ? r->floor_bytes / (read_gbps * 1e9) * 1e3 : -1;
}

static pit_status measure_point(pit_context *ctx, const bench_opts *o, const moe_shape *s, moe_weights *w,
                                double read_gbps, pit_rng *rng, moe_result *r)
{
    const pit_dtype dt = w->dt;
    const int64_t slots = s->t * s->k;
    moe_bench b = {.ctx = ctx, .w = w, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    moe_host h = {0};
    value_pool xp = {0};
    pit_status st = PIT_SUCCESS;
    TRY(host_alloc(s, pit_dtype_size(dt), &h));
    TRY(pool_make(rng, dt, 1.0, &xp));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){s->t, s->h}, &b.Y));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){slots, 2 * s->f}, &b.Hg));
    TRY(view_rows(ctx, b.Hg, 0, slots, s->f, &b.Ag));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){slots, s->h}, &b.Yg));
    for (int k = b.sets - 1; k >= 0; k--) { /* set 0 last: its host side stays for the check */
        TRY(set_make(&b, s, rng, &xp, &h, &b.set[k], r));
        note_routing(s, &h, b.sets, r);
    }
    note_bounds(s, dt, read_gbps, r);
    TRY(check_point(&b, o, s, &h, r));
    if (r->ok) {
        TRY(bench_time(ctx, o, run_pit, &b, &r->pit_ms, &r->pit_spread));
        TRY(bench_time(ctx, o, run_dense, &b, &r->dense_ms, &r->dense_spread));
        TRY(bench_time(ctx, o, run_loop, &b, &r->loop_ms, &r->loop_spread));
        TRY(backward_make(&b, s, rng, &xp, &h, r));
        TRY(bench_time(ctx, o, run_backward, &b, &r->bwd_ms, &r->bwd_spread));
        for (int k = 0; k < b.sets; k++) { /* every set's first product kept before its backward reads it */
            TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){slots, 2 * s->f}, &b.saved[k]));
            TRY(run_keeping(&b, k));
        }
        TRY(bench_time(ctx, o, run_keeping, &b, &r->keep_ms, &r->keep_spread));
        TRY(bench_time(ctx, o, run_backward_kept, &b, &r->kept_bwd_ms, &r->kept_bwd_spread));
    }
done:
    bench_free(&b, s->e);
    host_free(&h);
    free(xp.v);
    return st;
}

/* ---- the suite --------------------------------------------------------------------------------- */

static void print_row(const void *result)
{
    const moe_result *r = result;
    const moe_shape *s = &r->shape;
    printf("%-17s %-4s %5lld %5lld %5lld %3d %d %5.2f | ", s->model, pit_dtype_name(r->dt), (long long)s->t,
           (long long)s->h, (long long)s->f, s->e, s->k, r->busiest);
    if (!r->ok) {
        printf("[WRONG RESULT: rel. error %.3g against the reference] %s\n", r->err, r->choice);
        return;
    }
    char floor[16] = "-", ratio[16] = "-";
    if (r->floor_ms > 0) {
        snprintf(floor, sizeof floor, "%.4f", r->floor_ms);
        snprintf(ratio, sizeof ratio, "%.2fx", r->pit_ms / r->floor_ms);
    }
    printf("%8.4f %6.1f | %8.4f %8.4f %8s | %6.2fx %7s | %8.4f %6.2fx | %8.4f %8.4f %6.2fx | %.1e %s\n",
           r->pit_ms, r->flops / (r->pit_ms * 1e9), r->dense_ms, r->loop_ms, floor, r->pit_ms / r->dense_ms, ratio,
           r->bwd_ms, r->bwd_ms / r->pit_ms, r->keep_ms, r->kept_bwd_ms, r->kept_bwd_ms / r->pit_ms, r->err,
           r->choice);
}

static void json_row(FILE *f, const void *result, int first)
{
    const moe_result *r = result;
    const moe_shape *s = &r->shape;
    fprintf(f,
            "%s    {\"model\": \"%s\", \"dtype\": \"%s\", \"t\": %lld, \"h\": %lld, \"f\": %lld, \"e\": %d, "
            "\"k\": %d, \"activation\": \"swiglu\", \"busiest_over_mean\": %.4f, \"routed_experts\": %.2f, "
            "\"flops\": %.6g, \"floor_bytes\": %.6g, \"pit_ms\": %.6f, \"pit_spread\": %.4f, "
            "\"dense_ms\": %.6f, \"dense_spread\": %.4f, \"loop_ms\": %.6f, \"loop_spread\": %.4f, "
            "\"floor_ms\": %.6f, \"pit_over_dense\": %.4f, \"pit_over_floor\": %.4f, \"backward_ms\": %.6f, "
            "\"backward_spread\": %.4f, \"backward_over_forward\": %.4f, \"keeping_forward_ms\": %.6f, "
            "\"keeping_forward_spread\": %.4f, \"kept_backward_ms\": %.6f, \"kept_backward_spread\": %.4f, "
            "\"kept_backward_over_forward\": %.4f, \"rel_error\": %.3g, \"correct\": %s, \"choice\": \"%s\"}",
            first ? "" : ",\n", s->model, pit_dtype_name(r->dt), (long long)s->t, (long long)s->h,
            (long long)s->f, s->e, s->k, r->busiest, r->routed, r->flops, r->floor_bytes, r->pit_ms,
            r->pit_spread, r->dense_ms, r->dense_spread, r->loop_ms, r->loop_spread, r->floor_ms,
            r->dense_ms > 0 ? r->pit_ms / r->dense_ms : 0.0, r->floor_ms > 0 ? r->pit_ms / r->floor_ms : 0.0,
            r->bwd_ms, r->bwd_spread, r->pit_ms > 0 ? r->bwd_ms / r->pit_ms : 0.0, r->keep_ms, r->keep_spread,
            r->kept_bwd_ms, r->kept_bwd_spread, r->pit_ms > 0 ? r->kept_bwd_ms / r->pit_ms : 0.0, r->err,
            r->ok ? "true" : "false", r->choice);
}

static void print_header(const bench_opts *o, double gbps, int measured)
{
    printf("\n== moe: pit_moe_ffn (SwiGLU, skewed top-k routing) against baselines of the same run "
           "(median of %d, %d input sets rotated)\n",
           o->repeats, o->sets);
    printf("   dense: the up and down GEMMs of all T*k token-slots through one expert (the same FLOPs);\n"
           "   loop: per expert, the up and down GEMMs of its tokens (gather, activation, scatter not counted);\n"
           "   floor: the routed experts' weights once + X + Y at the copy bandwidth %.1f GB/s%s;\n"
           "   skew: the busiest expert's load over the mean;\n"
           "   bwd: pit_moe_ffn_backward, every gradient (dX, dW_gate_up, dW_down, dgates), over the forward;\n"
           "   keep / kept bwd: the training pair, the forward keeping its first product (options->saved_h)\n"
           "   and the backward reading it instead of recomputing; kept/fwd: that backward over the forward\n",
           gbps, measured ? "" : " (unavailable)");
    printf("%-17s %-4s %5s %5s %5s %3s %s %5s | %8s %6s | %8s %8s %8s | %7s %7s | %8s %7s | %8s %8s %7s | %s\n",
           "model", "dt", "T", "H", "F", "E", "k", "skew", "pit ms", "TF/s", "dense ms", "loop ms", "floor", "pit/dns",
           "pit/flr", "bwd ms", "bwd/fwd", "keep ms", "kept bwd", "kpt/fwd", "rel err, choice");
}

int bench_moe_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    double gbps = 0;
    pit_status cs = bench_measure_memory(ctx, o, o->quick ? (size_t)1 << 20 : (size_t)256 << 20, &gbps);
    print_header(o, gbps, cs == PIT_SUCCESS);
    /* bf16, as the models run; f32 on a device without it */
    pit_dtype dts[3];
    int ndt = bench_suite_dtypes(o, &d, "moe", 1 << (d.has_bf16 ? PIT_BF16 : PIT_F32), dts, json);
    if (json)
        fprintf(json, "  \"moe_copy_gbps\": %.3f,\n  \"moe\": [\n", gbps);
    int total = 0, done = 0;
    for (int i = 0; i < NSHAPES; i++)
        total += ndt * selected(o, i);
    bench_table tab = {"moe", json, print_row, json_row, 0, 0};
    moe_weights w = {0};
    pit_rng rng;
    pit_rng_seed(&rng, 2025);
    for (int t = 0; t < ndt; t++)
        for (int i = 0; i < NSHAPES; i++) {
            if (!selected(o, i))
                continue;
            moe_result r = {.shape = scaled_shape(o, &moe_shapes[i]), .dt = dts[t]};
            char what[64];
            snprintf(what, sizeof what, "%s %s T=%lld", pit_dtype_name(dts[t]), r.shape.model,
                     (long long)r.shape.t);
            bench_progress(what, done++, total);
            pit_status s = PIT_SUCCESS;
            if (!weights_fit(&w, dts[t], &r.shape)) {
                weights_free(&w);
                s = weights_make(ctx, dts[t], &r.shape, &rng, &w, &r);
            }
            if (s == PIT_SUCCESS)
                s = measure_point(ctx, o, &r.shape, &w, gbps, &rng, &r);
            bench_table_add(&tab, what, s, r.error, r.ok, &r);
        }
    weights_free(&w);
    bench_progress("done", total, total);
    if (json)
        fprintf(json, "\n  ],\n");
    return tab.failed;
}
