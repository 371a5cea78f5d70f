/*
 * tests/fuzz/fuzz_plugin.c - libFuzzer target: hostile plug-in tables. The
 * input builds a backend table (ABI version, name, which entries are set)
 * whose entries return fuzzed statuses and fuzzed data (device counts,
 * device descriptions with unterminated strings and path-like family names,
 * bytes read back from "device" memory), installs it in the "cuda" slot with
 * the checks a loaded file gets (pit_debug_install_backend), and drives the
 * public API through it. Properties:
 *  - a table with a wrong ABI or name, or a required entry NULL, is refused
 *    with PIT_ERR_BACKEND_INVALID before any entry is called;
 *  - core never calls a NULL entry, never reads past a string the plug-in
 *    filled, never asks for memory outside an allocation it made, frees every
 *    handle it got exactly once (ASan, LeakSanitizer), and every failure
 *    carries a message and a known status.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "fuzz_input.h"
#include "pit_testing.h"

static fz g_in;
static const pit_host *g_host;

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_plugin: property violated: %s (last error: %s)\n", what,
            pit_last_error());
    abort();
}

/* Mostly success; otherwise a failure with a message, as a plug-in must give. */
static pit_status fuzzed_status(const char *entry)
{
    uint8_t b = fz_u8(&g_in);
    if (b < 200)
        return PIT_SUCCESS;
    static const pit_status failures[] = {PIT_ERR_BACKEND, PIT_ERR_OUT_OF_MEMORY,
                                          PIT_ERR_UNSUPPORTED, PIT_ERR_NO_DEVICE,
                                          PIT_ERR_COMPILE, PIT_ERR_INVALID_ARGUMENT};
    pit_status s = failures[b % (sizeof failures / sizeof failures[0])];
    return g_host->error(s, "fuzzed %s failure", entry);
}

/* Device memory is host memory with its size in front, so a copy outside an
 * allocation is caught here, not only by ASan. */
typedef struct fake_mem {
    size_t bytes;
    unsigned char data[];
} fake_mem;

static void check_range(const void *mem, size_t offset, size_t bytes)
{
    const fake_mem *m = mem;
    if (!m || offset > m->bytes || bytes > m->bytes - offset)
        fail("a copy outside the allocation");
}

static pit_status fake_init(const pit_host *host)
{
    g_host = host;
    uint8_t b = fz_u8(&g_in);
    if (b >= 240)
        return PIT_ERR_NO_DEVICE; /* silent: core must add a message */
    return b >= 224 ? fuzzed_status("init") : PIT_SUCCESS;
}

static pit_status fake_device_count(int *count)
{
    uint8_t b = fz_u8(&g_in);
    *count = b < 128 ? 1 + b % 3 : b < 192 ? 0 : b < 224 ? -(int)b : (int)fz_u64(&g_in);
    return fuzzed_status("device_count");
}

/* Fills the whole description with input bytes: unterminated strings, family
 * names with '/' and "..", any numbers. */
static pit_status fake_device_info(int index, pit_device_info *info)
{
    (void)index;
    unsigned char *p = (unsigned char *)info;
    for (size_t i = 0; i < sizeof *info; i++)
        p[i] = fz_u8(&g_in);
    if (fz_u8(&g_in) & 1)
        snprintf(info->tiledb_family, sizeof info->tiledb_family, "../../../etc/passwd");
    return fuzzed_status("device_info");
}

static pit_status fake_context_create(int index, const pit_switches *switches, void **bctx)
{
    (void)index, (void)switches;
    pit_status s = fuzzed_status("context_create");
    *bctx = s == PIT_SUCCESS ? malloc(1) : NULL;
    return s;
}

static void fake_release(void *bctx)
{
    free(bctx);
}

static pit_status fake_stream_create(void *bctx, void **stream)
{
    (void)bctx;
    pit_status s = fuzzed_status("stream_create");
    *stream = s == PIT_SUCCESS ? malloc(1) : NULL;
    return s;
}

static pit_status fake_stream_wrap(void *bctx, void *native, void **stream)
{
    (void)native;
    return fake_stream_create(bctx, stream);
}

static void fake_free_handle(void *bctx, void *handle)
{
    (void)bctx;
    free(handle);
}

static pit_status fake_sync(void *bctx, void *stream)
{
    (void)bctx, (void)stream;
    return fuzzed_status("stream_synchronize");
}

static pit_status fake_alloc(void *bctx, size_t bytes, void **mem)
{
    (void)bctx;
    *mem = NULL;
    pit_status s = fuzzed_status("mem_alloc");
    if (s != PIT_SUCCESS)
        return s;
    if (bytes > ((size_t)64 << 20))
        return g_host->error(PIT_ERR_OUT_OF_MEMORY, "fake device: %zu bytes", bytes);
    fake_mem *m = malloc(sizeof *m + bytes);
    if (!m)
        return g_host->error(PIT_ERR_OUT_OF_MEMORY, "fake device: host memory");
    m->bytes = bytes;
    *mem = m;
    return PIT_SUCCESS;
}

