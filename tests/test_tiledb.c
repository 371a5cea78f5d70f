/*
 * tests/test_tiledb.c - the tile database: the shipped files load cleanly,
 * malformed files are reported by file and line and skipped, the lookup
 * order ($PIT_TILEDB, tuned file, family, built-in) and the writer; paths
 * that are no regular file return at once, rejected; threads open large
 * files at once; "test_tiledb locale" repeats the loading and writing tests
 * under a comma-decimal locale (exit 77, skipped, when none can be had).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, setenv, nftw */
#endif
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int failures;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static char tmpdir[256];

/* The family a backend names in its device info (cuda_backend.c,
 * hip_backend.c, ocl_backend.c), for the devices these tests make up. */
static const char *family_of(const char *backend, const char *arch)
{
    if (strcmp(backend, "cuda") == 0) {
        int sm = atoi(arch + 3);
        return sm >= 90 ? "nvidia-sm90" : sm >= 80 ? "nvidia-sm80" : "nvidia-sm70";
    }
    if (strcmp(backend, "hip") == 0)
        return strncmp(arch, "gfx9", 4) == 0 ? "amd-gfx9" : "amd-gfx11";
    if (strcmp(backend, "opencl") == 0)
        return arch;
    return "";
}

static pit_device_info device(const char *backend, const char *name, const char *arch)
{
    pit_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "%s", backend);
    snprintf(d.tiledb_family, sizeof d.tiledb_family, "%s", family_of(backend, arch));
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.arch, sizeof d.arch, "%s", arch);
    snprintf(d.vendor, sizeof d.vendor, "test vendor");
    return d;
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    fwrite(text, 1, len, f);
    fclose(f);
}

static pit_tiledb *open_db(const pit_device_info *dev)
{
    pit_tiledb *db = NULL;
    CHECK(pit_tiledb_open(dev, &db) == PIT_SUCCESS);
    CHECK(db != NULL);
    return db;
}

/* Every (op, dtype) has at least one entry. */
static int complete(const pit_tiledb *db)
{
    int n;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
    for (int op = 0; op < PIT_TILE_OP_COUNT; op++)
        for (int dt = PIT_F32; dt <= PIT_BF16; dt++) {
            /* read: present once measured; the gathered GEMMs (moe, rows):
             * the backend's own tile without a row of the device */
            if (op == PIT_TILE_READ || op == PIT_TILE_STREAM || op == PIT_TILE_MOE || op == PIT_TILE_ROWS)
                continue;
            int found = 0;
            for (int i = 0; i < n; i++)
                found |= (int)v[i].op == op && (int)v[i].dtype == dt;
            if (!found) {
                fprintf(stderr, "no %s %s entry\n", pit_tile_op_name((pit_tile_op)op),
                        pit_dtype_name((pit_dtype)dt));
                return 0;
            }
        }
    return 1;
}

static double dense_f32_cost(const pit_tiledb *db)
{
    int n;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
    for (int i = 0; i < n; i++)
        if (v[i].op == PIT_TILE_DENSE && v[i].dtype == PIT_F32)
            return v[i].us_per_tile;
    return -1;
}

/* ---- the shipped files ---------------------------------------------------- */

static void test_families(void)
{
    struct {
        const char *backend, *name, *arch, *family;
    } cases[] = {
        {"cuda", "Tesla V100-SXM2-16GB", "sm_70", "nvidia-sm70"},
        {"cuda", "Tesla T4", "sm_75", "nvidia-sm70"},
        {"cuda", "NVIDIA A100-SXM4-80GB", "sm_80", "nvidia-sm80"},
        {"cuda", "NVIDIA GeForce RTX 3090", "sm_86", "nvidia-sm80"},
        {"cuda", "NVIDIA H100 80GB HBM3", "sm_90", "nvidia-sm90"},
        {"cuda", "NVIDIA B200", "sm_100", "nvidia-sm90"},
        {"hip", "AMD Instinct MI250X", "gfx90a", "amd-gfx9"},
        {"hip", "AMD Instinct MI300X", "gfx942", "amd-gfx9"},
        {"hip", "Radeon RX 7900 XTX", "gfx1100", "amd-gfx11"},
        {"opencl", "NVIDIA H100 80GB HBM3", "opencl-gpu", "opencl-gpu"},
        {"opencl", "cpu-haswell-AMD EPYC 7B13", "opencl-cpu", "opencl-cpu"},
    };
    setenv("PIT_TILEDB_DIR", PIT_TEST_TILEDB_DIR, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pit_device_info d = device(cases[i].backend, cases[i].name, cases[i].arch);
        const char *family = pit_tiledb_family(&d);
        CHECK(family && strcmp(family, cases[i].family) == 0);
        pit_tiledb *db = open_db(&d);
        if (!db)
            continue;
        char want[512];
        snprintf(want, sizeof want, "%s/%s.tiledb", PIT_TEST_TILEDB_DIR, cases[i].family);
        if (strcmp(pit_tiledb_source(db), want) != 0)
            fprintf(stderr, "%s: source '%s', warnings:\n%s", cases[i].arch,
                    pit_tiledb_source(db), pit_tiledb_warnings(db));
        /* Used alone: every op and dtype is in the family file itself. */
        CHECK(strcmp(pit_tiledb_source(db), want) == 0);
        CHECK(pit_tiledb_warnings(db)[0] == '\0');
        CHECK(complete(db));
        pit_tiledb_close(db);
    }
    pit_device_info none = device("vulkan", "x", "y");
    CHECK(pit_tiledb_family(&none) == NULL);
    CHECK(pit_tiledb_family(NULL) == NULL);
}

