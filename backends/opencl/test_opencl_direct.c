/*
 * test_opencl_direct.c - tests the OpenCL plug-in's table directly, without
 * core: a tiny pit_host of its own, pit_backend_register linked in.
 *
 * For every shape x sparsity pattern x dtype it runs detect with several
 * micro-tile candidates at once and checks that each index names exactly the
 * non-zero micro-tiles, once each; then matmul_sparse (axis K and M, grid from
 * max_entries and worst-case grid) and matmul_dense, each into a C poisoned
 * with NaN, compared with a double CPU reference by relative norm error
 * (f32 1e-4, f16/bf16 1e-2). Padding between rows of C must stay poisoned.
 * u8 (bool) masks go through detection, sddmm, softmax and its backward the
 * same way.
 *
 * Usage: test_opencl_direct [-v]
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <dirent.h>

#include "backend.h"
#include "ocl_internal.h" /* white-box checks: program cache, native queues */
#include "reference.h"    /* core's double-precision references (u8 mask cases) */

const pit_backend *pit_backend_register(const pit_host *host);

/* ---- the host ------------------------------------------------------------------ */

static char g_error[4096];
static int g_verbose;
static int g_fail_next_alloc;

static pit_status host_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return st;
}

static int g_corrupt_logged;

static void host_log(const char *fmt, ...)
{
    va_list ap;
    if (strstr(fmt, "corrupt"))
        ++g_corrupt_logged;
    if (!g_verbose)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "[debug] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static const char *host_cache_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PIT_CACHE_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "/tmp/pit-opencl-test-cache");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return NULL;
    return dir;
}

static int host_inject(void)
{
    int f = g_fail_next_alloc;
    g_fail_next_alloc = 0;
    return f;
}

static const pit_host g_host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir,
                                host_inject};

/* ---- dtype conversions (round to nearest even) ------------------------------------ */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

static uint16_t float_to_half(float f)
{
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a != a)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0f)
        return (uint16_t)(sign | 0x7c00u);
    if (a < ldexpf(1.0f, -14)) { /* subnormal: multiples of 2^-24 */
        float q = nearbyintf(a * ldexpf(1.0f, 24));
        return (uint16_t)(sign | (uint32_t)q);
    }
    uint32_t au = f2u(a);
    uint32_t rounded = au + 0xfffu + ((au >> 13) & 1u);
    return (uint16_t)(sign | (((rounded >> 23) - 112) << 10) | ((rounded >> 13) & 0x3ffu));
}

static float bf16_to_float(uint16_t h)
{
    return u2f((uint32_t)h << 16);
}

static uint16_t float_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static size_t esize(pit_dtype t)
{
    return t == PIT_F32 ? 4 : t == PIT_U8 ? 1 : 2;
}

/* u8 is a mask only: v is the byte (0..255). */
static void store_elem(pit_dtype t, void *base, size_t i, double v)
{
    if (t == PIT_F32)
        ((float *)base)[i] = (float)v;
    else if (t == PIT_U8)
        ((uint8_t *)base)[i] = (uint8_t)v;
    else if (t == PIT_F16)
        ((uint16_t *)base)[i] = float_to_half((float)v);
    else
        ((uint16_t *)base)[i] = float_to_bf16((float)v);
}

static double load_elem(pit_dtype t, const void *base, size_t i)
{
    if (t == PIT_F32)
        return ((const float *)base)[i];
    if (t == PIT_F16)
        return half_to_float(((const uint16_t *)base)[i]);
    if (t == PIT_U8)
        return ((const uint8_t *)base)[i];
    return bf16_to_float(((const uint16_t *)base)[i]);
}

static uint32_t elem_bits(pit_dtype t, const void *base, size_t i)
{
    if (t == PIT_U8)
        return ((const uint8_t *)base)[i];
    return t == PIT_F32 ? ((const uint32_t *)base)[i] : ((const uint16_t *)base)[i];
}

/* The bits that make an element non-zero: all but a float's sign (-0.0 is
 * zero), every bit of a byte. */
static uint32_t nonzero_bits(pit_dtype t)
{
    return t == PIT_F32 ? 0x7fffffffu : t == PIT_U8 ? 0xffu : 0x7fffu;
}

/* ---- deterministic randomness ----------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double hash01(uint64_t seed, int64_t a, int64_t b, int64_t c)
{
    uint64_t h = mix(seed ^ mix((uint64_t)a * 0x100000001b3ull ^ mix((uint64_t)b + 7) ^
                                mix((uint64_t)c * 31 + 11)));
    return (double)(h >> 11) / 9007199254740992.0;
}

/* Non-zero value in [-1, 1], representable in every dtype after rounding. */
static double value_at(uint64_t seed, int64_t a, int64_t b, int64_t c)
{
    double v = hash01(seed, a, b, c) * 2.0 - 1.0;
    if (fabs(v) < 1e-3)
        v = 0.5;
    return v;
}

/* ---- sparsity patterns of A -------------------------------------------------------- */

