/*
 * pit_decode_mma.cu - the decode regime of the sparse matmul along K on
 * tensor cores: C = A.B with A a few row-blocks of tokens (16 or 32 rows
 * each) whose zeros are whole columns (activation sparsity), B the
 * weights, read from memory once. SRead gathers the rows of B that the
 * row-block's index names, and the same columns of A, into shared memory
 * with cp.async; the product runs on mma.sync m16n8k16 (sm_80+; the HIP
 * build emulates it). The call is bound by B's gathered bytes: each CTA
 * keeps STAGES stages of them in flight and several CTAs share an SM.
 *
 * CTA = (row-block, n-tile of BN columns, share of the gathered rows,
 * batch): grid x = row-blocks (adjacent CTAs read the same rows of B, so
 * L2 serves all but the first), y = n-tiles, z = batch x splits. A warp
 * owns BN / 8 columns and every row of the row-block.
 *
 * A stage is KC gathered positions:
 *   B's rows    [KC][BN], 16-byte chunks XOR-swizzled by row (ldmatrix.trans
 *               reads 8 rows of one chunk without bank conflicts); a row's
 *               512 contiguous bytes keep DRAM's bursts long;
 *   A's columns [MT][KC + 4] 32-bit words, each the aligned pair of
 *               elements around k (cp.async moves 4 bytes at least); the
 *               fragment takes the half k names;
 *   the entries [KC], copied with the copies of stage u - (STAGES - 1):
 *               they have landed when stage u's copies are issued, so no
 *               copy waits on a load of its index entry.
 * SWrite: C itself (one share), or the share's f32 slab (several). Then
 * the share that arrives last at its tile of C (a counter a tile, zeroed
 * before the launch) sums every share's slab into C in share order:
 * deterministic, and no second launch.
 *
 * Defines: PIT_DTYPE (f16 or bf16), MT (16 or 32: the micro-tile's rows).
 * The host launches it for B's rows 16-byte aligned with N a multiple of
 * 8, A's rows 4-byte aligned with K even (ops/matmul.c, decode_mma_fits).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"
#include "common/mma.cuh"
#include "common/shares.cuh"

#define BN PIT_DECODE_MMA_BN
#define THREADS PIT_DECODE_MMA_THREADS
#define KC PIT_DECODE_MMA_KC
#define STAGES PIT_DECODE_MMA_STAGES
#define AHEAD (STAGES - 1) /* stages whose copies are in flight while one computes */
#define WARPS (THREADS / PIT_WARP)
#define WN (BN / WARPS)    /* columns a warp */
#define NB (WN / 8)        /* n8 fragments a warp */
#define MB (MT / 16)       /* m16 fragments */
#define CHUNKS (BN / 8)    /* 16-byte chunks of a row of B */
#define XLD (KC + 4)       /* words of a row of A in a stage (+4: banks) */
#define ESTAGES 8          /* stages whose entries are kept: the one computing .. 2 AHEAD */

#if (KC != 16 && KC != 32) || (MT != 16 && MT != 32) || WN % 16 != 0 || THREADS % CHUNKS != 0 || \
    (MT * KC) % THREADS != 0 || ESTAGES < 2 * AHEAD + 1 || (ESTAGES & (ESTAGES - 1)) != 0
#error "pit_decode_mma: KC and MT are 16 or 32; a warp's columns are whole n16 steps; the copies divide among the threads"
#endif

#define B_STAGE_BYTES (KC * BN * 2)
#define X_STAGE_WORDS (MT * XLD)
/* read by the host (cuModuleGetGlobal) to size dynamic shared memory */
extern "C" __device__ const int pit_smem_bytes = STAGES * (B_STAGE_BYTES + X_STAGE_WORDS * 4) + ESTAGES * KC * 4;

struct share {
    const int *ent; /* the row-block's entries */
    int q0, q1;     /* its positions in them */
    int K;
};

/* The k of entry j of stage u (its raw entry in es), -1 past the share's
 * end (or a k >= K). */
PIT_DEV int stage_k(const share &sh, const int *es, int u, int j)
{
    if (sh.q0 + u * KC + j >= sh.q1) return -1;
    const int k = pit_entry_index(es[(u % ESTAGES) * KC + j]);
    return k < sh.K ? k : -1;
}

/* Warp 0 copies the raw entries of stage u (the rest of the share reads
 * from inside it: positions past its end copy its first entry, unused). */
PIT_DEV void copy_entries(const share &sh, int *es, int u, int tid)
{
    if (tid >= KC) return;
    const int q = sh.q0 + u * KC + tid;
    pit_copy4(es + (u % ESTAGES) * KC + tid, sh.ent + (q < sh.q1 ? q : sh.q0), q < sh.q1);
}

