/*
 * pit_moe.cl - Mixture of Experts: routing of token-slots to experts, the
 * grouped expert products (forward, dX, dW, dgates) through the dense tile
 * of pit_tile.cl, and the expert FFN's activation.
 *
 * Row divisors: an operand with one row per token reads slot s at row s / k,
 * one with a row per token-slot (core's slot rows) at row s / 1; the kernels
 * take the divisor of each operand (xdiv, ydiv, ddiv).
 */

/* One work-item per token-slot s = t * k + j: appended to its expert's group
 * in any order (atomics); ids outside 0..E-1 are skipped. */
__kernel void pit_moe_route(__global const int *ids, long id_off, long ldid, int T, int k,
                            int E, __global int *counts, __global int *entries,
                            __global int *total, int cap)
{
    const int s = (int)get_global_id(0);
    if (s >= T * k)
        return;
    const int e = ids[id_off + (long)(s / k) * ldid + s % k];
    if (e < 0 || e >= E)
        return;
    const int pos = atomic_inc(&counts[e]);
    if (pos < cap)
        entries[(long)e * cap + pos] = s;
    atomic_inc(total);
}

/* The expert's token-slots of chunk `chunk` (BM of them): arow = offset of
 * the slot's row in R (row s / div, stride ld), -1 past the end; slot[] the
 * slots. */
inline int gather_slots(__global const int *counts, __global const int *entries, int e, int cap,
                        int chunk, int div, long ld, int lid, __local long *arow,
                        __local int *slot)
{
    const int n = min(counts[e], cap);
    for (int i = lid; i < BM; i += WG) {
        const int v = chunk * BM + i;
        const int s = v < n ? entries[(long)e * cap + v] : -1;
        slot[i] = s;
        arow[i] = s >= 0 ? (long)(s / div) * ld : -1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return chunk * BM < n; /* uniform over the work-group */
}

inline float gate_of(__global const float *G, long g_off, long ldg, int s, int k)
{
    return G ? G[g_off + (long)(s / k) * ldg + s % k] : 1.0f;
}

/* Modes 0 (forward) and 1 (dX): each expert's gathered rows of R (X or dY)
 * times W[e] (mode 0) or W[e]^T (mode 1); grid (ceil(ND/BN)*WG, E *
 * nchunks). Ys NULL: gate * result stored into Out's row s / ydiv (Out was
 * zeroed for the rows no slot writes); else stored into the f32 slot row
 * Ys[s] and summed per token by pit_moe_combine, so no atomics are needed. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_gemm(int mode, __global const st_t *R, long r_off, long ldr,
                  __global const st_t *W, long w_off, long ldw, long w_bs,
                  __global const float *G, long g_off, long ldg,
                  __global st_t *Out, long o_off, long ldo, __global float *Ys,
                  int KD, int ND, int k, int xdiv, int ydiv, __global const int *counts,
                  __global const int *entries, int cap, int nchunks)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local long arow[BM];
    __local int slot[BM];
    const int lid = (int)get_local_id(0);
    const int n0 = (int)get_group_id(0) * BN;
    const int e = (int)get_group_id(1) / nchunks, chunk = (int)get_group_id(1) % nchunks;
    /* An empty chunk runs an empty product (no early return, see pit_sddmm.cl). */
    const int active = gather_slots(counts, entries, e, cap, chunk, xdiv, ldr, lid, arow, slot);
    R += r_off;
    W += w_off + (long)e * w_bs;
    float acc[RPT];
    acc_clear(acc);
    gemm_gathered(R, arow, W, mode == 0 ? ldw : 1, mode == 0 ? 1 : ldw, n0, ND - n0,
                  active ? KD : 0, As, Bs, lid, acc);
    for (int r = 0; r < RPT; ++r) {
        const int o = lid + r * WG;
        const int i = o / BN, n = n0 + o % BN;
        if (o >= BM * BN || n >= ND || slot[i] < 0)
            continue;
        const int s = slot[i];
        const float v = gate_of(G, g_off, ldg, s, k) * acc[r];
        if (Ys)
            Ys[(long)s * ND + n] = v;
        else
            STORE(Out, o_off + (long)(s / ydiv) * ldo + n, v);
    }
}

