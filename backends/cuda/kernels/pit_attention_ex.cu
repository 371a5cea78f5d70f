/*
 * pit_attention_ex.cu - attention with every option of pit_attention
 * (core/backend.h, pit_attention_desc) and its backward, for any dtype and
 * head dims: O = softmax(scale Q K^T over the allowed keys) V per batch and
 * query head, the log-sum-exp of each row when asked, and dQ, dK, dV.
 *
 * No score matrix is stored. The forward and dQ kernels give a CTA ROWS
 * query rows of one query block of one (batch, query head) and walk the
 * keys CHUNK at a time, a key a lane: the key blocks the index lists for
 * the block (with an index), else every key, and either way only those
 * inside the rows' causal bound and window. Scores are dot products staged
 * through shared memory DC columns at a time (f32 whatever the storage);
 * the forward keeps each row's running maximum and sum in registers
 * (online softmax, base 2) and accumulates the weighted rows of V, staged in
 * shared memory, into COLS output columns a pass held in registers (wider
 * outputs take more passes, which score again). A key is allowed when the
 * window bounds, measured from the diagonal aligned to the end of the keys
 * (key i + Lk - Lq is "at" query i), and the element mask allow it; a row
 * with no allowed key is written as zeros, its lse -inf.
 *
 * The backward recomputes P = exp(s - lse) from the forward's lse, with
 * dS = scale P (dO.V - dO.O). pit_op_attn_ex_dq walks keys as the forward
 * and accumulates dQ = dS K. pit_op_attn_ex_dkv gives a CTA ROWS keys of
 * one key block of one (batch, kv head) and walks, CHUNK queries at a time,
 * the query blocks of every query head of the group whose index lists that
 * key block (all without an index) inside the bounds: dK = dS^T Q, dV =
 * P^T dO. Each output element is written once by the CTA that owns it: no
 * atomics, no scratch.
 *
 * Every operand comes as element 0 and batch, head and row strides
 * (columns contiguous; a stride of 0 shares the mask). Query head h reads
 * kv head h / group. Defines: PIT_DTYPE, MASK_DT, PIT_KERNEL_OP_ATTN_EX*
 * (the kernel). The block br x bc and the head dims are arguments.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"
#include "attention_ex.cuh"

extern "C" __device__ const int pit_smem_bytes = 0;

#define THREADS PIT_ATTN_EX_THREADS
#define ROWS PIT_ATTN_EX_ROWS
#define CHUNK PIT_ATTN_EX_CHUNK
#define DC PIT_ATTN_EX_DC
#define COLS PIT_ATTN_EX_COLS
#define RW (ROWS / (THREADS / PIT_WARP)) /* rows (keys) a warp owns */
#define CPL (COLS / PIT_WARP)            /* output columns a lane holds */
#define LN2 0.6931471805599453f
#define LOG2E 1.4426950408889634f

static_assert(CHUNK == PIT_WARP, "a key (query) a lane");
static_assert(RW * (THREADS / PIT_WARP) == ROWS && RW == 4, "four rows a warp");

PIT_DEV pit_i64 att_min(pit_i64 a, pit_i64 b) { return a < b ? a : b; }
PIT_DEV pit_i64 att_max(pit_i64 a, pit_i64 b) { return a > b ? a : b; }

PIT_DEV float warp_max(float v)
{
#pragma unroll
    for (int d = 1; d < PIT_WARP; d *= 2) v = fmaxf(v, shfl_xor_f(v, d));
    return v;
}

PIT_DEV float warp_sum(float v)
{
#pragma unroll
    for (int d = 1; d < PIT_WARP; d *= 2) v += shfl_xor_f(v, d);
    return v;
}

/* The mask's rows of (b, h): a byte pointer, as mask_on reads it. */
PIT_DEV const pit_u8 *mask_of(const pit_attn_ex_args &p, int b, int h)
{
    return p.mask.ptr + ((pit_i64)b * p.mask.sb + (pit_i64)h * p.mask.sh) * MASK_BYTES;
}

/* Whether key `key` counts for query `row`: the window bounds from the
 * diagonal aligned to the end of the keys, then the element mask. */
