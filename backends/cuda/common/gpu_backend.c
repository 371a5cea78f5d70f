/*
 * gpu_backend.c - the pit_backend table of the CUDA and HIP plug-ins, one
 * source compiled by each (the HIP plug-in through hip_shim.h): runtime
 * loading, devices, contexts, streams, memory and events over the driver
 * table pit_cu. What differs between the vendors (contexts, device names
 * and architectures, the dense GEMM) is the pit_vendor_* functions of
 * gpu_internal.h; the operations are in ops/, one file per operator family.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_model.h"

static int initialised;

static pit_status gpu_init(const pit_host *host)
{
    pit_cuda_host = host;
    if (initialised) return PIT_SUCCESS;
    pit_status st = pit_vendor_load();
    if (st == PIT_SUCCESS) initialised = 1;
    return st;
}

static void gpu_shutdown(void)
{
    if (initialised) pit_vendor_unload();
    initialised = 0;
}

static pit_status gpu_device_count(int *count)
{
    *count = 0;
    if (!initialised)
        return pit_cuda_host->error(PIT_ERR_NO_DEVICE,
                                    PIT_VENDOR_NAME ": the backend is not initialised (no driver or runtime loaded)");
    CU_CHECK(pit_cu.DeviceGetCount(count), PIT_CALL(DeviceGetCount));
    return PIT_SUCCESS;
}

static pit_status device_at(int index, CUdevice *dev)
{
    int count = 0;
    pit_status st = gpu_device_count(&count);
    if (st != PIT_SUCCESS) return st;
    if (index < 0 || index >= count)
        return pit_cuda_host->error(PIT_ERR_DEVICE_INDEX, PIT_VENDOR_NAME ": device %d requested, %d present", index,
                                    count);
    CU_CHECK(pit_cu.DeviceGet(dev, index), PIT_CALL(DeviceGet));
    return PIT_SUCCESS;
}

pit_status pit_gpu_attribute(CUdevice dev, CUdevice_attribute a, int *value)
{
    CU_CHECK(pit_cu.DeviceGetAttribute(value, a, dev), PIT_CALL(DeviceGetAttribute));
    return PIT_SUCCESS;
}

static pit_status gpu_device_info(int index, pit_device_info *info)
{
    CUdevice dev;
    pit_status st = device_at(index, &dev);
    if (st != PIT_SUCCESS) return st;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, PIT_VENDOR_NAME);
    CU_CHECK(pit_cu.DeviceGetName(info->name, (int)sizeof info->name, dev), PIT_CALL(DeviceGetName));
    size_t mem = 0;
    CU_CHECK(pit_cu.DeviceTotalMem(&mem, dev), PIT_CALL(DeviceTotalMem));
    st = pit_gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->compute_units);
    if (st != PIT_SUCCESS) return st;
    info->global_mem_bytes = mem;
    info->device_index = index;
    return pit_vendor_describe(dev, info);
}

static void gpu_context_destroy(void *bctx)
{
    pit_cuda_ctx *c = bctx;
    if (!c) return;
    if (pit_cuda_push(c) == PIT_SUCCESS) {
        pit_cuda_blas_destroy(c);
        pit_cuda_sparse_destroy(c);
        pit_cuda_free_kernels(c);
        pit_cuda_pop();
    }
    pit_vendor_context_close(c);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static pit_status gpu_context_create(int index, const pit_switches *switches, void **bctx)
{
    CUdevice dev;
    pit_status st = device_at(index, &dev);
    if (st != PIT_SUCCESS) return st;
    pit_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME ": out of host memory for a context");
    c->index = index;
    c->dev = dev;
    c->switches = *switches;
    pthread_mutex_init(&c->lock, NULL);
    if ((st = pit_gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &c->sm_count)) == PIT_SUCCESS &&
        (st = pit_gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &c->smem_optin)) ==
            PIT_SUCCESS)
        st = pit_vendor_context_open(c);
    if (st != PIT_SUCCESS) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return st;
    }
    *bctx = c;
    return PIT_SUCCESS;
}

/* ---- streams ------------------------------------------------------------- */
static CUstream stream_of(void *stream)
{
    return ((pit_cuda_stream *)stream)->s;
}

