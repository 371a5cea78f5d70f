/*
 * test_cuda_direct.c - drives libpit-cuda.so through its pit_backend table
 * alone (no libpit): detection and index, sparse matmul along K and M, and
 * cuBLAS dense, for f32/f16/bf16, against a double-precision CPU reference.
 * Exit 77 (skipped) when there is no CUDA driver or device.
 *
 *   test_cuda_direct            correctness
 *   test_cuda_direct --quick    a few small cases (for compute-sanitizer)
 *   test_cuda_direct --engine   the sm_90 engine's small case alone (its racecheck)
 *   test_cuda_direct --engine-all   every engine case and tile alone
 *   test_cuda_direct --decode   the decode cases alone (their sanitizers)
 *   test_cuda_direct --bench    the paper's 4096^3 point, timed with events
 *   test_cuda_direct --bench-decode [DTYPE]   x[M,K] . W[K,N] for a few rows (f16, bf16)
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_plugin.h"
#include "../host_cache.h"


/* ---- the host services a plug-in expects -------------------------------- */

static int fail_next_alloc;
static int host_inject(void)
{
    int f = fail_next_alloc;
    fail_next_alloc = 0;
    return f;
}

static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_inject,
                                host_open_cache_entry, host_cache_load, host_cache_store, host_cache_drop};

static const pit_backend *be;
static void *bctx, *stream;
static int failures;

#define CHECK(call) TEST_CALL(call)

/* ---- 16-bit floats on the host ----------------------------------------- */
static uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) ++h;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp - 15 + 127) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static size_t el_size(pit_dtype d)
{
    return d == PIT_F32 ? 4 : 2;
}

static const char *dt_name(pit_dtype d)
{
    return d == PIT_F32 ? "f32" : d == PIT_F16 ? "f16" : "bf16";
}

/* host floats -> device bytes of dtype */
static void *to_device_bytes(const float *x, size_t n, pit_dtype dt)
{
    void *out = malloc(n * el_size(dt) + 1);
    for (size_t i = 0; i < n; ++i) {
        if (dt == PIT_F32) ((float *)out)[i] = x[i];
        else if (dt == PIT_F16) ((uint16_t *)out)[i] = f32_to_f16(x[i]);
        else ((uint16_t *)out)[i] = f32_to_bf16(x[i]);
    }
    return out;
}

static float from_device(const void *p, size_t i, pit_dtype dt)
{
    if (dt == PIT_F32) return ((const float *)p)[i];
    if (dt == PIT_F16) return f16_to_f32(((const uint16_t *)p)[i]);
    return bf16_to_f32(((const uint16_t *)p)[i]);
}

/* round a host value to what the dtype can hold, so the reference sees the same inputs */
static float representable(float x, pit_dtype dt)
{
    if (dt == PIT_F16) return f16_to_f32(f32_to_f16(x));
    if (dt == PIT_BF16) return bf16_to_f32(f32_to_bf16(x));
    return x;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    return test_urand(&rng);
}

/* non-zero values in [-1, -0.1] u [0.1, 1] */
static float nonzero_value(void)
{
    float v = (float)(0.1 + 0.9 * urand());
    return urand() < 0.5 ? -v : v;
}

/* ---- a device matrix (rank 2 or 3) ---------------------------------------- */
typedef struct dmat {
    pit_tdesc d;
    float *h; /* host copy, representable values, with padding */
    size_t elems;
} dmat;

static dmat make_dmat(pit_dtype dt, int64_t batch, int64_t rows, int64_t cols, int64_t ld)
{
    dmat m;
    memset(&m, 0, sizeof m);
    m.d.dtype = dt;
    m.d.rank = batch > 1 ? 3 : 2;
    int r = m.d.rank;
    if (r == 3) {
        m.d.shape[0] = batch;
        m.d.strides[0] = rows * ld;
    }
    m.d.shape[r - 2] = rows;
    m.d.shape[r - 1] = cols;
    m.d.strides[r - 2] = ld;
    m.d.strides[r - 1] = 1;
    m.elems = (size_t)(batch * rows * ld);
    m.h = calloc(m.elems + 1, sizeof(float));
    /* whole 32-bit words, so the NaN poison covers odd 16-bit sizes too */
    CHECK(be->mem_alloc(bctx, (m.elems * el_size(dt) + 3) / 4 * 4, &m.d.mem));
    return m;
}

static void upload(dmat *m)
{
    void *bytes = to_device_bytes(m->h, m->elems, m->d.dtype);
    CHECK(be->mem_write(bctx, stream, m->d.mem, 0, bytes, m->elems * el_size(m->d.dtype)));
    free(bytes);
}

static void free_dmat(dmat *m)
{
    be->mem_free(bctx, m->d.mem);
    free(m->h);
}

static int64_t rows_of(const dmat *m) { return m->d.shape[m->d.rank - 2]; }
static int64_t cols_of(const dmat *m) { return m->d.shape[m->d.rank - 1]; }
static int64_t batch_of(const dmat *m) { return m->d.rank == 3 ? m->d.shape[0] : 1; }
static int64_t ld_of(const dmat *m) { return m->d.strides[m->d.rank - 2]; }
static float *at(dmat *m, int64_t b, int64_t r, int64_t c) { return &m->h[(b * rows_of(m) + r) * ld_of(m) + c]; }

