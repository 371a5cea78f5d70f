/*
 * hip_backend.c - the HIP plug-in's pit_backend table: runtime loading,
 * devices, contexts, streams, memory and events. The PIT operations are
 * the CUDA backend's host code (backends/cuda/cuda_ops.c through
 * hip_shim.h), the kernels hip_kernels.c, the dense GEMM hip_dense.c,
 * the rocSPARSE baseline hip_sparse.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_model.h"
#include "hip_internal.h"

static int initialised;

static pit_status hip_init(const pit_host *host)
{
    pit_hip_host = host;
    pit_hip_shim_init(host);
    if (initialised) return PIT_SUCCESS;
    pit_status st = pit_hip_load();
    if (st == PIT_SUCCESS) initialised = 1;
    return st;
}

static void hip_shutdown(void)
{
    if (initialised) pit_hip_unload();
    initialised = 0;
}

static pit_status hip_device_count(int *count)
{
    *count = 0;
    if (!initialised)
        return pit_hip_host->error(PIT_ERR_NO_DEVICE, "hip: the backend is not initialised (no HIP runtime)");
    HIP_CHECK(pit_hip.GetDeviceCount(count), "hipGetDeviceCount");
    return PIT_SUCCESS;
}

static pit_status check_index(int index)
{
    int count = 0;
    pit_status st = hip_device_count(&count);
    if (st != PIT_SUCCESS) return st;
    if (index < 0 || index >= count)
        return pit_hip_host->error(PIT_ERR_DEVICE_INDEX, "hip: device %d requested, %d present", index, count);
    return PIT_SUCCESS;
}

static pit_status attribute(int index, hipDeviceAttribute_t a, int *value)
{
    HIP_CHECK(pit_hip.DeviceGetAttribute(value, a, index), "hipDeviceGetAttribute");
    return PIT_SUCCESS;
}

/* "gfx90a" from gcnArchName "gfx90a:sramecc+:xnack-". The properties
 * struct is read through a larger buffer: the runtime may fill a newer,
 * longer layout than the header this plug-in was built with. */
static pit_status device_gfx(int index, char *gfx, size_t size)
{
    union {
        hipDeviceProp_t p;
        char pad[8192];
    } *props = calloc(1, sizeof *props);
    if (!props) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory");
    hipError_t r = pit_hip.GetDeviceProperties(&props->p, index);
    if (r != hipSuccess) {
        free(props);
        return pit_hip_fail(r, "hipGetDeviceProperties", __FILE__, __LINE__);
    }
    char *name = props->p.gcnArchName;
    name[sizeof props->p.gcnArchName - 1] = 0;
    size_t n = strcspn(name, ":");
    int ok = !strncmp(name, "gfx", 3) && n < size;
    if (ok) snprintf(gfx, size, "%.*s", (int)n, name);
    free(props);
    if (!ok) return pit_hip_host->error(PIT_ERR_BACKEND, "hip: device %d reports no gfx architecture name", index);
    return PIT_SUCCESS;
}