static pit_status gpu_stream_create(void *bctx, void **stream)
{
    pit_cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME ": out of host memory for a stream");
    pit_status st = pit_cuda_push(bctx);
    if (st == PIT_SUCCESS) {
        CUresult r = pit_cu.StreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
        pit_cuda_pop();
        if (r != CUDA_SUCCESS) st = pit_cu_fail(r, PIT_CALL(StreamCreate), __FILE__, __LINE__);
    }
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    s->owned = 1;
    *stream = s;
    return PIT_SUCCESS;
}

static pit_status gpu_stream_wrap(void *bctx, void *native, void **stream)
{
    (void)bctx;
    pit_cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME ": out of host memory for a stream");
    s->s = (CUstream)native;
    *stream = s;
    return PIT_SUCCESS;
}

static void gpu_stream_destroy(void *bctx, void *stream)
{
    pit_cuda_stream *s = stream;
    if (!s) return;
    if (s->owned && pit_cuda_push(bctx) == PIT_SUCCESS) {
        pit_cu.StreamDestroy(s->s);
        pit_cuda_pop();
    }
    free(s);
}

static pit_status gpu_stream_synchronize(void *bctx, void *stream)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.StreamSynchronize(stream_of(stream));
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(StreamSynchronize), __FILE__, __LINE__);
    return PIT_SUCCESS;
}

/* ---- memory: handles are device pointers ----------------------------------- */
static pit_status gpu_mem_alloc(void *bctx, size_t bytes, void **mem)
{
    if (pit_cuda_host->inject_alloc_failure && pit_cuda_host->inject_alloc_failure())
        return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY,
                                    PIT_CALL(MemAlloc) "(%zu bytes) failed: injected failure (PIT_FAULT_ALLOC)", bytes);
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUdeviceptr p = 0;
    CUresult r = pit_cu.MemAlloc(&p, bytes ? bytes : 4); /* empty tensors still get a handle */
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, PIT_CALL(MemAlloc) "(%zu bytes)", bytes);
        return pit_cu_fail(r, what, __FILE__, __LINE__);
    }
    *mem = (void *)(uintptr_t)p;
    return PIT_SUCCESS;
}

static void gpu_mem_free(void *bctx, void *mem)
{
    if (!mem || pit_cuda_push(bctx) != PIT_SUCCESS) return;
    pit_cu.MemFree((CUdeviceptr)(uintptr_t)mem);
    pit_cuda_pop();
}

static pit_status gpu_set_scratch_allocator(void *bctx, const pit_scratch_allocator *a)
{
    pit_cuda_ctx *c = bctx;
    static const pit_scratch_allocator own;
    c->scratch = a ? *a : own; /* scratch lives within one call: nothing cached to hand back */
    return PIT_SUCCESS;
}

static CUdeviceptr dptr(const void *mem, size_t offset)
{
    return (CUdeviceptr)(uintptr_t)mem + offset;
}

static pit_status gpu_mem_write(void *bctx, void *stream, void *mem, size_t offset, const void *host,
                                size_t bytes)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUstream s = stream_of(stream);
    CUresult r = bytes ? pit_cu.MemcpyHtoDAsync(dptr(mem, offset), host, bytes, s) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = pit_cu.StreamSynchronize(s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(MemcpyHtoDAsync), __FILE__, __LINE__);
    return PIT_SUCCESS;
}

static pit_status gpu_mem_read(void *bctx, void *stream, const void *mem, size_t offset, void *host,
                               size_t bytes)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUstream s = stream_of(stream);
    CUresult r = bytes ? pit_cu.MemcpyDtoHAsync(host, dptr(mem, offset), bytes, s) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = pit_cu.StreamSynchronize(s);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(MemcpyDtoHAsync), __FILE__, __LINE__);
    return PIT_SUCCESS;
}

