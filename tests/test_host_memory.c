/*
 * tests/test_host_memory.c - how core hands a DLPack import of host memory
 * (kDLCPU) to a plug-in (core/runtime/dlpack.c, tensor.c, registry.c), with
 * stand-in tables, so every path runs without a device:
 *  - a table without mem_wrap_host / mem_unwrap_host (CUDA, HIP), or a
 *    device whose memory is not the host's (an OpenCL GPU), refuses host
 *    memory with PIT_ERR_INVALID_ARGUMENT naming the backend and device; the
 *    caller keeps the managed tensor (its deleter is not called);
 *  - core keeps takes_host_memory only for a table that can wrap host memory;
 *  - where it is taken, the plug-in wraps exactly the view's bytes from its
 *    first element (byte_offset folded in), with the read-only flag of a
 *    DLPack 1.x import; destroy unwraps that handle once, on the context's
 *    default stream, then calls the producer's deleter once.
 * The real plug-in (OpenCL on PoCL) is tested in test_views.
 */
#include "dl_host.h"
#include "internal.h"
#include "rtest.h"

#define CHECK(cond) RT_CHECK(cond, "%s", #cond)

static int g_takes_host, g_wraps, g_unwraps, g_deletes, g_read_only;
static void *g_host;
static size_t g_bytes;
static void *g_unwrapped, *g_unwrap_stream;
static char g_handle; /* the stand-in's buffer handle */

static pit_status fake_device_info(int index, pit_device_info *info)
{
    (void)index;
    snprintf(info->name, sizeof info->name, "test device");
    info->takes_host_memory = g_takes_host;
    return PIT_SUCCESS;
}

static pit_status fake_wrap_host(void *bctx, void *host, size_t bytes, int read_only, void **mem)
{
    (void)bctx;
    g_wraps++;
    g_host = host;
    g_bytes = bytes;
    g_read_only = read_only;
    *mem = &g_handle;
    return PIT_SUCCESS;
}

static pit_status fake_unwrap_host(void *bctx, void *stream, void *mem)
{
    (void)bctx;
    g_unwraps++;
    g_unwrap_stream = stream;
    g_unwrapped = mem;
    return PIT_SUCCESS;
}

static const pit_backend device_only = {.name = "fake", .device_info = fake_device_info};
static const pit_backend host_too = {.name = "fake", .device_info = fake_device_info,
                                     .mem_wrap_host = fake_wrap_host,
                                     .mem_unwrap_host = fake_unwrap_host};

static void count_delete(DLManagedTensorVersioned *m)
{
    (void)m;
    g_deletes++;
}

/* A context of the stand-in table as core's registry describes its device. */
static pit_context *context_of(const pit_backend *be, int takes_host)
{
    static pit_context ctx; /* large: not on the stack */
    static char default_bs;
    memset(&ctx, 0, sizeof ctx);
    g_takes_host = takes_host;
    ctx.be = be;
    ctx.default_stream.bs = &default_bs;
    CHECK(pit_backend_device_info(be, 0, &ctx.info) == PIT_SUCCESS);
    return &ctx;
}

/* A 3x4 f32 view of rows of 6 floats, from element 7 on, in a host array. */
static float g_array[32];
static int64_t g_shape[2] = {3, 4}, g_strides[2] = {6, 1};

static DLManagedTensorVersioned host_view(uint64_t flags)
{
    return dl_host_view(g_array, g_shape, g_strides, 7, flags, count_delete);
}

static void expect_refused(pit_context *ctx, const char *what)
{
    DLManagedTensorVersioned m = host_view(0);
    pit_tensor *t = (pit_tensor *)(uintptr_t)1;
    g_deletes = g_wraps = 0;
    CHECK(pit_tensor_from_dlpack_versioned(ctx, &m, &t) == PIT_ERR_INVALID_ARGUMENT);
    RT_CHECK(strstr(pit_last_error(), "host memory") && strstr(pit_last_error(), "fake") &&
                 strstr(pit_last_error(), "test device"),
             "%s: the message names host memory, the backend and the device", what);
    RT_CHECK(t == NULL && g_deletes == 0 && g_wraps == 0,
             "%s: no tensor, no wrap, the caller keeps the managed tensor", what);
}

static void test_refusals(void)
{
    pit_context *ctx = context_of(&device_only, 1);
    CHECK(ctx->info.takes_host_memory == 0); /* core drops it: no entry to wrap with */
    expect_refused(ctx, "a backend without mem_wrap_host");
    ctx = context_of(&host_too, 0);
    expect_refused(ctx, "a device whose memory is not the host's");
}

static void test_wrap_and_unwrap(uint64_t flags)
{
    pit_context *ctx = context_of(&host_too, 1);
    CHECK(ctx->info.takes_host_memory == 1);
    DLManagedTensorVersioned m = host_view(flags);
    pit_tensor *t = NULL;
    g_deletes = g_wraps = g_unwraps = 0;
    CHECK(pit_tensor_from_dlpack_versioned(ctx, &m, &t) == PIT_SUCCESS);
    CHECK(g_wraps == 1 && g_host == (void *)(g_array + 7));
    CHECK(g_bytes == (size_t)(2 * 6 + 3 + 1) * sizeof(float)); /* first to last element */
    CHECK(g_read_only == ((flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0));
    pit_tensor_desc d;
    CHECK(t && pit_tensor_get_desc(t, &d) == PIT_SUCCESS);
    CHECK(d.data == &g_handle && d.byte_offset == 0 && d.strides[0] == 6 && d.owned == 0);
    CHECK(pit_tensor_destroy(t) == PIT_SUCCESS);
    CHECK(g_unwraps == 1 && g_unwrapped == &g_handle && g_unwrap_stream == ctx->default_stream.bs);
    CHECK(g_deletes == 1);
}

static void test_null_data(void)
{
    pit_context *ctx = context_of(&host_too, 1);
    DLManagedTensorVersioned m = host_view(0);
    m.dl_tensor.data = NULL;
    pit_tensor *t = NULL;
    g_wraps = 0;
    CHECK(pit_tensor_from_dlpack_versioned(ctx, &m, &t) == PIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(pit_last_error(), "data") != NULL && g_wraps == 0);
}

int main(void)
{
    test_refusals();
    test_wrap_and_unwrap(0);
    test_wrap_and_unwrap(DLPACK_FLAG_BITMASK_READ_ONLY);
    test_null_data();
    return rt_finish("test_host_memory");
}
