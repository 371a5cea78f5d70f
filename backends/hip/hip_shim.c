/*
 * hip_shim.c - the HIP meaning of the CUDA names that backends/cuda/cuda_ops.c
 * and cuda_baseline.h use (see hip_shim.h): stream-ordered memory calls,
 * events, failed-call messages and a host whose errors say "hip".
 */
#include "hip_shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- memory calls ---------------------------------------------------------- */
static CUresult memset_d32(CUdeviceptr p, unsigned int value, size_t count, CUstream s)
{
    return pit_hip.MemsetD32Async((hipDeviceptr_t)(uintptr_t)p, (int)value, count, s);
}

/* Scratch memory is taken with hipMalloc: stream-ordered allocation needs
 * memory-pool support that not every ROCm device has. */
static CUresult mem_alloc(CUdeviceptr *p, size_t bytes, CUstream s)
{
    void *mem = NULL;
    (void)s;
    hipError_t r = pit_hip.Malloc(&mem, bytes);
    *p = (CUdeviceptr)(uintptr_t)mem;
    return r;
}

/* ... and freed once the stream's earlier work (which uses it) is done. */
static CUresult mem_free(CUdeviceptr p, CUstream s)
{
    hipError_t r = pit_hip.StreamSynchronize(s);
    hipError_t f = pit_hip.Free((void *)(uintptr_t)p);
    return r != hipSuccess ? r : f;
}

static CUresult no_pool(CUmemoryPool *pool, int dev)
{
    (void)dev;
    *pool = NULL;
    return hipErrorNotSupported;
}

static CUresult no_pool_attribute(CUmemoryPool pool, int attr, void *value)
{
    (void)pool, (void)attr, (void)value;
    return hipErrorNotSupported;
}

/* ---- events (pit_hip's entries are resolved at load time, hence these) ---- */
static CUresult event_create(CUevent *e, unsigned int flags)
{
    (void)flags; /* CU_EVENT_DEFAULT */
    return pit_hip.EventCreate(e);
}

static CUresult event_record(CUevent e, CUstream s)
{
    return pit_hip.EventRecord(e, s);
}

static CUresult event_synchronize(CUevent e)
{
    return pit_hip.EventSynchronize(e);
}

static CUresult event_elapsed(float *ms, CUevent from, CUevent to)
{
    return pit_hip.EventElapsedTime(ms, from, to);
}

static CUresult event_destroy(CUevent e)
{
    return pit_hip.EventDestroy(e);
}

const pit_hip_cu_api pit_cu = {memset_d32,   mem_alloc,    mem_free,          no_pool,       no_pool_attribute,
                               event_create, event_record, event_synchronize, event_elapsed, event_destroy};

/* ---- messages ------------------------------------------------------------------ */
static const char *const call_names[][2] = {
    {"cuLaunchKernel", "hipModuleLaunchKernel"}, {"cuMemAllocAsync", "hipMalloc"},
    {"cuMemFreeAsync", "hipFree"},               {"cuMemsetD32Async", "hipMemsetD32Async"},
    {"cuEventCreate", "hipEventCreate"},         {"cuEventRecord", "hipEventRecord"},
    {"cuEventSynchronize", "hipEventSynchronize"}, {"cuEventElapsedTime", "hipEventElapsedTime"},
};

/* what with a CUDA call name at its start replaced by the HIP call made */
const char *pit_hip_call_name(const char *what, char *buf, size_t size)
{
    for (size_t i = 0; i < sizeof call_names / sizeof call_names[0]; ++i) {
        size_t n = strlen(call_names[i][0]);
        if (!strncmp(what, call_names[i][0], n)) {
            snprintf(buf, size, "%s%s", call_names[i][1], what + n);
            return buf;
        }
    }
    return what;
}

pit_status pit_cu_fail(CUresult r, const char *what, const char *file, int line)
{
    char buf[256];
    return pit_hip_fail(r, pit_hip_call_name(what, buf, sizeof buf), file, line);
}

/* cuda_ops.c's messages start with "cuda" ("cuda matmul: ..."): say "hip". */
static pit_status shim_error(pit_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!strncmp(msg, "cuda", 4)) return pit_hip_host->error(st, "hip%s", msg + 4);
    return pit_hip_host->error(st, "%s", msg);
}

static pit_host shim_host;
const pit_host *const pit_cuda_host = &shim_host;

void pit_hip_shim_init(const pit_host *host)
{
    shim_host = *host;
    shim_host.error = shim_error;
}
