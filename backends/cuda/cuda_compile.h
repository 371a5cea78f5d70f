/*
 * cuda_compile.h - NVRTC compilation of one kernel variant to a cubin.
 * Needs no driver; shared by the plug-in's JIT and pit-nvrtc-check.
 */
#ifndef PIT_CUDA_COMPILE_H
#define PIT_CUDA_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_kernels.h"

/* Compiles v for sm_<arch>. On success returns 0 and *cubin (malloc'd,
 * *size bytes). On failure returns the nvrtcResult and, when there is one,
 * *log (malloc'd): "what failed: the compiler's log". */
int pit_cuda_compile(const pit_cuda_variant *v, int arch, char **cubin, size_t *size, char **log);

/* Disk-cache key: FNV-1a 64 of the sources, the defines, the arch and the
 * NVRTC version. */
uint64_t pit_cuda_variant_hash(const pit_cuda_variant *v, int arch);

/* FNV-1a 64 of a buffer, continuing from h (start with PIT_FNV_SEED). */
#define PIT_FNV_SEED 1469598103934665603ull
uint64_t pit_fnv1a(uint64_t h, const void *data, size_t size);

#endif /* PIT_CUDA_COMPILE_H */
