/*
 * tests/backends/cuda/test_check.h - the check of the CUDA plug-in's tests
 * that run without a device (test_cuda_libs.c, test_cuda_prebuilt.c,
 * test_cuda_image_order.c): counts checks and failures, prints each
 * failure with its condition and a message. Included by one .c each.
 */
#ifndef PIT_CUDA_TEST_CHECK_H
#define PIT_CUDA_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                             \
    do {                                                             \
        ++checks;                                                    \
        if (!(cond)) {                                               \
            ++failures;                                              \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
            printf(__VA_ARGS__);                                     \
            printf("\n");                                            \
        }                                                            \
    } while (0)

#endif /* PIT_CUDA_TEST_CHECK_H */
