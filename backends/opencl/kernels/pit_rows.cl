/*
 * pit_rows.cl - row-sparse matmul through the dense tile of pit_tile.cl.
 *
 * Group b lists the non-zero rows of A's batch b; chunk of BM of them per
 * work-group: SRead of those rows, dense tile with B, SWrite to the same rows
 * of C. Grid (ceil(N/BN)*WG, nchunks, batch).
 */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_matmul_rows(__global const st_t *A, long a_off, long lda, long a_bs,
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
    const int active = chunk * BM < n; /* no early return, see pit_sddmm.cl */
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
