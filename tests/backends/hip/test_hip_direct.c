/*
 * test_hip_direct.c - drives libpit-hip.so through its pit_backend table,
 * without libpit: registration, init, and on a machine with an AMD GPU a
 * sparse matmul (detect -> index -> fused kernel), the dense GEMM and the
 * vendor sparse baseline (rocSPARSE, when installed) in f32, f16 and bf16,
 * compared with a host reference. Without a GPU it checks
 * that init says why ("no HIP runtime (...)" / "no AMD GPU (...)") and
 * exits 77 (SKIPPED).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_plugin.h" /* tests/backends/cuda: the host, loading the plug-in */

/* HIP keeps no disk cache: the cache entries stay NULL */
static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_no_fault,
                                host_open_cache_entry, NULL, NULL, NULL};
static const pit_backend *be;
static void *ctx, *stream;
static int failures;

#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                 \
            printf(__VA_ARGS__);                                                        \
            printf(" (last error: %s)\n", last_error);                                  \
            ++failures;                                                                 \
            return;                                                                     \
        }                                                                               \
    } while (0)

/* ---- host helpers ---------------------------------------------------------- */
static uint16_t to_half(float f)
{
    /* round to nearest even through the f16 range used here (|f| < 64) */
    union { float f; uint32_t u; } v = {f};
    uint32_t sign = (v.u >> 16) & 0x8000u;
    float a = fabsf(f);
    if (a < 6.1035156e-05f) return (uint16_t)(sign | (uint32_t)lrintf(a / 5.9604645e-08f));
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)lrintf((m * 2.f - 1.f) * 1024.f);
    uint32_t exp = (uint32_t)(e - 1 + 15);
    if (mant == 1024) mant = 0, ++exp;
    return (uint16_t)(sign | (exp << 10) | mant);
}

static float from_half(uint16_t h)
{
    uint32_t exp = (h >> 10) & 31, mant = h & 1023;
    float v = exp ? ldexpf(1.f + (float)mant / 1024.f, (int)exp - 15) : ldexpf((float)mant, -24);
    return (h & 0x8000u) ? -v : v;
}

static uint16_t to_bf16(float f)
{
    union { float f; uint32_t u; } v = {f};
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t b)
{
    union { uint32_t u; float f; } v = {(uint32_t)b << 16};
    return v.f;
}

static size_t esize(pit_dtype dt)
{
    return dt == PIT_F32 ? 4 : 2;
}

static void store(pit_dtype dt, void *buf, size_t i, float x)
{
    if (dt == PIT_F32) ((float *)buf)[i] = x;
    else if (dt == PIT_F16) ((uint16_t *)buf)[i] = to_half(x);
    else ((uint16_t *)buf)[i] = to_bf16(x);
}

static float load(pit_dtype dt, const void *buf, size_t i)
{
    if (dt == PIT_F32) return ((const float *)buf)[i];
    if (dt == PIT_F16) return from_half(((const uint16_t *)buf)[i]);
    return from_bf16(((const uint16_t *)buf)[i]);
}

static void *device_tensor(pit_tdesc *t, pit_dtype dt, int rows, int cols, const void *host_data)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->strides[0] = cols;
    t->strides[1] = 1;
    size_t bytes = (size_t)rows * cols * esize(dt);
    if (be->mem_alloc(ctx, bytes, &t->mem) != PIT_SUCCESS) return NULL;
    if (host_data && be->mem_write(ctx, stream, t->mem, 0, host_data, bytes) != PIT_SUCCESS) return NULL;
    return t->mem;
}

/* A with 32x64 micro-tiles zeroed in a pattern (about half of them). */
static void fill_inputs(pit_dtype dt, int M, int N, int K, void *a, void *b, float *ref)
{
    for (int m = 0; m < M; ++m)
        for (int k = 0; k < K; ++k) {
            int live = ((m / 32) * 7 + (k / 64) * 3) % 2 == 0;
            store(dt, a, (size_t)m * K + k, live ? (float)((m * 3 + k * 5) % 7 - 3) * 0.25f : 0.f);
        }
    for (int k = 0; k < K; ++k)
        for (int n = 0; n < N; ++n) store(dt, b, (size_t)k * N + n, (float)((k * 7 + n * 11) % 5 - 2) * 0.5f);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += (double)load(dt, a, (size_t)m * K + k) * load(dt, b, (size_t)k * N + n);
            ref[(size_t)m * N + n] = (float)acc;
        }
}

