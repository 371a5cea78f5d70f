/*
 * tests/fuzz/fuzz_detect.c - libFuzzer target: detection, the out-of-order
 * index and the PIT matmul on the OpenCL device (PoCL on the CPU in CI),
 * against the CPU reference, with fuzzed shapes, dtypes, forced micro-tiles
 * and sparsity patterns. Properties, for every call that succeeds:
 *  - the index names exactly the non-zero micro-tiles of the sparse operand,
 *    each once, in any order, in the right group (read back from the plan
 *    through core's internals: this target links pit_core_static);
 *  - C equals the reference within the dtype's tolerance.
 * A call may only fail with PIT_ERR_UNSUPPORTED (a micro-tile the device has
 * no kernel for), with a message.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "internal.h"

static pit_context *g_ctx;
static int g_stores_f16;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_detect: property violated: %s (last error: %s)\n", what,
            pit_last_error());
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsetenv("PIT_LOG");
    setenv("PIT_PLUGIN_DIR", PIT_FUZZ_PLUGIN_DIR, 0);
    if (pit_context_create("opencl", 0, &g_ctx) != PIT_SUCCESS) {
        fprintf(stderr, "fuzz_detect: needs an OpenCL device: %s\n", pit_last_error());
        exit(1);
    }
    g_stores_f16 = g_ctx->info.has_f16_storage;
    return 0;
}

static const pit_microtile tiles_a[] = {
    {32, 1, PIT_AXIS_K}, {16, 1, PIT_AXIS_K}, {64, 1, PIT_AXIS_K}, {32, 64, PIT_AXIS_K},
    {16, 32, PIT_AXIS_K}, {64, 64, PIT_AXIS_K}, {1, 64, PIT_AXIS_M}, {1, 32, PIT_AXIS_M},
    {8, 4, PIT_AXIS_K}, {1, 8, PIT_AXIS_M}, {4, 16, PIT_AXIS_M}, {8, 1, PIT_AXIS_K},
};
static const pit_microtile tiles_b[] = {
    {32, 1, PIT_AXIS_N}, {32, 64, PIT_AXIS_N}, {64, 64, PIT_AXIS_N},
    {64, 1, PIT_AXIS_N}, {32, 32, PIT_AXIS_N}, {8, 8, PIT_AXIS_N},
};
#define NA ((int)(sizeof tiles_a / sizeof tiles_a[0]))
#define NB ((int)(sizeof tiles_b / sizeof tiles_b[0]))

static pit_plan *find_plan(const pit_problem *prob, const pit_microtile *t)
{
    pit_plan *best = NULL;
    for (int i = 0; i < PIT_PLAN_CACHE; i++) {
        pit_plan *p = &g_ctx->plans[i];
        if (!p->used || p->stream != g_ctx->default_stream.bs || p->forced.rows != t->rows ||
            p->forced.cols != t->cols || p->forced.axis != t->axis || p->problem.m != prob->m ||
            p->problem.n != prob->n || p->problem.k != prob->k ||
            p->problem.batch != prob->batch || p->problem.dtype != prob->dtype ||
            p->problem.sparse != prob->sparse)
            continue;
        if (!best || p->last_use > best->last_use)
            best = p;
    }
    return best;
}

/* The index of the plan against the non-zero micro-tiles of X (batch x rows x cols). */
static void check_index(const pit_plan *p, const double *X, int64_t batch, int64_t rows,
                        int64_t cols)
{
    const pit_index *x = &p->idx[0];
    const pit_microtile *t = &x->tile;
    int64_t rb = (rows + t->rows - 1) / t->rows, cb = (cols + t->cols - 1) / t->cols;
    int64_t gpb = t->axis == PIT_AXIS_M ? cb : rb, cap = t->axis == PIT_AXIS_M ? rb : cb;
    if (x->groups_per_batch != gpb || x->capacity != cap || x->groups != gpb * batch)
        fail("index layout differs from backend.h");
    int32_t *counts = malloc((size_t)x->groups * 4);
    int32_t *entries = malloc((size_t)x->groups * (size_t)cap * 4);
    uint8_t *want = calloc((size_t)x->groups * (size_t)cap, 1);
    if (!counts || !entries || !want)
        fail("host memory");
    void *bs = g_ctx->default_stream.bs;
    if (g_ctx->be->mem_read(g_ctx->bctx, bs, x->counts, 0, counts, (size_t)x->groups * 4) ||
        g_ctx->be->mem_read(g_ctx->bctx, bs, x->entries, 0, entries,
                            (size_t)x->groups * (size_t)cap * 4))
        fail("reading the index back");
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                if (X[(b * rows + r) * cols + c] == 0.0)
                    continue;
                int64_t tr = r / t->rows, tc = c / t->cols;
                int64_t g = b * gpb + (t->axis == PIT_AXIS_M ? tc : tr);
                int64_t e = t->axis == PIT_AXIS_M ? tr : tc;
                want[g * cap + e] = 1;
            }
    for (int64_t g = 0; g < x->groups; g++) {
        if (counts[g] < 0 || counts[g] > cap)
            fail("a group count is out of range");
        int32_t expect = 0;
        for (int64_t e = 0; e < cap; e++)
            expect += want[g * cap + e];
        if (counts[g] != expect) {
            fprintf(stderr, "group %lld: count %d, %d non-zero micro-tiles\n", (long long)g,
                    counts[g], expect);
            fail("a group count differs from the non-zero micro-tiles");
        }
        for (int32_t i = 0; i < counts[g]; i++) {
            int32_t e = entries[g * cap + i];
            if (e < 0 || e >= cap)
                fail("an index entry is out of range");
            if (want[g * cap + e] != 1)
                fail("an index entry names a zero micro-tile or names one twice");
            want[g * cap + e] = 2;
        }
    }
    free(counts);
    free(entries);
    free(want);
}

