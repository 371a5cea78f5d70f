/* core/reference.c - CPU references (double accumulation) and conversions. */
#include <math.h>
#include <string.h>

#include "reference.h"

float pit_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t pit_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* Inf or NaN (keep NaN quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* subnormal or zero in half */
        float a;
        memcpy(&a, &ax, 4);
        /* a * 2^24 rounded to nearest even gives the subnormal mantissa. */
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * 16777216.0f));
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xfffu + mant_odd; /* round to nearest even */
    return (uint16_t)(sign | (uint16_t)((ax - 0x38000000u) >> 13));
}

float pit_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t pit_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void pit_ref_to_double(pit_dtype dtype, const void *src, size_t n, double *dst)
{
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case PIT_F32: dst[i] = ((const float *)src)[i]; break;
        case PIT_F16: dst[i] = pit_f16_to_f32(((const uint16_t *)src)[i]); break;
        case PIT_BF16: dst[i] = pit_bf16_to_f32(((const uint16_t *)src)[i]); break;
        case PIT_I32: dst[i] = ((const int32_t *)src)[i]; break;
        }
    }
}

void pit_ref_from_double(pit_dtype dtype, const double *src, size_t n, void *dst)
{
    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case PIT_F32: ((float *)dst)[i] = (float)src[i]; break;
        case PIT_F16: ((uint16_t *)dst)[i] = pit_f32_to_f16((float)src[i]); break;
        case PIT_BF16: ((uint16_t *)dst)[i] = pit_f32_to_bf16((float)src[i]); break;
        case PIT_I32: ((int32_t *)dst)[i] = (int32_t)src[i]; break;
        }
    }
}

void pit_ref_matmul(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                    const double *B, double *C)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *a = A + b * m * k, *bb = B + b * k * n;
        double *c = C + b * m * n;
        for (int64_t i = 0; i < m * n; i++)
            c[i] = 0.0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) {
                double av = a[i * k + p];
                if (av == 0.0)
                    continue; /* 0 * NaN in B is NaN in a dense GEMM, but B is finite in tests */
                for (int64_t j = 0; j < n; j++)
                    c[i * n + j] += av * bb[p * n + j];
            }
    }
}

double pit_ref_rel_error(const double *ref, const double *got, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        int ref_finite = isfinite(ref[i]), got_finite = isfinite(got[i]);
        if (!got_finite || !ref_finite) {
            if (isnan(ref[i]) && isnan(got[i]))
                continue;
            if (ref[i] == got[i]) /* same infinity */
                continue;
            return INFINITY;
        }
        double d = got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den < 1e-300)
        return sqrt(num); /* reference is all zero: absolute error */
    return sqrt(num / den);
}

double pit_ref_tolerance(pit_dtype dtype)
{
    return dtype == PIT_F32 ? 1e-4 : 1e-2;
}

void pit_rng_seed(pit_rng *r, uint64_t seed)
{
    r->s = seed ? seed * 0x9e3779b97f4a7c15ull : 0x853c49e6748fea9bull;
}

uint64_t pit_rng_next(pit_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

double pit_rng_uniform(pit_rng *r)
{
    double u = (double)(pit_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    double v = 2.0 * u - 1.0;
    return v == 0.0 ? 0.5 : v;
}

void pit_ref_fill_random(pit_rng *r, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = pit_rng_uniform(r);
}

double pit_ref_sparsify_tiles(pit_rng *r, double *x, int64_t batch, int64_t rows, int64_t cols,
                              int tr, int tc, int off_r, int off_c, double sparsity)
{
    int64_t zeros = 0;
    int64_t tiles_r = (rows + off_r + tr - 1) / tr, tiles_c = (cols + off_c + tc - 1) / tc;
    for (int64_t b = 0; b < batch; b++) {
        double *m = x + b * rows * cols;
        for (int64_t ti = 0; ti < tiles_r; ti++)
            for (int64_t tj = 0; tj < tiles_c; tj++) {
                double u = (double)(pit_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
                if (u >= sparsity)
                    continue;
                for (int64_t i = ti * tr - off_r; i < (ti + 1) * tr - off_r; i++)
                    for (int64_t j = tj * tc - off_c; j < (tj + 1) * tc - off_c; j++)
                        if (i >= 0 && i < rows && j >= 0 && j < cols && m[i * cols + j] != 0.0) {
                            m[i * cols + j] = 0.0;
                            zeros++;
                        }
            }
    }
    int64_t total = batch * rows * cols;
    return total ? (double)zeros / (double)total : 0.0;
}
