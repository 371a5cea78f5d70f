/*
 * examples/example_util.h - the few helpers the examples share: status
 * checks, opening a context, host <-> device copies of f32 data kept as
 * doubles on the host (for the CPU reference), checks against the reference,
 * device timing with events, and the command line.
 */
#ifndef PIT_EXAMPLE_UTIL_H
#define PIT_EXAMPLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pit.h"
#include "reference.h"

/* Every pit call is checked: on failure print the call and pit_last_error(), exit 1. */
#define EX_CHECK(call) ex_check((call), #call, __FILE__, __LINE__)

static inline void ex_check(pit_status s, const char *call, const char *file, int line)
{
    if (s == PIT_SUCCESS)
        return;
    fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, call, pit_status_string(s),
            pit_last_error());
    exit(1);
}

static inline void *ex_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

/* A context on the best device (PIT_BACKEND, else cuda, hip, opencl).
 * Without any device the example cannot run: exit 77 (a skip for ctest). */
static inline pit_context *ex_open(const char *title)
{
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(NULL, -1, &ctx);
    if (s == PIT_ERR_NO_DEVICE || s == PIT_ERR_BACKEND_NOT_FOUND) {
        printf("%s: skipped, no pit device: %s\n", title, pit_last_error());
        exit(77);
    }
    EX_CHECK(s);
    pit_device_info d;
    EX_CHECK(pit_context_get_info(ctx, &d));
    printf("%s\ndevice: %s:%d %s (%s)\n", title, d.backend, d.device_index, d.name, d.arch);
    return ctx;
}

/* Parses "[--NAME N]" (or --NAME=N) into *value; anything else prints usage, exits 2. */
static inline void ex_parse_flag(int argc, char **argv, const char *name, int64_t *value,
                                 const char *meaning)
{
    size_t len = strlen(name);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], name) == 0 && i + 1 < argc)
            v = argv[++i];
        else if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=')
            v = argv[i] + len + 1;
        char *end = NULL;
        long long n = v ? strtoll(v, &end, 10) : 0;
        if (!v || *end || n <= 0) {
            fprintf(stderr, "usage: %s [%s N]   N: %s (default %lld)\n", argv[0], name, meaning,
                    (long long)*value);
            exit(2);
        }
        *value = n;
    }
}

static inline pit_tensor *ex_tensor(pit_context *ctx, pit_dtype dt, int rank, const int64_t *shape)
{
    pit_tensor *t = NULL;
    EX_CHECK(pit_tensor_create(ctx, dt, rank, shape, &t));
    return t;
}

/* Rounds x to f32 in place (so the reference sees what the device sees) and uploads it. */
static inline void ex_upload(pit_tensor *t, double *x, size_t n)
{
    float *f = ex_alloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)x[i];
        x[i] = f[i];
    }
    EX_CHECK(pit_tensor_upload(t, NULL, f, n * sizeof(float)));
    free(f);
}

/* Uploads a 0/1 pattern as a u8 mask (what a framework's bool tensor is). */
static inline void ex_upload_mask(pit_tensor *t, const double *x, size_t n)
{
    unsigned char *b = ex_alloc(n, 1);
    for (size_t i = 0; i < n; i++)
        b[i] = x[i] != 0.0;
    EX_CHECK(pit_tensor_upload(t, NULL, b, n));
    free(b);
}

static inline void ex_download(const pit_tensor *t, double *x, size_t n)
{
    float *f = ex_alloc(n, sizeof(float));
    EX_CHECK(pit_tensor_download(t, NULL, f, n * sizeof(float)));
    for (size_t i = 0; i < n; i++)
        x[i] = f[i];
    free(f);
}

/* Compares the f32 tensor t with the reference; prints the result, returns 1 when within
 * the conformance tolerance. */
static inline int ex_check_close(const char *what, const pit_tensor *t, const double *ref, size_t n)
{
    double *got = ex_alloc(n, sizeof(double));
    ex_download(t, got, n);
    double err = pit_ref_rel_error(ref, got, n), tol = pit_ref_tolerance(PIT_F32);
    printf("  check %-30s rel error %.2e (tolerance %.0e)  %s\n", what, err, tol,
           err <= tol ? "ok" : "FAILED");
    free(got);
    return err <= tol;
}

/* One step of work to time; returns the first failing status. */
typedef pit_status (*ex_step_fn)(void *user);

static inline int ex_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median device time (ms, events on the default stream) of `runs` calls of step,
 * after one untimed warm-up call (kernel compilation). prepare, when not NULL,
 * runs untimed before every call (e.g. a new sparsity pattern). */
static inline double ex_time_ms(pit_context *ctx, int runs, ex_step_fn prepare, ex_step_fn step,
                                void *user)
{
    double ms[64];
    if (runs > 64)
        runs = 64;
    if (prepare)
        EX_CHECK(prepare(user));
    EX_CHECK(step(user));
    for (int r = 0; r < runs; r++) {
        pit_event *start = NULL, *end = NULL;
        if (prepare)
            EX_CHECK(prepare(user));
        EX_CHECK(pit_synchronize(ctx, NULL));
        EX_CHECK(pit_event_record(ctx, NULL, &start));
        EX_CHECK(step(user));
        EX_CHECK(pit_event_record(ctx, NULL, &end));
        EX_CHECK(pit_event_elapsed_ms(start, end, &ms[r]));
        EX_CHECK(pit_event_destroy(start));
        EX_CHECK(pit_event_destroy(end));
    }
    qsort(ms, (size_t)runs, sizeof ms[0], ex_cmp_double);
    return ms[runs / 2];
}

/* Prints pit's time next to the dense way's. */
static inline void ex_print_times(const char *pit_what, double pit_ms, const char *dense_what,
                                  double dense_ms)
{
    printf("  pit   %-44s %9.3f ms\n", pit_what, pit_ms);
    printf("  dense %-44s %9.3f ms\n", dense_what, dense_ms);
    printf("  speed-up of pit over dense: %.2fx\n", dense_ms / pit_ms);
}

#endif
