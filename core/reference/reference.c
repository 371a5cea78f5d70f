/* core/reference/reference.c - CPU references (double accumulation) and conversions. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
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
        case PIT_U8: dst[i] = ((const uint8_t *)src)[i]; break;
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
        case PIT_U8: ((uint8_t *)dst)[i] = src[i] != 0.0 ? 1 : 0; break;
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

/* ---- operators of dynamic-sparse models ----------------------------------------- */

int pit_ref_mask_on(double v)
{
    return v != 0.0 || isnan(v);
}

/* The smallest positive subnormal of a float dtype (only its lowest bit set). */
static double smallest_subnormal(pit_dtype dt)
{
    return dt == PIT_F16 ? 0x1p-24 : dt == PIT_BF16 ? 0x1p-133 : 0x1p-149;
}

void pit_ref_encode_mask(pit_dtype dt, double *x, size_t n)
{
    if (dt == PIT_U8)
        return;
    for (size_t i = 0; i < n; i++) {
        int k = (int)(i % 4);
        if (x[i] == 0.0)
            x[i] = dt != PIT_I32 && k % 2 ? -0.0 : 0.0;
        else if (dt == PIT_I32)
            x[i] = k == 0 ? (double)INT32_MIN : k == 1 ? -1.0 : k == 2 ? 1.0 : (double)INT32_MAX;
        else
            x[i] = k == 0 ? NAN : k == 1 ? -INFINITY : k == 2 ? 1.0 : -smallest_subnormal(dt);
    }
}

static const double *mask_of(const double *mask, int mask_batched, int64_t b, int64_t m, int64_t n)
{
    return mask + (mask_batched ? b * m * n : 0);
}

static double dot_rows(const double *a, const double *b, int64_t k)
{
    double s = 0.0;
    for (int64_t p = 0; p < k; p++)
        s += a[p] * b[p];
    return s;
}

void pit_ref_sddmm(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                   const double *B, const double *mask, int mask_batched, double *C)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *mk = mask_of(mask, mask_batched, b, m, n);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                C[(b * m + i) * n + j] = pit_ref_mask_on(mk[i * n + j])
                                             ? dot_rows(A + (b * m + i) * k, B + (b * n + j) * k, k)
                                             : 0.0;
    }
}

/* Softmax of one row over the mask (0 off the mask, all 0 when none is on).
 * A -inf logit weighs 0, and a row of -inf alone is all 0: the max starts
 * at the lowest finite value, so exp never sees -inf - (-inf). */
static void softmax_row(const double *x, const double *mk, int64_t n, double scale, double *y)
{
    double mx = -DBL_MAX, sum = 0.0;
    for (int64_t j = 0; j < n; j++)
        if (pit_ref_mask_on(mk[j]) && scale * x[j] > mx)
            mx = scale * x[j];
    for (int64_t j = 0; j < n; j++)
        if (pit_ref_mask_on(mk[j]))
            sum += exp(scale * x[j] - mx);
    for (int64_t j = 0; j < n; j++)
        y[j] = pit_ref_mask_on(mk[j]) && sum > 0.0 ? exp(scale * x[j] - mx) / sum : 0.0;
}

void pit_ref_softmax(int64_t batch, int64_t m, int64_t n, const double *X, const double *mask,
                     int mask_batched, double scale, double *Y)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *mk = mask_of(mask, mask_batched, b, m, n);
        for (int64_t i = 0; i < m; i++)
            softmax_row(X + (b * m + i) * n, mk + i * n, n, scale, Y + (b * m + i) * n);
    }
}

void pit_ref_softmax_backward(int64_t batch, int64_t m, int64_t n, const double *Y,
                              const double *dY, const double *mask, int mask_batched,
                              double scale, double *dX)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *mk = mask_of(mask, mask_batched, b, m, n);
        for (int64_t i = 0; i < m; i++) {
            int64_t r = (b * m + i) * n;
            double s = 0.0;
            for (int64_t j = 0; j < n; j++)
                if (pit_ref_mask_on(mk[i * n + j]))
                    s += dY[r + j] * Y[r + j];
            for (int64_t j = 0; j < n; j++)
                dX[r + j] = pit_ref_mask_on(mk[i * n + j]) ? scale * Y[r + j] * (dY[r + j] - s)
                                                           : 0.0;
        }
    }
}

