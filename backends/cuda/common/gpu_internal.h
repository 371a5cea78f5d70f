/*
 * gpu_internal.h - the host code the CUDA and HIP plug-ins share, written
 * in CUDA's names: the table of driver calls (pit_cu), the check macros,
 * the context, stream, kernel and event types, the functions of the shared
 * files (backends/cuda/common, the operations) and those each vendor
 * writes for itself. Nothing outside the two plug-ins sees it.
 *
 * Never included first: a vendor header gives the CUDA names their meaning
 * and then includes it, as ggml builds its CUDA sources for AMD through
 * vendors/hip.h. For the CUDA plug-in that header is cuda_driver.h
 * (<cuda.h> as it is), for the HIP plug-in backends/hip/hip_shim.h (HIP's
 * types under CUDA's names). The vendor header defines:
 *   PIT_VENDOR_NAME          "cuda" / "hip": the backend's name, and the
 *                            first word of its messages ("cuda matmul: ...")
 *   PIT_CALL(fn)             the name of the vendor call behind pit_cu.fn, a
 *                            string for messages: PIT_CALL(LaunchKernel) is
 *                            "cuLaunchKernel" / "hipModuleLaunchKernel"
 *   PIT_VENDOR_DRIVER_CALLS  the vendor's own entries of pit_cu (CUDA's
 *                            contexts and tensor maps; none on HIP)
 *   pit_vendor_ctx           the vendor's own part of a context
 */
#ifndef PIT_GPU_INTERNAL_H
#define PIT_GPU_INTERNAL_H

#if !defined(PIT_VENDOR_NAME) || !defined(PIT_CALL) || !defined(PIT_VENDOR_DRIVER_CALLS)
#error "gpu_internal.h comes through a vendor header: cuda_internal.h (CUDA) or hip_shim.h (HIP)"
#endif

#include <pthread.h>
#include <stdint.h>

#include "backend.h"
#include "cuda_kernels.h"

/* ---- the driver calls: libcuda's on CUDA (cuda_driver.c), the HIP
 * runtime's under these names on HIP (hip_shim.c) ---------------------------- */
typedef struct pit_cu_api {
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
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
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    /* what a wrapped pointer is: its allocation, device, and whether it was
     * mapped through the virtual memory API (a handle can be retained) */
    CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*PointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*MemRetainAllocationHandle)(CUmemGenericAllocationHandle *, void *);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
    PIT_VENDOR_DRIVER_CALLS
} pit_cu_api;

extern pit_cu_api pit_cu;
extern const pit_host *pit_cuda_host;

/* The failure of a driver call as a pit error:
 * "what failed: 700 CUDA_ERROR_ILLEGAL_ADDRESS at matmul.c:123".
 * Running out of device memory maps to PIT_ERR_OUT_OF_MEMORY. */
pit_status pit_cu_fail(CUresult r, const char *what, const char *file, int line);

/* Evaluates a driver call; on failure returns the pit error from the
 * enclosing function. what names the call (PIT_CALL(LaunchKernel) "(pit_matmul)"). */
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

/* ---- contexts, streams, kernels, events ------------------------------------- */

/* One loaded kernel, cached per context. */
typedef struct pit_cuda_kernel {
    pit_kernel_link link; /* first: key (name + defines) and the context's list */
    CUmodule module;
    CUfunction fn;
    int smem_bytes; /* dynamic shared memory (LDS on AMD) the kernel needs */
} pit_cuda_kernel;

typedef struct pit_cuda_ctx {
    int index;
    CUdevice dev;
    /* 90 for sm_90; on AMD 80 where the kernels' matrix step runs on
     * matrix cores (the shared code asks "arch >= 80" for tensor-core
     * tiles), else 0 */
    int arch;
    int sm_count;   /* SMs (compute units): grids are sized by it */
    int smem_optin; /* dynamic shared memory a block may use */
    pit_switches switches; /* the context's experimental switches */
    pthread_mutex_t lock;  /* guards kernels, blas and sparse */
    pit_kernel_link *kernels;
    void *blas;   /* cuBLAS / rocBLAS handle, created on first dense call */
    void *sparse; /* cuSPARSE / rocSPARSE handle, created on first baseline call */
    pit_vendor_ctx vendor;
    pit_scratch_allocator scratch; /* alloc NULL: the device's stream-ordered pool */
} pit_cuda_ctx;

typedef struct pit_cuda_stream {
    CUstream s;
    int owned;
} pit_cuda_stream;

struct pit_event {
    CUevent e;
};

/* ---- what each vendor writes: cuda_driver.c, cuda_backend.c, cuda_jit.c;
 * hip_shim.c, hip_backend.c, hip_kernels.c -------------------------------------- */

