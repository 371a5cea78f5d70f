/*
 * core/reference.h - CPU references of every operator (double accumulation)
 * and the dtype conversions they need. Built into the static library
 * pit_reference that tests, tools and examples link; not part of pit.h.
 */
#ifndef PIT_CORE_REFERENCE_H
#define PIT_CORE_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "pit.h"

/* IEEE half and bfloat16 (round to nearest even, NaN/Inf preserved). */
float pit_f16_to_f32(uint16_t h);
uint16_t pit_f32_to_f16(float f);
float pit_bf16_to_f32(uint16_t h);
uint16_t pit_f32_to_bf16(float f);

/* Converts n elements between a dtype's storage and double. */
void pit_ref_to_double(pit_dtype dtype, const void *src, size_t n, double *dst);
void pit_ref_from_double(pit_dtype dtype, const double *src, size_t n, void *dst);

/* C[b] = A[b] . B[b], contiguous row-major, double accumulation. */
void pit_ref_matmul(int64_t batch, int64_t m, int64_t n, int64_t k,
                    const double *A, const double *B, double *C);

/* ||got - ref|| / max(||ref||, tiny); +inf when got has a NaN/Inf that ref
 * does not have at the same place. */
double pit_ref_rel_error(const double *ref, const double *got, size_t n);

/* Per-dtype tolerance of the conformance suite: f32 1e-4, f16/bf16 1e-2. */
double pit_ref_tolerance(pit_dtype dtype);

/* Seeded generator for test data (xorshift64*), never returning exactly 0. */
typedef struct pit_rng { uint64_t s; } pit_rng;
void pit_rng_seed(pit_rng *r, uint64_t seed);
double pit_rng_uniform(pit_rng *r); /* in [-1, 1] without 0 */
uint64_t pit_rng_next(pit_rng *r);

/* Fills x with seeded values in [-1, 1], none of them zero. */
void pit_ref_fill_random(pit_rng *r, double *x, size_t n);

/* Zeroes whole tr x tc micro-tiles of each rows x cols matrix of a batch, each
 * with probability `sparsity`. The tile grid starts at (-off_r, -off_c) so a
 * non-zero offset gives patterns unaligned to pit's micro-tiles. Returns the
 * fraction of elements now zero. */
double pit_ref_sparsify_tiles(pit_rng *r, double *x, int64_t batch, int64_t rows, int64_t cols,
                              int tr, int tc, int off_r, int off_c, double sparsity);

#endif /* PIT_CORE_REFERENCE_H */
