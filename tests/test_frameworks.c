/*
 * tests/test_frameworks.c - what a framework embedding pit relies on, on the
 * OpenCL device (PoCL in CI):
 *  - log: pit_set_log_callback receives the levels PIT_LOG asks for (the
 *    process is run once per PIT_LOG value: `log LEVEL WORKDIR`, LEVEL the
 *    value or "unset"), stderr gets nothing unless PIT_LOG is set, a callback
 *    replaced while other threads log is never called again;
 *  - objects: pit_context_destroy refuses while tensors, streams or events
 *    are alive and names them, the context staying usable; an allocator set
 *    with pit_context_set_allocator provides every device buffer pit takes
 *    (clCreateBuffer is interposed: the plug-in must not call it behind the
 *    allocator's back) and gets every block back, from the allocator that
 *    gave it; `allocator cuda` runs the same on a CUDA device (counts only).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "rtest.h"

/* ---- clCreateBuffer, interposed --------------------------------------------- */

typedef cl_mem (*create_buffer_fn)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
static atomic_int pit_own_buffers; /* made by pit's libraries themselves */

static create_buffer_fn real_create_buffer(void)
{
    static _Atomic(create_buffer_fn) fn;
    if (!atomic_load(&fn)) {
        create_buffer_fn f;
        void *sym = dlsym(RTLD_NEXT, "clCreateBuffer");
        memcpy(&f, &sym, sizeof f);
        atomic_store(&fn, f);
    }
    return atomic_load(&fn);
}

__attribute__((visibility("default"))) CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size,
                                               void *host_ptr, cl_int *errcode_ret)
{
    Dl_info info;
    if (dladdr(__builtin_return_address(0), &info) && info.dli_fname &&
        strstr(info.dli_fname, "libpit"))
        atomic_fetch_add(&pit_own_buffers, 1);
    return real_create_buffer()(context, flags, size, host_ptr, errcode_ret);
}

/* ---- device memory the test's allocator hands out ------------------------------ *
 * OpenCL: cl_mem of pit's cl_context (the real clCreateBuffer, so it is not
 * counted as pit's own); CUDA (on a GPU machine): device pointers of the
 * primary context pit uses, through the driver loaded with dlopen. */

typedef struct cuda_driver {
    int (*DeviceGet)(int *, int);
    int (*PrimaryCtxRetain)(void **, int);
    int (*PrimaryCtxRelease)(int);
    int (*CtxPushCurrent)(void *);
    int (*CtxPopCurrent)(void **);
    int (*MemAlloc)(unsigned long long *, size_t);
    int (*MemFree)(unsigned long long);
} cuda_driver;

static cuda_driver cu;
static void *cu_ctx;
static cl_context cl_ctx;

static int load_symbol(void *lib, const char *name, void *fn)
{
    void *sym = lib ? dlsym(lib, name) : NULL;
    memcpy(fn, &sym, sizeof sym);
    return sym != NULL;
}

/* The primary context of CUDA device 0 (pit's context is on it). */
static int open_cuda(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int dev = 0;
    return load_symbol(lib, "cuDeviceGet", &cu.DeviceGet) &&
           load_symbol(lib, "cuDevicePrimaryCtxRetain", &cu.PrimaryCtxRetain) &&
           load_symbol(lib, "cuDevicePrimaryCtxRelease_v2", &cu.PrimaryCtxRelease) &&
           load_symbol(lib, "cuCtxPushCurrent_v2", &cu.CtxPushCurrent) &&
           load_symbol(lib, "cuCtxPopCurrent_v2", &cu.CtxPopCurrent) &&
           load_symbol(lib, "cuMemAlloc_v2", &cu.MemAlloc) &&
           load_symbol(lib, "cuMemFree_v2", &cu.MemFree) && cu.DeviceGet(&dev, 0) == 0 &&
           cu.PrimaryCtxRetain(&cu_ctx, dev) == 0;
}