/* Out[t, n] = sum_j Ys[t*k + j, n]; slots with a skipped id were left 0. */
__kernel void pit_moe_combine(__global const float *Ys, int k, __global st_t *Out,
                              long o_off, long ldo, int T, int ND)
{
    const int n = (int)get_global_id(0), t = (int)get_global_id(1);
    if (n >= ND || t >= T)
        return;
    float v = 0.0f;
    for (int j = 0; j < k; ++j)
        v += Ys[(long)(t * k + j) * ND + n];
    STORE(Out, o_off + (long)t * ldo + n, v);
}

/* Mode 3 (dgates): dgates[s] = sum_n (X[t] . W[e])[n] * D[t][n]. The
 * work-group sweeps every column tile of its slots, multiplying by D and
 * summing per row in local memory. Grid (WG, E * nchunks). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_dgates(__global const st_t *X, long x_off, long ldx,
                    __global const st_t *W, long w_off, long ldw, long w_bs,
                    __global const st_t *D, long d_off, long ldd,
                    __global float *dG, long g_off, long ldg,
                    int H, int N, int k, __global const int *counts,
                    __global const int *entries, int cap, int nchunks)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local float prod[BM * BN];
    __local long arow[BM];
    __local int slot[BM];
    __local float rowsum[BM];
    const int lid = (int)get_local_id(0);
    const int e = (int)get_group_id(1) / nchunks, chunk = (int)get_group_id(1) % nchunks;
    const int active = gather_slots(counts, entries, e, cap, chunk, k, ldx, lid, arow, slot);
    X += x_off;
    W += w_off + (long)e * w_bs;
    D += d_off;
    for (int i = lid; i < BM; i += WG)
        rowsum[i] = 0.0f;
    for (int n0 = 0; n0 < (active ? N : 0); n0 += BN) {
        float acc[RPT];
        acc_clear(acc);
        gemm_gathered(X, arow, W, ldw, 1, n0, N - n0, H, As, Bs, lid, acc);
        for (int r = 0; r < RPT; ++r) {
            const int o = lid + r * WG;
            if (o >= BM * BN)
                break;
            const int i = o / BN, n = n0 + o % BN;
            prod[o] = (slot[i] >= 0 && n < N) ? acc[r] * LOAD(D, (long)(slot[i] / k) * ldd + n)
                                              : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < BM; i += WG)
            for (int c = 0; c < BN; ++c)
                rowsum[i] += prod[i * BN + c];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = lid; i < BM; i += WG)
        if (slot[i] >= 0)
            dG[g_off + (long)(slot[i] / k) * ldg + slot[i] % k] = rowsum[i];
}

/* Mode 2 (dW): dW[e] = sum over e's slots s of gate * X[s / xdiv]^T .
 * D[s / ddiv]. The reduction runs over the gathered slots (SRead of BK rows
 * of X and D per step). Every element of dW[e] is written: zeros for an
 * expert with no token. Grid (ceil(N/BN)*WG, ceil(H/BM), E). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_dw(__global const st_t *X, long x_off, long ldx,
                __global const st_t *D, long d_off, long ldd,
                __global const float *G, long g_off, long ldg,
                __global st_t *dW, long w_off, long ldw, long w_bs,
                int H, int N, int k, int xdiv, int ddiv, __global const int *counts,
                __global const int *entries, int cap)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local int xrow[BK], drow[BK];
    __local float gk[BK];
    const int lid = (int)get_local_id(0);
    const int n0 = (int)get_group_id(0) * BN, h0 = (int)get_group_id(1) * BM;
    const int e = (int)get_group_id(2);
    const int n = min(counts[e], cap);
    X += x_off;
    D += d_off;
    float acc[RPT];
    acc_clear(acc);
    for (int v0 = 0; v0 < n; v0 += BK) {
        for (int i = lid; i < BK; i += WG) {
            const int s = v0 + i < n ? entries[(long)e * cap + v0 + i] : -1;
            xrow[i] = s >= 0 ? s / xdiv : -1;
            drow[i] = s >= 0 ? s / ddiv : -1;
            gk[i] = s >= 0 ? gate_of(G, g_off, ldg, s, k) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < BK * BM; i += WG) {
            const int kk = i / BM, h = i % BM;
            As[kk * BM + h] = (xrow[kk] >= 0 && h0 + h < H)
                                  ? LOAD(X, (long)xrow[kk] * ldx + h0 + h) : 0.0f;
        }
        for (int i = lid; i < BK * BN; i += WG) {
            const int kk = i / BN, c = i % BN;
            Bs[i] = (drow[kk] >= 0 && n0 + c < N)
                        ? gk[kk] * LOAD(D, (long)drow[kk] * ldd + n0 + c) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_mac(As, Bs, lid, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    dW += w_off + (long)e * w_bs;
    for (int r = 0; r < RPT; ++r) {
        const int o = lid + r * WG;
        const int h = h0 + o / BN, c = n0 + o % BN;
        if (o < BM * BN && h < H && c < N)
            STORE(dW, (long)h * ldw + c, acc[r]);
    }
}

/* ---- the expert FFN's activation (pit.h's pit_activation) --------------------- */
/* act: 0 SwiGLU, 1 GeGLU, 2 GELU, 3 ReLU, 4 SiLU; the gated ones (0, 1)
 * read g = U[r, f] and u = U[r, F + f]. */
