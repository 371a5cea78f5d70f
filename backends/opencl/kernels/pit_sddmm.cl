/*
 * pit_sddmm.cl - sampled dense-dense matmul on the blocks an index lists,
 * through the dense tile of pit_tile.cl.
 *
 * One work-group per (index slot, batch x row-block): the group of batch b's
 * row-block is g = b * gbs + row-block (gbs = gpb, or 0 for an index shared by
 * every batch); the slot's entry is a column block. The block's rows of A and rows of B (B is
 * [N, K]: B^T's columns) are read into local memory (SRead), the BM x BN dot
 * products computed, and the block written where the mask is on (SWrite; C
 * was zeroed before). BM x BN is the output micro-tile.
 */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_sddmm(__global const st_t *A, long a_off, long lda, long a_bs,
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