/* The element of a pattern [pb, ph, rows, cols] for batch b, head h (a
 * leading extent of 1 serves every batch or head). */
static int pattern_on(const double *x, int64_t pb, int64_t ph, int64_t rows, int64_t cols,
                      int64_t b, int64_t h, int64_t r, int64_t c)
{
    int64_t m = (pb > 1 ? b : 0) * ph + (ph > 1 ? h : 0);
    return pit_ref_mask_on(x[(m * rows + r) * cols + c]);
}

int pit_ref_attention_allowed(const pit_ref_attn *p, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const int64_t at = i + p->lk - p->lq; /* the key on the diagonal aligned to the end */
    if (p->causal && j > at)
        return 0;
    if ((p->window_left >= 0 && j < at - p->window_left) ||
        (p->window_right >= 0 && j > at + p->window_right))
        return 0;
    if (p->mask && !pattern_on(p->mask, p->mask_b, p->mask_h, p->lq, p->lk, b, h, i, j))
        return 0;
    if (p->block_mask &&
        !pattern_on(p->block_mask, p->block_b, p->block_h, (p->lq + p->block_q - 1) / p->block_q,
                    (p->lk + p->block_k - 1) / p->block_k, b, h, i / p->block_q,
                    j / p->block_k))
        return 0;
    return 1;
}

/* P of one query row over the allowed keys (on[j]; all 0 when none is), and
 * its lse: the log of the sum of exp(scale s[j]) over them (-inf: none). */
static double attention_probs(const pit_ref_attn *p, const double *s, const char *on, double *P)
{
    double mx = -DBL_MAX, sum = 0.0;
    for (int64_t j = 0; j < p->lk; j++)
        if (on[j] && p->scale * s[j] > mx)
            mx = p->scale * s[j];
    for (int64_t j = 0; j < p->lk; j++)
        sum += on[j] ? exp(p->scale * s[j] - mx) : 0.0;
    for (int64_t j = 0; j < p->lk; j++)
        P[j] = on[j] && sum > 0.0 ? exp(p->scale * s[j] - mx) / sum : 0.0;
    return sum > 0.0 ? mx + log(sum) : -INFINITY;
}

/* One query row: O's row = P V, and its lse. */
static void attention_row(const pit_ref_attn *p, const double *s, const char *on, double *P,
                          const double *V, double *o, double *lse)
{
    const double l = attention_probs(p, s, on, P);
    for (int64_t c = 0; c < p->dv; c++) {
        double acc = 0.0;
        for (int64_t j = 0; j < p->lk; j++)
            acc += P[j] * V[j * p->dv + c];
        o[c] = acc;
    }
    if (lse)
        *lse = l;
}

void pit_ref_attention_query(const pit_ref_attn *p, const double *q, const double *K, const double *V,
                             const char *on, double *scratch, double *o, double *lse)
{
    double *s = scratch, *P = scratch + (p->lk > 0 ? p->lk : 1);
    for (int64_t j = 0; j < p->lk; j++)
        s[j] = on[j] ? dot_rows(q, K + j * p->d, p->d) : 0.0;
    attention_row(p, s, on, P, V, o, lse);
}