static void compare(pit_dtype dt, const char *what, const void *c, const float *ref, int M, int N)
{
    double worst = 0;
    for (size_t i = 0; i < (size_t)M * N; ++i) {
        double err = fabs((double)load(dt, c, i) - ref[i]) / (1.0 + fabs(ref[i]));
        if (err > worst) worst = err;
    }
    double tol = dt == PIT_F32 ? 1e-5 : dt == PIT_F16 ? 2e-3 : 1.6e-2;
    const char *name = dt == PIT_F32 ? "f32" : dt == PIT_F16 ? "f16" : "bf16";
    CHECK(worst <= tol, "%s %s: worst relative error %g > %g", what, name, worst, tol);
    printf("ok %s %s (worst relative error %g)\n", what, name, worst);
}

/* The vendor sparse baseline (rocSPARSE, hip_sparse.c) on the same
 * problem: dense A -> CSR, then SpMM. rocSPARSE missing, or without this
 * dtype (before ROCm 6 it has f32 only), is a skip that says why. */
static void vendor_case(pit_dtype dt, const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C, void *c,
                        const float *ref)
{
    const int M = (int)C->shape[0], N = (int)C->shape[1];
    const char *dn = dt == PIT_F32 ? "f32" : dt == PIT_F16 ? "f16" : "bf16";
    if (!be->vendor_sparse_matmul) {
        printf("skip vendor sparse %s: the plug-in has no vendor_sparse_matmul\n", dn);
        return;
    }
    const char *name = be->vendor_sparse_name ? be->vendor_sparse_name(ctx) : "vendor sparse";
    double conv = -1, comp = -1, ms = -1;
    size_t bytes = (size_t)M * N * esize(dt);
    memset(c, 0, bytes);
    CHECK(be->mem_fill32(ctx, stream, C->mem, 0, 0x7fc00000u, bytes) == PIT_SUCCESS, "NaN-filling C");
    pit_status st = be->vendor_sparse_matmul(ctx, stream, A, B, C, &conv, &comp);
    if (st == PIT_ERR_UNSUPPORTED || st == PIT_ERR_UNSUPPORTED_DTYPE) {
        printf("skip %s %s: %s\n", name, dn, last_error);
        return;
    }
    CHECK(st == PIT_SUCCESS, "%s %s returned %d", name, dn, (int)st);
    CHECK(conv >= 0 && comp >= 0, "%s %s timed %g ms + %g ms", name, dn, conv, comp);
    CHECK(be->mem_read(ctx, stream, C->mem, 0, c, bytes) == PIT_SUCCESS, "reading C back");
    compare(dt, name, c, ref, M, N);
    printf("   %s %s: conversion %.3f ms, SpMM %.3f ms\n", name, dn, conv, comp);
    if (be->vendor_convert) {
        CHECK(be->vendor_convert(ctx, stream, A, 1, &ms) == PIT_SUCCESS && ms >= 0, "%s %s: dense -> CSR alone",
              name, dn);
        st = be->vendor_convert(ctx, stream, A, 16, &ms);
        CHECK(st == PIT_SUCCESS || st == PIT_ERR_UNSUPPORTED, "%s %s: dense -> BSR 16 returned %d", name, dn,
              (int)st);
    }
}

/* Sparse A (micro-tile 32x64 along K) through detect + the fused kernel,
 * then the dense GEMM, against the host reference. */
