/* tools/conf_matmul.c - conformance cases of the dynamic-sparse matmul. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

typedef struct mm_shape { int64_t batch, m, n, k, a_row_pad; } mm_shape;
typedef struct mm_pattern { const char *name; int tr, tc, off_r, off_c; double sparsity; } mm_pattern;
typedef struct mm_mode { const char *name; pit_matmul_options opt; } mm_mode;

static const mm_shape full_shapes[] = {
    {1, 1, 1, 1, 0},     {1, 7, 5, 3, 0},      {1, 33, 17, 65, 0}, {1, 64, 48, 128, 0},
    {1, 100, 33, 70, 0}, {1, 1000, 7, 33, 0},  {1, 130, 70, 260, 0}, {3, 40, 24, 96, 0},
    {1, 67, 40, 90, 13}, /* A rows padded: row stride K + 13 */
    {1, 20, 9, 4500, 0}, /* K: two whole 1x2048 micro-tiles and a part of one */
    /* decode: a few rows, long K split into shares, unaligned and batched */
    {1, 1, 300, 2048, 0}, {2, 5, 257, 1500, 0}, {1, 16, 96, 4100, 3},
};
static const mm_shape quick_shapes[] = {
    {1, 7, 5, 3, 0}, {1, 33, 17, 65, 0}, {1, 100, 33, 70, 0}, {2, 40, 24, 96, 0}, {1, 67, 40, 90, 13},
    {1, 3, 130, 1100, 0},
};

static const mm_pattern patterns[] = {
    {"dense", 1, 1, 0, 0, 0.0},
    {"all-zero", 1, 1, 0, 0, 1.0},
    {"32x1@0.9", 32, 1, 0, 0, 0.9},
    {"1x64@0.9", 1, 64, 0, 0, 0.9},
    {"32x64@0.8", 32, 64, 0, 0, 0.8},
    {"32x64@0.8+unaligned", 32, 64, 5, 13, 0.8},
    {"1x1@0.5", 1, 1, 0, 0, 0.5},
    {"8x8@0.7+unaligned", 8, 8, 3, 2, 0.7},
};

static mm_mode make_mode(const char *name, int rows, int cols, pit_axis axis, int dense, int fixed)
{
    mm_mode m = {name, pit_matmul_options_default()};
    m.opt.microtile = (pit_microtile){rows, cols, axis};
    m.opt.force_dense = dense;
    m.opt.fixed_plan = fixed;
    return m;
}

static int modes(mm_mode *out)
{
    int n = 0;
    out[n++] = make_mode("auto", 0, 0, PIT_AXIS_AUTO, 0, 0);
    out[n++] = make_mode("k32x1", 32, 1, PIT_AXIS_K, 0, 0);
    out[n++] = make_mode("m1x64", 1, 64, PIT_AXIS_M, 0, 0);
    out[n++] = make_mode("k32x64", 32, 64, PIT_AXIS_K, 0, 0);
    /* micro-tiles taller or wider than one detection work-group's region */
    out[n++] = make_mode("k1x2048", 1, 2048, PIT_AXIS_K, 0, 0);
    out[n++] = make_mode("m512x1", 512, 1, PIT_AXIS_M, 0, 0);
    out[n++] = make_mode("dense", 0, 0, PIT_AXIS_AUTO, 1, 0);
    out[n++] = make_mode("fixed-k32x1", 32, 1, PIT_AXIS_K, 0, 1);
    return n;
}

typedef struct mm_bufs {
    pit_tensor *A, *A_store, *B, *C;
    double *a, *b, *c, *ref;
} mm_bufs;

static void free_bufs(mm_bufs *x)
{
    pit_tensor_destroy(x->A);
    pit_tensor_destroy(x->A_store);
    pit_tensor_destroy(x->B);
    pit_tensor_destroy(x->C);
    free(x->a);
    free(x->b);
    free(x->c);
    free(x->ref);
    memset(x, 0, sizeof *x);
}

/* A with a padded row stride lives inside a bigger owned buffer. */
static pit_status make_a(pit_context *ctx, pit_dtype dt, const mm_shape *s, mm_bufs *x)
{
    int rank = s->batch > 1 ? 3 : 2;
    int64_t shape3[3] = {s->batch, s->m, s->k};
    const int64_t *shape = rank == 3 ? shape3 : shape3 + 1;
    if (!s->a_row_pad)
        return pit_tensor_create(ctx, dt, rank, shape, &x->A);
    int64_t stride = s->k + s->a_row_pad;
    int64_t store_shape[1] = {s->batch * s->m * stride};
    pit_status st = pit_tensor_create(ctx, dt, 1, store_shape, &x->A_store);
    if (st != PIT_SUCCESS)
        return st;
    pit_tensor_desc d;
    pit_tensor_get_desc(x->A_store, &d);
    int64_t strides3[3] = {s->m * stride, stride, 1};
    return pit_tensor_wrap(ctx, dt, rank, shape, rank == 3 ? strides3 : strides3 + 1, d.data, 0,
                           &x->A);
}

