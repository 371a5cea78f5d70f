/*
 * tests/rtest.h - small helpers shared by the reliability tests
 * (test_threads.c, test_faults.c, test_numerics.c; test_device_dtypes.c
 * and backends/cuda/test_cuda_host.c use its checks and uploads): checks
 * that count and
 * print, an OpenCL context or a skip (exit 77), host <-> device copies of
 * double arrays in any dtype.
 */
#ifndef PIT_TESTS_RTEST_H
#define PIT_TESTS_RTEST_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pit.h"
#include "reference.h"

static atomic_int rt_passed, rt_failed; /* threads count too */

#define RT_CHECK(cond, ...)                                              \
    do {                                                                 \
        if (cond) {                                                      \
            rt_passed++;                                                 \
        } else {                                                         \
            rt_failed++;                                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                  \
            printf(__VA_ARGS__);                                         \
            printf(" [last error: %s]\n", pit_last_error());             \
        }                                                                \
    } while (0)

/* The OpenCL context every reliability test runs on, or exit 77 (skipped). */
static inline pit_context *rt_context_or_skip(const char *test)
{
    pit_context *ctx = NULL;
    if (pit_context_create("opencl", 0, &ctx) != PIT_SUCCESS) {
        printf("%s: SKIPPED: no OpenCL device: %s\n", test, pit_last_error());
        exit(77);
    }
    return ctx;
}

static inline int rt_finish(const char *test)
{
    printf("%s: %d passed, %d failed\n", test, atomic_load(&rt_passed), atomic_load(&rt_failed));
    return rt_failed ? 1 : 0;
}

static inline pit_tensor *rt_tensor(pit_context *ctx, pit_dtype dt, int rank, int64_t b, int64_t r,
                             int64_t c)
{
    int64_t shape[3] = {b, r, c};
    pit_tensor *t = NULL;
    pit_status s = pit_tensor_create(ctx, dt, rank, rank == 3 ? shape : shape + 1, &t);
    if (s != PIT_SUCCESS) {
        printf("FATAL: pit_tensor_create: %s: %s\n", pit_status_string(s), pit_last_error());
        exit(1);
    }
    return t;
}

/* A rank-4 tensor [a, b, c, d]. */
static inline pit_tensor *rt_tensor4(pit_context *ctx, pit_dtype dt, int64_t a, int64_t b,
                                     int64_t c, int64_t d)
{
    const int64_t shape[4] = {a, b, c, d};
    pit_tensor *t = NULL;
    pit_status s = pit_tensor_create(ctx, dt, 4, shape, &t);
    if (s != PIT_SUCCESS) {
        printf("FATAL: pit_tensor_create: %s: %s\n", pit_status_string(s), pit_last_error());
        exit(1);
    }
    return t;
}

/* Stores x in the tensor's dtype, and rounds x to what was stored. */
static inline pit_status rt_upload(pit_tensor *t, pit_stream *s, double *x, size_t n)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    void *buf = malloc(n * 4 + 4);
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_ref_from_double(d.dtype, x, n, buf);
    pit_ref_to_double(d.dtype, buf, n, x);
    pit_status st = pit_tensor_upload(t, s, buf, n * pit_dtype_size(d.dtype));
    free(buf);
    return st;
}

static inline pit_status rt_download(const pit_tensor *t, pit_stream *s, double *x, size_t n)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    void *buf = malloc(n * 4 + 4);
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_status st = pit_tensor_download(t, s, buf, n * pit_dtype_size(d.dtype));
    if (st == PIT_SUCCESS)
        pit_ref_to_double(d.dtype, buf, n, x);
    free(buf);
    return st;
}

#endif /* PIT_TESTS_RTEST_H */
