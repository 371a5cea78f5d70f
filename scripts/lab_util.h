/*
 * scripts/lab_util.h - helpers of the lab programs in scripts/ (not
 * shipped): a monotonic clock, a status check that prints pit's message,
 * and f32 -> 16-bit words.
 */
#ifndef PIT_LAB_UTIL_H
#define PIT_LAB_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pit.h>

static inline double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static inline int ok(pit_status s, const char *call)
{
    if (s != PIT_SUCCESS) fprintf(stderr, "%s: %s: %s\n", call, pit_status_string(s), pit_last_error());
    return s == PIT_SUCCESS;
}

/* 16-bit words of x (round to nearest even): bf16 keeps the top half of
 * the f32, f16 is built from the exponent and mantissa (normal range) */
static inline uint16_t to16(float x, pit_dtype dt)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if (dt == PIT_BF16) return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int e = (int)((u >> 23) & 0xff) - 127 + 15;
    const uint32_t mant = (u >> 13) & 0x3ffu;
    return (uint16_t)(sign | ((uint32_t)e << 10) | mant); /* |x| in [0.5, 1.5] */
}

#endif