struct operands {
    const pit_u8 *a; /* row 0 of the row-block */
    const pit_u8 *b; /* row 0 of the batch's B */
    pit_i64 lda, ldb;
    int rows;        /* rows of the row-block inside A */
    int n0, N;
};

/* Stage u's copies (its rows of B at this CTA's columns, its columns of
 * A), and the entries of stage u + AHEAD: one commit group. */
PIT_DEV void issue_stage(const operands &o, const share &sh, pit_u8 *bs, pit_u32 *xs, int *es, int u, int nst,
                         int tid)
{
    if (u < nst) {
        pit_u8 *bst = bs + (u % STAGES) * B_STAGE_BYTES;
        const int c = tid % CHUNKS, col = o.n0 + c * 8;
#pragma unroll
        for (int i = 0; i < KC * CHUNKS / THREADS; ++i) {
            const int r = tid / CHUNKS + i * (THREADS / CHUNKS), k = stage_k(sh, es, u, r);
            const bool ok = k >= 0 && col < o.N;
            pit_copy16(bst + (r * CHUNKS + (c ^ (r & 7))) * 16, ok ? o.b + ((pit_i64)k * o.ldb + col) * 2 : o.b, ok);
        }
        pit_u32 *xst = xs + (u % STAGES) * X_STAGE_WORDS;
        const int j = tid % KC, k = stage_k(sh, es, u, j);
#pragma unroll
        for (int i = 0; i < MT * KC / THREADS; ++i) {
            const int m = tid / KC + i * (THREADS / KC);
            const bool ok = k >= 0 && m < o.rows;
            pit_copy4(xst + m * XLD + j, ok ? o.a + ((pit_i64)m * o.lda + (k & ~1)) * 2 : o.a, ok);
        }
    }
    if (u + AHEAD < nst) copy_entries(sh, es, u + AHEAD, tid);
    pit_copy_commit();
}

/* Two 16-bit elements from two words: the half of each that bits 0 and 1
 * of par name (1: the high half, k odd). */
PIT_DEV pit_u32 pick_pair(pit_u32 w0, pit_u32 w1, int par)
{
    const pit_u32 lo = (par & 1) ? w0 >> 16 : w0 & 0xffffu;
    const pit_u32 hi = (par & 2) ? w1 >> 16 : w1 & 0xffffu;
    return lo | hi << 16;
}

/* acc += A(stage s) . B(stage s) for the warp's columns. */
PIT_DEV void compute_stage(const share &sh, const pit_u8 *bs, const pit_u32 *xs, const int *es, int s, int warp,
                           int lane, float (&acc)[MB][NB][4])
{
    const pit_u8 *bst = bs + (s % STAGES) * B_STAGE_BYTES;
    const pit_u32 *xst = xs + (s % STAGES) * X_STAGE_WORDS;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int k16 = 0; k16 < KC / 16; ++k16) {
        const int j0 = k16 * 16 + 2 * t;
        /* parity of k at positions j0, j0+1 (bits 0, 1) and j0+8, j0+9 (2, 3);
         * a position past the share (k = -1) has a zero word */
        const int par = (stage_k(sh, es, s, j0) & 1) | (stage_k(sh, es, s, j0 + 1) & 1) << 1 |
                        (stage_k(sh, es, s, j0 + 8) & 1) << 2 | (stage_k(sh, es, s, j0 + 9) & 1) << 3;
        pit_u32 af[MB][4];
#pragma unroll
        for (int mb = 0; mb < MB; ++mb) {
            const pit_u32 *r0 = xst + (mb * 16 + g) * XLD + j0, *r1 = r0 + 8 * XLD;
            af[mb][0] = pick_pair(r0[0], r0[1], par);
            af[mb][1] = pick_pair(r1[0], r1[1], par);
            af[mb][2] = pick_pair(r0[8], r0[9], par >> 2);
            af[mb][3] = pick_pair(r1[8], r1[9], par >> 2);
        }
        pit_u32 bf[NB][2];
#pragma unroll
        for (int nb = 0; nb < NB; nb += 2) {
            /* matrices: rows 0-7 / 8-15 of the k16 step, chunks nb / nb+1 */
            const int i = lane >> 3, r = k16 * 16 + (i & 1) * 8 + (lane & 7);
            const int c = warp * (WN / 8) + nb + (i >> 1);
            pit_u32 x4[4];
            pit_ldmatrix_x4_trans(x4, bst + (r * CHUNKS + (c ^ (r & 7))) * 16);
            bf[nb][0] = x4[0];
            bf[nb][1] = x4[1];
            bf[nb + 1][0] = x4[2];
            bf[nb + 1][1] = x4[3];
        }
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) pit_mma_16816<PIT_DTYPE>(acc[mb][nb], af[mb], bf[nb]);
    }
}

