/*
 * pit_attention.cl - fused attention: O = softmax(scale Q K^T over the
 * allowed keys) V for every batch and query head, and optionally the
 * log-sum-exp of each row (core/backend.h, pit_attention_desc).
 *
 * No score matrix is stored. A work-group takes BM query rows of one query
 * block of one (batch, head) and walks its keys BK at a time: the key blocks
 * the index lists for the block (when there is an index), else every key;
 * either way only the keys inside the causal bound and window of its rows.
 * It scores them into local memory, updates each row's running maximum and
 * sum (online softmax, the same stored score feeding both), and accumulates
 * the weighted rows of V into BN output columns held in local memory; wider
 * outputs take further passes. A key is allowed when the window bounds,
 * measured from the diagonal aligned to the end of the keys (key i + Lk - Lq
 * is "at" query i), and the element mask (when there is one) allow it; a
 * row with no allowed key is written as zeros (lse -inf).
 *
 * Query head h reads the keys and values of head h / group (grouped-query
 * attention). Every tensor comes as element offset and strides of batch,
 * head and row (columns contiguous); a stride of 0 shares the mask.
 *
 * Defines: DT and MDT (pit_common.cl); BM query rows, BK keys at once and
 * BN output columns per pass; WG work-items. The block br x bc (query rows x
 * keys) is an argument: any block size runs.
 *
 * Grid: (ceil(Lq / br) * ceil(br / BM) * WG, batch * heads).
 */
#ifndef WG
#error "WG (work-items per group) must be defined"
#endif

#define ENTRY_FULL 0x40000000 /* PIT_ENTRY_FULL: a mark this kernel ignores */

/* flags */
#define ATT_MASK 1  /* an element mask */
#define ATT_LSE 2   /* write the log-sum-exp */
#define ATT_INDEX 4 /* walk the listed key blocks only */

/* What decides whether key `key` counts for query `row`. */
typedef struct att_rule {
    long diag, wl, wr; /* Lk - Lq; window bounds, -1 none */
    int use_mask;
} att_rule;

inline int key_allowed(const att_rule *u, __global const mword_t *Mk, long ldm, long row,
                       long key)
{
    if (u->wl >= 0 && key < row + u->diag - u->wl)
        return 0;
    if (u->wr >= 0 && key > row + u->diag + u->wr)
        return 0;
    return !u->use_mask || mask_on(Mk, row * ldm + key);
}

/* Scores of the chunk's keys (row-major BM x BK) into S; -INFINITY where
 * the key weighs nothing. */
inline void score_chunk(__local float *S, __global const st_t *Q, long ldq,
                        __global const st_t *K, long ldk, __global const mword_t *Mk, long ldm,
                        const att_rule *u, long row0, int rows, long key0, int keys, int D,
                        float scale, int lid)
{
    for (int i = lid; i < BM * BK; i += WG) {
        const int r = i / BK, j = i % BK;
        const long row = row0 + r, key = key0 + j;
        float s = -INFINITY;
        if (r < rows && j < keys && key_allowed(u, Mk, ldm, row, key)) {
            float dot = 0.0f;
            for (int k = 0; k < D; ++k)
                dot += LOAD(Q, row * ldq + k) * LOAD(K, key * ldk + k);
            s = scale * dot;
        }
        S[i] = s;
    }
}

/* Online softmax step of each row: the new maximum, the factor that
 * rescales what was accumulated under the old one, and the chunk's scores
 * turned into weights exp(s - max) (0 for a key that weighs nothing). */
inline void weigh_chunk(__local float *S, __local float *row_max, __local float *row_sum,
                        __local float *rescale, int lid)
{
    for (int r = lid; r < BM; r += WG) {
        float m = row_max[r];
        for (int j = 0; j < BK; ++j)
            m = fmax(m, S[r * BK + j]);
        const float f = m == -INFINITY ? 1.0f : exp(row_max[r] - m);
        float sum = 0.0f;
        for (int j = 0; j < BK; ++j) {
            const float s = S[r * BK + j];
            const float p = s == -INFINITY ? 0.0f : exp(s - m);
            S[r * BK + j] = p;
            sum += p;
        }
        row_sum[r] = row_sum[r] * f + sum;
        row_max[r] = m;
        rescale[r] = f;
    }
}