enum { PAT_DENSE, PAT_ZERO, PAT_K32X1, PAT_M1X64, PAT_K32X64, PAT_FINE, PAT_COUNT };
static const char *pat_name[] = {"dense", "all-zero", "32x1", "1x64", "32x64", "fine90"};

static int is_zero(int pat, uint64_t seed, int64_t b, int64_t m, int64_t k)
{
    switch (pat) {
    case PAT_DENSE: return 0;
    case PAT_ZERO: return 1;
    case PAT_K32X1: return hash01(seed + 1, b, m / 32, k) < 0.7;
    case PAT_M1X64: return hash01(seed + 2, b, m, k / 64) < 0.7;
    case PAT_K32X64: return hash01(seed + 3, b, m / 32, k / 64) < 0.7;
    default: return hash01(seed + 4, b, m, k) < 0.9;
    }
}

/* ---- test bookkeeping ----------------------------------------------------------------- */

static int g_checks, g_failures;

#define EXPECT(cond, ...)                                  \
    do {                                                   \
        ++g_checks;                                        \
        if (!(cond)) {                                     \
            ++g_failures;                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fprintf(stderr, "\n");                         \
        }                                                  \
    } while (0)

#define OK(call)                                                                       \
    do {                                                                               \
        pit_status st_ = (call);                                                       \
        if (st_ != PIT_SUCCESS) {                                                      \
            fprintf(stderr, "FATAL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call,  \
                    (int)st_, g_error);                                                \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static const pit_backend *be;
static void *ctx, *stream;

/* ---- tensors on the device ---------------------------------------------------------- */

typedef struct dtensor {
    pit_tdesc d;
    size_t bytes;   /* whole buffer */
    void *host;     /* whole buffer image */
} dtensor;

/* A (batch x rows x cols) tensor with row padding `pad` and an element offset. */
static void dtensor_make(dtensor *t, pit_dtype dt, int64_t batch, int64_t rows, int64_t cols,
                         int pad, int off, int rank3)
{
    memset(t, 0, sizeof *t);
    t->d.dtype = dt;
    t->d.rank = rank3 ? 3 : 2;
    int64_t ld = cols + pad, bs = rows * ld + pad;
    if (rank3) {
        t->d.shape[0] = batch;
        t->d.shape[1] = rows;
        t->d.shape[2] = cols;
        t->d.strides[0] = bs;
        t->d.strides[1] = ld;
        t->d.strides[2] = 1;
    } else {
        t->d.shape[0] = rows;
        t->d.shape[1] = cols;
        t->d.strides[0] = ld;
        t->d.strides[1] = 1;
    }
    t->d.offset = (size_t)off * esize(dt);
    size_t elems = (size_t)off + (size_t)(batch * bs) + 8;
    t->bytes = (elems * esize(dt) + 3) / 4 * 4;
    t->host = calloc(1, t->bytes);
    OK(be->mem_alloc(ctx, t->bytes, &t->d.mem));
}

static size_t elem_index(const dtensor *t, int64_t b, int64_t r, int64_t c)
{
    int rk = t->d.rank;
    int64_t bs = rk == 3 ? t->d.strides[0] : 0;
    return t->d.offset / esize(t->d.dtype) + (size_t)(b * bs + r * t->d.strides[rk - 2] + c);
}

static void dtensor_free(dtensor *t)
{
    be->mem_free(ctx, t->d.mem);
    free(t->host);
}

/* ---- one case ---------------------------------------------------------------------- */

typedef struct shape {
    int64_t batch, M, K, N;
    int pad, off;
} shape;

static const pit_microtile g_cands[] = {
    {32, 1, PIT_AXIS_K}, {1, 64, PIT_AXIS_M}, {32, 64, PIT_AXIS_K},
    {8, 8, PIT_AXIS_M},  {3, 5, PIT_AXIS_K},
};
#define NCANDS ((int)(sizeof g_cands / sizeof g_cands[0]))

/* Dense tiles tried per candidate (bm, bn, bk, threads). */
static const pit_tile g_tiles[NCANDS][2] = {
    {{32, 32, 32, 64, 1, 0}, {16, 64, 16, 0, 1, 0}},
    {{32, 32, 64, 64, 1, 0}, {7, 16, 16, 0, 1, 0}},
    {{32, 64, 64, 128, 1, 0}, {32, 16, 8, 32, 1, 0}},
    {{16, 32, 8, 0, 1, 0}, {8, 48, 4, 24, 1, 0}},
    {{3, 16, 8, 0, 1, 0}, {1, 32, 5, 0, 1, 0}},
};

typedef struct host_index {
    pit_index idx;
    int32_t *counts, *entries, total;
} host_index;

static void index_make(host_index *h, pit_microtile t, int64_t batch, int64_t M, int64_t K)
{
    memset(h, 0, sizeof *h);
    h->idx.tile = t;
    int64_t gpb, cap;
    if (t.axis == PIT_AXIS_M) {
        gpb = (K + t.cols - 1) / t.cols;
        cap = (M + t.rows - 1) / t.rows;
    } else {
        gpb = (M + t.rows - 1) / t.rows;
        cap = (K + t.cols - 1) / t.cols;
    }
    h->idx.groups_per_batch = (int32_t)gpb;
    h->idx.groups = (int32_t)(gpb * batch);
    h->idx.capacity = (int32_t)cap;
    size_t ng = (size_t)h->idx.groups;
    OK(be->mem_alloc(ctx, ng * 4, &h->idx.counts));
    OK(be->mem_alloc(ctx, ng * (size_t)cap * 4 + 4, &h->idx.entries));
    OK(be->mem_alloc(ctx, 4, &h->idx.total));
    /* Poison so stale data would show. */
    OK(be->mem_fill32(ctx, stream, h->idx.counts, 0, 0xdeadbeefu, ng * 4));
    OK(be->mem_fill32(ctx, stream, h->idx.entries, 0, 0xdeadbeefu, ng * (size_t)cap * 4 + 4));
    h->counts = calloc(ng, 4);
    h->entries = calloc(ng * (size_t)cap + 1, 4);
}

static void index_free(host_index *h)
{
    be->mem_free(ctx, h->idx.counts);
    be->mem_free(ctx, h->idx.entries);
    be->mem_free(ctx, h->idx.total);
    free(h->counts);
    free(h->entries);
}

static void index_read(host_index *h)
{
    size_t ng = (size_t)h->idx.groups;
    OK(be->mem_read(ctx, stream, h->idx.counts, 0, h->counts, ng * 4));
    OK(be->mem_read(ctx, stream, h->idx.entries, 0, h->entries,
                    ng * (size_t)h->idx.capacity * 4));
    OK(be->mem_read(ctx, stream, h->idx.total, 0, &h->total, 4));
}

/* Every candidate micro-tile of g_cands indexed by one detect call over X. */
static void detect_candidates(host_index idx[NCANDS], const pit_tdesc *X, int64_t batch, int64_t M, int64_t K)
{
    pit_index raw[NCANDS];
    for (int i = 0; i < NCANDS; ++i) {
        index_make(&idx[i], g_cands[i], batch, M, K);
        raw[i] = idx[i].idx;
    }
    OK(be->detect(ctx, stream, X, raw, NCANDS));
}

/* Checks an index against the micro-tiles of A that hold a non-zero. */
static int32_t check_index(const host_index *h, const dtensor *A, int64_t batch, int64_t M,
                           int64_t K, const char *label)
{
    const pit_microtile t = h->idx.tile;
    const int64_t gpb = h->idx.groups_per_batch, cap = h->idx.capacity;
    int64_t expected_total = 0;
    int32_t max_count = 0;
    unsigned char *seen = malloc((size_t)cap);
    const uint32_t mask = nonzero_bits(A->d.dtype);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t g = 0; g < gpb; ++g) {
            int64_t gi = b * gpb + g;
            int32_t cnt = h->counts[gi];
            if (cnt > max_count)
                max_count = cnt;
            memset(seen, 0, (size_t)cap);
            int ok = cnt >= 0 && cnt <= cap;
            for (int32_t i = 0; ok && i < cnt; ++i) {
                int32_t e = h->entries[gi * cap + i];
                ok = e >= 0 && e < cap && !seen[e];
                if (ok)
                    seen[e] = 1;
            }
            /* Expected: every micro-tile of the group with a non-zero. */
            int64_t want = 0;
            for (int64_t e = 0; ok && e < cap; ++e) {
                int64_t r0 = (t.axis == PIT_AXIS_M ? e : g) * t.rows;
                int64_t c0 = (t.axis == PIT_AXIS_M ? g : e) * t.cols;
                int nz = 0;
                for (int64_t r = r0; r < r0 + t.rows && r < M && !nz; ++r)
                    for (int64_t c = c0; c < c0 + t.cols && c < K && !nz; ++c)
                        nz = (elem_bits(A->d.dtype, A->host, elem_index(A, b, r, c)) & mask) != 0;
                want += nz;
                if (nz != seen[e]) {
                    ok = 0;
                    fprintf(stderr, "  %s: group %lld entry %lld nonzero=%d listed=%d\n", label,
                            (long long)gi, (long long)e, nz, seen[e]);
                }
            }
            EXPECT(ok && want == cnt, "%s: index group %lld wrong (count %d)", label,
                   (long long)gi, cnt);
            expected_total += want;
        }
    EXPECT(h->total == expected_total, "%s: total %d, expected %lld", label, h->total,
           (long long)expected_total);
    free(seen);
    return max_count;
}

static uint32_t nan_pattern(pit_dtype dt)
{
    return dt == PIT_F32 ? 0x7fc00000u : dt == PIT_F16 ? 0x7e007e00u : 0x7fc07fc0u;
}

/* Reads C back and compares with the reference; padding must still be NaN. */
static void check_c(dtensor *C, const double *ref, int64_t batch, int64_t M, int64_t N,
                    const char *label)
{
    OK(be->stream_synchronize(ctx, stream));
    OK(be->mem_read(ctx, stream, C->d.mem, 0, C->host, C->bytes));
    double num = 0, den = 0;
    int bad = 0;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double got = load_elem(C->d.dtype, C->host, elem_index(C, b, m, n));
                double want = ref[(b * M + m) * N + n];
                if (!isfinite(got))
                    bad = 1;
                if (g_verbose > 1 && fabs(got - want) > 1e-3 * (1 + fabs(want)) && bad < 8) {
                    fprintf(stderr, "    C[%lld][%lld][%lld] = %g, want %g\n", (long long)b,
                            (long long)m, (long long)n, got, want);
                    bad += 2;
                }
                num += (got - want) * (got - want);
                den += want * want;
            }
    double err = (bad & 1) ? INFINITY : den > 0 ? sqrt(num / den) : sqrt(num);
    double tol = C->d.dtype == PIT_F32 ? 1e-4 : 1e-2;
    EXPECT(err <= tol, "%s: relative error %.3g > %.0e", label, err, tol);
    if (g_verbose)
        fprintf(stderr, "  %-60s err %.2e\n", label, err);
    /* Row padding of C is never written. */
    int64_t pad = C->d.strides[C->d.rank - 2] - N;
    int untouched = 1;
    for (int64_t b = 0; b < batch && pad > 0; ++b)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = N; n < N + pad; ++n) {
                size_t i = elem_index(C, b, m, n);
                uint32_t bits = elem_bits(C->d.dtype, C->host, i);
                uint32_t want = C->d.dtype == PIT_F32 ? 0x7fc00000u
                                : C->d.dtype == PIT_F16 ? 0x7e00u : 0x7fc0u;
                untouched &= bits == want;
            }
    EXPECT(untouched, "%s: C's row padding was written", label);
}

