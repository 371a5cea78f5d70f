/*
 * pit_ops.cl - the operators of dynamic-sparse models: SDDMM, sparse softmax
 * (and backward), MoE routing and expert products, row-sparse matmul, and
 * the elementwise / layout helpers (zero, relu, transpose).
 *
 * Defines (one program per set; elementwise kernels use none of the tile ones):
 *   DT          storage dtype of the tensors (pit_common.cl)
 *   MW          bytes of one mask element: 4 (f32, i32), 2 (f16, bf16) or 1 (u8);
 *               the masks are read through mask_on() (pit_common.cl)
 *   BM, BN, BK  dense computation tile: BM x BN outputs, BK-deep slabs
 *   WG          work-items per work-group (a power of two for the softmax)
 * Work-item lid owns outputs o = lid + r * WG (r < RPT) of the BM x BN tile,
 * row o / BN and column o % BN, so neighbours write neighbouring columns.
 * Arithmetic is f32 whatever DT is.
 */
#ifndef BM
#define BM 1
#endif
#ifndef BN
#define BN 1
#endif
#ifndef BK
#define BK 1
#endif
#ifndef WG
#define WG 64
#endif
#define RPT ((BM * BN + WG - 1) / WG)

/* ---- the dense tile ------------------------------------------------------------ */

/* acc += As (BK x BM, k-major) . Bs (BK x BN, k-major) for the owned outputs. */
inline void tile_mac(__local const float *As, __local const float *Bs, int lid, float acc[RPT])
{
    for (int r = 0; r < RPT; ++r) {
        const int o = lid + r * WG;
        if (o >= BM * BN)
            break;
        const int row = o / BN, col = o % BN;
        float s = acc[r];
        for (int kk = 0; kk < BK; ++kk)
            s = fma(As[kk * BM + row], Bs[kk * BN + col], s);
        acc[r] = s;
    }
}

inline void acc_clear(float acc[RPT])
{
    for (int r = 0; r < RPT; ++r)
        acc[r] = 0.0f;
}

/* C (rows given by arow, element offsets, -1 = none) . Bop over k < K, where
 * Bop(k, n) = B[k * bks + (n0 + n) * bns]. SRead gathers the listed rows of A
 * and the k-slab of B into local memory; the dense tile runs on them.
 * Columns n >= nvalid are read as 0. */
