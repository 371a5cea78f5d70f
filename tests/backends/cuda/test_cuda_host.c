/*
 * test_cuda_host.c - the CUDA plug-in's host path, run without a GPU: libpit
 * on the CUDA backend over tests/fake_cuda_driver.c (libcuda.so.1 and
 * libcublas.so.13; ctest puts them first on the library paths). Kernels do
 * not run there, so no result is checked: what is checked is what the host
 * asks of the driver, counted by the fake, and how a failing driver call
 * comes back.
 *   - A settled call along K (x[1,4096] . W[4096,14336], the decode shape)
 *     never synchronises, never reads device memory back, frees every
 *     scratch allocation it makes, and launches at most 3 kernels or GEMMs.
 *   - force_dense is one cuBLAS GEMM and nothing else launched.
 *   - A failing launch or allocation returns PIT_ERR_BACKEND naming the
 *     driver call and its error, frees what the call allocated, and the next
 *     call succeeds.
 *   - 4 threads on 4 streams of one context: every call succeeds, every
 *     allocation is freed.
 *   - Without a report, pit_attention (GQA, causal; and with an element
 *     mask) and pit_moe_ffn (SwiGLU, top-2) read nothing back and never
 *     synchronise (pit.h), and free their scratch.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rtest.h"

typedef long (*calls_fn)(const char *);
typedef void (*fail_fn)(const char *);
static calls_fn driver_calls, blas_calls;
static fail_fn driver_fail;

/* How often the driver (or cuBLAS) entry was called so far. */
static long calls(const char *entry)
{
    return !strncmp(entry, "cublas", 6) ? blas_calls(entry) : driver_calls(entry);
}

#define WATCHED 7
static const char *const watched[WATCHED] = {
    "cuStreamSynchronize", "cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2", "cuMemAllocAsync",
    "cuMemFreeAsync",      "cuLaunchKernel",  "cublasGemmStridedBatchedEx"};
enum { SYNC, DTOH, DTOH_ASYNC, ALLOC, FREE, LAUNCH, GEMM };

typedef struct counts {
    long n[WATCHED];
} counts;

static counts snapshot(void)
{
    counts c;
    for (int i = 0; i < WATCHED; ++i) c.n[i] = calls(watched[i]);
    return c;
}

static long since(const counts *before, int what) { return calls(watched[what]) - before->n[what]; }

/* A tensor of the dtype, every every-th element `value` and the others 0
 * (uploaded through the reference's conversion, tests/rtest.h) */
static pit_tensor *filled(pit_context *ctx, pit_dtype dt, int rank, const int64_t *shape, double value, int every)
{
    pit_tensor *t = NULL;
    size_t n = 1;
    for (int i = 0; i < rank; ++i) n *= (size_t)shape[i];
    double *x = malloc(n * sizeof *x);
    if (x && pit_tensor_create(ctx, dt, rank, shape, &t) == PIT_SUCCESS) {
        for (size_t i = 0; i < n; ++i) x[i] = i % (size_t)every ? 0.0 : value;
        if (rt_upload(t, NULL, x, n) != PIT_SUCCESS) {
            pit_tensor_destroy(t);
            t = NULL;
        }
    }
    free(x);
    return t;
}

typedef struct problem {
    pit_context *ctx;
    pit_tensor *X, *W, *C;
} problem;

/* x[1,4096] with 3 of 4 entries zero, W[4096,14336], C[1,14336], bf16 (W
 * and C not written: no kernel reads them here) */
static int make_problem(pit_context *ctx, problem *p)
{
    const int64_t xs[2] = {1, 4096}, ws[2] = {4096, 14336}, cs[2] = {1, 14336};
    p->ctx = ctx;
    p->X = filled(ctx, PIT_BF16, 2, xs, 0.75, 4);
    return p->X && pit_tensor_create(ctx, PIT_BF16, 2, ws, &p->W) == PIT_SUCCESS &&
           pit_tensor_create(ctx, PIT_BF16, 2, cs, &p->C) == PIT_SUCCESS;
}

static void free_problem(problem *p)
{
    pit_tensor_destroy(p->X);
    pit_tensor_destroy(p->W);
    pit_tensor_destroy(p->C);
}

static pit_status matmul(problem *p, pit_stream *s, int dense, pit_report *r)
{
    pit_matmul_options o = pit_matmul_options_default();
    o.force_dense = dense;
    return pit_matmul(p->ctx, s, p->X, p->W, p->C, &o, r);
}