static void test_builtin(void)
{
    /* No family for this backend: the built-in table, complete. */
    pit_device_info d = device("vulkan", "Some GPU", "whatever");
    pit_tiledb *db = open_db(&d);
    if (!db)
        return;
    CHECK(strcmp(pit_tiledb_source(db), "built-in defaults") == 0);
    CHECK(complete(db));
    pit_tiledb_close(db);

    /* A family whose file is nowhere: the same. */
    setenv("PIT_TILEDB_DIR", tmpdir, 1);
    d = device("hip", "Radeon", "gfx1100");
    db = open_db(&d);
    if (db) {
        CHECK(complete(db));
        pit_tiledb_close(db);
    }
    setenv("PIT_TILEDB_DIR", PIT_TEST_TILEDB_DIR, 1);
}

/* ---- malformed files -------------------------------------------------------- */

static const char good_line[] = "sm_90* cuda dense f32 128 128 32 256 3 0 0.03 40000\n";

static void check_malformed(const char *what, const char *text, size_t len, int line,
                            const char *fragment)
{
    char path[512], where[600];
    snprintf(path, sizeof path, "%s/bad-%d.tiledb", tmpdir, line);
    write_text(path, text, len);
    setenv("PIT_TILEDB", path, 1);
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    pit_tiledb *db = open_db(&d);
    unsetenv("PIT_TILEDB");
    if (!db)
        return;
    snprintf(where, sizeof where, "%s:%d: ", path, line);
    const char *w = pit_tiledb_warnings(db);
    int named = strstr(w, where) != NULL && strstr(w, fragment) != NULL;
    if (!named)
        fprintf(stderr, "%s: warnings lack '%s' / '%s':\n%s", what, where, fragment, w);
    CHECK(named);
    /* Skipped whole, and the next source (the family file) is used. */
    CHECK(strstr(pit_tiledb_source(db), path) == NULL);
    CHECK(strstr(pit_tiledb_source(db), "nvidia-sm90.tiledb") != NULL);
    CHECK(complete(db));
    pit_tiledb_close(db);
    remove(path);
}