PIT_DEV bool key_allowed(const pit_attn_ex_args &p, const pit_u8 *m, pit_i64 row, pit_i64 key)
{
    const pit_i64 at = row + (pit_i64)p.Lk - p.Lq;
    if (p.wl >= 0 && key < at - p.wl) return false;
    if (p.wr >= 0 && key > at + p.wr) return false;
    return !(p.flags & PIT_ATTN_EX_MASK) || mask_on(m, row * p.mask.ld + key);
}

/* Shared staging of the dot products: ROWS rows of A (read by broadcast)
 * and CHUNK rows of B (a row a lane; the pad keeps the lanes on distinct
 * banks), DC columns at a time. */
struct att_dot_smem {
    float a[ROWS][DC];
    float b[CHUNK][DC + 1];
};

/* dot[r] += A[warp's row r] . B[lane] over n columns, for the na rows of A
 * and nb rows of B that exist (the others read as zeros). Every thread of
 * the CTA calls it with the same n. */
PIT_DEV void dot_rows(float dot[RW], att_dot_smem &s, const T *A, pit_i64 lda, int na, const T *B, pit_i64 ldb,
                      int nb, int n)
{
    const int tid = threadIdx.x, lane = pit_lane(), r0 = (tid / PIT_WARP) * RW;
    for (int c0 = 0; c0 < n; c0 += DC) {
        __syncthreads(); /* the previous columns are read */
        for (int i = tid; i < ROWS * DC; i += THREADS) {
            const int r = i / DC, c = i % DC;
            s.a[r][c] = r < na && c0 + c < n ? pit_to_float(A[r * lda + c0 + c]) : 0.f;
        }
        for (int i = tid; i < CHUNK * DC; i += THREADS) {
            const int r = i / DC, c = i % DC;
            s.b[r][c] = r < nb && c0 + c < n ? pit_to_float(B[r * ldb + c0 + c]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int c = 0; c < DC; ++c) {
            const float bv = s.b[lane][c];
#pragma unroll
            for (int r = 0; r < RW; ++r) dot[r] = fmaf(s.a[r0 + r][c], bv, dot[r]);
        }
    }
}

/* Rows src[0 .. n) of columns c0 .. c0 + cols into sv (f32); the columns
 * a lane accumulates are lane + 32 i. */
PIT_DEV void stage_rows(float (*sv)[COLS], const T *src, pit_i64 ld, int n, int c0, int cols)
{
    for (int i = threadIdx.x; i < n * cols; i += THREADS) {
        const int r = i / cols, c = i % cols;
        sv[r][c] = pit_to_float(src[r * ld + c0 + c]);
    }
}

/* acc[r][i] += sum over j < n of w[warp's row r][j] * sv[j][lane + 32 i]. */
PIT_DEV void accumulate(float acc[RW][CPL], const float (*w)[CHUNK], const float (*sv)[COLS], int n, int cols)
{
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
        float wj[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) wj[r] = w[r0 + r][j];
#pragma unroll
        for (int i = 0; i < CPL; ++i) {
            if (lane + PIT_WARP * i >= cols) break;
            const float v = sv[j][lane + PIT_WARP * i];
#pragma unroll
            for (int r = 0; r < RW; ++r) acc[r][i] = fmaf(wj[r], v, acc[r][i]);
        }
    }
}

/* acc (rows row0 + warp's rows, < n of them) into dst columns c0 .. c0 +
 * cols, times f[r] */
PIT_DEV void store_rows(T *dst, pit_i64 ld, int n, int c0, int cols, float acc[RW][CPL], const float f[RW])
{
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        if (r0 + r >= n) break;
#pragma unroll
        for (int i = 0; i < CPL; ++i)
            if (lane + PIT_WARP * i < cols)
                dst[(pit_i64)(r0 + r) * ld + c0 + lane + PIT_WARP * i] = pit_from_float<T>(acc[r][i] * f[r]);
    }
}

PIT_DEV void zero_acc(float acc[RW][CPL])
{
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int i = 0; i < CPL; ++i) acc[r][i] = 0.f;
}

/* ---- the query side: forward and dQ ------------------------------------------ */
/* The rows a CTA of the forward or of dQ takes, the keys their bounds
 * leave, and the index group that lists their key blocks. */
