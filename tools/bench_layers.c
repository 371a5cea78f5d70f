/*
 * tools/bench_layers.c - `pit bench --suite layers`: three layers of
 * dynamic-sparse models with realistic sparsity (the examples' generators),
 * pit's operator against the dense way of computing the same layer, measured
 * in the same run:
 *   moe        top-1 of E experts, skewed routing: pit_moe_forward against one
 *              dense GEMM of all tokens (the FLOP floor) and the padded batched
 *              GEMM (every expert padded to the busiest expert's load)
 *   attention  random block mask at 0.9, new per input set: pit_sparse_attention
 *              against QK^T GEMM + softmax + PV GEMM on the full scores (pit has
 *              no dense softmax: pit_sparse_softmax with an all-ones mask)
 *   relu_ffn   OPT-style FFN with ~90% activation sparsity: pit_relu_ffn against
 *              GEMM + relu + GEMM
 * pit's output (input set 0) is checked against the CPU reference on sampled
 * rows (all rows with --quick).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "example_gen.h"

#define MAX_SETS 4
#define NBASE 2
#define FULL_SAMPLE 16 /* rows checked at full size */

typedef struct layer_result {
    const char *layer;
    pit_dtype dt;
    char shape[64];
    const char *sparsity_what;
    double sparsity;
    double pit_ms, pit_spread;
    int nbase;
    const char *base_name[NBASE];
    double base_ms[NBASE], base_spread[NBASE];
    double err;
    int ok;
    char choice[96];
    char error[320]; /* the failure's message, kept before the clean-up calls clear it */
} layer_result;

/* Every pit call (and host allocation) is checked; the first failure is kept in r->error. */
#define TRY(call) BENCH_TRY(r->error, call)

static double *dalloc(size_t n)
{
    return calloc(n ? n : 1, sizeof(double));
}

/* The rows checked: all of them with --quick, else FULL_SAMPLE spread ones. */
static int64_t sample_count(const bench_opts *o, int64_t rows)
{
    return bench_sample_count(o, rows, FULL_SAMPLE);
}

static int64_t sample_row(const bench_opts *o, int64_t rows, int64_t i)
{
    return bench_sample_row(o, rows, FULL_SAMPLE, i);
}

/* dst [ns, width] = the sampled rows of src [rows, width]. */
static void gather_rows(const bench_opts *o, const double *src, int64_t rows, int64_t width, int64_t ns,
                        double *dst)
{
    for (int64_t i = 0; i < ns; i++)
        memcpy(dst + i * width, src + sample_row(o, rows, i) * width, (size_t)width * sizeof *dst);
}

static void set_result(layer_result *r, double err)
{
    r->err = err;
    r->ok = err <= pit_ref_tolerance(r->dt);
}

static void destroy_all(pit_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pit_tensor_destroy(t[i]);
}

/* ---- MoE ---------------------------------------------------------------- */

typedef struct moe_bench {
    pit_context *ctx;
    int sets;
    pit_tensor *X[MAX_SETS], *ids[MAX_SETS], *gates[MAX_SETS], *Xpad[MAX_SETS], *Ypad[MAX_SETS];
    pit_tensor *W, *W0, *Y, *Yd;
    pit_report rep;
} moe_bench;

/* Timed without a report, so the call reads nothing back (as a framework's
 * would); the checked first call fills b->rep (the choice). */
static pit_status moe_call(moe_bench *b, int i, pit_report *rep)
{
    int k = i % b->sets;
    return pit_moe_forward(b->ctx, NULL, b->X[k], b->ids[k], b->gates[k], b->W, b->Y, rep);
}

static pit_status moe_pit(void *arg, int i)
{
    return moe_call(arg, i, NULL);
}

static pit_status moe_dense_all(void *arg, int i)
{
    moe_bench *b = arg;
    return pit_matmul_dense(b->ctx, NULL, b->X[i % b->sets], b->W0, b->Yd);
}

static pit_status moe_padded(void *arg, int i)
{
    moe_bench *b = arg;
    int k = i % b->sets;
    return pit_matmul_dense(b->ctx, NULL, b->Xpad[k], b->W, b->Ypad[k]);
}

