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
 *    operators, upload and zero refuse to write;
 *  - host memory (DLPack kDLCPU) wrapped in place on a device that takes it
 *    (PoCL), refused by name elsewhere.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_host.h"
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

static void count_delete_versioned(DLManagedTensorVersioned *m)
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

static pit_tensor *matrix(pit_context *ctx, int64_t rows, int64_t cols, const float *values)
{
    int64_t shape[2] = {rows, cols};
    pit_tensor *t = NULL;
    if (pit_tensor_create(ctx, PIT_F32, 2, shape, &t) != PIT_SUCCESS ||
        (values && pit_tensor_upload(t, NULL, values, (size_t)(rows * cols) * sizeof *values) != PIT_SUCCESS)) {
        printf("FATAL: a %lldx%lld tensor: %s\n", (long long)rows, (long long)cols, pit_last_error());
        exit(1);
    }
    return t;
}

static int holds(const pit_tensor *t, const float *want, size_t n)
{
    float *got = malloc(n * sizeof *got);
    int same = got && pit_tensor_download(t, NULL, got, n * sizeof *got) == PIT_SUCCESS &&
               memcmp(got, want, n * sizeof *got) == 0;
    free(got);
    return same;
}

/* DLPack 1.0: a versioned export describes the tensor; re-imported, it is
 * the same memory; the deleter runs once, at destroy; a major version
 * other than 1 is refused before anything else is read. */
static void test_dlpack_versioned(pit_context *ctx)
{
    float in[15], next[15];
    fill_random(in, 15, 3);
    fill_random(next, 15, 4);
    pit_tensor *x = matrix(ctx, 3, 5, in);
    pit_device_info info;
    pit_context_get_info(ctx, &info);
    DLManagedTensorVersioned *m = NULL;
    CHECK_STATUS(pit_tensor_to_dlpack_versioned(x, &m), PIT_SUCCESS, "versioned export");
    if (!m) {
        pit_tensor_destroy(x);
        return;
    }
    const DLTensor *t = &m->dl_tensor;
    RT_CHECK(m->version.major == 1 && m->version.minor == 0 && m->flags == 0 && m->deleter &&
                 t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5 && t->strides[0] == 5 &&
                 t->strides[1] == 1 && t->dtype.code == kDLFloat && t->dtype.bits == 32 &&
                 t->dtype.lanes == 1 && (int)t->device.device_type == info.dlpack_device_type &&
                 t->device.device_id == 0 && t->data == data_of(x) && t->byte_offset == 0,
             "versioned export: version 1.0, no flag, the tensor's device, dtype, shape and memory");
    DLManagedTensorVersioned v = *m;
    v.deleter = count_delete_versioned;
    deletes = 0;
    pit_tensor *u = NULL;
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, &u), PIT_SUCCESS, "versioned import");
    if (u) {
        RT_CHECK(holds(u, in, 15), "the import reads the exported tensor's values");
        CHECK_STATUS(pit_tensor_upload(u, NULL, next, sizeof next), PIT_SUCCESS, "upload through the import");
        RT_CHECK(holds(x, next, 15), "the import writes the exported tensor's memory");
    }
    pit_tensor_destroy(u);
    RT_CHECK(deletes == 1, "the import's deleter runs once, at destroy (%d)", deletes);
    deletes = 0;
    v.version.minor = 3;
    u = NULL;
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, &u), PIT_SUCCESS, "version 1.3 (same layout)");
    pit_tensor_destroy(u);
    v.version.major = 2;
    u = (pit_tensor *)(uintptr_t)1;
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, &u), PIT_ERR_UNSUPPORTED, "version 2.x");
    v.version.major = 1;
    int64_t square[2] = {256, 256};
    v.dl_tensor.shape = square;
    v.dl_tensor.strides = NULL;
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, &u), PIT_ERR_INVALID_ARGUMENT,
                 "versioned import of a view past its buffer");
    RT_CHECK(u == NULL && deletes == 1, "refused imports leave the tensor NULL and the deleter uncalled");
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, NULL, &u), PIT_ERR_INVALID_ARGUMENT, "null managed");
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(NULL, &v, &u), PIT_ERR_INVALID_ARGUMENT, "null ctx");
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, NULL), PIT_ERR_INVALID_ARGUMENT, "null out");
    CHECK_STATUS(pit_tensor_to_dlpack_versioned(NULL, &m), PIT_ERR_INVALID_ARGUMENT, "export of NULL");
    CHECK_STATUS(pit_tensor_to_dlpack_versioned(x, NULL), PIT_ERR_INVALID_ARGUMENT, "export to NULL");
    m->deleter(m);
    pit_tensor_destroy(x);
}

