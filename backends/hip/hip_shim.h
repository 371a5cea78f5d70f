/*
 * hip_shim.h - the HIP plug-in's vendor header: HIP's types and calls under
 * CUDA's names, so that the host code written once for both plug-ins
 * compiles here unchanged (the backend table and kernel loading in
 * backends/cuda/common, the operations in backends/cuda/ops), the way ggml
 * builds its CUDA sources for AMD through vendors/hip.h. Names are made
 * here, at compile time: PIT_VENDOR_NAME makes the shared code's messages
 * say "hip", PIT_CALL names the HIP call behind each pit_cu entry.
 *
 * CMake force-includes this header into the shared files; hip_sparse.c
 * includes it before backends/cuda/cuda_baseline.h. It claims the include
 * guards of cuda_internal.h and cuda_driver.h (no <cuda.h> here) and
 * includes common/gpu_internal.h itself. pit_cu's entries are HIP runtime
 * calls, or small functions where the two APIs differ (hip_shim.c);
 * cuBLAS's GEMM is rocBLAS's (hip_blas.c).
 */
#ifndef PIT_HIP_SHIM_H
#define PIT_HIP_SHIM_H

#define PIT_CUDA_INTERNAL_H 1 /* cuda_internal.h: replaced by this header */
#define PIT_CUDA_DRIVER_H 1   /* cuda_driver.h: no <cuda.h> here */

#include "hip_api.h"

#define PIT_VENDOR_NAME "hip"

/* ---- the driver's types and constants -------------------------------------- */
typedef hipError_t CUresult;
#define CUDA_SUCCESS hipSuccess
typedef int CUdevice; /* HIP names devices by ordinal */
typedef hipStream_t CUstream;
typedef hipEvent_t CUevent;
typedef hipModule_t CUmodule;
typedef hipFunction_t CUfunction;
typedef uint64_t CUdeviceptr; /* an integer, as CUDA's: the shared code adds offsets to it */
typedef hipDeviceAttribute_t CUdevice_attribute;
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT hipDeviceAttributeMultiprocessorCount
/* the LDS a work-group may use: AMD has no opt-in above a default */
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN hipDeviceAttributeMaxSharedMemoryPerBlock
typedef int CUfunction_attribute;
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_STREAM_NON_BLOCKING hipStreamNonBlocking
#define CU_EVENT_DEFAULT 0
typedef void *CUmemoryPool; /* no memory pool: scratch is hipMalloc'ed (hip_shim.c) */
typedef int CUmemPool_attribute;
typedef uint64_t cuuint64_t;
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
typedef hipPointer_attribute CUpointer_attribute;
#define CU_POINTER_ATTRIBUTE_IS_MANAGED HIP_POINTER_ATTRIBUTE_IS_MANAGED
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL
typedef hipMemGenericAllocationHandle_t CUmemGenericAllocationHandle;

/* ---- the HIP call behind each pit_cu entry, for messages ------------------ */
#define PIT_CALL(fn) PIT_HIP_CALL_##fn
#define PIT_HIP_CALL_DeviceGetCount "hipGetDeviceCount"
#define PIT_HIP_CALL_DeviceGet "hipDeviceGet"
#define PIT_HIP_CALL_DeviceGetName "hipDeviceGetName"
#define PIT_HIP_CALL_DeviceGetAttribute "hipDeviceGetAttribute"
#define PIT_HIP_CALL_DeviceTotalMem "hipDeviceTotalMem"
#define PIT_HIP_CALL_StreamCreate "hipStreamCreateWithFlags"
#define PIT_HIP_CALL_StreamDestroy "hipStreamDestroy"
#define PIT_HIP_CALL_StreamSynchronize "hipStreamSynchronize"
#define PIT_HIP_CALL_MemAlloc "hipMalloc"
#define PIT_HIP_CALL_MemFree "hipFree"
#define PIT_HIP_CALL_MemAllocAsync "hipMalloc"
#define PIT_HIP_CALL_MemFreeAsync "hipFree"
#define PIT_HIP_CALL_DeviceGetDefaultMemPool "hipDeviceGetDefaultMemPool"
#define PIT_HIP_CALL_MemPoolSetAttribute "hipMemPoolSetAttribute"
#define PIT_HIP_CALL_MemcpyHtoDAsync "hipMemcpyHtoDAsync"
#define PIT_HIP_CALL_MemcpyDtoHAsync "hipMemcpyDtoHAsync"
#define PIT_HIP_CALL_MemcpyDtoDAsync "hipMemcpyDtoDAsync"
#define PIT_HIP_CALL_MemsetD32Async "hipMemsetD32Async"
#define PIT_HIP_CALL_MemcpyDtoH "hipMemcpyDtoH"
#define PIT_HIP_CALL_MemGetAddressRange "hipMemGetAddressRange"
#define PIT_HIP_CALL_PointerGetAttributes "hipDrvPointerGetAttributes"
#define PIT_HIP_CALL_MemRetainAllocationHandle "hipMemRetainAllocationHandle"
#define PIT_HIP_CALL_MemRelease "hipMemRelease"
#define PIT_HIP_CALL_EventCreate "hipEventCreate"
#define PIT_HIP_CALL_EventRecord "hipEventRecord"
#define PIT_HIP_CALL_EventSynchronize "hipEventSynchronize"
#define PIT_HIP_CALL_EventElapsedTime "hipEventElapsedTime"
#define PIT_HIP_CALL_EventDestroy "hipEventDestroy"
#define PIT_HIP_CALL_ModuleLoadData "hipModuleLoadData"
#define PIT_HIP_CALL_ModuleUnload "hipModuleUnload"
#define PIT_HIP_CALL_ModuleGetFunction "hipModuleGetFunction"
#define PIT_HIP_CALL_ModuleGetGlobal "hipModuleGetGlobal"
#define PIT_HIP_CALL_FuncSetAttribute "hipFuncSetAttribute"
#define PIT_HIP_CALL_LaunchKernel "hipModuleLaunchKernel"

