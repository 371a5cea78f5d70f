/*
 * shim/cublas_v2.h - stands in for cuBLAS's header when the HIP plug-in
 * compiles backends/cuda/ops/matmul.c: the few cuBLAS names it uses are
 * declared by hip_shim.h (force-included first) and implemented over
 * rocBLAS in hip_blas.c.
 */
#ifndef PIT_HIP_SHIM_H
#error "ops/matmul.c is compiled by the HIP plug-in only with -include hip_shim.h"
#endif