static void runtime_version(char *buf, size_t size)
{
    int v = 0;
    if (pit_hip.RuntimeGetVersion(&v) != hipSuccess) v = 0;
    /* HIP encodes major * 10000000 + minor * 100000 + patch */
    snprintf(buf, size, "HIP %d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

static pit_status hip_device_info(int index, pit_device_info *info)
{
    pit_status st = check_index(index);
    if (st != PIT_SUCCESS) return st;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "hip");
    snprintf(info->vendor, sizeof info->vendor, "AMD");
    HIP_CHECK(pit_hip.DeviceGetName(info->name, (int)sizeof info->name, index), "hipDeviceGetName");
    if ((st = device_gfx(index, info->arch, sizeof info->arch)) != PIT_SUCCESS) return st;
    size_t mem = 0;
    HIP_CHECK(pit_hip.DeviceTotalMem(&mem, index), "hipDeviceTotalMem");
    if ((st = attribute(index, hipDeviceAttributeMultiprocessorCount, &info->compute_units)) != PIT_SUCCESS) return st;
    runtime_version(info->driver_version, sizeof info->driver_version);
    info->global_mem_bytes = mem;
    info->device_index = index;
    info->has_f16 = 1;
    info->has_bf16 = 1;
    /* CDNA (gfx9) and RDNA (gfx10, gfx11, gfx12) have a tile database each */
    snprintf(info->tiledb_family, sizeof info->tiledb_family, "%s",
             strncmp(info->arch, "gfx9", 4) == 0 ? "amd-gfx9" : strncmp(info->arch, "gfx1", 4) == 0 ? "amd-gfx11" : "");
    info->dlpack_device_type = PIT_DLPACK_ROCM;
    return PIT_SUCCESS;
}

pit_status pit_hip_push(pit_hip_ctx *c)
{
    HIP_CHECK(pit_hip.SetDevice(c->index), "hipSetDevice");
    return PIT_SUCCESS;
}

void pit_hip_pop(void)
{
}

static void hip_context_destroy(void *bctx)
{
    pit_hip_ctx *c = bctx;
    if (!c) return;
    if (pit_hip_push(c) == PIT_SUCCESS) {
        pit_hip_blas_destroy(c);
        pit_hip_sparse_destroy(c);
        pit_hip_free_kernels(c);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The kernels' matrix step uses matrix cores on CDNA2/3 (MFMA) and RDNA3
 * (WMMA); elsewhere it is FMAs, and CUDA-core-style tiles are better. */
static int has_matrix_cores(const char *gfx)
{
    return !strcmp(gfx, "gfx90a") || !strncmp(gfx, "gfx94", 5) || !strncmp(gfx, "gfx110", 6);
}

/* The code objects assume the arch's default wavefront (64 on gfx9, 32 on
 * gfx10+); a device running another width would break every warp step. */
static pit_status check_wave(const pit_hip_ctx *c)
{
    int expected = !strncmp(c->gfx, "gfx9", 4) ? 64 : 32;
    if (c->wave != expected)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "hip: %s reports a wavefront of %d lanes; pit's kernels are built for %d",
                                   c->gfx, c->wave, expected);
    return PIT_SUCCESS;
}

static pit_status hip_context_create(int index, const pit_switches *switches, void **bctx)
{
    pit_status st = check_index(index);
    if (st != PIT_SUCCESS) return st;
    pit_hip_ctx *c = calloc(1, sizeof *c);
    if (!c) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a context");
    c->index = index;
    c->dev = index;
    c->switches = *switches;
    pthread_mutex_init(&c->lock, NULL);
    if ((st = device_gfx(index, c->gfx, sizeof c->gfx)) == PIT_SUCCESS &&
        (st = attribute(index, hipDeviceAttributeWarpSize, &c->wave)) == PIT_SUCCESS &&
        (st = attribute(index, hipDeviceAttributeMultiprocessorCount, &c->sm_count)) == PIT_SUCCESS &&
        (st = attribute(index, hipDeviceAttributeMaxSharedMemoryPerBlock, &c->smem_max)) == PIT_SUCCESS)
        st = check_wave(c);
    if (st != PIT_SUCCESS) {
        hip_context_destroy(c);
        return st;
    }
    c->arch = has_matrix_cores(c->gfx) ? 80 : 0;
    pit_hip_host->log_debug("hip: device %d is %s (wave%d, %d built-in code objects, hiprtc %s, dense: %s)", index,
                            c->gfx, c->wave, pit_hip_builtin_count(c->gfx), pit_hiprtc.CreateProgram ? "yes" : "no",
                            pit_hip_dense_name(c));
    *bctx = c;
    return PIT_SUCCESS;
}

/* ---- streams ------------------------------------------------------------- */
static pit_status hip_stream_create(void *bctx, void **stream)
{
    pit_hip_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a stream");
    pit_status st = pit_hip_push(bctx);
    if (st == PIT_SUCCESS) {
        hipError_t r = pit_hip.StreamCreateWithFlags(&s->s, hipStreamNonBlocking);
        if (r != hipSuccess) st = pit_hip_fail(r, "hipStreamCreateWithFlags", __FILE__, __LINE__);
    }
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    s->owned = 1;
    *stream = s;
    return PIT_SUCCESS;
}

static pit_status hip_stream_wrap(void *bctx, void *native, void **stream)
{
    (void)bctx;
    pit_hip_stream *s = calloc(1, sizeof *s);
    if (!s) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a stream");
    s->s = (hipStream_t)native;
    *stream = s;
    return PIT_SUCCESS;
}

static void hip_stream_destroy(void *bctx, void *stream)
{
    pit_hip_stream *s = stream;
    if (!s) return;
    if (s->owned && pit_hip_push(bctx) == PIT_SUCCESS) pit_hip.StreamDestroy(s->s);
    free(s);
}

static hipStream_t stream_of(void *stream)
{
    return ((pit_hip_stream *)stream)->s;
}

static pit_status hip_stream_synchronize(void *bctx, void *stream)
{
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    HIP_CHECK(pit_hip.StreamSynchronize(stream_of(stream)), "hipStreamSynchronize");
    return PIT_SUCCESS;
}

/* ---- memory: handles are device pointers ---------------------------------- */
static pit_status hip_mem_alloc(void *bctx, size_t bytes, void **mem)
{
    if (pit_hip_host->inject_alloc_failure && pit_hip_host->inject_alloc_failure())
        return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hipMalloc(%zu bytes) failed: injected failure (PIT_FAULT_ALLOC)",
                                   bytes);
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    void *p = NULL;
    hipError_t r = pit_hip.Malloc(&p, bytes ? bytes : 4); /* empty tensors still get a handle */
    if (r != hipSuccess) {
        char what[64];
        snprintf(what, sizeof what, "hipMalloc(%zu bytes)", bytes);
        return pit_hip_fail(r, what, __FILE__, __LINE__);
    }
    *mem = p;
    return PIT_SUCCESS;
}

static void hip_mem_free(void *bctx, void *mem)
{
    if (mem && pit_hip_push(bctx) == PIT_SUCCESS) pit_hip.Free(mem);
}

static hipDeviceptr_t at(const void *mem, size_t offset)
{
    return (hipDeviceptr_t)((char *)(uintptr_t)mem + offset);
}

static pit_status hip_mem_write(void *bctx, void *stream, void *mem, size_t offset, const void *host, size_t bytes)
{
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    hipStream_t s = stream_of(stream);
    if (bytes) HIP_CHECK(pit_hip.MemcpyHtoDAsync(at(mem, offset), (void *)(uintptr_t)host, bytes, s), "hipMemcpyHtoDAsync");
    HIP_CHECK(pit_hip.StreamSynchronize(s), "hipStreamSynchronize(write)");
    return PIT_SUCCESS;
}

static pit_status hip_mem_read(void *bctx, void *stream, const void *mem, size_t offset, void *host, size_t bytes)
{
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    hipStream_t s = stream_of(stream);
    if (bytes) HIP_CHECK(pit_hip.MemcpyDtoHAsync(host, at(mem, offset), bytes, s), "hipMemcpyDtoHAsync");
    HIP_CHECK(pit_hip.StreamSynchronize(s), "hipStreamSynchronize(read)");
    return PIT_SUCCESS;
}

static pit_status hip_mem_fill32(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern, size_t bytes)
{
    if (bytes % 4 || offset % 4)
        return pit_hip_host->error(PIT_ERR_INVALID_ARGUMENT, "hip: fill32 of %zu bytes at offset %zu: not 4-byte units",
                                   bytes, offset);
    if (bytes == 0) return PIT_SUCCESS;
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    HIP_CHECK(pit_hip.MemsetD32Async(at(mem, offset), (int)pattern, bytes / 4, stream_of(stream)), "hipMemsetD32Async");
    return PIT_SUCCESS;
}

static pit_status hip_mem_copy(void *bctx, void *stream, void *dst, size_t dst_offset, const void *src,
                               size_t src_offset, size_t bytes)
{
    if (bytes == 0) return PIT_SUCCESS;
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    HIP_CHECK(pit_hip.MemcpyDtoDAsync(at(dst, dst_offset), at(src, src_offset), bytes, stream_of(stream)),
              "hipMemcpyDtoDAsync");
    return PIT_SUCCESS;
}

/* ---- events -------------------------------------------------------------- */
static pit_status hip_event_record(void *bctx, void *stream, pit_event **event)
{
    pit_event *e = calloc(1, sizeof *e);
    if (!e) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for an event");
    pit_status st = pit_hip_push(bctx);
    hipError_t r = hipSuccess;
    if (st == PIT_SUCCESS && (r = pit_hip.EventCreate(&e->e)) == hipSuccess &&
        (r = pit_hip.EventRecord(e->e, stream_of(stream))) != hipSuccess)
        pit_hip.EventDestroy(e->e);
    if (st == PIT_SUCCESS && r != hipSuccess) st = pit_hip_fail(r, "hipEventRecord", __FILE__, __LINE__);
    if (st != PIT_SUCCESS) {
        free(e);
        return st;
    }
    *event = e;
    return PIT_SUCCESS;
}

static pit_status hip_event_elapsed_ms(void *bctx, pit_event *start, pit_event *end, double *ms)
{
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    float f = 0.f;
    HIP_CHECK(pit_hip.EventSynchronize(end->e), "hipEventSynchronize");
    HIP_CHECK(pit_hip.EventElapsedTime(&f, start->e, end->e), "hipEventElapsedTime");
    *ms = f;
    return PIT_SUCCESS;
}

static void hip_event_destroy(void *bctx, pit_event *event)
{
    if (!event) return;
    if (pit_hip_push(bctx) == PIT_SUCCESS) pit_hip.EventDestroy(event->e);
    free(event);
}

/* not const: pit_cuda_register_ops (the shared model operators) fills in
 * the operator entries */
static pit_backend hip_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "hip",
    .init = hip_init,
    .shutdown = hip_shutdown,
    .device_count = hip_device_count,
    .device_info = hip_device_info,
    .context_create = hip_context_create,
    .context_destroy = hip_context_destroy,
    .stream_create = hip_stream_create,
    .stream_wrap = hip_stream_wrap,
    .stream_destroy = hip_stream_destroy,
    .stream_synchronize = hip_stream_synchronize,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .mem_write = hip_mem_write,
    .mem_read = hip_mem_read,
    .mem_fill32 = hip_mem_fill32,
    .mem_is_pointer = 1,
    .event_record = hip_event_record,
    .event_elapsed_ms = hip_event_elapsed_ms,
    .event_destroy = hip_event_destroy,
    .detect = pit_hip_detect,
    .matmul_sparse = pit_hip_matmul_sparse,
    .matmul_dense = pit_hip_matmul_dense,
    .dense_name = pit_hip_dense_name,
    .mem_copy = hip_mem_copy,
    .vendor_sparse_matmul = pit_hip_vendor_sparse_matmul,
    .vendor_convert = pit_hip_vendor_convert,
    .vendor_sparse_name = pit_hip_vendor_sparse_name,
};

PIT_API const pit_backend *pit_backend_register(const pit_host *host)
{
    if (!host || host->abi_version != PIT_BACKEND_ABI_VERSION) return NULL;
    pit_hip_host = host;
    pit_hip_shim_init(host);
    pit_cuda_register_ops(&hip_backend);
    return &hip_backend;
}
