/*
 * cuda_internal.h - the CUDA backend's context, stream and kernel-cache
 * types, shared by its host files. Nothing outside backends/cuda sees them.
 */
#ifndef PIT_CUDA_INTERNAL_H
#define PIT_CUDA_INTERNAL_H

#include <pthread.h>

#include "cuda_driver.h"
#include "cuda_kernels.h"

/* One JIT-compiled kernel, cached per context. */
typedef struct pit_cuda_kernel {
    pit_kernel_link link; /* first: key (name + defines) and the context's list */
    CUmodule module;
    CUfunction fn;
    int smem_bytes; /* dynamic shared memory the kernel needs */
    int pairs_held; /* clusters of 2 CTAs the device holds at once (0: not asked yet, -1: none) */
} pit_cuda_kernel;

typedef struct pit_cuda_ctx {
    int index;
    CUdevice dev;
    CUcontext ctx; /* the device's primary context, retained */
    int arch;      /* 90 for sm_90 */
    int sm_count;
    int smem_optin; /* max dynamic shared memory per block */
    pit_switches switches; /* the context's experimental switches */
    pthread_mutex_t lock; /* guards kernels and blas */
    pit_kernel_link *kernels;
    void *blas; /* cublasHandle_t, created on first dense call */
    void *sparse; /* cusparseHandle_t, created on first baseline call (cuda_baselines.c) */
} pit_cuda_ctx;

typedef struct pit_cuda_stream {
    CUstream s;
    int owned;
} pit_cuda_stream;

struct pit_event {
    CUevent e;
};

/* Makes the context current on this thread for the duration of a call. */
pit_status pit_cuda_push(pit_cuda_ctx *c);
void pit_cuda_pop(void);

/* The compiled kernel of a variant: memory cache, then disk cache, then
 * NVRTC. The context must be current. */
pit_status pit_cuda_get_kernel(pit_cuda_ctx *c, const pit_cuda_variant *v, pit_cuda_kernel **out);
void pit_cuda_free_kernels(pit_cuda_ctx *c);

/* Launches with grid/block and one by-value argument struct. */
pit_status pit_cuda_launch(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                           unsigned threads, void *args, const char *what);

/* Clusters of 2 CTAs of k (`threads` each) the device holds at once; 0
 * where the driver cannot launch clusters. */
int pit_cuda_pair_capacity(pit_cuda_kernel *k, unsigned threads);
/* Launches clusters of `size` CTAs along x (gx a multiple of size). */
pit_status pit_cuda_launch_clusters(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned size,
                                    unsigned threads, void *args, const char *what);

/* ---- operations (cuda_ops.c) */
pit_status pit_cuda_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n);
/* Zeroes one index's counts and total (what detect does first). */
pit_status pit_cuda_zero_index(CUstream s, const pit_index *idx);
pit_status pit_cuda_matmul_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, int worst_case_grid, const pit_tdesc *A,
                                  const pit_tdesc *B, const pit_tdesc *C);
pit_status pit_cuda_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                 const pit_tdesc *C);
void pit_cuda_blas_destroy(pit_cuda_ctx *c);

/* ---- baselines for pit bench (cuda_baselines.c): copy, cuSPARSE */
pit_status pit_cuda_mem_copy(void *bctx, void *stream, void *dst, size_t dst_offset, const void *src,
                             size_t src_offset, size_t bytes);
pit_status pit_cuda_vendor_sparse_matmul(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                         const pit_tdesc *C, double *convert_ms, double *compute_ms);
pit_status pit_cuda_vendor_convert(void *bctx, void *stream, const pit_tdesc *A, int block, double *ms);
const char *pit_cuda_vendor_sparse_name(void *bctx);
void pit_cuda_sparse_destroy(pit_cuda_ctx *c);

/* Keeps the default pool's memory between calls (cuda_ops.c); called once
 * per context at creation. */
void pit_cuda_keep_pool_memory(const pit_cuda_ctx *c);

#endif /* PIT_CUDA_INTERNAL_H */
