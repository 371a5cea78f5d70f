/*
 * pit_decode.cu - the decode regime of the sparse matmul along K: C = A.B
 * with A of a few rows (1 to 4, one row-block) and B the weights, read
 * from memory. SRead streams only the rows of B that A's non-zero column
 * micro-tiles (one column wide) name; the call is bound by those bytes, so
 * the kernel keeps many 16-byte row loads in flight and does the small
 * product on CUDA cores in registers (no shared-memory staging, no tensor
 * cores: at M <= 4 they would idle; from 16 rows the FMAs bound it and the
 * tile kernel wins).
 *
 * The kernel finds A's non-zero columns itself (no index, no detection
 * launch before it): each CTA lists the non-zero columns of its share of
 * K, ascending, with A's values down the rows, in shared memory, then
 * streams those rows of B. A column is non-zero when any row of the call
 * has a non-zero there: the index of column micro-tiles (Tm >= M rows, 1
 * wide) it replaces names the same columns.
 *
 * CTA = (n-tile of 32 x VEC columns, share of K, batch): grid x = n-tiles,
 * y unused (1), z = batch x splits. A share takes K in blocks of SPREAD
 * columns, every splits-th block, so a run of zeros spreads over all
 * shares. Each lane owns VEC consecutive columns; the WK warps of a CTA
 * take interleaved groups of U listed rows, then sum their partials in
 * shared memory. SWrite: C itself (one share); with CLUSTER (sm_90) the
 * shares of an n-tile are one thread-block cluster, and each CTA sums its
 * part of the tile over every share's shared memory into C (nothing
 * through global memory, no counters); else each share stores its f32
 * slab and the share that arrives last at its n-tile sums the slabs into C
 * (common/shares.cuh). One launch either way.
 *
 * Defines: PIT_DTYPE MROWS (1 or 4: rows of A the registers hold; the
 *          call's M is at most MROWS) B_VEC (1: B's rows 16-byte aligned and
 *          N a multiple of the vector) THREADS MIN_CTAS (launch bounds: the
 *          host plans one wave of MIN_CTAS an SM, cuda_kernels.c) CLUSTER
 *          (1: the shares of an n-tile form a cluster of `splits` CTAs).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/elem.cuh"
#include "common/shares.cuh"
#if CLUSTER
#include "common/sm90.cuh"
#endif

constexpr int EL = (int)sizeof(T);
constexpr int VEC = 16 / EL;
constexpr int WK = THREADS / PIT_WARP; /* warps splitting the rows of a share */
constexpr int COLS = PIT_WARP * VEC;    /* columns of a CTA */
constexpr int U = 4;                    /* rows of B in flight per lane */
constexpr int ROUNDS = 4;               /* ballots of the whole CTA a list takes */
constexpr int LIST = ROUNDS * THREADS;  /* positions of the share listed at a time */
constexpr int SPREAD = 8;               /* columns of a block of the share */
constexpr int LIST_BYTES = LIST * 4 * (1 + MROWS), RED_BYTES = WK * MROWS * COLS * 4;

/* read by the host (cuModuleGetGlobal) to size dynamic shared memory: the
 * list, and later the warps' partials in the same bytes */
extern "C" __device__ const int pit_smem_bytes = LIST_BYTES > RED_BYTES ? LIST_BYTES : RED_BYTES;

struct brow { T v[VEC]; };

/* Row k of B at columns n.. (zeros outside, k < 0: no row) */
PIT_DEV void load_row(brow &r, const T *b, pit_i64 ldb, int k, int n, int N)
{
    if (k >= 0 && B_VEC && n + VEC <= N) {
        *(uint4 *)r.v = __ldg((const uint4 *)(b + (pit_i64)k * ldb + n));
        return;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j)
        r.v[j] = k >= 0 && n + j < N ? b[(pit_i64)k * ldb + n + j] : pit_from_float<T>(0.f);
}

/* The CTA's share of K: blocks of SPREAD columns, share s taking blocks
 * s, s + splits, s + 2 splits, ... so that a run of zeros (or non-zeros)
 * spreads over every share. Position j of the share (ascending in k). */