static pit_status make_bufs(pit_context *ctx, pit_dtype dt, const mm_shape *s, mm_bufs *x)
{
    memset(x, 0, sizeof *x);
    int rank = s->batch > 1 ? 3 : 2;
    int64_t bshape[3] = {s->batch, s->k, s->n}, cshape[3] = {s->batch, s->m, s->n};
    pit_status st = make_a(ctx, dt, s, x);
    if (st == PIT_SUCCESS)
        st = pit_tensor_create(ctx, dt, rank, rank == 3 ? bshape : bshape + 1, &x->B);
    if (st == PIT_SUCCESS)
        st = pit_tensor_create(ctx, dt, rank, rank == 3 ? cshape : cshape + 1, &x->C);
    size_t na = (size_t)(s->batch * s->m * s->k), nb = (size_t)(s->batch * s->k * s->n),
           nc = (size_t)(s->batch * s->m * s->n);
    x->a = malloc(na * sizeof(double) + 8);
    x->b = malloc(nb * sizeof(double) + 8);
    x->c = malloc(nc * sizeof(double) + 8);
    x->ref = malloc(nc * sizeof(double) + 8);
    if (st == PIT_SUCCESS && (!x->a || !x->b || !x->c || !x->ref))
        st = PIT_ERR_OUT_OF_MEMORY;
    return st;
}

static void run_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                     const mm_shape *s, const mm_pattern *pat, const mm_mode *modes, int nmodes,
                     pit_rng *rng)
{
    char what[200];
    mm_bufs x;
    pit_status st = make_bufs(ctx, dt, s, &x);
    snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld%s %s", pit_dtype_name(dt),
             (long long)s->batch, (long long)s->m, (long long)s->n, (long long)s->k,
             s->a_row_pad ? " strided" : "", pat->name);
    if (st != PIT_SUCCESS) {
        conf_call_failed(t, what, st);
        free_bufs(&x);
        return;
    }
    size_t na = (size_t)(s->batch * s->m * s->k), nb = (size_t)(s->batch * s->k * s->n),
           nc = (size_t)(s->batch * s->m * s->n);
    pit_ref_fill_random(rng, x.a, na);
    pit_ref_fill_random(rng, x.b, nb);
    pit_ref_sparsify_tiles(rng, x.a, s->batch, s->m, s->k, pat->tr, pat->tc, pat->off_r, pat->off_c,
                           pat->sparsity);
    conf_round(dt, x.a, na);
    conf_round(dt, x.b, nb);
    pit_ref_matmul(s->batch, s->m, s->n, s->k, x.a, x.b, x.ref);
    st = conf_upload(x.A, x.a, na);
    if (st == PIT_SUCCESS)
        st = conf_upload(x.B, x.b, nb);
    for (int i = 0; i < nmodes && st == PIT_SUCCESS; i++) {
        char w[260];
        snprintf(w, sizeof w, "%s %s", what, modes[i].name);
        pit_report rep;
        pit_status cs = conf_poison(x.C, nc);
        if (cs == PIT_SUCCESS)
            cs = pit_matmul(ctx, NULL, x.A, x.B, x.C, &modes[i].opt, &rep);
        if (cs == PIT_SUCCESS)
            cs = conf_download(x.C, x.c, nc);
        if (cs != PIT_SUCCESS) {
            conf_call_failed(t, w, cs);
            continue;
        }
        if (o->verbose)
            printf("    %s -> %s\n", w, rep.choice);
        conf_check(t, o, w, pit_ref_rel_error(x.ref, x.c, nc), pit_ref_tolerance(dt));
    }
    if (st != PIT_SUCCESS)
        conf_call_failed(t, what, st);
    free_bufs(&x);
}

static pit_status matmul_probe(pit_context *ctx, const conf_probe_kit *k)
{
    return pit_matmul(ctx, NULL, k->m[0], k->m[1], k->m[2], NULL, NULL);
}

void conf_matmul(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    mm_mode ms[8];
    int nm = modes(ms);
    const mm_shape *shapes = o->quick ? quick_shapes : full_shapes;
    int nshapes = o->quick ? (int)(sizeof quick_shapes / sizeof quick_shapes[0])
                           : (int)(sizeof full_shapes / sizeof full_shapes[0]);
    int npat = (int)(sizeof patterns / sizeof patterns[0]);
    const pit_dtype dts[3] = {PIT_F32, PIT_F16, PIT_BF16};
    pit_rng rng;
    pit_rng_seed(&rng, o->seed);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, dts[d], t, nshapes * npat * nm, "pit_matmul",
                                  matmul_probe))
            continue;
        for (int s = 0; s < nshapes; s++)
            for (int p = 0; p < npat; p++)
                run_case(ctx, o, t, dts[d], &shapes[s], &patterns[p], ms, nm, &rng);
    }
}
