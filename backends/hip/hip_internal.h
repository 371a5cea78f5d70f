/*
 * hip_internal.h - what the HIP plug-in's own host files share: its vendor
 * header (hip_shim.h: the context, stream and kernel types it shares with
 * the CUDA plug-in), hiprtc, the built-in code objects, the dense GEMM and
 * the rocSPARSE baseline. Nothing outside backends/hip sees it.
 */
#ifndef PIT_HIP_INTERNAL_H
#define PIT_HIP_INTERNAL_H

#include "hip_shim.h"

/* hiprtc (hip_rtc.c): variant v, keyed key, compiled for gfx into *code
 * (malloc'd, *size bytes). Needs pit_hiprtc loaded. */
pit_status pit_hip_rtc_compile(const char *gfx, const pit_cuda_variant *v, const char *key, char **code,
                               size_t *size);
/* How many built-in code objects exist for gfx (for pit info / debug). */
int pit_hip_builtin_count(const char *gfx);

/* ---- dense GEMM (hip_dense.c): rocBLAS when found (pit_hip_matmul_blas,
 * the shared cuBLAS code over hip_blas.c), else pit's own tile */
int pit_hip_have_rocblas(void);
pit_status pit_hip_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                const pit_tdesc *C);
const char *pit_hip_dense_name(void *bctx);

/* ---- rocSPARSE, the vendor sparse baseline of pit bench (hip_sparse.c),
 * found at run time with dlopen; its backend entries are gpu_internal.h's
 * pit_cuda_vendor_*, named pit_hip_vendor_* by hip_shim.h */
/* Loads librocsparse.so.0/.so.1/.so once: PIT_SUCCESS, or PIT_ERR_UNSUPPORTED
 * naming the libraries tried with dlerror()'s reasons, or the symbols the
 * library that was found lacks. */
pit_status pit_hip_sparse_load(void);
/* Which of those names was opened (NULL: none could be). */
const char *pit_hip_sparse_library(void);
/* Without a GPU: loads, then checks the descriptor calls against the
 * library (enum values, argument order); a line per check into report. */
pit_status pit_hip_sparse_selfcheck(char *report, size_t size);

#endif /* PIT_HIP_INTERNAL_H */
