/*
 * tests/test_views.c - the memory behind a wrapped or imported view, on
 * every backend with a device (PoCL in CI; CUDA and HIP on a GPU machine,
 * reported skipped by name elsewhere):
 *  - a view that passes the end of its buffer (an oversized shape, an offset
 *    or a stride past the end, a sub-buffer or an interior pointer) is
 *    refused by pit_tensor_wrap and the DLPack imports, so no operator runs
 *    on it; a view that ends exactly at the end is accepted and addresses the
 *    right bytes;
 *  - a buffer of another OpenCL context, or of another GPU, is refused with
 *    PIT_ERR_CONTEXT_MISMATCH, as a foreign stream is;
 *  - DLPack 1.0 (versioned) import and export, and read-only imports that
 *    operators, upload and zero refuse to write.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>
#include "pit.h"
#include "rtest.h"

#ifdef PIT_TEST_OPENCL
#include <CL/cl.h>
#endif

#define CHECK_STATUS(got, want, ...)                                                       \
    do {                                                                                   \
        pit_status s_ = (got);                                                             \
        RT_CHECK(s_ == (want) && ((want) == PIT_SUCCESS || pit_last_error()[0]), __VA_ARGS__); \
        if (s_ != (want))                                                                  \
            printf("     got %s, want %s\n", pit_status_string(s_), pit_status_string(want)); \
    } while (0)

static int skipped;
static int deletes;

static void count_delete(DLManagedTensor *m)
{
    (void)m;
    deletes++;
}

/* Random values in [-1, 1), never all zero. */
static void fill_random(float *v, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = (float)(x % 20000u) / 10000.0f - 1.0f;
    }
    v[0] = 0.75f;
}

static void *data_of(const pit_tensor *t)
{
    pit_tensor_desc d;
    return pit_tensor_get_desc(t, &d) == PIT_SUCCESS ? d.data : NULL;
}

static pit_tensor *vector(pit_context *ctx, int64_t n)
{
    pit_tensor *t = NULL;
    if (pit_tensor_create(ctx, PIT_F32, 1, &n, &t) != PIT_SUCCESS) {
        printf("FATAL: pit_tensor_create(%lld): %s\n", (long long)n, pit_last_error());
        exit(1);
    }
    return t;
}

/* A wrap that must be refused because it passes the end of a buffer of
 * `size` bytes: the message names the buffer's size. */
static void expect_past_end(pit_context *ctx, const char *what, int rank, const int64_t *shape,
                            const int64_t *strides, void *data, size_t offset, size_t size)
{
    pit_tensor *t = (pit_tensor *)(uintptr_t)1;
    pit_status s = pit_tensor_wrap(ctx, PIT_F32, rank, shape, strides, data, offset, &t);
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%zu bytes", size);
    RT_CHECK(s == PIT_ERR_INVALID_ARGUMENT && t == NULL && strstr(pit_last_error(), bytes),
             "%s: a view past the end of a %zu-byte buffer must be refused, naming its size (got %s)",
             what, size, pit_status_string(s));
    if (s == PIT_SUCCESS)
        pit_tensor_destroy(t); /* never handed to an operator */
}

/* Uploads random values through a view and finds them at `first` (in
 * floats) of the tensor that owns the memory. */
static void expect_view_at(pit_tensor *view, pit_tensor *owner, int64_t n, int64_t first,
                           int64_t owner_n, const char *what)
{
    float *in = malloc((size_t)n * sizeof *in), *all = malloc((size_t)owner_n * sizeof *all);
    if (!in || !all)
        exit(1);
    fill_random(in, (size_t)n, (uint32_t)(n + first));
    CHECK_STATUS(pit_tensor_upload(view, NULL, in, (size_t)n * sizeof *in), PIT_SUCCESS, "%s: upload", what);
    CHECK_STATUS(pit_tensor_download(owner, NULL, all, (size_t)owner_n * sizeof *all), PIT_SUCCESS,
                 "%s: download", what);
    RT_CHECK(memcmp(in, all + first, (size_t)n * sizeof *in) == 0, "%s: the view's elements are "
             "elements %lld.. of its buffer", what, (long long)first);
    free(in);
    free(all);
}

