/*
 * cuda_libs.h - the CUDA libraries the plug-in uses besides the driver:
 * NVRTC (every kernel), cuBLAS (the dense GEMM) and cuSPARSE (pit bench's
 * baseline). None is linked: each is found at run time and opened with
 * dlopen, so the plug-in loads wherever they come from (a CUDA toolkit, a
 * distribution's packages, PyTorch's pip wheels), and one that is missing is
 * named in an error rather than failing the plug-in's own load. Their calls
 * keep their names: cuda_libs.c defines each call pit makes, with the
 * prototype of the vendor's header, as a call into the loaded library.
 *
 * Where a library is looked for, the first file that loads winning:
 *   PIT_CUDA_LIB_DIRS set (folders separated by ':'): those folders only.
 *   Otherwise:
 *   1. a supported soname the process has loaded already (PyTorch's);
 *   2. the dynamic loader's search (LD_LIBRARY_PATH, ld.so.cache, /usr/lib);
 *   3. $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64;
 *   4. pip's wheel folders (nvidia/cu13/lib, nvidia/cublas/lib,
 *      nvidia/cusparse/lib, nvidia/cuda_nvrtc/lib) in every site-packages
 *      (or dist-packages) folder the process has loaded a library from.
 * At each place the sonames are tried newest first (libcublas.so.13, then
 * libcublas.so.12), leaving out those of a CUDA newer than the driver.
 */
#ifndef PIT_CUDA_LIBS_H
#define PIT_CUDA_LIBS_H

#include <stddef.h>

typedef enum pit_cuda_lib {
    PIT_CUDA_NVRTC,
    PIT_CUDA_CUBLAS,
    PIT_CUDA_CUSPARSE,
    PIT_CUDA_LIB_COUNT
} pit_cuda_lib;

/* Finds lib and resolves every call pit makes of it, once per process
 * (thread-safe; a later call answers as the first did). max_cuda: the newest
 * CUDA major version whose library may be used (the driver's), 0 for any.
 * Returns 0 when loaded; otherwise nonzero with *why (a string that stays
 * valid) saying which files were looked for where, and why the one that
 * exists did not load ("libnvrtc.so.13, libnvrtc.so.12 not found (searched
 * PIT_CUDA_LIB_DIRS: DIR)"). */
int pit_cuda_lib_load(pit_cuda_lib lib, int max_cuda, const char **why);

/* The file lib was loaded from; NULL until it is. */
const char *pit_cuda_lib_path(pit_cuda_lib lib);

/* "NVRTC", "cuBLAS", "cuSPARSE" */
const char *pit_cuda_lib_name(pit_cuda_lib lib);
/* 1 where the loaded cuBLAS has cublasGemmGroupedBatchedEx (12.5 and
 * later) and the plug-in was built with headers that declare it
 * (PIT_CUBLAS_GROUPED, where cuBLAS's header comes first) */
int pit_cuda_blas_has_grouped(void);
#if defined(CUBLAS_VER_MAJOR) && (CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 5))
#define PIT_CUBLAS_GROUPED 1
#else
#define PIT_CUBLAS_GROUPED 0
#endif

/* ---- the search (cuda_lib_search.c) ----------------------------------------------- */

/* One soname and the CUDA major version it belongs to. */
typedef struct pit_cuda_soname {
    const char *file; /* "libcublas.so.13" */
    int cuda;         /* 13 */
} pit_cuda_soname;

/* Opens the first of names[0..n) found in the places above (RTLD_NOW |
 * RTLD_LOCAL), its file into path; NULL when none loads, the reason in why. */
void *pit_cuda_lib_find(const pit_cuda_soname *names, int n, int max_cuda, char *path, size_t path_size,
                        char *why, size_t why_size);

#endif /* PIT_CUDA_LIBS_H */