/* ---- sparsity patterns -------------------------------------------------------- */
typedef enum pattern { P_32X1, P_1X64, P_32X64, P_ZERO, P_DENSE, P_FINE } pattern;
static const char *pattern_name[] = {"32x1", "1x64", "32x64", "zero", "dense", "fine"};

/* zeros are written as -0.0 half the time: detection must see them as zero */
static float zero_value(void)
{
    return urand() < 0.5 ? -0.0f : 0.0f;
}

static void fill_pattern(dmat *a, pattern p, double s)
{
    int64_t B = batch_of(a), M = rows_of(a), K = cols_of(a);
    int bh = p == P_32X1 || p == P_32X64 ? 32 : 1, bw = p == P_1X64 || p == P_32X64 ? 64 : 1;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t r0 = 0; r0 < M; r0 += bh)
            for (int64_t c0 = 0; c0 < K; c0 += bw) {
                int zero_tile = p == P_ZERO || ((p == P_32X1 || p == P_1X64 || p == P_32X64) && urand() < s);
                for (int64_t r = r0; r < r0 + bh && r < M; ++r)
                    for (int64_t c = c0; c < c0 + bw && c < K; ++c) {
                        int z = zero_tile || (p == P_FINE && urand() < s);
                        *at(a, b, r, c) = z ? zero_value() : representable(nonzero_value(), a->d.dtype);
                    }
            }
}

static void fill_dense(dmat *m)
{
    for (int64_t b = 0; b < batch_of(m); ++b)
        for (int64_t r = 0; r < rows_of(m); ++r)
            for (int64_t c = 0; c < cols_of(m); ++c) *at(m, b, r, c) = representable(nonzero_value(), m->d.dtype);
}

/* ---- index buffers -------------------------------------------------------- */
static pit_index make_index(const dmat *a, pit_microtile t)
{
    pit_index ix;
    memset(&ix, 0, sizeof ix);
    ix.tile = t;
    int64_t tr = (rows_of(a) + t.rows - 1) / t.rows, tc = (cols_of(a) + t.cols - 1) / t.cols;
    ix.groups_per_batch = (int32_t)(t.axis == PIT_AXIS_M ? tc : tr);
    ix.capacity = (int32_t)(t.axis == PIT_AXIS_M ? tr : tc);
    ix.groups = ix.groups_per_batch * (int32_t)batch_of(a);
    CHECK(be->mem_alloc(bctx, (size_t)ix.groups * 4, &ix.counts));
    CHECK(be->mem_alloc(bctx, (size_t)ix.groups * (size_t)ix.capacity * 4, &ix.entries));
    CHECK(be->mem_alloc(bctx, 4, &ix.total));
    return ix;
}

static void free_index(pit_index *ix)
{
    be->mem_free(bctx, ix->counts);
    be->mem_free(bctx, ix->entries);
    be->mem_free(bctx, ix->total);
}

static int bits_nonzero(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return (u & 0x7fffffffu) != 0;
}

/* Compares the device index with the micro-tiles the host finds non-zero;
 * returns max counts[g]. */
static int32_t check_index(dmat *a, const pit_index *ix, const char *what)
{
    int32_t *counts = malloc((size_t)ix->groups * 4 + 4), total = -1, maxc = 0;
    int32_t *entries = malloc((size_t)ix->groups * (size_t)ix->capacity * 4 + 4);
    CHECK(be->mem_read(bctx, stream, ix->counts, 0, counts, (size_t)ix->groups * 4));
    CHECK(be->mem_read(bctx, stream, ix->entries, 0, entries, (size_t)ix->groups * (size_t)ix->capacity * 4));
    CHECK(be->mem_read(bctx, stream, ix->total, 0, &total, 4));
    const pit_microtile t = ix->tile;
    int64_t sum = 0, bad = 0;
    char *seen = malloc((size_t)ix->capacity + 1);
    for (int32_t g = 0; g < ix->groups; ++g) {
        int64_t b = g / ix->groups_per_batch, gl = g % ix->groups_per_batch;
        memset(seen, 0, (size_t)ix->capacity);
        if (counts[g] < 0 || counts[g] > ix->capacity) {
            ++bad;
            continue;
        }
        for (int32_t i = 0; i < counts[g]; ++i) {
            int32_t e = entries[(int64_t)g * ix->capacity + i];
            if (e < 0 || e >= ix->capacity || seen[e]) ++bad;
            else seen[e] = 1;
        }
        int32_t expected = 0;
        for (int32_t e = 0; e < ix->capacity; ++e) {
            int64_t tr = t.axis == PIT_AXIS_M ? e : gl, tc = t.axis == PIT_AXIS_M ? gl : e;
            int nz = 0;
            for (int64_t r = tr * t.rows; r < (tr + 1) * t.rows && r < rows_of(a) && !nz; ++r)
                for (int64_t c = tc * t.cols; c < (tc + 1) * t.cols && c < cols_of(a); ++c)
                    if (bits_nonzero(*at(a, b, r, c))) {
                        nz = 1;
                        break;
                    }
            expected += nz;
            if (nz != seen[e]) ++bad;
        }
        if (expected != counts[g]) ++bad;
        sum += counts[g];
        if (counts[g] > maxc) maxc = counts[g];
    }
    if (sum != total) ++bad;
    if (bad) {
        printf("FAIL index %s micro-tile %dx%d axis %d: %lld mismatches (total %d, sum %lld)\n", what, t.rows, t.cols,
               (int)t.axis, (long long)bad, total, (long long)sum);
        ++failures;
    }
    free(seen);
    free(counts);
    free(entries);
    return maxc;
}