static pit_status bench_moe(pit_context *ctx, const bench_opts *o, pit_dtype dt, layer_result *r)
{
    const int64_t T = o->quick ? 512 : 16384, H = o->quick ? 128 : 1024, N = o->quick ? 256 : 4096;
    const int E = o->quick ? 8 : 64;
    const double skew = 3.0 / (E - 1); /* expert 0's logit 3 above expert E-1's */
    moe_bench b = {.ctx = ctx, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    pit_status st = PIT_SUCCESS;
    r->layer = "moe";
    r->dt = dt;
    snprintf(r->shape, sizeof r->shape, "T%lld %lld->%lld E%d top-1", (long long)T, (long long)H,
             (long long)N, E);
    r->sparsity_what = "busiest/mean";
    double *x = dalloc((size_t)(T * H)), *w = dalloc((size_t)(E * H * N)), *logit = dalloc((size_t)(T * E));
    double *gates = dalloc((size_t)T), *xpad = NULL, *y = NULL, *ys = NULL, *xs = NULL, *gs = NULL, *ref = NULL;
    int32_t *ids = calloc((size_t)T, sizeof *ids), *ids0 = calloc((size_t)T, sizeof *ids0), *is = NULL;
    double *gates0 = dalloc((size_t)T);
    int64_t *load = calloc((size_t)E, sizeof *load), *fill = calloc((size_t)E, sizeof *fill);
    pit_rng rng;
    pit_rng_seed(&rng, 1234);
    TRY(bench_host_ok(x && w && logit && gates && ids && ids0 && gates0 && load && fill));

    pit_ref_fill_random(&rng, w, (size_t)(E * H * N));
    for (int64_t i = 0; i < E * H * N; i++)
        w[i] /= sqrt((double)H);
    bench_round(dt, w, (size_t)(E * H * N));
    TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){E, H, N}, &b.W));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){H, N}, &b.W0));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, N}, &b.Y));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, N}, &b.Yd));
    TRY(bench_upload(b.W, dt, w, (size_t)(E * H * N)));
    TRY(bench_upload(b.W0, dt, w, (size_t)(H * N))); /* expert 0's weights */

    /* Per input set: new tokens, new routing, the padded batch of the dense way.
     * Set 0's tokens stay in x for the check. */
    double busiest = 0;
    for (int k = b.sets - 1; k >= 0; k--) {
        pit_ref_fill_random(&rng, x, (size_t)(T * H));
        bench_round(dt, x, (size_t)(T * H));
        pit_ref_fill_random(&rng, logit, (size_t)(T * E));
        for (int64_t i = 0; i < T * E; i++)
            logit[i] *= 2.0;
        memset(load, 0, (size_t)E * sizeof *load);
        ex_gen_route(logit, T, E, 1, skew, ids, gates, load);
        int64_t cap = 0;
        for (int e = 0; e < E; e++)
            cap = load[e] > cap ? load[e] : cap;
        free(xpad);
        xpad = dalloc((size_t)(E * cap * H));
        TRY(bench_host_ok(xpad != NULL));
        ex_gen_pad_by_expert(x, ids, T, 1, H, E, cap, fill, xpad);
        TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, H}, &b.X[k]));
        TRY(pit_tensor_create(ctx, PIT_I32, 2, (int64_t[]){T, 1}, &b.ids[k]));
        TRY(pit_tensor_create(ctx, PIT_F32, 2, (int64_t[]){T, 1}, &b.gates[k]));
        TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){E, cap, H}, &b.Xpad[k]));
        TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){E, cap, N}, &b.Ypad[k]));
        TRY(bench_upload(b.X[k], dt, x, (size_t)(T * H)));
        TRY(pit_tensor_upload(b.ids[k], NULL, ids, (size_t)T * sizeof *ids));
        TRY(bench_upload(b.gates[k], PIT_F32, gates, (size_t)T));
        TRY(bench_upload(b.Xpad[k], dt, xpad, (size_t)(E * cap * H)));
        busiest += (double)cap * E / (double)T / b.sets;
        if (k == 0) {
            memcpy(ids0, ids, (size_t)T * sizeof *ids);
            memcpy(gates0, gates, (size_t)T * sizeof *gates);
        }
    }
    r->sparsity = busiest;

    /* pit once on set 0, checked against the reference on sampled tokens. */
    TRY(moe_call(&b, 0, &b.rep));
    int64_t ns = sample_count(o, T);
    y = dalloc((size_t)(T * N));
    xs = dalloc((size_t)(ns * H));
    gs = dalloc((size_t)ns);
    ref = dalloc((size_t)(ns * N));
    ys = dalloc((size_t)(ns * N));
    is = calloc((size_t)ns, sizeof *is);
    TRY(bench_host_ok(y && xs && gs && ref && ys && is));
    TRY(bench_download(b.Y, dt, y, (size_t)(T * N)));
    gather_rows(o, x, T, H, ns, xs);
    gather_rows(o, y, T, N, ns, ys);
    for (int64_t i = 0; i < ns; i++) {
        is[i] = ids0[sample_row(o, T, i)];
        gs[i] = gates0[sample_row(o, T, i)];
    }
    pit_ref_moe_forward(ns, H, N, E, 1, xs, is, gs, w, ref);
    set_result(r, pit_ref_rel_error(ref, ys, (size_t)(ns * N)));

    TRY(bench_time(ctx, o, moe_pit, &b, &r->pit_ms, &r->pit_spread));
    snprintf(r->choice, sizeof r->choice, "%s", b.rep.choice);
    r->nbase = 2;
    r->base_name[0] = "dense GEMM of all tokens (floor)";
    TRY(bench_time(ctx, o, moe_dense_all, &b, &r->base_ms[0], &r->base_spread[0]));
    r->base_name[1] = "padded batched GEMM (E x max load)";
    TRY(bench_time(ctx, o, moe_padded, &b, &r->base_ms[1], &r->base_spread[1]));