static void test_malformed(void)
{
    char text[2048];
    snprintf(text, sizeof text, "# ok\n%ssm_90* cuda dense f32 128 128 32 256 3 0 0.03\n",
             good_line);
    check_malformed("column count", text, strlen(text), 3, "[us_per_out]), found 11");

    snprintf(text, sizeof text, "%ssm_90* cuda matmul_k f32 32 64 32 128 3 0 0.01 100 -0.5\n",
             good_line);
    check_malformed("negative us_per_out", text, strlen(text), 2, "us_per_out must be");

    snprintf(text, sizeof text, "%ssm_90* cuda matmul_k f32 32 64 32 128 3 0 0.01 100 0.002 7\n",
             good_line);
    check_malformed("14 columns", text, strlen(text), 2, "found 14");

    snprintf(text, sizeof text, "%ssm_90* cuda matmul_k f32 32 64 32 128 3 0 fast 100\n",
             good_line);
    check_malformed("non-numeric cost", text, strlen(text), 2, "us_per_tile: 'fast'");

    snprintf(text, sizeof text, "\n\n%ssm_90* cuda matmul_k f32 -32 64 32 128 3 0 0.01 100\n",
             good_line);
    check_malformed("negative size", text, strlen(text), 4, "bm must be 1..1024, got -32");

    static const char junk[] = "sm_90* cuda dense f32 128 128 32 256 3 0 0.03 40000\n"
                               "\x7f" "ELF\x02\x01\x01\0\0\0\xff\xfe\n";
    check_malformed("binary junk", junk, sizeof junk - 1, 2, "binary data");

    snprintf(text, sizeof text, "%ssm_90* cuda matmul_m f16 64 64", good_line);
    check_malformed("truncated line", text, strlen(text), 2, "found 6");

    snprintf(text, sizeof text, "%ssm_90* cuda matmul_q f32 32 64 32 128 3 0 0.01 100\n",
             good_line);
    check_malformed("unknown op", text, strlen(text), 2, "unknown op 'matmul_q'");

    snprintf(text, sizeof text, "%ssm_90* cuda dense f64 32 64 32 128 3 0 0.01 100\n", good_line);
    check_malformed("unknown dtype", text, strlen(text), 2, "unknown dtype 'f64'");

    snprintf(text, sizeof text, "%ssm_90* cuda dense f32 32 64 32 128 3 0 nan 100\n", good_line);
    check_malformed("nan cost", text, strlen(text), 2, "us_per_tile");

    snprintf(text, sizeof text, "%ssm_90* cuda dense f32 32 64 32 128 3 0 0 100\n", good_line);
    check_malformed("zero cost", text, strlen(text), 2, "us_per_tile must be a positive");

    memset(text, 'x', 700);
    text[700] = '\n';
    check_malformed("long line", text, 701, 1, "longer than 511");

    /* A missing $PIT_TILEDB is named too. */
    char missing[512];
    snprintf(missing, sizeof missing, "%s/does-not-exist.tiledb", tmpdir);
    setenv("PIT_TILEDB", missing, 1);
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    pit_tiledb *db = open_db(&d);
    unsetenv("PIT_TILEDB");
    if (db) {
        CHECK(strstr(pit_tiledb_warnings(db), "does-not-exist.tiledb: cannot open") != NULL);
        CHECK(complete(db));
        pit_tiledb_close(db);
    }
}

/* ---- lookup order ----------------------------------------------------------- */

static void test_override(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/override.tiledb", tmpdir);
    const char text[] = "# only a dense f32 tile, for this device\n"
                        "*H100*  cuda  dense  f32  128 128 32  256 3 0  123.5  0.034\n"
                        "gfx9*   hip   dense  f32  128 128 32  256 3 0  7.0    0.1\n";
    write_text(path, text, sizeof text - 1);
    setenv("PIT_TILEDB", path, 1);
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    pit_tiledb *db = open_db(&d);
    unsetenv("PIT_TILEDB");
    if (!db)
        return;
    CHECK(strncmp(pit_tiledb_source(db), path, strlen(path)) == 0);
    CHECK(pit_tiledb_warnings(db)[0] == '\0');
    int n, dense_f32 = 0;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
    for (int i = 0; i < n; i++)
        if (v[i].op == PIT_TILE_DENSE && v[i].dtype == PIT_F32) {
            dense_f32++;
            CHECK(v[i].us_per_tile == 123.5);
        }
    CHECK(dense_f32 == 1); /* the other line is for another device */
    CHECK(complete(db));   /* the rest comes from the family file */
    CHECK(strstr(pit_tiledb_source(db), "nvidia-sm90.tiledb") != NULL);
    pit_tiledb_close(db);

    /* A file without a line for this device is passed over, with a note. */
    setenv("PIT_TILEDB", path, 1);
    pit_device_info other = device("cuda", "Tesla V100-SXM2-16GB", "sm_70");
    db = open_db(&other);
    unsetenv("PIT_TILEDB");
    if (db) {
        CHECK(strstr(pit_tiledb_warnings(db), "no entry for device") != NULL);
        CHECK(strstr(pit_tiledb_source(db), path) == NULL);
        pit_tiledb_close(db);
    }
    remove(path);
}

