/*
 * cuda_baseline.h - what the vendor sparse baselines of pit bench share:
 * cuSPARSE (cuda_baselines.c) and rocSPARSE in the HIP plug-in
 * (backends/hip/hip_sparse.c, which includes hip_shim.h first, so that the
 * CUDA driver names used here take their HIP meaning). The library calls
 * differ and stay in those files; written once here are the operands and
 * the checks made before any device work, the call's device scratch, the
 * event timer, and running a call: context current and locked, its times
 * read from the events, its scratch freed.
 *
 * Messages start "<vendor> <library> baseline: " (PIT_VENDOR_NAME: "cuda",
 * or "hip" through hip_shim.h). Everything is static inline: a file uses
 * what it needs.
 */
#ifndef PIT_CUDA_BASELINE_H
#define PIT_CUDA_BASELINE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h" /* under hip_shim.h: stood in for already */

/* The library a baseline runs. */
typedef struct pit_baseline_lib {
    const char *name; /* "cuSPARSE", for messages */
    int types[3];     /* its data type codes for f32, f16 and bf16 */
} pit_baseline_lib;

static inline pit_status pit_baseline_error(const pit_baseline_lib *lib, pit_status st, const char *what)
{
    return pit_cuda_host->error(st, PIT_VENDOR_NAME " %s baseline: %s", lib->name, what);
}

/* Evaluates a library call returning a status of type T, ok on success; on
 * failure stores fail(status, what, __FILE__, __LINE__) in st and jumps to
 * the cleanup label. Each baseline defines its own check over it. */
#define PIT_BASELINE_CHECK_GOTO(T, ok, fail, call, what, st, label)                \
    do {                                                                          \
        T pit_bl_r_ = (call);                                                     \
        if (pit_bl_r_ != (ok)) {                                                  \
            (st) = fail(pit_bl_r_, what, __FILE__, __LINE__);                     \
            goto label;                                                           \
        }                                                                         \
    } while (0)

/* ---- operands ------------------------------------------------------------------------ */

/* A rank-2 row-major operand, or rank 3 with a batch of 1. */
typedef struct pit_baseline_dense {
    CUdeviceptr ptr;
    int type; /* one of pit_baseline_lib.types */
    size_t el;
    int64_t rows, cols, ld;
} pit_baseline_dense;

static inline pit_status pit_baseline_dense_of(const pit_baseline_lib *lib, const pit_tdesc *t,
                                               pit_baseline_dense *d)
{
    if (t->rank != 2 && !(t->rank == 3 && t->shape[0] == 1))
        return pit_baseline_error(lib, PIT_ERR_UNSUPPORTED, "batched operands (SpMM is run on one [M,K] x [K,N])");
    if (t->strides[t->rank - 1] != 1)
        return pit_baseline_error(lib, PIT_ERR_UNSUPPORTED, "operand with a non-unit inner stride");
    switch (t->dtype) {
    case PIT_F32: d->type = lib->types[0], d->el = 4; break;
    case PIT_F16: d->type = lib->types[1], d->el = 2; break;
    case PIT_BF16: d->type = lib->types[2], d->el = 2; break;
    default: return pit_baseline_error(lib, PIT_ERR_UNSUPPORTED_DTYPE, "dtype (f32, f16 or bf16)");
    }
    d->ptr = (CUdeviceptr)(uintptr_t)t->mem + t->offset;
    d->rows = t->shape[t->rank - 2];
    d->cols = t->shape[t->rank - 1];
    d->ld = t->strides[t->rank - 2];
    if (d->ld < d->cols) d->ld = d->cols > 0 ? d->cols : 1;
    return PIT_SUCCESS;
}

/* One baseline call: dense A -> sparse (CSR, or BSR of block x block),
 * timed into *convert_ms; for a matmul then C = A . B, timed into
 * *compute_ms. */
typedef struct pit_baseline_job {
    pit_baseline_dense a, b, c; /* b and c: matmul only */
    int matmul;
    int block;
    double *convert_ms, *compute_ms;
} pit_baseline_job;