inline void gemm_gathered(__global const st_t *A, __local const long *arow,
                          __global const st_t *B, long bks, long bns, int n0, int nvalid, int K,
                          __local float *As, __local float *Bs, int lid, float acc[RPT])
{
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = lid; i < BM * BK; i += WG) {
            const int m = i / BK, kk = i % BK;
            const long r = arow[m];
            As[kk * BM + m] = (r >= 0 && k0 + kk < K) ? LOAD(A, r + k0 + kk) : 0.0f;
        }
        for (int i = lid; i < BK * BN; i += WG) {
            /* Walk B along its contiguous dimension. */
            const int kk = bns == 1 ? i / BN : i % BK;
            const int n = bns == 1 ? i % BN : i / BK;
            Bs[kk * BN + n] = (n < nvalid && k0 + kk < K)
                                  ? LOAD(B, (long)(k0 + kk) * bks + (long)(n0 + n) * bns)
                                  : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_mac(As, Bs, lid, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* ---- elementwise and layout ----------------------------------------------------- *
 * A tensor of rank <= 4 is seen as [d0, d1, rows, cols] with strides s0, s1,
 * s2 (cols contiguous); the grid is (cols, rows, d0 * d1). */

inline long at4(long off, int d1, long s0, long s1, long s2)
{
    const int z = (int)get_global_id(2);
    return off + (long)(z / d1) * s0 + (long)(z % d1) * s1 + (long)get_global_id(1) * s2 +
           (long)get_global_id(0);
}

__kernel void pit_ops_zero(__global st_t *Y, long off, int d1, long s0, long s1, long s2,
                           int rows, int cols)
{
    if ((int)get_global_id(0) < cols && (int)get_global_id(1) < rows)
        STORE(Y, at4(off, d1, s0, s1, s2), 0.0f);
}

/* NaN propagates (x < 0 is false for NaN), as in frameworks. */
__kernel void pit_ops_relu(__global const st_t *X, long xoff, long xs0, long xs1, long xs2,
                           __global st_t *Y, long yoff, long ys0, long ys1, long ys2,
                           int d1, int rows, int cols)
{
    if ((int)get_global_id(0) >= cols || (int)get_global_id(1) >= rows)
        return;
    const float x = LOAD(X, at4(xoff, d1, xs0, xs1, xs2));
    STORE(Y, at4(yoff, d1, ys0, ys1, ys2), x < 0.0f ? 0.0f : x);
}

#define TT 16 /* transpose tile side */

/* Y[z, c, r] = X[z, r, c] through a local tile, so reads and writes are both
 * along rows. Grid (ceil(cols/TT)*TT, ceil(rows/TT)*TT, d0*d1), local TT x TT. */
__kernel __attribute__((reqd_work_group_size(TT, TT, 1)))
void pit_ops_transpose(__global const st_t *X, long xoff, long xs0, long xs1, long xs2,
                       __global st_t *Y, long yoff, long ys0, long ys1, long ys2,
                       int d1, int rows, int cols)
{
    __local float tile[TT][TT + 1];
    const int z = (int)get_global_id(2);
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int c0 = (int)get_group_id(0) * TT, r0 = (int)get_group_id(1) * TT;
    const long xb = xoff + (long)(z / d1) * xs0 + (long)(z % d1) * xs1;
    const long yb = yoff + (long)(z / d1) * ys0 + (long)(z % d1) * ys1;
    if (r0 + ty < rows && c0 + tx < cols)
        tile[ty][tx] = LOAD(X, xb + (long)(r0 + ty) * xs2 + (c0 + tx));
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Y row c0 + ty, column r0 + tx. */
    if (c0 + ty < cols && r0 + tx < rows)
        STORE(Y, yb + (long)(c0 + ty) * ys2 + (r0 + tx), tile[tx][ty]);
}

/* ---- SDDMM ----------------------------------------------------------------------- *
 * One work-group per (index slot, batch x row-block): the group of batch b's
 * row-block is g = b * gbs + row-block (gbs = gpb, or 0 for an index shared by
 * every batch); the slot's entry is a column block. The block's rows of A and rows of B (B is
 * [N, K]: B^T's columns) are read into local memory (SRead), the BM x BN dot
 * products computed, and the block written where the mask is on (SWrite; C
 * was zeroed before). BM x BN is the output micro-tile. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_ops_sddmm(__global const st_t *A, long a_off, long lda, long a_bs,
                   __global const st_t *B, long b_off, long ldb, long b_bs,
                   __global const mword_t *Mk, long m_off, long ldm, long m_bs,
                   __global st_t *C, long c_off, long ldc, long c_bs,
                   int M, int N, int K, __global const int *counts,
                   __global const int *entries, int gpb, int gbs, int cap)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local long arow[BM];
    const int lid = (int)get_local_id(0);
    const int slot = (int)get_group_id(0), bg = (int)get_group_id(1);
    const int b = bg / gpb, m0 = (bg % gpb) * BM, g = b * gbs + bg % gpb;
    /* No early return: PoCL 3.1 then treats lid-dependent branches after a
     * barrier as uniform. An idle work-group runs an empty product instead. */
    const int active = slot < min(counts[g], cap);
    const int n0 = active ? entries[(long)g * cap + slot] * BN : 0;
    A += a_off + (long)b * a_bs;
    B += b_off + (long)b * b_bs;
    for (int i = lid; i < BM; i += WG)
        arow[i] = m0 + i < M ? (long)(m0 + i) * lda : -1;
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[RPT];
    acc_clear(acc);
    gemm_gathered(A, arow, B, 1, ldb, n0, N - n0, active ? K : 0, As, Bs, lid, acc);
    Mk += m_off + (long)b * m_bs;
    C += c_off + (long)b * c_bs;
    for (int r = 0; r < RPT; ++r) {
        const int o = lid + r * WG;
        const int m = m0 + o / BN, n = n0 + o % BN;
        if (active && o < BM * BN && m < M && n < N && mask_on(Mk, (long)m * ldm + n))
            STORE(C, (long)m * ldc + n, acc[r]);
    }
}

/* ---- sparse softmax ---------------------------------------------------------------- */

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
void pit_ops_softmax(__global const st_t *X, long x_off, long ldx, long x_bs,
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

    float mx = -INFINITY;
    for (int i = lid; i < pairs; i += WG) {
        const int n = listed_column(ent, i, tc, N, mrow);
        if (n >= 0)
            mx = fmax(mx, scale * LOAD(xrow, n));
    }
    mx = wg_reduce(red, lid, mx, 1);
    float sum = 0.0f;
    for (int i = lid; i < pairs; i += WG) {
        const int n = listed_column(ent, i, tc, N, mrow);
        if (n >= 0)
            sum += exp(scale * LOAD(xrow, n) - mx);
    }
    sum = wg_reduce(red, lid, sum, 0);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int n = lid; n < N; n += WG) {
        const float y = mask_on(mrow, n) ? exp(scale * LOAD(xrow, n) - mx) * inv : 0.0f;
        STORE(yrow, n, y);
    }
}

