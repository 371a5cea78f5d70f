/*
 * core/runtime/memory.c - a context's device memory: from the framework's
 * allocator when one is set (pit_context_set_allocator), else from the
 * backend's mem_alloc. Every allocator set stays recorded until the context
 * is destroyed, so a block always goes back to the one that gave it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

struct pit_mem_source {
    pit_allocator user;
    int check_alignment; /* device pointers (CUDA, HIP): 16-byte vector loads */
    struct pit_mem_source *next; /* every source of the context */
};

/* pit_scratch_allocator.alloc over a source; core's own blocks come here too. */
static pit_status source_alloc(void *owner, size_t bytes, void *native_stream, void **mem)
{
    const pit_mem_source *src = owner;
    *mem = NULL;
    if (bytes == 0)
        bytes = 4; /* an empty tensor still gets a handle */
    if (pit_fault_alloc_now())
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "allocator: %zu bytes: injected allocation failure "
                         "(PIT_FAULT_ALLOC)", bytes);
    void *block = src->user.alloc(src->user.user, bytes, native_stream);
    if (!block)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "the context's allocator (pit_context_set_allocator) "
                         "returned no block of %zu bytes", bytes);
    if (src->check_alignment && (uintptr_t)block % 16 != 0) {
        src->user.free(src->user.user, block, native_stream);
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "the context's allocator returned %p for %zu "
                         "bytes: pit needs 16-byte aligned blocks", block, bytes);
    }
    *mem = block;
    return PIT_SUCCESS;
}

static void source_free(void *owner, void *mem, void *native_stream)
{
    const pit_mem_source *src = owner;
    src->user.free(src->user.user, mem, native_stream);
}

const pit_mem_source *pit_mem_source_of(pit_context *ctx)
{
    return atomic_load(&ctx->mem_source);
}

pit_status pit_mem_alloc(pit_context *ctx, const pit_mem_source *from, size_t bytes, void **mem)
{
    if (from)
        return source_alloc((void *)from, bytes, NULL, mem);
    return ctx->be->mem_alloc(ctx->bctx, bytes ? bytes : 4, mem);
}

void pit_mem_free(pit_context *ctx, const pit_mem_source *from, void *mem)
{
    if (!mem)
        return;
    if (from)
        source_free((void *)from, mem, NULL);
    else
        ctx->be->mem_free(ctx->bctx, mem);
}

void pit_mem_wait(pit_context *ctx, const pit_mem_source *from, void *bs)
{
    /* The framework may hand a block back out at once; the backends' own
     * frees wait for the device themselves. */
    if (from && bs && ctx->be->stream_synchronize(ctx->bctx, bs) != PIT_SUCCESS)
        pit_clear_error(); /* a failed device still gets its blocks back */
}

void pit_mem_sources_release(pit_context *ctx)
{
    pit_mem_source *src = ctx->mem_sources;
    while (src) {
        pit_mem_source *next = src->next;
        free(src);
        src = next;
    }
    ctx->mem_sources = NULL;
}

PIT_API pit_status pit_context_set_allocator(pit_context *ctx, const pit_allocator *allocator)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(!allocator || (allocator->alloc && allocator->free), "allocator");
    if (!ctx->be->set_scratch_allocator)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s cannot take its scratch from an "
                         "allocator", ctx->be->name);
    pit_mem_source *src = NULL;
    if (allocator) {
        src = calloc(1, sizeof *src);
        if (!src)
            return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_context_set_allocator: out of host memory");
        src->user = *allocator;
        src->check_alignment = ctx->be->mem_is_pointer;
    }
    pit_scratch_allocator scratch = {source_alloc, source_free, src};
    pit_status s = ctx->be->set_scratch_allocator(ctx->bctx, src ? &scratch : NULL);
    if (s != PIT_SUCCESS) {
        free(src);
        return s;
    }
    pthread_mutex_lock(&ctx->lock);
    if (src) {
        src->next = ctx->mem_sources;
        ctx->mem_sources = src;
    }
    atomic_store(&ctx->mem_source, src);
    pthread_mutex_unlock(&ctx->lock);
    return PIT_SUCCESS;
}
