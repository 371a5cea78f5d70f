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

/* NVRTC's options for v on sm_<arch> (the architecture, the language, the
 * defines) into opts, at most max, pointing into archopt and defines, which
 * the caller keeps; returns their count. The build's pre-compiled binaries
 * (precompile.c) are made with these same options. */
#define PIT_CUDA_MAX_OPTIONS 32
int pit_cuda_compile_options(const pit_cuda_variant *v, int arch, char *archopt, size_t archopt_size,
                             char *defines, size_t defines_size, const char **opts, int max);

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
 * the whole text that determines its cubin: NVRTC's version on the first
 * line, then the variant's inputs (below). */
char *pit_cuda_variant_key(const pit_cuda_variant *v, int arch);
/* The inputs of v on sm_<arch> (malloc'd; NULL without memory): the options
 * (architecture, language, defines), every header with its name, the
 * kernel's name and source; everything but the compiler. Needs no NVRTC.
 * The built-in binaries are found by these (cuda_prebuilt.h). */
char *pit_cuda_variant_inputs(const pit_cuda_variant *v, int arch);
/* The inputs part of a key of pit_cuda_variant_key (a pointer into key). */
const char *pit_cuda_key_inputs(const char *key);

#endif /* PIT_CUDA_COMPILE_H */
