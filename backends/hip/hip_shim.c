/*
 * hip_shim.c - the driver table pit_cu of the shared host code (see
 * hip_shim.h) over the HIP runtime: set at load, each entry the HIP call of
 * the same meaning, or a small function where the APIs differ (device
 * pointers as integers, no memory pools, events without flags).
 */
#include "hip_shim.h"

#include <string.h>

pit_cu_api pit_cu;

static hipDeviceptr_t ptr(CUdeviceptr p)
{
    return (hipDeviceptr_t)(uintptr_t)p;
}

static CUresult device_get(CUdevice *dev, int index)
{
    *dev = index;
    return hipSuccess;
}

/* ---- memory ------------------------------------------------------------------ */
static CUresult mem_alloc(CUdeviceptr *p, size_t bytes)
{
    void *mem = NULL;
    hipError_t r = pit_hip.Malloc(&mem, bytes);
    *p = (CUdeviceptr)(uintptr_t)mem;
    return r;
}

static CUresult mem_free(CUdeviceptr p)
{
    return pit_hip.Free(ptr(p));
}

/* Scratch memory is taken with hipMalloc: stream-ordered allocation needs
 * memory-pool support that not every ROCm device has. */
static CUresult scratch_alloc(CUdeviceptr *p, size_t bytes, CUstream s)
{
    (void)s;
    return mem_alloc(p, bytes);
}

/* ... and freed once the stream's earlier work (which uses it) is done. */
static CUresult scratch_free(CUdeviceptr p, CUstream s)
{
    hipError_t r = pit_hip.StreamSynchronize(s);
    hipError_t f = pit_hip.Free(ptr(p));
    return r != hipSuccess ? r : f;
}

static CUresult no_pool(CUmemoryPool *pool, CUdevice dev)
{
    (void)dev;
    *pool = NULL;
    return hipErrorNotSupported;
}

static CUresult no_pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    (void)pool, (void)attr, (void)value;
    return hipErrorNotSupported;
}

static CUresult copy_to_device(CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
{
    return pit_hip.MemcpyHtoDAsync(ptr(dst), (void *)(uintptr_t)src, bytes, s);
}

static CUresult copy_to_host(void *dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    return pit_hip.MemcpyDtoHAsync(dst, ptr(src), bytes, s);
}

static CUresult copy_on_device(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    return pit_hip.MemcpyDtoDAsync(ptr(dst), ptr(src), bytes, s);
}

static CUresult fill32(CUdeviceptr p, unsigned int value, size_t count, CUstream s)
{
    return pit_hip.MemsetD32Async(ptr(p), (int)value, count, s);
}

static CUresult copy_to_host_now(void *dst, CUdeviceptr src, size_t bytes)
{
    return pit_hip.MemcpyDtoH(dst, ptr(src), bytes);
}

static CUresult address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    hipDeviceptr_t b = NULL;
    hipError_t r = pit_hip.MemGetAddressRange(&b, size, ptr(p));
    *base = (CUdeviceptr)(uintptr_t)b;
    return r;
}

static CUresult pointer_attributes(unsigned int count, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    return pit_hip.DrvPointerGetAttributes(count, attrs, data, ptr(p));
}

/* ---- events and modules -------------------------------------------------------- */
static CUresult event_create(CUevent *e, unsigned int flags)
{
    (void)flags; /* CU_EVENT_DEFAULT */
    return pit_hip.EventCreate(e);
}

static CUresult module_global(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name)
{
    hipDeviceptr_t global = NULL;
    hipError_t r = pit_hip.ModuleGetGlobal(&global, bytes, m, name);
    *p = (CUdeviceptr)(uintptr_t)global;
    return r;
}

/* LDS needs no opt-in: a kernel may use what the device has. */
static CUresult no_opt_in(CUfunction f, CUfunction_attribute attr, int value)
{
    (void)f, (void)attr, (void)value;
    return hipSuccess;
}

static void bind_driver_table(void)
{
    pit_cu = (pit_cu_api){
        .DeviceGetCount = pit_hip.GetDeviceCount,
        .DeviceGet = device_get,
        .DeviceGetName = pit_hip.DeviceGetName,
        .DeviceGetAttribute = pit_hip.DeviceGetAttribute,
        .DeviceTotalMem = pit_hip.DeviceTotalMem,
        .StreamCreate = pit_hip.StreamCreateWithFlags,
        .StreamDestroy = pit_hip.StreamDestroy,
        .StreamSynchronize = pit_hip.StreamSynchronize,
        .MemAlloc = mem_alloc,
        .MemFree = mem_free,
        .MemAllocAsync = scratch_alloc,
        .MemFreeAsync = scratch_free,
        .DeviceGetDefaultMemPool = no_pool,
        .MemPoolSetAttribute = no_pool_attribute,
        .MemcpyHtoDAsync = copy_to_device,
        .MemcpyDtoHAsync = copy_to_host,
        .MemcpyDtoDAsync = copy_on_device,
        .MemsetD32Async = fill32,
        .MemcpyDtoH = copy_to_host_now,
        .MemGetAddressRange = address_range,
        .PointerGetAttributes = pointer_attributes,
        .MemRetainAllocationHandle = pit_hip.MemRetainAllocationHandle,
        .MemRelease = pit_hip.MemRelease,
        .EventCreate = event_create,
        .EventRecord = pit_hip.EventRecord,
        .EventSynchronize = pit_hip.EventSynchronize,
        .EventElapsedTime = pit_hip.EventElapsedTime,
        .EventDestroy = pit_hip.EventDestroy,
        .ModuleLoadData = pit_hip.ModuleLoadData,
        .ModuleUnload = pit_hip.ModuleUnload,
        .ModuleGetFunction = pit_hip.ModuleGetFunction,
        .ModuleGetGlobal = module_global,
        .FuncSetAttribute = no_opt_in,
        .LaunchKernel = pit_hip.ModuleLaunchKernel,
    };
}

pit_status pit_vendor_load(void)
{
    pit_status st = pit_hip_load();
    if (st == PIT_SUCCESS) bind_driver_table();
    return st;
}

void pit_vendor_unload(void)
{
    pit_hip_unload();
    memset(&pit_cu, 0, sizeof pit_cu);
}