static void poison(dtensor *C)
{
    OK(be->mem_fill32(ctx, stream, C->d.mem, 0, nan_pattern(C->d.dtype), C->bytes));
}

static void run_case(const shape *s, int pat, pit_dtype dt, int has_f16)
{
    const int64_t batch = s->batch, M = s->M, K = s->K, N = s->N;
    const int rank3 = batch > 1;
    const uint64_t seed = (uint64_t)(M * 1000003 + K * 1009 + N + pat * 7 + batch);
    char label[192];
    dtensor A, B, C;
    dtensor_make(&A, dt, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&B, dt, batch, K, N, s->pad, s->off, rank3);
    dtensor_make(&C, dt, batch, M, N, s->pad, s->off, rank3);

    /* Data: A with the pattern's zeros (half of them -0.0), B dense. */
    double *a = calloc((size_t)(batch * M * K) + 1, sizeof(double));
    double *bm = calloc((size_t)(batch * K * N) + 1, sizeof(double));
    double *ref = calloc((size_t)(batch * M * N) + 1, sizeof(double));
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
                double v = value_at(seed, b, m, k);
                if (is_zero(pat, seed, b, m, k))
                    v = hash01(seed, b, k, m) < 0.5 ? -0.0 : 0.0;
                size_t i = elem_index(&A, b, m, k);
                store_elem(dt, A.host, i, v);
                a[(b * M + m) * K + k] = load_elem(dt, A.host, i);
            }
        for (int64_t k = 0; k < K; ++k)
            for (int64_t n = 0; n < N; ++n) {
                size_t i = elem_index(&B, b, k, n);
                store_elem(dt, B.host, i, value_at(seed + 99, b, k, n));
                bm[(b * K + k) * N + n] = load_elem(dt, B.host, i);
            }
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += a[(b * M + m) * K + k] * bm[(b * K + k) * N + n];
                ref[(b * M + m) * N + n] = acc;
            }
    }
    OK(be->mem_write(ctx, stream, A.d.mem, 0, A.host, A.bytes));
    OK(be->mem_write(ctx, stream, B.d.mem, 0, B.host, B.bytes));

    /* Detection: all candidates in one call. */
    host_index idx[NCANDS];
    detect_candidates(idx, &A.d, batch, M, K);
    const char *dname = dt == PIT_F32 ? "f32" : dt == PIT_F16 ? "f16" : "bf16";
    for (int i = 0; i < NCANDS; ++i) {
        index_read(&idx[i]);
        snprintf(label, sizeof label, "%s %lldx%lldx%lldx%lld %s %dx%d/%c detect", dname,
                 (long long)batch, (long long)M, (long long)K, (long long)N, pat_name[pat],
                 g_cands[i].rows, g_cands[i].cols, g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K');
        int32_t max_count = check_index(&idx[i], &A, batch, M, K, label);
        for (int t = 0; t < 2; ++t) {
            for (int worst = 0; worst < 2; ++worst) {
                pit_tile tile_buf = g_tiles[i][t];
                const char *ov = getenv("PIT_TEST_TILE"); /* debugging: "bm,bn,bk,threads" */
                if (ov && t == 1)
                    sscanf(ov, "%d,%d,%d,%d", &tile_buf.bm, &tile_buf.bn, &tile_buf.bk,
                           &tile_buf.threads);
                const pit_tile *tile = &tile_buf;
                snprintf(label, sizeof label,
                         "%s %lldx%lldx%lldx%lld %s %dx%d/%c tile %dx%dx%d%s", dname,
                         (long long)batch, (long long)M, (long long)K, (long long)N,
                         pat_name[pat], g_cands[i].rows, g_cands[i].cols,
                         g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K', tile->bm, tile->bn,
                         tile->bk, worst ? " worst" : "");
                poison(&C);
                pit_status st = be->matmul_sparse(ctx, stream, tile, &idx[i].idx, max_count,
                                                  worst, &A.d, &B.d, &C.d);
                if (st == PIT_ERR_UNSUPPORTED && g_cands[i].axis == PIT_AXIS_K &&
                    g_cands[i].rows % tile->bm != 0) {
                    ++g_checks; /* documented refusal */
                    continue;
                }
                EXPECT(st == PIT_SUCCESS, "%s: matmul_sparse -> %d %s", label, (int)st,
                       g_error);
                if (st == PIT_SUCCESS)
                    check_c(&C, ref, batch, M, N, label);
            }
        }
    }
    for (int i = 0; i < NCANDS; ++i)
        index_free(&idx[i]);

    /* Dense GEMM. */
    snprintf(label, sizeof label, "%s %lldx%lldx%lldx%lld %s dense (%s)", dname,
             (long long)batch, (long long)M, (long long)K, (long long)N, pat_name[pat],
             (dt == PIT_BF16 || (dt == PIT_F16 && !has_f16)) ? "pit dense tile"
                                                              : be->dense_name(ctx));
    poison(&C);
    pit_status st = be->matmul_dense(ctx, stream, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_SUCCESS, "%s: matmul_dense -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&C, ref, batch, M, N, label);

    free(a);
    free(bm);
    free(ref);
    dtensor_free(&A);
    dtensor_free(&B);
    dtensor_free(&C);
}

/* ---- u8 masks ------------------------------------------------------------------------ *
 * A bool mask (u8: an element is on when its byte is not 0) through detection
 * and the operators that read a mask: sddmm, softmax and its backward. The
 * mask has the output's shape, M x K of the case, and the case's N is the
 * SDDMM's inner dimension D. On bytes are random in 1..255, so any non-zero
 * byte must count, not only 1; data are random and never zero. A rank-2 mask
 * shared by every batch is tried as well as one per batch. */

#define MASK_SCALE 0.8

static int mask_on_host(const dtensor *Mk, int64_t b, int64_t r, int64_t c)
{
    return ((const uint8_t *)Mk->host)[elem_index(Mk, b, r, c)] != 0; /* rank 2: b unused */
}

static void mask_fill(dtensor *Mk, int pat, uint64_t seed, int64_t mbatch, int64_t M, int64_t K)
{
    for (int64_t b = 0; b < mbatch; ++b)
        for (int64_t r = 0; r < M; ++r)
            for (int64_t c = 0; c < K; ++c) {
                double byte = 1.0 + floor(hash01(seed + 5, b, r, c) * 255.0);
                store_elem(PIT_U8, Mk->host, elem_index(Mk, b, r, c),
                           is_zero(pat, seed, b, r, c) ? 0.0 : byte);
            }
    OK(be->mem_write(ctx, stream, Mk->d.mem, 0, Mk->host, Mk->bytes));
}

/* Never-zero values into t (written to the device) and vals (batch x rows x cols). */
static void values_fill(dtensor *t, uint64_t seed, int64_t batch, int64_t rows, int64_t cols,
                        double *vals)
{
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                size_t i = elem_index(t, b, r, c);
                store_elem(t->d.dtype, t->host, i, value_at(seed, b, r, c));
                vals[(b * rows + r) * cols + c] = load_elem(t->d.dtype, t->host, i);
            }
    OK(be->mem_write(ctx, stream, t->d.mem, 0, t->host, t->bytes));
}

