/*
 * core/reference/reference.h - CPU references of every operator (double accumulation)
 * and the dtype conversions they need. Built into the static library
 * pit_reference that tests, tools and examples link; not part of pit.h.
 */
#ifndef PIT_CORE_REFERENCE_H
#define PIT_CORE_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "pit.h"

/* IEEE half and bfloat16 (round to nearest even, NaN/Inf preserved). */
float pit_f16_to_f32(uint16_t h);
uint16_t pit_f32_to_f16(float f);
float pit_bf16_to_f32(uint16_t h);
uint16_t pit_f32_to_bf16(float f);

/* Converts n elements between a dtype's storage and double. */
void pit_ref_to_double(pit_dtype dtype, const void *src, size_t n, double *dst);
void pit_ref_from_double(pit_dtype dtype, const double *src, size_t n, void *dst);

/* C[b] = A[b] . B[b], contiguous row-major, double accumulation. */
void pit_ref_matmul(int64_t batch, int64_t m, int64_t n, int64_t k,
                    const double *A, const double *B, double *C);

/* out[0..n) = x[0..h) . W (h x n, row-major), double. */
void pit_ref_row_times(const double *x, const double *w, int64_t h, int64_t n, double *out);

/* ||got - ref|| / max(||ref||, tiny); +inf when got has a NaN/Inf that ref
 * does not have at the same place. */
double pit_ref_rel_error(const double *ref, const double *got, size_t n);

/* Per-dtype tolerance of the conformance suite: f32 1e-4, f16/bf16 1e-2. */
double pit_ref_tolerance(pit_dtype dtype);

/* Seeded generator for test data (xorshift64*), never returning exactly 0. */
typedef struct pit_rng { uint64_t s; } pit_rng;
void pit_rng_seed(pit_rng *r, uint64_t seed);
double pit_rng_uniform(pit_rng *r); /* in [-1, 1] without 0 */
uint64_t pit_rng_next(pit_rng *r);

/* Fills x with seeded values in [-1, 1], none of them zero. */
void pit_ref_fill_random(pit_rng *r, double *x, size_t n);

/* Zeroes whole tr x tc micro-tiles of each rows x cols matrix of a batch, each
 * with probability `sparsity`. The tile grid starts at (-off_r, -off_c) so a
 * non-zero offset gives patterns unaligned to pit's micro-tiles. Returns the
 * fraction of elements now zero. */
double pit_ref_sparsify_tiles(pit_rng *r, double *x, int64_t batch, int64_t rows, int64_t cols,
                              int tr, int tc, int off_r, int off_c, double sparsity);


/* ---- operators of dynamic-sparse models (all contiguous row-major) ------- *
 * A mask element is "on" when it is non-zero or NaN (pit_ref_mask_on). Masks
 * are [m, n], shared by every batch, or [batch, m, n] when mask_batched. */
int pit_ref_mask_on(double v);

/* Rewrites a 0/1 pattern of n elements in the encodings pit.h allows a mask
 * of dtype dt, by turns: "on" as any non-zero value (i32: INT_MIN, -1, 1,
 * INT_MAX; floats: NaN, -inf, 1, minus the smallest subnormal), "off" as 0
 * or, for floats, -0.0. A u8 (bool) mask stays 0/1. Tests upload the result,
 * so every kernel's "non-zero" is held to pit_ref_mask_on's. */
void pit_ref_encode_mask(pit_dtype dt, double *x, size_t n);

/* C[b] = (A[b] [m,k] . B[b]^T, B[b] [n,k]) where the mask is on, else 0. */
void pit_ref_sddmm(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                   const double *B, const double *mask, int mask_batched, double *C);

/* Y = softmax(scale * X) along rows over the mask; 0 off the mask and for
 * fully masked rows; a -inf logit weighs 0, a row of -inf alone gives 0. */
void pit_ref_softmax(int64_t batch, int64_t m, int64_t n, const double *X, const double *mask,
                     int mask_batched, double scale, double *Y);
/* dX = scale * Y * (dY - rowsum(dY * Y)) on the mask, 0 elsewhere. */
void pit_ref_softmax_backward(int64_t batch, int64_t m, int64_t n, const double *Y,
                              const double *dY, const double *mask, int mask_batched,
                              double scale, double *dX);

/* O[b] = softmax(scale * Q[b] K[b]^T masked) V[b]; Q, K [bh,l,d], V, O [bh,l,dv]. */
void pit_ref_attention(int64_t bh, int64_t l, int64_t d, int64_t dv, const double *Q,
                       const double *K, const double *V, const double *mask, int mask_batched,
                       double scale, double *O);

/* pit_attention's problem: Q [b, hq, lq, d], K [b, hkv, lk, d], V [b, hkv, lk,
 * dv], O [b, hq, lq, dv], lse [b, hq, lq], all contiguous; query head h reads
 * kv head h / (hq / hkv). mask (NULL: none) [mask_b, mask_h, lq, lk] and
 * block_mask (NULL: none) [block_b, block_h, ceil(lq / block_q), ceil(lk /
 * block_k)], contiguous, a leading extent of 1 serving every batch or head.
 * Key j is allowed for query i when, with at = i + lk - lq: causal gives
 * j <= at, window_left >= 0 j >= at - window_left, window_right >= 0
 * j <= at + window_right, and both masks are on there. */
typedef struct pit_ref_attn {
    int64_t b, hq, hkv, lq, lk, d, dv;
    double scale;
    int causal;
    int64_t window_left, window_right; /* -1: no bound */
    const double *mask;
    int64_t mask_b, mask_h;
    const double *block_mask;
    int64_t block_b, block_h;
    int64_t block_q, block_k;
} pit_ref_attn;

