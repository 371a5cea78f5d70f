/*
 * tests/fake_cuda_driver.c - a stand-in libcuda.so.1 (and, built with
 * PIT_FAKE_CUBLAS, libcublas.so.13) with which the CUDA plug-in's host path
 * runs on a machine without a GPU: CI's tests of that path
 * (test_cuda_host.c, cuda_libs_missing_api) and host-time profiling
 * (scripts/README.md). Device memory is host memory; kernels and GEMMs are
 * not run, so results are whatever the memory held and detection finds
 * nothing; the device is an sm_90 with 132 SMs.
 *
 * It exports the entries the plug-in resolves, under the exact (versioned)
 * names cuda_driver.c and cuda_libs.c ask dlsym for (keep them in step),
 * and cuGetExportTable, which NVRTC looks up in a loaded driver,
 * and, for tests: pit_fake_cuda_calls(entry), how often an entry was
 * called; pit_fake_cuda_fail(entry), which makes that entry fail with
 * CUDA_ERROR_LAUNCH_FAILED (NULL: none) from then on.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef PIT_FAKE_CUBLAS
#include <cublas_v2.h>
#else
#include <cuda.h>
#endif

/* the plug-in asks for these unversioned names, which cuda.h maps to newer ones */
#undef cuStreamSynchronize
#undef cuMemAllocAsync
#undef cuMemFreeAsync
#undef cuMemsetD32Async
#undef cuEventRecord
#undef cuEventElapsedTime
#undef cuLaunchKernel

#define FAKE_API __attribute__((visibility("default")))

/* ---- accounting: a count a call site, found by name ------------------- */
#define MAX_ENTRIES 64
static struct {
    const char *name;
    atomic_long calls;
} entries[MAX_ENTRIES];
static atomic_int nentries;
static char failing[64];

static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;

/* The entry's counter, registered on its first call (entries never move). */
static atomic_long *counter(const char *name)
{
    pthread_mutex_lock(&entries_lock);
    int n = atomic_load(&nentries), i = 0;
    while (i < n && strcmp(entries[i].name, name)) ++i;
    if (i == n) {
        if (n == MAX_ENTRIES) abort(); /* more entries than the plug-in resolves */
        entries[i].name = name;
        atomic_store(&nentries, n + 1);
    }
    pthread_mutex_unlock(&entries_lock);
    return &entries[i].calls;
}

/* Counts the call on the call site's counter (found once); nonzero when
 * the test asked this entry to fail. */
#define COUNTED(name)                                             \
    ({                                                            \
        static atomic_long *site;                                 \
        if (!site) site = counter(name);                          \
        atomic_fetch_add(site, 1);                                \
        failing[0] && !strcmp(failing, name);                     \
    })

FAKE_API long pit_fake_cuda_calls(const char *name);
long pit_fake_cuda_calls(const char *name)
{
    int n = atomic_load(&nentries);
    for (int i = 0; i < n; ++i)
        if (entries[i].name && !strcmp(entries[i].name, name)) return atomic_load(&entries[i].calls);
    return 0;
}

FAKE_API void pit_fake_cuda_fail(const char *name);
void pit_fake_cuda_fail(const char *name)
{
    failing[0] = 0;
    if (name) strncat(failing, name, sizeof failing - 1);
}

#define ENTRY(ret, name, params) \
    FAKE_API ret name params;    \
    ret name params

#ifdef PIT_FAKE_CUBLAS
/* ---- cuBLAS: a handle, a stream, GEMMs not run ------------------------- */
static int handle;
#define CUBLAS_CALLED() \
    if (COUNTED(__func__)) return CUBLAS_STATUS_EXECUTION_FAILED

ENTRY(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * h))
{
    CUBLAS_CALLED();
    *h = (cublasHandle_t)&handle;
    return CUBLAS_STATUS_SUCCESS;
}
ENTRY(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t h))
{
    (void)h;
    CUBLAS_CALLED();
    return CUBLAS_STATUS_SUCCESS;
}
ENTRY(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s))
{
    (void)h, (void)s;
    CUBLAS_CALLED();
    return CUBLAS_STATUS_SUCCESS;
}
ENTRY(const char *, cublasGetStatusName, (cublasStatus_t s))
{
    (void)s;
    (void)COUNTED(__func__);
    return "CUBLAS_STATUS_FAKE";
}
ENTRY(cublasStatus_t, cublasGemmStridedBatchedEx,
      (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
       const void *A, cudaDataType at, int lda, long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
       const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute,
       cublasGemmAlgo_t algo))
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)A, (void)at, (void)lda, (void)sa;
    (void)B, (void)bt, (void)ldb, (void)sb, (void)beta, (void)C, (void)ct, (void)ldc, (void)sc, (void)batch;
    (void)compute, (void)algo;
    CUBLAS_CALLED();
    return CUBLAS_STATUS_SUCCESS;
}
#else
/* ---- the driver ---------------------------------------------------------- */
static int objects[8]; /* what the handles point at */
#define CALLED() \
    if (COUNTED(__func__)) return CUDA_ERROR_LAUNCH_FAILED