/* The CPU results of one case; every array is batch x M x K but a (M x D)
 * and bt (K x D). */
typedef struct mask_refs {
    double *a, *bt, *x, *dy, *c, *y, *dx;
} mask_refs;


/* The mask as core's references take it: 0/1, mbatch x M x K. */
static double *mask_dense(const dtensor *Mk, int64_t mbatch, int64_t M, int64_t K)
{
    double *m = calloc((size_t)(mbatch * M * K) + 1, sizeof(double));
    for (int64_t b = 0; b < mbatch; ++b)
        for (int64_t r = 0; r < M; ++r)
            for (int64_t c = 0; c < K; ++c)
                m[(b * M + r) * K + c] = mask_on_host(Mk, b, r, c);
    return m;
}

/* The operands of the mask operators, f32, with the case's padding and offset. */
typedef struct mask_operands {
    dtensor A, B, X, Y, dY, O; /* O: the output, poisoned before each operator */
} mask_operands;

static void mask_operands_make(mask_operands *o, mask_refs *r, const shape *s, uint64_t seed)
{
    const int64_t batch = s->batch, M = s->M, K = s->K, D = s->N;
    const int rank3 = batch > 1;
    dtensor_make(&o->A, PIT_F32, batch, M, D, s->pad, s->off, rank3);
    dtensor_make(&o->B, PIT_F32, batch, K, D, s->pad, s->off, rank3);
    dtensor_make(&o->X, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->Y, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->dY, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->O, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    const size_t mk = (size_t)(batch * M * K) + 1;
    r->a = calloc((size_t)(batch * M * D) + 1, sizeof(double));
    r->bt = calloc((size_t)(batch * K * D) + 1, sizeof(double));
    r->x = calloc(mk, sizeof(double));
    r->dy = calloc(mk, sizeof(double));
    r->c = calloc(mk, sizeof(double));
    r->y = calloc(mk, sizeof(double));
    r->dx = calloc(mk, sizeof(double));
    values_fill(&o->A, seed + 11, batch, M, D, r->a);
    values_fill(&o->B, seed + 12, batch, K, D, r->bt);
    values_fill(&o->X, seed + 13, batch, M, K, r->x);
    values_fill(&o->dY, seed + 14, batch, M, K, r->dy);
}

static void mask_operands_free(mask_operands *o, mask_refs *r)
{
    dtensor *t[] = {&o->A, &o->B, &o->X, &o->Y, &o->dY, &o->O};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; ++i)
        dtensor_free(t[i]);
    double *p[] = {r->a, r->bt, r->x, r->dy, r->c, r->y, r->dx};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i)
        free(p[i]);
}

