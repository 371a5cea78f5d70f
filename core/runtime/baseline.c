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

/* Median of `repeats` timings of work between two events; before, when
 * given, is queued ahead of each timing and not timed. */
static pit_status time_median_us(pit_context *ctx, void *bs, int repeats, pit_device_work before,
                                 pit_device_work work, void *arg, double *median_us)
{
    PIT_TRY(work(arg)); /* warm-up: compiles the kernel, touches the memory */
    double *ms = calloc((size_t)repeats, sizeof *ms);
    if (!ms)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "out of host memory");
    pit_status s = PIT_SUCCESS;
    for (int i = 0; i < repeats && s == PIT_SUCCESS; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        if (before)
            s = before(arg);
        if (s == PIT_SUCCESS)
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

pit_status pit_time_median_us(pit_context *ctx, void *bs, int repeats, pit_device_work work,
                              void *arg, double *median_us)
{
    return time_median_us(ctx, bs, repeats, NULL, work, arg, median_us);
}

/* Copies timed between one pair of events by
 * pit_measure_queued_copy_bandwidth, back and forth. */
#define QUEUED_COPIES 16

typedef struct device_copy {
    pit_context *ctx;
    void *bs, *dst, *src;
    size_t bytes;
    void *block; /* queued copies: what the fill ahead of each timing writes */
    size_t block_bytes;
} device_copy;

static pit_status copy_once(void *arg)
{
    device_copy *c = arg;
    return c->ctx->be->mem_copy(c->ctx->bctx, c->bs, c->dst, 0, c->src, 0, c->bytes);
}

static pit_status copy_back_and_forth(void *arg)
{
    device_copy *c = arg;
    pit_status s = PIT_SUCCESS;
    for (int i = 0; i < QUEUED_COPIES && s == PIT_SUCCESS; i++)
        s = c->ctx->be->mem_copy(c->ctx->bctx, c->bs, i % 2 ? c->src : c->dst, 0, i % 2 ? c->dst : c->src, 0,
                                 c->bytes);
    return s;
}

/* Ahead of queued copies: a fill that keeps the device busy while the host
 * queues them, then one copy that brings both buffers back into the cache. */
static pit_status fill_then_copy(void *arg)
{
    device_copy *c = arg;
    pit_status s = c->ctx->be->mem_fill32(c->ctx->bctx, c->bs, c->block, 0, 0x3f8ccccdu, c->block_bytes);
    return s == PIT_SUCCESS ? copy_once(c) : s;
}

/* The fill's size: 64x the copy, within 16..512 MB (tens of microseconds on
 * a GPU at its full write bandwidth, far more than the host takes to queue
 * the copies), at most an eighth of the device's memory. */
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

/* Both bandwidth measures: one copy a timing, or QUEUED_COPIES behind a
 * fill. The source is filled with a non-zero pattern: never time on zeros. */
static pit_status measure_copies(const char *fn, pit_context *ctx, size_t bytes, int repeats, int queued,
                                 double *gbps)
{
    pit_clear_error();
    if (!ctx || !gbps || bytes < 4 || repeats < 1 || repeats > 1000)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is invalid", fn,
                         !ctx ? "ctx" : !gbps ? "gbps" : "bytes/repeats");
    if (!ctx->be->mem_copy || !ctx->be->event_record)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s cannot time device copies", ctx->be->name);
    device_copy c = {ctx, ctx->default_stream.bs, NULL, NULL, bytes & ~(size_t)3, NULL, 0};
    const pit_mem_source *from = pit_mem_source_of(ctx);
    pit_status s = pit_mem_alloc(ctx, from, c.bytes, &c.src);
    if (s == PIT_SUCCESS)
        s = pit_mem_alloc(ctx, from, c.bytes, &c.dst);
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_fill32(ctx->bctx, c.bs, c.src, 0, 0x3f8ccccdu, c.bytes);
    if (s == PIT_SUCCESS && queued) {
        c.block_bytes = blocker_bytes(ctx, c.bytes);
        s = pit_mem_alloc(ctx, from, c.block_bytes, &c.block);
    }
    double us = 0;
    if (s == PIT_SUCCESS)
        s = time_median_us(ctx, c.bs, repeats, queued ? fill_then_copy : NULL,
                           queued ? copy_back_and_forth : copy_once, &c, &us);
    if (s == PIT_SUCCESS)
        *gbps = us > 0 ? 2.0 * (double)c.bytes * (queued ? QUEUED_COPIES : 1) / (us * 1e-6) / 1e9 : 0.0;
    pit_mem_wait(ctx, from, c.bs);
    pit_mem_free(ctx, from, c.src);
    pit_mem_free(ctx, from, c.dst);
    pit_mem_free(ctx, from, c.block);
    return s;
}

PIT_API pit_status pit_measure_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats, double *gbps)
{
    return measure_copies("pit_measure_copy_bandwidth", ctx, bytes, repeats, 0, gbps);
}

PIT_API pit_status pit_measure_queued_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats, double *gbps)
{
    return measure_copies("pit_measure_queued_copy_bandwidth", ctx, bytes, repeats, 1, gbps);
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