/* The weighted rows of V of one chunk into the output columns c0.. */
inline void accumulate_chunk(__local float *acc, __local const float *S,
                             __local const float *rescale, __global const st_t *V, long ldv,
                             long key0, int keys, int c0, int DV, int lid)
{
    for (int i = lid; i < BM * BN; i += WG) {
        const int r = i / BN, c = c0 + i % BN;
        float a = acc[i] * rescale[r];
        if (c < DV)
            for (int j = 0; j < keys; ++j)
                a += S[r * BK + j] * LOAD(V, (key0 + j) * ldv + c);
        acc[i] = a;
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_attention(__global const st_t *Q, long q_off, long q_sb, long q_sh, long ldq,
                   __global const st_t *K, long k_off, long k_sb, long k_sh, long ldk,
                   __global const st_t *V, long v_off, long v_sb, long v_sh, long ldv,
                   __global const mword_t *Mk, long m_off, long m_sb, long m_sh, long ldm,
                   __global st_t *O, long o_off, long o_sb, long o_sh, long ldo,
                   __global float *lse, long l_off, long l_sb, long l_sh,
                   int Lq, int Lk, int D, int DV, int Hq, int group, int br, int bc,
                   float scale, long wl, long wr, int flags,
                   __global const int *counts, __global const int *entries, long i_sb,
                   long i_sh, int cap)
{
    __local float S[BM * BK];
    __local float acc[BM * BN];
    __local float row_max[BM], row_sum[BM], rescale[BM];
    const int lid = (int)get_local_id(0);
    const int parts = (br + BM - 1) / BM; /* work-groups of one query block */
    const int qb = (int)get_group_id(0) / parts, part = (int)get_group_id(0) % parts;
    const int z = (int)get_group_id(1), b = z / Hq, h = z % Hq, hk = h / group;
    const long row0 = (long)qb * br + (long)part * BM;
    /* rows of this work-group inside the block and inside Lq (may be 0: no
     * early return, see pit_sddmm.cl) */
    const int rows = (int)max(0L, min((long)BM, min((long)br - (long)part * BM, Lq - row0)));
    const att_rule u = {(long)Lk - Lq, wl, wr, (flags & ATT_MASK) != 0};
    /* the keys the bounds leave to any of the rows: [lo, hi) */
    long lo = wl >= 0 ? row0 + u.diag - wl : 0;
    long hi = wr >= 0 ? row0 + rows - 1 + u.diag + wr + 1 : (long)Lk;
    lo = max(lo, 0L);
    hi = rows > 0 ? min(hi, (long)Lk) : lo;
    const int use_index = (flags & ATT_INDEX) != 0;
    const long g = use_index ? b * i_sb + h * i_sh + qb : 0;
    const int n = use_index ? min(counts[g], cap) : 1;
    __global const int *ent = entries + g * cap;
    Q += q_off + b * q_sb + h * q_sh;
    K += k_off + b * k_sb + hk * k_sh;
    V += v_off + b * v_sb + hk * v_sh;
    Mk += m_off + b * m_sb + h * m_sh;
    O += o_off + b * o_sb + h * o_sh;
    const int passes = max(1, (DV + BN - 1) / BN); /* one at least: the lse */

    for (int pass = 0; pass < passes; ++pass) {
        const int c0 = pass * BN;
        for (int r = lid; r < BM; r += WG) {
            row_max[r] = -INFINITY;
            row_sum[r] = 0.0f;
        }
        for (int i = lid; i < BM * BN; i += WG)
            acc[i] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = 0; e < n; ++e) {
            long k_lo = lo, k_hi = hi; /* without an index, every key in the bounds */
            if (use_index) {
                const long kb = ent[e] & ~ENTRY_FULL;
                k_lo = max(lo, kb * bc);
                k_hi = min(hi, min(kb * bc + bc, (long)Lk));
            }
            for (long key0 = k_lo; key0 < k_hi; key0 += BK) {
                const int keys = (int)min((long)BK, k_hi - key0);
                score_chunk(S, Q, ldq, K, ldk, Mk, ldm, &u, row0, rows, key0, keys, D, scale,
                            lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                weigh_chunk(S, row_max, row_sum, rescale, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                accumulate_chunk(acc, S, rescale, V, ldv, key0, keys, c0, DV, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        for (int i = lid; i < BM * BN; i += WG) {
            const int r = i / BN, c = c0 + i % BN;
            if (r < rows && c < DV) {
                const float l = row_sum[r];
                STORE(O, (row0 + r) * ldo + c, l > 0.0f ? acc[i] / l : 0.0f);
            }
        }
        if (pass == 0 && (flags & ATT_LSE))
            for (int r = lid; r < rows; r += WG) {
                const float l = row_sum[r];
                lse[l_off + b * l_sb + h * l_sh + row0 + r] =
                    l > 0.0f ? row_max[r] + log(l) : -INFINITY;
            }
        barrier(CLK_LOCAL_MEM_FENCE); /* acc and the row state are reset next */
    }
}
