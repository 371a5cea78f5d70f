/*
 * tests/test_cache.c - the kernel disk cache (core/runtime/kernel_cache.c,
 * cache_file.c) seen from the API. One case a process: the cache's settings
 * are read once per process, and its trim runs once per process.
 *   test_cache tamper DIR   every entry's binary replaced by another program's
 *       binary under a valid header, key and checksum: the next context's
 *       relu and sparse matmul must still match the reference, and every
 *       entry must be rewritten (OpenCL device; 77 without).
 *   test_cache trim DIR     a folder of old entries, a legacy CUDA entry and
 *       foreign files, over a cap of 4 MB: a run that stores kernels trims
 *       pit's entries to the cap, least recently used first (an entry read in
 *       the run counts as used now), and leaves every foreign file (OpenCL).
 *   test_cache clear DIR    pit_cache_get_info counts pit's entries only;
 *       pit_cache_clear removes them and nothing else (no device needed).
 *   test_cache off DIR      PIT_CACHE_MAX_MB=0: kernels run, nothing stored.
 * DIR is emptied first and used as PIT_CACHE_DIR.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache_file.h"
#include "rtest.h"

#define MB ((int64_t)1 << 20)
#define MAX_FILES 256

static const char *dir;

/* ---- files --------------------------------------------------------------------------- */

static void path_of(char *out, size_t cap, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        printf("FATAL: path %s/%s too long\n", dir, name);
        exit(1);
    }
}

static void empty_folder(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) {
        printf("FATAL: cannot make %s\n", dir);
        exit(1);
    }
}

/* A file of `bytes` random bytes last modified `age` seconds ago. */
static void put_file(const char *name, size_t bytes, time_t age, pit_rng *rng)
{
    char path[1200];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; f && i < bytes; ++i)
        fputc((int)(pit_rng_next(rng) & 0xff), f);
    if (!f || fclose(f) != 0) {
        printf("FATAL: cannot write %s\n", path);
        exit(1);
    }
    struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    utimensat(AT_FDCWD, path, t, 0);
}

static int64_t size_of(const char *name)
{
    char path[1200];
    struct stat st;
    path_of(path, sizeof path, name);
    return lstat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* The names of DIR's files that begin with prefix and end with suffix. */
static int list_files(const char *prefix, const char *suffix, char names[][256], int max)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s'", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line), ls = strlen(suffix);
        if (n < max && len < 256 && !strncmp(line, prefix, strlen(prefix)) && len >= ls &&
            !strcmp(line + len - ls, suffix))
            memcpy(names[n++], line, len + 1);
    }
    if (p)
        pclose(p);
    return n;
}