static void settled_calls(problem *p)
{
    pit_report r;
    RT_CHECK(matmul(p, NULL, 0, &r) == PIT_SUCCESS, "first call");
    const counts before = snapshot();
    enum { CALLS = 10 };
    for (int i = 0; i < CALLS; ++i) RT_CHECK(matmul(p, NULL, 0, NULL) == PIT_SUCCESS, "call %d", i);
    const long work = since(&before, LAUNCH) + since(&before, GEMM);
    printf("settled call (%s): %.1f launches, %.1f GEMMs, %.1f allocations a call\n", r.choice,
           (double)since(&before, LAUNCH) / CALLS, (double)since(&before, GEMM) / CALLS,
           (double)since(&before, ALLOC) / CALLS);
    RT_CHECK(since(&before, SYNC) == 0, "%ld synchronisations in %d settled calls", since(&before, SYNC), CALLS);
    RT_CHECK(since(&before, DTOH) + since(&before, DTOH_ASYNC) == 0, "%ld read-backs in %d settled calls",
          since(&before, DTOH) + since(&before, DTOH_ASYNC), CALLS);
    RT_CHECK(since(&before, ALLOC) == since(&before, FREE), "%ld scratch allocations, %ld frees", since(&before, ALLOC),
          since(&before, FREE));
    RT_CHECK(work >= CALLS && work <= 3 * CALLS, "%ld launches and GEMMs in %d calls", work, CALLS);
}

static void dense_calls(problem *p)
{
    const counts before = snapshot();
    for (int i = 0; i < 4; ++i) RT_CHECK(matmul(p, NULL, 1, NULL) == PIT_SUCCESS, "dense call");
    RT_CHECK(since(&before, GEMM) == 4, "%ld GEMMs for 4 dense calls", since(&before, GEMM));
    RT_CHECK(since(&before, LAUNCH) == 0 && since(&before, SYNC) == 0,
             "dense calls launched %ld kernels, synchronised %ld",
          since(&before, LAUNCH), since(&before, SYNC));
}

/* One driver entry failing: the call says so, leaks nothing, and the next
 * call works again. */
static void failing_call(problem *p, const char *entry)
{
    const counts before = snapshot();
    driver_fail(entry);
    pit_status s = matmul(p, NULL, 0, NULL);
    driver_fail(NULL);
    const char *e = pit_last_error();
    RT_CHECK(s == PIT_ERR_BACKEND, "%s failing: status %d (%s)", entry, (int)s, e);
    RT_CHECK(strstr(e, entry) && strstr(e, "CUDA_ERROR_LAUNCH_FAILED"), "%s failing: message '%s'", entry, e);
    /* a failed allocation is counted as a call but holds nothing */
    const long held = since(&before, ALLOC) - (!strcmp(entry, "cuMemAllocAsync") && since(&before, ALLOC) > 0);
    RT_CHECK(held == since(&before, FREE), "%s failing: %ld allocations held, %ld frees", entry, held,
          since(&before, FREE));
    RT_CHECK(matmul(p, NULL, 0, NULL) == PIT_SUCCESS, "after %s failed", entry);
}

typedef struct worker {
    problem *p;
    int failed;
} worker;

static void *worker_calls(void *u)
{
    worker *w = u;
    pit_stream *s = NULL;
    if (pit_stream_create(w->p->ctx, &s) != PIT_SUCCESS) {
        w->failed = 1;
        return NULL;
    }
    for (int i = 0; i < 50; ++i) w->failed += matmul(w->p, s, 0, NULL) != PIT_SUCCESS;
    w->failed += pit_synchronize(w->p->ctx, s) != PIT_SUCCESS;
    pit_stream_destroy(s);
    return NULL;
}

