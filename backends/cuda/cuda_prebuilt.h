/*
 * cuda_prebuilt.h - the kernel binaries compiled when the plug-in was built
 * (nvcc, the CMake option PIT_CUDA_PRECOMPILE) and embedded in it: the
 * table the build generates (pit-cuda-precompile embed) and the lookup of a
 * variant's binary. An entry is found by its architecture, its variant
 * ("<kernel> <defines>", the per-context cache's key) and the digest of its
 * inputs (pit_cuda_variant_inputs: options, headers, source), so a binary
 * stands in only for the very text NVRTC would compile.
 */
#ifndef PIT_CUDA_PREBUILT_H
#define PIT_CUDA_PREBUILT_H

#include <stdint.h>

typedef struct pit_cuda_prebuilt {
    int arch;                        /* 90: sm_90 (compiled as sm_90a) */
    const char *variant;             /* "<kernel> <defines>" */
    uint64_t digest[2];              /* pit_cuda_inputs_digest of its inputs */
    const unsigned char *data, *end; /* the cubin */
} pit_cuda_prebuilt;

/* The plug-in's table, generated at build time, and its *count of
 * entries (none without PIT_CUDA_PRECOMPILE). A function, so that a test
 * can link a table of its own. */
const pit_cuda_prebuilt *pit_cuda_prebuilt_table(int *count);

/* 128 bits of the inputs text (FNV-1a 64 from two bases). */
void pit_cuda_inputs_digest(const char *inputs, uint64_t digest[2]);

/* The entry of table[count] for variant on sm_<arch> with these inputs,
 * else NULL. */
const pit_cuda_prebuilt *pit_cuda_prebuilt_find(const pit_cuda_prebuilt *table, int count, int arch,
                                                const char *variant, const char *inputs);

#endif /* PIT_CUDA_PREBUILT_H */