void pit_ref_attention_full(const pit_ref_attn *p, const double *Q, const double *K,
                            const double *V, double *O, double *lse)
{
    const size_t n = (size_t)(p->lk > 0 ? p->lk : 1);
    double *scratch = malloc(2 * n * sizeof(double));
    char *on = malloc(n);
    if (!scratch || !on) {
        free(scratch);
        free(on);
        for (int64_t i = 0; i < p->b * p->hq * p->lq * p->dv; i++)
            O[i] = NAN; /* the comparison then fails loudly */
        return;
    }
    const int64_t group = p->hkv > 0 ? p->hq / p->hkv : 1;
    for (int64_t b = 0; b < p->b; b++)
        for (int64_t h = 0; h < p->hq; h++) {
            const int64_t qh = b * p->hq + h, kh = b * p->hkv + h / group;
            for (int64_t i = 0; i < p->lq; i++) {
                for (int64_t j = 0; j < p->lk; j++)
                    on[j] = (char)pit_ref_attention_allowed(p, b, h, i, j);
                pit_ref_attention_query(p, Q + (qh * p->lq + i) * p->d, K + kh * p->lk * p->d,
                                        V + kh * p->lk * p->dv, on, scratch, O + (qh * p->lq + i) * p->dv,
                                        lse ? lse + qh * p->lq + i : NULL);
            }
        }
    free(scratch);
    free(on);
}

/* The gradients of one query row (P of the allowed keys in p, 0 elsewhere). */
static void attention_row_backward(const pit_ref_attn *p, const double *P, const double *q,
                                   const double *K, const double *V, const double *dO,
                                   double *dq, double *dK, double *dV)
{
    double di = 0.0; /* dO . O, with O = P V */
    for (int64_t c = 0; c < p->dv; c++) {
        double o = 0.0;
        for (int64_t j = 0; j < p->lk; j++)
            o += P[j] * V[j * p->dv + c];
        di += dO[c] * o;
    }
    for (int64_t j = 0; j < p->lk; j++) {
        if (P[j] == 0.0)
            continue;
        const double ds = p->scale * P[j] * (dot_rows(dO, V + j * p->dv, p->dv) - di);
        for (int64_t c = 0; c < p->d; c++) {
            if (dq)
                dq[c] += ds * K[j * p->d + c];
            if (dK)
                dK[j * p->d + c] += ds * q[c];
        }
        for (int64_t c = 0; dV && c < p->dv; c++)
            dV[j * p->dv + c] += P[j] * dO[c];
    }
}

static void zero_doubles(double *x, int64_t n)
{
    for (int64_t i = 0; x && i < n; i++)
        x[i] = 0.0;
}

void pit_ref_attention_backward(const pit_ref_attn *p, const double *Q, const double *K,
                                const double *V, const double *dO, double *dQ, double *dK,
                                double *dV)
{
    zero_doubles(dQ, p->b * p->hq * p->lq * p->d);
    zero_doubles(dK, p->b * p->hkv * p->lk * p->d);
    zero_doubles(dV, p->b * p->hkv * p->lk * p->dv);
    const size_t n = (size_t)(p->lk > 0 ? p->lk : 1);
    double *s = malloc(n * sizeof(double)), *P = malloc(n * sizeof(double));
    char *on = malloc(n);
    const int64_t group = p->hkv > 0 ? p->hq / p->hkv : 1;
    for (int64_t b = 0; s && P && on && b < p->b; b++)
        for (int64_t h = 0; h < p->hq; h++) {
            const int64_t qh = b * p->hq + h, kh = b * p->hkv + h / group;
            const double *Kh = K + kh * p->lk * p->d, *Vh = V + kh * p->lk * p->dv;
            for (int64_t i = 0; i < p->lq; i++) {
                const double *q = Q + (qh * p->lq + i) * p->d;
                for (int64_t j = 0; j < p->lk; j++) {
                    on[j] = (char)pit_ref_attention_allowed(p, b, h, i, j);
                    s[j] = on[j] ? dot_rows(q, Kh + j * p->d, p->d) : 0.0;
                }
                (void)attention_probs(p, s, on, P);
                attention_row_backward(p, P, q, Kh, Vh, dO + (qh * p->lq + i) * p->dv,
                                       dQ ? dQ + (qh * p->lq + i) * p->d : NULL,
                                       dK ? dK + kh * p->lk * p->d : NULL,
                                       dV ? dV + kh * p->lk * p->dv : NULL);
            }
        }
    if (!s || !P || !on) /* the comparison then fails loudly */
        for (int64_t i = 0; dQ && i < p->b * p->hq * p->lq * p->d; i++)
            dQ[i] = NAN;
    free(s);
    free(P);
    free(on);
}

