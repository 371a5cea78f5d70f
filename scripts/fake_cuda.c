/*
 * scripts/fake_cuda.c - a lab tool (not shipped): a stand-in libcuda.so.1
 * with which the CUDA plug-in's host path runs on a machine without a GPU,
 * so that pit's own host time a call can be profiled (perf) and its driver
 * calls counted. Kernels are not run (their results are whatever the
 * memory held), device memory is host memory, the device an sm_90 with
 * 132 SMs. At exit it prints how often each driver entry was called.
 *
 *   cc -O2 -shared -fPIC -I/usr/local/cuda/include scripts/fake_cuda.c -o /tmp/fake/libcuda.so.1
 *   LD_LIBRARY_PATH=/tmp/fake:build/lib:/usr/local/cuda/lib64 PIT_BACKEND=cuda \
 *       perf record ./decode_host 1 14336 4096 0.75 200000
 *
 * The entry points are the ones cuda_driver.c resolves, under the exact
 * (versioned) names it asks dlsym for.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#undef cuCtxPopCurrent
#undef cuCtxPushCurrent
#undef cuDeviceGet
#undef cuDeviceGetAttribute
#undef cuDeviceGetCount
#undef cuDeviceGetDefaultMemPool
#undef cuDeviceGetName
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxRetain
#undef cuDeviceTotalMem
#undef cuDriverGetVersion
#undef cuEventCreate
#undef cuEventDestroy
#undef cuEventElapsedTime
#undef cuEventRecord
#undef cuEventSynchronize
#undef cuFuncSetAttribute
#undef cuGetErrorName
#undef cuInit
#undef cuLaunchKernel
#undef cuMemAlloc
#undef cuMemAllocAsync
#undef cuMemFree
#undef cuMemFreeAsync
#undef cuMemGetAddressRange
#undef cuMemPoolSetAttribute
#undef cuMemRelease
#undef cuMemRetainAllocationHandle
#undef cuMemcpyDtoDAsync
#undef cuMemcpyDtoH
#undef cuMemcpyDtoHAsync
#undef cuMemcpyHtoDAsync
#undef cuMemsetD32Async
#undef cuModuleGetFunction
#undef cuModuleGetGlobal
#undef cuModuleLoadData
#undef cuModuleUnload
#undef cuPointerGetAttributes
#undef cuStreamCreate
#undef cuStreamDestroy
#undef cuStreamSynchronize
#undef cuTensorMapEncodeTiled

#include <stdio.h>

static int dummy[16]; /* what handles point at */
static long calls[128];
static const char *names[128];
/* every entry starts with CALLED: its count, under the name it is exported as */
#define CALLED() (names[__COUNTER__] = __func__, ++calls[__COUNTER__ - 1])

__attribute__((destructor)) static void print_calls(void)
{
    for (int i = 0; i < 128; ++i)
        if (calls[i]) fprintf(stderr, "fake_cuda: %-28s %ld\n", names[i], calls[i]);
}
#define MAXA 4096
static struct { char *p; size_t n; } allocs[MAXA];

static void track(void *p, size_t n) { for (int i = 0; i < MAXA; ++i) if (!allocs[i].p) { allocs[i].p = p; allocs[i].n = n; return; } }
static void untrack(void *p) { for (int i = 0; i < MAXA; ++i) if (allocs[i].p == p) { allocs[i].p = NULL; return; } }

