/*
 * cuda_libs.c - NVRTC, cuBLAS and cuSPARSE opened at run time (found by
 * cuda_lib_search.c), and each call pit makes of them defined under its own
 * name as a call into the loaded library. The table's entries take their
 * types from the vendor's declarations (__typeof__), and the definitions
 * below must match the same declarations, so a signature cannot drift from
 * the headers the plug-in is built with. The definitions are hidden (the
 * build's default visibility), so nothing outside the plug-in binds to them.
 */
#include <cublas_v2.h>
#include <cusparse.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda_libs.h"

/* The calls pit makes, by the name each library exports. */
#define NVRTC_CALLS(X)                                                                                   \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)        \
    X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)         \
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram)
#define CUBLAS_CALLS(X)                                                                                  \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasGetStatusName)                  \
    X(cublasGemmStridedBatchedEx)
#define CUSPARSE_CALLS(X)                                                                                \
    X(cusparseGetErrorName) X(cusparseCreate) X(cusparseDestroy) X(cusparseSetStream)                    \
    X(cusparseCreateDnMat) X(cusparseDestroyDnMat) X(cusparseCreateCsr) X(cusparseDestroySpMat)          \
    X(cusparseSpMatGetSize) X(cusparseCsrSetPointers) X(cusparseDenseToSparse_bufferSize)                \
    X(cusparseDenseToSparse_analysis) X(cusparseDenseToSparse_convert) X(cusparseSpMM_bufferSize)        \
    X(cusparseSpMM)

#define POINTER(fn) __typeof__(fn) *fn;
static struct {
    NVRTC_CALLS(POINTER)
    CUBLAS_CALLS(POINTER)
    CUSPARSE_CALLS(POINTER)
#if PIT_CUBLAS_GROUPED
    /* optional: NULL where the library lacks it */
    __typeof__(cublasGemmGroupedBatchedEx) *cublasGemmGroupedBatchedEx;
#endif
} api;
#undef POINTER

typedef struct call {
    void *slot; /* &api.fn */
    const char *name;
} call;

#define CALL(fn) {&api.fn, #fn},
static const call nvrtc_calls[] = {NVRTC_CALLS(CALL)};
static const call cublas_calls[] = {CUBLAS_CALLS(CALL)};
static const call cusparse_calls[] = {CUSPARSE_CALLS(CALL)};
#undef CALL

/* Newest first. cuSPARSE kept soname 12 in CUDA 13. */
static const pit_cuda_soname nvrtc_names[] = {{"libnvrtc.so.13", 13}, {"libnvrtc.so.12", 12}};
static const pit_cuda_soname cublas_names[] = {{"libcublas.so.13", 13}, {"libcublas.so.12", 12}};
static const pit_cuda_soname cusparse_names[] = {{"libcusparse.so.12", 12}};

#define COUNT(a) (int)(sizeof a / sizeof a[0])

typedef struct library {
    const char *name;
    const pit_cuda_soname *sonames;
    int nsonames;
    const call *calls;
    int ncalls;
} library;

static const library libraries[PIT_CUDA_LIB_COUNT] = {
    {"NVRTC", nvrtc_names, COUNT(nvrtc_names), nvrtc_calls, COUNT(nvrtc_calls)},
    {"cuBLAS", cublas_names, COUNT(cublas_names), cublas_calls, COUNT(cublas_calls)},
    {"cuSPARSE", cusparse_names, COUNT(cusparse_names), cusparse_calls, COUNT(cusparse_calls)},
};

/* What the first load of each library found; written once under the lock. */
typedef struct outcome {
    int tried, loaded;
    char path[1024];
    char why[1536];
} outcome;

static outcome outcomes[PIT_CUDA_LIB_COUNT];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Every call of l from h (the file path); on a missing one the table is
 * left empty and why names it. */
static int resolve(const library *l, void *h, const char *path, char *why, size_t size)
{
    for (int i = 0; i < l->ncalls; ++i) {
        void *sym = dlsym(h, l->calls[i].name);
        if (!sym) {
            snprintf(why, size, "%s lacks %s (older than pit needs)", path, l->calls[i].name);
            for (int j = 0; j < i; ++j) memset(l->calls[j].slot, 0, sizeof sym);
            return 0;
        }
        memcpy(l->calls[i].slot, &sym, sizeof sym); /* object -> function pointer, as POSIX allows */
    }
    return 1;
}

/* NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR by its soname when it first
 * compiles, which the loader does not look for beside libnvrtc (pip's wheel
 * folders are on no search path). Loaded from there first, it is found by
 * that soname; where it is not there, NVRTC searches as it always does. */