/* A read-only import is an input of every operator and never written: an
 * operator refuses it as an output, upload and zero refuse it, the 0.x
 * export (which cannot carry the flag) refuses it, the 1.0 export keeps the
 * flag. */
static void test_read_only(pit_context *ctx)
{
    float in[32], relu[32], tr[32];
    fill_random(in, 32, 5);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) {
            float v = in[r * 8 + c];
            relu[r * 8 + c] = v > 0.0f ? v : 0.0f;
            tr[c * 4 + r] = v;
        }
    pit_tensor *x = matrix(ctx, 4, 8, in), *y = matrix(ctx, 4, 8, NULL), *yt = matrix(ctx, 8, 4, tr);
    DLManagedTensorVersioned *m = NULL;
    if (pit_tensor_to_dlpack_versioned(x, &m) != PIT_SUCCESS) {
        RT_CHECK(0, "versioned export");
        return;
    }
    DLManagedTensorVersioned v = *m;
    v.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    v.deleter = count_delete_versioned;
    deletes = 0;
    pit_tensor *ro = NULL;
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &v, &ro), PIT_SUCCESS, "read-only import");
    if (ro) {
        CHECK_STATUS(pit_relu(ctx, NULL, ro, y), PIT_SUCCESS, "relu of a read-only input");
        RT_CHECK(holds(y, relu, 32), "relu of a read-only input is right");
        CHECK_STATUS(pit_transpose(ctx, NULL, ro, yt), PIT_SUCCESS, "transpose of a read-only input");
        RT_CHECK(holds(yt, tr, 32), "transpose of a read-only input is right");
        CHECK_STATUS(pit_relu(ctx, NULL, y, ro), PIT_ERR_INVALID_ARGUMENT, "relu into a read-only tensor");
        RT_CHECK(strstr(pit_last_error(), "read-only") != NULL, "the message says read-only");
        CHECK_STATUS(pit_relu(ctx, NULL, ro, ro), PIT_ERR_INVALID_ARGUMENT, "relu in place on a read-only tensor");
        CHECK_STATUS(pit_transpose(ctx, NULL, yt, ro), PIT_ERR_INVALID_ARGUMENT, "transpose into a read-only tensor");
        CHECK_STATUS(pit_tensor_upload(ro, NULL, relu, sizeof relu), PIT_ERR_INVALID_ARGUMENT,
                     "upload into a read-only tensor");
        CHECK_STATUS(pit_tensor_zero(ro, NULL), PIT_ERR_INVALID_ARGUMENT, "zero of a read-only tensor");
        RT_CHECK(holds(x, in, 32), "the read-only tensor's memory is untouched");
        DLManagedTensor *m0 = NULL;
        CHECK_STATUS(pit_tensor_to_dlpack(ro, &m0), PIT_ERR_INVALID_ARGUMENT,
                     "DLPack 0.x export of a read-only tensor");
        DLManagedTensorVersioned *m1 = NULL;
        CHECK_STATUS(pit_tensor_to_dlpack_versioned(ro, &m1), PIT_SUCCESS, "versioned export of a read-only tensor");
        RT_CHECK(m1 && (m1->flags & DLPACK_FLAG_BITMASK_READ_ONLY), "the versioned export keeps the flag");
        if (m1)
            m1->deleter(m1);
    }
    pit_tensor_destroy(ro);
    RT_CHECK(deletes == 1, "the read-only import's deleter runs once");
    m->deleter(m);
    pit_tensor_destroy(yt);
    pit_tensor_destroy(y);
    pit_tensor_destroy(x);
}

/* Host memory (DLPack kDLCPU) on a device that takes it (an OpenCL CPU
 * device: PoCL): relu from one host view into another writes the host
 * array in place, only inside the view, visible once the stream is
 * synchronised (PoCL uses the memory in place) and after destroy; a
 * read-only host import is an input, never an output; the legacy struct
 * imports host memory too. Elsewhere host memory is refused by name. */