/* sddmm, softmax and softmax backward on one index of the mask. */
static void mask_ops_check(mask_operands *o, const mask_refs *r, const dtensor *Mk,
                           const pit_index *idx, const shape *s, const char *what)
{
    char label[192]; /* what is at most 160 characters */
    snprintf(label, sizeof label, "%.160s sddmm", what);
    poison(&o->O);
    pit_status st = be->sddmm(ctx, stream, idx, &o->A.d, &o->B.d, &Mk->d, &o->O.d);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->c, s->batch, s->M, s->K, label);

    snprintf(label, sizeof label, "%.160s softmax", what);
    poison(&o->O);
    st = be->softmax_sparse(ctx, stream, idx, &o->X.d, &Mk->d, &o->O.d, (float)MASK_SCALE);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->y, s->batch, s->M, s->K, label);

    snprintf(label, sizeof label, "%.160s softmax backward", what);
    poison(&o->O);
    st = be->softmax_sparse_backward(ctx, stream, idx, &o->Y.d, &o->dY.d, &Mk->d, &o->O.d,
                                     (float)MASK_SCALE);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->dx, s->batch, s->M, s->K, label);
}

/* The backward's input Y: the reference forward result, rounded to f32. */
static void mask_forward_upload(mask_operands *o, mask_refs *r, const shape *s)
{
    for (int64_t b = 0; b < s->batch; ++b)
        for (int64_t m = 0; m < s->M; ++m)
            for (int64_t n = 0; n < s->K; ++n) {
                size_t i = elem_index(&o->Y, b, m, n);
                double *y = &r->y[(b * s->M + m) * s->K + n];
                store_elem(PIT_F32, o->Y.host, i, *y);
                *y = load_elem(PIT_F32, o->Y.host, i);
            }
    OK(be->mem_write(ctx, stream, o->Y.d.mem, 0, o->Y.host, o->Y.bytes));
}