static void *take_block(size_t bytes)
{
    if (cl_ctx) {
        cl_int err = CL_SUCCESS;
        return real_create_buffer()(cl_ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    }
    unsigned long long p = 0;
    void *prev = NULL;
    if (cu.CtxPushCurrent(cu_ctx) != 0)
        return NULL;
    if (cu.MemAlloc(&p, bytes) != 0)
        p = 0;
    cu.CtxPopCurrent(&prev);
    return (void *)(uintptr_t)p;
}

static void give_block(void *block)
{
    if (cl_ctx) {
        clReleaseMemObject((cl_mem)block);
        return;
    }
    void *prev = NULL;
    if (cu.CtxPushCurrent(cu_ctx) == 0) {
        cu.MemFree((unsigned long long)(uintptr_t)block); /* waits for the device */
        cu.CtxPopCurrent(&prev);
    }
}

/* ---- a counting allocator ----------------------------------------------------- */

#define MAX_BLOCKS 4096

typedef struct counting_allocator {
    pthread_mutex_t lock;
    int allocs, frees, scratch_allocs, live, bad_frees, fail_next;
    void *block[MAX_BLOCKS];
    void *stream[MAX_BLOCKS];
    int n;
} counting_allocator;

static void *count_alloc(void *user, size_t bytes, void *stream)
{
    counting_allocator *a = user;
    pthread_mutex_lock(&a->lock);
    void *m = NULL;
    if (a->fail_next) {
        a->fail_next = 0;
    } else if (a->n < MAX_BLOCKS && bytes > 0) {
        m = take_block(bytes);
        if (m) {
            a->block[a->n] = m;
            a->stream[a->n++] = stream;
            a->allocs++;
            a->live++;
            a->scratch_allocs += stream != NULL;
        }
    }
    pthread_mutex_unlock(&a->lock);
    return m;
}

static void count_free(void *user, void *block, void *stream)
{
    counting_allocator *a = user;
    pthread_mutex_lock(&a->lock);
    int found = -1;
    for (int i = 0; i < a->n && found < 0; i++)
        if (a->block[i] == block && a->stream[i] == stream)
            found = i;
    if (found < 0) {
        a->bad_frees++; /* not ours, or not with the stream it was taken for */
    } else {
        a->block[found] = a->block[--a->n];
        a->stream[found] = a->stream[a->n];
        a->frees++;
        a->live--;
        give_block(block);
    }
    pthread_mutex_unlock(&a->lock);
}

static void counting_init(counting_allocator *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
}

static pit_allocator allocator_of(counting_allocator *a)
{
    return (pit_allocator){count_alloc, count_free, a};
}

/* ---- operator runs, each checked against the reference ---------------------- */

static pit_tensor *upload_new(pit_context *ctx, pit_stream *s, pit_dtype dt, int rank,
                              const int64_t *shape, double *x)
{
    pit_tensor *t = NULL;
    pit_status st = pit_tensor_create(ctx, dt, rank, shape, &t);
    RT_CHECK(st == PIT_SUCCESS, "pit_tensor_create");
    if (st != PIT_SUCCESS)
        exit(1);
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)shape[i];
    if (x)
        RT_CHECK(rt_upload(t, s, x, n) == PIT_SUCCESS, "upload");
    return t;
}

static void check_close(const char *what, pit_tensor *t, pit_stream *s, const double *ref,
                        size_t n, pit_dtype dt)
{
    double *got = malloc(n * sizeof *got);
    RT_CHECK(rt_download(t, s, got, n) == PIT_SUCCESS, "%s: download", what);
    double err = pit_ref_rel_error(ref, got, n);
    RT_CHECK(err <= pit_ref_tolerance(dt), "%s: rel error %g", what, err);
    free(got);
}

/* A x B with A's 32x1 (or forced) micro-tiles half zero. */
static void run_matmul(pit_context *ctx, pit_stream *s, pit_dtype dt, int64_t m, int64_t k,
                       int64_t n, const pit_microtile *forced, pit_rng *rng)
{
    double *A = malloc((size_t)(m * k) * 8), *B = malloc((size_t)(k * n) * 8),
           *R = malloc((size_t)(m * n) * 8);
    pit_ref_fill_random(rng, A, (size_t)(m * k));
    pit_ref_fill_random(rng, B, (size_t)(k * n));
    pit_ref_sparsify_tiles(rng, A, 1, m, k, forced ? forced->rows : 32, forced ? forced->cols : 1,
                           0, 0, 0.5);
    int64_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n};
    pit_tensor *tA = upload_new(ctx, s, dt, 2, sa, A), *tB = upload_new(ctx, s, dt, 2, sb, B),
               *tC = upload_new(ctx, s, dt, 2, sc, NULL);
    pit_ref_matmul(1, m, n, k, A, B, R);
    pit_matmul_options o = pit_matmul_options_default();
    if (forced)
        o.microtile = *forced;
    RT_CHECK(pit_matmul(ctx, s, tA, tB, tC, &o, NULL) == PIT_SUCCESS, "pit_matmul %s",
             pit_dtype_name(dt));
    check_close("pit_matmul", tC, s, R, (size_t)(m * n), dt);
    pit_tensor_destroy(tA);
    pit_tensor_destroy(tB);
    pit_tensor_destroy(tC);
    free(A);
    free(B);
    free(R);
}

