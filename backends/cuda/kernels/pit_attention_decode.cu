/*
 * pit_attention_decode.cu - pit_attention for a few queries over a long KV
 * cache (decode) with a block mask: the query heads of one GQA group in one
 * CTA, the keys split over CTAs (pit_op_attn_decode), the splits' partial
 * results merged (pit_op_attn_combine).
 *
 * A CTA takes one (batch, KV head) and split y of gridDim.y. Its rows are
 * the group's query heads times the Lq queries (row r: head r / Lq of the
 * group, query r % Lq; at most 16 rows, one m16 tile). Each head's index
 * group (its block mask's one row of key blocks) becomes a bitmap in shared
 * memory; the CTA walks the union of the heads' key blocks (its split's
 * share of them, in key order), so K and V are read once a group, not once
 * a query head, and a row takes a key only where its own head's block is
 * listed (and inside the causal bound or window). Keys stream in chunks of
 * 64 through cp.async stages; warp w takes keys 16 w .. 16 w + 15 of each
 * chunk (its own slice: no warp reads another's K or V), with its own
 * running max, sum and O; the four warps merge in shared memory at the end.
 * One split writes O and lse; several write f32 partials (O unscaled, the
 * max and sum, base 2) that pit_op_attn_combine merges.
 *
 * Defines: PIT_DTYPE (16-bit), KB (the mask's key block: 64 or 128), HD
 * (the head dim of Q, K, V and O: 64 or 128).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/mma.cuh"
#include "common/index.cuh"
#include "common/elem.cuh"

static_assert(PIT_DTYPE != PIT_DT_F32, "tensor cores take 16-bit inputs");
constexpr int ROWS = PIT_ATTN_DECODE_ROWS, KC = 64, WARPS = 4, THREADS = WARPS * 32;
static_assert(KB % KC == 0 && HD % 16 == 0, "attention decode tile");

#if defined(PIT_KERNEL_OP_ATTN_DECODE)
constexpr int STAGES = 2;
constexpr int KS = HD + 8; /* padded rows: ldmatrix without conflicts */
constexpr int Q_BYTES = ROWS * KS * 2, STAGE_BYTES = 2 * KC * KS * 2;
constexpr int WORDS = PIT_ATTN_DECODE_MAX_BLOCKS / 32; /* bitmap words a head */
constexpr int BITS_BYTES = PIT_ATTN_DECODE_MAX_GROUP * WORDS * 4, LIST_BYTES = PIT_ATTN_DECODE_MAX_BLOCKS * 4;
/* after the loop the stages hold the warps' partial O, max and sum */
constexpr int MERGE_BYTES = WARPS * ROWS * (HD + 2) * 4;
static_assert(MERGE_BYTES <= STAGES * STAGE_BYTES, "attention decode: the merge fits the stages");
extern "C" __device__ const int pit_smem_bytes = Q_BYTES + STAGES * STAGE_BYTES + BITS_BYTES + LIST_BYTES;

/* rows [r0, r0 + n) of an operand (KC rows of HD) into shared, zeros past Lk */
PIT_DEV void load_chunk(T *dst, const T *src, pit_i64 ld, int r0, int Lk)
{
    constexpr int VPR = HD / 8, UNITS = KC * VPR;
#pragma unroll
    for (int i = 0; i < UNITS / THREADS; ++i) {
        const int u = threadIdx.x + i * THREADS, r = u / VPR, c = (u % VPR) * 8;
        const bool ok = r0 + r < Lk;
        pit_copy16(dst + r * KS + c, ok ? src + (pit_i64)(r0 + r) * ld + c : src, ok);
    }
}

/* Whether query q (0 .. Lq - 1) sees key `key`: inside the keys and the
 * window bounds around its diagonal, aligned to the end of the keys. */
PIT_DEV bool sees(const pit_attn_decode_args &a, int q, int key)
{
    const pit_i64 at = (pit_i64)q + a.Lk - a.Lq;
    return key < a.Lk && (a.wl < 0 || key >= at - a.wl) && (a.wr < 0 || key <= at + a.wr);
}

/* The union of the group's listed key blocks into list[], in key order;
 * returns how many. Bitmaps first (one a head, WORDS words), then warp 0
 * counts a word range a lane and lays the blocks out. */
