/*
 * cuda_compile.h - NVRTC compilation of one kernel variant to a cubin.
 * Needs no driver; shared by the plug-in's JIT and pit-nvrtc-check. NVRTC
 * is loaded at run time: call pit_cuda_lib_load(PIT_CUDA_NVRTC, ...)
 * (cuda_libs.h) before anything here.
 */
#ifndef PIT_CUDA_COMPILE_H
#define PIT_CUDA_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_kernels.h"

/* Compiles v for sm_<arch>. On success returns 0 and *cubin (malloc'd,
 * *size bytes), with *log (malloc'd) the compiler's log where it has one
 * (warnings, ptxas's remarks), else NULL. On failure returns the
 * nvrtcResult and, when there is one, *log: "what failed: the compiler's
 * log". */
int pit_cuda_compile(const pit_cuda_variant *v, int arch, char **cubin, size_t *size, char **log);

/* ptxas's remark that it serialised a kernel's wgmma's (e.g. C7518: each
 * waits for the one before, the tensor cores' pipeline gone) in a compile
 * log; NULL when there is none. Such a kernel compiles, runs and is
 * correct, only slower (the MoE GEMM by 4-5% when it happened), which no
 * test sees, so pit-nvrtc-check fails on it. */
const char *pit_cuda_wgmma_serialised(const char *log);

/* Disk-cache key: FNV-1a 64 of the sources, the defines, the arch and the
 * NVRTC version. */
uint64_t pit_cuda_variant_hash(const pit_cuda_variant *v, int arch);

/* FNV-1a 64 of a buffer, continuing from h (start with PIT_FNV_SEED). */
#define PIT_FNV_SEED 1469598103934665603ull
uint64_t pit_fnv1a(uint64_t h, const void *data, size_t size);

#endif /* PIT_CUDA_COMPILE_H */
