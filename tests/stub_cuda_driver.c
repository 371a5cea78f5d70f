/*
 * tests/stub_cuda_driver.c - a libcuda.so.1 without a device, so that the
 * CUDA plug-in's init runs on a machine without a driver (CI) up to where it
 * looks for NVRTC and cuBLAS: cuInit succeeds and cuDriverGetVersion says
 * CUDA 13.0. Every other call the plug-in resolves (cuda_driver.c's list:
 * keep the two in step) exists and fails with CUDA_ERROR_NOT_SUPPORTED.
 * Loaded through LD_LIBRARY_PATH by the tests that use it only.
 */
#define STUB_API __attribute__((visibility("default")))

#define FAILING_CALLS(X)                                                                                    \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)  \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxPushCurrent_v2)                   \
    X(cuCtxPopCurrent_v2) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuMemAlloc_v2) \
    X(cuMemFree_v2) X(cuMemAllocAsync) X(cuDeviceGetDefaultMemPool) X(cuMemPoolSetAttribute)             \
    X(cuMemFreeAsync) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2)            \
    X(cuMemsetD32Async) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)     \
    X(cuEventDestroy_v2) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                    \
    X(cuModuleGetGlobal_v2) X(cuMemcpyDtoH_v2) X(cuMemGetAddressRange_v2) X(cuPointerGetAttributes)    \
    X(cuMemRetainAllocationHandle) X(cuMemRelease) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuGetErrorName)

#define CUDA_ERROR_NOT_SUPPORTED 801

/* Callers pass arguments these ignore: the x86-64 and AArch64 calling
 * conventions make that harmless, and only a failure is returned. */
#define FAILING(name)                   \
    STUB_API int name(void);            \
    int name(void)                      \
    {                                   \
        return CUDA_ERROR_NOT_SUPPORTED; \
    }
FAILING_CALLS(FAILING)

STUB_API int cuInit(unsigned int flags);
int cuInit(unsigned int flags)
{
    (void)flags;
    return 0;
}

STUB_API int cuDriverGetVersion(int *version);
int cuDriverGetVersion(int *version)
{
    *version = 13000;
    return 0;
}