/* vendor_sparse_matmul's checks: A [M,K], B [K,N] and C [M,N] of one dtype. */
static inline pit_status pit_baseline_matmul_job(const pit_baseline_lib *lib, const pit_tdesc *A,
                                                 const pit_tdesc *B, const pit_tdesc *C, double *convert_ms,
                                                 double *compute_ms, pit_baseline_job *j)
{
    pit_status st;
    memset(j, 0, sizeof *j);
    j->matmul = j->block = 1;
    j->convert_ms = convert_ms;
    j->compute_ms = compute_ms;
    *convert_ms = *compute_ms = 0;
    if ((st = pit_baseline_dense_of(lib, A, &j->a)) != PIT_SUCCESS ||
        (st = pit_baseline_dense_of(lib, B, &j->b)) != PIT_SUCCESS ||
        (st = pit_baseline_dense_of(lib, C, &j->c)) != PIT_SUCCESS)
        return st;
    if (j->a.type != j->b.type || j->a.type != j->c.type)
        return pit_baseline_error(lib, PIT_ERR_UNSUPPORTED_DTYPE, "A, B and C differ in dtype");
    if (j->a.cols != j->b.rows || j->a.rows != j->c.rows || j->b.cols != j->c.cols)
        return pit_baseline_error(lib, PIT_ERR_SHAPE_MISMATCH, "A [M,K], B [K,N] and C [M,N] do not match");
    if (j->c.rows && j->c.cols && j->a.cols == 0)
        return pit_baseline_error(lib, PIT_ERR_UNSUPPORTED, "empty reduction (K = 0)");
    return PIT_SUCCESS;
}

/* vendor_convert's: one operand, and a block of at least 1. */
static inline pit_status pit_baseline_convert_job(const pit_baseline_lib *lib, const pit_tdesc *A, int block,
                                                  double *ms, pit_baseline_job *j)
{
    memset(j, 0, sizeof *j);
    j->block = block;
    j->convert_ms = ms;
    *ms = 0;
    pit_status st = pit_baseline_dense_of(lib, A, &j->a);
    if (st != PIT_SUCCESS) return st;
    if (block < 1) return pit_baseline_error(lib, PIT_ERR_INVALID_ARGUMENT, "block < 1");
    return PIT_SUCCESS;
}

/* ---- device scratch of one call -------------------------------------------------------
 * CUDA: stream-ordered, from the pool, which keeps it between calls. HIP
 * (hip_shim.c): hipMalloc, and hipFree after the stream's work. */

typedef struct pit_baseline_scratch {
    CUdeviceptr p[12];
    int n;
} pit_baseline_scratch;

/* what names the allocation in a failure ("CSR columns"). */
static inline pit_status pit_baseline_scratch_alloc(pit_baseline_scratch *sc, CUstream s, size_t bytes,
                                                    const char *what, CUdeviceptr *out)
{
    *out = 0;
    if (sc->n == (int)(sizeof sc->p / sizeof sc->p[0]))
        return pit_cuda_host->error(PIT_ERR_INTERNAL, PIT_VENDOR_NAME " sparse baseline: out of scratch slots (%s)",
                                    what);
    CUresult r = pit_cu.MemAllocAsync(out, bytes ? bytes : 16, s);
    if (r != CUDA_SUCCESS) {
        char call[128];
        snprintf(call, sizeof call, PIT_CALL(MemAllocAsync) "(%s, %zu bytes)", what, bytes);
        return pit_cu_fail(r, call, __FILE__, __LINE__);
    }
    sc->p[sc->n++] = *out;
    return PIT_SUCCESS;
}

/* Frees it all on the stream; returns st, or the first failure when st is
 * PIT_SUCCESS. */