static pit_status gpu_mem_fill32(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern,
                                 size_t bytes)
{
    if (bytes % 4 || offset % 4)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME ": fill32 of %zu bytes at offset %zu: not 4-byte units", bytes,
                                    offset);
    if (bytes == 0) return PIT_SUCCESS;
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.MemsetD32Async(dptr(mem, offset), pattern, bytes / 4, stream_of(stream));
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(MemsetD32Async), __FILE__, __LINE__);
    return PIT_SUCCESS;
}

/* The device-to-device copy: pit bench's bandwidth floor. */
static pit_status gpu_mem_copy(void *bctx, void *stream, void *dst, size_t dst_offset, const void *src,
                               size_t src_offset, size_t bytes)
{
    if (bytes == 0) return PIT_SUCCESS;
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.MemcpyDtoDAsync(dptr(dst, dst_offset), dptr(src, src_offset), bytes, stream_of(stream));
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(MemcpyDtoDAsync), __FILE__, __LINE__);
    return PIT_SUCCESS;
}

/* ---- memory the caller wraps ------------------------------------------------ */
/* Whether the piece of memory holding p was mapped through the virtual
 * memory API (cuMemMap): a caching allocator may map its pool piece by piece
 * (PyTorch's expandable segments), and one tensor may span pieces mapped
 * back to back, while the driver reports the range of one piece. */
static int mapped_piece(CUdeviceptr p)
{
    CUmemGenericAllocationHandle h;
    if (pit_cu.MemRetainAllocationHandle(&h, (void *)(uintptr_t)p) != CUDA_SUCCESS) return 0;
    pit_cu.MemRelease(h);
    return 1;
}

/* The end of the buffer holding p: its allocation's end, extended over
 * mapped pieces that follow a mapped piece back to back until need bytes
 * from p are covered. Separate allocations never join: a view running from
 * one into the next is refused. */
static CUdeviceptr buffer_end(CUdeviceptr p, CUdeviceptr base, size_t size, size_t need)
{
    CUdeviceptr end = base + size, next = 0;
    size_t next_size = 0;
    while (end - p < need && mapped_piece(end - 1) &&
           pit_cu.MemGetAddressRange(&next, &next_size, end) == CUDA_SUCCESS && next == end && next_size > 0 &&
           mapped_piece(end))
        end += next_size;
    return end;
}

/* The device whose memory p is, or -1 where that does not bind it: managed
 * memory (it migrates), or a driver that does not say. One driver call for
 * both attributes, made only for memory whose address range the driver
 * found: the plural call does not fail for a pointer it does not know (it
 * writes defaults, on HIP the ordinal -2), so it tests nothing itself. */
static int device_of(CUdeviceptr p)
{
    unsigned int managed = 0; /* a boolean the driver may write as one byte */
    int ordinal = -1;
    CUpointer_attribute asked[2] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *into[2] = {&managed, &ordinal};
    if (pit_cu.PointerGetAttributes(2, asked, into, p) != CUDA_SUCCESS || managed) return -1;
    return ordinal;
}

/* A device pointer the caller wraps: memory the driver allocated (not host
 * memory), of this context's device where the driver says whose it is. */
static pit_status gpu_mem_query(void *bctx, const void *mem, size_t need, size_t *bytes)
{
    pit_cuda_ctx *c = bctx;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)mem, base = 0, end = 0;
    size_t size = 0;
    int ordinal = -1;
    pit_status st = pit_cuda_push(c);
    if (st != PIT_SUCCESS) return st;
    CUresult r = pit_cu.MemGetAddressRange(&base, &size, p);
    if (r == CUDA_SUCCESS) {
        end = buffer_end(p, base, size, need);
        ordinal = device_of(p);
    }
    pit_cuda_pop();
    if (r != CUDA_SUCCESS)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME ": data %p is no device memory the driver knows (%s returned %d)",
                                    mem, PIT_CALL(MemGetAddressRange), (int)r);
    if (ordinal >= 0 && ordinal != c->index)
        return pit_cuda_host->error(PIT_ERR_CONTEXT_MISMATCH,
                                    PIT_VENDOR_NAME ": data %p is memory of device %d; this context is on device %d",
                                    mem, ordinal, c->index);
    *bytes = (size_t)(end - p);
    return PIT_SUCCESS;
}

