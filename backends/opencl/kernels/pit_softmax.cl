/*
 * pit_softmax.cl - softmax over the listed blocks of each row where the
 * mask is on, and its backward.
 *
 * Defines: DT and MDT (pit_common.cl); WG, the work-items of the work-group
 * that reduces one row (a power of two). The tile defines the program is
 * built with are unused.
 */
#ifndef WG
#error "WG (work-items per row, a power of two) must be defined"
#endif

inline float wg_reduce(__local float *red, int lid, float v, int want_max)
{
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] = want_max ? fmax(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next reduction */
    return r;
}

/* scale * x rounded to f32 by itself: OpenCL C may fuse a product into the
 * subtraction that follows it (FP_CONTRACT), so exp(scale * x - max) would
 * see the exact product while the max saw the rounded one, and for large
 * logits the difference (half an ulp of the max) overflows exp or zeroes
 * the whole row. Every pass reads a logit through this function. */
inline float scaled_logit(__global const st_t *row, int n, float scale)
{
#pragma OPENCL FP_CONTRACT OFF
    return scale * LOAD(row, n);
}

/* The listed (block, column) pairs of row m: pair i < count * tc is column
 * ent[i / tc] * tc + i % tc; -1 when off the matrix or off the mask. */
inline int listed_column(__global const int *ent, int i, int tc, int N,
                         __global const mword_t *mrow)
{
    const int n = ent[i / tc] * tc + i % tc;
    return (n < N && mask_on(mrow, n)) ? n : -1;
}

/* One work-group per row (grid WG x M x batch); tr x tc is the index's
 * micro-tile (row m belongs to group b * gbs + m / tr; gbs = gpb, or 0 for an
 * index shared by every batch). The reductions visit
 * only the listed blocks; the final pass writes the whole row (0 off the
 * mask), reading X only where the mask is on, so Y may be X. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_softmax(__global const st_t *X, long x_off, long ldx, long x_bs,
                 __global const mword_t *Mk, long m_off, long ldm, long m_bs,
                 __global st_t *Y, long y_off, long ldy, long y_bs,
                 int N, float scale, __global const int *counts,
                 __global const int *entries, int gpb, int gbs, int cap, int tr, int tc)
{
    __local float red[WG];
    const int lid = (int)get_local_id(0);
    const int m = (int)get_group_id(1), b = (int)get_group_id(2);
    const int g = b * gbs + m / tr;
    const int pairs = min(counts[g], cap) * tc;
    __global const int *ent = entries + (long)g * cap;
    __global const st_t *xrow = X + x_off + (long)b * x_bs + (long)m * ldx;
    __global const mword_t *mrow = Mk + m_off + (long)b * m_bs + (long)m * ldm;
    __global st_t *yrow = Y + y_off + (long)b * y_bs + (long)m * ldy;

    /* -FLT_MAX, not -inf: a row whose logits are all -inf (or that has none)
     * then gives exp(-inf) = 0 everywhere, never exp(-inf + inf) = NaN */
    float mx = -FLT_MAX;
    for (int i = lid; i < pairs; i += WG) {
        const int n = listed_column(ent, i, tc, N, mrow);
        if (n >= 0)
            mx = fmax(mx, scaled_logit(xrow, n, scale));
    }
    mx = wg_reduce(red, lid, mx, 1);
    float sum = 0.0f;
    for (int i = lid; i < pairs; i += WG) {
        const int n = listed_column(ent, i, tc, N, mrow);
        if (n >= 0)
            sum += exp(scaled_logit(xrow, n, scale) - mx);
    }
    sum = wg_reduce(red, lid, sum, 0);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int n = lid; n < N; n += WG) {
        const float y = mask_on(mrow, n) ? exp(scaled_logit(xrow, n, scale) - mx) * inv : 0.0f;
        STORE(yrow, n, y);
    }
}

/* dX = scale * Y * (dY - rowsum(dY * Y)) on the mask, 0 elsewhere; same
 * grid and index as pit_softmax; dX may be Y or dY. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_softmax_backward(__global const st_t *Yv, long y_off, long ldy, long y_bs,
                          __global const st_t *dY, long dy_off, long lddy, long dy_bs,
                          __global const mword_t *Mk, long m_off, long ldm, long m_bs,
                          __global st_t *dX, long dx_off, long lddx, long dx_bs,
                          int N, float scale, __global const int *counts,
                          __global const int *entries, int gpb, int gbs, int cap, int tr,
                          int tc)
{
    __local float red[WG];
    const int lid = (int)get_local_id(0);
    const int m = (int)get_group_id(1), b = (int)get_group_id(2);
    const int g = b * gbs + m / tr;
    const int pairs = min(counts[g], cap) * tc;
    __global const int *ent = entries + (long)g * cap;
    __global const st_t *yrow = Yv + y_off + (long)b * y_bs + (long)m * ldy;
    __global const st_t *dyrow = dY + dy_off + (long)b * dy_bs + (long)m * lddy;
    __global const mword_t *mrow = Mk + m_off + (long)b * m_bs + (long)m * ldm;
    __global st_t *dxrow = dX + dx_off + (long)b * dx_bs + (long)m * lddx;

    float dot = 0.0f;
    for (int i = lid; i < pairs; i += WG) {
        const int n = listed_column(ent, i, tc, N, mrow);
        if (n >= 0)
            dot += LOAD(dyrow, n) * LOAD(yrow, n);
    }
    dot = wg_reduce(red, lid, dot, 0);
    for (int n = lid; n < N; n += WG) {
        const float dx = mask_on(mrow, n) ? scale * LOAD(yrow, n) * (LOAD(dyrow, n) - dot) : 0.0f;
        STORE(dxrow, n, dx);
    }
}
