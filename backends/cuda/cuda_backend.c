/*
 * cuda_backend.c - the CUDA plug-in's pit_backend table: driver loading,
 * devices, contexts (the primary context), streams, memory and events.
 * The PIT operations live in cuda_ops.c, the JIT in cuda_jit.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_model.h"

static int initialised;

static pit_status cuda_init(const pit_host *host)
{
    pit_cuda_host = host;
    if (initialised) return PIT_SUCCESS;
    pit_status st = pit_cuda_driver_load();
    if (st == PIT_SUCCESS) initialised = 1;
    return st;
}

static void cuda_shutdown(void)
{
    if (initialised) pit_cuda_driver_unload();
    initialised = 0;
}

static pit_status require_init(void)
{
    if (initialised) return PIT_SUCCESS;
    return pit_cuda_host->error(PIT_ERR_NO_DEVICE, "cuda: the backend is not initialised (no driver)");
}

static pit_status cuda_device_count(int *count)
{
    *count = 0;
    pit_status st = require_init();
    if (st != PIT_SUCCESS) return st;
    CU_CHECK(pit_cu.DeviceGetCount(count), "cuDeviceGetCount");
    return PIT_SUCCESS;
}

static pit_status device_at(int index, CUdevice *dev)
{
    int count = 0;
    pit_status st = cuda_device_count(&count);
    if (st != PIT_SUCCESS) return st;
    if (index < 0 || index >= count)
        return pit_cuda_host->error(PIT_ERR_DEVICE_INDEX, "cuda: device %d requested, %d present", index, count);
    CU_CHECK(pit_cu.DeviceGet(dev, index), "cuDeviceGet");
    return PIT_SUCCESS;
}

static pit_status attribute(CUdevice dev, CUdevice_attribute a, int *value)
{
    CU_CHECK(pit_cu.DeviceGetAttribute(value, a, dev), "cuDeviceGetAttribute");
    return PIT_SUCCESS;
}

static pit_status device_arch(CUdevice dev, int *arch)
{
    int major = 0, minor = 0;
    pit_status st = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major);
    if (st == PIT_SUCCESS) st = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor);
    *arch = major * 10 + minor;
    return st;
}

static pit_status cuda_device_info(int index, pit_device_info *info)
{
    CUdevice dev;
    pit_status st = device_at(index, &dev);
    if (st != PIT_SUCCESS) return st;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "cuda");
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA Corporation");
    CU_CHECK(pit_cu.DeviceGetName(info->name, (int)sizeof info->name, dev), "cuDeviceGetName");
    int arch = 0, sms = 0, version = 0;
    size_t mem = 0;
    if ((st = device_arch(dev, &arch)) != PIT_SUCCESS) return st;
    if ((st = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms)) != PIT_SUCCESS) return st;
    CU_CHECK(pit_cu.DeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
    CU_CHECK(pit_cu.DriverGetVersion(&version), "cuDriverGetVersion");
    snprintf(info->arch, sizeof info->arch, "sm_%d", arch);
    snprintf(info->driver_version, sizeof info->driver_version, "CUDA %d.%d", version / 1000,
             (version % 1000) / 10);
    info->global_mem_bytes = mem;
    info->compute_units = sms;
    info->device_index = index;
    info->has_f16 = arch >= 53;
    info->has_bf16 = arch >= 70; /* below sm_80 through f32 arithmetic */
    snprintf(info->tiledb_family, sizeof info->tiledb_family, "%s",
             arch >= 90 ? "nvidia-sm90" : arch >= 80 ? "nvidia-sm80" : "nvidia-sm70");
    info->dlpack_device_type = PIT_DLPACK_CUDA;
    return PIT_SUCCESS;
}

pit_status pit_cuda_push(pit_cuda_ctx *c)
{
    CU_CHECK(pit_cu.CtxPushCurrent(c->ctx), "cuCtxPushCurrent");
    return PIT_SUCCESS;
}

void pit_cuda_pop(void)
{
    CUcontext dummy;
    pit_cu.CtxPopCurrent(&dummy);
}

