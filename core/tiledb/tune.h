/*
 * core/tiledb/tune.h - what the parts of pit_tune share (tune.c, tune_measure.c,
 * tune_gathered.c): device tensors of random values, timing with device events.
 */
#ifndef PIT_CORE_TUNE_H
#define PIT_CORE_TUNE_H

#include "internal.h"

/* A contiguous device tensor of random values, never zero (so every
 * micro-tile of it is non-zero); d->mem is allocated, the caller frees it. */
pit_status tune_tensor(pit_context *ctx, void *bs, pit_dtype dt, int rank, const int64_t *shape,
                       pit_rng *rng, pit_tdesc *d);
pit_status tune_matrix(pit_context *ctx, void *bs, pit_dtype dt, int64_t r, int64_t c,
                       pit_rng *rng, pit_tdesc *d);

/* Median device time of run(arg) over `repeats` calls (at most 32) after one
 * warm-up call (which compiles the kernel), in microseconds. */
typedef pit_status (*tune_run_fn)(void *arg);
pit_status tune_time(pit_context *ctx, void *bs, int repeats, tune_run_fn run, void *arg,
                     double *median_us);
/* Sorts v[0..n-1] and returns its median. */
double tune_median(double *v, int n);

/* Measures a "moe" or "rows" entry in place through the backend's real
 * gathered GEMM (moe_matmul, matmul_rows) with every row listed: a routed MoE
 * problem where every token-slot is routed, a row-sparse one with no empty
 * row. PIT_ERR_UNSUPPORTED when the backend has no such kernel. */
pit_status tune_gathered(pit_context *ctx, pit_tiledb_entry *e, int64_t size, int repeats,
                         pit_rng *rng);

#endif /* PIT_CORE_TUNE_H */