static void load_nvrtc_builtins(const char *nvrtc_path)
{
    const char *slash = strrchr(nvrtc_path, '/');
    int major = 0, minor = 0;
    if (!slash || api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return;
    char file[1200];
    int w = snprintf(file, sizeof file, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - nvrtc_path), nvrtc_path,
                     major, minor);
    if (w > 0 && (size_t)w < sizeof file && access(file, F_OK) == 0 && !dlopen(file, RTLD_NOW | RTLD_LOCAL))
        dlerror(); /* NVRTC reports its own failure when it compiles */
}

/* The library stays loaded when its calls are incomplete: it may have
 * started threads, and it is never used. */
static void load(pit_cuda_lib lib, int max_cuda, outcome *o)
{
    const library *l = &libraries[lib];
    char path[sizeof o->path];
    void *h = pit_cuda_lib_find(l->sonames, l->nsonames, max_cuda, path, sizeof path, o->why, sizeof o->why);
    o->loaded = h && resolve(l, h, path, o->why, sizeof o->why);
    if (o->loaded) memcpy(o->path, path, sizeof path);
#if PIT_CUBLAS_GROUPED
    if (o->loaded && lib == PIT_CUDA_CUBLAS) {
        void *sym = dlsym(h, "cublasGemmGroupedBatchedEx");
        memcpy(&api.cublasGemmGroupedBatchedEx, &sym, sizeof sym);
    }
#endif
    if (o->loaded && lib == PIT_CUDA_NVRTC) load_nvrtc_builtins(path);
}

int pit_cuda_lib_load(pit_cuda_lib lib, int max_cuda, const char **why)
{
    if ((int)lib < 0 || lib >= PIT_CUDA_LIB_COUNT) {
        if (why) *why = "no such library";
        return -1;
    }
    outcome *o = &outcomes[lib];
    pthread_mutex_lock(&load_lock);
    if (!o->tried) load(lib, max_cuda, o);
    o->tried = 1;
    int loaded = o->loaded;
    pthread_mutex_unlock(&load_lock);
    if (why) *why = loaded ? "" : o->why;
    return loaded ? 0 : -1;
}

const char *pit_cuda_lib_path(pit_cuda_lib lib)
{
    if ((int)lib < 0 || lib >= PIT_CUDA_LIB_COUNT) return NULL;
    pthread_mutex_lock(&load_lock);
    const char *path = outcomes[lib].loaded ? outcomes[lib].path : NULL;
    pthread_mutex_unlock(&load_lock);
    return path;
}

int pit_cuda_blas_has_grouped(void)
{
#if PIT_CUBLAS_GROUPED
    pthread_mutex_lock(&load_lock);
    const int has = api.cublasGemmGroupedBatchedEx != NULL;
    pthread_mutex_unlock(&load_lock);
    return has;
#else
    return 0;
#endif
}

const char *pit_cuda_lib_name(pit_cuda_lib lib)
{
    return (int)lib >= 0 && lib < PIT_CUDA_LIB_COUNT ? libraries[lib].name : "?";
}

/* ---- the calls, under the names their headers declare ------------------------------
 * Reached only once pit_cuda_lib_load has loaded their library: the plug-in
 * loads NVRTC and cuBLAS at init and cuSPARSE before a baseline runs. Each
 * definition must match its header's declaration, or the build fails. */

#define FORWARD(type, fn, params, args) \
    type fn params                     \
    {                                  \
        return api.fn args;            \
    }

FORWARD(nvrtcResult, nvrtcVersion, (int *major, int *minor), (major, minor))
FORWARD(const char *, nvrtcGetErrorString, (nvrtcResult result), (result))
FORWARD(nvrtcResult, nvrtcGetNumSupportedArchs, (int *count), (count))
FORWARD(nvrtcResult, nvrtcGetSupportedArchs, (int *archs), (archs))
FORWARD(nvrtcResult, nvrtcCreateProgram,
        (nvrtcProgram * prog, const char *src, const char *name, int count, const char *const *headers,
         const char *const *include_names),
        (prog, src, name, count, headers, include_names))
FORWARD(nvrtcResult, nvrtcCompileProgram, (nvrtcProgram prog, int count, const char *const *options),
        (prog, count, options))
FORWARD(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log))
FORWARD(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram prog, size_t *size), (prog, size))
FORWARD(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin))
FORWARD(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))