static void cuda_context_destroy(void *bctx)
{
    pit_cuda_ctx *c = bctx;
    if (!c) return;
    if (pit_cuda_push(c) == PIT_SUCCESS) {
        pit_cuda_blas_destroy(c);
        pit_cuda_sparse_destroy(c);
        pit_cuda_free_kernels(c);
        pit_cuda_pop();
    }
    pit_cu.DevicePrimaryCtxRelease(c->dev);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static pit_status cuda_context_create(int index, const pit_switches *switches, void **bctx)
{
    CUdevice dev;
    pit_status st = device_at(index, &dev);
    if (st != PIT_SUCCESS) return st;
    pit_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a context");
    c->index = index;
    c->dev = dev;
    c->switches = *switches;
    pthread_mutex_init(&c->lock, NULL);
    CUresult r = pit_cu.DevicePrimaryCtxRetain(&c->ctx, dev);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return pit_cu_fail(r, "cuDevicePrimaryCtxRetain", __FILE__, __LINE__);
    }
    if ((st = device_arch(dev, &c->arch)) == PIT_SUCCESS &&
        (st = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &c->sm_count)) == PIT_SUCCESS)
        st = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &c->smem_optin);
    if (st != PIT_SUCCESS) {
        cuda_context_destroy(c);
        return st;
    }
    /* Once, here: a pool attribute set inside a call would invalidate a
     * CUDA-graph capture of that call. */
    pit_cuda_keep_pool_memory(c);
    *bctx = c;
    return PIT_SUCCESS;
}

/* ---- streams ------------------------------------------------------------- */
static pit_status cuda_stream_create(void *bctx, void **stream)
{
    pit_cuda_ctx *c = bctx;
    pit_cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a stream");
    pit_status st = pit_cuda_push(c);
    if (st == PIT_SUCCESS) {
        CUresult r = pit_cu.StreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
        pit_cuda_pop();
        if (r != CUDA_SUCCESS) st = pit_cu_fail(r, "cuStreamCreate", __FILE__, __LINE__);
    }
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    s->owned = 1;
    *stream = s;
    return PIT_SUCCESS;
}

static pit_status cuda_stream_wrap(void *bctx, void *native, void **stream)
{
    (void)bctx;
    pit_cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a stream");
    s->s = (CUstream)native;
    *stream = s;
    return PIT_SUCCESS;
}

static void cuda_stream_destroy(void *bctx, void *stream)
{
    pit_cuda_stream *s = stream;
    if (!s) return;
    if (s->owned && pit_cuda_push(bctx) == PIT_SUCCESS) {
        pit_cu.StreamDestroy(s->s);
        pit_cuda_pop();
    }
    free(s);
}

static pit_status cuda_stream_synchronize(void *bctx, void *stream)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.StreamSynchronize(((pit_cuda_stream *)stream)->s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, "cuStreamSynchronize", __FILE__, __LINE__);
    return PIT_SUCCESS;
}

/* ---- memory -------------------------------------------------------------- */
static pit_status cuda_mem_alloc(void *bctx, size_t bytes, void **mem)
{
    if (pit_cuda_host->inject_alloc_failure && pit_cuda_host->inject_alloc_failure())
        return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuMemAlloc(%zu bytes) failed: injected failure (PIT_FAULT_ALLOC)",
                                    bytes);
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUdeviceptr p = 0;
    CUresult r = pit_cu.MemAlloc(&p, bytes ? bytes : 4); /* empty tensors still get a handle */
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", bytes);
        return pit_cu_fail(r, what, __FILE__, __LINE__);
    }
    *mem = (void *)(uintptr_t)p;
    return PIT_SUCCESS;
}

static void cuda_mem_free(void *bctx, void *mem)
{
    if (!mem || pit_cuda_push(bctx) != PIT_SUCCESS) return;
    pit_cu.MemFree((CUdeviceptr)(uintptr_t)mem);
    pit_cuda_pop();
}

static CUdeviceptr dptr(const void *mem, size_t offset)
{
    return (CUdeviceptr)(uintptr_t)mem + offset;
}

