/*
 * tests/fuzz/fuzz_tiledb.c - libFuzzer target: arbitrary bytes as a tile
 * database file, loaded through the real loader path (PIT_TILEDB names the
 * file; pit_tiledb_open). Properties:
 *  - loading never fails (a malformed file is skipped with a warning) except
 *    for lack of memory, and never crashes, leaks or reads out of bounds;
 *  - every entry kept is valid (ranges the writer also checks);
 *  - what pit_tiledb_write writes from the loaded entries loads back without
 *    a warning, with the same entries in the same order.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static char g_dir[256], g_in[320], g_out[320];

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tiledb: property violated: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/pit-fuzz-tiledb-XXXXXX", tmp);
    if (!mkdtemp(g_dir))
        fail("mkdtemp");
    char cache[300], empty[300];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    snprintf(empty, sizeof empty, "%s/none", g_dir);
    snprintf(g_in, sizeof g_in, "%s/in.tiledb", g_dir);
    snprintf(g_out, sizeof g_out, "%s/out.tiledb", g_dir);
    setenv("PIT_CACHE_DIR", cache, 1); /* no tuned file there */
    setenv("PIT_TILEDB_DIR", empty, 1);
    unsetenv("PIT_LOG");
    return 0;
}

static int entry_ok(const pit_tiledb_entry *e)
{
    const pit_tile *t = &e->tile;
    return memchr(e->device, 0, sizeof e->device) && memchr(e->backend, 0, sizeof e->backend) &&
           e->device[0] && e->backend[0] && (int)e->op >= 0 && e->op < PIT_TILE_OP_COUNT &&
           (e->dtype == PIT_F32 || e->dtype == PIT_F16 || e->dtype == PIT_BF16) &&
           t->bm >= 1 && t->bm <= 1024 && t->bn >= 1 && t->bn <= 1024 && t->bk >= 1 &&
           t->bk <= 1024 && t->threads >= 1 && t->threads <= 4096 && t->stages >= 1 &&
           t->stages <= 16 && (t->tensor_core == 0 || t->tensor_core == 1) &&
           e->us_per_tile > 0 && isfinite(e->us_per_tile) && e->gflops >= 0 && isfinite(e->gflops);
}

static int write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return (fclose(f) == 0) && ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Three device views: none (keep every entry), an OpenCL CPU and a CUDA
     * sm_90 device (the glob patterns and the family file path matter). */
    pit_device_info devs[2];
    memset(devs, 0, sizeof devs);
    snprintf(devs[0].backend, sizeof devs[0].backend, "opencl");
    snprintf(devs[0].name, sizeof devs[0].name, "pthread-skylake-avx512");
    snprintf(devs[0].arch, sizeof devs[0].arch, "opencl-cpu");
    snprintf(devs[0].tiledb_family, sizeof devs[0].tiledb_family, "opencl-cpu");
    snprintf(devs[0].vendor, sizeof devs[0].vendor, "The pocl project");
    snprintf(devs[1].backend, sizeof devs[1].backend, "cuda");
    snprintf(devs[1].name, sizeof devs[1].name, "NVIDIA H100 80GB HBM3");
    snprintf(devs[1].arch, sizeof devs[1].arch, "sm_90");
    snprintf(devs[1].tiledb_family, sizeof devs[1].tiledb_family, "nvidia-sm90");
    snprintf(devs[1].vendor, sizeof devs[1].vendor, "NVIDIA Corporation");
    const pit_device_info *dev = size && data[0] % 3 ? &devs[data[0] % 3 - 1] : NULL;

    if (!write_file(g_in, data, size))
        fail("cannot write the input file");
    setenv("PIT_TILEDB", g_in, 1);
    pit_tiledb *db = NULL;
    pit_status s = pit_tiledb_open(dev, &db);
    if (s == PIT_ERR_OUT_OF_MEMORY)
        return 0;
    if (s != PIT_SUCCESS || !db)
        fail("pit_tiledb_open failed on a malformed file");
    const char *warnings = pit_tiledb_warnings(db);
    if (strlen(warnings) >= 8192 || !pit_tiledb_source(db)[0])
        fail("warnings or source");
    int n = 0;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
    if (n <= 0 || !v)
        fail("no entries (the built-in table must always be there)");
    for (int i = 0; i < n; i++)
        if (!entry_ok(&v[i]))
            fail("an invalid entry was kept");

    /* Round trip: what the writer writes, the reader reads, unchanged. */
    s = pit_tiledb_write(g_out, v, n, "fuzz round trip\nsecond line");
    if (s != PIT_SUCCESS)
        fail("pit_tiledb_write refused loaded entries");
    setenv("PIT_TILEDB", g_out, 1);
    pit_tiledb *back = NULL;
    if (pit_tiledb_open(dev, &back) != PIT_SUCCESS)
        fail("reopen");
    int m = 0;
    const pit_tiledb_entry *w = pit_tiledb_entries(back, &m);
    if (strstr(pit_tiledb_warnings(back), g_out)) {
        fprintf(stderr, "%s", pit_tiledb_warnings(back));
        fail("a written file does not load back");
    }
    if (m != n)
        fail("round trip changed the entry count");
    for (int i = 0; i < n; i++)
        if (w[i].op != v[i].op || w[i].dtype != v[i].dtype ||
            memcmp(&w[i].tile, &v[i].tile, sizeof w[i].tile) != 0 ||
            strcmp(w[i].device, v[i].device) != 0 || strcmp(w[i].backend, v[i].backend) != 0)
            fail("round trip changed an entry");
    pit_tiledb_close(back);
    pit_tiledb_close(db);
    pit_clear_error();
    return 0;
}