/* Loads the runtime with dlopen and fills pit_cu: PIT_ERR_NO_DEVICE, saying
 * why, when there is none or it has no device. */
pit_status pit_vendor_load(void);
void pit_vendor_unload(void);

/* Makes the context's device current on this thread for a call. */
pit_status pit_cuda_push(pit_cuda_ctx *c);
void pit_cuda_pop(void);

/* What only the vendor knows of a device: vendor, arch, driver version,
 * data types, tile-database family, DLPack device type. */
pit_status pit_vendor_describe(CUdevice dev, pit_device_info *info);

/* The vendor's part of a new context (index, dev, sm_count and smem_optin
 * are set): arch and pit_vendor_ctx. On failure it leaves nothing held. */
pit_status pit_vendor_context_open(pit_cuda_ctx *c);
/* Releases what pit_vendor_context_open holds, after the context's work. */
void pit_vendor_context_close(pit_cuda_ctx *c);

/* Where the code of a kernel variant comes from, in the order the sources
 * are tried: built into the plug-in (cubins pre-compiled by nvcc on CUDA,
 * code objects on HIP), the disk cache (CUDA), compiled now (NVRTC,
 * hiprtc). */
typedef enum pit_image_origin {
    PIT_IMAGE_NONE,
    PIT_IMAGE_BUILTIN,
    PIT_IMAGE_DISK_CACHE,
    PIT_IMAGE_COMPILED
} pit_image_origin;

/* The code of a kernel variant, ready to load: data, and owned (freed once
 * loaded; NULL where data is built into the plug-in). after (set by the
 * caller): try only the sources after this one, whose binary did not load;
 * after the disk cache, compile anew and replace its entry. origin (set by
 * the hook): where data came from. */
typedef struct pit_kernel_image {
    const void *data;
    void *owned;
    pit_image_origin after;
    pit_image_origin origin;
} pit_kernel_image;
pit_status pit_vendor_kernel_image(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *key,
                                   pit_kernel_image *image);

/* The dense GEMM's entries of the table (matmul_dense, dense_name). */
void pit_vendor_dense_entries(pit_backend *be);

/* ---- shared: common/gpu_backend.c, common/gpu_modules.c --------------------------- */

pit_status pit_gpu_attribute(CUdevice dev, CUdevice_attribute a, int *value);

/* The loaded kernel of a variant: the context's cache, else built from the
 * vendor's image. The context must be current. */
pit_status pit_cuda_get_kernel(pit_cuda_ctx *c, const pit_cuda_variant *v, pit_cuda_kernel **out);
void pit_cuda_free_kernels(pit_cuda_ctx *c);

/* Launches with grid/block and one by-value argument struct. */
pit_status pit_cuda_launch(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                           unsigned threads, void *args, const char *what);

/* ---- operations (ops/detect.c, ops/matmul.c, ops/common.c) ------------------------ */
pit_status pit_cuda_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n);
/* Zeroes the counts and totals of idx[0..n-1] (what detect does first). */
pit_status pit_cuda_zero_index(CUstream s, const pit_index *idx, int n);
pit_status pit_cuda_matmul_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, int worst_case_grid, const pit_tdesc *A,
                                  const pit_tdesc *B, const pit_tdesc *C);
/* 1 when pit_cuda_matmul_sparse does not read idx (the decode kernel finds
 * A's non-zero columns itself) */
int pit_cuda_matmul_detects_inside(void *bctx, const pit_index *idx, const pit_tdesc *A, const pit_tdesc *B,
                                   const pit_tdesc *C);
/* cuBLAS's strided-batched GEMM (rocBLAS's under hip_shim.h) */
pit_status pit_cuda_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                 const pit_tdesc *C);
void pit_cuda_blas_destroy(pit_cuda_ctx *c);
/* Keeps the default pool's memory between calls; called once per context
 * at creation. */
void pit_cuda_keep_pool_memory(const pit_cuda_ctx *c);

/* ---- the vendor's sparse library, pit bench's baseline (cuda_baselines.c:
 * cuSPARSE; hip_sparse.c: rocSPARSE) */
pit_status pit_cuda_vendor_sparse_matmul(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                         const pit_tdesc *C, double *convert_ms, double *compute_ms);
pit_status pit_cuda_vendor_convert(void *bctx, void *stream, const pit_tdesc *A, int block, double *ms);
const char *pit_cuda_vendor_sparse_name(void *bctx);
void pit_cuda_sparse_destroy(pit_cuda_ctx *c);

#endif /* PIT_GPU_INTERNAL_H */