/* A [64] f32 buffer (256 bytes) wrapped as views of every kind. */
static void test_bounds(pit_context *ctx)
{
    pit_tensor *base = vector(ctx, 64);
    void *mem = data_of(base);
    int64_t square[2] = {256, 256};
    expect_past_end(ctx, "[256,256] over 64 floats", 2, square, NULL, mem, 0, 256);
    int64_t n16[1] = {16}, n65[1] = {65}, strided[2] = {4, 8}, strides[2] = {17, 1};
    expect_past_end(ctx, "[16] at byte 196", 1, n16, NULL, mem, 196, 256);
    expect_past_end(ctx, "[65]", 1, n65, NULL, mem, 0, 256);
    expect_past_end(ctx, "[4,8] with row stride 17 at byte 24", 2, strided, strides, mem, 24, 256);
    pit_tensor *tail = NULL, *rows = NULL, *empty = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, n16, NULL, mem, 192, &tail), PIT_SUCCESS,
                 "[16] at byte 192 ends at the buffer's end");
    if (tail)
        expect_view_at(tail, base, 16, 48, 64, "[16] at byte 192");
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 2, strided, strides, mem, 20, &rows), PIT_SUCCESS,
                 "[4,8] with row stride 17 at byte 20 ends at the buffer's end");
    int64_t none[2] = {0, 8};
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 2, none, NULL, mem, 4096, &empty), PIT_SUCCESS,
                 "an empty view spans no byte, whatever its offset");
    /* The same through DLPack: the producer keeps its tensor on failure. */
    DLManagedTensor *m = NULL;
    CHECK_STATUS(pit_tensor_to_dlpack(base, &m), PIT_SUCCESS, "export [64]");
    if (m) {
        DLManagedTensor big = *m;
        big.dl_tensor.shape = square;
        big.dl_tensor.ndim = 2;
        big.dl_tensor.strides = NULL;
        big.deleter = count_delete;
        deletes = 0;
        pit_tensor *t = NULL;
        CHECK_STATUS(pit_tensor_from_dlpack(ctx, &big, &t), PIT_ERR_INVALID_ARGUMENT,
                     "DLPack import of [256,256] over 64 floats");
        RT_CHECK(t == NULL && deletes == 0, "a refused import leaves the deleter to the caller");
        m->deleter(m);
    }
    pit_tensor_destroy(empty);
    pit_tensor_destroy(rows);
    pit_tensor_destroy(tail);
    pit_tensor_destroy(base);
}

/* CUDA and HIP: a pointer inside an allocation is bounded by the
 * allocation's end; host memory is no device memory. */
static void test_interior_pointer(pit_context *ctx)
{
    pit_tensor *base = vector(ctx, 64);
    char *inner = (char *)data_of(base) + 128;
    int64_t n32[1] = {32}, n33[1] = {33};
    pit_tensor *t = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, n32, NULL, inner, 0, &t), PIT_SUCCESS,
                 "[32] at the allocation's byte 128 ends at its end");
    if (t)
        expect_view_at(t, base, 32, 32, 64, "[32] at an interior pointer");
    pit_tensor_destroy(t);
    expect_past_end(ctx, "[33] at the allocation's byte 128", 1, n33, NULL, inner, 0, 128);
    float *host = calloc(64, sizeof *host);
    t = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, n32, NULL, host, 0, &t), PIT_ERR_INVALID_ARGUMENT,
                 "host memory wrapped as device memory");
    pit_tensor_destroy(t);
    free(host);
    pit_tensor_destroy(base);
}