static pit_status cuda_mem_write(void *bctx, void *stream, void *mem, size_t offset, const void *host,
                                 size_t bytes)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUstream s = ((pit_cuda_stream *)stream)->s;
    CUresult r = bytes ? pit_cu.MemcpyHtoDAsync(dptr(mem, offset), host, bytes, s) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = pit_cu.StreamSynchronize(s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, "cuMemcpyHtoDAsync", __FILE__, __LINE__);
    return PIT_SUCCESS;
}

static pit_status cuda_mem_read(void *bctx, void *stream, const void *mem, size_t offset, void *host,
                                size_t bytes)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUstream s = ((pit_cuda_stream *)stream)->s;
    CUresult r = bytes ? pit_cu.MemcpyDtoHAsync(host, dptr(mem, offset), bytes, s) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = pit_cu.StreamSynchronize(s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, "cuMemcpyDtoHAsync", __FILE__, __LINE__);
    return PIT_SUCCESS;
}

static pit_status cuda_mem_fill32(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern,
                                  size_t bytes)
{
    if (bytes % 4 || offset % 4)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda: fill32 of %zu bytes at offset %zu: not 4-byte units",
                                    bytes, offset);
    if (bytes == 0) return PIT_SUCCESS;
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.MemsetD32Async(dptr(mem, offset), pattern, bytes / 4, ((pit_cuda_stream *)stream)->s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, "cuMemsetD32Async", __FILE__, __LINE__);
    return PIT_SUCCESS;
}

/* ---- events -------------------------------------------------------------- */
static pit_status cuda_event_record(void *bctx, void *stream, pit_event **event)
{
    pit_event *e = calloc(1, sizeof *e);
    if (!e) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for an event");
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) {
        free(e);
        return st;
    }
    CUresult r = pit_cu.EventCreate(&e->e, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) {
        r = pit_cu.EventRecord(e->e, ((pit_cuda_stream *)stream)->s);
        if (r != CUDA_SUCCESS) pit_cu.EventDestroy(e->e);
    }
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) {
        free(e);
        return pit_cu_fail(r, "cuEventRecord", __FILE__, __LINE__);
    }
    *event = e;
    return PIT_SUCCESS;
}

static pit_status cuda_event_elapsed_ms(void *bctx, pit_event *start, pit_event *end, double *ms)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    float f = 0.f;
    CUresult r = pit_cu.EventSynchronize(end->e);
    if (r == CUDA_SUCCESS) r = pit_cu.EventElapsedTime(&f, start->e, end->e);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, "cuEventElapsedTime", __FILE__, __LINE__);
    *ms = f;
    return PIT_SUCCESS;
}

static void cuda_event_destroy(void *bctx, pit_event *event)
{
    if (!event) return;
    if (pit_cuda_push(bctx) == PIT_SUCCESS) {
        pit_cu.EventDestroy(event->e);
        pit_cuda_pop();
    }
    free(event);
}

static const char *cuda_dense_name(void *bctx)
{
    (void)bctx;
    return "cuBLAS";
}

/* not const: pit_cuda_register_ops fills the operator entries */
static pit_backend cuda_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "cuda",
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .context_create = cuda_context_create,
    .context_destroy = cuda_context_destroy,
    .stream_create = cuda_stream_create,
    .stream_wrap = cuda_stream_wrap,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_write = cuda_mem_write,
    .mem_read = cuda_mem_read,
    .mem_fill32 = cuda_mem_fill32,
    .mem_is_pointer = 1,
    .event_record = cuda_event_record,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .event_destroy = cuda_event_destroy,
    .detect = pit_cuda_detect,
    .matmul_sparse = pit_cuda_matmul_sparse,
    .matmul_dense = pit_cuda_matmul_dense,
    .dense_name = cuda_dense_name,
    .mem_copy = pit_cuda_mem_copy,
    .vendor_sparse_matmul = pit_cuda_vendor_sparse_matmul,
    .vendor_convert = pit_cuda_vendor_convert,
    .vendor_sparse_name = pit_cuda_vendor_sparse_name,
};

PIT_API const pit_backend *pit_backend_register(const pit_host *host)
{
    if (!host || host->abi_version != PIT_BACKEND_ABI_VERSION) return NULL;
    pit_cuda_host = host;
    pit_cuda_register_ops(&cuda_backend);
    return &cuda_backend;
}
