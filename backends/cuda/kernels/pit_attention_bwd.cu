/*
 * pit_attention_bwd.cu - the backward of pit_attention on tensor cores
 * (mma.sync m16n8k16, sm_80+) for 16-bit Q, K, V of one head dim HD (64 or
 * 128) and no element mask: the block index (or every key) and the causal
 * and window bounds. The arguments and the work split are those of
 * pit_attention_ex.cu's CUDA-core backward, which takes every other call.
 *
 * Both kernels recompute P = exp(s - lse) from the forward's lse, with
 * dS = scale P (dO.V - Di), Di = dO.O a query.
 * pit_op_attn_bwd_dq: a CTA 64 query rows of one query block of one
 * (batch, query head), a warp 16 of them; it walks the listed key blocks
 * (every key without an index) 32 keys at a time inside the rows' bounds:
 * S = Q K^T and dP = dO V^T on the tensor cores, then dQ += dS K.
 * pit_op_attn_bwd_dkv: a CTA 64 keys of one key block of one (batch, kv
 * head), a warp 16 of them; it walks, 32 queries at a time, the query
 * blocks of every query head of the group whose index lists the key block
 * (all without an index) inside the bounds: S^T = K Q^T, dP^T = V dO^T,
 * then dV += P^T dO and dK += dS^T Q. Each output element is written once
 * by the CTA that owns it: no atomics, no scratch.
 *
 * Shared memory: the CTA's 64 rows of two operands and the walked chunk's
 * 32 rows of two, each row padded by 16 bytes (ldmatrix without bank
 * conflicts). Defines: PIT_DTYPE (f16 or bf16), HD.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"
#include "common/mma.cuh"
#include "attention_ex.cuh"

#define THREADS PIT_ATTN_BWD_THREADS
#define TR PIT_ATTN_BWD_ROWS /* rows (queries or keys) a CTA owns */
#define QC 32                /* rows of the walked side a chunk */
#define LDS (HD + 8)         /* a staged row, in elements */
#define LOG2E 1.4426950408889634f

static_assert(TR == 16 * (THREADS / PIT_WARP), "16 rows a warp");
static_assert(HD == 64 || HD == 128, "head dims 64 and 128");

extern "C" __device__ const int pit_smem_bytes = (2 * TR + 2 * QC) * LDS * (int)sizeof(T) + 2 * QC * 4 + 2 * TR * 4;

PIT_DEV pit_i64 bwd_min(pit_i64 a, pit_i64 b) { return a < b ? a : b; }
PIT_DEV pit_i64 bwd_max(pit_i64 a, pit_i64 b) { return a > b ? a : b; }

/* Rows [0, n) of src (row stride ld, HD contiguous 16-byte aligned
 * columns) into dst's `rows` rows of LDS; rows past n as zeros. */
template <int ROWS_> PIT_DEV void stage(T *dst, const T *src, pit_i64 ld, int n)
{
    constexpr int VECS = HD / 8; /* 16-byte vectors a row */
    for (int i = threadIdx.x; i < ROWS_ * VECS; i += THREADS) {
        const int r = i / VECS, c = (i % VECS) * 8;
        uint4 v = {0u, 0u, 0u, 0u};
        if (r < n) v = __ldg((const uint4 *)(src + (pit_i64)r * ld + c));
        *(uint4 *)(dst + r * LDS + c) = v;
    }
}

/* Whether key `key` counts for query `row` under the window bounds,
 * measured from the diagonal aligned to the end of the keys. */
PIT_DEV bool in_bounds(const pit_attn_ex_args &p, pit_i64 row, pit_i64 key)
{
    const pit_i64 at = row + (pit_i64)p.Lk - p.Lq;
    return !(p.wl >= 0 && key < at - p.wl) && !(p.wr >= 0 && key > at + p.wr);
}

/* A fragment of rows r0.. (16) and columns k0.. (16) of a staged tile. */
PIT_DEV void frag_a(pit_u32 (&a)[4], const T *tile, int r0, int k0)
{
    const int l = pit_lane();
    pit_ldmatrix_x4(a, tile + (r0 + l % 16) * LDS + k0 + 8 * (l / 16));
}

/* B fragments of two 8-column tiles (n0.., n0 + 8..) for k0.. (16), from a
 * tile stored [n][k] (B = tile^T): b[0..1] the first, b[2..3] the second. */
