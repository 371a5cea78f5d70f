/*
 * tests/fuzz/fuzz_tiledb.c - libFuzzer target: arbitrary bytes as a tile
 * database file, loaded through the real loader path (PIT_TILEDB names the
 * file; pit_tiledb_open). Properties:
 *  - loading never fails (a malformed file is skipped with a warning) except
 *    for lack of memory, and never crashes, leaks or reads out of bounds;
 *  - every entry kept is valid (ranges the writer also checks);
 *  - what pit_tiledb_write writes from the loaded entries loads back without
 *    a warning, with the same entries in the same order;
 *  - PIT_TILEDB naming a hostile path (a directory, a FIFO with no writer,
 *    /dev/zero, /dev/null, a symlink to a FIFO, a symlink loop, a sparse file
 *    past the size bound, a missing file) returns at once with the built-in
 *    entries and a warning that names the path: never blocks, spins or reads
 *    without bound (libFuzzer's -timeout and -rss_limit_mb catch that).
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static char g_dir[256], g_in[320], g_out[320];

/* Where PIT_TILEDB points: the fuzzed bytes as a regular file, or one of the
 * hostile paths made once at start-up. */
enum { PATH_FILE, PATH_DIR, PATH_FIFO, PATH_ZERO, PATH_NULL, PATH_FIFO_LINK, PATH_LOOP,
       PATH_HUGE, PATH_MISSING, PATH_KINDS };
static char g_hostile[PATH_KINDS][320];

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tiledb: property violated: %s\n", what);
    abort();
}

static void make_hostile_paths(void)
{
    static const char *const names[PATH_KINDS] = {"", "dir", "fifo", "/dev/zero", "/dev/null",
                                                   "fifo-link", "loop", "huge", "missing"};
    for (int k = PATH_DIR; k < PATH_KINDS; k++)
        if (names[k][0] == '/')
            snprintf(g_hostile[k], sizeof g_hostile[k], "%s", names[k]);
        else
            snprintf(g_hostile[k], sizeof g_hostile[k], "%s/%s", g_dir, names[k]);
    int fd = -1;
    if (mkdir(g_hostile[PATH_DIR], 0700) != 0 || mkfifo(g_hostile[PATH_FIFO], 0600) != 0 ||
        symlink(g_hostile[PATH_FIFO], g_hostile[PATH_FIFO_LINK]) != 0 ||
        symlink(g_hostile[PATH_LOOP], g_hostile[PATH_LOOP]) != 0 ||
        (fd = open(g_hostile[PATH_HUGE], O_CREAT | O_WRONLY, 0600)) < 0 ||
        ftruncate(fd, (off_t)17 << 20) != 0) /* sparse: no disk used */
        fail("cannot make the hostile paths");
    close(fd);
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
    make_hostile_paths();
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
           t->stages <= 16 && t->tensor_core >= 0 && t->tensor_core <= PIT_TILE_ENGINE &&
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

/* Every entry kept must be valid, and there must be some (the built-in table
 * is always there). */
static const pit_tiledb_entry *checked_entries(pit_tiledb *db, int *n)
{
    const pit_tiledb_entry *v = pit_tiledb_entries(db, n);
    if (*n <= 0 || !v)
        fail("no entries (the built-in table must always be there)");
    for (int i = 0; i < *n; i++)
        if (!entry_ok(&v[i]))
            fail("an invalid entry was kept");
    return v;
}

static int open_hostile(const pit_device_info *dev, const char *path)
{
    setenv("PIT_TILEDB", path, 1);
    pit_tiledb *db = NULL;
    pit_status s = pit_tiledb_open(dev, &db);
    if (s == PIT_ERR_OUT_OF_MEMORY)
        return 0;
    if (s != PIT_SUCCESS || !db)
        fail("pit_tiledb_open failed on a hostile path");
    if (!strstr(pit_tiledb_warnings(db), path))
        fail("a hostile path was read without a warning naming it");
    int n = 0;
    checked_entries(db, &n);
    pit_tiledb_close(db);
    pit_clear_error();
    return 0;
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

    /* One input in 16 points PIT_TILEDB at a hostile path instead. */
    int kind = size && data[0] >= 0xf0 ? 1 + data[0] % (PATH_KINDS - 1) : PATH_FILE;
    if (kind != PATH_FILE)
        return open_hostile(dev, g_hostile[kind]);
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
    const pit_tiledb_entry *v = checked_entries(db, &n);

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
