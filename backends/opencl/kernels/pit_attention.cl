/*
 * pit_attention.cl - fused sparse attention over the block index of the
 * mask: O = softmax(scale Q K^T, where the mask is on) V.
 *
 * No score matrix is stored. A work-group takes BM query rows of one query
 * block (group g of the index) and walks the key blocks the group lists,
 * BK keys at a time: it scores them into local memory, updates each row's
 * running maximum and sum (online softmax, the same stored score feeding
 * both), and accumulates the weighted rows of V into BN output columns held
 * in local memory; wider outputs take further passes. Keys off the mask,
 * off the block or past L weigh nothing; a row with no key on the mask
 * (every group may be empty) is written as zeros.
 *
 * Defines: DT and MDT (pit_common.cl); BM query rows, BK keys at once and
 * BN output columns per pass; WG work-items. The index's micro-tile br x bc
 * (query rows x keys of a block) is an argument: any block size runs.
 *
 * Grid: (ceil(L / br) * ceil(br / BM) * WG, batch).
 */
#ifndef WG
#error "WG (work-items per group) must be defined"
#endif

#define ENTRY_FULL 0x40000000 /* PIT_ENTRY_FULL: a mark this kernel ignores */

/* Scores of the chunk's keys (row-major BM x BK) into S; -INFINITY where
 * the key weighs nothing. */
inline void score_chunk(__local float *S, __global const st_t *Q, long ldq,
                        __global const st_t *K, long ldk, __global const mword_t *Mk,
                        long ldm, int row0, int rows, int key0, int keys, int D, float scale,
                        int lid)
{
    for (int i = lid; i < BM * BK; i += WG) {
        const int r = i / BK, j = i % BK;
        const long row = row0 + r, key = key0 + j;
        float s = -INFINITY;
        if (r < rows && j < keys && mask_on(Mk, row * ldm + key)) {
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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_attention(__global const st_t *Q, long q_off, long ldq, long q_bs,
                   __global const st_t *K, long k_off, long ldk, long k_bs,
                   __global const st_t *V, long v_off, long ldv, long v_bs,
                   __global const mword_t *Mk, long m_off, long ldm, long m_bs,
                   __global st_t *O, long o_off, long ldo, long o_bs,
                   int L, int D, int DV, int br, int bc, float scale,
                   __global const int *counts, __global const int *entries, int gpb, int gbs,
                   int cap)
{
    __local float S[BM * BK];
    __local float acc[BM * BN];
    __local float row_max[BM], row_sum[BM], rescale[BM];
    const int lid = (int)get_local_id(0);
    const int parts = (br + BM - 1) / BM; /* work-groups of one query block */
    const int qb = (int)get_group_id(0) / parts, part = (int)get_group_id(0) % parts;
    const int b = (int)get_group_id(1);
    const int row0 = qb * br + part * BM;
    /* rows of this work-group inside the block and inside L (may be 0: no
     * early return, see pit_sddmm.cl) */
    const int rows = max(0, min(BM, min(br - part * BM, L - row0)));
    const int g = b * gbs + qb;
    const int n = min(counts[g], cap);
    __global const int *ent = entries + (long)g * cap;
    Q += q_off + (long)b * q_bs;
    K += k_off + (long)b * k_bs;
    V += v_off + (long)b * v_bs;
    Mk += m_off + (long)b * m_bs;
    O += o_off + (long)b * o_bs;
    const int chunks = (bc + BK - 1) / BK;

    for (int c0 = 0; c0 < DV; c0 += BN) {
        for (int r = lid; r < BM; r += WG) {
            row_max[r] = -INFINITY;
            row_sum[r] = 0.0f;
        }
        for (int i = lid; i < BM * BN; i += WG)
            acc[i] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = 0; e < n; ++e) {
            const int kb = ent[e] & ~ENTRY_FULL;
            for (int ch = 0; ch < chunks; ++ch) {
                const int key0 = kb * bc + ch * BK;
                const int keys = min(BK, min(bc - ch * BK, L - key0));
                score_chunk(S, Q, ldq, K, ldk, Mk, ldm, row0, rows, key0, keys, D, scale, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                weigh_chunk(S, row_max, row_sum, rescale, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                for (int i = lid; i < BM * BN; i += WG) {
                    const int r = i / BN, c = c0 + i % BN;
                    float a = acc[i] * rescale[r];
                    if (c < DV)
                        for (int j = 0; j < keys; ++j)
                            a += S[r * BK + j] * LOAD(V, (long)(key0 + j) * ldv + c);
                    acc[i] = a;
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        for (int i = lid; i < BM * BN; i += WG) {
            const int r = i / BN, c = c0 + i % BN;
            if (r < rows && c < DV) {
                const float l = row_sum[r];
                STORE(O, (long)(row0 + r) * ldo + c, l > 0.0f ? acc[i] / l : 0.0f);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* acc and the row state are reset next */
    }
}
