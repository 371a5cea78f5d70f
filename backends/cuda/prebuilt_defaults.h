/*
 * prebuilt_defaults.h - which kernel variants the CUDA plug-in has built in
 * (PIT_CUDA_PRECOMPILE): the default variants of an architecture, those
 * first calls build on a device with no tuned tile database. For the build
 * tool that compiles them (pit-cuda-precompile) and the tests that check
 * the table: it reads core's tile database and micro-tile candidates, so it
 * is never part of the plug-in.
 */
#ifndef PIT_PREBUILT_DEFAULTS_H
#define PIT_PREBUILT_DEFAULTS_H

#include "cuda_kernels.h"

/* The default variants of sm_<arch>, each once (malloc'd, *count of them):
 *   - every variant of the CI table (pit_cuda_for_each_variant) but the
 *     fused matmul's: detection, compaction, zeroing and conversion for
 *     every dtype, and the operators' kernels;
 *   - the fused matmul of every matmul_k and matmul_m tile of the database
 *     such a device loads (pit_tiledb_open: the shipped family file of the
 *     architecture in tiledb_dir, core's built-in tiles for what it lacks),
 *     for every micro-tile candidate of a sparse A (pit_matmul_candidates)
 *     the tile fits (pit_tile_fits), on 16-byte aligned operands, made by
 *     the rule ops/matmul.c uses (pit_cuda_matmul_variant).
 * NULL, with a message on stderr, when they cannot be listed. Sets the
 * process's environment for the tile database (no $PIT_TILEDB, no cache
 * folder): for tools and tests only. */
pit_cuda_variant *pit_cuda_default_variants(int arch, const char *tiledb_dir, int *count);

#endif /* PIT_PREBUILT_DEFAULTS_H */