/* The warp's results: into C (one share) or the share's f32 slab. */
PIT_DEV void store_partial(const pit_mm_args &p, const operands &o, int row0, const float (&acc)[MB][NB][4],
                           int splits, int batch, int warp, int lane)
{
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = mb * 16 + g + 8 * h;
            if (m >= o.rows) continue;
#pragma unroll
            for (int nb = 0; nb < NB; ++nb) {
                const int col = o.n0 + warp * WN + nb * 8 + 2 * t; /* N is even: col + 1 < N too */
                if (col >= o.N) continue;
                const float v0 = acc[mb][nb][2 * h], v1 = acc[mb][nb][2 * h + 1];
                if (splits > 1) {
                    float *dst = pit_share_slab(p, batch, (int)blockIdx.z % splits, splits) +
                                 (pit_i64)(row0 + m) * p.ldacc + col;
                    dst[0] = v0;
                    dst[1] = v1;
                } else {
                    T *dst = (T *)p.c + (pit_i64)batch * p.sc + (pit_i64)(row0 + m) * p.ldc + col;
                    dst[0] = pit_from_float<T>(v0);
                    dst[1] = pit_from_float<T>(v1);
                }
            }
        }
}

/* AMD's bounds take the work-group size alone */
#if defined(PIT_AMD)
#define DECODE_MMA_BOUNDS __launch_bounds__(THREADS)
#else
#define DECODE_MMA_BOUNDS __launch_bounds__(THREADS, PIT_DECODE_MMA_MIN_CTAS(MT))
#endif

PIT_KERNEL void DECODE_MMA_BOUNDS pit_decode_mma(const pit_mm_args p)
{
    extern __shared__ __align__(128) pit_u8 smem[];
    pit_u8 *bs = smem;
    pit_u32 *xs = (pit_u32 *)(smem + STAGES * B_STAGE_BYTES);
    int *es = (int *)(xs + STAGES * X_STAGE_WORDS);

    const int tid = threadIdx.x, lane = pit_lane(), warp = tid / PIT_WARP;
    const int splits = p.splits > 1 ? p.splits : 1;
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int row0 = blockIdx.x * MT;
    const int grp = batch * p.groups_per_batch + blockIdx.x;
    const int len = min(__ldg(p.counts + grp), p.capacity);
    share sh;
    sh.ent = p.entries + (pit_i64)grp * p.capacity;
    sh.q0 = (int)((pit_i64)split * len / splits);
    sh.q1 = (int)((pit_i64)(split + 1) * len / splits);
    sh.K = p.K;
    const int nst = (sh.q1 - sh.q0 + KC - 1) / KC;
    operands o;
    o.a = p.a + ((pit_i64)batch * p.sa + (pit_i64)row0 * p.lda) * 2;
    o.b = p.b + (pit_i64)batch * p.sb * 2;
    o.lda = p.lda;
    o.ldb = p.ldb;
    o.rows = min(MT, p.M - row0);
    o.n0 = blockIdx.y * BN;
    o.N = p.N;

    /* the entries of the first AHEAD stages, then their copies (each group
     * also brings the entries of the stage AHEAD after it) */
#pragma unroll
    for (int u = 0; u < AHEAD; ++u)
        if (u < nst) copy_entries(sh, es, u, tid);
    pit_copy_commit(); /* a wait covers committed copies only */
    pit_copy_wait<0>();
    __syncthreads();
#pragma unroll
    for (int u = 0; u < AHEAD; ++u) issue_stage(o, sh, bs, xs, es, u, nst, tid);

    float acc[MB][NB][4];
#pragma unroll
    for (int mb = 0; mb < MB; ++mb)
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mb][nb][e] = 0.f;

    for (int s = 0; s < nst; ++s) {
        pit_copy_wait<AHEAD - 1>(); /* stage s and the entries of s + AHEAD landed (this thread's) */
        __syncthreads();             /* everyone's; and stage s-1's buffers are free */
        issue_stage(o, sh, bs, xs, es, s + AHEAD, nst, tid);
        compute_stage(sh, bs, xs, es, s, warp, lane, acc);
    }
    pit_copy_wait<0>();
    store_partial(p, o, row0, acc, splits, batch, warp, lane);
    if (splits > 1)
        pit_sum_shares_last<THREADS>(p, (batch * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x, batch, splits, row0,
                                     o.rows, o.n0, BN);
}