/* MoE forward with two experts a token: the OpenCL backend sums the slots in
 * a scratch buffer of its own. */
static void run_moe(pit_context *ctx, pit_stream *s, pit_rng *rng)
{
    enum { T = 48, H = 40, N = 24, E = 4, K = 2 };
    double X[T * H], W[E * H * N], G[T * K], R[T * N], ids_d[T * K];
    int32_t ids[T * K];
    pit_ref_fill_random(rng, X, T * H);
    pit_ref_fill_random(rng, W, E * H * N);
    pit_ref_fill_random(rng, G, T * K);
    for (int i = 0; i < T * K; i++) {
        ids[i] = (int32_t)(pit_rng_next(rng) % E);
        ids_d[i] = ids[i];
    }
    int64_t sx[2] = {T, H}, sw[3] = {E, H, N}, sg[2] = {T, K}, sy[2] = {T, N};
    pit_tensor *tX = upload_new(ctx, s, PIT_F32, 2, sx, X), *tW = upload_new(ctx, s, PIT_F32, 3, sw, W),
               *tG = upload_new(ctx, s, PIT_F32, 2, sg, G), *tI = upload_new(ctx, s, PIT_I32, 2, sg, ids_d),
               *tY = upload_new(ctx, s, PIT_F32, 2, sy, NULL);
    pit_ref_moe_forward(T, H, N, E, K, X, ids, G, W, R);
    RT_CHECK(pit_moe_forward(ctx, s, tX, tI, tG, tW, tY, NULL) == PIT_SUCCESS, "pit_moe_forward");
    check_close("pit_moe_forward", tY, s, R, T * N, PIT_F32);
    pit_tensor *all[] = {tX, tW, tG, tI, tY};
    for (int i = 0; i < 5; i++)
        pit_tensor_destroy(all[i]);
}

/* Sparse attention composed by core (OpenCL): a workspace and block indices. */
static void run_attention(pit_context *ctx, pit_stream *s, pit_rng *rng)
{
    enum { BH = 2, L = 64, D = 16 };
    double Q[BH * L * D], Kt[BH * L * D], V[BH * L * D], M[L * L], R[BH * L * D];
    pit_ref_fill_random(rng, Q, BH * L * D);
    pit_ref_fill_random(rng, Kt, BH * L * D);
    pit_ref_fill_random(rng, V, BH * L * D);
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++)
            M[i * L + j] = j <= i ? 1.0 : 0.0; /* causal */
    int64_t sq[3] = {BH, L, D}, sm[2] = {L, L};
    pit_tensor *tQ = upload_new(ctx, s, PIT_F32, 3, sq, Q), *tK = upload_new(ctx, s, PIT_F32, 3, sq, Kt),
               *tV = upload_new(ctx, s, PIT_F32, 3, sq, V), *tM = upload_new(ctx, s, PIT_F32, 2, sm, M),
               *tO = upload_new(ctx, s, PIT_F32, 3, sq, NULL);
    pit_ref_attention(BH, L, D, D, Q, Kt, V, M, 0, 0.25, R);
    RT_CHECK(pit_sparse_attention(ctx, s, tQ, tK, tV, tM, tO, 0.25f, 16, NULL) == PIT_SUCCESS,
             "pit_sparse_attention");
    check_close("pit_sparse_attention", tO, s, R, BH * L * D, PIT_F32);
    pit_tensor *all[] = {tQ, tK, tV, tM, tO};
    for (int i = 0; i < 5; i++)
        pit_tensor_destroy(all[i]);
}

