/*
 * core/tiledb/tune_measure.c - what pit_tune measures with: device tensors of
 * random values and index buffers.
 */
#include <stdlib.h>
#include <string.h>

#include "tune.h"

pit_status tune_tensor(pit_context *ctx, void *bs, pit_dtype dt, int rank, const int64_t *shape,
                       pit_rng *rng, pit_tdesc *d)
{
    memset(d, 0, sizeof *d);
    d->dtype = dt;
    d->rank = rank;
    int64_t numel = 1;
    for (int i = rank - 1; i >= 0; i--) {
        d->shape[i] = shape[i];
        d->strides[i] = numel;
        numel *= shape[i];
    }
    size_t n = (size_t)numel, es = pit_dtype_size(dt);
    PIT_TRY(pit_mem_alloc(ctx, pit_mem_source_of(ctx), n * es, &d->mem));
    double *x = malloc(n * sizeof(double));
    void *buf = malloc(n * es);
    pit_status s = x && buf ? PIT_SUCCESS : pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tune: host memory");
    if (s == PIT_SUCCESS) {
        pit_ref_fill_random(rng, x, n); /* never zero: every micro-tile is non-zero */
        pit_ref_from_double(dt, x, n, buf);
        s = ctx->be->mem_write(ctx->bctx, bs, d->mem, 0, buf, n * es);
    }
    free(x);
    free(buf);
    return s;
}

pit_status tune_matrix(pit_context *ctx, void *bs, pit_dtype dt, int64_t r, int64_t c,
                       pit_rng *rng, pit_tdesc *d)
{
    const int64_t shape[2] = {r, c};
    return tune_tensor(ctx, bs, dt, 2, shape, rng, d);
}

void tune_free_buffers(pit_context *ctx, void *bs, void *const *bufs, size_t n)
{
    const pit_mem_source *from = pit_mem_source_of(ctx);
    pit_mem_wait(ctx, from, bs);
    for (size_t i = 0; i < n; i++)
        pit_mem_free(ctx, from, bufs[i]);
}

pit_status tune_index(pit_context *ctx, pit_index *x)
{
    const pit_mem_source *from = pit_mem_source_of(ctx);
    PIT_TRY(pit_mem_alloc(ctx, from, (size_t)x->groups * 4, &x->counts));
    PIT_TRY(pit_mem_alloc(ctx, from, (size_t)x->groups * (size_t)x->capacity * 4, &x->entries));
    return pit_mem_alloc(ctx, from, 4, &x->total);
}