done:
    for (int k = 0; k < MAX_SETS; k++) {
        pit_tensor *t[] = {b.X[k], b.ids[k], b.gates[k], b.Xpad[k], b.Ypad[k]};
        destroy_all(t, 5);
    }
    destroy_all((pit_tensor *[]){b.W, b.W0, b.Y, b.Yd}, 4);
    free(x);
    free(w);
    free(logit);
    free(gates);
    free(gates0);
    free(ids);
    free(ids0);
    free(load);
    free(fill);
    free(xpad);
    free(y);
    free(ys);
    free(xs);
    free(gs);
    free(ref);
    free(is);
    return st;
}

/* ---- sparse attention ----------------------------------------------------- */

typedef struct attn_bench {
    pit_context *ctx;
    int sets;
    int32_t block;
    float scale;
    pit_tensor *Q, *K, *V, *O, *M[MAX_SETS];
    pit_tensor *Full, *Kt, *S, *P, *Od; /* the dense way */
    pit_report rep;
} attn_bench;

static pit_status attn_pit(void *arg, int i)
{
    attn_bench *b = arg;
    return pit_sparse_attention(b->ctx, NULL, b->Q, b->K, b->V, b->M[i % b->sets], b->O, b->scale, b->block,
                                &b->rep);
}

static pit_status attn_dense(void *arg, int i)
{
    attn_bench *b = arg;
    (void)i; /* the dense way computes every score: the mask does not matter */
    pit_status s = pit_matmul_dense(b->ctx, NULL, b->Q, b->Kt, b->S);
    if (s == PIT_SUCCESS)
        s = pit_sparse_softmax(b->ctx, NULL, b->S, b->Full, b->P, b->scale, NULL);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(b->ctx, NULL, b->P, b->V, b->Od);
    return s;
}