/* Plans (indices), workspaces and every kind of backend scratch, on s. */
static void run_all(pit_context *ctx, pit_stream *s, pit_rng *rng)
{
    const pit_microtile axis_m = {1, 32, PIT_AXIS_M};
    run_matmul(ctx, s, PIT_F32, 96, 128, 40, NULL, rng);
    run_matmul(ctx, s, PIT_BF16, 64, 96, 48, &axis_m, rng); /* f32 scratch of the stream */
    run_moe(ctx, s, rng);
    run_attention(ctx, s, rng);
}

/* ---- pit_context_destroy with live objects ----------------------------------- */

static void expect_refused(pit_context *ctx, const char *names)
{
    pit_status st = pit_context_destroy(ctx);
    RT_CHECK(st == PIT_ERR_INVALID_ARGUMENT, "destroy with %s alive: %s", names, pit_status_string(st));
    RT_CHECK(strstr(pit_last_error(), names) != NULL, "the message names %s", names);
    if (st == PIT_SUCCESS) { /* the context is gone: nothing below may touch it */
        printf("FATAL: the context was destroyed with live objects\n");
        exit(rt_finish("test_frameworks objects"));
    }
}

static void test_destroy_with_live_objects(void)
{
    pit_context *ctx = rt_context_or_skip("test_frameworks");
    pit_rng rng;
    pit_rng_seed(&rng, 27);
    int64_t shape[2] = {8, 8};
    pit_tensor *a = NULL, *b = NULL;
    pit_stream *s = NULL;
    pit_event *e = NULL;
    pit_tensor_create(ctx, PIT_F32, 2, shape, &a);
    pit_tensor_create(ctx, PIT_F32, 2, shape, &b);
    pit_stream_create(ctx, &s);
    pit_event_record(ctx, s, &e);
    expect_refused(ctx, "2 tensors, 1 stream and 1 event of this context are still alive");
    /* left as it was: it still computes, on its streams */
    run_matmul(ctx, s, PIT_F32, 64, 64, 32, NULL, &rng);
    run_matmul(ctx, NULL, PIT_F32, 64, 64, 32, NULL, &rng);
    pit_event_destroy(e);
    expect_refused(ctx, "2 tensors and 1 stream of this context are");
    pit_stream_destroy(s);
    expect_refused(ctx, "2 tensors of this context are");
    pit_tensor_destroy(a);
    expect_refused(ctx, "1 tensor of this context is");
    pit_tensor_destroy(b);
    RT_CHECK(pit_context_destroy(ctx) == PIT_SUCCESS, "destroy once everything is gone");
}

/* ---- the allocator -------------------------------------------------------------- */

/* backend: "opencl" (the plug-in's own buffers are counted: none may be made
 * while the allocator is set) or "cuda" (on a GPU machine: counts only). */