/* An entry's key text and payload, read by the layout cache_file.h documents. */
static int read_entry(const char *name, char **key, unsigned char **payload, size_t *size)
{
    char path[1200];
    path_of(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    uint64_t h[3];
    char magic[8];
    int ok = f && fread(magic, 8, 1, f) == 1 && !memcmp(magic, "PITKERN1", 8) &&
             fread(h, 8, 3, f) == 3 && h[0] < ((uint64_t)1 << 24) && h[1] < ((uint64_t)1 << 31);
    *key = ok ? calloc(1, h[0] + 1) : NULL;
    *payload = ok ? malloc(h[1]) : NULL;
    ok = ok && *key && *payload && fread(*key, 1, h[0], f) == h[0] && fread(*payload, 1, h[1], f) == h[1];
    if (f)
        fclose(f);
    *size = ok ? h[1] : 0;
    return ok;
}

/* ---- operators: relu (the elementwise program), sparse matmul (detect, matmul) ----- */

static int relu_matches(pit_context *ctx, uint64_t seed)
{
    enum { R = 48, C = 80 };
    double x[R * C], want[R * C], got[R * C];
    pit_rng rng;
    pit_rng_seed(&rng, seed);
    pit_ref_fill_random(&rng, x, R * C);
    pit_tensor *X = rt_tensor(ctx, PIT_F32, 2, 1, R, C), *Y = rt_tensor(ctx, PIT_F32, 2, 1, R, C);
    pit_status st = rt_upload(X, NULL, x, R * C);
    if (st == PIT_SUCCESS)
        st = pit_relu(ctx, NULL, X, Y);
    if (st == PIT_SUCCESS)
        st = rt_download(Y, NULL, got, R * C);
    pit_ref_relu(R * C, x, want);
    double e = st == PIT_SUCCESS ? pit_ref_rel_error(want, got, R * C) : 1.0;
    RT_CHECK(st == PIT_SUCCESS && e <= pit_ref_tolerance(PIT_F32), "relu: %s, error %g",
             pit_status_string(st), e);
    pit_tensor_destroy(X);
    pit_tensor_destroy(Y);
    return st == PIT_SUCCESS;
}

static int matmul_matches(pit_context *ctx, uint64_t seed)
{
    enum { M = 64, K = 96, N = 64 };
    double *a = malloc(M * K * 8), *b = malloc(K * N * 8), *want = malloc(M * N * 8),
           *got = malloc(M * N * 8);
    pit_rng rng;
    pit_rng_seed(&rng, seed);
    pit_ref_fill_random(&rng, a, M * K);
    pit_ref_fill_random(&rng, b, K * N);
    pit_ref_sparsify_tiles(&rng, a, 1, M, K, 32, 1, 0, 0, 0.6);
    pit_tensor *A = rt_tensor(ctx, PIT_F32, 2, 1, M, K), *B = rt_tensor(ctx, PIT_F32, 2, 1, K, N),
               *Cm = rt_tensor(ctx, PIT_F32, 2, 1, M, N);
    pit_matmul_options o = pit_matmul_options_default();
    o.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    pit_status st = rt_upload(A, NULL, a, M * K);
    if (st == PIT_SUCCESS)
        st = rt_upload(B, NULL, b, K * N);
    if (st == PIT_SUCCESS)
        st = pit_matmul(ctx, NULL, A, B, Cm, &o, NULL);
    if (st == PIT_SUCCESS)
        st = rt_download(Cm, NULL, got, M * N);
    pit_ref_matmul(1, M, N, K, a, b, want);
    double e = st == PIT_SUCCESS ? pit_ref_rel_error(want, got, M * N) : 1.0;
    RT_CHECK(st == PIT_SUCCESS && e <= pit_ref_tolerance(PIT_F32), "sparse matmul: %s, error %g",
             pit_status_string(st), e);
    pit_tensor_destroy(A);
    pit_tensor_destroy(B);
    pit_tensor_destroy(Cm);
    free(a), free(b), free(want), free(got);
    return st == PIT_SUCCESS;
}

/* ---- tamper ------------------------------------------------------------------------- */

/* Writes, under entry `name`'s own key, another payload. */
static int plant(const char *name, const unsigned char *payload, size_t size)
{
    char *key = NULL;
    unsigned char *own = NULL;
    size_t own_size = 0;
    char path[1200];
    path_of(path, sizeof path, name);
    int ok = read_entry(name, &key, &own, &own_size) && pit_cache_entry_write(path, key, payload, size) > 0;
    free(key), free(own);
    return ok;
}

static int same_payload(const char *a, const char *b)
{
    char *ka = NULL, *kb = NULL;
    unsigned char *pa = NULL, *pb = NULL;
    size_t sa = 0, sb = 0;
    int same = read_entry(a, &ka, &pa, &sa) && read_entry(b, &kb, &pb, &sb) && sa == sb &&
               !memcmp(pa, pb, sa);
    free(ka), free(kb), free(pa), free(pb);
    return same;
}

static int contains(char names[][256], int n, const char *name)
{
    for (int i = 0; i < n; ++i)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

static void case_tamper(void)
{
    static char relu[MAX_FILES][256], all[MAX_FILES][256], planted[MAX_FILES][256];
    pit_context *ctx = rt_context_or_skip("test_cache tamper");
    relu_matches(ctx, 11);
    int nrelu = list_files("opencl-", ".bin", relu, MAX_FILES);
    matmul_matches(ctx, 12);
    int nall = list_files("opencl-", ".bin", all, MAX_FILES);
    pit_context_destroy(ctx);
    RT_CHECK(nrelu > 0 && nall > nrelu, "entries stored: %d by relu, %d in all", nrelu, nall);
    if (nrelu == 0 || nall <= nrelu)
        return;

    /* relu's programs get a binary of matmul's, matmul's a binary of relu's:
     * each binary builds, but lacks the kernels its key's program has. */
    const char *matmul_entry = NULL;
    for (int i = 0; i < nall && !matmul_entry; ++i)
        if (!contains(relu, nrelu, all[i]))
            matmul_entry = all[i];
    char *key[2] = {NULL, NULL};
    unsigned char *donor[2] = {NULL, NULL}; /* relu's, matmul's */
    size_t donor_size[2] = {0, 0};
    int have = read_entry(relu[0], &key[0], &donor[0], &donor_size[0]) &&
               read_entry(matmul_entry, &key[1], &donor[1], &donor_size[1]);
    RT_CHECK(have, "reading the entries %s and %s", relu[0], matmul_entry);
    for (int i = 0; have && i < nall; ++i) {
        int d = contains(relu, nrelu, all[i]) ? 1 : 0;
        RT_CHECK(plant(all[i], donor[d], donor_size[d]), "planting a binary in %s", all[i]);
        /* a copy of what was planted, to tell a rewritten entry from it */
        if (snprintf(planted[i], 256, "%s.planted", all[i]) >= 256)
            continue;
        char from[1200], to[1200], cmd[2600];
        path_of(from, sizeof from, all[i]);
        path_of(to, sizeof to, planted[i]);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
        RT_CHECK(system(cmd) == 0, "%s", cmd);
    }
    free(key[0]), free(key[1]), free(donor[0]), free(donor[1]);
    printf("planted a foreign program's binary in %d entries\n", nall);

    pit_cache_info before;
    RT_CHECK(pit_cache_get_info(&before) == PIT_SUCCESS && before.entries == nall &&
                 before.max_bytes == 256 * MB,
             "info: %lld entries (want %d), cap %lld (want the default 256 MB)",
             (long long)before.entries, nall, (long long)before.max_bytes);
    ctx = rt_context_or_skip("test_cache tamper");
    RT_CHECK(relu_matches(ctx, 21), "relu on the tampered cache");
    RT_CHECK(matmul_matches(ctx, 22), "sparse matmul on the tampered cache");
    pit_context_destroy(ctx);
    int rewritten = 0;
    for (int i = 0; i < nall; ++i)
        rewritten += !same_payload(all[i], planted[i]);
    RT_CHECK(rewritten == nall, "%d of %d tampered entries rewritten", rewritten, nall);

    /* A third context reads the rewritten entries: still right. */
    ctx = rt_context_or_skip("test_cache tamper");
    RT_CHECK(relu_matches(ctx, 31) && matmul_matches(ctx, 32), "the repaired cache");
    pit_context_destroy(ctx);
}

/* ---- trim ----------------------------------------------------------------------------- */

#define FAKES 12
#define FAKE_BYTES (512 * 1024)

static const char *const foreign[] = {"notes.txt", "opencl-notes.bin", "big-foreign.dat",
                                      "OPENCL-0123456789abcdef0123456789abcdef.bin",
                                      "opencl-0123456789abcdef0123456789abcdef.bin.bak"};
static const size_t foreign_bytes[] = {100, 2000, 6 * 1024 * 1024, 3000, 4000};
#define NFOREIGN (sizeof foreign / sizeof foreign[0])
#define LEGACY_CUDA "cuda-sm90-0123456789abcdef.cubin"

static void fake_name(char *out, int i)
{
    snprintf(out, 256, "opencl-%016x%016llx.bin", 0xfa4e0000u + (unsigned)i, 0x1234567812345678ull);
}

static void put_foreign_files(pit_rng *rng)
{
    for (size_t i = 0; i < NFOREIGN; ++i)
        put_file(foreign[i], foreign_bytes[i], 30 * 3600, rng);
    char sub[1200];
    path_of(sub, sizeof sub, "tiledb");
    mkdir(sub, 0755);
    put_file("tiledb/device.tiledb", 500, 30 * 3600, rng);
}

static void check_foreign_files(void)
{
    for (size_t i = 0; i < NFOREIGN; ++i)
        RT_CHECK(size_of(foreign[i]) == (int64_t)foreign_bytes[i], "foreign file %s kept whole",
                 foreign[i]);
    RT_CHECK(size_of("tiledb/device.tiledb") == 500, "tiledb/device.tiledb kept");
}

static void case_trim(void)
{
    /* The relu program's entry, written by another process and then made the
     * oldest file of the folder. */
    pid_t child = fork();
    if (child == 0) {
        pit_context *ctx = rt_context_or_skip("test_cache trim");
        int ok = relu_matches(ctx, 41);
        pit_context_destroy(ctx);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        exit(77);
    char relu[4][256];
    int nrelu = list_files("opencl-", ".bin", relu, 4);
    RT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && nrelu == 1,
             "a relu in another process stored its program (%d entries)", nrelu);
    if (nrelu != 1)
        return;
    pit_rng rng;
    pit_rng_seed(&rng, 51);
    char path[1200];
    path_of(path, sizeof path, relu[0]);
    struct timespec old[2] = {{time(NULL) - 40 * 3600, 0}, {time(NULL) - 40 * 3600, 0}};
    utimensat(AT_FDCWD, path, old, 0);
    put_file(LEGACY_CUDA, FAKE_BYTES, 35 * 3600, &rng);
    for (int i = 0; i < FAKES; ++i) { /* fake 0 the oldest, 12 hours before fake 11 */
        char name[256];
        fake_name(name, i);
        put_file(name, FAKE_BYTES, (FAKES - i) * 3600, &rng);
    }
    put_foreign_files(&rng);

    /* This process reads relu's entry (now the most recently used) and stores
     * matmul's programs: the folder goes over the cap and is trimmed. */
    pit_context *ctx = rt_context_or_skip("test_cache trim");
    relu_matches(ctx, 42);
    matmul_matches(ctx, 43);
    pit_context_destroy(ctx);

    pit_cache_info info;
    RT_CHECK(pit_cache_get_info(&info) == PIT_SUCCESS && info.max_bytes == 4 * MB,
             "info: cap %lld", (long long)info.max_bytes);
    RT_CHECK(info.bytes <= info.max_bytes && info.bytes > 0, "pit's entries: %lld bytes, cap %lld",
             (long long)info.bytes, (long long)info.max_bytes);
    RT_CHECK(size_of(relu[0]) > 0, "the entry read in the run is kept");
    RT_CHECK(size_of(LEGACY_CUDA) < 0, "the legacy CUDA entry (least recently used) is removed");
    int kept = 0, first_kept = -1, gaps = 0;
    for (int i = 0; i < FAKES; ++i) {
        char name[256];
        fake_name(name, i);
        int here = size_of(name) == FAKE_BYTES;
        if (here && first_kept < 0)
            first_kept = i;
        gaps += !here && first_kept >= 0; /* an older one kept, a newer one removed */
        kept += here;
    }
    printf("trim: %d of %d old entries kept (the newest), %lld bytes of entries, cap %lld\n", kept,
           FAKES, (long long)info.bytes, (long long)info.max_bytes);
    RT_CHECK(kept > 0 && kept < FAKES && gaps == 0,
             "the newest old entries are kept and the oldest removed (%d kept, %d out of order)",
             kept, gaps);
    check_foreign_files();
}

/* ---- clear, off ------------------------------------------------------------------------ */

static void case_clear(void)
{
    pit_rng rng;
    pit_rng_seed(&rng, 61);
    const char *tmp_entry = "opencl-0123456789abcdef0123456789abcdef.bin.tmp.4242.7";
    int64_t want = 0;
    for (int i = 0; i < 3; ++i) {
        char name[256];
        fake_name(name, i);
        put_file(name, 1000 * (size_t)(i + 1), 3600, &rng);
        want += 1000 * (i + 1);
    }
    put_file(LEGACY_CUDA, 700, 3600, &rng);
    put_file(tmp_entry, 300, 3600, &rng);
    want += 1000;
    put_foreign_files(&rng);
    char fifo[1200], folder[1200];
    path_of(fifo, sizeof fifo, "opencl-ffffffffffffffffffffffffffffffff.bin");
    path_of(folder, sizeof folder, "opencl-eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee.bin");
    RT_CHECK(mkfifo(fifo, 0644) == 0 && mkdir(folder, 0755) == 0, "a FIFO and a folder named as entries");

    RT_CHECK(pit_cache_get_info(NULL) == PIT_ERR_INVALID_ARGUMENT, "pit_cache_get_info(NULL)");
    pit_cache_info info;
    pit_status st = pit_cache_get_info(&info);
    RT_CHECK(st == PIT_SUCCESS && info.folder && !strcmp(info.folder, dir) && info.entries == 5 &&
                 info.bytes == want && info.max_bytes == 7 * MB,
             "info: %s, folder %s, %lld entries of %lld bytes (want 5 of %lld), cap %lld",
             pit_status_string(st), info.folder ? info.folder : "(none)", (long long)info.entries,
             (long long)info.bytes, (long long)want, (long long)info.max_bytes);
    st = pit_cache_clear();
    RT_CHECK(st == PIT_SUCCESS, "pit_cache_clear: %s", pit_status_string(st));
    st = pit_cache_get_info(&info);
    RT_CHECK(st == PIT_SUCCESS && info.entries == 0 && info.bytes == 0,
             "after pit_cache_clear: %lld entries", (long long)info.entries);
    RT_CHECK(size_of(LEGACY_CUDA) < 0 && size_of(tmp_entry) < 0, "legacy and temporary entries removed");
    check_foreign_files();
    struct stat sf, sd;
    RT_CHECK(lstat(fifo, &sf) == 0 && S_ISFIFO(sf.st_mode) && lstat(folder, &sd) == 0 &&
                 S_ISDIR(sd.st_mode),
             "a FIFO and a folder named as entries are left alone");
}

static void case_off(void)
{
    pit_context *ctx = rt_context_or_skip("test_cache off");
    relu_matches(ctx, 71);
    matmul_matches(ctx, 72);
    pit_context_destroy(ctx);
    pit_cache_info info;
    RT_CHECK(pit_cache_get_info(&info) == PIT_SUCCESS && info.max_bytes == 0 && info.entries == 0,
             "PIT_CACHE_MAX_MB=0: %lld entries stored, cap %lld", (long long)info.entries,
             (long long)info.max_bytes);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name, *cap_mb;
        void (*run)(void);
    } cases[] = {{"tamper", NULL, case_tamper},
                 {"trim", "4", case_trim},
                 {"clear", "7", case_clear},
                 {"off", "0", case_off}};
    for (size_t i = 0; argc == 3 && i < sizeof cases / sizeof cases[0]; ++i) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        dir = argv[2];
        empty_folder();
        setenv("PIT_CACHE_DIR", dir, 1);
        if (cases[i].cap_mb)
            setenv("PIT_CACHE_MAX_MB", cases[i].cap_mb, 1);
        else
            unsetenv("PIT_CACHE_MAX_MB");
        cases[i].run();
        char what[64];
        snprintf(what, sizeof what, "test_cache %s", cases[i].name);
        return rt_finish(what);
    }
    fprintf(stderr, "usage: test_cache tamper|trim|clear|off DIR\n");
    return 2;
}