static pit_tiledb_entry entry(const char *dev, pit_tile_op op, pit_dtype dt, int bm, int bn,
                              int bk, double us)
{
    pit_tiledb_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.device, sizeof e.device, "%s", dev);
    snprintf(e.backend, sizeof e.backend, "cuda");
    e.op = op;
    e.dtype = dt;
    e.tile = (pit_tile){bm, bn, bk, 256, 3, dt != PIT_F32};
    e.us_per_tile = us;
    e.gflops = pit_tiledb_gflops(&e.tile, us);
    return e;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_writer_and_tuned(void)
{
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    char tuned[768];
    CHECK(pit_tiledb_tuned_path(&d, tuned, sizeof tuned) == PIT_SUCCESS);
    CHECK(strstr(tuned, "/cache/tiledb/NVIDIA_H100_80GB_HBM3.tiledb") != NULL);

    pit_tiledb_entry v[3] = {
        entry("NVIDIA?H100*", PIT_TILE_DENSE, PIT_F32, 128, 128, 32, 0.0257),
        entry("sm_90", PIT_TILE_MATMUL_K, PIT_F32, 32, 64, 32, 0.00491234567),
        entry("sm_90", PIT_TILE_FILL, PIT_F16, 64, 64, 1, 2.5e-3),
    };
    v[2].gflops = 0;
    v[1].us_per_out = 0.0123; /* a fitted sparse entry round-trips its fixed part */
    CHECK(pit_tiledb_write(tuned, v, 3, "x") == PIT_SUCCESS); /* replaced below */
    CHECK(pit_tiledb_write(tuned, v, 3, "measured by test_tiledb\nsecond line") == PIT_SUCCESS);
    char dir[800];
    snprintf(dir, sizeof dir, "%s/cache/tiledb", tmpdir);
    CHECK(count_files(dir) == 1); /* no temporary file left behind */

    pit_tiledb *db = open_db(&d);
    if (db) {
        CHECK(strncmp(pit_tiledb_source(db), tuned, strlen(tuned)) == 0);
        CHECK(pit_tiledb_warnings(db)[0] == '\0');
        CHECK(dense_f32_cost(db) == 0.0257);
        int n, found = 0;
        const pit_tiledb_entry *e = pit_tiledb_entries(db, &n);
        for (int i = 0; i < n; i++)
            if (e[i].op == PIT_TILE_MATMUL_K && e[i].dtype == PIT_F32) {
                found++;
                CHECK(fabs(e[i].us_per_tile - 0.00491234567) < 1e-8);
                CHECK(fabs(e[i].us_per_out - 0.0123) < 1e-9);
                CHECK(e[i].tile.bm == 32 && e[i].tile.bn == 64 && e[i].tile.bk == 32);
                CHECK(e[i].tile.threads == 256 && e[i].tile.stages == 3);
            }
        CHECK(found == 1);
        CHECK(complete(db));
        pit_tiledb_close(db);
    }

    /* $PIT_TILEDB still wins over the tuned file. */
    char path[512];
    snprintf(path, sizeof path, "%s/override2.tiledb", tmpdir);
    pit_tiledb_entry o = entry("sm_90*", PIT_TILE_DENSE, PIT_F32, 64, 64, 32, 9.0);
    CHECK(pit_tiledb_write(path, &o, 1, NULL) == PIT_SUCCESS);
    setenv("PIT_TILEDB", path, 1);
    db = open_db(&d);
    unsetenv("PIT_TILEDB");
    if (db) {
        CHECK(dense_f32_cost(db) == 9.0);
        CHECK(strncmp(pit_tiledb_source(db), path, strlen(path)) == 0);
        pit_tiledb_close(db);
    }

    /* Invalid entries are refused and nothing is written. */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/never.tiledb", tmpdir);
    pit_tiledb_entry z = entry("sm_90", PIT_TILE_DENSE, PIT_F32, 0, 64, 32, 1.0);
    CHECK(pit_tiledb_write(bad, &z, 1, NULL) == PIT_ERR_INVALID_ARGUMENT);
    z = entry("has space", PIT_TILE_DENSE, PIT_F32, 64, 64, 32, 1.0);
    CHECK(pit_tiledb_write(bad, &z, 1, NULL) == PIT_ERR_INVALID_ARGUMENT);
    z = entry("sm_90", PIT_TILE_DENSE, PIT_F32, 64, 64, 32, -1.0);
    CHECK(pit_tiledb_write(bad, &z, 1, NULL) == PIT_ERR_INVALID_ARGUMENT);
    CHECK(access(bad, F_OK) != 0);
    CHECK(pit_tiledb_write(NULL, v, 1, NULL) == PIT_ERR_INVALID_ARGUMENT);
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.tiledb", tmpdir);
    CHECK(pit_tiledb_write(nodir, v, 1, NULL) == PIT_ERR_IO);
    remove(path);
    remove(tuned);
}