static pit_status fake_write(void *bctx, void *stream, void *mem, size_t offset, const void *host,
                             size_t bytes)
{
    (void)bctx, (void)stream;
    check_range(mem, offset, bytes);
    memcpy(((fake_mem *)mem)->data + offset, host, bytes);
    return fuzzed_status("mem_write");
}

/* What comes back from the device is input bytes: core must not trust it. */
static pit_status fake_read(void *bctx, void *stream, const void *mem, size_t offset, void *host,
                            size_t bytes)
{
    (void)bctx, (void)stream;
    check_range(mem, offset, bytes);
    for (size_t i = 0; i < bytes; i++)
        ((unsigned char *)host)[i] = fz_u8(&g_in);
    return fuzzed_status("mem_read");
}

static pit_status fake_fill(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern,
                            size_t bytes)
{
    (void)bctx, (void)stream, (void)pattern;
    if (bytes % 4)
        fail("mem_fill32 with a size not a multiple of 4");
    check_range(mem, offset, bytes);
    return fuzzed_status("mem_fill32");
}

static pit_status fake_event_record(void *bctx, void *stream, pit_event **event)
{
    (void)bctx, (void)stream;
    pit_status s = fuzzed_status("event_record");
    *event = s == PIT_SUCCESS ? malloc(1) : NULL;
    return s;
}

static pit_status fake_elapsed(void *bctx, pit_event *start, pit_event *end, double *ms)
{
    (void)bctx, (void)start, (void)end;
    *ms = (double)fz_u8(&g_in) / 7.0;
    return fuzzed_status("event_elapsed_ms");
}

static void fake_event_destroy(void *bctx, pit_event *event)
{
    fake_free_handle(bctx, event);
}

static pit_status fake_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx,
                              int n)
{
    (void)bctx, (void)stream, (void)X, (void)idx, (void)n;
    return fuzzed_status("detect");
}

static pit_status fake_matmul_sparse(void *bctx, void *stream, const pit_tile *tile,
                                     const pit_index *idx, int32_t max_entries,
                                     int worst_case_grid, const pit_tdesc *A, const pit_tdesc *B,
                                     const pit_tdesc *C)
{
    (void)bctx, (void)stream, (void)tile, (void)idx, (void)max_entries, (void)worst_case_grid;
    (void)A, (void)B, (void)C;
    return fuzzed_status("matmul_sparse");
}

static pit_status fake_matmul_dense(void *bctx, void *stream, const pit_tdesc *A,
                                    const pit_tdesc *B, const pit_tdesc *C)
{
    (void)bctx, (void)stream, (void)A, (void)B, (void)C;
    return fuzzed_status("matmul_dense");
}

static pit_status fake_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    (void)bctx, (void)stream, (void)X, (void)Y;
    return fuzzed_status("relu");
}

static const pit_backend complete_table = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "cuda",
    .init = fake_init,
    .device_count = fake_device_count,
    .device_info = fake_device_info,
    .context_create = fake_context_create,
    .context_destroy = fake_release,
    .stream_create = fake_stream_create,
    .stream_wrap = fake_stream_wrap,
    .stream_destroy = fake_free_handle,
    .stream_synchronize = fake_sync,
    .mem_alloc = fake_alloc,
    .mem_free = fake_free_handle,
    .mem_write = fake_write,
    .mem_read = fake_read,
    .mem_fill32 = fake_fill,
    .event_record = fake_event_record,
    .event_elapsed_ms = fake_elapsed,
    .event_destroy = fake_event_destroy,
    .detect = fake_detect,
    .matmul_sparse = fake_matmul_sparse,
    .matmul_dense = fake_matmul_dense,
    .relu = fake_relu,
};

/* The entries the input may clear: the required ones and the optional ones
 * the calls below reach. */
#define ENTRY(e) {offsetof(pit_backend, e), sizeof(((pit_backend *)0)->e)}
static const struct {
    size_t offset, size;
} clearable[] = {
    ENTRY(init),         ENTRY(device_count),     ENTRY(device_info),        ENTRY(context_create),
    ENTRY(context_destroy), ENTRY(stream_create), ENTRY(stream_wrap),       ENTRY(stream_destroy),
    ENTRY(stream_synchronize), ENTRY(mem_alloc),  ENTRY(mem_free),          ENTRY(mem_write),
    ENTRY(mem_read),     ENTRY(mem_fill32),       ENTRY(event_record),       ENTRY(event_elapsed_ms),
    ENTRY(event_destroy), ENTRY(detect),          ENTRY(matmul_sparse),      ENTRY(matmul_dense),
    ENTRY(relu),
};

/* The complete table, with a few entries NULL and maybe a wrong ABI or name
 * when the input says so. */