void pit_ref_attention(int64_t bh, int64_t l, int64_t d, int64_t dv, const double *Q,
                       const double *K, const double *V, const double *mask, int mask_batched,
                       double scale, double *O)
{
    const pit_ref_attn p = {.b = 1, .hq = bh, .hkv = bh, .lq = l, .lk = l, .d = d, .dv = dv,
                            .scale = scale, .window_left = -1, .window_right = -1,
                            .mask = mask, .mask_b = 1, .mask_h = mask_batched ? bh : 1};
    pit_ref_attention_full(&p, Q, K, V, O, NULL);
}

void pit_ref_row_times(const double *x, const double *w, int64_t h, int64_t n, double *out)
{
    for (int64_t c = 0; c < n; c++)
        out[c] = 0.0;
    for (int64_t p = 0; p < h; p++)
        for (int64_t c = 0; c < n; c++)
            out[c] += x[p] * w[p * n + c];
}

void pit_ref_moe_forward(int64_t t, int64_t h, int64_t n, int64_t e, int64_t k, const double *X,
                         const int32_t *ids, const double *gates, const double *W, double *Y)
{
    double *z = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < t * n; i++)
        Y[i] = z ? 0.0 : NAN;
    for (int64_t i = 0; z && i < t; i++)
        for (int64_t j = 0; j < k; j++) {
            int32_t x = ids[i * k + j];
            if (x < 0 || x >= e)
                continue;
            pit_ref_row_times(X + i * h, W + (int64_t)x * h * n, h, n, z);
            for (int64_t c = 0; c < n; c++)
                Y[i * n + c] += gates[i * k + j] * z[c];
        }
    free(z);
}

void pit_ref_moe_backward(int64_t t, int64_t h, int64_t n, int64_t e, int64_t k,
                          const double *X, const int32_t *ids, const double *gates,
                          const double *W, const double *dY, double *dX, double *dW,
                          double *dgates)
{
    double *z = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (dX)
        memset(dX, 0, (size_t)(t * h) * sizeof(double));
    if (dW)
        memset(dW, 0, (size_t)(e * h * n) * sizeof(double));
    if (dgates)
        memset(dgates, 0, (size_t)(t * k) * sizeof(double));
    for (int64_t i = 0; z && i < t; i++)
        for (int64_t j = 0; j < k; j++) {
            int32_t x = ids[i * k + j];
            if (x < 0 || x >= e)
                continue;
            const double g = gates[i * k + j], *w = W + (int64_t)x * h * n, *dy = dY + i * n;
            for (int64_t p = 0; dX && p < h; p++)
                dX[i * h + p] += g * dot_rows(w + p * n, dy, n);
            for (int64_t p = 0; dW && p < h; p++)
                for (int64_t c = 0; c < n; c++)
                    dW[((int64_t)x * h + p) * n + c] += g * X[i * h + p] * dy[c];
            if (dgates) {
                pit_ref_row_times(X + i * h, w, h, n, z);
                dgates[i * k + j] = dot_rows(z, dy, n);
            }
        }
    free(z);
}

static int row_nonzero(const double *a, int64_t k)
{
    for (int64_t p = 0; p < k; p++)
        if (a[p] != 0.0 || isnan(a[p]))
            return 1;
    return 0;
}

void pit_ref_matmul_rows(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                         const double *B, int b_batched, int keep, double *C)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m; i++) {
            const double *a = A + (b * m + i) * k;
            double *c = C + (b * m + i) * n;
            if (row_nonzero(a, k))
                pit_ref_row_times(a, B + (b_batched ? b * k * n : 0), k, n, c);
            else if (!keep)
                memset(c, 0, (size_t)n * sizeof(double));
        }
}