static void test_units(void)
{
    pit_tile t = {64, 64, 32, 256, 1, 0};
    /* 2*64*64*32 flops in 0.01 us = 26214.4 GFLOP/s */
    CHECK(fabs(pit_tiledb_gflops(&t, 0.01) - 26214.4) < 1e-6);
    CHECK(pit_tiledb_us_per_tile(100.0, 400) == 0.25);
    CHECK(pit_tiledb_us_per_tile(100.0, 0) == 0.0);
    CHECK(strcmp(pit_tile_op_name(PIT_TILE_MATMUL_M), "matmul_m") == 0);
    CHECK(strcmp(pit_tile_op_name(PIT_TILE_OP_COUNT), "?") == 0);
    CHECK(pit_tiledb_open(NULL, NULL) == PIT_ERR_INVALID_ARGUMENT);
    pit_tiledb_close(NULL);
    CHECK(strcmp(pit_tiledb_source(NULL), "") == 0);
}

/* ---- hostile paths ------------------------------------------------------------ */

#define HANG_LIMIT_S 20
static const char *volatile hang_case = "";

static void on_hang(int sig)
{
    (void)sig;
    static const char msg[] = "test_tiledb: loading did not return within 20 s: ";
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, hang_case, strlen(hang_case));
    (void)!write(2, "\n", 1);
    _exit(1);
}

/* $PIT_TILEDB = path must return promptly, skip the file with a warning
 * naming it and holding fragment, and go on with the family file. */
static void check_rejected(const char *what, const char *path, const char *fragment)
{
    hang_case = what;
    alarm(HANG_LIMIT_S);
    setenv("PIT_TILEDB", path, 1);
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    pit_tiledb *db = open_db(&d);
    unsetenv("PIT_TILEDB");
    alarm(0);
    if (!db)
        return;
    const char *w = pit_tiledb_warnings(db);
    int named = strstr(w, path) != NULL && strstr(w, fragment) != NULL;
    if (!named)
        fprintf(stderr, "%s: warnings lack '%s' / '%s':\n%s", what, path, fragment, w);
    CHECK(named);
    CHECK(strstr(pit_tiledb_source(db), "nvidia-sm90.tiledb") != NULL);
    CHECK(complete(db));
    pit_tiledb_close(db);
}

static void test_hostile_paths(void)
{
    signal(SIGALRM, on_hang);
    check_rejected("/dev/zero", "/dev/zero", "not a regular file (a character device)");

    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo.tiledb", tmpdir);
    CHECK(mkfifo(fifo, 0600) == 0);
    check_rejected("a FIFO", fifo, "not a regular file (a FIFO)");
    remove(fifo);

    check_rejected("a directory", tmpdir, "not a regular file (a directory)");

    /* Over the size bound: refused before a byte is read. */
    char big[512];
    snprintf(big, sizeof big, "%s/big.tiledb", tmpdir);
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)17 << 20) == 0);
    if (fd >= 0)
        close(fd);
    check_rejected("a 17 MiB file", big, "more than a tile database may hold (16 MiB)");
    remove(big);
    signal(SIGALRM, SIG_DFL);
}

/* ---- threads ------------------------------------------------------------------ */

#define BIG_LINES 50000
#define OPEN_THREADS 8
#define OPENS_PER_THREAD 2

static char big_path[512];
static long big_bm_sum;

/* BIG_LINES valid lines for the test device, over every (op, dtype), so the
 * file alone makes the whole database. */
