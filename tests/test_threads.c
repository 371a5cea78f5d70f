/*
 * tests/test_threads.c - the threading rules of pit.h, checked on the OpenCL
 * device (PoCL in CI):
 *  - one context used from 6 threads at once, each with its own pit_stream,
 *    gives right results (PIT with automatic and forced micro-tiles, sparse A
 *    and B, the dense path), with shapes shared between threads (plans are per
 *    stream: same problem, different stream) and shapes of their own;
 *  - independent contexts used from different threads at once;
 *  - pit_last_error() is per thread.
 * Run it under ThreadSanitizer or helgrind to see races the results miss.
 */
#include <math.h>
#include <pthread.h>

#include "rtest.h"

#define THREADS 6
#define ITERS 12

typedef struct worker {
    pit_context *ctx;
    int id;
    int own_context; /* creates and destroys its own context */
} worker;

static void one_matmul(pit_context *ctx, pit_stream *s, int id, int it, pit_rng *rng)
{
    /* Threads 0-2 share shapes, 3-5 have their own; dtypes alternate. */
    int64_t m = id < 3 ? 64 : 32 + 16 * id, k = id < 3 ? 96 : 64 + 8 * (it % 3), n = 40;
    pit_dtype dt = (it + id) % 3 == 2 ? PIT_BF16 : PIT_F32;
    int sparse_b = (it + id) % 4 == 3;
    size_t na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
    double *A = malloc(na * 8), *B = malloc(nb * 8), *R = malloc(nc * 8), *G = malloc(nc * 8);
    pit_ref_fill_random(rng, A, na);
    pit_ref_fill_random(rng, B, nb);
    double sparsity = 0.3 + 0.6 * ((it * 7 + id) % 10) / 10.0;
    if (sparse_b)
        pit_ref_sparsify_tiles(rng, B, 1, k, n, 32, 1, 0, 0, sparsity);
    else
        pit_ref_sparsify_tiles(rng, A, 1, m, k, 32, 1, 0, 0, sparsity);
    pit_tensor *tA = rt_tensor(ctx, dt, 2, 1, m, k), *tB = rt_tensor(ctx, dt, 2, 1, k, n),
               *tC = rt_tensor(ctx, dt, 2, 1, m, n);
    RT_CHECK(rt_upload(tA, s, A, na) == PIT_SUCCESS, "thread %d upload A", id);
    RT_CHECK(rt_upload(tB, s, B, nb) == PIT_SUCCESS, "thread %d upload B", id);
    pit_matmul_options o = pit_matmul_options_default();
    o.sparse = sparse_b ? PIT_SPARSE_B : PIT_SPARSE_A;
    const char *how = "auto";
    switch (it % 4) {
    case 1:
        /* The OpenCL backend has no sparse-B kernel: B stays automatic (dense). */
        if (!sparse_b) {
            o.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
            how = "forced 32x1";
        }
        break;
    case 2:
        if (!sparse_b) {
            o.microtile = (pit_microtile){1, 32, PIT_AXIS_M};
            how = "forced 1x32 axis M";
        }
        break;
    case 3:
        o.force_dense = 1;
        how = "dense";
        break;
    }
    pit_status st = pit_matmul(ctx, s, tA, tB, tC, &o, NULL);
    RT_CHECK(st == PIT_SUCCESS, "thread %d iteration %d pit_matmul (%s): %s", id, it, how,
             pit_status_string(st));
    if (st == PIT_SUCCESS) {
        RT_CHECK(rt_download(tC, s, G, nc) == PIT_SUCCESS, "thread %d download", id);
        pit_ref_matmul(1, m, n, k, A, B, R);
        double err = pit_ref_rel_error(R, G, nc);
        RT_CHECK(err <= pit_ref_tolerance(dt), "thread %d iteration %d %s %s sparse %s %lldx%lldx%lld: "
                 "rel error %g", id, it, how, pit_dtype_name(dt), sparse_b ? "B" : "A",
                 (long long)m, (long long)k, (long long)n, err);
    }
    pit_tensor_destroy(tA);
    pit_tensor_destroy(tB);
    pit_tensor_destroy(tC);
    free(A);
    free(B);
    free(R);
    free(G);
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    pit_context *ctx = w->ctx;
    if (w->own_context)
        RT_CHECK(pit_context_create("opencl", 0, &ctx) == PIT_SUCCESS, "thread %d context", w->id);
    if (!ctx)
        return NULL;
    pit_stream *s = NULL;
    RT_CHECK(pit_stream_create(ctx, &s) == PIT_SUCCESS, "thread %d stream", w->id);
    pit_rng rng;
    pit_rng_seed(&rng, 1000 + (uint64_t)w->id);
    for (int it = 0; it < ITERS && s; it++) {
        one_matmul(ctx, s, w->id, it, &rng);
        /* pit_last_error is per thread: provoke an error naming this thread's
         * shape, then check no other thread's message replaced it. */
        int64_t bad[2] = {w->id + 1, -(int64_t)(w->id + 1)};
        pit_tensor *t = NULL;
        pit_tensor_create(ctx, PIT_F32, 2, bad, &t);
        char want[64];
        snprintf(want, sizeof want, "%lld is outside", -(long long)(w->id + 1));
        char msg[512];
        snprintf(msg, sizeof msg, "%s", pit_last_error());
        RT_CHECK(strstr(msg, want) != NULL, "thread %d: last error is \"%s\"", w->id, msg);
    }
    RT_CHECK(pit_synchronize(ctx, s) == PIT_SUCCESS, "thread %d synchronize", w->id);
    pit_stream_destroy(s);
    if (w->own_context)
        pit_context_destroy(ctx);
    return NULL;
}

static void run_threads(pit_context *shared, int own_context)
{
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.ctx = shared, .id = i, .own_context = own_context};
        if (pthread_create(&th[i], NULL, run_worker, &w[i]) != 0) {
            printf("FATAL: pthread_create\n");
            exit(1);
        }
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

int main(void)
{
    pit_context *ctx = rt_context_or_skip("test_threads");
    printf("one context, %d threads, one stream each, %d calls each\n", THREADS, ITERS);
    run_threads(ctx, 0);
    pit_context_destroy(ctx);
    printf("%d threads, one context each\n", THREADS);
    run_threads(NULL, 1);
    return rt_finish("test_threads");
}
