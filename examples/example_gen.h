/*
 * examples/example_gen.h - the realistic dynamic sparsity the examples build,
 * shared with `pit bench --suite layers`: skewed top-k MoE routing, the padded
 * batch of the dense MoE way, and OPT-style ReLU FFN inputs (~90% of the
 * activations zero after the ReLU). Host only; needs reference.h's pit_rng.
 */
#ifndef PIT_EXAMPLE_GEN_H
#define PIT_EXAMPLE_GEN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reference.h"

/* Top-k routing from router logits [T, E] (modified in place): expert e's
 * logit gets -skew * e (expert 0 the most popular), each token takes its k
 * best experts with gates = softmax over those k logits. ids, gates [T, k];
 * load[e] (zeroed by the caller) counts the token-slots of expert e. */
static inline void ex_gen_route(double *logit, int64_t T, int E, int k, double skew, int32_t *ids,
                                double *gates, int64_t *load)
{
    for (int64_t t = 0; t < T; t++) {
        double *l = logit + t * E;
        for (int e = 0; e < E; e++)
            l[e] -= skew * e;
        int32_t *best = ids + t * k;
        for (int j = 0; j < k; j++) {
            best[j] = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++)
                    taken |= best[i] == e;
                if (!taken && (best[j] < 0 || l[e] > l[best[j]]))
                    best[j] = e;
            }
        }
        double sum = 0;
        for (int j = 0; j < k; j++)
            sum += exp(l[best[j]] - l[best[0]]);
        for (int j = 0; j < k; j++) {
            gates[t * k + j] = exp(l[best[j]] - l[best[0]]) / sum;
            load[best[j]]++;
        }
    }
}

/* The dense MoE way's input: every expert's tokens X [T, H] gathered into
 * xpad [E, cap, H] (cap >= the largest load; rows past a load are left as they are). */
static inline void ex_gen_pad_by_expert(const double *x, const int32_t *ids, int64_t T, int k, int64_t H,
                                        int E, int64_t cap, int64_t *fill, double *xpad)
{
    memset(fill, 0, (size_t)E * sizeof *fill);
    for (int64_t i = 0; i < T * k; i++) {
        int32_t e = ids[i];
        memcpy(xpad + (e * cap + fill[e]++) * H, x + (i / k) * H, (size_t)H * sizeof(double));
    }
}

/* OPT-style FFN tokens X [T, D]: per passage of `passage` tokens a context
 * vector, per token a small variation; the last feature is the constant 1
 * that carries the neurons' bias (see ex_gen_ffn_weights). ctxv: D scratch. */
static inline void ex_gen_ffn_tokens(pit_rng *rng, int64_t T, int64_t D, int64_t passage, double *ctxv,
                                     double *x)
{
    for (int64_t t = 0; t < T; t++) {
        if (t % passage == 0)
            pit_ref_fill_random(rng, ctxv, (size_t)D);
        for (int64_t i = 0; i < D; i++)
            x[t * D + i] = ctxv[i] + 0.3 * pit_rng_uniform(rng);
        x[t * D + D - 1] = 1.0;
    }
}

/* W1 [D, F] scaled so that X . W1 has unit variance, with the bias row -1.28
 * (P(fire) ~ 10%); W2 [F, D2] scaled so Y stays O(1). */
static inline void ex_gen_ffn_weights(pit_rng *rng, int64_t D, int64_t F, int64_t D2, double *w1,
                                      double *w2)
{
    pit_ref_fill_random(rng, w1, (size_t)(D * F));
    pit_ref_fill_random(rng, w2, (size_t)(F * D2));
    double s1 = sqrt(3.0 / ((1.0 / 3.0 + 0.03) * (double)D));
    for (int64_t i = 0; i < D * F; i++)
        w1[i] = i >= (D - 1) * F ? -1.28 : w1[i] * s1;
    for (int64_t i = 0; i < F * D2; i++)
        w2[i] /= sqrt((double)F * 0.1);
}

#endif
