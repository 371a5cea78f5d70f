/*
 * tests/fuzz/fuzz_tensor.c - libFuzzer target: tensor descriptors and DLPack
 * imports with fuzzed dtypes, ranks, shapes, strides, offsets, device types
 * and data pointers, against a real context (OpenCL; PoCL on the CPU in CI).
 * Properties:
 *  - pit_tensor_wrap / pit_tensor_create / the DLPack imports (0.x and 1.x)
 *    either succeed with a descriptor whose innermost stride is 1, whose
 *    elements never share memory (strides in any order), aligned, and whose
 *    extent fits in 2^63 bytes, or fail with a status and a
 *    message, leaving *tensor NULL (and, for DLPack, the producer's deleter
 *    uncalled);
 *  - a view of the real buffer is accepted only inside it (offset + extent
 *    <= its size, or no byte at all), and a refusal for its size happens only
 *    when it really passes the end; a buffer of another context is never
 *    accepted;
 *  - a successful import is destroyed with exactly one deleter call; a
 *    DLPack 1.x import of another major version is refused; one flagged
 *    read-only refuses upload and zero and keeps its bytes;
 *  - on a view of a real buffer, upload / download / zero touch exactly the
 *    view's elements (sentinel bytes elsewhere survive) in row-major order;
 *  - to_dlpack exports what was described.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlpack_versioned.h"
#include "fuzz_input.h"
#include "pit.h"

#define BUF_BYTES 65536

static pit_context *g_ctx, *g_other;
static pit_tensor *g_buf;     /* an i32 tensor of BUF_BYTES: real memory for views */
static void *g_mem;           /* its cl_mem */
static void *g_foreign;       /* a cl_mem of another context (another cl_context) */
static int g_deleted;
static uint8_t g_host[BUF_BYTES], g_back[BUF_BYTES], g_owner[BUF_BYTES];

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tensor: property violated: %s (last error: %s)\n", what,
            pit_last_error());
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    unsetenv("PIT_LOG");
    if (pit_context_create("opencl", 0, &g_ctx) != PIT_SUCCESS) {
        fprintf(stderr, "fuzz_tensor: needs an OpenCL device: %s\n", pit_last_error());
        exit(1);
    }
    int64_t n = BUF_BYTES / 4;
    pit_tensor_desc d;
    pit_tensor *theirs = NULL; /* lives as long as the process */
    if (pit_tensor_create(g_ctx, PIT_I32, 1, &n, &g_buf) != PIT_SUCCESS ||
        pit_tensor_get_desc(g_buf, &d) != PIT_SUCCESS ||
        pit_context_create("opencl", 0, &g_other) != PIT_SUCCESS ||
        pit_tensor_create(g_other, PIT_I32, 1, &n, &theirs) != PIT_SUCCESS)
        fail("buffers");
    g_mem = d.data;
    pit_tensor_get_desc(theirs, &d);
    g_foreign = d.data;
    return 0;
}

static void count_delete(DLManagedTensor *m)
{
    (void)m;
    g_deleted++;
}

static void count_delete_versioned(DLManagedTensorVersioned *m)
{
    (void)m;
    g_deleted++;
}

static size_t dsize(pit_dtype t)
{
    return pit_dtype_size(t);
}

/* Element count of a descriptor: 0 when any extent is 0 (whatever the
 * others are), -1 when it passes INT64_MAX. */
static int64_t numel_of(const pit_tensor_desc *d)
{
    for (int i = 0; i < d->rank; i++)
        if (d->shape[i] == 0)
            return 0;
    int64_t numel = 1;
    for (int i = 0; i < d->rank; i++) {
        if (d->shape[i] < 0 || numel > INT64_MAX / d->shape[i])
            return -1;
        numel *= d->shape[i];
    }
    return numel;
}

/* Saturating element count and byte extent of a descriptor. */
static int fits(const pit_tensor_desc *d, size_t *extent)
{
    int64_t numel = numel_of(d);
    if (numel == 0) {
        *extent = 0;
        return 1;
    }
    if (numel < 0)
        return 0;
    __int128 last = 0;
    for (int i = 0; i < d->rank; i++)
        last += (__int128)(d->shape[i] - 1) * d->strides[i];
    __int128 bytes = (last + 1) * (__int128)dsize(d->dtype);
    if (bytes > INT64_MAX)
        return 0;
    *extent = (size_t)bytes;
    return 1;
}

