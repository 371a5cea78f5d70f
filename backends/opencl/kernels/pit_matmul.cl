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

/* SRead: the gathered rows (ridx) and k-columns (kidx) of A, and the same
 * k-rows of B, into dense local tiles; -1 entries are padding (zeros). One
 * loop fills both tiles: besides balancing the work, it keeps a single loop
 * between two barriers (PoCL 3.1 miscompiles two consecutive loops there when
 * one of them is empty for some work-items). */
inline void sread(__global const st_t *A, long lda, __global const st_t *B, long ldb,
                  int N, int n0, int lid, __local const int *ridx,
                  __local const int *kidx, __local float *As, __local float *Bs)
{
    for (int i = lid; i < BM * BK + BK * BN; i += WG) {
        if (i < BM * BK) {
            const int m = i / BK, kk = i % BK;
            const int r = ridx[m], k = kidx[kk];
            As[kk * BM + m] = (r >= 0 && k >= 0) ? LOAD(A, (long)r * lda + k) : 0.0f;
        } else {
            const int j = i - BM * BK;
            const int kk = j / BN, n = j % BN;
            const int k = kidx[kk];
            Bs[j] = (k >= 0 && n0 + n < N) ? LOAD(B, (long)k * ldb + (n0 + n)) : 0.0f;
        }
    }
}

/*
 * Grid: (n-tiles * WG, dim1, batch).
 *   AXIS 1: dim1 = row tiles of BM rows (BM divides TM, so a tile lies in one
 *           row block g = m0 / TM); virtual k v covers entry v / TK, column
 *           v % TK of that micro-tile. SWrite stores every element.
 *   AXIS 2: dim1 = k-slabs x nchunks; chunk c gathers virtual rows
 *           [c*BM, c*BM+BM) of the slab's entry list (entry v / TM, row v % TM).
 *           SWrite adds into Acc (f32, zeroed by the host).
 */
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
    __local int ridx[BM];
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

    /* ---- which rows and which (virtual) k range this work-group gathers */
#if AXIS == 1
    const int m0 = (int)get_group_id(1) * BM;
#if DENSE
    const int vk = K; /* the implicit full index: virtual k == real k */
#else
    const int g = b * gpb + m0 / TM;
    const int vk = min(counts[g], cap) * TK;
    __global const int *ent = entries + (long)g * cap;
#endif
    for (int i = lid; i < BM; i += WG)
        ridx[i] = (m0 + i < M) ? m0 + i : -1;
#elif AXIS == 2
    const int gl = (int)get_group_id(1) / nchunks;
    const int chunk = (int)get_group_id(1) % nchunks;
    const int g = b * gpb + gl;
    const int vrows = min(counts[g], cap) * TM;
    const int r0 = chunk * BM;
    /* An idle work-group runs an empty product instead of returning early:
     * PoCL 3.1 miscompiles id-dependent branches after an early return that
     * precedes a barrier. Its rows are all -1, so it stores nothing. */
    __global const int *ent = entries + (long)g * cap;
    const int kbeg = gl * TK;
    const int vk = r0 >= vrows ? 0 : min(K, kbeg + TK) - kbeg;
    for (int i = lid; i < BM; i += WG) {
        const int v = r0 + i;
        int r = -1;
        if (v < vrows) {
            r = ent[v / TM] * TM + v % TM;
            if (r >= M)
                r = -1; /* partial micro-tile at the edge */
        }
        ridx[i] = r;
    }
#else
#error "AXIS must be 1 (K) or 2 (M)"
#endif
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int v0 = 0; v0 < vk; v0 += BK) {
        /* SRead, step 1: the real k of each gathered column (-1: padding). */
        for (int i = lid; i < BK; i += WG) {
            const int v = v0 + i;
            int k = -1;
            if (v < vk) {
#if AXIS == 2
                k = kbeg + v;
#elif DENSE
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
        /* SRead, step 2: the dense tiles. */
        sread(A, lda, B, ldb, N, n0, lid, ridx, kidx, As, Bs);
        barrier(CLK_LOCAL_MEM_FENCE);
        tile_product(As, Bs, tx, ty, acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#if AXIS == 1
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
#else
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
