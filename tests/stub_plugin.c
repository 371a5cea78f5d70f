/*
 * tests/stub_plugin.c - plug-ins that load and register but cannot be used,
 * for tests/test_plugins.c. Built twice:
 *   PIT_STUB_NULL_ENTRIES: the right ABI version and name ("cuda"), every
 *       entry NULL: core must refuse the table, never call through it;
 *   PIT_STUB_SILENT_INIT: a complete table ("hip") whose init fails without
 *       calling host->error: core must still give a message.
 * Neither ever reaches a device; the entries other than init only fill the
 * table and fail if called.
 */
#include "backend.h"

#if defined(PIT_STUB_NULL_ENTRIES)

static const pit_backend stub_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "cuda",
};

#elif defined(PIT_STUB_SILENT_INIT)

static pit_status silent_init(const pit_host *host)
{
    (void)host;
    return PIT_ERR_BACKEND; /* and no host->error: the point of this stub */
}

static pit_status no_count(int *count)
{
    *count = 0;
    return PIT_ERR_INTERNAL;
}

static pit_status no_info(int index, pit_device_info *info)
{
    (void)index, (void)info;
    return PIT_ERR_INTERNAL;
}

static pit_status no_context(int index, const pit_switches *switches, void **bctx)
{
    (void)index, (void)switches, (void)bctx;
    return PIT_ERR_INTERNAL;
}

static void no_release(void *bctx)
{
    (void)bctx;
}

static pit_status no_stream(void *bctx, void **stream)
{
    (void)bctx, (void)stream;
    return PIT_ERR_INTERNAL;
}

static void no_free(void *bctx, void *handle)
{
    (void)bctx, (void)handle;
}

static pit_status no_sync(void *bctx, void *stream)
{
    (void)bctx, (void)stream;
    return PIT_ERR_INTERNAL;
}

static pit_status no_alloc(void *bctx, size_t bytes, void **mem)
{
    (void)bctx, (void)bytes, (void)mem;
    return PIT_ERR_INTERNAL;
}

static pit_status no_write(void *bctx, void *stream, void *mem, size_t offset, const void *host,
                           size_t bytes)
{
    (void)bctx, (void)stream, (void)mem, (void)offset, (void)host, (void)bytes;
    return PIT_ERR_INTERNAL;
}

static pit_status no_read(void *bctx, void *stream, const void *mem, size_t offset, void *host,
                          size_t bytes)
{
    (void)bctx, (void)stream, (void)mem, (void)offset, (void)host, (void)bytes;
    return PIT_ERR_INTERNAL;
}

static pit_status no_fill(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern,
                          size_t bytes)
{
    (void)bctx, (void)stream, (void)mem, (void)offset, (void)pattern, (void)bytes;
    return PIT_ERR_INTERNAL;
}

static pit_status no_record(void *bctx, void *stream, pit_event **event)
{
    (void)bctx, (void)stream, (void)event;
    return PIT_ERR_INTERNAL;
}

static pit_status no_elapsed(void *bctx, pit_event *start, pit_event *end, double *ms)
{
    (void)bctx, (void)start, (void)end, (void)ms;
    return PIT_ERR_INTERNAL;
}

static void no_event_release(void *bctx, pit_event *event)
{
    (void)bctx, (void)event;
}

static pit_status no_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n)
{
    (void)bctx, (void)stream, (void)X, (void)idx, (void)n;
    return PIT_ERR_INTERNAL;
}

static pit_status no_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                            int32_t max_entries, int worst_case_grid, const pit_tdesc *A,
                            const pit_tdesc *B, const pit_tdesc *C)
{
    (void)bctx, (void)stream, (void)tile, (void)idx, (void)max_entries, (void)worst_case_grid;
    (void)A, (void)B, (void)C;
    return PIT_ERR_INTERNAL;
}

static pit_status no_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                           const pit_tdesc *C)
{
    (void)bctx, (void)stream, (void)A, (void)B, (void)C;
    return PIT_ERR_INTERNAL;
}

static const pit_backend stub_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "hip",
    .init = silent_init,
    .device_count = no_count,
    .device_info = no_info,
    .context_create = no_context,
    .context_destroy = no_release,
    .stream_create = no_stream,
    .stream_destroy = no_free,
    .stream_synchronize = no_sync,
    .mem_alloc = no_alloc,
    .mem_free = no_free,
    .mem_write = no_write,
    .mem_read = no_read,
    .mem_fill32 = no_fill,
    .event_record = no_record,
    .event_elapsed_ms = no_elapsed,
    .event_destroy = no_event_release,
    .detect = no_detect,
    .matmul_sparse = no_sparse,
    .matmul_dense = no_dense,
};

#else
#error "define PIT_STUB_NULL_ENTRIES or PIT_STUB_SILENT_INIT"
#endif

__attribute__((visibility("default"))) const pit_backend *pit_backend_register(const pit_host *host)
{
    (void)host;
    return &stub_backend;
}