static void check_desc(const pit_tensor *t, pit_dtype dtype, int rank, size_t offset)
{
    pit_tensor_desc d;
    if (pit_tensor_get_desc(t, &d) != PIT_SUCCESS)
        fail("get_desc");
    if (d.dtype != dtype || d.rank != rank || d.rank < 1 || d.rank > PIT_MAX_RANK ||
        d.byte_offset != offset || offset % dsize(dtype))
        fail("descriptor differs from what was asked");
    /* Dimensions may come in any stride order, but in ascending stride order
     * each stride covers the span of the smaller ones. An empty view's
     * larger strides are free once that span passes 2^63 (a view with no
     * extent 0 that far is refused: fits() below). */
    int order[PIT_MAX_RANK], n = 0;
    for (int i = d.rank - 1; i >= 0; i--) {
        if (d.shape[i] < 0 || d.shape[i] > INT32_MAX)
            fail("dimension out of range accepted");
        if (i == d.rank - 1 && d.shape[i] > 1 && d.strides[i] != 1)
            fail("innermost stride != 1 accepted");
        if (d.shape[i] > 1)
            order[n++] = i;
    }
    /* Insertion sort, stable: equal strides keep the inner dimension first,
     * as the library orders them (an empty view's check stops at the first
     * span past 2^63, so the order of ties decides where). */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && d.strides[order[b]] < d.strides[order[b - 1]]; b--) {
            int x = order[b];
            order[b] = order[b - 1];
            order[b - 1] = x;
        }
    __int128 expect = 1;
    for (int k = 0; k < n && expect <= INT64_MAX; k++) {
        if (d.strides[order[k]] < expect)
            fail("overlapping strides accepted");
        expect = (__int128)d.strides[order[k]] * d.shape[order[k]];
    }
    size_t extent;
    if (!fits(&d, &extent) || offset > (size_t)INT64_MAX - extent)
        fail("a tensor spanning more than 2^63 bytes was accepted");
}

/* Upload / download / zero on a view of the real buffer: exactly the view's
 * bytes change, in row-major order. */
static void exercise_view(pit_tensor *t)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    size_t es = dsize(d.dtype), extent;
    if (!fits(&d, &extent))
        fail("a view spanning more than 2^63 bytes was accepted");
    if (extent == 0 && d.byte_offset > BUF_BYTES)
        return; /* an empty view spans no byte, wherever it starts */
    if (d.byte_offset + extent > BUF_BYTES)
        fail("a view past the end of its buffer was accepted");
    int64_t numel = numel_of(&d);
    if ((size_t)numel * es > extent)
        fail("more element bytes than the extent");
    memset(g_host, 0xA5, BUF_BYTES);
    if (pit_tensor_upload(g_buf, NULL, g_host, BUF_BYTES) != PIT_SUCCESS)
        fail("sentinel upload");
    memset(g_owner, 0, BUF_BYTES);
    for (int64_t e = 0; e < numel; e++) {
        int64_t rem = e, off = 0;
        for (int i = d.rank - 1; i >= 0; i--) {
            off += (rem % d.shape[i]) * d.strides[i];
            rem /= d.shape[i];
        }
        size_t at = d.byte_offset + (size_t)off * es;
        for (size_t b = 0; b < es; b++) {
            if (g_owner[at + b])
                fail("two elements of a view share memory");
            g_owner[at + b] = 1;
            g_host[e * (int64_t)es + (int64_t)b] = (uint8_t)(e * 7 + b * 13 + 1);
        }
    }
    size_t bytes = (size_t)numel * es;
    if (pit_tensor_upload(t, NULL, g_host, bytes + 1) != PIT_ERR_SHAPE_MISMATCH)
        fail("upload of the wrong size accepted");
    if (pit_tensor_upload(t, NULL, g_host, bytes) != PIT_SUCCESS)
        fail("upload");
    if (pit_tensor_download(g_buf, NULL, g_back, BUF_BYTES) != PIT_SUCCESS)
        fail("download of the buffer");
    for (int64_t e = 0; e < BUF_BYTES; e++)
        if (!g_owner[e] && g_back[e] != 0xA5)
            fail("upload wrote outside the view");
    uint8_t *mine = malloc(bytes + 1);
    if (!mine)
        return;
    if (pit_tensor_download(t, NULL, mine, bytes) != PIT_SUCCESS || memcmp(mine, g_host, bytes))
        fail("download does not give back what was uploaded");
    if (pit_tensor_zero(t, NULL) != PIT_SUCCESS)
        fail("zero");
    if (pit_tensor_download(g_buf, NULL, g_back, BUF_BYTES) != PIT_SUCCESS)
        fail("download after zero");
    for (int64_t e = 0; e < BUF_BYTES; e++)
        if (g_back[e] != (g_owner[e] ? 0 : 0xA5))
            fail("zero touched a byte outside the view or missed one inside");
    free(mine);
}