CUresult cuInit(unsigned f) { CALLED(); (void)f; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *v) { CALLED(); *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { CALLED(); *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int o) { CALLED(); *d = o; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char *n, int len, CUdevice d) { CALLED(); (void)d; strncpy(n, "NVIDIA H200 (fake)", (size_t)len); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    CALLED();
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 3201000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    default: *v = 1; break;
    }
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { CALLED(); (void)d; *b = (size_t)140 << 30; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { CALLED(); (void)d; *c = (CUcontext)&dummy[0]; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { CALLED(); (void)d; return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent_v2(CUcontext c) { CALLED(); (void)c; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { CALLED(); if (c) *c = (CUcontext)&dummy[0]; return CUDA_SUCCESS; }
CUresult cuStreamCreate(CUstream *s, unsigned f) { CALLED(); (void)f; *s = (CUstream)&dummy[1]; return CUDA_SUCCESS; }
CUresult cuStreamDestroy_v2(CUstream s) { CALLED(); (void)s; return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream s) { CALLED(); (void)s; return CUDA_SUCCESS; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { CALLED(); void *m = aligned_alloc(256, (n + 255) / 256 * 256); if (!m) return CUDA_ERROR_OUT_OF_MEMORY; memset(m, 0, n); track(m, n); *p = (CUdeviceptr)m; return CUDA_SUCCESS; }
CUresult cuMemFree_v2(CUdeviceptr p) { CALLED(); untrack((void *)p); free((void *)p); return CUDA_SUCCESS; }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { CALLED(); (void)s; void *m = aligned_alloc(256, (n + 255) / 256 * 256); if (!m) return CUDA_ERROR_OUT_OF_MEMORY; *p = (CUdeviceptr)m; return CUDA_SUCCESS; }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { CALLED(); (void)s; free((void *)p); return CUDA_SUCCESS; }
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d) { CALLED(); (void)d; *p = (CUmemoryPool)&dummy[2]; return CUDA_SUCCESS; }
CUresult cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v) { CALLED(); (void)p; (void)a; (void)v; return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { CALLED(); (void)st; memcpy((void *)d, s, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { CALLED(); (void)st; memcpy(d, (void *)s, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { CALLED(); (void)st; memmove((void *)d, (void *)s, n); return CUDA_SUCCESS; }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream st) { CALLED(); (void)st; unsigned *p = (unsigned *)d; for (size_t i = 0; i < n; ++i) p[i] = v; return CUDA_SUCCESS; }
CUresult cuEventCreate(CUevent *e, unsigned f) { CALLED(); (void)f; *e = (CUevent)&dummy[3]; return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream s) { CALLED(); (void)e; (void)s; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent e) { CALLED(); (void)e; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { CALLED(); (void)a; (void)b; *ms = 0.01f; return CUDA_SUCCESS; }
CUresult cuEventDestroy_v2(CUevent e) { CALLED(); (void)e; return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule *m, const void *img) { CALLED(); (void)img; *m = (CUmodule)&dummy[4]; return CUDA_SUCCESS; }
CUresult cuModuleUnload(CUmodule m) { CALLED(); (void)m; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *n) { CALLED(); (void)m; (void)n; *f = (CUfunction)&dummy[5]; return CUDA_SUCCESS; }
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *b, CUmodule m, const char *n) { CALLED(); (void)p; (void)b; (void)m; (void)n; return CUDA_ERROR_NOT_FOUND; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { CALLED(); memcpy(d, (void *)s, n); return CUDA_SUCCESS; }
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    CALLED();
    for (int i = 0; i < MAXA; ++i)
        if (allocs[i].p && (char *)p >= allocs[i].p && (char *)p < allocs[i].p + allocs[i].n) {
            if (base) *base = (CUdeviceptr)allocs[i].p;
            if (size) *size = allocs[i].n;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}
CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p)
{
    CALLED();
    (void)p;
    for (unsigned i = 0; i < n; ++i) {
        switch (a[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = CU_MEMORYTYPE_DEVICE; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data[i] = (CUcontext)&dummy[0]; break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = 0; break;
        default: memset(data[i], 0, 8); break;
        }
    }
    return CUDA_SUCCESS;
}
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *p) { CALLED(); (void)h; (void)p; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { CALLED(); (void)h; return CUDA_SUCCESS; }
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { CALLED(); (void)f; (void)a; (void)v; return CUDA_SUCCESS; }
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sm, CUstream s, void **p, void **e)
{
    CALLED(); (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm; (void)s; (void)p; (void)e; return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult r, const char **s) { CALLED(); (void)r; *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t r, void *g, const cuuint64_t *d, const cuuint64_t *st, const cuuint32_t *b, const cuuint32_t *es, CUtensorMapInterleave i, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill o)
{
    CALLED(); (void)t; (void)r; (void)g; (void)d; (void)st; (void)b; (void)es; (void)i; (void)sw; (void)l2; (void)o; memset(m, 0, sizeof *m); return CUDA_SUCCESS; }