static void write_big_file(void)
{
    snprintf(big_path, sizeof big_path, "%s/big-valid.tiledb", tmpdir);
    FILE *f = fopen(big_path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    static const char *const dtypes[] = {"f32", "f16", "bf16"};
    big_bm_sum = 0;
    for (int i = 0; i < BIG_LINES; i++) {
        int bm = 1 + i % 1024;
        big_bm_sum += bm;
        fprintf(f, "*H100*  cuda  %s  %s  %d 64 32  256 3 0  %d.%03d  %d\n",
                pit_tile_op_name((pit_tile_op)(i % PIT_TILE_OP_COUNT)),
                dtypes[(i / PIT_TILE_OP_COUNT) % 3], bm, 1 + i % 7, i % 1000, i % 5000);
    }
    fclose(f);
}

static void *open_big(void *arg)
{
    int *bad = arg;
    pit_device_info d = device("cuda", "NVIDIA H100 80GB HBM3", "sm_90");
    for (int k = 0; k < OPENS_PER_THREAD; k++) {
        pit_tiledb *db = NULL;
        if (pit_tiledb_open(&d, &db) != PIT_SUCCESS) {
            (*bad)++;
            continue;
        }
        int n;
        long sum = 0;
        const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
        for (int i = 0; i < n; i++)
            sum += v[i].tile.bm;
        if (n != BIG_LINES || sum != big_bm_sum || pit_tiledb_warnings(db)[0] ||
            strcmp(pit_tiledb_source(db), big_path) != 0) {
            if (!*bad)
                fprintf(stderr, "threads: %d entries (want %d) from '%s', warnings:\n%.600s",
                        n, BIG_LINES, pit_tiledb_source(db), pit_tiledb_warnings(db));
            (*bad)++;
        }
        pit_tiledb_close(db);
    }
    return NULL;
}

/* Contexts are independent across threads: every one gets the whole file. */
static void test_threads(void)
{
    write_big_file();
    setenv("PIT_TILEDB", big_path, 1);
    pthread_t t[OPEN_THREADS];
    int bad[OPEN_THREADS] = {0}, started = 0, total = 0;
    for (int i = 0; i < OPEN_THREADS; i++)
        started += pthread_create(&t[i], NULL, open_big, &bad[i]) == 0;
    CHECK(started == OPEN_THREADS);
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        total += bad[i];
    }
    unsetenv("PIT_TILEDB");
    if (total)
        fprintf(stderr, "threads: %d of %d loads lost rows\n", total,
                OPEN_THREADS * OPENS_PER_THREAD);
    CHECK(total == 0);
    remove(big_path);
}

/* ---- locale ------------------------------------------------------------------- */

/* Sets a locale whose decimal point is a comma: an installed one, else one
 * generated into tmpdir (LOCPATH) from the system's locale sources. */
static const char *set_comma_locale(void)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (setlocale(LC_ALL, names[i]) && strcmp(localeconv()->decimal_point, ",") == 0)
                return names[i];
        if (pass == 0) {
            char cmd[600], dir[400];
            snprintf(dir, sizeof dir, "%s/locale", tmpdir);
            mkdir(dir, 0700);
            snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1",
                     dir);
            if (system(cmd) != 0)
                break;
            setenv("LOCPATH", dir, 1);
        }
    }
    setlocale(LC_ALL, "C");
    return NULL;
}

/* The writer's numbers in the file itself: "0.0257", never "0,0257". */
static void test_written_text(void)
{
    char path[512], text[4096];
    snprintf(path, sizeof path, "%s/written.tiledb", tmpdir);
    pit_tiledb_entry e = entry("sm_90", PIT_TILE_DENSE, PIT_F32, 128, 128, 32, 0.0257);
    e.us_per_out = 83.8858;
    CHECK(pit_tiledb_write(path, &e, 1, NULL) == PIT_SUCCESS);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    const char *row = strstr(text, "sm_90 ");
    CHECK(row && strstr(row, "0.0257") && strstr(row, "83.8858") && !strchr(row, ','));
    remove(path);
}

static int run_locale_tests(void)
{
    const char *name = set_comma_locale();
    if (!name) {
        printf("test_tiledb locale: SKIPPED: no comma-decimal locale (de_DE.UTF-8, fr_FR.UTF-8) "
               "installed, and localedef could not make one\n");
        return 77;
    }
    printf("test_tiledb locale: running under %s\n", name);
    test_families();
    test_override();
    test_writer_and_tuned();
    test_written_text();
    test_threads();
    /* The program's locale is left as it set it. */
    CHECK(strcmp(localeconv()->decimal_point, ",") == 0);
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pit-test-tiledb-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    /* Read once by core: set before the first call. */
    setenv("PIT_CACHE_DIR", cache, 1);
    unsetenv("PIT_TILEDB");
    setenv("PIT_TILEDB_DIR", PIT_TEST_TILEDB_DIR, 1);

    int skipped = 0;
    if (argc > 1 && strcmp(argv[1], "locale") == 0) {
        skipped = run_locale_tests() == 77;
    } else {
        test_units();
        test_families();
        test_builtin();
        test_malformed();
        test_override();
        test_writer_and_tuned();
        test_hostile_paths();
        test_threads();
    }

    nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    if (failures)
        fprintf(stderr, "test_tiledb: %d failure(s)\n", failures);
    else if (!skipped)
        printf("test_tiledb: all passed\n");
    return failures ? 1 : skipped ? 77 : 0;
}