/* An entry that counts its call, does `...` (its outputs; (void) of the
 * rest) and succeeds. */
#define SUCCEEDS(name, params, ...) \
    ENTRY(CUresult, name, params)   \
    {                               \
        CALLED();                   \
        __VA_ARGS__;                \
        return CUDA_SUCCESS;        \
    }

/* Device memory is host memory; cuMemAlloc's blocks (tensors) are kept for
 * cuMemGetAddressRange, stream-ordered scratch is not looked up. */
#define MAX_ALLOCS 4096
static struct {
    char *base;
    size_t bytes;
} allocs[MAX_ALLOCS];
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult fake_alloc(CUdeviceptr *p, size_t bytes, int kept)
{
    char *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)m;
    if (!kept) return CUDA_SUCCESS;
    pthread_mutex_lock(&alloc_lock);
    for (int i = 0; i < MAX_ALLOCS; ++i)
        if (!allocs[i].base) {
            allocs[i].base = m;
            allocs[i].bytes = bytes;
            break;
        }
    pthread_mutex_unlock(&alloc_lock);
    return CUDA_SUCCESS;
}

static void fake_free(CUdeviceptr p, int kept)
{
    if (kept) {
        pthread_mutex_lock(&alloc_lock);
        for (int i = 0; i < MAX_ALLOCS; ++i)
            if (allocs[i].base == (char *)p) allocs[i].base = NULL;
        pthread_mutex_unlock(&alloc_lock);
    }
    free((void *)p);
}

SUCCEEDS(cuInit, (unsigned f), (void)f)
SUCCEEDS(cuDriverGetVersion, (int *v), *v = 13000)
SUCCEEDS(cuDeviceGetCount, (int *n), *n = 1)
ENTRY(CUresult, cuDeviceGet, (CUdevice * d, int ordinal))
{
    CALLED();
    *d = ordinal;
    return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
ENTRY(CUresult, cuDeviceGetName, (char *name, int len, CUdevice d))
{
    (void)d;
    CALLED();
    if (len > 0) {
        name[0] = 0;
        strncat(name, "fake sm_90 device (no GPU)", (size_t)len - 1);
    }
    return CUDA_SUCCESS;
}
ENTRY(CUresult, cuDeviceGetAttribute, (int *v, CUdevice_attribute a, CUdevice d))
{
    (void)d;
    CALLED();
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
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    default: *v = 1; break;
    }
    return CUDA_SUCCESS;
}
SUCCEEDS(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice d), (void)d; *bytes = (size_t)80 << 30)
SUCCEEDS(cuDevicePrimaryCtxRetain, (CUcontext * c, CUdevice d), (void)d; *c = (CUcontext)&objects[0])
SUCCEEDS(cuDevicePrimaryCtxRelease_v2, (CUdevice d), (void)d)
SUCCEEDS(cuCtxPushCurrent_v2, (CUcontext c), (void)c)
ENTRY(CUresult, cuCtxPopCurrent_v2, (CUcontext * c))
{
    CALLED();
    if (c) *c = (CUcontext)&objects[0];
    return CUDA_SUCCESS;
}
SUCCEEDS(cuStreamCreate, (CUstream * s, unsigned f), (void)f; *s = (CUstream)&objects[1])
SUCCEEDS(cuStreamDestroy_v2, (CUstream s), (void)s)
SUCCEEDS(cuStreamSynchronize, (CUstream s), (void)s)
ENTRY(CUresult, cuMemAlloc_v2, (CUdeviceptr * p, size_t bytes))
{
    CALLED();
    return fake_alloc(p, bytes, 1);
}
SUCCEEDS(cuMemFree_v2, (CUdeviceptr p), fake_free(p, 1))
ENTRY(CUresult, cuMemAllocAsync, (CUdeviceptr * p, size_t bytes, CUstream s))
{
    (void)s;
    CALLED();
    return fake_alloc(p, bytes, 0);
}
SUCCEEDS(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (void)s; fake_free(p, 0))
SUCCEEDS(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool, CUdevice d), (void)d; *pool = (CUmemoryPool)&objects[2])
SUCCEEDS(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute a, void *v), (void)pool, (void)a, (void)v)
SUCCEEDS(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s),
         (void)s; memcpy((void *)dst, src, n))