/* ---- matmul check ---------------------------------------------------------- */
static uint32_t nan_pattern(pit_dtype dt)
{
    return dt == PIT_F32 ? 0x7fc00000u : dt == PIT_F16 ? 0x7e007e00u : 0x7fc07fc0u;
}

/* C = A.B in double on the host: batch x M x N */
static double *reference(dmat *a, dmat *b)
{
    int64_t B = batch_of(a), M = rows_of(a), K = cols_of(a), N = cols_of(b);
    double *ref = calloc((size_t)(B * M * N) + 1, sizeof(double));
    for (int64_t bb = 0; bb < B; ++bb)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
                double av = *at(a, bb, m, k);
                if (av == 0) continue;
                const float *brow = at(b, bb, k, 0);
                double *crow = ref + (bb * M + m) * N;
                for (int64_t n = 0; n < N; ++n) crow[n] += av * (double)brow[n];
            }
    return ref;
}

static double compare(const double *ref, dmat *c, const char *what)
{
    pit_dtype dt = c->d.dtype;
    size_t bytes = c->elems * el_size(dt);
    void *raw = malloc(bytes + 1);
    CHECK(be->mem_read(bctx, stream, c->d.mem, 0, raw, bytes));
    double num = 0, den = 0;
    int nan = 0;
    int64_t B = batch_of(c), M = rows_of(c), N = cols_of(c);
    for (int64_t bb = 0; bb < B; ++bb)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double r = ref[(bb * M + m) * N + n];
                double got = from_device(raw, (size_t)((bb * M + m) * ld_of(c) + n), dt);
                if (isnan(got)) nan = 1;
                num += (got - r) * (got - r);
                den += r * r;
            }
    free(raw);
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    double tol = dt == PIT_F32 ? 1e-4 : 1e-2;
    if (nan || err > tol || isnan(err)) {
        printf("FAIL %s: rel err %.3g (tol %.0e)%s\n", what, err, tol, nan ? " NaN in output" : "");
        ++failures;
    }
    return err;
}

static void poison(dmat *c)
{
    CHECK(be->mem_fill32(bctx, stream, c->d.mem, 0, nan_pattern(c->d.dtype), (c->elems * el_size(c->d.dtype) + 3) / 4 * 4));
}

typedef struct tcase {
    int64_t batch, M, K, N, lda_pad;
    pattern p;
    double s;
} tcase;

static const char *tile_kind(const pit_tile *t)
{
    return t->tensor_core == PIT_TILE_ENGINE ? "wg" : t->tensor_core ? "tc" : "cc";
}

static pit_tile default_tile(pit_dtype dt, pit_axis axis)
{
    int tc = dt != PIT_F32;
    if (axis == PIT_AXIS_K) return tc ? (pit_tile){32, 64, 32, 128, 3, 1} : (pit_tile){32, 64, 16, 128, 2, 0};
    return tc ? (pit_tile){64, 64, 32, 128, 3, 1} : (pit_tile){64, 64, 32, 128, 2, 0};
}