static pit_status bench_attention(pit_context *ctx, const bench_opts *o, pit_dtype dt, layer_result *r)
{
    const int64_t BH = o->quick ? 2 : 16, L = o->quick ? 256 : 8192, D = 64;
    const int blk = o->quick ? 32 : 128; /* 128x128 blocks at full size, as block-sparse attention uses */
    const double sparsity = 0.9;
    attn_bench b = {.ctx = ctx, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS,
                    .block = blk, .scale = 1.0f / sqrtf((float)D)};
    pit_status st = PIT_SUCCESS;
    r->layer = "attention";
    r->dt = dt;
    snprintf(r->shape, sizeof r->shape, "BH%lld L%lld d%lld blk%d u8 mask", (long long)BH, (long long)L,
             (long long)D, blk);
    r->sparsity_what = "mask zeros";
    size_t nq = (size_t)(BH * L * D), nm = (size_t)(L * L);
    double *q = dalloc(nq), *k = dalloc(nq), *v = dalloc(nq), *m0 = dalloc(nm), *m = dalloc(nm);
    double *o_got = NULL, *srow = dalloc((size_t)L), *prow = dalloc((size_t)L), *ref = NULL, *got = NULL;
    pit_rng rng;
    pit_rng_seed(&rng, 77);
    TRY(bench_host_ok(q && k && v && m0 && m && srow && prow));
    pit_ref_fill_random(&rng, q, nq);
    pit_ref_fill_random(&rng, k, nq);
    pit_ref_fill_random(&rng, v, nq);
    const int64_t qshape[3] = {BH, L, D}, sshape[3] = {BH, L, L};
    TRY(pit_tensor_create(ctx, dt, 3, qshape, &b.Q));
    TRY(pit_tensor_create(ctx, dt, 3, qshape, &b.K));
    TRY(pit_tensor_create(ctx, dt, 3, qshape, &b.V));
    TRY(pit_tensor_create(ctx, dt, 3, qshape, &b.O));
    TRY(bench_upload(b.Q, dt, q, nq));
    TRY(bench_upload(b.K, dt, k, nq));
    TRY(bench_upload(b.V, dt, v, nq));
    /* A new random block mask per input set (shared by the heads), as a
     * framework passes it: u8 (torch.bool through DLPack); set 0's kept in m0. */
    double zeros = 0;
    for (int s = 0; s < b.sets; s++) {
        double *mm = s == 0 ? m0 : m;
        for (size_t i = 0; i < nm; i++)
            mm[i] = 1.0;
        zeros += pit_ref_sparsify_tiles(&rng, mm, 1, L, L, blk, blk, 0, 0, sparsity) / b.sets;
        TRY(pit_tensor_create(ctx, PIT_U8, 2, (int64_t[]){L, L}, &b.M[s]));
        TRY(bench_upload(b.M[s], PIT_U8, mm, nm));
    }
    r->sparsity = zeros;
    /* The dense way's buffers; K^T made once, outside the timing; the all-ones mask. */
    for (size_t i = 0; i < nm; i++)
        m[i] = 1.0;
    TRY(pit_tensor_create(ctx, PIT_U8, 2, (int64_t[]){L, L}, &b.Full));
    TRY(bench_upload(b.Full, PIT_U8, m, nm));
    TRY(pit_tensor_create(ctx, dt, 3, (int64_t[]){BH, D, L}, &b.Kt));
    TRY(pit_tensor_create(ctx, dt, 3, sshape, &b.S));
    TRY(pit_tensor_create(ctx, dt, 3, sshape, &b.P));
    TRY(pit_tensor_create(ctx, dt, 3, qshape, &b.Od));
    TRY(pit_transpose(ctx, NULL, b.K, b.Kt));

    /* pit once on set 0; the sampled query rows through the reference's
     * SDDMM, masked softmax and product (rows of attention are independent). */
    TRY(attn_pit(&b, 0));
    o_got = dalloc(nq);
    int64_t ns = sample_count(o, BH * L);
    ref = dalloc((size_t)(ns * D));
    got = dalloc((size_t)(ns * D));
    TRY(bench_host_ok(o_got && ref && got));
    TRY(bench_download(b.O, dt, o_got, nq));
    gather_rows(o, o_got, BH * L, D, ns, got);
    for (int64_t i = 0; i < ns; i++) {
        int64_t row = sample_row(o, BH * L, i), h = row / L, qi = row % L;
        pit_ref_sddmm(1, 1, L, D, q + row * D, k + h * L * D, m0 + qi * L, 0, srow);
        pit_ref_softmax(1, 1, L, srow, m0 + qi * L, 0, b.scale, prow);
        pit_ref_matmul(1, 1, D, L, prow, v + h * L * D, ref + i * D);
    }
    set_result(r, pit_ref_rel_error(ref, got, (size_t)(ns * D)));

    TRY(bench_time(ctx, o, attn_pit, &b, &r->pit_ms, &r->pit_spread));
    snprintf(r->choice, sizeof r->choice, "%s", b.rep.choice);
    r->nbase = 1;
    r->base_name[0] = "QK^T + softmax(all-ones mask) + PV";
    TRY(bench_time(ctx, o, attn_dense, &b, &r->base_ms[0], &r->base_spread[0]));
done:
    destroy_all(b.M, MAX_SETS);
    destroy_all((pit_tensor *[]){b.Q, b.K, b.V, b.O, b.Full, b.Kt, b.S, b.P, b.Od}, 9);
    free(q);
    free(k);
    free(v);
    free(m0);
    free(m);
    free(o_got);
    free(got);
    free(srow);
    free(prow);
    free(ref);
    return st;
}

/* ---- ReLU FFN --------------------------------------------------------------- */

typedef struct ffn_bench {
    pit_context *ctx;
    int sets;
    pit_tensor *X[MAX_SETS], *W1, *W2, *H, *Y, *Hd, *Yd;
    pit_report rep;
} ffn_bench;