static void run_mask_case(const shape *s, int pat, int shared)
{
    const int64_t batch = s->batch, M = s->M, K = s->K;
    const int64_t mbatch = shared ? 1 : batch;
    const uint64_t seed = (uint64_t)(M * 7919 + K * 104729 + s->N + pat * 13 + batch + shared);
    dtensor Mk;
    dtensor_make(&Mk, PIT_U8, mbatch, M, K, s->pad, s->off, mbatch > 1);
    mask_fill(&Mk, pat, seed, mbatch, M, K);

    mask_operands o;
    mask_refs r;
    mask_operands_make(&o, &r, s, seed);
    /* core's double-precision references; the backward from y as the
     * device reads it (rounded to f32) */
    double *md = mask_dense(&Mk, mbatch, M, K);
    pit_ref_sddmm(batch, M, K, s->N, r.a, r.bt, md, mbatch > 1, r.c);
    pit_ref_softmax(batch, M, K, r.x, md, mbatch > 1, MASK_SCALE, r.y);
    mask_forward_upload(&o, &r, s);
    pit_ref_softmax_backward(batch, M, K, r.y, r.dy, md, mbatch > 1, MASK_SCALE, r.dx);
    free(md);

    host_index idx[NCANDS];
    detect_candidates(idx, &Mk.d, mbatch, M, K);
    char what[160];
    for (int i = 0; i < NCANDS; ++i) {
        index_read(&idx[i]);
        snprintf(what, sizeof what, "u8 mask%s %lldx%lldx%lld (D %lld) %s %dx%d/%c",
                 shared ? " (shared)" : "", (long long)batch, (long long)M, (long long)K,
                 (long long)s->N, pat_name[pat], g_cands[i].rows, g_cands[i].cols,
                 g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K');
        char label[192];
        snprintf(label, sizeof label, "%s detect", what);
        check_index(&idx[i], &Mk, mbatch, M, K, label);
        /* The operators group by row-block and list column blocks (axis K). */
        if (g_cands[i].axis == PIT_AXIS_K)
            mask_ops_check(&o, &r, &Mk, &idx[i].idx, s, what);
    }
    for (int i = 0; i < NCANDS; ++i)
        index_free(&idx[i]);
    mask_operands_free(&o, &r);
    dtensor_free(&Mk);
}

/* A dtype that cannot be a mask is refused with a message naming u8 among
 * the allowed ones. */
static void test_mask_errors(void)
{
    dtensor X, Mk;
    dtensor_make(&X, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&Mk, PIT_U8, 1, 8, 8, 0, 0, 0);
    host_index h;
    index_make(&h, (pit_microtile){8, 8, PIT_AXIS_K}, 1, 8, 8);
    Mk.d.dtype = (pit_dtype)9;
    pit_status st = be->detect(ctx, stream, &Mk.d, &h.idx, 1);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"), "detect of dtype 9 -> %d (%s)",
           (int)st, g_error);
    st = be->softmax_sparse(ctx, stream, &h.idx, &X.d, &Mk.d, &X.d, 1.0f);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"),
           "softmax with a dtype 9 mask -> %d (%s)", (int)st, g_error);
    st = be->sddmm(ctx, stream, &h.idx, &X.d, &X.d, &Mk.d, &X.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"),
           "sddmm with a dtype 9 mask -> %d (%s)", (int)st, g_error);
    Mk.d.dtype = PIT_U8;
    index_free(&h);
    dtensor_free(&X);
    dtensor_free(&Mk);
}