struct att_rows {
    int b, h, hk;
    pit_i64 row0; /* rows row0 .. row0 + rows - 1: inside the block and Lq */
    int rows;
    pit_i64 lo, hi; /* keys [lo, hi) the bounds leave to any of the rows */
    pit_i64 g;      /* index group */
    int n;          /* its entries; 1 without an index (every key in the bounds) */
};

PIT_DEV att_rows query_rows(const pit_attn_ex_args &p)
{
    att_rows w;
    const pit_i64 bid = blockIdx.x, per = (pit_i64)p.blocks * p.parts;
    const int z = (int)(bid / per), qb = (int)(bid % per / p.parts), part = (int)(bid % p.parts);
    w.b = z / p.heads;
    w.h = z % p.heads;
    w.hk = w.h / p.group;
    w.row0 = (pit_i64)qb * p.br + (pit_i64)part * ROWS;
    w.rows = (int)att_max(0, att_min(ROWS, att_min((pit_i64)p.br - (pit_i64)part * ROWS, p.Lq - w.row0)));
    const pit_i64 diag = (pit_i64)p.Lk - p.Lq;
    w.lo = p.wl >= 0 ? att_max(w.row0 + diag - p.wl, 0) : 0;
    w.hi = p.wr >= 0 ? att_min(w.row0 + w.rows - 1 + diag + p.wr + 1, p.Lk) : p.Lk;
    if (w.rows == 0) w.hi = w.lo;
    const bool index = p.flags & PIT_ATTN_EX_INDEX;
    w.g = index ? w.b * p.idx_sb + w.h * p.idx_sh + qb : 0;
    w.n = index ? min(__ldg(p.counts + w.g), p.cap) : 1;
    return w;
}

/* The keys [*lo, *hi) of entry e of w's group: its key block inside the
 * bounds, or without an index every key in them. */
PIT_DEV void entry_keys(const pit_attn_ex_args &p, const att_rows &w, int e, pit_i64 *lo, pit_i64 *hi)
{
    *lo = w.lo;
    *hi = w.hi;
    if (!(p.flags & PIT_ATTN_EX_INDEX)) return;
    const pit_i64 kb = pit_entry_index(__ldg(p.entries + w.g * p.cap + e));
    *lo = att_max(w.lo, kb * p.bc);
    *hi = att_min(w.hi, att_min(kb * p.bc + p.bc, p.Lk));
}

/* The scaled score (base 2) of the warp's row r and the lane's key, -inf
 * where the pair is not allowed or either side is past its end. */
PIT_DEV float score2(const pit_attn_ex_args &p, const pit_u8 *m, const att_rows &w, int r, pit_i64 key0, int keys,
                     float dot)
{
    const int rr = (threadIdx.x / PIT_WARP) * RW + r, lane = pit_lane();
    const bool ok = rr < w.rows && lane < keys && key_allowed(p, m, w.row0 + rr, key0 + lane);
    return ok ? pit_mul_rn(dot, p.scale_log2) : PIT_NEG_INF;
}