static void test_host_memory(pit_context *ctx, const char *backend)
{
    pit_device_info info;
    pit_context_get_info(ctx, &info);
    enum { R = 3, C = 5, LD = 8, N = 40 };
    static float x[N], y[N], before[N];
    int64_t shape[2] = {R, C}, strides[2] = {LD, 1};
    fill_random(x, N, 11);
    for (int i = 0; i < N; i++)
        y[i] = before[i] = 100.0f + (float)i;
    DLManagedTensorVersioned mx = dl_host_view(x, shape, strides, 2, DLPACK_FLAG_BITMASK_READ_ONLY,
                                                   count_delete_versioned);
    DLManagedTensorVersioned my = dl_host_view(y, shape, strides, 3, 0, count_delete_versioned);
    pit_tensor *tx = NULL, *ty = NULL;
    deletes = 0;
    if (!info.takes_host_memory) {
        CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &mx, &tx), PIT_ERR_INVALID_ARGUMENT,
                     "%s: host memory on a device that does not take it", backend);
        RT_CHECK(strstr(pit_last_error(), "host memory") && strstr(pit_last_error(), backend) &&
                     tx == NULL && deletes == 0,
                 "%s: the refusal names host memory and the backend; the caller keeps it", backend);
        return;
    }
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &mx, &tx), PIT_SUCCESS, "read-only host input");
    CHECK_STATUS(pit_tensor_from_dlpack_versioned(ctx, &my, &ty), PIT_SUCCESS, "host output");
    if (!tx || !ty) {
        pit_tensor_destroy(tx);
        pit_tensor_destroy(ty);
        return;
    }
    CHECK_STATUS(pit_relu(ctx, NULL, ty, tx), PIT_ERR_INVALID_ARGUMENT, "relu into a read-only host import");
    CHECK_STATUS(pit_relu(ctx, NULL, tx, ty), PIT_SUCCESS, "relu between host views");
    CHECK_STATUS(pit_synchronize(ctx, NULL), PIT_SUCCESS, "synchronise");
    int in_place = 1, outside = 1;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float v = x[2 + r * LD + c];
            in_place &= y[3 + r * LD + c] == (v > 0.0f ? v : 0.0f);
            y[3 + r * LD + c] = before[3 + r * LD + c]; /* what the view may change */
        }
    for (int i = 0; i < N; i++)
        outside &= y[i] == before[i];
    RT_CHECK(in_place, "relu's results are in the host array once the stream is synchronised");
    RT_CHECK(outside, "nothing outside the host view was written");
    pit_tensor_desc d;
    pit_tensor_get_desc(ty, &d);
    RT_CHECK(d.byte_offset == 0 && d.strides[0] == LD && d.owned == 0,
             "the host view is a buffer of its own bytes, the strides kept");
    CHECK_STATUS(pit_tensor_destroy(tx), PIT_SUCCESS, "destroy the host input");
    CHECK_STATUS(pit_tensor_destroy(ty), PIT_SUCCESS, "destroy the host output");
    RT_CHECK(deletes == 2, "each host import's deleter runs once (%d)", deletes);
    /* DLPack 0.x: the same host memory through the legacy struct */
    DLManagedTensor legacy;
    memset(&legacy, 0, sizeof legacy);
    legacy.dl_tensor = mx.dl_tensor;
    legacy.deleter = count_delete;
    float values[R * C];
    CHECK_STATUS(pit_tensor_from_dlpack(ctx, &legacy, &tx), PIT_SUCCESS, "legacy host import");
    if (tx) {
        int64_t rc[2] = {R, C};
        pit_tensor *dense = NULL;
        pit_tensor_create(ctx, PIT_F32, 2, rc, &dense);
        CHECK_STATUS(pit_transpose(ctx, NULL, tx, dense), PIT_ERR_SHAPE_MISMATCH,
                     "a transpose into the wrong shape is refused as for device memory");
        CHECK_STATUS(pit_relu(ctx, NULL, tx, dense), PIT_SUCCESS, "relu of a legacy host import");
        CHECK_STATUS(pit_tensor_download(dense, NULL, values, sizeof values), PIT_SUCCESS, "download");
        int right = 1;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                float v = x[2 + r * LD + c];
                right &= values[r * C + c] == (v > 0.0f ? v : 0.0f);
            }
        RT_CHECK(right, "a legacy host import reads the host array's view");
        pit_tensor_destroy(dense);
        pit_tensor_destroy(tx);
    }
    legacy.dl_tensor.data = NULL;
    CHECK_STATUS(pit_tensor_from_dlpack(ctx, &legacy, &tx), PIT_ERR_INVALID_ARGUMENT, "host import of NULL");
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
    test_dlpack_versioned(ctx);
    test_read_only(ctx);
    test_host_memory(ctx, backend);
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