/* 1 when key j is allowed for query i of batch b and query head h. */
int pit_ref_attention_allowed(const pit_ref_attn *p, int64_t b, int64_t h, int64_t i, int64_t j);
/* O = softmax(scale Q K^T over the allowed keys) V; lse (may be NULL) = the
 * natural log of the sum of exp(scale Q.K) over them. A row with no allowed
 * key: O 0, lse -inf. */
void pit_ref_attention_full(const pit_ref_attn *p, const double *Q, const double *K,
                            const double *V, double *O, double *lse);
/* One query row of it: o [dv] and *lse (lse may be NULL) for the query q [d]
 * over K [lk, d] and V [lk, dv] of its kv head, the keys on[j] != 0
 * allowed; scratch holds 2 lk doubles. For a caller that checks sampled
 * rows of a problem too large to hold in doubles. */
void pit_ref_attention_query(const pit_ref_attn *p, const double *q, const double *K, const double *V,
                             const char *on, double *scratch, double *o, double *lse);
/* Its backward given dO [b, hq, lq, dv]: dQ like Q, dK like K, dV like V
 * (dK and dV summed over the query heads of a kv head); any may be NULL.
 * P is recomputed in double from Q and K. */
void pit_ref_attention_backward(const pit_ref_attn *p, const double *Q, const double *K,
                                const double *V, const double *dO, double *dQ, double *dK,
                                double *dV);

/* MoE: X [t,h], ids [t,k] (ids outside 0..e-1 skipped), gates [t,k], W [e,h,n],
 * Y [t,n] = sum_j gates[t,j] * X[t] . W[ids[t,j]]. */
void pit_ref_moe_forward(int64_t t, int64_t h, int64_t n, int64_t e, int64_t k, const double *X,
                         const int32_t *ids, const double *gates, const double *W, double *Y);
/* Its backward given dY [t,n]; dX [t,h], dW [e,h,n], dgates [t,k]; any may be NULL. */
void pit_ref_moe_backward(int64_t t, int64_t h, int64_t n, int64_t e, int64_t k,
                          const double *X, const int32_t *ids, const double *gates,
                          const double *W, const double *dY, double *dX, double *dW,
                          double *dgates);

/* The MoE expert FFN of pit_moe_ffn (reference_moe_ffn.c). act is a
 * pit_activation; gated ones (SwiGLU, GeGLU) read a row h of 2f values (g
 * then u), the others f values. */
int pit_ref_activation_gated(int act);
/* a[0..f) = act(h) */
void pit_ref_activation(int act, int64_t f, const double *h, double *a);
/* dh (2f or f values) = d act(h) / dh * da[0..f) */
void pit_ref_activation_backward(int act, int64_t f, const double *h, const double *da,
                                 double *dh);
/* Shape: t tokens of h features, e experts of f hidden units, top-k. */
typedef struct pit_ref_ffn {
    int64_t t, h, f, e, k;
    int act;
} pit_ref_ffn;
/* X [t,h], ids [t,k] (ids outside 0..e-1 skipped), gates [t,k], W1 [e,h,w]
 * (w = 2f gated, else f), W2 [e,f,h]; Y [t,h] = sum_j gates[t,j] *
 * act(X[t] . W1[id]) . W2[id]. */
void pit_ref_moe_ffn(const pit_ref_ffn *s, const double *X, const int32_t *ids,
                     const double *gates, const double *W1, const double *W2, double *Y);
/* Its gradients given dY [t,h]: dX [t,h], dW1 [e,h,w], dW2 [e,f,h], dgates
 * [t,k]; any may be NULL. */
typedef struct pit_ref_ffn_grads {
    double *dX, *dW1, *dW2, *dgates;
} pit_ref_ffn_grads;
void pit_ref_moe_ffn_backward(const pit_ref_ffn *s, const double *X, const int32_t *ids,
                              const double *gates, const double *W1, const double *W2,
                              const double *dY, pit_ref_ffn_grads *g);

/* C[b] rows = A[b] rows . B (B [k,n] shared, or [batch,k,n] when b_batched) for
 * rows of A with a non-zero; other rows 0, or left as they are when keep. */
void pit_ref_matmul_rows(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                         const double *B, int b_batched, int keep, double *C);

/* Y = max(X, 0), NaN propagated. */
void pit_ref_relu(size_t n, const double *X, double *Y);
/* H = relu(X [t,d] . W1 [d,f]), Y = H . W2 [f,d2]. */
void pit_ref_relu_ffn(int64_t t, int64_t d, int64_t f, int64_t d2, const double *X,
                      const double *W1, const double *W2, double *H, double *Y);
/* Y[b] = X[b]^T, X [batch, rows, cols]. */
void pit_ref_transpose(int64_t batch, int64_t rows, int64_t cols, const double *X, double *Y);
/* For C = A . B (A [b,m,k], B [b,k,n], dC [b,m,n]): dA = (dC . B^T) where A is
 * non-zero, else 0; dB = A^T . dC. Either output may be NULL. */
void pit_ref_matmul_backward(int64_t batch, int64_t m, int64_t n, int64_t k, const double *A,
                             const double *B, const double *dC, double *dA, double *dB);

/* Magnitude pruning of a rows x cols matrix in place, the rule of
 * pit_prune_magnitude: W is cut into br x bc blocks from (0, 0) (blocks at
 * the right and bottom edges are smaller); a block's norm is the double sum of
 * |w| over its elements in row-major order; the blocks are ordered by norm
 * ascending, NaN norms after every other, equal norms by row-major block index
 * ascending; the first llround(sparsity * number of blocks) are zeroed. */
void pit_ref_prune_magnitude(int64_t rows, int64_t cols, int32_t br, int32_t bc, double sparsity,
                             double *W);

#endif /* PIT_CORE_REFERENCE_H */