#if defined(PIT_KERNEL_OP_ATTN_EX)
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_ex(const pit_attn_ex_args p)
{
    __shared__ att_dot_smem sd;
    __shared__ float sw[ROWS][CHUNK];
    __shared__ float sv[CHUNK][COLS];
    const att_rows w = query_rows(p);
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
    const T *Q = rows_of(p.q, w.b, w.h) + w.row0 * p.q.ld;
    const T *K = rows_of(p.k, w.b, w.hk), *V = rows_of(p.v, w.b, w.hk);
    const pit_u8 *M = (p.flags & PIT_ATTN_EX_MASK) ? mask_of(p, w.b, w.h) : nullptr;
    T *O = (T *)rows_of(p.o, w.b, w.h) + w.row0 * p.o.ld;
    for (int c0 = 0; c0 == 0 || c0 < p.Dv; c0 += COLS) { /* one pass at least: the lse */
        const int cols = min(COLS, p.Dv - c0);
        float mx[RW], sum[RW], acc[RW][CPL];
#pragma unroll
        for (int r = 0; r < RW; ++r) mx[r] = PIT_NEG_INF, sum[r] = 0.f;
        zero_acc(acc);
        for (int e = 0; e < w.n; ++e) {
            pit_i64 k_lo, k_hi;
            entry_keys(p, w, e, &k_lo, &k_hi);
            for (pit_i64 key0 = k_lo; key0 < k_hi; key0 += CHUNK) {
                const int keys = (int)att_min(CHUNK, k_hi - key0);
                float dot[RW] = {};
                dot_rows(dot, sd, Q, p.q.ld, w.rows, K + key0 * p.k.ld, p.k.ld, keys, p.D);
                /* online softmax: the new maximum (-inf while nothing is
                 * allowed: no weight, no rescale), the weights under it */
#pragma unroll
                for (int r = 0; r < RW; ++r) {
                    const float s = score2(p, M, w, r, key0, keys, dot[r]);
                    const float m = fmaxf(mx[r], warp_max(s));
                    const float f = m == PIT_NEG_INF ? 1.f : exp2f(mx[r] - m);
                    const float pw = s == PIT_NEG_INF ? 0.f : exp2f(s - m);
                    sum[r] = sum[r] * f + warp_sum(pw);
                    mx[r] = m;
#pragma unroll
                    for (int i = 0; i < CPL; ++i) acc[r][i] *= f;
                    sw[r0 + r][lane] = pw;
                }
                stage_rows(sv, V + key0 * p.v.ld, p.v.ld, keys, c0, cols);
                __syncthreads();
                accumulate(acc, sw, sv, keys, cols);
                __syncthreads(); /* sw and sv are written again */
            }
        }
        float inv[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) inv[r] = sum[r] > 0.f ? 1.f / sum[r] : 0.f;
        store_rows(O, p.o.ld, w.rows, c0, cols, acc, inv);
        if (c0 == 0 && (p.flags & PIT_ATTN_EX_LSE) && lane == 0) {
            float *L = p.lse + (pit_i64)w.b * p.lse_sb + (pit_i64)w.h * p.lse_sh + w.row0;
#pragma unroll
            for (int r = 0; r < RW; ++r)
                if (r0 + r < w.rows) L[r0 + r] = sum[r] > 0.f ? (mx[r] + pit_log2f(sum[r])) * LN2 : PIT_NEG_INF;
        }
    }
}
#endif

/* dO_i . O_i of the warp's rows (0 past the end). */
PIT_DEV void row_di(const pit_attn_ex_args &p, const T *dO, const T *O, int n, float di[RW])
{
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        float s = 0.f;
        if (r0 + r < n)
            for (int c = lane; c < p.Dv; c += PIT_WARP)
                s = fmaf(pit_to_float(dO[(r0 + r) * p.dout.ld + c]), pit_to_float(O[(r0 + r) * p.o.ld + c]), s);
        di[r] = warp_sum(s);
    }
}

/* dS of a pair (and P in *pw) from its base-2 score s2, the row's lse in
 * base 2 and Di: 0 off the pattern and on rows without a key. */
PIT_DEV float pair_ds(const pit_attn_ex_args &p, float s2, float lse2, float dp, float di, float *pw)
{
    *pw = s2 == PIT_NEG_INF || lse2 == PIT_NEG_INF ? 0.f : exp2f(s2 - lse2);
    return *pw == 0.f ? 0.f : p.scale * *pw * (dp - di);
}