SUCCEEDS(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s),
         (void)s; memcpy(dst, (const void *)src, n))
SUCCEEDS(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
         (void)s; memmove((void *)dst, (const void *)src, n))
ENTRY(CUresult, cuMemsetD32Async, (CUdeviceptr dst, unsigned v, size_t n, CUstream s))
{
    (void)s;
    CALLED();
    unsigned *p = (unsigned *)dst;
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
}
SUCCEEDS(cuEventCreate, (CUevent * e, unsigned f), (void)f; *e = (CUevent)&objects[3])
SUCCEEDS(cuEventRecord, (CUevent e, CUstream s), (void)e, (void)s)
SUCCEEDS(cuEventSynchronize, (CUevent e), (void)e)
SUCCEEDS(cuEventElapsedTime, (float *ms, CUevent a, CUevent b), (void)a, (void)b; *ms = 0.01f)
SUCCEEDS(cuEventDestroy_v2, (CUevent e), (void)e)
SUCCEEDS(cuModuleLoadData, (CUmodule * m, const void *image), (void)image; *m = (CUmodule)&objects[4])
SUCCEEDS(cuModuleUnload, (CUmodule m), (void)m)
SUCCEEDS(cuModuleGetFunction, (CUfunction * f, CUmodule m, const char *name),
         (void)m, (void)name; *f = (CUfunction)&objects[5])
/* No globals: every kernel reads as needing no dynamic shared memory. */
ENTRY(CUresult, cuModuleGetGlobal_v2, (CUdeviceptr * p, size_t *bytes, CUmodule m, const char *name))
{
    (void)p, (void)bytes, (void)m, (void)name;
    CALLED();
    return CUDA_ERROR_NOT_FOUND;
}
SUCCEEDS(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), memcpy(dst, (const void *)src, n))
ENTRY(CUresult, cuMemGetAddressRange_v2, (CUdeviceptr * base, size_t *bytes, CUdeviceptr p))
{
    CALLED();
    CUresult r = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&alloc_lock);
    for (int i = 0; i < MAX_ALLOCS && r != CUDA_SUCCESS; ++i)
        if (allocs[i].base && (char *)p >= allocs[i].base && (char *)p < allocs[i].base + allocs[i].bytes) {
            if (base) *base = (CUdeviceptr)allocs[i].base;
            if (bytes) *bytes = allocs[i].bytes;
            r = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&alloc_lock);
    return r;
}
ENTRY(CUresult, cuPointerGetAttributes, (unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p))
{
    (void)p;
    CALLED();
    for (unsigned i = 0; i < n; ++i) switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = CU_MEMORYTYPE_DEVICE; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = 0; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data[i] = (CUcontext)&objects[0]; break;
        default: memset(data[i], 0, sizeof(int)); break;
        }
    return CUDA_SUCCESS;
}
ENTRY(CUresult, cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * h, void *p))
{
    (void)h, (void)p;
    CALLED();
    return CUDA_ERROR_NOT_SUPPORTED;
}
SUCCEEDS(cuMemRelease, (CUmemGenericAllocationHandle h), (void)h)
SUCCEEDS(cuFuncSetAttribute, (CUfunction f, CUfunction_attribute a, int v), (void)f, (void)a, (void)v)
SUCCEEDS(cuLaunchKernel,
         (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
          CUstream s, void **params, void **extra),
         (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)params,
         (void)extra)
ENTRY(CUresult, cuTensorMapEncodeTiled,
      (CUtensorMap * map, CUtensorMapDataType t, cuuint32_t rank, void *base, const cuuint64_t *dims,
       const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *step, CUtensorMapInterleave il,
       CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob))
{
    (void)t, (void)rank, (void)base, (void)dims, (void)strides, (void)box, (void)step, (void)il, (void)sw, (void)l2;
    (void)oob;
    CALLED();
    memset(map, 0, sizeof *map);
    return CUDA_SUCCESS;
}
/* NVRTC asks a loaded driver for its private tables: it has none, so NVRTC
 * compiles as where no driver is installed. */
ENTRY(CUresult, cuGetExportTable, (const void **table, const CUuuid *id))
{
    (void)id;
    CALLED();
    *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
ENTRY(CUresult, cuGetErrorName, (CUresult r, const char **name))
{
    (void)r;
    (void)COUNTED(__func__);
    *name = r == CUDA_ERROR_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
#endif