static void check_export(pit_tensor *t)
{
    DLManagedTensor *m = NULL;
    if (pit_tensor_to_dlpack(t, &m) != PIT_SUCCESS || !m)
        fail("to_dlpack");
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    const DLTensor *x = &m->dl_tensor;
    if (x->ndim != d.rank || x->data != d.data || x->byte_offset != d.byte_offset ||
        x->device.device_type != kDLOpenCL || x->dtype.lanes != 1 ||
        (size_t)x->dtype.bits != 8 * dsize(d.dtype))
        fail("to_dlpack exported something else");
    for (int i = 0; i < d.rank; i++)
        if (x->shape[i] != d.shape[i] || x->strides[i] != d.strides[i])
            fail("to_dlpack shape/strides");
    m->deleter(m);
}

/* NULL, the real buffer, or one of another context. Never a made-up
 * handle: a cl_mem is queried (its context and size), and the OpenCL ICD
 * loader follows any pointer it is given. */
static void *pick_data(fz *f)
{
    uint8_t s = fz_u8(f) % 4;
    return s == 0 ? NULL : s == 1 ? g_foreign : g_mem;
}

static size_t pick_offset(fz *f)
{
    uint8_t s = fz_u8(f);
    if (s < 200)
        return (size_t)(s % 50) * 2;
    return (size_t)fz_u64(f);
}

static pit_dtype pick_dtype(fz *f)
{
    uint8_t s = fz_u8(f);
    return s < 240 ? (pit_dtype)(s % 4) : (pit_dtype)(int8_t)fz_u8(f);
}

/* Bytes a valid view's elements span (its descriptor as asked, before
 * pit saw it); 0 when it is empty. Only asked of views pit accepted as
 * descriptors, whose extents are 0..2^31-1: int128 holds every product. */
static __int128 asked_extent(pit_dtype dtype, int rank, const int64_t *shape, const int64_t *strides)
{
    __int128 last = 0, inner = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (shape[i] == 0)
            return 0;
        last += (__int128)(shape[i] - 1) * (strides ? strides[i] : inner);
        inner *= shape[i];
    }
    return (last + 1) * (__int128)dsize(dtype);
}

/* A refusal names the buffer's size only for a view of the real buffer
 * that passes its end; a buffer of another context is never accepted. */
static void check_bounds_outcome(pit_status s, const void *data, size_t offset, pit_dtype dtype,
                                 int rank, const int64_t *shape, const int64_t *strides)
{
    if (s == PIT_SUCCESS && data == g_foreign)
        fail("a buffer of another context was accepted");
    if (s != PIT_SUCCESS && strstr(pit_last_error(), "which holds") &&
        (data != g_mem || (__int128)offset + asked_extent(dtype, rank, shape, strides) <= BUF_BYTES))
        fail("a view inside its buffer was refused for the buffer's size");
}

