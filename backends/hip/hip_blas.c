/*
 * hip_blas.c - the cuBLAS calls of the shared dense GEMM (ops/matmul.c) over
 * rocBLAS, found at run time with dlopen (Debian 12 has no rocBLAS; then
 * the dense GEMM is pit's own tile, see hip_dense.c). rocBLAS's enums are
 * the values hip_shim.h gives the cuBLAS names.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "hip_shim.h"

typedef struct rocblas_api {
    int (*create_handle)(void **);
    int (*destroy_handle)(void *);
    int (*set_stream)(void *, hipStream_t);
    const char *(*status_to_string)(int);
    int (*gemm_strided_batched_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, int64_t,
                                   const void *, int, int, int64_t, const void *, const void *, int, int, int64_t,
                                   void *, int, int, int64_t, int, int, int, int32_t, uint32_t);
} rocblas_api;

static rocblas_api rb;
static int rb_loaded; /* 1 found, -1 absent */
static pthread_once_t rb_once = PTHREAD_ONCE_INIT;

static int sym(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    memcpy(slot, &p, sizeof p);
    return p != NULL;
}

static void load_rocblas(void)
{
    static const char *const names[] = {"librocblas.so.4", "librocblas.so.0", "librocblas.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; ++i) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    rocblas_api t;
    if (lib && sym(lib, "rocblas_create_handle", &t.create_handle) &&
        sym(lib, "rocblas_destroy_handle", &t.destroy_handle) && sym(lib, "rocblas_set_stream", &t.set_stream) &&
        sym(lib, "rocblas_status_to_string", &t.status_to_string) &&
        sym(lib, "rocblas_gemm_strided_batched_ex", &t.gemm_strided_batched_ex)) {
        rb = t;
        rb_loaded = 1;
        return;
    }
    /* the library (if any) stays loaded: it may have registered kernels */
    rb_loaded = -1;
}

int pit_hip_have_rocblas(void)
{
    pthread_once(&rb_once, load_rocblas);
    return rb_loaded == 1;
}

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    if (!pit_hip_have_rocblas()) return 2; /* rocblas_status_not_implemented */
    return rb.create_handle(h);
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    return pit_hip_have_rocblas() ? rb.destroy_handle(h) : 0;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    return rb.set_stream(h, s);
}

const char *cublasGetStatusName(cublasStatus_t r)
{
    return rb_loaded == 1 ? rb.status_to_string(r) : "rocBLAS not found";
}

/* D = C here (beta 0): rocBLAS's _ex takes a separate output. */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
                                          long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    return rb.gemm_strided_batched_ex(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,
                                      sc, C, ct, ldc, sc, batch, compute, algo, 0, 0);
}