static inline pit_status pit_baseline_scratch_free(pit_baseline_scratch *sc, CUstream s, pit_status st)
{
    for (int i = 0; i < sc->n; i++) {
        CUresult r = pit_cu.MemFreeAsync(sc->p[i], s);
        if (st == PIT_SUCCESS && r != CUDA_SUCCESS)
            st = pit_cu_fail(r, PIT_CALL(MemFreeAsync) "(sparse baseline scratch)", __FILE__, __LINE__);
    }
    sc->n = 0;
    return st;
}

/* ---- events: the timed parts of a call ------------------------------------------------ */

typedef struct pit_baseline_timer {
    CUevent e[4];
    int n;
} pit_baseline_timer;

/* Records the next event (0, 1, ...) on s. */
static inline pit_status pit_baseline_mark(pit_baseline_timer *t, CUstream s)
{
    if (t->n == (int)(sizeof t->e / sizeof t->e[0]))
        return pit_cuda_host->error(PIT_ERR_INTERNAL, PIT_VENDOR_NAME " sparse baseline: out of event slots");
    CUevent e;
    CU_CHECK(pit_cu.EventCreate(&e, CU_EVENT_DEFAULT), PIT_CALL(EventCreate));
    t->e[t->n++] = e;
    CU_CHECK(pit_cu.EventRecord(e, s), PIT_CALL(EventRecord));
    return PIT_SUCCESS;
}

/* Waits for event to, then the milliseconds from event from to it. */
static inline pit_status pit_baseline_elapsed(const pit_baseline_timer *t, int from, int to, double *ms)
{
    float f = 0.f;
    CU_CHECK(pit_cu.EventSynchronize(t->e[to]), PIT_CALL(EventSynchronize));
    CU_CHECK(pit_cu.EventElapsedTime(&f, t->e[from], t->e[to]), PIT_CALL(EventElapsedTime));
    *ms = f;
    return PIT_SUCCESS;
}

static inline void pit_baseline_timer_destroy(pit_baseline_timer *t)
{
    for (int i = 0; i < t->n; i++) pit_cu.EventDestroy(t->e[i]);
    t->n = 0;
}

/* ---- running a job -------------------------------------------------------------------- */

/* The library's part of a job, called with the context current and its
 * lock held (the library handle is one per context). It takes its device
 * memory from sc and records events on s with t: the conversion between
 * events 0 and 1, and for a matmul the SpMM between the last two (2 at the
 * least). The caller frees both. */
typedef pit_status (*pit_baseline_run_fn)(pit_cuda_ctx *c, CUstream s, const pit_baseline_job *j,
                                          pit_baseline_scratch *sc, pit_baseline_timer *t);

/* Runs a checked job on the caller's stream (an empty one does nothing),
 * then reads its times. */
static inline pit_status pit_baseline_run(void *bctx, void *stream, pit_baseline_run_fn run,
                                          const pit_baseline_job *j)
{
    if (j->matmul ? j->c.rows == 0 || j->c.cols == 0 : j->a.rows == 0 || j->a.cols == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    CUstream s = ((pit_cuda_stream *)stream)->s;
    pit_baseline_scratch sc = {{0}, 0};
    pit_baseline_timer t = {{0}, 0};
    pit_status st = pit_cuda_push(c);
    if (st != PIT_SUCCESS) return st;
    pthread_mutex_lock(&c->lock);
    st = run(c, s, j, &sc, &t);
    if (st == PIT_SUCCESS && t.n < (j->matmul ? 3 : 2))
        st = pit_cuda_host->error(PIT_ERR_INTERNAL, PIT_VENDOR_NAME " sparse baseline: %d events recorded", t.n);
    if (st == PIT_SUCCESS) st = pit_baseline_elapsed(&t, 0, 1, j->convert_ms);
    if (st == PIT_SUCCESS && j->matmul) st = pit_baseline_elapsed(&t, t.n - 2, t.n - 1, j->compute_ms);
    st = pit_baseline_scratch_free(&sc, s, st);
    pit_baseline_timer_destroy(&t);
    pthread_mutex_unlock(&c->lock);
    pit_cuda_pop();
    return st;
}

#endif /* PIT_CUDA_BASELINE_H */