static void run_case(const tcase *tc, pit_dtype dt, const pit_tile *tiles, int ntiles)
{
    dmat a = make_dmat(dt, tc->batch, tc->M, tc->K, tc->K + tc->lda_pad);
    dmat b = make_dmat(dt, tc->batch, tc->K, tc->N, tc->N);
    dmat c = make_dmat(dt, tc->batch, tc->M, tc->N, tc->N);
    fill_pattern(&a, tc->p, tc->s);
    fill_dense(&b);
    upload(&a);
    upload(&b);
    /* 32x1, 32x64, 1x64 of the paper, two that straddle detection regions,
     * the other row-block heights of the sm_90 engine (16, 64) and the
     * decode kernels' 16x1 */
    const pit_microtile cands[] = {{32, 1, PIT_AXIS_K}, {32, 64, PIT_AXIS_K},  {1, 64, PIT_AXIS_M},
                                   {64, 1, PIT_AXIS_K}, {1, 3, PIT_AXIS_M},    {16, 64, PIT_AXIS_K},
                                   {64, 128, PIT_AXIS_K}, {16, 1, PIT_AXIS_K}};
    enum { ncand = sizeof cands / sizeof cands[0] };
    pit_index ix[ncand];
    for (int i = 0; i < ncand; ++i) ix[i] = make_index(&a, cands[i]);
    CHECK(be->detect(bctx, stream, &a.d, ix, ncand));
    double *ref = reference(&a, &b);
    char what[256];
    if (tc->M <= 64) { /* the column micro-tiles alone: the few-row detection */
        const pit_microtile cols[] = {{16, 1, PIT_AXIS_K}, {32, 1, PIT_AXIS_K}, {64, 1, PIT_AXIS_K}};
        pit_index cx[3];
        for (int i = 0; i < 3; ++i) cx[i] = make_index(&a, cols[i]);
        CHECK(be->detect(bctx, stream, &a.d, cx, 3));
        snprintf(what, sizeof what, "%s %s s=%.2f %lldx%lld b%lld columns alone", dt_name(dt), pattern_name[tc->p],
                 tc->s, (long long)tc->M, (long long)tc->K, (long long)tc->batch);
        for (int i = 0; i < 3; ++i) {
            check_index(&a, &cx[i], what);
            free_index(&cx[i]);
        }
    }
    int64_t cases = 0;
    for (int i = 0; i < ncand; ++i) {
        snprintf(what, sizeof what, "%s %s s=%.2f %lldx%lldx%lld b%lld", dt_name(dt), pattern_name[tc->p], tc->s,
                 (long long)tc->M, (long long)tc->K, (long long)tc->N, (long long)tc->batch);
        int32_t maxc = check_index(&a, &ix[i], what);
        for (int t = 0; t < (ntiles ? ntiles : 1); ++t) {
            pit_tile tile = ntiles ? tiles[t] : default_tile(dt, cands[i].axis);
            if (ntiles && cands[i].axis == PIT_AXIS_K && tile.bm != cands[i].rows) continue;
            for (int worst = 0; worst < 2; ++worst) {
                poison(&c);
                pit_status st = be->matmul_sparse(bctx, stream, &tile, &ix[i], maxc, worst, &a.d, &b.d, &c.d);
                snprintf(what, sizeof what, "%s %s s=%.2f %lldx%lldx%lld b%lld mt %dx%d%s tile %dx%dx%d/%d/%d/%s",
                         dt_name(dt), pattern_name[tc->p], tc->s, (long long)tc->M, (long long)tc->K,
                         (long long)tc->N, (long long)tc->batch, cands[i].rows, cands[i].cols,
                         cands[i].axis == PIT_AXIS_K ? "K" : "M", tile.bm, tile.bn, tile.bk, tile.threads,
                         tile.stages, tile_kind(&tile));
                if (st != PIT_SUCCESS) {
                    printf("FAIL %s: status %d: %s\n", what, (int)st, last_error);
                    ++failures;
                    continue;
                }
                compare(ref, &c, what);
                ++cases;
            }
        }
    }
    poison(&c);
    CHECK(be->matmul_dense(bctx, stream, &a.d, &b.d, &c.d));
    snprintf(what, sizeof what, "%s dense cuBLAS %lldx%lldx%lld", dt_name(dt), (long long)tc->M, (long long)tc->K,
             (long long)tc->N);
    compare(ref, &c, what);
    free(ref);
    printf("ok? %-5s %-6s s=%.2f %5lldx%5lldx%5lld b%lld pad%lld: %lld sparse runs, failures so far %d\n", dt_name(dt),
           pattern_name[tc->p], tc->s, (long long)tc->M, (long long)tc->K, (long long)tc->N, (long long)tc->batch,
           (long long)tc->lda_pad, (long long)cases, failures);
    for (int i = 0; i < ncand; ++i) free_index(&ix[i]);
    free_dmat(&a);
    free_dmat(&b);
    free_dmat(&c);
}

static void test_errors(void)
{
    /* injected allocation failure -> PIT_ERR_OUT_OF_MEMORY */
    void *mem = NULL;
    fail_next_alloc = 1;
    pit_status st = be->mem_alloc(bctx, 1024, &mem);
    if (st != PIT_ERR_OUT_OF_MEMORY) {
        printf("FAIL injected alloc failure gave %d\n", (int)st);
        ++failures;
    }
    /* an absurd allocation -> PIT_ERR_OUT_OF_MEMORY with the driver's code */
    st = be->mem_alloc(bctx, (size_t)1 << 50, &mem);
    if (st != PIT_ERR_OUT_OF_MEMORY || !strstr(last_error, "CUDA_ERROR_OUT_OF_MEMORY")) {
        printf("FAIL huge alloc gave %d: %s\n", (int)st, last_error);
        ++failures;
    }
}

/* What a correctness run covers (the command line's mode). */
typedef enum run_mode {
    RUN_ALL,        /* every case */
    RUN_QUICK,      /* a few small cases (compute-sanitizer) */
    RUN_ENGINE,     /* the engine's small case alone (racecheck of its kernel) */
    RUN_DECODE,     /* the decode cases alone */
    RUN_ENGINE_ALL  /* every engine case and tile alone */
} run_mode;