FORWARD(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
FORWARD(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
FORWARD(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
FORWARD(const char *, cublasGetStatusName, (cublasStatus_t status), (status))
FORWARD(cublasStatus_t, cublasGemmStridedBatchedEx,
        (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
         const void *alpha, const void *A, cudaDataType Atype, int lda, long long int strideA, const void *B,
         cudaDataType Btype, int ldb, long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
         long long int strideC, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo),
        (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
         strideC, batch, compute, algo))

#if PIT_CUBLAS_GROUPED
/* Only where pit_cuda_blas_has_grouped() says the library has it */
FORWARD(cublasStatus_t, cublasGemmGroupedBatchedEx,
        (cublasHandle_t handle, const cublasOperation_t transa_array[], const cublasOperation_t transb_array[],
         const int m_array[], const int n_array[], const int k_array[], const void *alpha_array,
         const void *const Aarray[], cudaDataType_t Atype, const int lda_array[], const void *const Barray[],
         cudaDataType_t Btype, const int ldb_array[], const void *beta_array, void *const Carray[],
         cudaDataType_t Ctype, const int ldc_array[], int group_count, const int group_size[],
         cublasComputeType_t computeType),
        (handle, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray, Atype, lda_array, Barray,
         Btype, ldb_array, beta_array, Carray, Ctype, ldc_array, group_count, group_size, computeType))
#endif

FORWARD(const char *, cusparseGetErrorName, (cusparseStatus_t status), (status))
FORWARD(cusparseStatus_t, cusparseCreate, (cusparseHandle_t * handle), (handle))
FORWARD(cusparseStatus_t, cusparseDestroy, (cusparseHandle_t handle), (handle))
FORWARD(cusparseStatus_t, cusparseSetStream, (cusparseHandle_t handle, cudaStream_t stream), (handle, stream))
FORWARD(cusparseStatus_t, cusparseCreateDnMat,
        (cusparseDnMatDescr_t * descr, int64_t rows, int64_t cols, int64_t ld, void *values, cudaDataType type,
         cusparseOrder_t order),
        (descr, rows, cols, ld, values, type, order))
FORWARD(cusparseStatus_t, cusparseDestroyDnMat, (cusparseConstDnMatDescr_t descr), (descr))
FORWARD(cusparseStatus_t, cusparseCreateCsr,
        (cusparseSpMatDescr_t * descr, int64_t rows, int64_t cols, int64_t nnz, void *offsets, void *columns,
         void *values, cusparseIndexType_t offsets_type, cusparseIndexType_t columns_type, cusparseIndexBase_t base,
         cudaDataType type),
        (descr, rows, cols, nnz, offsets, columns, values, offsets_type, columns_type, base, type))
FORWARD(cusparseStatus_t, cusparseDestroySpMat, (cusparseConstSpMatDescr_t descr), (descr))
FORWARD(cusparseStatus_t, cusparseSpMatGetSize,
        (cusparseConstSpMatDescr_t descr, int64_t *rows, int64_t *cols, int64_t *nnz), (descr, rows, cols, nnz))
FORWARD(cusparseStatus_t, cusparseCsrSetPointers,
        (cusparseSpMatDescr_t descr, void *offsets, void *columns, void *values), (descr, offsets, columns, values))
FORWARD(cusparseStatus_t, cusparseDenseToSparse_bufferSize,
        (cusparseHandle_t handle, cusparseConstDnMatDescr_t a, cusparseSpMatDescr_t b, cusparseDenseToSparseAlg_t alg,
         size_t *size),
        (handle, a, b, alg, size))
FORWARD(cusparseStatus_t, cusparseDenseToSparse_analysis,
        (cusparseHandle_t handle, cusparseConstDnMatDescr_t a, cusparseSpMatDescr_t b, cusparseDenseToSparseAlg_t alg,
         void *buffer),
        (handle, a, b, alg, buffer))
FORWARD(cusparseStatus_t, cusparseDenseToSparse_convert,
        (cusparseHandle_t handle, cusparseConstDnMatDescr_t a, cusparseSpMatDescr_t b, cusparseDenseToSparseAlg_t alg,
         void *buffer),
        (handle, a, b, alg, buffer))
FORWARD(cusparseStatus_t, cusparseSpMM_bufferSize,
        (cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b, const void *alpha,
         cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b, const void *beta, cusparseDnMatDescr_t c,
         cudaDataType compute, cusparseSpMMAlg_t alg, size_t *size),
        (handle, op_a, op_b, alpha, a, b, beta, c, compute, alg, size))
FORWARD(cusparseStatus_t, cusparseSpMM,
        (cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b, const void *alpha,
         cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b, const void *beta, cusparseDnMatDescr_t c,
         cudaDataType compute, cusparseSpMMAlg_t alg, void *buffer),
        (handle, op_a, op_b, alpha, a, b, beta, c, compute, alg, buffer))
