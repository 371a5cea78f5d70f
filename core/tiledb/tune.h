/*
 * core/tiledb/tune.h - what the parts of pit_tune share (tune.c, tune_measure.c,
 * tune_gathered.c): device tensors of random values and index buffers.
 */
#ifndef PIT_CORE_TUNE_H
#define PIT_CORE_TUNE_H

#include "internal.h"

/* Timed calls a measurement takes at the most. */
#define TUNE_REPEATS(r) ((r) < 32 ? (r) : 32)

/* A contiguous device tensor of random values, never zero (so every
 * micro-tile of it is non-zero); d->mem is allocated, the caller frees it. */
pit_status tune_tensor(pit_context *ctx, void *bs, pit_dtype dt, int rank, const int64_t *shape,
                       pit_rng *rng, pit_tdesc *d);
pit_status tune_matrix(pit_context *ctx, void *bs, pit_dtype dt, int64_t r, int64_t c,
                       pit_rng *rng, pit_tdesc *d);

/* Device buffers of an index whose groups and capacity are set. */
pit_status tune_index(pit_context *ctx, pit_index *x);
/* Gives back the n device buffers (NULL ones skipped) once the work on bs is done. */
void tune_free_buffers(pit_context *ctx, void *bs, void *const *bufs, size_t n);

/* Measures a "moe" or "rows" entry in place through the backend's real
 * gathered GEMM (moe_matmul, matmul_rows) with every row listed: a routed MoE
 * problem where every token-slot is routed, a row-sparse one with no empty
 * row. PIT_ERR_UNSUPPORTED when the backend has no such kernel. */
pit_status tune_gathered(pit_context *ctx, pit_tiledb_entry *e, int64_t size, int repeats,
                         pit_rng *rng);

/* Measures a "stream" entry in place (tune_stream.c): the decode regime at
 * e->tile.bm rows of x, on a problem of side `side`. */
pit_status tune_stream(pit_context *ctx, pit_tiledb_entry *e, int64_t side, int repeats, pit_rng *rng);

#endif /* PIT_CORE_TUNE_H */