PIT_DEV int union_blocks(const pit_attn_decode_args &a, int b, int kvh, pit_u32 *bits, int *list)
{
    __shared__ int lane_at[32];
    const int W = (a.nkb + 31) / 32;
    for (int i = threadIdx.x; i < a.group * WORDS; i += THREADS) bits[i] = 0;
    __syncthreads();
    for (int j = 0; j < a.group; ++j) {
        const int grp = ix_group(a.ix, b * a.heads_q + kvh * a.group + j, 0);
        const int n = pit_ldcg(a.ix.counts + grp);
        const int *ent = a.ix.entries + (pit_i64)grp * a.ix.capacity;
        for (int i = threadIdx.x; i < n; i += THREADS) {
            const int e = pit_entry_index(pit_ldcg(ent + i));
            pit_atomic_or(bits + j * WORDS + e / 32, 1u << (e % 32));
        }
    }
    __syncthreads();
    const int per = (W + 31) / 32, lane = pit_lane();
    if (threadIdx.x < 32) {
        int cnt = 0;
        for (int w = lane * per; w < (lane + 1) * per && w < W; ++w) {
            pit_u32 u = 0;
            for (int j = 0; j < a.group; ++j) u |= bits[j * WORDS + w];
            cnt += pit_popc(u);
        }
        lane_at[lane] = cnt;
    }
    __syncthreads();
    if (threadIdx.x == 0) { /* 32 counts to offsets */
        int run = 0;
        for (int l = 0; l < 32; ++l) {
            const int c = lane_at[l];
            lane_at[l] = run;
            run += c;
        }
        lane_at[0] |= run << 16; /* the total rides in the high half (at most MAX_BLOCKS) */
    }
    __syncthreads();
    const int total = lane_at[0] >> 16;
    if (threadIdx.x < 32) {
        int at = lane_at[lane] & 0xffff;
        for (int w = lane * per; w < (lane + 1) * per && w < W; ++w) {
            pit_u32 u = 0;
            for (int j = 0; j < a.group; ++j) u |= bits[j * WORDS + w];
            for (; u; u &= u - 1) list[at++] = w * 32 + pit_popc((u & (0u - u)) - 1u); /* lowest set bit */
        }
    }
    __syncthreads();
    return total;
}

PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_decode(const pit_attn_decode_args a)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    T *Qs = (T *)smem;
    auto Kb = [&](int i) { return (T *)(smem + Q_BYTES + i * STAGE_BYTES); };
    auto Vb = [&](int i) { return (T *)(smem + Q_BYTES + i * STAGE_BYTES) + KC * KS; };
    pit_u32 *bits = (pit_u32 *)(smem + Q_BYTES + STAGES * STAGE_BYTES);
    int *list = (int *)(smem + Q_BYTES + STAGES * STAGE_BYTES + BITS_BYTES);
    const int bkv = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
    const int b = bkv / a.hkv, kvh = bkv % a.hkv, R = a.group * a.Lq;
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane(), g = lane >> 2, t = lane & 3;

    const int total = union_blocks(a, b, kvh, bits, list);
    const int lo = (int)((pit_i64)total * split / splits), hi = (int)((pit_i64)total * (split + 1) / splits);
    const int nch = (hi - lo) * (KB / KC);
    const T *k = (const T *)a.k + (pit_i64)bkv * a.sk, *v = (const T *)a.v + (pit_i64)bkv * a.sv;
    auto key0_of = [&](int c) { return list[lo + c / (KB / KC)] * KB + (c % (KB / KC)) * KC; };

    /* Q: row r is query r % Lq of the group's head r / Lq; zeros past R */
    {
        constexpr int VPR = HD / 8;
        for (int u = threadIdx.x; u < ROWS * VPR; u += THREADS) {
            const int r = u / VPR, c = (u % VPR) * 8;
            const bool ok = r < R;
            const pit_i64 set = (pit_i64)b * a.heads_q + kvh * a.group + (ok ? r / a.Lq : 0);
            const T *src = (const T *)a.q + set * a.sq + (pit_i64)(ok ? r % a.Lq : 0) * a.ldq + c;
            pit_copy16(Qs + r * KS + c, src, ok);
        }
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nch) {
            load_chunk(Kb(s), k, a.ldk, key0_of(s), a.Lk);
            load_chunk(Vb(s), v, a.ldv, key0_of(s), a.Lk);
        }
        pit_copy_commit();
    }

    float o[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_run[2] = {PIT_NEG_INF, PIT_NEG_INF}, l_run[2] = {0.f, 0.f};
    pit_u32 qf[HD / 16][4];
    /* this thread's rows g and g + 8: their head (-1 past R) and query */
    int head[2], query[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        head[h] = r < R ? r / a.Lq : -1;
        query[h] = r < R ? r % a.Lq : 0;
    }

    for (int c = 0; c < nch; ++c) {
        const int ahead = c + STAGES - 1;
        if (ahead < nch) {
            load_chunk(Kb(ahead % STAGES), k, a.ldk, key0_of(ahead), a.Lk);
            load_chunk(Vb(ahead % STAGES), v, a.ldv, key0_of(ahead), a.Lk);
        }
        pit_copy_commit();
        pit_copy_wait<STAGES - 1>();
        __syncthreads();
        if (c == 0) {
#pragma unroll
            for (int kk = 0; kk < HD / 16; ++kk)
                pit_ldmatrix_x4(qf[kk], Qs + (lane & 15) * KS + kk * 16 + (lane >> 4) * 8);
        }
        const T *Ks = Kb(c % STAGES), *Vs = Vb(c % STAGES);
        const int key0 = key0_of(c), blk = key0 / KB, mine = key0 + 16 * warp;
        /* S = Q . K^T over this warp's 16 keys: two n-tiles of 8 */
        float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk) {
            pit_u32 r[4];
            pit_ldmatrix_x4(r, Ks + (16 * warp + (lane & 7) + (lane >> 4) * 8) * KS + kk * 16 + ((lane >> 3) & 1) * 8);
            const pit_u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
            pit_mma_16816<PIT_DTYPE>(s[0], qf[kk], b0);
            pit_mma_16816<PIT_DTYPE>(s[1], qf[kk], b1);
        }
        /* element (n, 2 h + e): row g + 8 h, key mine + 8 n + 2 t + e */
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const bool listed = head[h] >= 0 && ((bits[head[h] * WORDS + blk / 32] >> (blk % 32)) & 1u);
            float mx = PIT_NEG_INF;
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = mine + 8 * n + 2 * t + e;
                    float &x = s[n][2 * h + e];
                    /* finite however large the scale: +inf would make the max's exponent NaN */
                    x = listed && sees(a, query[h], key) ? fminf(x * a.scale_log2, 3.0e38f) : PIT_NEG_INF;
                    mx = fmaxf(mx, x);
                }
            mx = fmaxf(mx, shfl_xor_f(mx, 1));
            mx = fmaxf(mx, shfl_xor_f(mx, 2));
            const float m_new = fmaxf(m_run[h], mx), m_use = m_new == PIT_NEG_INF ? 0.f : m_new;
            alpha[h] = pit_exp2_ftz(m_run[h] - m_use);
            m_run[h] = m_new;
            float rs = 0.f;
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float &x = s[n][2 * h + e];
                    x = pit_exp2_ftz(x - m_use);
                    rs += x;
                }
            l_run[h] = l_run[h] * alpha[h] + rs;
        }
#pragma unroll
        for (int j = 0; j < HD / 8; ++j) {
            o[j][0] *= alpha[0], o[j][1] *= alpha[0];
            o[j][2] *= alpha[1], o[j][3] *= alpha[1];
        }
        /* O += P . V over the same 16 keys: P's accumulators are the A fragment */
        const pit_u32 pa[4] = {pack2(s[0][0], s[0][1]), pack2(s[0][2], s[0][3]), pack2(s[1][0], s[1][1]),
                               pack2(s[1][2], s[1][3])};
#pragma unroll
        for (int nj = 0; nj < HD / 16; ++nj) {
            pit_u32 r[4];
            pit_ldmatrix_x4_trans(r, Vs + (16 * warp + (lane & 7) + ((lane >> 3) & 1) * 8) * KS + nj * 16 + (lane >> 4) * 8);
            const pit_u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
            pit_mma_16816<PIT_DTYPE>(o[2 * nj], pa, b0);
            pit_mma_16816<PIT_DTYPE>(o[2 * nj + 1], pa, b1);
        }
        __syncthreads(); /* the next iteration refills a stage */
    }
    pit_copy_wait<0>();
    __syncthreads();

    /* The warps' partials into the stages: O [WARPS][ROWS][HD], then max
     * and sum [WARPS][ROWS] (each row's sum over the quad first). */
    float *mo = (float *)(smem + Q_BYTES), *mm = mo + WARPS * ROWS * HD, *ml = mm + WARPS * ROWS;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        float l = l_run[h];
        l += shfl_xor_f(l, 1);
        l += shfl_xor_f(l, 2);
