/*
 * cuda_driver.h - the CUDA plug-in's vendor header: CUDA's names as
 * <cuda.h> gives them (types and constants only: libcuda.so.1 is loaded
 * with dlopen, cuda_driver.c, so the plug-in loads where no driver exists),
 * the CUDA libraries found at run time (cuda_libs.h), and what
 * common/gpu_internal.h asks of a vendor. The HIP plug-in's
 * counterpart is backends/hip/hip_shim.h.
 */
#ifndef PIT_CUDA_DRIVER_H
#define PIT_CUDA_DRIVER_H

#include <cuda.h>

#include "backend.h"
#include "cuda_libs.h"

#define PIT_VENDOR_NAME "cuda"
/* pit_cu.X is the driver's cuX */
#define PIT_CALL(fn) "cu" #fn

/* The driver calls only the CUDA plug-in makes: contexts, error names,
 * versions, tensor maps and launches with attributes (both optional,
 * drivers of CUDA 12+: NULL when the driver lacks them). */
#define PIT_VENDOR_DRIVER_CALLS                                                                            \
    CUresult (*Init)(unsigned int);                                                                        \
    CUresult (*DriverGetVersion)(int *);                                                                   \
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);                                             \
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);                                                         \
    CUresult (*CtxPushCurrent)(CUcontext);                                                                 \
    CUresult (*CtxPopCurrent)(CUcontext *);                                                                \
    CUresult (*GetErrorName)(CUresult, const char **);                                                     \
    CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,               \
                                     const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,           \
                                     const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,        \
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);                     \
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);

/* NULL once lib (cuda_libs.h) is loaded, of a CUDA no newer than the
 * driver's (tried once); else why not: which files, searched where. */
const char *pit_cuda_lib_missing(pit_cuda_lib lib);
/* The same as a pit error: PIT_SUCCESS, or status with "what: why". */
pit_status pit_cuda_require(pit_cuda_lib lib, pit_status status, const char *what);

/* Launches k as pit_cuda_launch does, in thread-block clusters of cz CTAs
 * along z (sm_90; cz divides gz, at most 8: the portable size). UNSUPPORTED where the driver
 * has no cuLaunchKernelEx. */
struct pit_cuda_kernel;
pit_status pit_cuda_launch_cluster(const struct pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned threads, unsigned cz, void *args, const char *what);

/* The CUDA part of a context. */
typedef struct pit_vendor_ctx {
    CUcontext ctx; /* the device's primary context, retained */
} pit_vendor_ctx;

#endif /* PIT_CUDA_DRIVER_H */
