/* core/runtime/stream.c - streams: created, wrapped from the framework's, synchronised. */
#include <stdlib.h>

#include "internal.h"

pit_stream *pit_stream_or_default(pit_context *ctx, pit_stream *s)
{
    return s ? s : &ctx->default_stream;
}

static pit_status new_stream(pit_context *ctx, void *native, pit_stream **out)
{
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(out != NULL, "stream");
    *out = NULL;
    pit_stream *s = calloc(1, sizeof *s);
    if (!s)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_stream_create: out of host memory");
    s->ctx = ctx;
    s->owned = native == NULL;
    pit_status st;
    if (native) {
        if (!ctx->be->stream_wrap) {
            free(s);
            return pit_error(PIT_ERR_UNSUPPORTED, "backend %s cannot wrap native streams",
                             ctx->be->name);
        }
        st = ctx->be->stream_wrap(ctx->bctx, native, &s->bs);
    } else {
        st = ctx->be->stream_create(ctx->bctx, &s->bs);
    }
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    pit_live_count(ctx, PIT_LIVE_STREAM, 1);
    *out = s;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_stream_create(pit_context *ctx, pit_stream **stream)
{
    pit_clear_error();
    return new_stream(ctx, NULL, stream);
}

PIT_API pit_status pit_stream_wrap(pit_context *ctx, void *native_stream, pit_stream **stream)
{
    pit_clear_error();
    PIT_CHECK_ARG(native_stream != NULL, "native_stream");
    return new_stream(ctx, native_stream, stream);
}

PIT_API pit_status pit_stream_destroy(pit_stream *stream)
{
    pit_clear_error();
    if (!stream)
        return PIT_SUCCESS;
    if (stream == &stream->ctx->default_stream)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_stream_destroy: the default stream belongs "
                                                   "to its context");
    pit_plans_release_stream(stream->ctx, stream->bs);
    pit_workspaces_release_stream(stream->ctx, stream->bs);
    stream->ctx->be->stream_destroy(stream->ctx->bctx, stream->bs);
    pit_live_count(stream->ctx, PIT_LIVE_STREAM, -1);
    free(stream);
    return PIT_SUCCESS;
}

PIT_API pit_status pit_synchronize(pit_context *ctx, pit_stream *stream)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "pit_synchronize: stream belongs to another context");
    pit_stream *s = pit_stream_or_default(ctx, stream);
    return ctx->be->stream_synchronize(ctx->bctx, s->bs);
}
