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
 * CTA = (n-tile of 32 x VEC columns, share of the gathered rows, batch):
 * grid x = n-tiles, y unused (1), z = batch x splits. Each lane owns VEC
 * consecutive columns; the WK warps of a CTA take interleaved groups of U
 * gathered rows of the CTA's share, then sum their partials in shared
 * memory. SWrite: C itself (one share) or the share's f32 slab (several,
 * summed in order by the convert pass, as for the tile kernel's split K).
 *
 * Defines: PIT_DTYPE MROWS (1 or 4: rows of A the registers hold; the
 *          call's M is at most MROWS) B_VEC (1: B's rows 16-byte aligned and
 *          N a multiple of the vector) THREADS MIN_CTAS (launch bounds: the
 *          host plans one wave of MIN_CTAS an SM, cuda_kernels.c).
 * The index is the row-block's: entries name columns k of A (micro-tile
 * 1 column wide, Tm >= M rows, group 0 of each batch).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"

constexpr int EL = (int)sizeof(T);
constexpr int VEC = 16 / EL;
constexpr int WK = THREADS / PIT_WARP; /* warps splitting the rows of a share */
constexpr int COLS = PIT_WARP * VEC;    /* columns of a CTA */
constexpr int U = 4;                    /* rows of B in flight per lane */

/* read by the host (cuModuleGetGlobal) to size dynamic shared memory */
extern "C" __device__ const int pit_smem_bytes = WK * MROWS * COLS * 4;

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

/* The k behind gathered position q of the share, -1 past its end or K. */
PIT_DEV int gathered_k(const int *ent, int q, int q1, int K)
{
    if (q >= q1) return -1;
    int k = pit_entry_index(__ldg(ent + q));
    return k < K ? k : -1;
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
    const int lane = pit_lane(), warp = threadIdx.x / PIT_WARP;
    const int splits = p.splits > 1 ? p.splits : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int grp = batch * p.groups_per_batch;
    const int len = min(__ldg(p.counts + grp), p.capacity); /* gathered columns */
    const int q0 = (int)((pit_i64)split * len / splits), q1 = (int)((pit_i64)(split + 1) * len / splits);
    const int *ent = p.entries + (pit_i64)grp * p.capacity;
    const T *a = (const T *)p.a + (pit_i64)batch * p.sa;
    const T *b = (const T *)p.b + (pit_i64)batch * p.sb;
    const int n = blockIdx.x * COLS + lane * VEC;
    const int rows = min(p.M, MROWS);

    float acc[MROWS][VEC];
#pragma unroll
    for (int m = 0; m < MROWS; ++m)
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[m][j] = 0.f;

    for (int q = q0 + warp * U; q < q1; q += WK * U) {
        int k[U];
        brow r[U];
#pragma unroll
        for (int u = 0; u < U; ++u) k[u] = gathered_k(ent, q + u, q1, p.K);
#pragma unroll
        for (int u = 0; u < U; ++u) load_row(r[u], b, p.ldb, k[u], n, p.N);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (k[u] < 0) continue;
#pragma unroll
            for (int m = 0; m < MROWS; ++m) {
                if (m >= rows) break;
                const float x = pit_to_float(a[(pit_i64)m * p.lda + k[u]]);
#pragma unroll
                for (int j = 0; j < VEC; ++j) acc[m][j] = fmaf(x, pit_to_float(r[u].v[j]), acc[m][j]);
            }
        }
    }

    /* the warps' partials summed in shared memory, then one store a column */
    float *red = (float *)smem; /* [WK][MROWS][COLS] */
#pragma unroll
    for (int m = 0; m < MROWS; ++m)
#pragma unroll
        for (int j = 0; j < VEC; ++j) red[(warp * MROWS + m) * COLS + lane * VEC + j] = acc[m][j];
    __syncthreads();
    for (int i = threadIdx.x; i < rows * COLS; i += THREADS) {
        const int m = i / COLS, c = i % COLS, col = blockIdx.x * COLS + c;
        if (col >= p.N) continue;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < WK; ++w) s += red[(w * MROWS + m) * COLS + c];
        if (splits > 1) p.acc[(pit_i64)blockIdx.z * p.sacc + (pit_i64)m * p.ldacc + col] = s;
        else ((T *)p.c)[(pit_i64)batch * p.sc + (pit_i64)m * p.ldc + col] = pit_from_float<T>(s);
    }
}
