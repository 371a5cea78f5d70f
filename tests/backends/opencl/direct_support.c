/*
 * direct_support.c - the host, data, tensors, indexes and result checks the
 * cases of test_opencl_direct share (direct.h).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "direct.h"
#include "../host_cache.h"

/* ---- the host ------------------------------------------------------------------ */

char g_error[4096];
int g_verbose;
int g_fail_next_alloc;

static pit_status host_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return st;
}

static void host_log(const char *fmt, ...)
{
    va_list ap;
    if (!g_verbose)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "[debug] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

const char *host_cache_dir(void)
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

/* the tests trust their own cache folder: a plain fopen */
static FILE *host_open_cache_entry(const char *path)
{
    return fopen(path, "rb");
}

const pit_host g_host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir,
                         host_inject, host_open_cache_entry, host_cache_load, host_cache_store,
                         host_cache_drop};

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

void store_elem(pit_dtype t, void *base, size_t i, double v)
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

double load_elem(pit_dtype t, const void *base, size_t i)
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

double hash01(uint64_t seed, int64_t a, int64_t b, int64_t c)
{
    uint64_t h = mix(seed ^ mix((uint64_t)a * 0x100000001b3ull ^ mix((uint64_t)b + 7) ^
                                mix((uint64_t)c * 31 + 11)));
    return (double)(h >> 11) / 9007199254740992.0;
}

double value_at(uint64_t seed, int64_t a, int64_t b, int64_t c)
{
    double v = hash01(seed, a, b, c) * 2.0 - 1.0;
    if (fabs(v) < 1e-3)
        v = 0.5;
    return v;
}

/* ---- sparsity patterns of A -------------------------------------------------------- */

const char *pat_name[PAT_COUNT] = {"dense", "all-zero", "32x1", "1x64", "32x64", "fine90"};

int is_zero(int pat, uint64_t seed, int64_t b, int64_t m, int64_t k)
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

int g_checks, g_failures;

const pit_backend *be;
void *ctx, *stream;

/* ---- tensors on the device ---------------------------------------------------------- */

void dtensor_make(dtensor *t, pit_dtype dt, int64_t batch, int64_t rows, int64_t cols,
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

size_t elem_index(const dtensor *t, int64_t b, int64_t r, int64_t c)
{
    int rk = t->d.rank;
    int64_t bs = rk == 3 ? t->d.strides[0] : 0;
    return t->d.offset / esize(t->d.dtype) + (size_t)(b * bs + r * t->d.strides[rk - 2] + c);
}

void dtensor_free(dtensor *t)
{
    be->mem_free(ctx, t->d.mem);
    free(t->host);
}

/* ---- indexes ------------------------------------------------------------------------- */

const pit_microtile g_cands[NCANDS] = {
    {32, 1, PIT_AXIS_K}, {1, 64, PIT_AXIS_M}, {32, 64, PIT_AXIS_K},
    {8, 8, PIT_AXIS_M},  {3, 5, PIT_AXIS_K},
};

void index_make(host_index *h, pit_microtile t, int64_t batch, int64_t M, int64_t K)
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

void index_free(host_index *h)
{
    be->mem_free(ctx, h->idx.counts);
    be->mem_free(ctx, h->idx.entries);
    be->mem_free(ctx, h->idx.total);
    free(h->counts);
    free(h->entries);
}

void index_read(host_index *h)
{
    size_t ng = (size_t)h->idx.groups;
    OK(be->mem_read(ctx, stream, h->idx.counts, 0, h->counts, ng * 4));
    OK(be->mem_read(ctx, stream, h->idx.entries, 0, h->entries,
                    ng * (size_t)h->idx.capacity * 4));
    OK(be->mem_read(ctx, stream, h->idx.total, 0, &h->total, 4));
}

void detect_candidates(host_index idx[NCANDS], const pit_tdesc *X, int64_t batch, int64_t M,
                       int64_t K)
{
    pit_index raw[NCANDS];
    for (int i = 0; i < NCANDS; ++i) {
        index_make(&idx[i], g_cands[i], batch, M, K);
        raw[i] = idx[i].idx;
    }
    OK(be->detect(ctx, stream, X, raw, NCANDS));
}

int32_t check_index(const host_index *h, const dtensor *A, int64_t batch, int64_t M,
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

void check_c(dtensor *C, const double *ref, int64_t batch, int64_t M, int64_t N,
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

void poison(dtensor *C)
{
    OK(be->mem_fill32(ctx, stream, C->d.mem, 0, nan_pattern(C->d.dtype), C->bytes));
}

