/*
 * tests/backends/cuda/test_plugin.h - what the direct tests of the CUDA and
 * HIP plug-ins share (tests/backends/hip/test_hip_*.c include it too): the host
 * services a plug-in expects, and loading a plug-in up to its first device.
 * Test code only; included by one .c each.
 */
#ifndef PIT_CUDA_TEST_PLUGIN_H
#define PIT_CUDA_TEST_PLUGIN_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend.h"

#define SKIP 77

static char last_error[4096];
static int debug_log; /* PIT_LOG=debug */

static pit_status host_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

static void host_log(const char *fmt, ...)
{
    if (!debug_log) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[pit debug] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static const char *host_cache_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PIT_CACHE_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "/tmp/pit-cache-test");
    mkdir(dir, 0755);
    return dir;
}

/* the tests trust their own cache folder: a plain fopen */
static FILE *host_open_cache_entry(const char *path)
{
    return fopen(path, "rb");
}

/* A call that fails ends the test: where, the status and the host's message. */
#define TEST_CALL(call)                                                                            \
    do {                                                                                           \
        pit_status st_ = (call);                                                                   \
        if (st_ != PIT_SUCCESS) {                                                                  \
            printf("FAIL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)st_, last_error); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* xorshift64: uniform in [0, 1) */
static inline double test_urand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (double)(*state >> 11) / 9007199254740992.0;
}

static inline int test_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of 20 timed runs of fn(user) after 3 warm-ups, in ms, timed
 * with the plug-in's events on stream (the benches of the direct tests).
 * The 20 runs are queued back to back and read after the last: a run whose
 * host side (launches, event records) takes longer than its GPU side would
 * otherwise be timed by the host, since the GPU idles while it queues.
 * host_ms (may be NULL) gets the host's queueing time per run, so a caller
 * can say which of the two bounds a figure is. */
static inline pit_status test_median_ms(const pit_backend *be, void *bctx, void *stream, void (*fn)(void *),
                                        void *user, double *ms, double *host_ms)
{
    enum { RUNS = 20 };
    double t[RUNS];
    pit_event *e[2 * RUNS] = {0};
    pit_status st = PIT_SUCCESS;
    for (int i = 0; i < 3; ++i) fn(user);
    struct timespec h0, h1;
    clock_gettime(CLOCK_MONOTONIC, &h0);
    for (int i = 0; i < RUNS && st == PIT_SUCCESS; ++i) {
        st = be->event_record(bctx, stream, &e[2 * i]);
        if (st != PIT_SUCCESS) break;
        fn(user);
        st = be->event_record(bctx, stream, &e[2 * i + 1]);
    }
    clock_gettime(CLOCK_MONOTONIC, &h1);
    for (int i = 0; i < RUNS && st == PIT_SUCCESS; ++i) st = be->event_elapsed_ms(bctx, e[2 * i], e[2 * i + 1], &t[i]);
    for (int i = 0; i < 2 * RUNS; ++i)
        if (e[i]) be->event_destroy(bctx, e[i]);
    if (st != PIT_SUCCESS) return st;
    qsort(t, RUNS, sizeof t[0], test_cmp_double);
    *ms = 0.5 * (t[RUNS / 2 - 1] + t[RUNS / 2]);
    if (host_ms) *host_ms = ((double)(h1.tv_sec - h0.tv_sec) * 1e3 + (double)(h1.tv_nsec - h0.tv_nsec) * 1e-6) / RUNS;
    return PIT_SUCCESS;
}

/* A host whose allocations never fail on purpose. */
static inline int host_no_fault(void)
{
    return 0;
}

/* Which plug-in a test loads. */
typedef struct test_plugin {
    const char *name;  /* "cuda": the backend it must register */
    const char *env;   /* "PIT_CUDA_PLUGIN_PATH": where it is, when set */
    const char *built; /* where it is otherwise: the build's */
    const char *vendor; /* "CUDA", for messages */
    /* what init's PIT_ERR_NO_DEVICE message must start with (NULL ends the
     * list; no list: anything) */
    const char *const *no_device;
} test_plugin;

/* Loads the plug-in, registers it with host and initialises it. Returns 0
 * with *be and device 0's info, SKIP (printed) without a driver or device,
 * 1 (printed) on failure. */
static inline int load_plugin(const test_plugin *p, const pit_host *host, const pit_backend **be,
                              pit_device_info *info)
{
    const char *plugin = getenv(p->env);
    if (!plugin || !*plugin) plugin = p->built;
    debug_log = getenv("PIT_LOG") && !strcmp(getenv("PIT_LOG"), "debug");
    void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL cannot load %s: %s\n", plugin, dlerror());
        return 1;
    }
    pit_backend_register_fn reg = (pit_backend_register_fn)(uintptr_t)dlsym(lib, PIT_BACKEND_REGISTER_SYMBOL);
    if (!reg || !(*be = reg(host)) || (*be)->abi_version != PIT_BACKEND_ABI_VERSION ||
        strcmp((*be)->name, p->name) != 0) {
        printf("FAIL %s has no compatible %s registering \"%s\"\n", plugin, PIT_BACKEND_REGISTER_SYMBOL, p->name);
        return 1;
    }
    pit_status st = (*be)->init(host);
    if (st == PIT_ERR_NO_DEVICE) {
        int clear = !p->no_device;
        for (const char *const *w = p->no_device; w && *w && !clear; ++w) clear = !strncmp(last_error, *w, strlen(*w));
        if (!clear) {
            printf("FAIL init without a device said \"%s\", not why (\"%s...\" expected)\n", last_error,
                   p->no_device[0]);
            return 1;
        }
        printf("SKIPPED: %s\n", last_error);
        return SKIP;
    }
    int count = 0;
    if (st == PIT_SUCCESS) st = (*be)->device_count(&count);
    if (st == PIT_SUCCESS && count < 1) {
        printf("SKIPPED: no %s device\n", p->vendor);
        return SKIP;
    }
    if (st == PIT_SUCCESS) st = (*be)->device_info(0, info);
    if (st != PIT_SUCCESS) {
        printf("FAIL loading the %s plug-in: status %d: %s\n", p->vendor, (int)st, last_error);
        return 1;
    }
    return 0;
}

#ifdef PIT_CUDA_PLUGIN
/* The CUDA plug-in ($PIT_CUDA_PLUGIN_PATH or the build's). */
static inline int load_cuda_plugin(const pit_host *host, const pit_backend **be, pit_device_info *info)
{
    static const test_plugin cuda = {"cuda", "PIT_CUDA_PLUGIN_PATH", PIT_CUDA_PLUGIN, "CUDA", NULL};
    return load_plugin(&cuda, host, be, info);
}
#endif

#endif