PIT_DEV int share_column(int j, int split, int splits)
{
    return ((j / SPREAD) * splits + split) * SPREAD + j % SPREAD;
}

/* Element (m, k) of A as raw bits, 0 past the call's rows or K. */
PIT_DEV pit_u32 a_bits(const T *a, pit_i64 lda, int rows, int K, int m, int k)
{
    if (m >= rows || k >= K) return 0u;
#if PIT_DTYPE == PIT_DT_F32
    return __float_as_uint(__ldg(a + (pit_i64)m * lda + k));
#else
    return __ldg((const pit_u16 *)a + (pit_i64)m * lda + k);
#endif
}

PIT_DEV bool bits_nonzero(pit_u32 w)
{
#if PIT_DTYPE == PIT_DT_F32
    return pit_bits_nonzero32(w);
#else
    return pit_bits_nonzero16(w);
#endif
}

PIT_DEV float bits_value(pit_u32 w)
{
#if PIT_DTYPE == PIT_DT_F32
    return __uint_as_float(w);
#else
    T v;
    *(pit_u16 *)&v = (pit_u16)w;
    return pit_to_float(v);
#endif
}

/* Lists the non-zero columns among positions [j0, j0 + LIST) of the share
 * (of `span` positions), ascending: their k in ks and A's values down the
 * rows in xs. A column is non-zero when any of the call's rows has a
 * non-zero there (the column micro-tile of the index this replaces): its
 * bits but the sign, as detection reads them. Every round's elements are
 * loaded first, so the list waits on memory once. Returns how many. */
PIT_DEV int list_nonzero_columns(const T *a, pit_i64 lda, int rows, int K, int j0, int span, int split, int splits,
                                 int *ks, float (*xs)[MROWS], int *warp_counts)
{
    const int lane = pit_lane(), warp = threadIdx.x / PIT_WARP;
    const pit_u32 below = (1u << lane) - 1u;
    const int rounds = min(ROUNDS, (span - j0 + THREADS - 1) / THREADS);
    int k[ROUNDS];
    pit_u32 w[ROUNDS][MROWS];
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        k[r] = r < rounds ? share_column(j0 + r * THREADS + (int)threadIdx.x, split, splits) : K;
#pragma unroll
        for (int m = 0; m < MROWS; ++m) w[r][m] = a_bits(a, lda, rows, K, m, k[r]);
    }
    int base = 0;
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        if (r >= rounds) break;
        bool on = false;
#pragma unroll
        for (int m = 0; m < MROWS; ++m) on = on || bits_nonzero(w[r][m]);
        const pit_u32 ballot = pit_ballot(on);
        if (lane == 0) warp_counts[warp] = pit_popc(ballot);
        __syncthreads();
        int pos = base + pit_popc(ballot & below), all = base;
        for (int v = 0; v < WK; ++v) {
            pos += v < warp ? warp_counts[v] : 0;
            all += warp_counts[v];
        }
        if (on) {
            ks[pos] = k[r];
#pragma unroll
            for (int m = 0; m < MROWS; ++m) xs[pos][m] = bits_value(w[r][m]);
        }
        __syncthreads(); /* warp_counts is rewritten by the next round */
        base = all;
    }
    return base;
}

/* This lane's VEC columns times the listed rows of B: warps take
 * interleaved groups of U listed rows. */
PIT_DEV void multiply_listed(const T *b, pit_i64 ldb, int n, int N, const int *ks, const float (*xs)[MROWS], int len,
                             int warp, float (&acc)[MROWS][VEC])
{
    for (int q = warp * U; q < len; q += WK * U) {
        int k[U];
        brow r[U];
#pragma unroll
        for (int u = 0; u < U; ++u) k[u] = q + u < len ? ks[q + u] : -1;
#pragma unroll
        for (int u = 0; u < U; ++u) load_row(r[u], b, ldb, k[u], n, N);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (k[u] < 0) continue;
#pragma unroll
            for (int m = 0; m < MROWS; ++m) {
                const float x = xs[q + u][m];
#pragma unroll
                for (int j = 0; j < VEC; ++j) acc[m][j] = fmaf(x, pit_to_float(r[u].v[j]), acc[m][j]);
            }
        }
    }
}