static void fuzz_wrap(fz *f)
{
    pit_dtype dtype = pick_dtype(f);
    int rank = fz_u8(f) % 7 - 1;
    int64_t shape[PIT_MAX_RANK], strides[PIT_MAX_RANK];
    for (int i = 0; i < PIT_MAX_RANK; i++)
        shape[i] = fz_extent(f);
    int with_strides = fz_u8(f) & 1;
    for (int i = 0; i < PIT_MAX_RANK; i++)
        strides[i] = fz_extent(f);
    void *data = pick_data(f);
    size_t offset = pick_offset(f);
    pit_tensor *t = (pit_tensor *)(uintptr_t)1;
    pit_status s = pit_tensor_wrap(g_ctx, dtype, rank, shape, with_strides ? strides : NULL, data,
                                   offset, &t);
    check_bounds_outcome(s, data, offset, dtype, rank, shape, with_strides ? strides : NULL);
    if (s != PIT_SUCCESS) {
        if (t != NULL || !pit_last_error()[0])
            fail("failed wrap left a tensor or no message");
        return;
    }
    check_desc(t, dtype, rank, offset);
    if (data == g_mem)
        exercise_view(t);
    check_export(t);
    pit_tensor_destroy(t);
}

static void fuzz_create(fz *f)
{
    pit_dtype dtype = pick_dtype(f);
    int rank = fz_u8(f) % 7 - 1;
    int64_t shape[PIT_MAX_RANK];
    for (int i = 0; i < PIT_MAX_RANK; i++)
        shape[i] = fz_extent(f);
    /* Only sizes the harness can afford, or descriptors that must be refused
     * before any allocation (bad rank, dtype, dimension, or overflow). */
    int refused = rank < 1 || rank > PIT_MAX_RANK || dsize(dtype) == 0;
    __int128 bytes = refused ? 0 : (__int128)dsize(dtype);
    for (int i = 0; !refused && i < rank; i++) {
        if (shape[i] < 0 || shape[i] > INT32_MAX)
            refused = 1;
        else
            bytes *= shape[i];
    }
    int overflow = !refused && bytes > INT64_MAX;
    if (!refused && !overflow && bytes > (1 << 20))
        return;
    pit_tensor *t = NULL;
    pit_status s = pit_tensor_create(g_ctx, dtype, rank, shape, &t);
    if ((refused || overflow) && s == PIT_SUCCESS)
        fail("create accepted an invalid or overflowing shape");
    if (s != PIT_SUCCESS) {
        if (t || !pit_last_error()[0])
            fail("failed create left a tensor or no message");
        return;
    }
    check_desc(t, dtype, rank, 0);
    pit_tensor_destroy(t);
}

/* The pit dtype of an accepted DLPack dtype. */
static pit_dtype dtype_of(DLDataType t)
{
    if (t.code == kDLBfloat)
        return PIT_BF16;
    if (t.code == kDLInt)
        return PIT_I32;
    if (t.bits == 8)
        return PIT_U8; /* kDLUInt or kDLBool */
    return t.bits == 16 ? PIT_F16 : PIT_F32;
}

/* A read-only import is never written: upload and zero are refused and the
 * buffer keeps its bytes. */
static void check_read_only(pit_tensor *t)
{
    memset(g_host, 0xA5, BUF_BYTES);
    if (pit_tensor_upload(g_buf, NULL, g_host, BUF_BYTES) != PIT_SUCCESS)
        fail("sentinel upload");
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    int64_t numel = numel_of(&d);
    size_t bytes = numel > 0 ? (size_t)numel * dsize(d.dtype) : 0;
    if (bytes <= BUF_BYTES && pit_tensor_upload(t, NULL, g_back, bytes) != PIT_ERR_INVALID_ARGUMENT)
        fail("upload into a read-only import was not refused");
    if (pit_tensor_zero(t, NULL) != PIT_ERR_INVALID_ARGUMENT)
        fail("zero of a read-only import was not refused");
    if (pit_tensor_download(g_buf, NULL, g_back, BUF_BYTES) != PIT_SUCCESS)
        fail("download of the buffer");
    for (size_t e = 0; e < BUF_BYTES; e++)
        if (g_back[e] != 0xA5)
            fail("a read-only import was written");
}

