/*
 * common/act.cuh - the activations of pit.h's pit_activation (0 SwiGLU,
 * 1 GeGLU, 2 GELU, 3 ReLU, 4 SiLU) in f32, with e^x as 2^(x log2 e): the
 * one exponential every target has (exp2f; the HIP code objects link no
 * device library). Used by the expert FFN's activation pass
 * (pit_elementwise.cu) and by the gathered GEMM's gated epilogue
 * (pit_gmm_tc.cu). Needs common/port.cuh.
 */
#ifndef PIT_ACT_CUH
#define PIT_ACT_CUH

constexpr float PIT_LOG2E = 1.4426950408889634f;

PIT_DEV float act_sigmoid(float x) { return 1.f / (1.f + exp2f(-x * PIT_LOG2E)); }

/* tanh GELU; *grad its derivative. tanh(z) = 1 - 2 / (1 + e^2z): +-1 where
 * e^2z overflows or vanishes. */
PIT_DEV float act_gelu(float x, float *grad)
{
    const float c = 0.7978845608028654f, a = 0.044715f;
    const float t = 1.f - 2.f / (1.f + exp2f(2.f * c * (x + a * x * x * x) * PIT_LOG2E));
    *grad = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * c * (1.f + 3.f * a * x * x);
    return 0.5f * x * (1.f + t);
}

/* The scalar function of act at x, *grad its derivative. */
PIT_DEV float act_scalar(int act, float x, float *grad)
{
    if (act == 1 || act == 2) return act_gelu(x, grad);
    if (act == 3) {
        *grad = x <= 0.f ? 0.f : 1.f;
        return x < 0.f ? 0.f : x; /* NaN kept */
    }
    const float s = act_sigmoid(x);
    *grad = s * (1.f + x * (1.f - s));
    return x * s;
}

#endif