/* AMD's bounds take the work-group size alone */
#if defined(PIT_AMD)
#define DECODE_BOUNDS __launch_bounds__(THREADS)
#else
#define DECODE_BOUNDS __launch_bounds__(THREADS, MIN_CTAS)
#endif

PIT_KERNEL void DECODE_BOUNDS pit_decode(const pit_mm_args p)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    __shared__ int warp_counts[WK];
    int *ks = (int *)smem;                                  /* [LIST] */
    float(*xs)[MROWS] = (float(*)[MROWS])(smem + LIST * 4); /* [LIST][MROWS] */
    float *red = (float *)smem;                             /* [WK][MROWS][COLS], after the list */
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    const int splits = p.splits > 1 ? p.splits : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const T *a = (const T *)p.a + (pit_i64)batch * p.sa;
    const T *b = (const T *)p.b + (pit_i64)batch * p.sb;
    const int n = blockIdx.x * COLS + lane * VEC;
    const int rows = min(p.M, MROWS);
    /* positions of the share: every SPREAD-block b with b % splits == split */
    const int blocks = (p.K + SPREAD - 1) / SPREAD;
    const int span = (blocks - split + splits - 1) / splits * SPREAD;

    float acc[MROWS][VEC];
#pragma unroll
    for (int m = 0; m < MROWS; ++m)
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[m][j] = 0.f;

    for (int j0 = 0; j0 < span; j0 += LIST) {
        const int len = list_nonzero_columns(a, p.lda, rows, p.K, j0, span, split, splits, ks, xs, warp_counts);
        multiply_listed(b, p.ldb, n, p.N, ks, xs, len, warp, acc);
        __syncthreads(); /* the list is rewritten next, or becomes red */
    }

    /* the warps' partials summed in shared memory, then one store a column */
#pragma unroll
    for (int m = 0; m < MROWS; ++m)
#pragma unroll
        for (int j = 0; j < VEC; ++j) red[(warp * MROWS + m) * COLS + lane * VEC + j] = acc[m][j];
    __syncthreads();
#if CLUSTER
    __shared__ float tile[MROWS * COLS]; /* the CTA's sums, read by the cluster */
    const bool shared_sums = splits > 1;
#else
    const bool shared_sums = false;
#endif
    float *slab = splits > 1 && !shared_sums ? pit_share_slab(p, batch, split, splits) : nullptr;
    for (int i = threadIdx.x; i < rows * COLS; i += THREADS) {
        const int m = i / COLS, c = i % COLS, col = blockIdx.x * COLS + c;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < WK; ++w) s += red[(w * MROWS + m) * COLS + c];
#if CLUSTER
        tile[i] = s;
#endif
        if (shared_sums || col >= p.N) continue;
        if (slab) slab[(pit_i64)m * p.ldacc + col] = s;
        else ((T *)p.c)[(pit_i64)batch * p.sc + (pit_i64)m * p.ldc + col] = pit_from_float<T>(s);
    }
#if CLUSTER
    if (shared_sums) {
        /* share `split` sums its part of the tile over the cluster's CTAs,
         * in rank order (deterministic) */
        pit_cluster_sync();
        const int part = (rows * COLS + splits - 1) / splits;
        for (int i = split * part + threadIdx.x; i < min((split + 1) * part, rows * COLS); i += THREADS) {
            const int m = i / COLS, col = blockIdx.x * COLS + i % COLS;
            float s = 0.f;
            for (int r = 0; r < splits; ++r) s += pit_cluster_ld_f32(pit_smem_addr(tile + i), (pit_u32)r);
            if (col < p.N) ((T *)p.c)[(pit_i64)batch * p.sc + (pit_i64)m * p.ldc + col] = pit_from_float<T>(s);
        }
        pit_cluster_sync(); /* no CTA leaves while another reads its sums */
        return;
    }
#endif
    if (slab)
        pit_sum_shares_last<THREADS>(p, batch * gridDim.x + blockIdx.x, batch, splits, 0, rows, blockIdx.x * COLS,
                                     COLS);
}
