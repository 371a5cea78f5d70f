/*
 * pit_gmm_cc.cu - the gathered GEMM on CUDA cores (pit_op_gmm_cc), every
 * MoE mode and matmul_rows of any dtype, and the row mark of a storing
 * gathered GEMM (pit_op_mark). One per compilation: PIT_KERNEL_OP_GMM_CC
 * (defines PIT_DTYPE, ACC, MODE) or PIT_KERNEL_OP_MARK.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/elem.cuh"

extern "C" __device__ const int pit_smem_bytes = 0;

#if defined(PIT_KERNEL_OP_GMM_CC)
PIT_DEV float gate_of(const pit_gmm_args &p, int slot)
{
    if (!p.gates) return 1.f;
    return __ldg(p.gates + (pit_i64)(slot / p.kdiv) * p.ldg + slot % p.kdiv);
}

/* CUDA cores, any dtype and layout. 64x64 tile, BK 16, 256 threads with
 * 4x4 outputs each. Grid: x = n-tile, y = row chunk (mode 2: m-tile of H),
 * z = group. Slot s reads A's row tok = s / adiv and the output's (or D's)
 * row orow = s / cdiv. MODE 0: out[orow] = A[tok] . B[g] (forward,
 * matmul_rows); 1: out[orow] = A[tok] . B[g]^T (MoE dX); 2: out[g] = sum_s
 * gate(s) A[tok]^T . D[orow] (MoE dW, gathered along K, every tile
 * written); 3: acc[slot] += sum_n (A[tok] . B[g])[n] D[orow][n] (MoE
 * dgates). */
constexpr int BM = 64, BN = 64, BK = 16;

/* A(r, k) of the tile (r: gathered row, or H index in mode 2) */
PIT_DEV float gmm_a(const pit_gmm_args &p, const T *A, const int *tok, int r, int k, int m_lim)
{
#if MODE == 2
    int t = tok[k];
    return t >= 0 && r < m_lim ? pit_to_float(A[(pit_i64)t * p.lda + r]) : 0.f;
#else
    int t = tok[r];
    return t >= 0 && k < p.K ? pit_to_float(A[(pit_i64)t * p.lda + k]) : 0.f;
#endif
    (void)m_lim;
}

PIT_DEV float gmm_b(const pit_gmm_args &p, const T *B, const int *orow, const float *gt, int k, int n)
{
    if (n >= p.N) return 0.f;
#if MODE == 2
    int t = orow[k];
    return t >= 0 ? gt[k] * pit_to_float(((const T *)p.d)[(pit_i64)t * p.ldd + n]) : 0.f;
#elif MODE == 1
    return k < p.K ? pit_to_float(B[(pit_i64)n * p.ldb + k]) : 0.f;
#else
    return k < p.K ? pit_to_float(B[(pit_i64)k * p.ldb + n]) : 0.f;
#endif
}

