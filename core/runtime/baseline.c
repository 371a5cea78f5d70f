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
    pit_live_count(ctx, PIT_LIVE_EVENT, 1);
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
    pit_live_count(e->ctx, PIT_LIVE_EVENT, -1);
    free(e);
    return PIT_SUCCESS;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pit_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

pit_status pit_time_median_us(pit_context *ctx, void *bs, int repeats, pit_device_work work,
                              void *arg, double *median_us)
{
    PIT_TRY(work(arg)); /* warm-up: compiles the kernel, touches the memory */
    double *ms = calloc((size_t)repeats, sizeof *ms);
    if (!ms)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "out of host memory");
    pit_status s = PIT_SUCCESS;
    for (int i = 0; i < repeats && s == PIT_SUCCESS; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        s = ctx->be->event_record(ctx->bctx, bs, &e0);
        if (s == PIT_SUCCESS)
            s = work(arg);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_record(ctx->bctx, bs, &e1);
        if (s == PIT_SUCCESS)
            s = ctx->be->event_elapsed_ms(ctx->bctx, e0, e1, &ms[i]);
        if (e0)
            ctx->be->event_destroy(ctx->bctx, e0);
        if (e1)
            ctx->be->event_destroy(ctx->bctx, e1);
    }
    if (s == PIT_SUCCESS)
        *median_us = pit_median(ms, repeats) * 1e3;
    free(ms);
    return s;
}

typedef struct device_copy {
    pit_context *ctx;
    void *bs, *dst, *src;
    size_t bytes;
} device_copy;

static pit_status copy_once(void *arg)
{
    device_copy *c = arg;
    return c->ctx->be->mem_copy(c->ctx->bctx, c->bs, c->dst, 0, c->src, 0, c->bytes);
}

/* The two buffers of a copy, the source filled with a non-zero pattern:
 * never time on zeros. */
static pit_status copy_buffers_alloc(device_copy *c, const pit_mem_source *from)
{
    pit_status s = pit_mem_alloc(c->ctx, from, c->bytes, &c->src);
    if (s == PIT_SUCCESS)
        s = pit_mem_alloc(c->ctx, from, c->bytes, &c->dst);
    if (s == PIT_SUCCESS)
        s = c->ctx->be->mem_fill32(c->ctx->bctx, c->bs, c->src, 0, 0x3f8ccccdu, c->bytes);
    return s;
}

static void copy_buffers_free(device_copy *c, const pit_mem_source *from)
{
    pit_mem_wait(c->ctx, from, c->bs);
    pit_mem_free(c->ctx, from, c->src);
    pit_mem_free(c->ctx, from, c->dst);
}

static pit_status check_copy_args(const char *fn, pit_context *ctx, size_t bytes, int repeats, const double *gbps)
{
    if (!ctx || !gbps || bytes < 4 || repeats < 1 || repeats > 1000)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is invalid", fn,
                         !ctx ? "ctx" : !gbps ? "gbps" : "bytes/repeats");
    if (!ctx->be->mem_copy || !ctx->be->event_record)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s cannot time device copies", ctx->be->name);
    return PIT_SUCCESS;
}

PIT_API pit_status pit_measure_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats, double *gbps)
{
    pit_clear_error();
    PIT_TRY(check_copy_args("pit_measure_copy_bandwidth", ctx, bytes, repeats, gbps));
    device_copy c = {ctx, ctx->default_stream.bs, NULL, NULL, bytes & ~(size_t)3};
    const pit_mem_source *from = pit_mem_source_of(ctx);
    pit_status s = copy_buffers_alloc(&c, from);
    double us = 0;
    if (s == PIT_SUCCESS)
        s = pit_time_median_us(ctx, c.bs, repeats, copy_once, &c, &us);
    if (s == PIT_SUCCESS)
        *gbps = us > 0 ? 2.0 * (double)c.bytes / (us * 1e-6) / 1e9 : 0.0;
    copy_buffers_free(&c, from);
    return s;
}

/* Copies timed between one pair of events, back and forth. */
#define QUEUED_COPIES 16

/* The fill queued ahead of the timed copies: long enough (tens of
 * microseconds on a GPU at its full write bandwidth, far more on a CPU) for
 * the host to queue every timed copy behind it; at most an eighth of the
 * device's memory. */
static size_t blocker_bytes(const pit_context *ctx, size_t bytes)
{
    const size_t lo = (size_t)16 << 20, hi = (size_t)512 << 20;
    size_t b = bytes > hi / 64 ? hi : bytes * 64;
    if (b < lo)
        b = lo;
    if (ctx->info.global_mem_bytes > 0 && b > ctx->info.global_mem_bytes / 8)
        b = (size_t)(ctx->info.global_mem_bytes / 8);
    return b & ~(size_t)3;
}

/* One round: the fill, one copy that brings both buffers into the cache,
 * then QUEUED_COPIES copies between the events. */
static pit_status time_queued_copies(device_copy *c, void *block, size_t block_bytes, double *ms)
{
    pit_context *ctx = c->ctx;
    pit_status s = ctx->be->mem_fill32(ctx->bctx, c->bs, block, 0, 0x3f8ccccdu, block_bytes);
    if (s == PIT_SUCCESS)
        s = copy_once(c);
    pit_event *e0 = NULL, *e1 = NULL;
    if (s == PIT_SUCCESS)
        s = ctx->be->event_record(ctx->bctx, c->bs, &e0);
    for (int i = 0; i < QUEUED_COPIES && s == PIT_SUCCESS; i++) {
        void *from = i % 2 ? c->dst : c->src, *to = i % 2 ? c->src : c->dst;
        s = ctx->be->mem_copy(ctx->bctx, c->bs, to, 0, from, 0, c->bytes);
    }
    if (s == PIT_SUCCESS)
        s = ctx->be->event_record(ctx->bctx, c->bs, &e1);
    if (s == PIT_SUCCESS)
        s = ctx->be->event_elapsed_ms(ctx->bctx, e0, e1, ms);
    if (e0)
        ctx->be->event_destroy(ctx->bctx, e0);
    if (e1)
        ctx->be->event_destroy(ctx->bctx, e1);
    return s;
}

PIT_API pit_status pit_measure_queued_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats, double *gbps)
{
    pit_clear_error();
    PIT_TRY(check_copy_args("pit_measure_queued_copy_bandwidth", ctx, bytes, repeats, gbps));
    device_copy c = {ctx, ctx->default_stream.bs, NULL, NULL, bytes & ~(size_t)3};
    const pit_mem_source *from = pit_mem_source_of(ctx);
    size_t block_bytes = blocker_bytes(ctx, c.bytes);
    void *block = NULL;
    double *ms = calloc((size_t)repeats, sizeof *ms);
    pit_status s = ms ? copy_buffers_alloc(&c, from) : pit_error(PIT_ERR_OUT_OF_MEMORY, "out of host memory");
    if (s == PIT_SUCCESS)
        s = pit_mem_alloc(ctx, from, block_bytes, &block);
    for (int r = 0; r < repeats && s == PIT_SUCCESS; r++)
        s = time_queued_copies(&c, block, block_bytes, &ms[r]);
    if (s == PIT_SUCCESS) {
        double med = pit_median(ms, repeats);
        *gbps = med > 0 ? 2.0 * (double)c.bytes * QUEUED_COPIES / (med * 1e-3) / 1e9 : 0.0;
    }
    copy_buffers_free(&c, from);
    pit_mem_free(ctx, from, block);
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
