/* core/reference/reference_moe_ffn.c - CPU reference (double) of the MoE
 * expert FFN, pit_moe_ffn and its backward, and of its activations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

int pit_ref_activation_gated(int act)
{
    return act == PIT_ACT_SWIGLU || act == PIT_ACT_GEGLU;
}

/* The scalar function of an activation (silu, tanh GELU, ReLU) and its
 * derivative, with pit.h's formulas. */
static double silu(double x)
{
    return x / (1.0 + exp(-x));
}

static double silu_grad(double x)
{
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_A 0.044715

static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_C * (x + GELU_A * x * x * x)));
}

static double gelu_grad(double x)
{
    double t = tanh(GELU_C * (x + GELU_A * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
}

static double scalar_act(int act, double x, double *grad)
{
    switch (act) {
    case PIT_ACT_SWIGLU:
    case PIT_ACT_SILU: *grad = silu_grad(x); return silu(x);
    case PIT_ACT_GEGLU:
    case PIT_ACT_GELU: *grad = gelu_grad(x); return gelu(x);
    default: *grad = x <= 0.0 ? 0.0 : 1.0; return x < 0.0 ? 0.0 : x;
    }
}

void pit_ref_activation(int act, int64_t f, const double *h, double *a)
{
    const int gated = pit_ref_activation_gated(act);
    double grad;
    for (int64_t p = 0; p < f; p++)
        a[p] = scalar_act(act, h[p], &grad) * (gated ? h[f + p] : 1.0);
}

void pit_ref_activation_backward(int act, int64_t f, const double *h, const double *da,
                                 double *dh)
{
    const int gated = pit_ref_activation_gated(act);
    double grad;
    for (int64_t p = 0; p < f; p++) {
        double v = scalar_act(act, h[p], &grad);
        dh[p] = grad * da[p] * (gated ? h[f + p] : 1.0);
        if (gated)
            dh[f + p] = v * da[p];
    }
}

/* out[0..m) = W (m x n) . y[0..n) */
static void mat_vec(const double *w, const double *y, int64_t m, int64_t n, double *out)
{
    for (int64_t p = 0; p < m; p++) {
        double acc = 0.0;
        for (int64_t c = 0; c < n; c++)
            acc += w[p * n + c] * y[c];
        out[p] = acc;
    }
}

/* One token-slot's rows: h [w] = X[t] . W1[e], a [f] = act(h), and the
 * gradients' rows da [f], dh [w]. */
typedef struct slot_rows {
    double *h, *a, *z, *da, *dh;
} slot_rows;

static int64_t width_of(const pit_ref_ffn *s)
{
    return pit_ref_activation_gated(s->act) ? 2 * s->f : s->f;
}

static int rows_alloc(const pit_ref_ffn *s, slot_rows *r)
{
    int64_t w = width_of(s);
    size_t n = (size_t)(2 * w + 2 * s->f + s->h) + 1;
    r->h = calloc(n, sizeof(double));
    if (!r->h)
        return 0;
    r->dh = r->h + w;
    r->a = r->dh + w;
    r->da = r->a + s->f;
    r->z = r->da + s->f;
    return 1;
}

static void fill_nan(double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN; /* a comparison against it then fails loudly */
}

void pit_ref_moe_ffn(const pit_ref_ffn *s, const double *X, const int32_t *ids,
                     const double *gates, const double *W1, const double *W2, double *Y)
{
    const int64_t w = width_of(s);
    slot_rows r;
    if (!rows_alloc(s, &r)) {
        fill_nan(Y, s->t * s->h);
        return;
    }
    memset(Y, 0, (size_t)(s->t * s->h) * sizeof(double));
    for (int64_t i = 0; i < s->t; i++)
        for (int64_t j = 0; j < s->k; j++) {
            int32_t x = ids[i * s->k + j];
            if (x < 0 || x >= s->e)
                continue;
            pit_ref_row_times(X + i * s->h, W1 + (int64_t)x * s->h * w, s->h, w, r.h);
            pit_ref_activation(s->act, s->f, r.h, r.a);
            pit_ref_row_times(r.a, W2 + (int64_t)x * s->f * s->h, s->f, s->h, r.z);
            for (int64_t c = 0; c < s->h; c++)
                Y[i * s->h + c] += gates[i * s->k + j] * r.z[c];
        }
    free(r.h);
}

/* The gradients of one routed token-slot (token i, slot j, expert x). */
static void slot_backward(const pit_ref_ffn *s, int64_t i, int64_t j, int32_t x, const double *X,
                          const double *gates, const double *W1, const double *W2,
                          const double *dY, pit_ref_ffn_grads *g, slot_rows *r)
{
    const int64_t w = width_of(s), h = s->h, f = s->f;
    const double gate = gates[i * s->k + j], *x_row = X + i * h, *dy = dY + i * h;
    const double *w1 = W1 + (int64_t)x * h * w, *w2 = W2 + (int64_t)x * f * h;
    pit_ref_row_times(x_row, w1, h, w, r->h);
    pit_ref_activation(s->act, f, r->h, r->a);
    mat_vec(w2, dy, f, h, r->da); /* dY . W2^T, before the gate */
    if (g->dgates) {
        double acc = 0.0;
        for (int64_t p = 0; p < f; p++)
            acc += r->a[p] * r->da[p];
        g->dgates[i * s->k + j] = acc;
    }
    for (int64_t p = 0; p < f; p++)
        r->da[p] *= gate;
    pit_ref_activation_backward(s->act, f, r->h, r->da, r->dh);
    for (int64_t q = 0; g->dX && q < h; q++) {
        double acc = 0.0;
        for (int64_t c = 0; c < w; c++)
            acc += w1[q * w + c] * r->dh[c];
        g->dX[i * h + q] += acc;
    }
    for (int64_t q = 0; g->dW1 && q < h; q++)
        for (int64_t c = 0; c < w; c++)
            g->dW1[((int64_t)x * h + q) * w + c] += x_row[q] * r->dh[c];
    for (int64_t p = 0; g->dW2 && p < f; p++)
        for (int64_t c = 0; c < h; c++)
            g->dW2[((int64_t)x * f + p) * h + c] += gate * r->a[p] * dy[c];
}

void pit_ref_moe_ffn_backward(const pit_ref_ffn *s, const double *X, const int32_t *ids,
                              const double *gates, const double *W1, const double *W2,
                              const double *dY, pit_ref_ffn_grads *g)
{
    const int64_t w = width_of(s);
    double *outs[4] = {g->dX, g->dW1, g->dW2, g->dgates};
    const int64_t sizes[4] = {s->t * s->h, s->e * s->h * w, s->e * s->f * s->h, s->t * s->k};
    slot_rows r = {0};
    int ok = rows_alloc(s, &r);
    for (int i = 0; i < 4; i++)
        if (outs[i] && ok)
            memset(outs[i], 0, (size_t)sizes[i] * sizeof(double));
        else if (outs[i])
            fill_nan(outs[i], sizes[i]);
    for (int64_t i = 0; ok && i < s->t; i++)
        for (int64_t j = 0; j < s->k; j++) {
            int32_t x = ids[i * s->k + j];
            if (x >= 0 && x < s->e)
                slot_backward(s, i, j, x, X, gates, W1, W2, dY, g, &r);
        }
    if (ok)
        free(r.h);
}