PIT_KERNEL void __launch_bounds__(256) pit_op_gmm_cc(const pit_gmm_args p)
{
    __shared__ float As[BK][BM + 4], Bs[BK][BN + 4];
    __shared__ int tok[BM > BK ? BM : BK], orow[BM > BK ? BM : BK];
#if MODE == 3
    __shared__ int slot[BM];
#endif
    __shared__ float gt[BM > BK ? BM : BK];
    const int grp = blockIdx.z, n0 = blockIdx.x * BN;
    const int count = min(__ldg(p.counts + grp), p.capacity);
    const int *ent = p.entries + (pit_i64)grp * p.capacity;
    const T *A = (const T *)p.a + grp * p.sa, *B = (const T *)p.b + grp * p.sb;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#if MODE == 2
    const int m0 = blockIdx.y * BM, m_lim = p.M;
    const int nk = (count + BK - 1) / BK;
#else
    const int row0 = blockIdx.y * BM, m_lim = 0;
    if (row0 >= count) return;
    if (threadIdx.x < BM) {
        int P = row0 + threadIdx.x, s = P < count ? __ldg(ent + P) : -1;
#if MODE == 3
        slot[threadIdx.x] = s;
#endif
        tok[threadIdx.x] = s < 0 ? -1 : s / p.adiv;
        orow[threadIdx.x] = s < 0 ? -1 : s / p.cdiv;
        gt[threadIdx.x] = s < 0 ? 0.f : gate_of(p, s);
    }
    __syncthreads();
    const int nk = (p.K + BK - 1) / BK;
#endif
    for (int c = 0; c < nk; ++c) {
#if MODE == 2
        __syncthreads();
        if (threadIdx.x < BK) {
            int P = c * BK + threadIdx.x, s = P < count ? __ldg(ent + P) : -1;
            tok[threadIdx.x] = s < 0 ? -1 : s / p.adiv;
            orow[threadIdx.x] = s < 0 ? -1 : s / p.cdiv;
            gt[threadIdx.x] = s < 0 ? 0.f : gate_of(p, s);
        }
        __syncthreads();
        for (int u = threadIdx.x; u < BK * BM; u += 256) {
            int kk = u / BM, r = u % BM;
            As[kk][r] = gmm_a(p, A, tok, m0 + r, kk, m_lim);
        }
        for (int u = threadIdx.x; u < BK * BN; u += 256) {
            int kk = u / BN, nn = u % BN;
            Bs[kk][nn] = gmm_b(p, B, orow, gt, kk, n0 + nn);
        }
#else
        for (int u = threadIdx.x; u < BK * BM; u += 256) {
            int r = u / BK, kk = u % BK;
            As[kk][r] = gmm_a(p, A, tok, r, c * BK + kk, m_lim);
        }
        for (int u = threadIdx.x; u < BK * BN; u += 256) {
            int kk = MODE == 1 ? u % BK : u / BN, nn = MODE == 1 ? u / BK : u % BN;
            Bs[kk][nn] = gmm_b(p, B, orow, gt, c * BK + kk, n0 + nn);
        }
#endif
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#if MODE == 2
    T *C = (T *)p.c + grp * p.sc;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < m_lim && n < p.N) C[(pit_i64)m * p.ldc + n] = pit_from_float<T>(acc[i][j]);
        }
#elif MODE == 3
    const T *D = (const T *)p.d;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int r = ty * 4 + i, t = orow[r];
        float dot = 0.f;
        if (t >= 0)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int n = n0 + tx * 4 + j;
                if (n < p.N) dot = fmaf(acc[i][j], pit_to_float(D[(pit_i64)t * p.ldd + n]), dot);
            }
        /* the 16 threads of a row are one half-warp */
#pragma unroll
        for (int d = 1; d < 16; d *= 2) dot += shfl_xor_f(dot, d);
        if (tx == 0 && t >= 0) {
            int s = slot[r];
            pit_atomic_addf(p.acc + (pit_i64)(s / p.kdiv) * p.ldacc + s % p.kdiv, dot);
        }
    }
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int r = ty * 4 + i, t = orow[r];
        if (t < 0) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int n = n0 + tx * 4 + j;
            if (n >= p.N) continue;
            float v = gt[r] * acc[i][j];
#if ACC
            pit_atomic_addf(p.acc + grp * p.sacc + (pit_i64)t * p.ldacc + n, v);
#else
            ((T *)p.c)[grp * p.sc + (pit_i64)t * p.ldc + n] = pit_from_float<T>(v);
#endif
        }
    }
#endif
}
#endif

#if defined(PIT_KERNEL_OP_MARK)
/* mark[g * stride + slot / kdiv] = 0 for every listed slot of group g
 * (mark was filled with -1): the rows a storing GEMM writes, so that only
 * the others are zeroed first. grid: x = slots, y = group. */
PIT_KERNEL void __launch_bounds__(256) pit_op_mark(const pit_mark_args a)
{
    const int i = blockIdx.x * 256 + threadIdx.x, g = blockIdx.y;
    if (i >= min(__ldg(a.counts + g), a.capacity)) return;
    const int slot = __ldg(a.entries + (pit_i64)g * a.capacity + i);
    a.mark[g * a.stride + slot / a.kdiv] = 0;
}
#endif