static void test_allocator(const char *backend)
{
    pit_context *ctx = NULL;
    const int opencl = !strcmp(backend, "opencl");
    if (pit_context_create(backend, 0, &ctx) != PIT_SUCCESS || (!opencl && !open_cuda())) {
        printf("test_frameworks: SKIPPED: no %s device: %s\n", backend, pit_last_error());
        exit(77);
    }
    pit_rng rng;
    pit_rng_seed(&rng, 2718);
    int64_t shape[2] = {16, 16};
    pit_tensor *own = NULL, *from_a = NULL, *from_b = NULL, *refused = (pit_tensor *)1;
    int before = atomic_load(&pit_own_buffers);
    RT_CHECK(pit_tensor_create(ctx, PIT_F32, 2, shape, &own) == PIT_SUCCESS, "backend's tensor");
    if (opencl && atomic_load(&pit_own_buffers) == before) {
        printf("FAIL: clCreateBuffer is not interposed: this test cannot see pit's buffers\n");
        rt_failed++;
        return;
    }
    pit_tensor_desc d;
    pit_tensor_get_desc(own, &d);
    if (opencl) /* the context of pit's buffers is where the allocator's go */
        clGetMemObjectInfo((cl_mem)d.data, CL_MEM_CONTEXT, sizeof cl_ctx, &cl_ctx, NULL);

    pit_allocator bad = {NULL, count_free, NULL};
    RT_CHECK(pit_context_set_allocator(ctx, &bad) == PIT_ERR_INVALID_ARGUMENT, "alloc NULL refused");
    RT_CHECK(pit_context_set_allocator(NULL, NULL) == PIT_ERR_INVALID_ARGUMENT, "ctx NULL refused");

    counting_allocator A, B;
    counting_init(&A);
    counting_init(&B);
    pit_allocator a = allocator_of(&A), b = allocator_of(&B);
    RT_CHECK(pit_context_set_allocator(ctx, &a) == PIT_SUCCESS, "set allocator A");
    int own_before = atomic_load(&pit_own_buffers);
    pit_stream *s = NULL;
    RT_CHECK(pit_stream_create(ctx, &s) == PIT_SUCCESS, "stream");
    RT_CHECK(pit_tensor_create(ctx, PIT_F32, 2, shape, &from_a) == PIT_SUCCESS, "tensor from A");
    run_all(ctx, NULL, &rng);
    run_all(ctx, s, &rng);
    double gbps = 0;
    pit_status bw = pit_measure_copy_bandwidth(ctx, 1 << 16, 2, &gbps);
    RT_CHECK(bw == PIT_SUCCESS || bw == PIT_ERR_UNSUPPORTED, "copy bandwidth");
    bw = pit_measure_queued_copy_bandwidth(ctx, 1 << 16, 2, &gbps);
    RT_CHECK(bw == PIT_SUCCESS || bw == PIT_ERR_UNSUPPORTED, "queued copy bandwidth");
    RT_CHECK(atomic_load(&pit_own_buffers) == own_before,
             "%d buffers made behind the allocator's back", atomic_load(&pit_own_buffers) - own_before);
    RT_CHECK(A.allocs > 0 && A.scratch_allocs > 0, "A gave %d blocks, %d of them scratch", A.allocs,
             A.scratch_allocs);

    /* B from now on; A's blocks still go back to A */
    RT_CHECK(pit_context_set_allocator(ctx, &b) == PIT_SUCCESS, "set allocator B");
    RT_CHECK(pit_tensor_create(ctx, PIT_F32, 2, shape, &from_b) == PIT_SUCCESS, "tensor from B");
    run_all(ctx, s, &rng);
    RT_CHECK(B.allocs > 0 && B.scratch_allocs > 0, "B gave %d blocks", B.allocs);
    RT_CHECK(atomic_load(&pit_own_buffers) == own_before, "buffers behind B's back");
    B.fail_next = 1;
    pit_status st = pit_tensor_create(ctx, PIT_F32, 2, shape, &refused);
    RT_CHECK(st == PIT_ERR_OUT_OF_MEMORY && refused == NULL, "allocator without a block: %s",
             pit_status_string(st));
    RT_CHECK(strstr(pit_last_error(), "allocator") != NULL, "the message names the allocator");

    /* NULL: the backend's own allocation again */
    RT_CHECK(pit_context_set_allocator(ctx, NULL) == PIT_SUCCESS, "back to the backend's");
    pit_tensor *own2 = NULL;
    RT_CHECK(pit_tensor_create(ctx, PIT_F32, 2, shape, &own2) == PIT_SUCCESS, "backend's tensor");
    RT_CHECK(!opencl || atomic_load(&pit_own_buffers) > own_before, "the backend allocates again");
    run_matmul(ctx, s, PIT_F32, 64, 64, 32, NULL, &rng);

    pit_tensor_destroy(from_a);
    pit_tensor_destroy(from_b);
    pit_tensor_destroy(own);
    pit_tensor_destroy(own2);
    pit_stream_destroy(s);
    RT_CHECK(pit_context_destroy(ctx) == PIT_SUCCESS, "destroy");
    RT_CHECK(A.live == 0 && B.live == 0, "blocks never given back: A %d, B %d", A.live, B.live);
    RT_CHECK(A.bad_frees == 0 && B.bad_frees == 0, "blocks given back to the wrong allocator or "
             "stream: A %d, B %d", A.bad_frees, B.bad_frees);
    printf("%s allocator A: %d blocks (%d scratch), B: %d blocks (%d scratch), all given back\n",
           backend, A.allocs, A.scratch_allocs, B.allocs, B.scratch_allocs);
    cl_ctx = NULL;
    if (!opencl)
        cu.PrimaryCtxRelease(0);
}