static int correctness(run_mode mode)
{
    const int quick = mode == RUN_QUICK;
    const tcase cases[] = {
        {1, 256, 512, 192, 0, P_32X1, 0.7}, {1, 256, 512, 192, 0, P_1X64, 0.7}, {1, 256, 512, 192, 0, P_32X64, 0.7},
        {1, 256, 512, 192, 0, P_ZERO, 0}, {1, 256, 512, 192, 0, P_DENSE, 0},  {1, 256, 512, 192, 0, P_FINE, 0.9},
        {1, 1, 7, 33, 0, P_DENSE, 0},       {1, 33, 1000, 7, 0, P_32X1, 0.5},  {1, 1000, 33, 65, 0, P_1X64, 0.5},
        {1, 7, 1, 1, 0, P_DENSE, 0},        {3, 100, 300, 96, 0, P_32X64, 0.5}, {1, 128, 256, 128, 8, P_32X1, 0.5},
        {1, 1000, 1000, 1000, 0, P_32X1, 0.9},
        /* decode: a few rows, zero columns; from 5 rows tensor cores where
         * B's rows hold 16-byte vectors and A's 4-byte pairs (N = 136, 256,
         * 128; K even), several row-blocks (40), long K split into shares,
         * padded and batched; up to 4 rows CUDA cores (also K odd, N = 100;
         * N = 2056 and 8200 with a last short n-tile, batched; N = 14344
         * with one row: on sm_90 the shares of K summed in clusters) */
        {1, 1, 1000, 264, 0, P_FINE, 0.5},  {2, 5, 2048, 136, 8, P_32X1, 0.75}, {1, 40, 1000, 256, 0, P_32X1, 0.5},
        {1, 16, 8192, 128, 0, P_32X1, 0.9}, {1, 3, 999, 264, 0, P_FINE, 0.5},   {1, 4, 1000, 100, 0, P_FINE, 0.6},
        {1, 1, 512, 136, 0, P_ZERO, 0},     {2, 2, 3000, 2056, 8, P_FINE, 0.5}, {1, 1, 700, 8200, 0, P_FINE, 0.6},
        {1, 1, 700, 14344, 0, P_FINE, 0.6},
    };
    const pit_dtype dts[] = {PIT_F32, PIT_F16, PIT_BF16};
    /* --quick (for compute-sanitizer): a few small cases */
    const size_t quick_cases[] = {0, 1, 6, 10, 14};
    size_t ncases = quick ? sizeof quick_cases / sizeof quick_cases[0] : sizeof cases / sizeof cases[0];
    if (mode == RUN_DECODE) {
        for (int d = 1; d < 3; ++d)
            for (size_t i = 13; i < sizeof cases / sizeof cases[0]; ++i) run_case(&cases[i], dts[d], NULL, 0);
        return failures;
    }
    for (int d = 0; d < 3 && (mode == RUN_ALL || quick); ++d)
        for (size_t i = 0; i < ncases; ++i) run_case(&cases[quick ? quick_cases[i] : i], dts[d], NULL, 0);
    /* the sm_90 engine (elsewhere, and on 32x1: the mma.sync tile) */
    const pit_tile engine_tiles[] = {{32, 256, 64, 384, 4, 2}, {32, 128, 64, 384, 3, 2}, {16, 256, 64, 384, 4, 2},
                                     {16, 128, 64, 384, 3, 2}, {64, 256, 64, 384, 4, 2}, {64, 128, 64, 384, 3, 2}};
    if (quick || mode == RUN_ENGINE) {
        const tcase small = {2, 200, 600, 300, 0, P_32X64, 0.7};
        run_case(&small, PIT_BF16, engine_tiles, mode == RUN_ENGINE ? 6 : 2);
        return failures;
    }
    /* a sweep of tiles on one case with edges in every dimension */
    const pit_tile cc_tiles[] = {{32, 128, 32, 128, 2, 0}, {64, 128, 8, 128, 2, 0}, {32, 64, 32, 128, 2, 0},
                                 {128, 128, 32, 256, 2, 0}, {1, 128, 32, 128, 2, 0}, {16, 64, 16, 128, 2, 0},
                                 {32, 256, 16, 128, 2, 0}};
    const pit_tile tc_tiles[] = {{32, 128, 64, 128, 4, 1}, {64, 128, 32, 128, 2, 1}, {32, 64, 64, 128, 3, 1},
                                 {128, 128, 64, 256, 4, 1}, {1, 128, 32, 128, 2, 1}, {16, 64, 32, 128, 2, 1},
                                 {64, 64, 32, 128, 4, 1}, {32, 256, 32, 128, 4, 1}, {32, 256, 32, 256, 4, 1}};
    const tcase sweep = {2, 200, 600, 300, 0, P_32X1, 0.6};
    if (mode == RUN_ALL) {
        run_case(&sweep, PIT_F32, cc_tiles, 7);
        run_case(&sweep, PIT_F16, tc_tiles, 9);
        run_case(&sweep, PIT_BF16, tc_tiles, 9);
    }
    run_case(&sweep, PIT_F16, engine_tiles, 6);
    run_case(&sweep, PIT_BF16, engine_tiles, 6);
    /* the engine on sparse micro-tiles: row-blocks with different columns,
     * edges in every dimension, padded rows of A, an empty pattern, and
     * grids of more CTAs than an H100 has SMs across a batch, with C's rows
     * not 16-byte aligned (element stores) and aligned (16-byte stores) */
    const tcase engine[] = {{2, 300, 1000, 520, 0, P_32X64, 0.7},
                            {1, 517, 4100, 263, 8, P_32X64, 0.9},
                            {1, 256, 512, 256, 0, P_ZERO, 0},
                            {2, 4100, 200, 1100, 0, P_32X64, 0.8},
                            {2, 2100, 300, 2056, 0, P_32X64, 0.6}};
    for (int i = 0; i < 5; ++i) {
        run_case(&engine[i], PIT_F16, engine_tiles, 6);
        run_case(&engine[i], PIT_BF16, engine_tiles, 6);
    }
    test_errors();
    return failures;
}