/* dX = scale * Y * (dY - rowsum(dY * Y)) on the mask, 0 elsewhere; same
 * grid and index as pit_ops_softmax; dX may be Y or dY. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_ops_softmax_backward(__global const st_t *Yv, long y_off, long ldy, long y_bs,
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

/* ---- Mixture of Experts --------------------------------------------------------------- */

/* One work-item per token-slot s = t * k + j: appended to its expert's group
 * in any order (atomics); ids outside 0..E-1 are skipped. */
__kernel void pit_ops_moe_route(__global const int *ids, long id_off, long ldid, int T, int k,
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
 * summed per token by pit_ops_moe_combine, so no atomics are needed. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_ops_moe_gemm(int mode, __global const st_t *R, long r_off, long ldr,
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
    /* An empty chunk runs an empty product (no early return, see pit_ops_sddmm). */
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
__kernel void pit_ops_moe_combine(__global const float *Ys, int k, __global st_t *Out,
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
void pit_ops_moe_dgates(__global const st_t *X, long x_off, long ldx,
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
void pit_ops_moe_dw(__global const st_t *X, long x_off, long ldx,
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

/* ---- row-sparse matmul ------------------------------------------------------------------ *
 * Group b lists the non-zero rows of A's batch b; chunk of BM of them per
 * work-group: SRead of those rows, dense tile with B, SWrite to the same rows
 * of C. Grid (ceil(N/BN)*WG, nchunks, batch). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_ops_matmul_rows(__global const st_t *A, long a_off, long lda, long a_bs,
                         __global const st_t *B, long b_off, long ldb, long b_bs,
                         __global st_t *C, long c_off, long ldc, long c_bs,
                         int N, int K, __global const int *counts,
                         __global const int *entries, int cap)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local long arow[BM];
    __local int crow[BM];
    const int lid = (int)get_local_id(0);
    const int n0 = (int)get_group_id(0) * BN, chunk = (int)get_group_id(1);
    const int b = (int)get_group_id(2);
    const int n = min(counts[b], cap);
    const int active = chunk * BM < n; /* no early return, see pit_ops_sddmm */
    for (int i = lid; i < BM; i += WG) {
        const int v = chunk * BM + i;
        const int row = v < n ? entries[(long)b * cap + v] : -1;
        crow[i] = row;
        arow[i] = row >= 0 ? (long)row * lda : -1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[RPT];
    acc_clear(acc);
    gemm_gathered(A + a_off + (long)b * a_bs, arow, B + b_off + (long)b * b_bs, ldb, 1, n0, N - n0,
                  active ? K : 0, As, Bs, lid, acc);
    C += c_off + (long)b * c_bs;
    for (int r = 0; r < RPT; ++r) {
        const int o = lid + r * WG;
        const int i = o / BN, c = n0 + o % BN;
        if (o < BM * BN && c < N && crow[i] >= 0)
            STORE(C, (long)crow[i] * ldc + c, acc[r]);
    }
}