static void threads(problem *p)
{
    const counts before = snapshot();
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; ++i) {
        w[i] = (worker){p, 0};
        RT_CHECK(pthread_create(&t[i], NULL, worker_calls, &w[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < 4; ++i) {
        pthread_join(t[i], NULL);
        RT_CHECK(w[i].failed == 0, "thread %d: %d calls failed", i, w[i].failed);
    }
    RT_CHECK(since(&before, ALLOC) == since(&before, FREE), "threads: %ld allocations, %ld frees",
             since(&before, ALLOC),
          since(&before, FREE));
}

/* Calls 2..5 of fn (the first may set up workspaces): no synchronisation,
 * no read-back, every scratch allocation freed. */
static void reads_nothing_back(const char *what, pit_status (*fn)(void *), void *user)
{
    RT_CHECK(fn(user) == PIT_SUCCESS, "%s", what);
    const counts before = snapshot();
    for (int i = 0; i < 4; ++i) RT_CHECK(fn(user) == PIT_SUCCESS, "%s", what);
    RT_CHECK(since(&before, SYNC) == 0 && since(&before, DTOH) + since(&before, DTOH_ASYNC) == 0,
          "%s: %ld synchronisations, %ld read-backs in 4 calls without a report", what, since(&before, SYNC),
          since(&before, DTOH) + since(&before, DTOH_ASYNC));
    RT_CHECK(since(&before, ALLOC) == since(&before, FREE), "%s: %ld allocations, %ld frees", what,
          since(&before, ALLOC), since(&before, FREE));
    RT_CHECK(since(&before, LAUNCH) + since(&before, GEMM) >= 4, "%s: nothing launched", what);
}

typedef struct attention_call {
    pit_context *ctx;
    pit_tensor *Q, *K, *V, *O;
    pit_attention_options opt;
} attention_call;

static pit_status attention(void *u)
{
    attention_call *a = u;
    return pit_attention(a->ctx, NULL, a->Q, a->K, a->V, a->O, &a->opt, NULL, NULL);
}

static void attention_calls(pit_context *ctx)
{
    const int64_t qs[4] = {1, 8, 256, 64}, ks[4] = {1, 2, 256, 64}, ms[2] = {256, 256};
    attention_call a = {ctx, filled(ctx, PIT_BF16, 4, qs, 0.5, 1), filled(ctx, PIT_BF16, 4, ks, 0.5, 1),
                        filled(ctx, PIT_BF16, 4, ks, 1.0, 1), filled(ctx, PIT_BF16, 4, qs, 0.0, 1),
                        pit_attention_options_default()};
    pit_tensor *mask = filled(ctx, PIT_U8, 2, ms, 1.0, 1);
    if (a.Q && a.K && a.V && a.O && mask) {
        a.opt.causal = 1;
        reads_nothing_back("pit_attention, GQA 4, causal", attention, &a);
        a.opt.mask = mask;
        reads_nothing_back("pit_attention, GQA 4, causal, u8 mask", attention, &a);
    } else {
        RT_CHECK(0, "attention tensors");
    }
    pit_tensor_destroy(a.Q);
    pit_tensor_destroy(a.K);
    pit_tensor_destroy(a.V);
    pit_tensor_destroy(a.O);
    pit_tensor_destroy(mask);
}

typedef struct moe_call {
    pit_context *ctx;
    pit_tensor *X, *ids, *gates, *W1, *W2, *Y;
} moe_call;

static pit_status moe_ffn(void *u)
{
    moe_call *m = u;
    return pit_moe_ffn(m->ctx, NULL, m->X, m->ids, m->gates, m->W1, m->W2, m->Y, NULL, NULL);
}

/* 64 tokens, H 128, F 64, 8 experts, top-2 (every token to expert 3
 * twice), SwiGLU */
static void moe_calls(pit_context *ctx)
{
    const int64_t xs[2] = {64, 128}, is[2] = {64, 2}, w1[3] = {8, 128, 128}, w2[3] = {8, 64, 128};
    moe_call m = {ctx,
                  filled(ctx, PIT_BF16, 2, xs, 0.5, 1),
                  filled(ctx, PIT_I32, 2, is, 3.0, 1),
                  filled(ctx, PIT_F32, 2, is, 0.5, 1),
                  filled(ctx, PIT_BF16, 3, w1, 0.0078125, 1),
                  filled(ctx, PIT_BF16, 3, w2, 0.0078125, 1),
                  filled(ctx, PIT_BF16, 2, xs, 0.0, 1)};
    if (m.X && m.ids && m.gates && m.W1 && m.W2 && m.Y)
        reads_nothing_back("pit_moe_ffn, top-2, SwiGLU", moe_ffn, &m);
    else
        RT_CHECK(0, "MoE tensors");
    pit_tensor_destroy(m.X);
    pit_tensor_destroy(m.ids);
    pit_tensor_destroy(m.gates);
    pit_tensor_destroy(m.W1);
    pit_tensor_destroy(m.W2);
    pit_tensor_destroy(m.Y);
}

int main(void)
{
    pit_context *ctx = NULL;
    if (pit_context_create("cuda", 0, &ctx) != PIT_SUCCESS) {
        printf("FAIL: no context on the fake driver: %s\n", pit_last_error());
        return 1;
    }
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *blas = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
    driver_calls = driver ? (calls_fn)(uintptr_t)dlsym(driver, "pit_fake_cuda_calls") : NULL;
    driver_fail = driver ? (fail_fn)(uintptr_t)dlsym(driver, "pit_fake_cuda_fail") : NULL;
    blas_calls = blas ? (calls_fn)(uintptr_t)dlsym(blas, "pit_fake_cuda_calls") : NULL;
    if (!driver_calls || !driver_fail || !blas_calls) {
        printf("FAIL: the CUDA backend did not load tests/fake_cuda_driver.c as libcuda.so.1 and libcublas.so.13\n");
        return 1;
    }
    problem p = {0};
    RT_CHECK(pit_context_set_redetect_interval(ctx, 1000) == PIT_SUCCESS, "set the redetect interval");
    if (make_problem(ctx, &p)) {
        settled_calls(&p);
        dense_calls(&p);
        failing_call(&p, "cuLaunchKernel");
        failing_call(&p, "cuMemAllocAsync");
        threads(&p);
        attention_calls(ctx);
        moe_calls(ctx);
    } else {
        RT_CHECK(0, "tensors");
    }
    free_problem(&p);
    pit_context_destroy(ctx);
    if (driver) dlclose(driver);
    if (blas) dlclose(blas);
    const int failed = atomic_load(&rt_failed), passed = atomic_load(&rt_passed);
    printf("%s: %d checks, %d failures\n", failed ? "FAILED" : "PASSED", passed + failed, failed);
    return failed ? 1 : 0;
}