/* ---- error paths --------------------------------------------------------------------- */

static void test_errors(void)
{
    void *mem = NULL;
    g_fail_next_alloc = 1;
    pit_status st = be->mem_alloc(ctx, 64, &mem);
    EXPECT(st == PIT_ERR_OUT_OF_MEMORY, "injected allocation failure -> %d", (int)st);

    /* Sparse B (axis N) is refused cleanly. */
    dtensor A, B, C;
    dtensor_make(&A, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&B, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&C, PIT_F32, 1, 8, 8, 0, 0, 0);
    host_index h;
    index_make(&h, (pit_microtile){1, 8, PIT_AXIS_N}, 1, 8, 8);
    pit_tile tile = {8, 16, 8, 0, 1, 0};
    st = be->matmul_sparse(ctx, stream, &tile, &h.idx, 1, 0, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED && strstr(g_error, "axis"),
           "axis N -> %d (%s)", (int)st, g_error);
    /* A tile too large for local memory is refused, not crashed. */
    pit_tile huge = {512, 256, 256, 0, 1, 0};
    host_index hk;
    index_make(&hk, (pit_microtile){512, 1, PIT_AXIS_K}, 1, 8, 8);
    st = be->matmul_sparse(ctx, stream, &huge, &hk.idx, 1, 0, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED, "huge tile -> %d (%s)", (int)st, g_error);
    if (g_verbose)
        fprintf(stderr, "  huge tile message: %s\n", g_error);
    /* Mismatched shapes. */
    C.d.shape[1] = 9;
    st = be->matmul_dense(ctx, stream, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_SHAPE_MISMATCH, "shape mismatch -> %d", (int)st);
    index_free(&h);
    index_free(&hk);
    dtensor_free(&A);
    dtensor_free(&B);
    dtensor_free(&C);
}

/* A program that does not compile gives PIT_ERR_COMPILE with the build log. */
static void test_compile_error(void)
{
    cl_program prog = NULL;
    pit_status st = ocl_program_get(ctx, "pit_matmul", "-DDT=7", &prog);
    EXPECT(st == PIT_ERR_COMPILE && strstr(g_error, "clBuildProgram") &&
               strstr(g_error, "unknown DT"),
           "bad defines -> %d (%s)", (int)st, g_error);
}

/* A queue the caller owns can be wrapped, used and released again. */
static void test_stream_wrap(void)
{
    ocl_ctx *c = ctx;
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(c->context, c->device, 0, &err);
    EXPECT(err == CL_SUCCESS, "clCreateCommandQueue -> %d", err);
    void *ws = NULL;
    OK(be->stream_wrap(ctx, q, &ws));
    void *mem = NULL;
    uint32_t back[4] = {0};
    OK(be->mem_alloc(ctx, 16, &mem));
    OK(be->mem_fill32(ctx, ws, mem, 0, 0x12345678u, 16));
    OK(be->mem_read(ctx, ws, mem, 0, back, 16));
    EXPECT(back[0] == 0x12345678u && back[3] == 0x12345678u, "fill through wrapped queue");
    OK(be->stream_synchronize(ctx, ws));
    be->stream_destroy(ctx, ws);
    be->mem_free(ctx, mem);
    /* Still ours: pit released only its own reference. */
    EXPECT(clFinish(q) == CL_SUCCESS, "wrapped queue released too often");
    clReleaseCommandQueue(q);
}