inline float act_sigmoid(float x)
{
    return 1.0f / (1.0f + exp(-x));
}

/* tanh GELU; *grad its derivative */
inline float act_gelu(float x, float *grad)
{
    const float c = 0.7978845608028654f, a = 0.044715f;
    const float t = tanh(c * (x + a * x * x * x));
    *grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * a * x * x);
    return 0.5f * x * (1.0f + t);
}

/* The scalar function of act at x, *grad its derivative. */
inline float act_scalar(int act, float x, float *grad)
{
    if (act == 1 || act == 2)
        return act_gelu(x, grad);
    if (act == 3) {
        *grad = x <= 0.0f ? 0.0f : 1.0f;
        return x < 0.0f ? 0.0f : x; /* NaN kept */
    }
    const float s = act_sigmoid(x);
    *grad = s * (1.0f + x * (1.0f - s));
    return x * s;
}

/* One work-item per (f, r): A[r, f] = act(U[r]) (forward, dA NULL); or,
 * backward, dU[r] = act'(U[r]) * gate[r] * dA[r, f] over U, A[r, f] =
 * act(U[r]) (A may be dA: each item reads its dA before writing A), and the
 * row's sum of A * dA into dgates (a work-group per row, columns looped).
 * Grid (WG, R), local (WG, 1). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_act(int act, int F, __global const st_t *U, long u_off, long ldu,
                 __global const st_t *dA, long da_off, long ldda,
                 __global const float *G, long g_off, long ldg, int k,
                 __global st_t *A, long a_off, long lda,
                 __global st_t *dU, long du_off, long lddu,
                 __global float *dG, long dg_off, long lddg)
{
    __local float part[WG];
    const int lid = (int)get_local_id(0), r = (int)get_group_id(1);
    const int gated = act == 0 || act == 1;
    const float gate = dA ? gate_of(G, g_off, ldg, r, k) : 1.0f;
    float dot = 0.0f;
    for (int f = lid; f < F; f += WG) {
        const long ui = u_off + (long)r * ldu + f;
        const float x = LOAD(U, ui), up = gated ? LOAD(U, ui + F) : 1.0f;
        float grad;
        const float v = act_scalar(act, x, &grad), a = v * up;
        if (dA) {
            const float da = LOAD(dA, da_off + (long)r * ldda + f), dag = gate * da;
            dot += a * da;
            const long di = du_off + (long)r * lddu + f;
            STORE(dU, di, grad * up * dag);
            if (gated)
                STORE(dU, di + F, v * dag);
        }
        if (A)
            STORE(A, a_off + (long)r * lda + f, a);
    }
    if (!dG)
        return;
    part[lid] = dot;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w /= 2) {
        if (lid < w)
            part[lid] += part[lid + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        dG[dg_off + (long)(r / k) * lddg + r % k] = part[0];
}
