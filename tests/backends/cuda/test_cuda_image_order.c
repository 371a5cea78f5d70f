/*
 * test_cuda_image_order.c - where the CUDA plug-in takes a kernel's binary
 * from, in order: the context's loaded modules, the cubins built into the
 * plug-in, the disk cache, NVRTC; and a binary that does not load gives way
 * to the next source. No driver and no GPU: the plug-in's kernel loading
 * (common/gpu_modules.c, cuda_jit.c) runs against a stub driver table that
 * records what it is asked to load, a stub host whose disk cache lives in
 * memory, and a built-in table of this test's own. NVRTC is real (the
 * disk cache's key names its version, and two cases compile); without it
 * the test is SKIPPED (77).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_compile.h"
#include "cuda_internal.h"
#include "cuda_prebuilt.h"
#include "test_check.h"

#define ARCH 90
#define MAX_ENTRIES 8

/* ---- the stub driver: what was loaded, the blob "BAD..." never loads ---- */
static char loaded[16][16]; /* first bytes of each image asked for, in order */
static int nloaded;

static CUresult stub_load(CUmodule *m, const void *image)
{
    if (nloaded < 16) memcpy(loaded[nloaded++], image, 15);
    if (!memcmp(image, "BAD", 3)) return CUDA_ERROR_INVALID_IMAGE;
    *m = (CUmodule)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}
static CUresult stub_unload(CUmodule m)
{
    (void)m;
    return CUDA_SUCCESS;
}
static CUresult stub_function(CUfunction *f, CUmodule m, const char *name)
{
    (void)m, (void)name;
    *f = (CUfunction)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}
static CUresult stub_global(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name)
{
    (void)p, (void)bytes, (void)m, (void)name;
    return CUDA_ERROR_NOT_FOUND;
}

/* ---- the stub host: errors kept, a disk cache in memory ------------------ */
typedef struct disk_entry {
    char *key;
    char blob[16];
} disk_entry;
static disk_entry disk[MAX_ENTRIES];
static int stored, dropped;
static char last_error[512];

static pit_status stub_error(pit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}
static void stub_log(const char *fmt, ...)
{
    (void)fmt;
}
static disk_entry *disk_find(const char *key)
{
    for (int i = 0; i < MAX_ENTRIES; ++i)
        if (disk[i].key && !strcmp(disk[i].key, key)) return &disk[i];
    return NULL;
}
static void *stub_cache_load(const char *kind, const char *key, size_t *size)
{
    disk_entry *e = disk_find(key);
    char *copy = e && !strcmp(kind, "cuda") ? malloc(sizeof e->blob) : NULL;
    if (copy) memcpy(copy, e->blob, sizeof e->blob), *size = sizeof e->blob;
    return copy;
}
static void stub_cache_store(const char *kind, const char *key, const void *data, size_t size)
{
    (void)kind, (void)data, (void)size;
    ++stored;
    CHECK(!strncmp(key, "nvrtc ", 6), "stored under a key without NVRTC's version");
}
static void stub_cache_drop(const char *kind, const char *key)
{
    (void)kind;
    disk_entry *e = disk_find(key);
    if (e) free(e->key), e->key = NULL;
    ++dropped;
}

/* ---- this test's built-in table -------------------------------------------- */
static pit_cuda_prebuilt table[MAX_ENTRIES];
static int table_count;

const pit_cuda_prebuilt *pit_cuda_prebuilt_table(int *count)
{
    *count = table_count;
    return table;
}

static pit_cuda_variant variant(pit_cuda_kernel_kind kind, pit_dtype dt)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = dt;
    return v;
}

/* a built-in entry for v on arch holding blob, keyed by inputs (NULL: v's) */
static void build_in(const pit_cuda_variant *v, int arch, const char *blob, const char *inputs)
{
    static char labels[MAX_ENTRIES][PIT_CUDA_LABEL_MAX];
    pit_cuda_prebuilt *e = &table[table_count];
    char *own = inputs ? NULL : pit_cuda_variant_inputs(v, ARCH);
    e->arch = arch;
    e->variant = pit_cuda_variant_label(v, labels[table_count], sizeof labels[0]);
    pit_cuda_inputs_digest(inputs ? inputs : own, e->digest);
    e->data = (const unsigned char *)blob;
    e->end = e->data + strlen(blob);
    free(own);
    ++table_count;
}