/* ---- bench ------------------------------------------------------------------- */
typedef void (*op_fn)(void *user);

/* median of 20 timed runs after 3 warm-ups, in ms */
static double time_op(op_fn fn, void *user)
{
    double ms;
    CHECK(test_median_ms(be, bctx, stream, fn, user, &ms, NULL));
    return ms;
}

typedef struct bench_ctx {
    dmat *a, *b, *c;
    pit_index *ix;
    pit_tile tile;
    int32_t maxc;
} bench_ctx;

static void op_detect(void *u)
{
    bench_ctx *b = u;
    CHECK(be->detect(bctx, stream, &b->a->d, b->ix, 1));
}
static void op_sparse(void *u)
{
    bench_ctx *b = u;
    CHECK(be->matmul_sparse(bctx, stream, &b->tile, b->ix, b->maxc, 0, &b->a->d, &b->b->d, &b->c->d));
}
static void op_dense(void *u)
{
    bench_ctx *b = u;
    CHECK(be->matmul_dense(bctx, stream, &b->a->d, &b->b->d, &b->c->d));
}

/* device-to-device copy bandwidth (read + write bytes / time), through the
 * driver directly: the backend table has no copy */
static double copy_bandwidth(void)
{
    typedef int (*retain_fn)(void **, int);
    typedef int (*set_fn)(void *);
    typedef int (*copy_fn)(uint64_t, uint64_t, size_t);
    typedef int (*sync_fn)(void);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return 0;
    retain_fn retain = (retain_fn)(uintptr_t)dlsym(lib, "cuDevicePrimaryCtxRetain");
    set_fn set = (set_fn)(uintptr_t)dlsym(lib, "cuCtxSetCurrent");
    copy_fn copy = (copy_fn)(uintptr_t)dlsym(lib, "cuMemcpyDtoD_v2");
    sync_fn sync = (sync_fn)(uintptr_t)dlsym(lib, "cuCtxSynchronize");
    void *ctx = NULL;
    if (!retain || !set || !copy || !sync || retain(&ctx, 0) || set(ctx)) return 0;
    size_t bytes = (size_t)1 << 30;
    void *src, *dst;
    CHECK(be->mem_alloc(bctx, bytes, &src));
    CHECK(be->mem_alloc(bctx, bytes, &dst));
    double best = 0;
    for (int i = 0; i < 6; ++i) {
        pit_event *e0, *e1;
        CHECK(be->stream_synchronize(bctx, stream));
        CHECK(be->event_record(bctx, stream, &e0));
        CHECK(be->stream_synchronize(bctx, stream));
        copy((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, bytes);
        sync();
        CHECK(be->event_record(bctx, stream, &e1));
        double ms;
        CHECK(be->event_elapsed_ms(bctx, e0, e1, &ms));
        be->event_destroy(bctx, e0);
        be->event_destroy(bctx, e1);
        double bw = 2.0 * (double)bytes / (ms * 1e-3);
        if (i > 0 && bw > best) best = bw;
    }
    be->mem_free(bctx, src);
    be->mem_free(bctx, dst);
    return best;
}

/* --bench N [DTYPE [MICRO [S]]]: only the matching points (profiling) */
static const char *bench_dt, *bench_micro;
static double bench_s = -1;

static int bench(int64_t n)
{
    double bw = copy_bandwidth();
    printf("device-to-device copy: %.0f GB/s (read + write)\n", bw / 1e9);
    const pit_dtype dts[] = {PIT_F32, PIT_F16, PIT_BF16};
    const pattern pats[] = {P_32X1, P_1X64, P_32X64};
    const pit_microtile mts[] = {{32, 1, PIT_AXIS_K}, {1, 64, PIT_AXIS_M}, {32, 64, PIT_AXIS_K}};
    /* a sparsity named on the command line runs alone (0: a full index) */
    const double sps_all[] = {0.5, 0.9, 0.95, 0.99};
    const double *sps = bench_s >= 0 ? &bench_s : sps_all;
    const int nsps = bench_s >= 0 ? 1 : 4;
    printf("%-5s %-6s %5s %9s %9s %9s %9s %9s %7s %8s  %s\n", "dtype", "micro", "s", "detect_us", "sparse_us",
           "total_us", "dense_us", "floor_us", "x_floor", "det_GB/s", "best tile");
    for (int d = 0; d < 3; ++d) {
        pit_dtype dt = dts[d];
        if (bench_dt && strcmp(bench_dt, dt_name(dt))) continue;
        dmat a = make_dmat(dt, 1, n, n, n), b = make_dmat(dt, 1, n, n, n), c = make_dmat(dt, 1, n, n, n);
        fill_dense(&b);
        upload(&b);
        fill_dense(&a);
        upload(&a);
        bench_ctx bc = {&a, &b, &c, NULL, {0}, 0};
        double dense_ms = time_op(op_dense, &bc);
        int tc = dt != PIT_F32;
        for (int p = 0; p < 3; ++p) {
            if (bench_micro && strcmp(bench_micro, pattern_name[pats[p]])) continue;
            for (int si = 0; si < nsps; ++si) {
                fill_pattern(&a, pats[p], sps[si]);
                upload(&a);
                pit_index ix = make_index(&a, mts[p]);
                bc.ix = &ix;
                CHECK(be->detect(bctx, stream, &a.d, &ix, 1));
                bc.maxc = check_index(&a, &ix, "bench");
                double det_ms = time_op(op_detect, &bc);
                pit_tile tiles_k[] = {{32, 128, 32, 128, 4, 1},  {32, 128, 64, 128, 3, 1},  {32, 64, 64, 128, 4, 1},
                                      {32, 256, 32, 128, 4, 1},  {32, 256, 64, 384, 4, 2}, {32, 128, 64, 384, 3, 2}};
                pit_tile tiles_k_cc[] = {{32, 128, 16, 128, 2, 0}, {32, 128, 16, 128, 4, 0}, {32, 128, 32, 128, 3, 0},
                                         {32, 256, 16, 256, 3, 0}};
                pit_tile tiles_m[] = {{128, 128, 32, 256, 4, 1}, {128, 256, 64, 256, 3, 1}, {64, 128, 64, 128, 3, 1},
                                      {128, 256, 32, 256, 4, 1}};
                pit_tile tiles_m_cc[] = {{64, 256, 16, 128, 2, 0}, {128, 256, 16, 256, 2, 0}, {64, 256, 32, 128, 2, 0},
                                         {128, 128, 16, 256, 2, 0}};
                pit_tile *tiles = mts[p].axis == PIT_AXIS_K ? (tc ? tiles_k : tiles_k_cc) : (tc ? tiles_m : tiles_m_cc);
                double best = 1e30;
                pit_tile best_tile = tiles[0];
                /* K along 16-bit: the last two are the sm_90 engine (tc 2) */
                const int ntiles = mts[p].axis == PIT_AXIS_K && tc ? 6 : 4;
                for (int t = 0; t < ntiles; ++t) {
                    bc.tile = tiles[t];
                    double ms = time_op(op_sparse, &bc);
                    if (ms < best) {
                        best = ms;
                        best_tile = tiles[t];
                    }
                }
                bc.tile = best_tile;
                double floor_ms = (double)(n * n) * (double)el_size(dt) / bw * 1e3 + (1 - sps[si]) * dense_ms;
                double total = det_ms + best;
                printf("%-5s %-6s %5.2f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f %8.0f  %dx%dx%d/%d/%d/%s\n", dt_name(dt),
                       pattern_name[pats[p]], sps[si], det_ms * 1e3, best * 1e3, total * 1e3, dense_ms * 1e3,
                       floor_ms * 1e3, total / floor_ms, (double)(n * n) * (double)el_size(dt) / (det_ms * 1e-3) / 1e9,
                       best_tile.bm, best_tile.bn, best_tile.bk, best_tile.threads, best_tile.stages,
                       tile_kind(&best_tile));
                fflush(stdout);
                free_index(&ix);
            }
        }
        free_dmat(&a);
        free_dmat(&b);
        free_dmat(&c);
    }
    return failures;
}

/* Zero columns of A shared by all its rows (contextual sparsity), the
 * fraction s of them; every other element random and non-zero. */
static void fill_zero_columns(dmat *a, double s)
{
    for (int64_t c = 0; c < cols_of(a); ++c) {
        const int zero = urand() < s;
        for (int64_t r = 0; r < rows_of(a); ++r)
            *at(a, 0, r, c) = zero ? zero_value() : representable(nonzero_value(), a->d.dtype);
    }
}

/* --bench-decode: x[M,K] . W[K,N] with zero columns of x, each column
 * micro-tile the decode kernels take, forced (no selection), beside cuBLAS
 * and the floor (1 - s) bytes(W) / copy bandwidth. */
static int bench_decode(void)
{
    double bw = copy_bandwidth();
    printf("device-to-device copy: %.0f GB/s (read + write)\n", bw / 1e9);
    const pit_dtype dts[] = {PIT_F16, PIT_BF16, PIT_F32};
    const int64_t ms[] = {1, 4, 16, 64}, kn[][2] = {{4096, 14336}, {14336, 4096}};
    const double sps[] = {0.5, 0.75};
    const pit_microtile mts[] = {{16, 1, PIT_AXIS_K}, {32, 1, PIT_AXIS_K}};
    printf("%-5s %3s %6s %6s %5s %5s %9s %9s %9s %9s %9s %7s %7s\n", "dtype", "M", "K", "N", "s", "micro", "detect_us",
           "kernel_us", "total_us", "dense_us", "floor_us", "x_floor", "dense/x");
    for (int d = 0; d < 3; ++d) {
        pit_dtype dt = dts[d];
        if (bench_dt ? strcmp(bench_dt, dt_name(dt)) != 0 : dt == PIT_F32) continue; /* f32 when named */
        for (int w = 0; w < 2; ++w) {
            const int64_t K = kn[w][0], N = kn[w][1];
            dmat b = make_dmat(dt, 1, K, N, N);
            fill_dense(&b);
            upload(&b);
            for (int mi = 0; mi < 4; ++mi) {
                dmat a = make_dmat(dt, 1, ms[mi], K, K), c = make_dmat(dt, 1, ms[mi], N, N);
                bench_ctx bc = {&a, &b, &c, NULL, {16, 128, 32, 128, 2, 1}, 0};
                for (int si = 0; si < 2; ++si) {
                    fill_zero_columns(&a, sps[si]);
                    upload(&a);
                    double dense_ms = time_op(op_dense, &bc);
                    double *ref = reference(&a, &b); /* each kernel checked once before it is timed */
                    for (int t = 0; t < 2; ++t) {
                        if (ms[mi] > 4 * mts[t].rows) continue;
                        pit_index ix = make_index(&a, mts[t]);
                        bc.ix = &ix;
                        bc.tile.bm = mts[t].rows;
                        CHECK(be->detect(bctx, stream, &a.d, &ix, 1));
                        bc.maxc = check_index(&a, &ix, "bench-decode");
                        poison(&c);
                        op_sparse(&bc);
                        char what[96];
                        snprintf(what, sizeof what, "bench-decode %s M=%lld K=%lld N=%lld", dt_name(dt),
                                 (long long)ms[mi], (long long)K, (long long)N);
                        compare(ref, &c, what);
                        double det_ms = time_op(op_detect, &bc), k_ms = time_op(op_sparse, &bc);
                        double floor_ms = (1 - sps[si]) * (double)(K * N) * (double)el_size(dt) / bw * 1e3;
                        printf("%-5s %3lld %6lld %6lld %5.2f %2dx%-2d %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f\n",
                               dt_name(dt), (long long)ms[mi], (long long)K, (long long)N, sps[si], mts[t].rows,
                               mts[t].cols, det_ms * 1e3, k_ms * 1e3, (det_ms + k_ms) * 1e3, dense_ms * 1e3,
                               floor_ms * 1e3, (det_ms + k_ms) / floor_ms, dense_ms / (det_ms + k_ms));
                        fflush(stdout);
                        free_index(&ix);
                    }
                    free(ref);
                }
                free_dmat(&a);
                free_dmat(&c);
            }
            free_dmat(&b);
        }
    }
    return failures;
}

int main(int argc, char **argv)
{
    pit_device_info info;
    int loaded = load_cuda_plugin(&host, &be, &info);
    if (loaded != 0) return loaded;
    printf("device: %s %s, %s, %d SMs, %.1f GiB, f16 %d bf16 %d, dense %s\n", info.name, info.arch, info.driver_version,
           info.compute_units, (double)info.global_mem_bytes / (1 << 30), info.has_f16, info.has_bf16,
           be->dense_name(NULL));
    CHECK(be->context_create(0, &(pit_switches){{0}}, &bctx));
    CHECK(be->stream_create(bctx, &stream));
    int rc;
    if (argc > 3) bench_dt = argv[3];
    if (argc > 4) bench_micro = argv[4];
    if (argc > 5) bench_s = atof(argv[5]);
    if (argc > 1 && !strcmp(argv[1], "--bench")) rc = bench(argc > 2 ? atoll(argv[2]) : 4096);
    else if (argc > 1 && !strcmp(argv[1], "--bench-decode")) rc = (bench_dt = argc > 2 ? argv[2] : NULL, bench_decode());
    else rc = correctness(argc < 2                            ? RUN_ALL
                          : !strcmp(argv[1], "--quick")      ? RUN_QUICK
                          : !strcmp(argv[1], "--engine")     ? RUN_ENGINE
                          : !strcmp(argv[1], "--decode")     ? RUN_DECODE
                          : !strcmp(argv[1], "--engine-all") ? RUN_ENGINE_ALL
                                                             : RUN_ALL);
    be->stream_destroy(bctx, stream);
    be->context_destroy(bctx);
    be->shutdown();
    printf(rc ? "FAILED: %d failures\n" : "PASSED\n", rc);
    return rc ? 1 : 0;
}
