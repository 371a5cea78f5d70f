/*
 * pit_matmul.cl - the fused PIT matmul: SRead -> dense tile -> SWrite.
 *
 * C = A . B, A (M x K) sparse, B (K x N), row-major with row strides.
 * Defines:
 *   DT            storage dtype (pit_common.cl)
 *   AXIS          1: gather along K (micro-tile TM x TK, one row block per
 *                    work-group, C stored); 2: gather along M (one k-slab of
 *                    width TK per group, gathered rows, C accumulated)
 *   DENSE         1: the identity gather (no index): pit's own dense GEMM
 *   BM, BN, BK    dense computation tile
 *   RM, RN        register block of one work-item (BM % RM == BN % RN == 0)
 * Work-item (tx, ty) owns rows ty + i*TY and columns tx + j*TX of the tile so
 * neighbouring work-items read neighbouring local-memory words.
 */
#define TX (BN / RN)
#define TY (BM / RM)
#define WG (TX * TY)

#ifndef DENSE
#define DENSE 0
#endif

/* The dense tile: acc += As(BM x BK) . Bs(BK x BN), both k-major. */
inline void tile_product(__local const float *As, __local const float *Bs,
                         int tx, int ty, float acc[RM][RN])
{
    for (int kk = 0; kk < BK; ++kk) {
        float a[RM], b[RN];
        for (int i = 0; i < RM; ++i)
            a[i] = As[kk * BM + ty + i * TY];
        for (int j = 0; j < RN; ++j)
            b[j] = Bs[kk * BN + tx + j * TX];
        for (int i = 0; i < RM; ++i)
            for (int j = 0; j < RN; ++j)
                acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
}

/* f32 atomic add through a compare-and-swap loop on the word (OpenCL 1.2
 * has no float atomics). */
inline void atomic_add_f32(__global float *p, float v)
{
    volatile __global uint *u = (volatile __global uint *)p;
    uint old = *u, assumed;
    do {
        assumed = old;
        old = atomic_cmpxchg(u, assumed, as_uint(as_float(assumed) + v));
    } while (old != assumed);
}

/* SRead of B: rows kidx_or_k of B's k-slab, columns n0 .. n0+BN-1. */
inline void sread_b(__global const st_t *B, long ldb, int N, int n0, int lid,
                    __local const int *krow, __local float *Bs)
{
    for (int i = lid; i < BK * BN; i += WG) {
        const int kk = i / BN, n = i % BN;
        const int k = krow[kk];
        Bs[i] = (k >= 0 && n0 + n < N) ? LOAD(B, (long)k * ldb + (n0 + n)) : 0.0f;
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_matmul(__global const st_t *A, long a_off, long lda, long a_bs,
                __global const st_t *B, long b_off, long ldb, long b_bs,
                __global st_t *C, long c_off, long ldc, long c_bs,
                __global float *Acc, long acc_off, long ldacc, long acc_bs,
                int M, int N, int K,
                __global const int *counts, __global const int *entries,
                int gpb, int cap, int nchunks)
{
    __local float As[BK * BM];
    __local float Bs[BK * BN];
    __local int kidx[BK];
    const int lid = (int)get_local_id(0);
    const int tx = lid % TX, ty = lid / TX;
    const int n0 = (int)get_group_id(0) * BN;
    const int b = (int)get_group_id(2);
    float acc[RM][RN];
    for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j)
            acc[i][j] = 0.0f;

    A += a_off + (long)b * a_bs;
    B += b_off + (long)b * b_bs;

#if AXIS == 1
    /* ---- gather along K: this work-group computes rows m0.. of one row block */
    const int m0 = (int)get_group_id(1) * BM;
#if DENSE
    const int vk = K; /* the implicit full index: virtual k == real k */
#else
    const int g = b * gpb + m0 / TM;
    const int vk = min(counts[g], cap) * TK;
    __global const int *ent = entries + (long)g * cap;
#endif
    for (int v0 = 0; v0 < vk; v0 += BK) {
        /* SRead, step 1: the real k of each gathered column (-1: padding). */
        for (int i = lid; i < BK; i += WG) {
            const int v = v0 + i;
            int k = -1;
            if (v < vk) {
#if DENSE
                k = v;
#else
                k = ent[v / TK] * TK + v % TK;
                if (k >= K)
                    k = -1; /* partial micro-tile at the edge */
#endif
            }
            kidx[i] = k;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* SRead, step 2: those columns of A's rows and rows of B, densely. */
        for (int i = lid; i < BM * BK; i += WG) {
            const int m = i / BK, kk = i % BK;
            const int k = kidx[kk];
            As[kk * BM + m] = (k >= 0 && m0 + m < M) ? LOAD(A, (long)(m0 + m) * lda + k) : 0.0f;
        }
        sread_b(B, ldb, N, n0, lid, kidx, Bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_product(As, Bs, tx, ty, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* SWrite: a plain store of the whole tile (zeros for an empty group). */
    C += c_off + (long)b * c_bs;
    for (int i = 0; i < RM; ++i) {
        const int m = m0 + ty + i * TY;
        for (int j = 0; j < RN; ++j) {
            const int n = n0 + tx + j * TX;
            if (m < M && n < N)
                STORE(C, (long)m * ldc + n, acc[i][j]);
        }
    }
#elif AXIS == 2
    /* ---- gather along M: rows of one k-slab [gl*TK, gl*TK+TK) */
    __local int ridx[BM];
    const int gl = (int)get_group_id(1) / nchunks;
    const int chunk = (int)get_group_id(1) % nchunks;
    const int g = b * gpb + gl;
    const int vrows = min(counts[g], cap) * TM;
    const int r0 = chunk * BM;
    if (r0 >= vrows)
        return; /* the whole work-group leaves: no barrier is skipped */
    __global const int *ent = entries + (long)g * cap;
    for (int i = lid; i < BM; i += WG) {
        const int v = r0 + i;
        int r = -1;
        if (v < vrows) {
            r = ent[v / TM] * TM + v % TM;
            if (r >= M)
                r = -1;
        }
        ridx[i] = r;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int kbeg = gl * TK, kend = min(K, kbeg + TK);
    for (int k0 = kbeg; k0 < kend; k0 += BK) {
        for (int i = lid; i < BK; i += WG)
            kidx[i] = (k0 + i < kend) ? k0 + i : -1;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lid; i < BM * BK; i += WG) {
            const int m = i / BK, kk = i % BK;
            const int r = ridx[m], k = kidx[kk];
            As[kk * BM + m] = (r >= 0 && k >= 0) ? LOAD(A, (long)r * lda + k) : 0.0f;
        }
        sread_b(B, ldb, N, n0, lid, kidx, Bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_product(As, Bs, tx, ty, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* SWrite: accumulate into the scattered rows (other k-slabs add too). */
    Acc += acc_off + (long)b * acc_bs;
    for (int i = 0; i < RM; ++i) {
        const int r = ridx[ty + i * TY];
        for (int j = 0; j < RN; ++j) {
            const int n = n0 + tx + j * TX;
            if (r >= 0 && n < N)
                atomic_add_f32(Acc + (long)r * ldacc + n, acc[i][j]);
        }
    }
#else
#error "AXIS must be 1 (K) or 2 (M)"
#endif
}

/* Zeroes a strided rows x cols f32 view (the accumulation target of axis M). */
__kernel void pit_zero_f32(__global float *P, long off, long ld, long bs, int rows, int cols)
{
    const int n = (int)get_global_id(0), m = (int)get_global_id(1);
    const int b = (int)get_global_id(2);
    if (m < rows && n < cols)
        P[off + (long)b * bs + (long)m * ld + n] = 0.0f;
}

/* Stores the f32 accumulation buffer into C's dtype (f16/bf16 axis M). */
__kernel void pit_store_acc(__global const float *Acc, long acc_off, long ldacc, long acc_bs,
                            __global st_t *C, long c_off, long ldc, long c_bs,
                            int rows, int cols)
{
    const int n = (int)get_global_id(0), m = (int)get_global_id(1);
    const int b = (int)get_global_id(2);
    if (m < rows && n < cols)
        STORE(C, c_off + (long)b * c_bs + (long)m * ldc + n,
              Acc[acc_off + (long)b * acc_bs + (long)m * ldacc + n]);
}