/* ---- events -------------------------------------------------------------- */
static pit_status gpu_event_record(void *bctx, void *stream, pit_event **event)
{
    pit_event *e = calloc(1, sizeof *e);
    if (!e) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME ": out of host memory for an event");
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) {
        free(e);
        return st;
    }
    CUresult r = pit_cu.EventCreate(&e->e, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) {
        r = pit_cu.EventRecord(e->e, stream_of(stream));
        if (r != CUDA_SUCCESS) pit_cu.EventDestroy(e->e);
    }
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) {
        free(e);
        return pit_cu_fail(r, PIT_CALL(EventRecord), __FILE__, __LINE__);
    }
    *event = e;
    return PIT_SUCCESS;
}

static pit_status gpu_event_elapsed_ms(void *bctx, pit_event *start, pit_event *end, double *ms)
{
    pit_status st = pit_cuda_push(bctx);
    if (st != PIT_SUCCESS) return st;
    float f = 0.f;
    CUresult r = pit_cu.EventSynchronize(end->e);
    if (r == CUDA_SUCCESS) r = pit_cu.EventElapsedTime(&f, start->e, end->e);
    pit_cuda_pop();
    if (r != CUDA_SUCCESS) return pit_cu_fail(r, PIT_CALL(EventElapsedTime), __FILE__, __LINE__);
    *ms = f;
    return PIT_SUCCESS;
}

static void gpu_event_destroy(void *bctx, pit_event *event)
{
    if (!event) return;
    if (pit_cuda_push(bctx) == PIT_SUCCESS) {
        pit_cu.EventDestroy(event->e);
        pit_cuda_pop();
    }
    free(event);
}

/* not const: the vendor's dense GEMM and pit_cuda_register_ops (the model
 * operators) fill in their entries */
static pit_backend gpu_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = PIT_VENDOR_NAME,
    .init = gpu_init,
    .shutdown = gpu_shutdown,
    .device_count = gpu_device_count,
    .device_info = gpu_device_info,
    .context_create = gpu_context_create,
    .context_destroy = gpu_context_destroy,
    .stream_create = gpu_stream_create,
    .stream_wrap = gpu_stream_wrap,
    .stream_destroy = gpu_stream_destroy,
    .stream_synchronize = gpu_stream_synchronize,
    .mem_alloc = gpu_mem_alloc,
    .mem_free = gpu_mem_free,
    .mem_write = gpu_mem_write,
    .mem_read = gpu_mem_read,
    .mem_fill32 = gpu_mem_fill32,
    .mem_is_pointer = 1,
    .mem_query = gpu_mem_query,
    .event_record = gpu_event_record,
    .event_elapsed_ms = gpu_event_elapsed_ms,
    .event_destroy = gpu_event_destroy,
    .detect = pit_cuda_detect,
    .matmul_sparse = pit_cuda_matmul_sparse,
    .matmul_detects_inside = pit_cuda_matmul_detects_inside,
    .mem_copy = gpu_mem_copy,
    .vendor_sparse_matmul = pit_cuda_vendor_sparse_matmul,
    .vendor_convert = pit_cuda_vendor_convert,
    .vendor_sparse_name = pit_cuda_vendor_sparse_name,
    .set_scratch_allocator = gpu_set_scratch_allocator,
};

PIT_API const pit_backend *pit_backend_register(const pit_host *host)
{
    if (!host || host->abi_version != PIT_BACKEND_ABI_VERSION) return NULL;
    pit_cuda_host = host;
    pit_vendor_dense_entries(&gpu_backend);
    pit_cuda_register_ops(&gpu_backend);
    return &gpu_backend;
}