static void build_table(pit_backend *be)
{
    *be = complete_table;
    uint8_t how = fz_u8(&g_in);
    if (how >= 248)
        be->abi_version = (uint32_t)fz_u64(&g_in);
    else if (how >= 240)
        be->name = how & 1 ? "opencl" : NULL;
    if (how < 200)
        return;
    size_t n = sizeof clearable / sizeof clearable[0];
    for (int k = fz_u8(&g_in) % 4; k > 0; k--) {
        size_t i = fz_u8(&g_in) % n;
        memset((char *)be + clearable[i].offset, 0, clearable[i].size);
    }
}

static void check_status(pit_status s)
{
    if ((int)s < PIT_SUCCESS || s > PIT_ERR_INTERNAL)
        fail("an unknown status");
    if (s != PIT_SUCCESS && !pit_last_error()[0])
        fail("a failure without a message");
}

/* A PIT matmul: detection, index counts read back (input bytes here, which
 * core must bound before it uses them), selection, the kernels. */
static void multiply(pit_context *ctx, pit_stream *stream, pit_tensor *a, pit_tensor *c)
{
    pit_matmul_options opt = pit_matmul_options_default();
    uint8_t how = fz_u8(&g_in);
    opt.sparse = how & 1 ? PIT_SPARSE_B : PIT_SPARSE_A;
    opt.fixed_plan = (how >> 1) & 1;
    pit_report report;
    for (int call = 0; call < 1 + how % 3; call++)
        check_status(pit_matmul(ctx, stream, a, a, c, &opt, &report));
}

static void use_tensor(pit_context *ctx, pit_stream *stream)
{
    int64_t shape[2] = {1 + fz_u8(&g_in) % 9, 1 + fz_u8(&g_in) % 9};
    pit_tensor *x = NULL, *y = NULL;
    pit_status s = pit_tensor_create(ctx, PIT_F32, 2, shape, &x);
    check_status(s);
    if (s != PIT_SUCCESS)
        return;
    float host[81];
    for (int i = 0; i < 81; i++)
        host[i] = (float)(i % 7) - 3.0f;
    size_t bytes = (size_t)(shape[0] * shape[1]) * sizeof(float);
    check_status(pit_tensor_upload(x, stream, host, bytes));
    check_status(pit_tensor_download(x, stream, host, bytes));
    check_status(pit_tensor_zero(x, stream));
    s = pit_tensor_create(ctx, PIT_F32, 2, shape, &y);
    check_status(s);
    if (s == PIT_SUCCESS) {
        check_status(pit_relu(ctx, stream, x, y));
        if (shape[0] == shape[1])
            multiply(ctx, stream, x, y);
        check_status(pit_tensor_destroy(y));
    }
    check_status(pit_tensor_destroy(x));
}

static void use_context(pit_context *ctx)
{
    pit_device_info info;
    check_status(pit_context_get_info(ctx, &info));
    if (!memchr(info.name, 0, sizeof info.name) || !memchr(info.arch, 0, sizeof info.arch) ||
        !memchr(info.tiledb_family, 0, sizeof info.tiledb_family) || strchr(info.tiledb_family, '/'))
        fail("a device description core did not check");
    pit_stream *stream = NULL;
    pit_status s = fz_u8(&g_in) & 1 ? pit_stream_create(ctx, &stream)
                                     : pit_stream_wrap(ctx, &g_in, &stream);
    check_status(s);
    use_tensor(ctx, s == PIT_SUCCESS ? stream : NULL);
    pit_event *a = NULL, *b = NULL;
    if (pit_event_record(ctx, stream, &a) == PIT_SUCCESS &&
        pit_event_record(ctx, stream, &b) == PIT_SUCCESS) {
        double ms = 0;
        check_status(pit_event_elapsed_ms(a, b, &ms));
    }
    pit_event_destroy(a);
    pit_event_destroy(b);
    if (stream) {
        check_status(pit_synchronize(ctx, stream));
        check_status(pit_stream_destroy(stream));
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[256];
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/pit-fuzz-plugin-XXXXXX", tmp);
    if (!mkdtemp(dir))
        fail("mkdtemp");
    setenv("PIT_CACHE_DIR", dir, 1); /* no tuned tile database there */
    unsetenv("PIT_TILEDB");
    unsetenv("PIT_LOG");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_in.p = data;
    g_in.n = size;
    static pit_backend table; /* must outlive the contexts: one input at a time */
    build_table(&table);
    pit_status s = pit_debug_install_backend("cuda", &table);
    check_status(s);
    int count = 0;
    check_status(pit_device_count("cuda", &count));
    if (count < 0)
        fail("a negative device count");
    pit_device_info info;
    check_status(pit_device_get_info("cuda", 0, &info));
    pit_context *ctx = NULL;
    s = pit_context_create("cuda", 0, &ctx);
    check_status(s);
    if ((s == PIT_SUCCESS) != (ctx != NULL))
        fail("a context handle that disagrees with the status");
    if (ctx) {
        use_context(ctx);
        check_status(pit_context_destroy(ctx));
    }
    return 0;
}