/* Flips a byte in the middle of every cached binary. */
static int corrupt_cache_files(void)
{
    const char *dir = host_cache_dir();
    DIR *d = dir ? opendir(dir) : NULL;
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "opencl-", 7) != 0 || !strstr(e->d_name, ".bin"))
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r+b");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, size / 2, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, size / 2, SEEK_SET);
        fputc(ch ^ 0x5a, f);
        fclose(f);
        ++n;
    }
    if (d)
        closedir(d);
    return n;
}

static void test_events(void)
{
    pit_event *e0 = NULL, *e1 = NULL;
    OK(be->event_record(ctx, stream, &e0));
    OK(be->event_record(ctx, stream, &e1));
    double ms = -1;
    OK(be->event_elapsed_ms(ctx, e0, e1, &ms));
    EXPECT(ms >= 0, "elapsed %g ms", ms);
    be->event_destroy(ctx, e0);
    be->event_destroy(ctx, e1);
}

int main(int argc, char **argv)
{
    g_verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    if (argc > 1 && strcmp(argv[1], "-vv") == 0)
        g_verbose = 2;
    be = pit_backend_register(&g_host);
    if (!be || be->abi_version != PIT_BACKEND_ABI_VERSION) {
        fprintf(stderr, "pit_backend_register failed\n");
        return 1;
    }
    pit_status st = be->init(&g_host);
    if (st == PIT_ERR_NO_DEVICE) {
        printf("SKIP: %s\n", g_error);
        return 77;
    }
    OK(st);
    int count = 0;
    OK(be->device_count(&count));
    pit_device_info info;
    OK(be->device_info(0, &info));
    printf("device 0 of %d: %s | %s | %s | driver %s | %llu MiB | %d CUs | f16 %d bf16 %d\n",
           count, info.backend, info.vendor, info.name, info.driver_version,
           (unsigned long long)(info.global_mem_bytes >> 20), info.compute_units, info.has_f16,
           info.has_bf16);
    EXPECT(strcmp(info.backend, "opencl") == 0 && info.name[0] && info.arch[0],
           "device_info incomplete");
    OK(be->context_create(0, &(pit_switches){{0}}, &ctx));
    OK(be->stream_create(ctx, &stream));
    printf("dense GEMM: %s\n", be->dense_name(ctx));

    test_events();
    test_errors();
    test_compile_error();
    test_stream_wrap();

    static const shape shapes[] = {
        {1, 64, 128, 48, 0, 0},  {1, 33, 100, 7, 3, 5},  {1, 1, 1, 1, 0, 0},
        {1, 100, 200, 33, 2, 1}, {2, 40, 96, 24, 1, 3},  {1, 128, 256, 64, 0, 0},
    };
    const pit_dtype dts[] = {PIT_F32, PIT_F16, PIT_BF16};
    for (size_t d = 0; d < 3; ++d) {
        int before = g_failures;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
            for (int p = 0; p < PAT_COUNT; ++p)
                run_case(&shapes[s], p, dts[d], info.has_f16);
        printf("%s: %s\n", dts[d] == PIT_F32 ? "f32" : dts[d] == PIT_F16 ? "f16" : "bf16",
               g_failures == before ? "ok" : "FAILED");
        fflush(stdout);
    }
    test_mask_errors();
    int before_mask = g_failures;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int p = 0; p < PAT_COUNT; ++p)
            for (int shared = 0; shared <= (shapes[s].batch > 1); ++shared)
                run_mask_case(&shapes[s], p, shared);
    printf("u8 masks: %s\n", g_failures == before_mask ? "ok" : "FAILED");
    fflush(stdout);

    /* A corrupt disk cache is detected, recompiled and rewritten. */
    be->stream_destroy(ctx, stream);
    be->context_destroy(ctx);
    int corrupted = corrupt_cache_files();
    OK(be->context_create(0, &(pit_switches){{0}}, &ctx));
    OK(be->stream_create(ctx, &stream));
    g_corrupt_logged = 0;
    run_case(&shapes[1], PAT_K32X1, PIT_F32, info.has_f16);
    EXPECT(corrupted > 0 && g_corrupt_logged > 0, "corrupted %d cache files, %d noticed",
           corrupted, g_corrupt_logged);
    printf("disk cache: %d files corrupted, %d recompiled: %s\n", corrupted, g_corrupt_logged,
           corrupted > 0 && g_corrupt_logged > 0 ? "ok" : "FAILED");

    be->stream_destroy(ctx, stream);
    be->context_destroy(ctx);
    be->shutdown();
    printf("%d checks, %d failures\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
