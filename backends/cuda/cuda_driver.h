/*
 * cuda_driver.h - the CUDA driver API, loaded from libcuda.so.1 with dlopen
 * so that the plug-in loads on machines without a driver (CI), and the
 * check macros that turn vendor failures into pit errors with their place.
 */
#ifndef PIT_CUDA_DRIVER_H
#define PIT_CUDA_DRIVER_H

#include <cuda.h> /* types and constants only; no symbol is linked */

#include "backend.h"

typedef struct pit_cu_api {
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
    CUresult (*MemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
    /* optional (drivers of CUDA 12+): NULL when the driver lacks it */
    CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                     const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                     CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill);
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*OccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
} pit_cu_api;

extern pit_cu_api pit_cu;
extern const pit_host *pit_cuda_host;

/* dlopen libcuda.so.1 and resolve the table; PIT_ERR_NO_DEVICE when absent. */
pit_status pit_cuda_driver_load(void);
void pit_cuda_driver_unload(void);

/* The failure of a driver call as a pit error:
 * "what failed: 700 CUDA_ERROR_ILLEGAL_ADDRESS at cuda_ops.c:123".
 * CUDA_ERROR_OUT_OF_MEMORY maps to PIT_ERR_OUT_OF_MEMORY. */
pit_status pit_cu_fail(CUresult r, const char *what, const char *file, int line);

/* Evaluates a driver call; on failure returns the pit error from the
 * enclosing function. what names the call ("cuLaunchKernel(pit_matmul)"). */
#define CU_CHECK(call, what)                                                      \
    do {                                                                          \
        CUresult cu_r_ = (call);                                                  \
        if (cu_r_ != CUDA_SUCCESS) return pit_cu_fail(cu_r_, what, __FILE__, __LINE__); \
    } while (0)

/* Same, but jumps to a cleanup label with the status stored in st. */
#define CU_CHECK_GOTO(call, what, st, label)                                      \
    do {                                                                          \
        CUresult cu_r_ = (call);                                                  \
        if (cu_r_ != CUDA_SUCCESS) {                                              \
            (st) = pit_cu_fail(cu_r_, what, __FILE__, __LINE__);                  \
            goto label;                                                           \
        }                                                                         \
    } while (0)

/* file name without its folders, for messages */
const char *pit_cuda_basename(const char *path);

#endif /* PIT_CUDA_DRIVER_H */