static pit_status ffn_pit(void *arg, int i)
{
    ffn_bench *b = arg;
    return pit_relu_ffn(b->ctx, NULL, b->X[i % b->sets], b->W1, b->W2, b->H, b->Y, &b->rep);
}

static pit_status ffn_dense(void *arg, int i)
{
    ffn_bench *b = arg;
    pit_status s = pit_matmul_dense(b->ctx, NULL, b->X[i % b->sets], b->W1, b->Hd);
    if (s == PIT_SUCCESS)
        s = pit_relu(b->ctx, NULL, b->Hd, b->Hd);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(b->ctx, NULL, b->Hd, b->W2, b->Yd);
    return s;
}

static pit_status bench_ffn(pit_context *ctx, const bench_opts *o, layer_result *r)
{
    const int64_t T = o->quick ? 256 : 4096, D = o->quick ? 64 : 1024, F = o->quick ? 256 : 4096;
    const int64_t passage = 64;
    const pit_dtype dt = PIT_F32;
    ffn_bench b = {.ctx = ctx, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    pit_status st = PIT_SUCCESS;
    r->layer = "relu_ffn";
    r->dt = dt;
    snprintf(r->shape, sizeof r->shape, "T%lld %lld->%lld->%lld", (long long)T, (long long)D, (long long)F,
             (long long)D);
    r->sparsity_what = "H zeros";
    double *x0 = dalloc((size_t)(T * D)), *x = dalloc((size_t)(T * D)), *ctxv = dalloc((size_t)D);
    double *w1 = dalloc((size_t)(D * F)), *w2 = dalloc((size_t)(F * D));
    double *h = NULL, *y = NULL, *xs = NULL, *hs = NULL, *ys = NULL, *hg = NULL, *yg = NULL;
    pit_rng rng;
    pit_rng_seed(&rng, 11);
    TRY(bench_host_ok(x0 && x && ctxv && w1 && w2));
    ex_gen_ffn_weights(&rng, D, F, D, w1, w2);
    bench_round(dt, w1, (size_t)(D * F));
    bench_round(dt, w2, (size_t)(F * D));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){D, F}, &b.W1));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){F, D}, &b.W2));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, F}, &b.H));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, D}, &b.Y));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, F}, &b.Hd));
    TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, D}, &b.Yd));
    TRY(bench_upload(b.W1, dt, w1, (size_t)(D * F)));
    TRY(bench_upload(b.W2, dt, w2, (size_t)(F * D)));
    /* New passages per input set (so new activation patterns); set 0's kept in x0. */
    for (int s = 0; s < b.sets; s++) {
        double *xx = s == 0 ? x0 : x;
        ex_gen_ffn_tokens(&rng, T, D, passage, ctxv, xx);
        bench_round(dt, xx, (size_t)(T * D));
        TRY(pit_tensor_create(ctx, dt, 2, (int64_t[]){T, D}, &b.X[s]));
        TRY(bench_upload(b.X[s], dt, xx, (size_t)(T * D)));
    }

    /* pit once on set 0: H and Y checked on sampled tokens. */
    TRY(ffn_pit(&b, 0));
    int64_t ns = sample_count(o, T);
    h = dalloc((size_t)(T * F));
    y = dalloc((size_t)(T * D));
    xs = dalloc((size_t)(ns * D));
    hs = dalloc((size_t)(ns * F));
    ys = dalloc((size_t)(ns * D));
    hg = dalloc((size_t)(ns * F));
    yg = dalloc((size_t)(ns * D));
    TRY(bench_host_ok(h && y && xs && hs && ys && hg && yg));
    TRY(bench_download(b.H, dt, h, (size_t)(T * F)));
    TRY(bench_download(b.Y, dt, y, (size_t)(T * D)));
    gather_rows(o, x0, T, D, ns, xs);
    gather_rows(o, h, T, F, ns, hg);
    gather_rows(o, y, T, D, ns, yg);
    pit_ref_relu_ffn(ns, D, F, D, xs, w1, w2, hs, ys);
    size_t zeros = 0;
    for (int64_t i = 0; i < ns * F; i++)
        zeros += hs[i] == 0.0;
    r->sparsity = (double)zeros / (double)(ns * F);
    double eh = pit_ref_rel_error(hs, hg, (size_t)(ns * F)), ey = pit_ref_rel_error(ys, yg, (size_t)(ns * D));
    set_result(r, eh > ey ? eh : ey);

    TRY(bench_time(ctx, o, ffn_pit, &b, &r->pit_ms, &r->pit_spread));
    snprintf(r->choice, sizeof r->choice, "%s", b.rep.choice);
    r->nbase = 1;
    r->base_name[0] = "GEMM + relu + GEMM";
    TRY(bench_time(ctx, o, ffn_dense, &b, &r->base_ms[0], &r->base_spread[0]));