PIT_DEV void frag_b_nk(pit_u32 (&b)[4], const T *tile, int n0, int k0)
{
    const int l = pit_lane();
    pit_ldmatrix_x4(b, tile + (n0 + l % 8 + 8 * (l / 16)) * LDS + k0 + 8 * ((l / 8) % 2));
}

/* The same from a tile stored [k][n]. */
PIT_DEV void frag_b_kn(pit_u32 (&b)[4], const T *tile, int n0, int k0)
{
    const int l = pit_lane();
    pit_ldmatrix_x4_trans(b, tile + (k0 + l % 8 + 8 * ((l / 8) % 2)) * LDS + n0 + 8 * (l / 16));
}

/* acc[16 x 32] = tile_a rows r0.. . tile_b^T, over HD: two products at once
 * (S from A, B; dP from A2, B2: the same shapes). */
PIT_DEV void scores(float (&s)[4][4], float (&dp)[4][4], const T *a, const T *b, const T *a2, const T *b2, int r0)
{
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[n][i] = dp[n][i] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
        pit_u32 fa[4], fa2[4];
        frag_a(fa, a, r0, kk * 16);
        frag_a(fa2, a2, r0, kk * 16);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            pit_u32 fb[4], fb2[4];
            frag_b_nk(fb, b, np * 16, kk * 16);
            frag_b_nk(fb2, b2, np * 16, kk * 16);
            pit_mma_16816<PIT_DTYPE>(s[2 * np], fa, fb);
            pit_mma_16816<PIT_DTYPE>(s[2 * np + 1], fa, fb + 2);
            pit_mma_16816<PIT_DTYPE>(dp[2 * np], fa2, fb2);
            pit_mma_16816<PIT_DTYPE>(dp[2 * np + 1], fa2, fb2 + 2);
        }
    }
}

/* out[16 x HD] += A (16 x 32, from accumulators) . tile [32][HD] */
PIT_DEV void accumulate(float (&out)[HD / 8][4], const float (&w)[4][4], const T *tile)
{
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
        pit_u32 fa[4];
        pit_acc_fragment(w, kk, fa);
#pragma unroll
        for (int np = 0; np < HD / 16; ++np) {
            pit_u32 fb[4];
            frag_b_kn(fb, tile, np * 16, kk * 16);
            pit_mma_16816<PIT_DTYPE>(out[2 * np], fa, fb);
            pit_mma_16816<PIT_DTYPE>(out[2 * np + 1], fa, fb + 2);
        }
    }
}

/* The warp's 16 rows (r0.. of the CTA's, rows at row0 of dst) of out into
 * dst, rows past n left alone. */
PIT_DEV void store_rows(T *dst, pit_i64 ld, int r0, int n, const float (&out)[HD / 8][4])
{
    const int g = pit_lane() / 4, t = pit_lane() % 4;
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + g + 8 * h;
            if (r < n) *(pit_u32 *)(dst + (pit_i64)r * ld + nt * 8 + 2 * t) = pack2(out[nt][2 * h], out[nt][2 * h + 1]);
        }
}

/* Di = dO.O (f32) and lse in base 2 of rows [0, n) of one head into di and
 * lse2 (`rows` of them; past n: 0 and -inf): four threads a row. */
template <int ROWS_>
PIT_DEV void row_stats(const pit_attn_ex_args &p, const T *dO, const T *O, const float *L, int n, float *di,
                       float *lse2)
{
    for (int q = threadIdx.x / 4; q < ROWS_; q += THREADS / 4) {
        const int part = threadIdx.x % 4;
        float s = 0.f;
        if (q < n)
            for (int c = part; c < HD; c += 4)
                s = fmaf(pit_to_float(dO[(pit_i64)q * p.dout.ld + c]), pit_to_float(O[(pit_i64)q * p.o.ld + c]), s);
        s += shfl_xor_f(s, 1);
        s += shfl_xor_f(s, 2);
        if (part == 0) {
            di[q] = s;
            lse2[q] = q < n ? L[q] * LOG2E : PIT_NEG_INF;
        }
    }
}

/* P (into s) and dS (into dp) of a 16 x 32 piece: rows r of the warp's,
 * columns c of the chunk; allowed(r, c) says whether the pair counts,
 * lse2_of / di_of give a pair's statistics (its row's or its column's). */