static pit_tensor *make(pit_dtype dt, int rank, int64_t batch, int64_t r, int64_t c)
{
    int64_t shape[3] = {batch, r, c};
    pit_tensor *t = NULL;
    if (pit_tensor_create(g_ctx, dt, rank, rank == 3 ? shape : shape + 1, &t) != PIT_SUCCESS)
        fail("tensor_create");
    return t;
}

static void upload(pit_tensor *t, pit_dtype dt, double *x, size_t n)
{
    uint8_t *buf = malloc(n * 4 + 1);
    pit_ref_from_double(dt, x, n, buf);
    pit_ref_to_double(dt, buf, n, x); /* the reference sees the stored values */
    if (pit_tensor_upload(t, NULL, buf, n * pit_dtype_size(dt)) != PIT_SUCCESS)
        fail("upload");
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    uint8_t flags = fz_u8(&f);
    int sparse_b = flags & 1, rank = flags & 2 ? 3 : 2;
    static const pit_dtype dts[] = {PIT_F32, PIT_BF16, PIT_F16, PIT_F32};
    pit_dtype dt = dts[(flags >> 2) & 3];
    if (dt == PIT_F16 && !g_stores_f16)
        dt = PIT_BF16;
    uint8_t ti = fz_u8(&f);
    pit_microtile mt = sparse_b ? tiles_b[ti % NB] : tiles_a[ti % NA];
    int64_t m = fz_u8(&f) % 96 + 1, k = fz_u8(&f) % 96 + 1, n = fz_u8(&f) % 80 + 1;
    int64_t batch = rank == 3 ? fz_u8(&f) % 3 + 1 : 1;
    double keep = fz_u8(&f) / 255.0, elem_zero = fz_u8(&f) / 512.0;
    pit_rng rng;
    pit_rng_seed(&rng, fz_u64(&f) | 1);

    size_t na = (size_t)(batch * m * k), nb = (size_t)(batch * k * n), nc = (size_t)(batch * m * n);
    double *A = malloc(na * 8), *B = malloc(nb * 8), *R = malloc(nc * 8), *G = malloc(nc * 8);
    if (!A || !B || !R || !G)
        fail("host memory");
    pit_ref_fill_random(&rng, A, na);
    pit_ref_fill_random(&rng, B, nb);
    /* Zero whole micro-tiles of the sparse operand from the input's bits (or
     * the generator once they run out), then single elements. */
    double *X = sparse_b ? B : A;
    int64_t rows = sparse_b ? k : m, cols = sparse_b ? n : k;
    int64_t rb = (rows + mt.rows - 1) / mt.rows, cb = (cols + mt.cols - 1) / mt.cols;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < rb; i++)
            for (int64_t j = 0; j < cb; j++) {
                double u = f.n ? fz_u8(&f) / 255.0 : (pit_rng_uniform(&rng) + 1) / 2;
                if (u < keep)
                    continue;
                for (int64_t r = i * mt.rows; r < (i + 1) * mt.rows && r < rows; r++)
                    for (int64_t c = j * mt.cols; c < (j + 1) * mt.cols && c < cols; c++)
                        X[(b * rows + r) * cols + c] = 0.0;
            }
    for (size_t i = 0; i < (sparse_b ? nb : na); i++)
        if ((pit_rng_uniform(&rng) + 1) / 2 < elem_zero)
            X[i] = 0.0;

    pit_tensor *tA = make(dt, rank, batch, m, k), *tB = make(dt, rank, batch, k, n),
               *tC = make(dt, rank, batch, m, n);
    upload(tA, dt, A, na);
    upload(tB, dt, B, nb);
    pit_matmul_options o = pit_matmul_options_default();
    o.sparse = sparse_b ? PIT_SPARSE_B : PIT_SPARSE_A;
    o.microtile = mt;
    pit_report rep;
    pit_status s = pit_matmul(g_ctx, NULL, tA, tB, tC, &o, &rep);
    if (s == PIT_ERR_UNSUPPORTED && pit_last_error()[0]) {
        /* a micro-tile the device cannot run: a clean refusal */
    } else if (s != PIT_SUCCESS) {
        fprintf(stderr, "pit_matmul(%s, %s %dx%d axis %d, batch %lld, %lldx%lldx%lld): %s\n",
                pit_dtype_name(dt), sparse_b ? "B" : "A", mt.rows, mt.cols, (int)mt.axis,
                (long long)batch, (long long)m, (long long)k, (long long)n, pit_status_string(s));
        fail("pit_matmul failed");
    } else {
        pit_problem prob = {.op = rank == 3 ? PIT_OP_BATCH_MATMUL : PIT_OP_MATMUL, .dtype = dt,
                            .batch = batch, .m = m, .n = n, .k = k,
                            .sparse = o.sparse};
        pit_plan *p = find_plan(&prob, &mt);
        if (!p)
            fail("no plan for the call");
        check_index(p, X, batch, rows, cols);
        uint8_t *buf = malloc(nc * 4 + 1);
        if (pit_tensor_download(tC, NULL, buf, nc * pit_dtype_size(dt)) != PIT_SUCCESS)
            fail("download");
        pit_ref_to_double(dt, buf, nc, G);
        free(buf);
        pit_ref_matmul(batch, m, n, k, A, B, R);
        double err = pit_ref_rel_error(R, G, nc);
        if (!(err <= pit_ref_tolerance(dt))) {
            fprintf(stderr, "%s sparse %s %dx%d axis %d batch %lld %lldx%lldx%lld: rel error %g "
                    "(choice %s)\n", pit_dtype_name(dt), sparse_b ? "B" : "A", mt.rows, mt.cols,
                    (int)mt.axis, (long long)batch, (long long)m, (long long)k, (long long)n, err,
                    rep.choice);
            fail("C differs from the reference");
        }
    }
    pit_tensor_destroy(tA);
    pit_tensor_destroy(tB);
    pit_tensor_destroy(tC);
    free(A);
    free(B);
    free(R);
    free(G);
    return 0;
}