/* ---- the log --------------------------------------------------------------------- */

typedef struct log_seen {
    atomic_int count[3];
    char last[3][512];
    pthread_mutex_t lock;
    int tried_reentry;
    pit_status reentry;
} log_seen;

static void record_line(void *user, pit_log_level level, const char *message)
{
    log_seen *seen = user;
    if ((int)level < 0 || (int)level > 2)
        return;
    atomic_fetch_add(&seen->count[level], 1);
    pthread_mutex_lock(&seen->lock);
    snprintf(seen->last[level], sizeof seen->last[level], "%s", message);
    if (!seen->tried_reentry) {
        seen->tried_reentry = 1;
        seen->reentry = pit_set_log_callback(NULL, NULL);
    }
    pthread_mutex_unlock(&seen->lock);
}

static const char *bad_tiledb;

/* One context on a tile database with a malformed line: a warning (the file
 * is skipped), an info line (the context), debug lines (a matmul). */
static void log_everything(void)
{
    setenv("PIT_TILEDB", bad_tiledb, 1);
    pit_context *ctx = rt_context_or_skip("test_frameworks");
    unsetenv("PIT_TILEDB");
    pit_rng rng;
    pit_rng_seed(&rng, 5);
    run_matmul(ctx, NULL, PIT_F32, 64, 64, 32, NULL, &rng);
    pit_context_destroy(ctx);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, 1 << 20);
    if (f && text)
        text[fread(text, 1, (1 << 20) - 1, f)] = '\0';
    if (f)
        fclose(f);
    return text;
}

typedef struct log_thread {
    pthread_t id;
    atomic_int *stop;
} log_thread;

static void *warn_until_stopped(void *arg)
{
    log_thread *t = arg;
    while (!atomic_load(t->stop)) {
        pit_context *ctx = NULL; /* PIT_TILEDB names the malformed file */
        if (pit_context_create("opencl", 0, &ctx) == PIT_SUCCESS)
            pit_context_destroy(ctx);
    }
    return NULL;
}

/* Once pit_set_log_callback returns, the previous callback is never called. */
static void test_callback_swap_under_load(void)
{
    log_seen first, second;
    memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    pthread_mutex_init(&first.lock, NULL);
    pthread_mutex_init(&second.lock, NULL);
    first.tried_reentry = second.tried_reentry = 1;
    atomic_int stop = 0;
    log_thread t[4];
    setenv("PIT_TILEDB", bad_tiledb, 1); /* before the threads: they only read it */
    pit_set_log_callback(record_line, &first);
    for (int i = 0; i < 4; i++) {
        t[i].stop = &stop;
        pthread_create(&t[i].id, NULL, warn_until_stopped, &t[i]);
    }
    for (long spin = 0; atomic_load(&first.count[PIT_LOG_WARN]) < 8 && spin < 200000000L; spin++)
        sched_yield();
    pit_set_log_callback(record_line, &second);
    int frozen = atomic_load(&first.count[PIT_LOG_WARN]);
    for (long spin = 0; atomic_load(&second.count[PIT_LOG_WARN]) < 8 && spin < 200000000L; spin++)
        sched_yield();
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i].id, NULL);
    pit_set_log_callback(NULL, NULL);
    unsetenv("PIT_TILEDB");
    RT_CHECK(atomic_load(&first.count[PIT_LOG_WARN]) == frozen,
             "the replaced callback was called %d more times", atomic_load(&first.count[PIT_LOG_WARN]) - frozen);
    RT_CHECK(atomic_load(&second.count[PIT_LOG_WARN]) >= 8, "the new callback got %d warnings",
             atomic_load(&second.count[PIT_LOG_WARN]));
}