template <typename Allowed, typename Lse, typename Di>
PIT_DEV void probabilities(const pit_attn_ex_args &p, float (&s)[4][4], float (&dp)[4][4], Allowed allowed,
                           Lse lse2_of, Di di_of)
{
    const int g = pit_lane() / 4, t = pit_lane() % 4;
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = g + 8 * (i / 2), c = n * 8 + 2 * t + i % 2;
            const float l2 = lse2_of(r, c);
            const float pw = allowed(r, c) && l2 != PIT_NEG_INF ? exp2f(s[n][i] * p.scale_log2 - l2) : 0.f;
            s[n][i] = pw;
            dp[n][i] = pw == 0.f ? 0.f : p.scale * pw * (dp[n][i] - di_of(r, c));
        }
}

/* Shared memory: the CTA's own 64 rows of two operands, the walked chunk's
 * 32 rows of two, then the statistics. */
struct bwd_tiles {
    T *own, *own2, *walk, *walk2;
    float *stats;
};

PIT_DEV bwd_tiles tiles_of(pit_u8 *smem)
{
    T *own = (T *)smem, *own2 = own + TR * LDS, *walk = own2 + TR * LDS, *walk2 = walk + QC * LDS;
    return bwd_tiles{own, own2, walk, walk2, (float *)(walk2 + QC * LDS)};
}

/* The accumulators of a warp's 16 rows x HD, zeroed. */
PIT_DEV void zero_rows(float (&a)[HD / 8][4])
{
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) a[n][i] = 0.f;
}

#if defined(PIT_KERNEL_OP_ATTN_BWD_DQ)
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_bwd_dq(const pit_attn_ex_args p)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    const bwd_tiles t = tiles_of(smem);
    T *sq = t.own, *sdo = t.own2, *sk = t.walk, *sv = t.walk2;
    float *s_di = t.stats, *s_lse2 = t.stats + TR;
    const pit_i64 bid = blockIdx.x, per = (pit_i64)p.blocks * p.parts;
    const int z = (int)(bid / per), qb = (int)(bid % per / p.parts), part = (int)(bid % p.parts);
    const int b = z / p.heads, h = z % p.heads, hk = h / p.group, r0 = (threadIdx.x / PIT_WARP) * 16;
    const pit_i64 row0 = (pit_i64)qb * p.br + (pit_i64)part * TR;
    const int rows = (int)bwd_max(0, bwd_min(TR, bwd_min((pit_i64)p.br - (pit_i64)part * TR, p.Lq - row0)));
    if (rows == 0) return;
    const pit_i64 diag = (pit_i64)p.Lk - p.Lq;
    const pit_i64 lo = p.wl >= 0 ? bwd_max(row0 + diag - p.wl, 0) : 0;
    const pit_i64 hi = p.wr >= 0 ? bwd_min(row0 + rows - 1 + diag + p.wr + 1, p.Lk) : p.Lk;
    const bool index = p.flags & PIT_ATTN_EX_INDEX;
    const pit_i64 grp = index ? b * p.idx_sb + h * p.idx_sh + qb : 0;
    const int entries = index ? min(__ldg(p.counts + grp), p.cap) : 1;
    const T *K = rows_of(p.k, b, hk), *V = rows_of(p.v, b, hk);
    const T *dO = rows_of(p.dout, b, h) + row0 * p.dout.ld;
    stage<TR>(sq, rows_of(p.q, b, h) + row0 * p.q.ld, p.q.ld, rows);
    stage<TR>(sdo, dO, p.dout.ld, rows);
    row_stats<TR>(p, dO, rows_of(p.o, b, h) + row0 * p.o.ld,
                  p.lse + (pit_i64)b * p.lse_sb + (pit_i64)h * p.lse_sh + row0, rows, s_di, s_lse2);
    float dq[HD / 8][4];
    zero_rows(dq);
    for (int e = 0; e < entries; ++e) {
        pit_i64 k_lo = lo, k_hi = hi;
        if (index) {
            const pit_i64 kb = pit_entry_index(__ldg(p.entries + grp * p.cap + e));
            k_lo = bwd_max(lo, kb * p.bc);
            k_hi = bwd_min(hi, bwd_min(kb * p.bc + p.bc, p.Lk));
        }
        for (pit_i64 key0 = k_lo; key0 < k_hi; key0 += QC) {
            const int keys = (int)bwd_min(QC, k_hi - key0);
            __syncthreads(); /* the previous chunk is read (and the rows staged) */
            stage<QC>(sk, K + key0 * p.k.ld, p.k.ld, keys);
            stage<QC>(sv, V + key0 * p.v.ld, p.v.ld, keys);
            __syncthreads();
            float s[4][4], dp[4][4];
            scores(s, dp, sq, sk, sdo, sv, r0);
            probabilities(
                p, s, dp,
                [&](int r, int c) { return r0 + r < rows && c < keys && in_bounds(p, row0 + r0 + r, key0 + c); },
                [&](int r, int) { return s_lse2[r0 + r]; }, [&](int r, int) { return s_di[r0 + r]; });
            accumulate(dq, dp, sk);
        }
    }
    store_rows((T *)rows_of(p.dq, b, h) + row0 * p.dq.ld, p.dq.ld, r0, rows, dq);
}
#endif

