/* core/runtime/baseline.c - device events and the baselines pit bench compares with. */
#include <stdlib.h>

#include "internal.h"

/* In core, pit_event is this wrapper; in a plug-in the same tag names the
 * backend's own event. Each translation unit sees one definition only. */
struct pit_event {
    pit_context *ctx;
    struct pit_event *be_event; /* the backend's event object */
};

PIT_API pit_status pit_event_record(pit_context *ctx, pit_stream *stream, pit_event **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(out != NULL, "event");
    *out = NULL;
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "pit_event_record: stream belongs to another context");
    if (!ctx->be->event_record)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s has no events", ctx->be->name);
    pit_event *e = calloc(1, sizeof *e);
    if (!e)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_event_record: out of host memory");
    e->ctx = ctx;
    pit_status s = ctx->be->event_record(ctx->bctx, pit_stream_or_default(ctx, stream)->bs, &e->be_event);
    if (s != PIT_SUCCESS) {
        free(e);
        return s;
    }
    *out = e;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_event_elapsed_ms(pit_event *start, pit_event *end, double *ms)
{
    pit_clear_error();
    PIT_CHECK_ARG(start != NULL, "start");
    PIT_CHECK_ARG(end != NULL, "end");
    PIT_CHECK_ARG(ms != NULL, "ms");
    if (start->ctx != end->ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "pit_event_elapsed_ms: events of two contexts");
    pit_context *ctx = start->ctx;
    return ctx->be->event_elapsed_ms(ctx->bctx, start->be_event, end->be_event, ms);
}

PIT_API pit_status pit_event_destroy(pit_event *e)
{
    pit_clear_error();
    if (!e)
        return PIT_SUCCESS;
    e->ctx->be->event_destroy(e->ctx->bctx, e->be_event);
    free(e);
    return PIT_SUCCESS;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

PIT_API pit_status pit_measure_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats, double *gbps)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(gbps != NULL, "gbps");
    PIT_CHECK_ARG(bytes >= 4 && repeats > 0 && repeats <= 1000, "bytes/repeats");
    if (!ctx->be->mem_copy || !ctx->be->event_record)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s cannot time device copies", ctx->be->name);
    bytes &= ~(size_t)3;
    void *src = NULL, *dst = NULL, *bs = ctx->default_stream.bs;
    double *ms = calloc((size_t)repeats, sizeof *ms);
    pit_status s = ms ? PIT_SUCCESS : pit_error(PIT_ERR_OUT_OF_MEMORY, "out of host memory");
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_alloc(ctx->bctx, bytes, &src);
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_alloc(ctx->bctx, bytes, &dst);
    /* Never time on zeros: fill with a non-zero pattern first. */
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_fill32(ctx->bctx, bs, src, 0, 0x3f8ccccdu, bytes);
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_copy(ctx->bctx, bs, dst, 0, src, 0, bytes); /* warm-up */
    for (int i = 0; i < repeats && s == PIT_SUCCESS; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        s = ctx->be->event_record(ctx->bctx, bs, &e0);
        if (s == PIT_SUCCESS)
            s = ctx->be->mem_copy(ctx->bctx, bs, dst, 0, src, 0, bytes);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_record(ctx->bctx, bs, &e1);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_elapsed_ms(ctx->bctx, e0, e1, &ms[i]);
        if (e0)
            ctx->be->event_destroy(ctx->bctx, e0);
        if (e1)
            ctx->be->event_destroy(ctx->bctx, e1);
    }
    if (s == PIT_SUCCESS) {
        qsort(ms, (size_t)repeats, sizeof *ms, cmp_double);
        double med = ms[repeats / 2];
        *gbps = med > 0 ? 2.0 * (double)bytes / (med * 1e-3) / 1e9 : 0.0;
    }
    if (src)
        ctx->be->mem_free(ctx->bctx, src);
    if (dst)
        ctx->be->mem_free(ctx->bctx, dst);
    free(ms);
    return s;
}

PIT_API pit_status pit_vendor_sparse_matmul(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                            const pit_tensor *B, pit_tensor *C, double *convert_ms,
                                            double *compute_ms, const char **name)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(convert_ms != NULL && compute_ms != NULL, "convert_ms/compute_ms");
    PIT_TRY(pit_tensor_check(ctx, A, "A"));
    PIT_TRY(pit_tensor_check(ctx, B, "B"));
    PIT_TRY(pit_tensor_check(ctx, C, "C"));
    if (!ctx->be->vendor_sparse_matmul)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s has no vendor sparse library", ctx->be->name);
    if (name)
        *name = ctx->be->vendor_sparse_name ? ctx->be->vendor_sparse_name(ctx->bctx) : "vendor sparse";
    return ctx->be->vendor_sparse_matmul(ctx->bctx, pit_stream_or_default(ctx, stream)->bs, &A->d,
                                         &B->d, &C->d, convert_ms, compute_ms);
}

PIT_API pit_status pit_vendor_sparse_convert(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                             int block, double *ms)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(ms != NULL, "ms");
    PIT_CHECK_ARG(block >= 1, "block");
    PIT_TRY(pit_tensor_check(ctx, A, "A"));
    if (!ctx->be->vendor_convert)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s has no vendor sparse conversion", ctx->be->name);
    return ctx->be->vendor_convert(ctx->bctx, pit_stream_or_default(ctx, stream)->bs, &A->d, block, ms);
}
