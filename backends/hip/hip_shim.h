/*
 * hip_shim.h - lets the HIP plug-in compile the CUDA backend's host
 * operations (backends/cuda/ops/) unchanged: detection, the fused
 * SRead/tile/SWrite matmul along K and M, and the dense GEMM are the same
 * host logic on both vendors, so they are written once.
 *
 * CMake force-includes this header into the operator files of backends/cuda/ops/;
 * hip_sparse.c includes it before backends/cuda/cuda_baseline.h (what the
 * cuSPARSE and rocSPARSE baselines share). It claims the include guards of
 * cuda_internal.h and cuda_driver.h, whose CUDA types never reach this
 * plug-in, and gives the names that code uses their HIP meaning: the driver
 * table pit_cu (a few stream-ordered memory calls and the events), CU_CHECK,
 * the context/stream/kernel types, the kernel cache and launch
 * (hip_kernels.c), and cuBLAS's GEMM over rocBLAS (hip_blas.c).
 * Messages it formats say "hip", not "cuda" (see pit_cuda_host below).
 */
#ifndef PIT_HIP_SHIM_H
#define PIT_HIP_SHIM_H

#define PIT_CUDA_INTERNAL_H 1 /* cuda_internal.h: replaced by this header */
#define PIT_CUDA_DRIVER_H 1   /* cuda_driver.h: no <cuda.h> here */

#include <pthread.h>

#include "cuda_kernels.h" /* the shared variant table */
#include "hip_internal.h"

/* ---- the CUDA driver names the ops/ files use --------------------------------- */
typedef hipError_t CUresult;
typedef hipStream_t CUstream;
typedef hipEvent_t CUevent;
typedef uint64_t CUdeviceptr; /* an integer, as CUDA's: the ops/ files add offsets to it */
#define CUDA_SUCCESS hipSuccess

typedef void *CUmemoryPool;
typedef uint64_t cuuint64_t;
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define CU_EVENT_DEFAULT 0

typedef struct pit_hip_cu_api {
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
    /* scratch is not taken from a memory pool here: these say so */
    CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool *, int);
    CUresult (*MemPoolSetAttribute)(CUmemoryPool, int, void *);
    /* hipEventCreate has no flags: only CU_EVENT_DEFAULT is taken */
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
} pit_hip_cu_api;
extern const pit_hip_cu_api pit_cu;

/* CUDA call names in the ops/ files' messages become the HIP calls made. */
pit_status pit_cu_fail(CUresult r, const char *what, const char *file, int line);
#define CU_CHECK(call, what)                                                      \
    do {                                                                          \
        CUresult cu_r_ = (call);                                                  \
        if (cu_r_ != CUDA_SUCCESS) return pit_cu_fail(cu_r_, what, __FILE__, __LINE__); \
    } while (0)
#define pit_cuda_basename pit_hip_basename

/* A host whose error() rewrites the "cuda" of the ops/ files' messages. */
extern const pit_host *const pit_cuda_host;

/* ---- context, stream, kernels (hip_internal.h) under their CUDA names ------ */
typedef pit_hip_ctx pit_cuda_ctx;
typedef pit_hip_stream pit_cuda_stream;
typedef pit_hip_kernel pit_cuda_kernel;
#define pit_cuda_push pit_hip_push
#define pit_cuda_pop pit_hip_pop
#define pit_cuda_get_kernel pit_hip_get_kernel
#define pit_cuda_launch pit_hip_launch

/* ---- cuBLAS over rocBLAS (hip_blas.c); only what the ops/ files call ---------- */
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

/* The entry points the ops/ files define get HIP names in this plug-in. */
#define pit_cuda_detect pit_hip_detect
#define pit_cuda_matmul_sparse pit_hip_matmul_sparse
#define pit_cuda_matmul_dense pit_hip_matmul_blas
#define pit_cuda_blas_destroy pit_hip_blas_destroy

#endif /* PIT_HIP_SHIM_H */
