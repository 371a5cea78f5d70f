/*
 * pit_tile.cl - the dense tile the operator kernels of pit_sddmm.cl,
 * pit_moe.cl and pit_rows.cl share: SRead of gathered rows and a k-slab into
 * local memory, then a BM x BN x BK product. Prefixed (after pit_common.cl)
 * to those programs.
 *
 * Defines (one program per set):
 *   DT          storage dtype of the tensors (pit_common.cl)
 *   MDT         dtype code of the mask elements, read through mask_on()
 *               (pit_common.cl)
 *   BM, BN, BK  dense computation tile: BM x BN outputs, BK-deep slabs
 *   WG          work-items per work-group
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