#if defined(PIT_KERNEL_OP_ATTN_EX_DQ)
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_ex_dq(const pit_attn_ex_args p)
{
    __shared__ att_dot_smem sd;
    __shared__ float sw[ROWS][CHUNK];
    __shared__ float sv[CHUNK][COLS];
    const att_rows w = query_rows(p);
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
    const T *Q = rows_of(p.q, w.b, w.h) + w.row0 * p.q.ld;
    const T *K = rows_of(p.k, w.b, w.hk), *V = rows_of(p.v, w.b, w.hk);
    const T *O = rows_of(p.o, w.b, w.h) + w.row0 * p.o.ld;
    const T *dO = rows_of(p.dout, w.b, w.h) + w.row0 * p.dout.ld;
    T *dQ = (T *)rows_of(p.dq, w.b, w.h) + w.row0 * p.dq.ld;
    const pit_u8 *M = (p.flags & PIT_ATTN_EX_MASK) ? mask_of(p, w.b, w.h) : nullptr;
    const float *L = p.lse + (pit_i64)w.b * p.lse_sb + (pit_i64)w.h * p.lse_sh + w.row0;
    float lse2[RW], di[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) lse2[r] = r0 + r < w.rows ? L[r0 + r] * LOG2E : PIT_NEG_INF;
    row_di(p, dO, O, w.rows, di);
    for (int c0 = 0; c0 < p.D; c0 += COLS) {
        const int cols = min(COLS, p.D - c0);
        float acc[RW][CPL];
        zero_acc(acc);
        for (int e = 0; e < w.n; ++e) {
            pit_i64 k_lo, k_hi;
            entry_keys(p, w, e, &k_lo, &k_hi);
            for (pit_i64 key0 = k_lo; key0 < k_hi; key0 += CHUNK) {
                const int keys = (int)att_min(CHUNK, k_hi - key0);
                float dot[RW] = {}, dp[RW] = {};
                dot_rows(dot, sd, Q, p.q.ld, w.rows, K + key0 * p.k.ld, p.k.ld, keys, p.D);
                dot_rows(dp, sd, dO, p.dout.ld, w.rows, V + key0 * p.v.ld, p.v.ld, keys, p.Dv);
#pragma unroll
                for (int r = 0; r < RW; ++r) {
                    float pw;
                    sw[r0 + r][lane] = pair_ds(p, score2(p, M, w, r, key0, keys, dot[r]), lse2[r], dp[r], di[r], &pw);
                }
                stage_rows(sv, K + key0 * p.k.ld, p.k.ld, keys, c0, cols);
                __syncthreads();
                accumulate(acc, sw, sv, keys, cols);
                __syncthreads(); /* sw and sv are written again */
            }
        }
        const float one[RW] = {1.f, 1.f, 1.f, 1.f};
        store_rows(dQ, p.dq.ld, w.rows, c0, cols, acc, one);
    }
}
#endif

/* ---- the key side: dK and dV --------------------------------------------------- */
#if defined(PIT_KERNEL_OP_ATTN_EX_DKV)
/* lse (base 2) and Di = dO.O of queries q0 .. q0 + nq of one head into
 * shared memory: four threads a query. */
PIT_DEV void query_stats(const pit_attn_ex_args &p, const float *L, const T *dO, const T *O, int nq, float *lse2,
                         float *di)
{
    const int q = threadIdx.x / 4, part = threadIdx.x % 4;
    float s = 0.f;
    if (q < nq)
        for (int c = part; c < p.Dv; c += 4)
            s = fmaf(pit_to_float(dO[q * p.dout.ld + c]), pit_to_float(O[q * p.o.ld + c]), s);
    s += shfl_xor_f(s, 1);
    s += shfl_xor_f(s, 2);
    if (part == 0 && q < CHUNK) {
        di[q] = s;
        lse2[q] = q < nq ? L[q] * LOG2E : PIT_NEG_INF;
    }
}
static_assert(THREADS / 4 == CHUNK, "four threads a query of the chunk");

PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_ex_dkv(const pit_attn_ex_args p)
{
    __shared__ att_dot_smem sd;
    __shared__ float sds[ROWS][CHUNK], sp[ROWS][CHUNK];
    __shared__ float sv[CHUNK][COLS];
    __shared__ float q_lse2[CHUNK], q_di[CHUNK];
    const int lane = pit_lane(), r0 = (threadIdx.x / PIT_WARP) * RW;
    const pit_i64 bid = blockIdx.x, per = (pit_i64)p.blocks * p.parts;
    const int z = (int)(bid / per), kb = (int)(bid % per / p.parts), part = (int)(bid % p.parts);
    const int b = z / p.heads, hk = z % p.heads;
    const pit_i64 key0 = (pit_i64)kb * p.bc + (pit_i64)part * ROWS;
    const int keys = (int)att_max(0, att_min(ROWS, att_min((pit_i64)p.bc - (pit_i64)part * ROWS, p.Lk - key0)));
    /* the queries the bounds leave to any of the keys: [qlo, qhi), empty
     * (qlo = Lq, never a query block past the last) for keys past Lk or
     * beyond every query's reach */
    const pit_i64 diag = (pit_i64)p.Lk - p.Lq;
    const pit_i64 qlo = p.wr >= 0 ? att_min(att_max(key0 - diag - p.wr, 0), p.Lq) : 0;
    const pit_i64 qhi = keys == 0 ? qlo : p.wl >= 0 ? att_min(key0 + keys - 1 - diag + p.wl + 1, p.Lq) : p.Lq;
    const bool index = p.flags & PIT_ATTN_EX_INDEX;
    const T *K = rows_of(p.k, b, hk) + key0 * p.k.ld, *V = rows_of(p.v, b, hk) + key0 * p.v.ld;
    for (int c0 = 0; c0 < p.D || c0 < p.Dv; c0 += COLS) {
        const int cols_k = (p.flags & PIT_ATTN_EX_DK) ? max(0, min(COLS, p.D - c0)) : 0;
        const int cols_v = (p.flags & PIT_ATTN_EX_DV) ? max(0, min(COLS, p.Dv - c0)) : 0;
        float acc_k[RW][CPL], acc_v[RW][CPL];
        zero_acc(acc_k);
        zero_acc(acc_v);
        for (int h = hk * p.group; h < (hk + 1) * p.group; ++h) {
            const T *Q = rows_of(p.q, b, h), *O = rows_of(p.o, b, h), *dO = rows_of(p.dout, b, h);
            const pit_u8 *M = (p.flags & PIT_ATTN_EX_MASK) ? mask_of(p, b, h) : nullptr;
            const float *L = p.lse + (pit_i64)b * p.lse_sb + (pit_i64)h * p.lse_sh;
            for (pit_i64 qb = qlo / p.br; qb * p.br < qhi; ++qb) {
                if (index && !block_listed(p, b * p.idx_sb + h * p.idx_sh + qb, kb)) continue;
                const pit_i64 q_end = att_min(qhi, qb * p.br + p.br);
                for (pit_i64 q0 = att_max(qlo, qb * p.br); q0 < q_end; q0 += CHUNK) {
                    const int nq = (int)att_min(CHUNK, q_end - q0);
                    __syncthreads(); /* the previous chunk's statistics are read */
                    query_stats(p, L + q0, dO + q0 * p.dout.ld, O + q0 * p.o.ld, nq, q_lse2, q_di);
                    float dot[RW] = {}, dp[RW] = {};
                    dot_rows(dot, sd, K, p.k.ld, keys, Q + q0 * p.q.ld, p.q.ld, nq, p.D);
                    dot_rows(dp, sd, V, p.v.ld, keys, dO + q0 * p.dout.ld, p.dout.ld, nq, p.Dv);
                    __syncthreads(); /* q_lse2, q_di written (also with D = Dv = 0) */
#pragma unroll
                    for (int r = 0; r < RW; ++r) {
                        const pit_i64 key = key0 + r0 + r, q = q0 + lane;
                        const bool ok = r0 + r < keys && lane < nq && key_allowed(p, M, q, key);
                        float pw;
                        sds[r0 + r][lane] = pair_ds(p, ok ? pit_mul_rn(dot[r], p.scale_log2) : PIT_NEG_INF,
                                                    q_lse2[lane], dp[r], q_di[lane], &pw);
                        sp[r0 + r][lane] = pw;
                    }
                    if (cols_k > 0) {
                        stage_rows(sv, Q + q0 * p.q.ld, p.q.ld, nq, c0, cols_k);
                        __syncthreads();
                        accumulate(acc_k, sds, sv, nq, cols_k);
                        __syncthreads(); /* sv is staged again */
                    }
                    if (cols_v > 0) {
                        stage_rows(sv, dO + q0 * p.dout.ld, p.dout.ld, nq, c0, cols_v);
                        __syncthreads();
                        accumulate(acc_v, sp, sv, nq, cols_v);
                    }
                }
            }
        }
        const float one[RW] = {1.f, 1.f, 1.f, 1.f};
        if (cols_k > 0) store_rows((T *)rows_of(p.dk, b, hk) + key0 * p.dk.ld, p.dk.ld, keys, c0, cols_k, acc_k, one);
        if (cols_v > 0) store_rows((T *)rows_of(p.dv, b, hk) + key0 * p.dv.ld, p.dv.ld, keys, c0, cols_v, acc_v, one);
        __syncthreads(); /* sv and the statistics are written in the next pass */
    }
}
#endif
