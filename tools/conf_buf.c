/*
 * tools/conf_buf.c - what the operator suites' cases share: a device tensor
 * with its host copy in doubles, the comparison of an output with its
 * reference, and the recording of a call's status.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

const pit_dtype conf_dtypes[3] = {PIT_F32, PIT_F16, PIT_BF16};

static size_t numel(int rank, const int64_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)shape[i];
    return n;
}

pit_status dbuf_make(pit_context *ctx, pit_dtype dt, int rank, const int64_t *shape, dbuf *b)
{
    memset(b, 0, sizeof *b);
    b->n = numel(rank, shape);
    b->h = calloc(b->n + 1, sizeof(double));
    if (!b->h)
        return PIT_ERR_OUT_OF_MEMORY;
    return pit_tensor_create(ctx, dt, rank, shape, &b->t);
}

void dbuf_free(dbuf *b)
{
    pit_tensor_destroy(b->t);
    free(b->h);
    memset(b, 0, sizeof *b);
}

pit_dtype dbuf_dtype(const dbuf *b)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(b->t, &d);
    return d.dtype;
}

pit_status dbuf_random(dbuf *b, pit_rng *rng)
{
    pit_ref_fill_random(rng, b->h, b->n);
    conf_round(dbuf_dtype(b), b->h, b->n);
    return conf_upload(b->t, b->h, b->n);
}

pit_status dbuf_upload(dbuf *b)
{
    conf_round(dbuf_dtype(b), b->h, b->n);
    return conf_upload(b->t, b->h, b->n);
}

void conf_compare(conf_tally *t, const conf_opts *o, const char *what, dbuf *out,
                  const double *ref, pit_dtype dt)
{
    conf_compare_tensor(t, o, what, out->t, out->h, ref, out->n, pit_ref_tolerance(dt));
}

int conf_call_ok(conf_tally *t, const char *what, pit_status s)
{
    if (s != PIT_SUCCESS)
        conf_call_failed(t, what, s);
    return s == PIT_SUCCESS;
}

double *conf_ref_alloc(size_t n)
{
    return calloc(n + 1, sizeof(double));
}

pit_status conf_either(pit_status a, pit_status b)
{
    return a != PIT_ERR_UNSUPPORTED ? a : b;
}
