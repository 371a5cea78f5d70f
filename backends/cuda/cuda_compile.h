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

/* The disk cache's key of v on sm_<arch> (malloc'd; NULL without memory):
 * the whole text that determines its cubin: NVRTC's version, the options
 * (architecture, defines), every header with its name, the kernel's name and
 * source. */
char *pit_cuda_variant_key(const pit_cuda_variant *v, int arch);

#endif /* PIT_CUDA_COMPILE_H */
