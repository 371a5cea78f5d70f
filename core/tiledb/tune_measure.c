/*
 * core/tiledb/tune_measure.c - the measuring tools of pit_tune: device tensors
 * of random values and the median of a kernel's device time.
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tune_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

pit_status tune_time(pit_context *ctx, void *bs, int repeats, tune_run_fn run, void *arg,
                     double *median_us)
{
    PIT_TRY(run(arg)); /* warm-up: compiles the kernel */
    double ms[32];
    int n = repeats < 32 ? repeats : 32;
    for (int i = 0; i < n; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        pit_status s = ctx->be->event_record(ctx->bctx, bs, &e0);
        if (s == PIT_SUCCESS)
            s = run(arg);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_record(ctx->bctx, bs, &e1);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_elapsed_ms(ctx->bctx, e0, e1, &ms[i]);
        if (e0)
            ctx->be->event_destroy(ctx->bctx, e0);
        if (e1)
            ctx->be->event_destroy(ctx->bctx, e1);
        if (s != PIT_SUCCESS)
            return s;
    }
    *median_us = tune_median(ms, n) * 1e3;
    return PIT_SUCCESS;
}