/* level: PIT_LOG's value for this process ("unset" when absent). */
static void test_log(const char *level, const char *workdir)
{
    /* lowest level delivered to a callback and to stderr; 3: none */
    int to_callback = 3, to_stderr = 3;
    if (!strcmp(level, "debug") || !strcmp(level, "1"))
        to_callback = to_stderr = PIT_LOG_DEBUG;
    else if (!strcmp(level, "info"))
        to_callback = to_stderr = PIT_LOG_INFO;
    else if (!strcmp(level, "warn"))
        to_callback = to_stderr = PIT_LOG_WARN;
    else if (!strcmp(level, "unset"))
        to_callback = PIT_LOG_WARN;
    char path[1024], err_path[1024];
    snprintf(path, sizeof path, "%s/malformed.tiledb", workdir);
    snprintf(err_path, sizeof err_path, "%s/stderr-%s.txt", workdir, level);
    FILE *f = fopen(path, "w");
    if (!f) {
        printf("FAIL: cannot write %s\n", path);
        rt_failed++;
        return;
    }
    fputs("# a line that is not a tile\n* opencl dense f32 not-a-number\n", f);
    fclose(f);
    bad_tiledb = path;

    /* what the library writes to stderr goes to a file */
    fflush(stderr);
    int saved = dup(2), fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);

    log_seen seen;
    memset(&seen, 0, sizeof seen);
    pthread_mutex_init(&seen.lock, NULL);
    RT_CHECK(pit_set_log_callback(record_line, &seen) == PIT_SUCCESS, "set the callback");
    log_everything();
    RT_CHECK(pit_set_log_callback(NULL, NULL) == PIT_SUCCESS, "back to stderr");
    log_everything(); /* now to stderr, where PIT_LOG asks for it */
    if (to_callback <= PIT_LOG_WARN)
        test_callback_swap_under_load();

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *err = read_file(err_path);

    static const char *const names[3] = {"debug", "info", "warn"};
    static const char *const expect[3] = {"detect:", "context on", "tile database"};
    for (int l = 0; l < 3; l++) {
        int n = atomic_load(&seen.count[l]);
        if (l >= to_callback) {
            RT_CHECK(n > 0, "PIT_LOG=%s: no %s line reached the callback", level, names[l]);
            RT_CHECK(n == 0 || strstr(seen.last[l], "pit:") != seen.last[l], "prefix in \"%s\"", seen.last[l]);
            RT_CHECK(strchr(seen.last[l], '\n') == NULL, "newline in \"%s\"", seen.last[l]);
        } else {
            RT_CHECK(n == 0, "PIT_LOG=%s: %d %s lines reached the callback (\"%s\")", level, n,
                     names[l], seen.last[l]);
        }
    }
    RT_CHECK(to_callback > PIT_LOG_WARN || strstr(seen.last[PIT_LOG_WARN], expect[2]),
             "the warning: \"%s\"", seen.last[PIT_LOG_WARN]);
    RT_CHECK(to_callback > PIT_LOG_INFO || strstr(seen.last[PIT_LOG_INFO], expect[1]),
             "the info line: \"%s\"", seen.last[PIT_LOG_INFO]);
    RT_CHECK(to_callback > PIT_LOG_WARN || seen.reentry == PIT_ERR_INVALID_ARGUMENT,
             "pit_set_log_callback from inside the callback: %s", pit_status_string(seen.reentry));
    /* stderr: only after the callback was removed, only what PIT_LOG asks */
    if (to_stderr > PIT_LOG_WARN) {
        RT_CHECK(err && err[0] == '\0', "PIT_LOG=%s: the library printed \"%.200s\"", level,
                 err ? err : "?");
    } else {
        RT_CHECK(err && strstr(err, "pit: warning: tile database"), "PIT_LOG=%s: no warning on stderr",
                 level);
        RT_CHECK(err && (to_stderr > PIT_LOG_INFO) == !strstr(err, "pit: context on"),
                 "PIT_LOG=%s: info lines on stderr", level);
        RT_CHECK(err && (to_stderr > PIT_LOG_DEBUG) == !strstr(err, "pit: detect:"),
                 "PIT_LOG=%s: debug lines on stderr", level);
    }
    free(err);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "log")) {
        test_log(argv[2], argv[3]);
        return rt_finish("test_frameworks log");
    }
    if (argc == 2 && !strcmp(argv[1], "objects")) {
        test_destroy_with_live_objects();
        test_allocator("opencl");
        return rt_finish("test_frameworks objects");
    }
    if (argc == 3 && !strcmp(argv[1], "allocator")) {
        test_allocator(argv[2]);
        return rt_finish("test_frameworks allocator");
    }
    printf("usage: test_frameworks objects | allocator BACKEND | log LEVEL|unset WORKDIR\n");
    return 2;
}