#pragma unroll
        for (int j = 0; j < HD / 8; ++j) {
            mo[(warp * ROWS + r) * HD + j * 8 + 2 * t] = o[j][2 * h];
            mo[(warp * ROWS + r) * HD + j * 8 + 2 * t + 1] = o[j][2 * h + 1];
        }
        if (t == 0) mm[warp * ROWS + r] = m_run[h], ml[warp * ROWS + r] = l;
    }
    __syncthreads();
    /* merged: a thread a (row, column); one split writes O and lse, several
     * their partials */
    for (int i = threadIdx.x; i < R * HD; i += THREADS) {
        const int r = i / HD, col = i % HD;
        float M = PIT_NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) M = fmaxf(M, mm[w * ROWS + r]);
        float L = 0.f, O = 0.f;
        if (M != PIT_NEG_INF) {
#pragma unroll
            for (int w = 0; w < WARPS; ++w) {
                const float f = pit_exp2_ftz(mm[w * ROWS + r] - M);
                L += f * ml[w * ROWS + r];
                O += f * mo[(w * ROWS + r) * HD + col];
            }
        }
        const pit_i64 set = (pit_i64)b * a.heads_q + kvh * a.group + r / a.Lq;
        if (splits == 1) {
            T *out = (T *)a.o + set * a.so + (pit_i64)(r % a.Lq) * a.ldo;
            out[col] = pit_from_float<T>(L > 0.f ? O / L : 0.f);
            if (a.lse && col == 0) {
                float *lse = a.lse + (set / a.heads_q) * a.lse_sb + (set % a.heads_q) * a.lse_sh;
                lse[r % a.Lq] = L > 0.f ? (M + pit_log2f(L)) * 0.6931471805599453f : PIT_NEG_INF;
            }
        } else {
            const pit_i64 part = ((pit_i64)split * gridDim.x + bkv) * ROWS + r;
            a.part_o[part * HD + col] = O;
            if (col == 0) a.part_ml[2 * part] = M, a.part_ml[2 * part + 1] = L;
        }
    }
}
#endif

#if defined(PIT_KERNEL_OP_ATTN_COMBINE)
extern "C" __device__ const int pit_smem_bytes = 0;

/* The splits of pit_op_attn_decode merged: a CTA a (batch, KV head), a
 * thread a (row, column) of its rows. */
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_combine(const pit_attn_decode_args a)
{
    const int bkv = blockIdx.x, b = bkv / a.hkv, kvh = bkv % a.hkv, R = a.group * a.Lq;
    for (int i = threadIdx.x; i < R * HD; i += THREADS) {
        const int r = i / HD, col = i % HD;
        float M = PIT_NEG_INF;
        for (int s = 0; s < a.splits; ++s) M = fmaxf(M, a.part_ml[2 * (((pit_i64)s * a.bkv + bkv) * ROWS + r)]);
        float L = 0.f, O = 0.f;
        if (M != PIT_NEG_INF) {
            for (int s = 0; s < a.splits; ++s) {
                const pit_i64 part = ((pit_i64)s * a.bkv + bkv) * ROWS + r;
                const float f = pit_exp2_ftz(a.part_ml[2 * part] - M);
                L += f * a.part_ml[2 * part + 1];
                O += f * a.part_o[part * HD + col];
            }
        }
        const pit_i64 set = (pit_i64)b * a.heads_q + kvh * a.group + r / a.Lq;
        T *out = (T *)a.o + set * a.so + (pit_i64)(r % a.Lq) * a.ldo;
        out[col] = pit_from_float<T>(L > 0.f ? O / L : 0.f);
        if (a.lse && col == 0) {
            float *lse = a.lse + (set / a.heads_q) * a.lse_sb + (set % a.heads_q) * a.lse_sh;
            lse[r % a.Lq] = L > 0.f ? (M + pit_log2f(L)) * 0.6931471805599453f : PIT_NEG_INF;
        }
    }
}
#endif
