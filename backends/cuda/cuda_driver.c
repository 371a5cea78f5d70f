/*
 * cuda_driver.c - libcuda.so.1 loaded at init with dlopen: the plug-in links
 * no driver, so it loads (and reports "no CUDA driver") where none exists.
 * Then NVRTC and cuBLAS, which every context needs (cuda_libs.h: found at
 * run time, of a CUDA no newer than the driver's); cuSPARSE only when a
 * baseline asks for it.
 */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

pit_cu_api pit_cu;
const pit_host *pit_cuda_host;
static void *driver_lib;
static int driver_cuda; /* the driver's CUDA major version (13) */

const char *pit_cuda_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

pit_status pit_cu_fail(CUresult r, const char *what, const char *file, int line)
{
    const char *name = NULL;
    if (!pit_cu.GetErrorName || pit_cu.GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_?";
    pit_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND;
    return pit_cuda_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, name,
                                pit_cuda_basename(file), line);
}

/* One entry: where in the table, and the exported (versioned) symbol. */
typedef struct symbol {
    void **slot;
    const char *name;
} symbol;

#define SYM(field, sym) {(void **)&pit_cu.field, sym}

pit_status pit_vendor_load(void)
{
    const symbol symbols[] = {
        SYM(Init, "cuInit"),
        SYM(DriverGetVersion, "cuDriverGetVersion"),
        SYM(DeviceGetCount, "cuDeviceGetCount"),
        SYM(DeviceGet, "cuDeviceGet"),
        SYM(DeviceGetName, "cuDeviceGetName"),
        SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
        SYM(DeviceTotalMem, "cuDeviceTotalMem_v2"),
        SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
        SYM(CtxPushCurrent, "cuCtxPushCurrent_v2"),
        SYM(CtxPopCurrent, "cuCtxPopCurrent_v2"),
        SYM(StreamCreate, "cuStreamCreate"),
        SYM(StreamDestroy, "cuStreamDestroy_v2"),
        SYM(StreamSynchronize, "cuStreamSynchronize"),
        SYM(MemAlloc, "cuMemAlloc_v2"),
        SYM(MemFree, "cuMemFree_v2"),
        SYM(MemAllocAsync, "cuMemAllocAsync"),
        SYM(DeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool"),
        SYM(MemPoolSetAttribute, "cuMemPoolSetAttribute"),
        SYM(MemFreeAsync, "cuMemFreeAsync"),
        SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
        SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
        SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
        SYM(MemsetD32Async, "cuMemsetD32Async"),
        SYM(EventCreate, "cuEventCreate"),
        SYM(EventRecord, "cuEventRecord"),
        SYM(EventSynchronize, "cuEventSynchronize"),
        SYM(EventElapsedTime, "cuEventElapsedTime"),
        SYM(EventDestroy, "cuEventDestroy_v2"),
        SYM(ModuleLoadData, "cuModuleLoadData"),
        SYM(ModuleUnload, "cuModuleUnload"),
        SYM(ModuleGetFunction, "cuModuleGetFunction"),
        SYM(ModuleGetGlobal, "cuModuleGetGlobal_v2"),
        SYM(MemcpyDtoH, "cuMemcpyDtoH_v2"),
        SYM(MemGetAddressRange, "cuMemGetAddressRange_v2"),
        SYM(PointerGetAttributes, "cuPointerGetAttributes"),
        SYM(MemRetainAllocationHandle, "cuMemRetainAllocationHandle"),
        SYM(MemRelease, "cuMemRelease"),
        SYM(FuncSetAttribute, "cuFuncSetAttribute"),
        SYM(LaunchKernel, "cuLaunchKernel"),
        SYM(GetErrorName, "cuGetErrorName"),
    };
    memset(&pit_cu, 0, sizeof pit_cu);
    driver_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver_lib) {
        const char *e = dlerror();
        return pit_cuda_host->error(PIT_ERR_NO_DEVICE, "no CUDA driver (libcuda.so.1: %s)",
                                    e ? e : "not found");
    }
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; ++i) {
        /* POSIX guarantees data and function pointers convert through dlsym */
        *symbols[i].slot = dlsym(driver_lib, symbols[i].name);
        if (!*symbols[i].slot) {
            pit_vendor_unload();
            return pit_cuda_host->error(PIT_ERR_NO_DEVICE,
                                        "no usable CUDA driver (libcuda.so.1 lacks %s: driver too old)",
                                        symbols[i].name);
        }
    }
    *(void **)&pit_cu.TensorMapEncodeTiled = dlsym(driver_lib, "cuTensorMapEncodeTiled");
    *(void **)&pit_cu.LaunchKernelEx = dlsym(driver_lib, "cuLaunchKernelEx");
    CUresult r = pit_cu.Init(0);
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        pit_cu.GetErrorName(r, &name);
        pit_vendor_unload();
        return pit_cuda_host->error(PIT_ERR_NO_DEVICE, "no CUDA device (cuInit failed: %d %s)", (int)r, name);
    }
    int version = 0;
    driver_cuda = pit_cu.DriverGetVersion(&version) == CUDA_SUCCESS ? version / 1000 : 0;
    pit_status st = PIT_SUCCESS;
    if ((st = pit_cuda_require(PIT_CUDA_NVRTC, PIT_ERR_BACKEND_NOT_FOUND,
                               "no NVRTC, which compiles the CUDA kernels")) != PIT_SUCCESS ||
        (st = pit_cuda_require(PIT_CUDA_CUBLAS, PIT_ERR_BACKEND_NOT_FOUND,
                               "no cuBLAS, the CUDA dense GEMM")) != PIT_SUCCESS) {
        pit_vendor_unload();
        return st;
    }
    pit_cuda_host->log_debug("cuda: driver CUDA %d, NVRTC %s, cuBLAS %s", driver_cuda,
                             pit_cuda_lib_path(PIT_CUDA_NVRTC), pit_cuda_lib_path(PIT_CUDA_CUBLAS));
    return PIT_SUCCESS;
}

const char *pit_cuda_lib_missing(pit_cuda_lib lib)
{
    const char *why = NULL;
    return pit_cuda_lib_load(lib, driver_cuda, &why) == 0 ? NULL : why;
}

pit_status pit_cuda_require(pit_cuda_lib lib, pit_status status, const char *what)
{
    const char *why = pit_cuda_lib_missing(lib);
    return why ? pit_cuda_host->error(status, "%s: %s", what, why) : PIT_SUCCESS;
}

void pit_vendor_unload(void)
{
    if (driver_lib) dlclose(driver_lib);
    driver_lib = NULL;
    memset(&pit_cu, 0, sizeof pit_cu);
}

pit_status pit_cuda_launch_cluster(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned threads, unsigned cz, void *args, const char *what)
{
    if (!pit_cu.LaunchKernelEx)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "%s: the driver has no cuLaunchKernelEx", what);
    if (gx == 0 || gy == 0 || gz == 0) return PIT_SUCCESS;
    CUlaunchAttribute cluster = {.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION};
    cluster.value.clusterDim.x = 1;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = cz;
    const CUlaunchConfig cfg = {.gridDimX = gx, .gridDimY = gy, .gridDimZ = gz, .blockDimX = threads,
                                .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = (unsigned)k->smem_bytes,
                                .hStream = s, .attrs = &cluster, .numAttrs = 1};
    void *params[] = {args};
    CU_CHECK(pit_cu.LaunchKernelEx(&cfg, k->fn, params, NULL), what);
    return PIT_SUCCESS;
}