#ifdef PIT_TEST_OPENCL
/* OpenCL: a sub-buffer's size is its own, not its parent's. */
static void test_sub_buffer(pit_context *ctx)
{
    pit_tensor *parent = vector(ctx, 1024);
    cl_mem pmem = data_of(parent);
    cl_context clctx = NULL;
    cl_device_id dev = NULL;
    cl_uint align_bits = 0;
    if (clGetMemObjectInfo(pmem, CL_MEM_CONTEXT, sizeof clctx, &clctx, NULL) != CL_SUCCESS ||
        clGetContextInfo(clctx, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL) !=
            CL_SUCCESS) {
        RT_CHECK(0, "OpenCL queries of the parent buffer");
        pit_tensor_destroy(parent);
        return;
    }
    size_t origin = align_bits / 8 > 4 ? align_bits / 8 : 4;
    cl_buffer_region region = {origin, 256};
    cl_int err = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(pmem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (origin + 256 > 4096 || err != CL_SUCCESS) {
        RT_CHECK(0, "clCreateSubBuffer at %zu: %d", origin, (int)err);
        pit_tensor_destroy(parent);
        return;
    }
    int64_t n64[1] = {64}, n65[1] = {65}, n16[1] = {16};
    expect_past_end(ctx, "[65] over a 256-byte sub-buffer", 1, n65, NULL, sub, 0, 256);
    expect_past_end(ctx, "[16] at byte 200 of a 256-byte sub-buffer", 1, n16, NULL, sub, 200, 256);
    pit_tensor *t = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, n64, NULL, sub, 0, &t), PIT_SUCCESS,
                 "[64] over a 256-byte sub-buffer");
    if (t)
        expect_view_at(t, parent, 64, (int64_t)(origin / 4), 1024, "[64] over a sub-buffer");
    pit_tensor_destroy(t);
    clReleaseMemObject(sub);
    pit_tensor_destroy(parent);
}
#endif

/* Memory of another context (OpenCL: another cl_context; CUDA/HIP: another
 * device) is refused, wrapped or imported. */
static void test_foreign(pit_context *ctx, pit_context *other, const char *what)
{
    pit_tensor *theirs = vector(other, 64);
    int64_t n16[1] = {16};
    pit_tensor *t = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, n16, NULL, data_of(theirs), 0, &t),
                 PIT_ERR_CONTEXT_MISMATCH, "wrap of %s", what);
    pit_tensor_destroy(t);
    int64_t none[1] = {0};
    t = NULL;
    CHECK_STATUS(pit_tensor_wrap(ctx, PIT_F32, 1, none, NULL, data_of(theirs), 0, &t),
                 PIT_ERR_CONTEXT_MISMATCH, "empty wrap of %s", what);
    pit_tensor_destroy(t);
    DLManagedTensor *m = NULL;
    if (pit_tensor_to_dlpack(theirs, &m) == PIT_SUCCESS) {
        DLManagedTensor in = *m;
        in.deleter = count_delete;
        deletes = 0;
        t = NULL;
        CHECK_STATUS(pit_tensor_from_dlpack(ctx, &in, &t), PIT_ERR_CONTEXT_MISMATCH,
                     "DLPack import of %s", what);
        RT_CHECK(t == NULL && deletes == 0, "a refused import leaves the deleter to the caller");
        m->deleter(m);
    }
    pit_tensor_destroy(theirs);
}

static void foreign_cases(pit_context *ctx, const char *backend)
{
    pit_context *other = NULL;
    if (!strcmp(backend, "opencl")) {
        /* every pit context has a cl_context of its own */
        if (pit_context_create("opencl", 0, &other) == PIT_SUCCESS)
            test_foreign(ctx, other, "a cl_mem of another pit context");
        pit_context_destroy(other);
        return;
    }
    int count = 0;
    if (pit_device_count(backend, &count) == PIT_SUCCESS && count > 1 &&
        pit_context_create(backend, 1, &other) == PIT_SUCCESS) {
        test_foreign(ctx, other, "memory of device 1");
        pit_context_destroy(other);
    } else {
        printf("skipped: %s: memory of another device needs two devices\n", backend);
        skipped++;
    }
}

static void run_backend(const char *backend)
{
    pit_context *ctx = NULL;
    if (pit_context_create(backend, 0, &ctx) != PIT_SUCCESS) {
        printf("skipped: %s: no device: %s\n", backend, pit_last_error());
        skipped++;
        return;
    }
    int before = rt_failed;
    test_bounds(ctx);
    if (strcmp(backend, "opencl") != 0)
        test_interior_pointer(ctx);
#ifdef PIT_TEST_OPENCL
    else
        test_sub_buffer(ctx);
#endif
    foreign_cases(ctx, backend);
    printf("%s: %s\n", backend, rt_failed == before ? "passed" : "FAILED");
    pit_context_destroy(ctx);
}

int main(void)
{
    const char *backends[] = {"opencl", "cuda", "hip"};
    for (int i = 0; i < 3; i++)
        run_backend(backends[i]);
    printf("%d skipped\n", skipped);
    return rt_finish("test_views");
}
