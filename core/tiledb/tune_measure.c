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
    PIT_TRY(ctx->be->mem_alloc(ctx->bctx, n * es, &d->mem));
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

pit_status tune_index(pit_context *ctx, pit_index *x)
{
    PIT_TRY(ctx->be->mem_alloc(ctx->bctx, (size_t)x->groups * 4, &x->counts));
    PIT_TRY(ctx->be->mem_alloc(ctx->bctx, (size_t)x->groups * (size_t)x->capacity * 4,
                               &x->entries));
    return ctx->be->mem_alloc(ctx->bctx, 4, &x->total);
}