done:
    destroy_all(b.X, MAX_SETS);
    destroy_all((pit_tensor *[]){b.W1, b.W2, b.H, b.Y, b.Hd, b.Yd}, 6);
    free(x0);
    free(x);
    free(ctxv);
    free(w1);
    free(w2);
    free(h);
    free(y);
    free(xs);
    free(hs);
    free(ys);
    free(hg);
    free(yg);
    return st;
}

/* ---- the suite ---------------------------------------------------------------- */

static void print_row(const layer_result *r)
{
    for (int j = 0; j < r->nbase; j++) {
        if (j == 0)
            printf("%-9s %-4s %-26s %-12s %5.3f | %9.3f | ", r->layer, pit_dtype_name(r->dt), r->shape,
                   r->sparsity_what, r->sparsity, r->pit_ms);
        else
            printf("%-9s %-4s %-26s %-12s %5s | %9s | ", "", "", "", "", "", "");
        printf("%-36s %9.3f %8.2fx", r->base_name[j], r->base_ms[j], r->base_ms[j] / r->pit_ms);
        if (j == 0)
            printf(" | %.1e %s%s", r->err, r->choice, r->ok ? "" : "  [WRONG RESULT]");
        printf("\n");
    }
}

static void json_row(FILE *f, const layer_result *r, int last)
{
    fprintf(f,
            "    {\"layer\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", \"sparsity_metric\": \"%s\", "
            "\"sparsity\": %.4f, \"pit_ms\": %.6f, \"pit_spread\": %.4f, \"choice\": \"%s\", "
            "\"rel_error\": %.3g, \"correct\": %s, \"baselines\": [",
            r->layer, pit_dtype_name(r->dt), r->shape, r->sparsity_what, r->sparsity, r->pit_ms,
            r->pit_spread, r->choice, r->err, r->ok ? "true" : "false");
    for (int j = 0; j < r->nbase; j++)
        fprintf(f, "%s{\"name\": \"%s\", \"ms\": %.6f, \"spread\": %.4f, \"speedup\": %.4f}", j ? ", " : "",
                r->base_name[j], r->base_ms[j], r->base_spread[j], r->base_ms[j] / r->pit_ms);
    fprintf(f, "]}%s\n", last ? "" : ",");
}

int bench_layers_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_status ds = pit_context_get_info(ctx, &d);
    if (ds != PIT_SUCCESS) {
        fprintf(stderr, "pit bench: layers: %s: %s\n", pit_status_string(ds), pit_last_error());
        return 1;
    }
    /* Models run these layers in bf16: use it where the device has it. */
    pit_dtype moe_dt = d.has_bf16 && (o->dtype_mask & (1 << PIT_BF16)) ? PIT_BF16 : PIT_F32;
    printf("\n== layers: pit's operator against the dense way (median of %d, %d input sets rotated)\n",
           o->repeats, o->sets);
    printf("   attention's dense softmax is pit_sparse_softmax with an all-ones mask (pit has no dense one)\n");
    printf("%-9s %-4s %-26s %-18s | %9s | %-36s %9s %9s | %s\n", "layer", "dt", "shape", "sparsity", "pit ms",
           "dense baseline", "ms", "base/pit", "rel err, choice");
    layer_result res[3];
    int n = 0, failed = 0;
    const char *names[3] = {"moe", "attention", "relu_ffn"};
    for (int l = 0; l < 3; l++) {
        bench_progress(names[l], l, 3);
        layer_result *r = &res[n];
        memset(r, 0, sizeof *r);
        pit_status s = l == 0 ? bench_moe(ctx, o, moe_dt, r) : l == 1 ? bench_attention(ctx, o, moe_dt, r)
                                                                       : bench_ffn(ctx, o, r);
        if (s != PIT_SUCCESS) {
            fprintf(stderr, "\npit bench: layers: %s: %s\n", names[l], r->error);
            failed = 1;
            continue;
        }
        print_row(r);
        fflush(stdout);
        failed |= !r->ok;
        n++;
    }
    bench_progress("done", 3, 3);
    if (json) {
        fprintf(json, "  \"layers\": [\n");
        for (int i = 0; i < n; i++)
            json_row(json, &res[i], i + 1 == n);
        fprintf(json, "  ],\n");
    }
    return failed;
}