void pit_ref_relu(size_t n, const double *X, double *Y)
{
    for (size_t i = 0; i < n; i++)
        Y[i] = X[i] < 0.0 ? 0.0 : X[i];
}

void pit_ref_relu_ffn(int64_t t, int64_t d, int64_t f, int64_t d2, const double *X,
                      const double *W1, const double *W2, double *H, double *Y)
{
    pit_ref_matmul(1, t, f, d, X, W1, H);
    pit_ref_relu((size_t)(t * f), H, H);
    pit_ref_matmul(1, t, d2, f, H, W2, Y);
}

void pit_ref_transpose(int64_t batch, int64_t rows, int64_t cols, const double *X, double *Y)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                Y[(b * cols + j) * rows + i] = X[(b * rows + i) * cols + j];
}

void pit_ref_matmul_backward(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                             const double *B, const double *dC, double *dA, double *dB)
{
    for (int64_t b = 0; b < batch; b++) {
        const double *a = A + b * m * k, *bb = B + b * k * n, *dc = dC + b * m * n;
        for (int64_t i = 0; dA && i < m; i++)
            for (int64_t p = 0; p < k; p++)
                dA[b * m * k + i * k + p] = pit_ref_mask_on(a[i * k + p])
                                                ? dot_rows(dc + i * n, bb + p * n, n) : 0.0;
        for (int64_t p = 0; dB && p < k; p++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0.0;
                for (int64_t i = 0; i < m; i++)
                    s += a[i * k + p] * dc[i * n + j];
                dB[b * k * n + p * n + j] = s;
            }
    }
}

/* Ascending, NaN after every number. */
static int cmp_norm_nan_last(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    if (isnan(a) || isnan(b))
        return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

/* 1 when a block of norm x is zeroed, given the threshold norm v: x < v, or
 * x equal to v (NaN equal to NaN) while *ties_left permits, in index order. */
static int prune_pick(double x, double v, int64_t *ties_left)
{
    int same = isnan(v) ? isnan(x) : x == v;
    if (!same)
        return !isnan(x) && (isnan(v) || x < v);
    return (*ties_left)-- > 0;
}

void pit_ref_prune_magnitude(int64_t rows, int64_t cols, int32_t br, int32_t bc, double sparsity,
                             double *W)
{
    int64_t nbr = (rows + br - 1) / br, nbc = (cols + bc - 1) / bc, nb = nbr * nbc;
    int64_t nzero = (int64_t)llround(sparsity * (double)nb);
    double *norm = calloc((size_t)nb + 1, sizeof(double));
    double *sorted = calloc((size_t)nb + 1, sizeof(double));
    if (!norm || !sorted || nzero <= 0) {
        free(norm);
        free(sorted);
        return;
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t r = (b / nbc) * br; r < rows && r < (b / nbc + 1) * br; r++)
            for (int64_t c = (b % nbc) * bc; c < cols && c < (b % nbc + 1) * bc; c++)
                norm[b] += fabs(W[r * cols + c]);
    memcpy(sorted, norm, (size_t)nb * sizeof(double));
    qsort(sorted, (size_t)nb, sizeof(double), cmp_norm_nan_last);
    /* v = the nzero-th smallest norm: every block below it goes, and of the
     * blocks equal to it as many as are still needed, lowest index first. */
    double v = sorted[(nzero < nb ? nzero : nb) - 1];
    int64_t ties_left = 0;
    for (int64_t i = 0; i < nzero && i < nb; i++)
        ties_left += isnan(v) ? isnan(sorted[i]) : sorted[i] == v;
    for (int64_t b = 0; b < nb; b++) {
        if (!prune_pick(norm[b], v, &ties_left))
            continue;
        for (int64_t r = (b / nbc) * br; r < rows && r < (b / nbc + 1) * br; r++)
            for (int64_t c = (b % nbc) * bc; c < cols && c < (b % nbc + 1) * bc; c++)
                W[r * cols + c] = 0.0;
    }
    free(norm);
    free(sorted);
}