static void fuzz_dlpack(fz *f)
{
    static const int types[] = {kDLOpenCL, kDLCPU, kDLCUDA, kDLROCM, kDLOpenCL, kDLOpenCL};
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    uint8_t s = fz_u8(f);
    m.dl_tensor.device.device_type = (DLDeviceType)(s < 240 ? types[s % 6] : (int)(int8_t)fz_u8(f));
    /* Host memory (kDLCPU) is wrapped as the caller describes it, which the
     * handles below are not: on a CPU device it would be read as host bytes.
     * Its import is tested in test_views; here it stands for another device. */
    if (m.dl_tensor.device.device_type == kDLCPU)
        m.dl_tensor.device.device_type = kDLCUDA;
    s = fz_u8(f);
    m.dl_tensor.device.device_id = s < 220 ? 0 : (int32_t)(int8_t)fz_u8(f);
    s = fz_u8(f);
    static const DLDataType dts[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1},
                                     {kDLInt, 32, 1},   {kDLFloat, 64, 1}, {kDLInt, 8, 1},
                                     {kDLUInt, 32, 1},  {kDLFloat, 32, 4}};
    if (s < 240) {
        m.dl_tensor.dtype = dts[s % 8];
    } else {
        m.dl_tensor.dtype.code = fz_u8(f);
        m.dl_tensor.dtype.bits = fz_u8(f);
        m.dl_tensor.dtype.lanes = (uint16_t)(fz_u8(f) | fz_u8(f) << 8);
    }
    s = fz_u8(f);
    int32_t ndim = s < 240 ? s % 7 - 1 : (int32_t)(fz_u64(f) & 0xffffffffu);
    m.dl_tensor.ndim = ndim;
    /* Arrays of exactly ndim entries, so ASan sees any read past them. */
    size_t len = ndim >= 1 && ndim <= 8 ? (size_t)ndim : 0;
    int64_t *shape = len ? malloc(len * sizeof *shape) : NULL;
    int64_t *strides = len && (fz_u8(f) & 1) ? malloc(len * sizeof *strides) : NULL;
    for (size_t i = 0; i < len; i++)
        shape[i] = fz_extent(f);
    for (size_t i = 0; strides && i < len; i++)
        strides[i] = fz_extent(f);
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.dl_tensor.data = pick_data(f);
    m.dl_tensor.byte_offset = (uint64_t)pick_offset(f);
    m.deleter = count_delete;
    /* DLPack 1.x: the same tensor in the versioned struct, any version and flags */
    DLManagedTensorVersioned v;
    memset(&v, 0, sizeof v);
    s = fz_u8(f);
    int versioned = s & 1;
    v.version.major = s < 200 ? 1 : fz_u8(f);
    v.version.minor = fz_u8(f);
    v.flags = fz_u8(f) < 128 ? 0 : fz_u64(f);
    v.deleter = count_delete_versioned;
    v.dl_tensor = m.dl_tensor;
    int read_only = versioned && (v.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    g_deleted = 0;
    pit_tensor *t = (pit_tensor *)(uintptr_t)1;
    pit_status st = versioned ? pit_tensor_from_dlpack_versioned(g_ctx, &v, &t)
                              : pit_tensor_from_dlpack(g_ctx, &m, &t);
    if (st == PIT_SUCCESS && versioned && v.version.major != 1)
        fail("a DLPack tensor of another major version was imported");
    pit_dtype dt = dtype_of(m.dl_tensor.dtype);
    check_bounds_outcome(st, m.dl_tensor.data, (size_t)m.dl_tensor.byte_offset, dt, ndim, shape, strides);
    if (st != PIT_SUCCESS) {
        if (t != NULL || g_deleted || !pit_last_error()[0])
            fail("failed import left a tensor, called the deleter or gave no message");
    } else {
        check_desc(t, dt, ndim, (size_t)m.dl_tensor.byte_offset);
        if (m.dl_tensor.data == g_mem && read_only)
            check_read_only(t);
        else if (m.dl_tensor.data == g_mem)
            exercise_view(t);
        pit_tensor_destroy(t);
        if (g_deleted != 1)
            fail("imported tensor destroyed without exactly one deleter call");
    }
    free(shape);
    free(strides);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    switch (fz_u8(&f) % 3) {
    case 0: fuzz_wrap(&f); break;
    case 1: fuzz_create(&f); break;
    default: fuzz_dlpack(&f); break;
    }
    return 0;
}