static void run_case(pit_dtype dt)
{
    enum { M = 128, N = 128, K = 256, TM = 32, TK = 64 };
    size_t es = esize(dt);
    void *a = malloc((size_t)M * K * es), *b = malloc((size_t)K * N * es), *c = malloc((size_t)M * N * es);
    float *ref = malloc((size_t)M * N * sizeof *ref);
    pit_tdesc A, B, C;
    void *counts = NULL, *entries = NULL, *total = NULL;
    if (!a || !b || !c || !ref) goto done;
    fill_inputs(dt, M, N, K, a, b, ref);
    if (!device_tensor(&A, dt, M, K, a) || !device_tensor(&B, dt, K, N, b) || !device_tensor(&C, dt, M, N, NULL)) {
        printf("FAIL allocating tensors: %s\n", last_error);
        ++failures;
        goto done;
    }
    pit_index idx = {{TM, TK, PIT_AXIS_K}, M / TM, M / TM, K / TK, NULL, NULL, NULL, 0};
    if (be->mem_alloc(ctx, (size_t)idx.groups * 4, &counts) != PIT_SUCCESS ||
        be->mem_alloc(ctx, (size_t)idx.groups * idx.capacity * 4, &entries) != PIT_SUCCESS ||
        be->mem_alloc(ctx, 4, &total) != PIT_SUCCESS) {
        printf("FAIL allocating the index: %s\n", last_error);
        ++failures;
        goto done;
    }
    idx.counts = counts;
    idx.entries = entries;
    idx.total = total;
    pit_tile tile = {TM, 64, 32, 128, 2, dt != PIT_F32};
    if (be->detect(ctx, stream, &A, &idx, 1) != PIT_SUCCESS ||
        be->matmul_sparse(ctx, stream, &tile, &idx, idx.capacity, 1, &A, &B, &C) != PIT_SUCCESS ||
        be->mem_read(ctx, stream, C.mem, 0, c, (size_t)M * N * es) != PIT_SUCCESS) {
        printf("FAIL sparse matmul: %s\n", last_error);
        ++failures;
    } else {
        compare(dt, "sparse matmul (k32x64)", c, ref, M, N);
    }
    memset(c, 0, (size_t)M * N * es);
    if (be->mem_fill32(ctx, stream, C.mem, 0, 0x7fc00000u, (size_t)M * N * es) != PIT_SUCCESS ||
        be->matmul_dense(ctx, stream, &A, &B, &C) != PIT_SUCCESS ||
        be->mem_read(ctx, stream, C.mem, 0, c, (size_t)M * N * es) != PIT_SUCCESS) {
        printf("FAIL dense matmul (%s): %s\n", be->dense_name(ctx), last_error);
        ++failures;
    } else {
        compare(dt, be->dense_name(ctx), c, ref, M, N);
    }
    vendor_case(dt, &A, &B, &C, c, ref);
done:
    be->mem_free(ctx, counts);
    be->mem_free(ctx, entries);
    be->mem_free(ctx, total);
    be->mem_free(ctx, A.mem);
    be->mem_free(ctx, B.mem);
    be->mem_free(ctx, C.mem);
    free(a);
    free(b);
    free(c);
    free(ref);
}

int main(void)
{
    /* without a device the reason must say which part is missing */
    static const char *const no_device[] = {"no HIP runtime (", "no AMD GPU (", NULL};
    static const test_plugin hip = {"hip", "PIT_HIP_PLUGIN_PATH", PIT_HIP_PLUGIN, "AMD", no_device};
    pit_device_info info;
    int loaded = load_plugin(&hip, &host, &be, &info);
    if (loaded != 0) return loaded;
    if (be->context_create(0, &(pit_switches){{0}}, &ctx) != PIT_SUCCESS || be->stream_create(ctx, &stream) != PIT_SUCCESS) {
        printf("FAIL device 0: %s\n", last_error);
        return 1;
    }
    printf("device: %s (%s), %s\n", info.name, info.arch, info.driver_version);
    run_case(PIT_F32);
    run_case(PIT_F16);
    run_case(PIT_BF16);
    be->stream_destroy(ctx, stream);
    be->context_destroy(ctx);
    be->shutdown();
    printf(failures ? "test_hip_direct: %d FAILED\n" : "test_hip_direct: OK\n", failures);
    return failures ? 1 : 0;
}
