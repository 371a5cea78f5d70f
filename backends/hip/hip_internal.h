/*
 * hip_internal.h - the HIP backend's context, stream, event and kernel
 * types, shared by its host files. Nothing outside backends/hip sees them.
 */
#ifndef PIT_HIP_INTERNAL_H
#define PIT_HIP_INTERNAL_H

#include <pthread.h>

#include "cuda_kernels.h"
#include "hip_api.h"

/* One loaded kernel, cached per context. */
typedef struct pit_hip_kernel {
    pit_kernel_link link; /* first: key (name + defines) and the context's list */
    hipModule_t module;
    hipFunction_t fn;
    int smem_bytes; /* dynamic shared memory (LDS) the kernel needs */
} pit_hip_kernel;

typedef struct pit_hip_ctx {
    int index;
    int dev;        /* = index: HIP names devices by ordinal */
    char gfx[32];   /* "gfx90a": the device's arch without its feature flags */
    int wave;       /* hardware wavefront width: 64 (CDNA), 32 (RDNA) */
    /* 80 when the kernels' matrix step runs on matrix cores (MFMA, WMMA):
     * the shared host code asks "arch >= 80" for tensor-core tiles */
    int arch;
    int sm_count;   /* compute units (the shared code sizes grids by it) */
    int smem_max;   /* LDS bytes per work-group */
    pit_switches switches; /* the context's experimental switches */
    pthread_mutex_t lock; /* guards kernels, blas and sparse */
    pit_kernel_link *kernels;
    void *blas;     /* rocblas_handle, created on first dense call */
    void *sparse;   /* rocsparse_handle, created on first baseline call (hip_sparse.c) */
    char sparse_name[48]; /* "rocSPARSE 2.3.3 CSR", set with the handle */
} pit_hip_ctx;

typedef struct pit_hip_stream {
    hipStream_t s;
    int owned;
} pit_hip_stream;

struct pit_event {
    hipEvent_t e;
};

/* Makes the context's device current on this thread (HIP has no context
 * stack: pop is a no-op kept for the shared code's symmetry). */
pit_status pit_hip_push(pit_hip_ctx *c);
void pit_hip_pop(void);

/* The loaded kernel of a variant: memory cache, then the built-in code
 * objects for the device's arch, then hiprtc when present. */
pit_status pit_hip_get_kernel(pit_hip_ctx *c, const pit_cuda_variant *v, pit_hip_kernel **out);
void pit_hip_free_kernels(pit_hip_ctx *c);
/* hiprtc (hip_rtc.c): variant v, keyed key, compiled for gfx into *code
 * (malloc'd, *size bytes). Needs pit_hiprtc loaded. */
pit_status pit_hip_rtc_compile(const char *gfx, const pit_cuda_variant *v, const char *key, char **code,
                               size_t *size);
/* How many built-in code objects exist for gfx (for pit info / debug). */
int pit_hip_builtin_count(const char *gfx);

/* Launches with grid/block and one by-value argument struct. */
pit_status pit_hip_launch(const pit_hip_kernel *k, hipStream_t s, unsigned gx, unsigned gy, unsigned gz,
                          unsigned threads, void *args, const char *what);

/* ---- hip_shim.c: what lets cuda_ops.c run here */
/* Sets up the host whose errors cuda_ops.c raises (its "cuda" said "hip"). */
void pit_hip_shim_init(const pit_host *host);
/* what, with a CUDA call name at its start replaced by the HIP call made
 * ("cuLaunchKernel(pit_detect)" -> "hipModuleLaunchKernel(pit_detect)"). */
const char *pit_hip_call_name(const char *what, char *buf, size_t size);

/* ---- operations: backends/cuda/cuda_ops.c compiled through hip_shim.h
 * (the model operators, cuda_model_ops.c, register themselves through
 * pit_cuda_register_ops) */
pit_status pit_hip_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n);
pit_status pit_hip_matmul_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                 int32_t max_entries, int worst_case_grid, const pit_tdesc *A,
                                 const pit_tdesc *B, const pit_tdesc *C);
pit_status pit_hip_matmul_blas(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                               const pit_tdesc *C);
void pit_hip_blas_destroy(pit_hip_ctx *c);

/* ---- dense GEMM (hip_dense.c): rocBLAS when found, else pit's own tile */
int pit_hip_have_rocblas(void);
pit_status pit_hip_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                const pit_tdesc *C);
const char *pit_hip_dense_name(void *bctx);

/* ---- rocSPARSE, the vendor sparse baseline of pit bench (hip_sparse.c),
 * found at run time with dlopen */
/* Loads librocsparse.so.0/.so.1/.so once: PIT_SUCCESS, or PIT_ERR_UNSUPPORTED
 * naming the libraries tried with dlerror()'s reasons, or the symbols the
 * library that was found lacks. */
pit_status pit_hip_sparse_load(void);
/* Which of those names was opened (NULL: none could be). */
const char *pit_hip_sparse_library(void);
/* Without a GPU: loads, then checks the descriptor calls against the
 * library (enum values, argument order); a line per check into report. */
pit_status pit_hip_sparse_selfcheck(char *report, size_t size);
pit_status pit_hip_vendor_sparse_matmul(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                        const pit_tdesc *C, double *convert_ms, double *compute_ms);
pit_status pit_hip_vendor_convert(void *bctx, void *stream, const pit_tdesc *A, int block, double *ms);
const char *pit_hip_vendor_sparse_name(void *bctx);
void pit_hip_sparse_destroy(pit_hip_ctx *c);

#endif /* PIT_HIP_INTERNAL_H */
