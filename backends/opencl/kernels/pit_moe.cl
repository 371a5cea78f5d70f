/*
 * pit_moe.cl - Mixture of Experts: routing of token-slots to experts, and
 * the grouped expert products (forward, dX, dW, dgates) through the dense
 * tile of pit_tile.cl.
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
 * the slot's token row in R (ld), -1 past the end; slot[] the slots. */
inline int gather_slots(__global const int *counts, __global const int *entries, int e, int cap,
                        int chunk, int k, long ld, int lid, __local long *arow,
                        __local int *slot)
{
    const int n = min(counts[e], cap);
    for (int i = lid; i < BM; i += WG) {
        const int v = chunk * BM + i;
        const int s = v < n ? entries[(long)e * cap + v] : -1;
        slot[i] = s;
        arow[i] = s >= 0 ? (long)(s / k) * ld : -1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return chunk * BM < n; /* uniform over the work-group */
}

inline float gate_of(__global const float *G, long g_off, long ldg, int s, int k)
{
    return G ? G[g_off + (long)(s / k) * ldg + s % k] : 1.0f;
}

/* Modes 0 (forward) and 1 (dX): each expert's gathered token rows of R
 * (X or dY) times W[e] (mode 0) or W[e]^T (mode 1); grid (ceil(ND/BN)*WG,
 * E * nchunks). k == 1: gate * result stored into Out's token row (Out was
 * zeroed for unrouted tokens); k > 1: stored into the f32 slot row Ys[s] and
 * summed per token by pit_moe_combine, so no atomics are needed. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_gemm(int mode, __global const st_t *R, long r_off, long ldr,
                  __global const st_t *W, long w_off, long ldw, long w_bs,
                  __global const float *G, long g_off, long ldg,
                  __global st_t *Out, long o_off, long ldo, __global float *Ys,
                  int KD, int ND, int k, __global const int *counts,
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
    const int active = gather_slots(counts, entries, e, cap, chunk, k, ldr, lid, arow, slot);
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
        if (k == 1)
            STORE(Out, o_off + (long)(s / k) * ldo + n, v);
        else
            Ys[(long)s * ND + n] = v;
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

/* Mode 2 (dW): dW[e] = sum over e's slots of gate * X[t]^T . D[t]. The
 * reduction runs over the gathered tokens (SRead of BK token rows of X and
 * D per step). Every element of dW[e] is written: zeros for an expert with
 * no token. Grid (ceil(N/BN)*WG, ceil(H/BM), E). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_moe_dw(__global const st_t *X, long x_off, long ldx,
                __global const st_t *D, long d_off, long ldd,
                __global const float *G, long g_off, long ldg,
                __global st_t *dW, long w_off, long ldw, long w_bs,
                int H, int N, int k, __global const int *counts,
                __global const int *entries, int cap)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local int tok[BK];
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
            tok[i] = s >= 0 ? s / k : -1;
            gk[i] = s >= 0 ? gate_of(G, g_off, ldg, s, k) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < BK * BM; i += WG) {
            const int kk = i / BM, h = i % BM;
            As[kk * BM + h] = (tok[kk] >= 0 && h0 + h < H)
                                  ? LOAD(X, (long)tok[kk] * ldx + h0 + h) : 0.0f;
        }
        for (int i = lid; i < BK * BN; i += WG) {
            const int kk = i / BN, c = i % BN;
            Bs[i] = (tok[kk] >= 0 && n0 + c < N)
                        ? gk[kk] * LOAD(D, (long)tok[kk] * ldd + n0 + c) : 0.0f;
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