static void put_on_disk(const pit_cuda_variant *v, const char *blob)
{
    for (int i = 0; i < MAX_ENTRIES; ++i)
        if (!disk[i].key) {
            disk[i].key = pit_cuda_variant_key(v, ARCH);
            snprintf(disk[i].blob, sizeof disk[i].blob, "%s", blob);
            return;
        }
}

/* Gets v's kernel; returns the status, the loads it made into seen
 * ("A|B|"), what was stored and dropped. */
static pit_status get(pit_cuda_ctx *c, const pit_cuda_variant *v, char *seen, size_t size)
{
    nloaded = stored = dropped = 0;
    pit_cuda_kernel *k = NULL;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    seen[0] = 0;
    for (int i = 0; i < nloaded; ++i) {
        size_t at = strlen(seen);
        snprintf(seen + at, size - at, "%.4s|", loaded[i][0] == 0x7f ? "ELF" : loaded[i]);
    }
    return st;
}

int main(void)
{
    const char *why = NULL;
    if (pit_cuda_lib_load(PIT_CUDA_NVRTC, 0, &why) != 0) {
        printf("test_cuda_image_order: SKIPPED: no NVRTC: %s\n", why);
        return 77;
    }
    static const pit_host host = {.error = stub_error,
                                  .log_debug = stub_log,
                                  .cache_load = stub_cache_load,
                                  .cache_store = stub_cache_store,
                                  .cache_drop = stub_cache_drop};
    pit_cuda_host = &host;
    pit_cu.ModuleLoadData = stub_load;
    pit_cu.ModuleUnload = stub_unload;
    pit_cu.ModuleGetFunction = stub_function;
    pit_cu.ModuleGetGlobal = stub_global;
    pit_cuda_ctx c;
    memset(&c, 0, sizeof c);
    c.arch = ARCH;
    c.smem_optin = 227 * 1024;
    pthread_mutex_init(&c.lock, NULL);

    pit_cuda_variant a = variant(PIT_CUDA_ZERO, PIT_F32), b = variant(PIT_CUDA_CONVERT, PIT_F16),
                     cc = variant(PIT_CUDA_CONVERT, PIT_BF16), d = variant(PIT_CUDA_COMPACT, PIT_F32),
                     e = variant(PIT_CUDA_COMPACT, PIT_F16);
    build_in(&a, ARCH, "BUILTIN-A", NULL);
    put_on_disk(&a, "DISK-A");
    build_in(&b, ARCH, "BAD-B", NULL);
    put_on_disk(&b, "DISK-B");
    build_in(&cc, 80, "SM80-C", NULL);         /* another architecture's */
    build_in(&cc, ARCH, "OTHER-C", "other"); /* another text's */
    put_on_disk(&cc, "DISK-C");
    put_on_disk(&e, "BAD-E");

    char seen[256];
    pit_status st = get(&c, &a, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, "BUIL|") && !stored, "built in before the disk cache: %d, %s", st,
          seen);
    st = get(&c, &a, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, ""), "the context's module first: %d, loads %s", st, seen);
    st = get(&c, &b, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, "BAD-|DISK|") && !dropped,
          "a built-in cubin that does not load gives way to the disk cache: %d, %s", st, seen);
    st = get(&c, &cc, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, "DISK|"),
          "entries of another architecture or text stand in for nothing: %d, %s", st, seen);
    st = get(&c, &d, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, "ELF|") && stored == 1,
          "not built in, not cached: NVRTC, then stored: %d, %s, %d stored (%s)", st, seen, stored, last_error);
    st = get(&c, &e, seen, sizeof seen);
    CHECK(st == PIT_SUCCESS && !strcmp(seen, "BAD-|ELF|") && dropped == 1 && stored == 1,
          "a cached cubin that does not load is compiled anew and replaced: %d, %s, %d dropped, %d stored", st,
          seen, dropped, stored);

    pit_cuda_free_kernels(&c);
    pthread_mutex_destroy(&c.lock);
    for (int i = 0; i < MAX_ENTRIES; ++i) free(disk[i].key);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