#define PIT_VENDOR_DRIVER_CALLS /* none of its own */

/* The HIP part of a context. */
typedef struct pit_vendor_ctx {
    char gfx[32];         /* "gfx90a": the device's arch without its feature flags */
    int wave;             /* hardware wavefront width: 64 (CDNA), 32 (RDNA) */
    char sparse_name[48]; /* "rocSPARSE 2.3.3 CSR", set with the sparse handle */
} pit_vendor_ctx;

/* ---- the shared code's functions under the HIP plug-in's names ------------- */
#define pit_cuda_host pit_hip_host
#define pit_cu_fail pit_hip_fail
#define pit_cuda_basename pit_hip_basename
#define pit_cuda_push pit_hip_push
#define pit_cuda_pop pit_hip_pop
#define pit_cuda_matmul_sparse pit_hip_matmul_sparse
#define pit_cuda_matmul_detects_inside pit_hip_matmul_detects_inside
/* ops/matmul.c's cuBLAS GEMM is rocBLAS's here; the table's dense GEMM is
 * hip_dense.c's, which falls back to pit's own tile without rocBLAS */
#define pit_cuda_matmul_dense pit_hip_matmul_blas
#define pit_cuda_blas_destroy pit_hip_blas_destroy
#define pit_cuda_vendor_sparse_matmul pit_hip_vendor_sparse_matmul
#define pit_cuda_vendor_convert pit_hip_vendor_convert
#define pit_cuda_vendor_sparse_name pit_hip_vendor_sparse_name
#define pit_cuda_sparse_destroy pit_hip_sparse_destroy

#include "common/gpu_internal.h"

typedef pit_cuda_ctx pit_hip_ctx;
typedef pit_cuda_stream pit_hip_stream;
typedef pit_cuda_kernel pit_hip_kernel;

/* ---- cuBLAS over rocBLAS (hip_blas.c); only what ops/matmul.c calls ------- */
typedef void *cublasHandle_t;
typedef int cublasStatus_t;
typedef int cudaDataType_t;
typedef int cublasOperation_t;
typedef int cublasComputeType_t;
typedef int cublasGemmAlgo_t;
typedef hipStream_t cudaStream_t;
#define CUBLAS_STATUS_SUCCESS 0
#define CUBLAS_STATUS_ALLOC_FAILED 5 /* rocblas_status_memory_error */
#define CUBLAS_OP_N 111              /* rocblas_operation_none */
#define CUBLAS_OP_T 112              /* rocblas_operation_transpose */
#define CUDA_R_16F 150               /* rocblas_datatype_f16_r */
#define CUDA_R_32F 151               /* rocblas_datatype_f32_r */
#define CUDA_R_16BF 168              /* rocblas_datatype_bf16_r */
#define CUBLAS_COMPUTE_32F 151       /* f32 accumulation */
#define CUBLAS_GEMM_DEFAULT 0        /* rocblas_gemm_algo_standard */
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
const char *cublasGetStatusName(cublasStatus_t r);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
                                          long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);

#endif /* PIT_HIP_SHIM_H */