#if defined(PIT_KERNEL_OP_ATTN_BWD_DKV)
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_bwd_dkv(const pit_attn_ex_args p)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    const bwd_tiles t = tiles_of(smem);
    T *sk = t.own, *sv = t.own2, *sq = t.walk, *sdo = t.walk2;
    float *s_di = t.stats, *s_lse2 = t.stats + QC;
    const pit_i64 bid = blockIdx.x, per = (pit_i64)p.blocks * p.parts;
    const int z = (int)(bid / per), kb = (int)(bid % per / p.parts), part = (int)(bid % p.parts);
    const int b = z / p.heads, hk = z % p.heads, r0 = (threadIdx.x / PIT_WARP) * 16;
    const pit_i64 key0 = (pit_i64)kb * p.bc + (pit_i64)part * TR;
    const int keys = (int)bwd_max(0, bwd_min(TR, bwd_min((pit_i64)p.bc - (pit_i64)part * TR, p.Lk - key0)));
    if (keys == 0) return;
    const pit_i64 diag = (pit_i64)p.Lk - p.Lq;
    const pit_i64 qlo = p.wr >= 0 ? bwd_min(bwd_max(key0 - diag - p.wr, 0), p.Lq) : 0;
    const pit_i64 qhi = p.wl >= 0 ? bwd_min(key0 + keys - 1 - diag + p.wl + 1, p.Lq) : p.Lq;
    const bool index = p.flags & PIT_ATTN_EX_INDEX;
    stage<TR>(sk, rows_of(p.k, b, hk) + key0 * p.k.ld, p.k.ld, keys);
    stage<TR>(sv, rows_of(p.v, b, hk) + key0 * p.v.ld, p.v.ld, keys);
    float dk[HD / 8][4], dv[HD / 8][4];
    zero_rows(dk);
    zero_rows(dv);
    for (int h = hk * p.group; h < (hk + 1) * p.group; ++h) {
        const T *Q = rows_of(p.q, b, h), *O = rows_of(p.o, b, h), *dO = rows_of(p.dout, b, h);
        const float *L = p.lse + (pit_i64)b * p.lse_sb + (pit_i64)h * p.lse_sh;
        for (pit_i64 qb = qlo / p.br; qb * p.br < qhi; ++qb) {
            if (index && !block_listed(p, b * p.idx_sb + h * p.idx_sh + qb, kb)) continue;
            const pit_i64 q_end = bwd_min(qhi, qb * p.br + p.br);
            for (pit_i64 q0 = bwd_max(qlo, qb * p.br); q0 < q_end; q0 += QC) {
                const int nq = (int)bwd_min(QC, q_end - q0);
                __syncthreads(); /* the previous chunk is read (and the keys staged) */
                stage<QC>(sq, Q + q0 * p.q.ld, p.q.ld, nq);
                stage<QC>(sdo, dO + q0 * p.dout.ld, p.dout.ld, nq);
                row_stats<QC>(p, dO + q0 * p.dout.ld, O + q0 * p.o.ld, L + q0, nq, s_di, s_lse2);
                __syncthreads();
                float s[4][4], dp[4][4];
                scores(s, dp, sk, sq, sv, sdo, r0);
                probabilities(
                    p, s, dp,
                    [&](int r, int c) { return r0 + r < keys && c < nq && in_bounds(p, q0 + c, key0 + r0 + r); },
                    [&](int, int c) { return s_lse2[c]; }, [&](int, int c) { return s_di[c]; });
                if (p.flags & PIT_ATTN_EX_DV) accumulate(dv, s, sdo);
                if (p.flags & PIT_ATTN_EX_DK) accumulate(dk, dp, sq);
            }
        }
    }
    if (p.flags & PIT_ATTN_EX_DK) store_rows((T *)rows_of(p.dk, b, hk) + key0 * p.dk.ld, p.dk.ld, r0, keys, dk);
    if (p.flags & PIT_ATTN_EX_DV) store_rows((T *)rows_of(p.dv, b, hk) + key0 * p.dv.ld, p.dv.ld, r0, keys, dv);
}
#endif
