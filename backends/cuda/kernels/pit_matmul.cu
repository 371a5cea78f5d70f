/*
 * pit_matmul.cu - the fused PIT sparse matmul C = A.B with A dynamically
 * sparse: SRead (gather the non-zero micro-tiles named by the index into a
 * dense shared-memory tile) -> dense tile product -> SWrite.
 *
 *   AXIS 1 (K): CTA = (row-block g, n-tile, batch). BM == micro-tile rows.
 *       The group's entries name micro-tile columns; the gathered K sequence
 *       is their columns in index order (order does not matter: k is
 *       permutation invariant). B's matching rows are gathered alike.
 *       SWrite: plain store of BM x BN (zeros for an empty group).
 *       With p.splits > 1 (grid z = batch x splits) a CTA takes one share
 *       of the group's gathered chunks and stores an f32 partial tile; the
 *       convert pass sums the shares into C. Few row-blocks (decode: M of
 *       1 to 64) then still fill the device, and the call streams the
 *       gathered rows of B at memory speed.
 *   AXIS 2 (M): CTA = (n-tile, chunk of BM gathered rows, k-slab g over all
 *       batches). The slab is MT_COLS wide; gathered rows are the slab's
 *       non-zero row micro-tiles. SWrite: atomicAdd into an f32 target
 *       (C itself for f32, a scratch buffer converted afterwards otherwise).
 *
 * Two compute paths share one multi-stage pipeline:
 *   TC 1: 16-bit inputs on tensor cores (pit_mma_16816, f32 accumulation),
 *         shared tiles kept in the input type, padded rows (ldmatrix without
 *         bank conflicts), cp.async for vector-aligned parts.
 *   TC 0: CUDA cores, any dtype: shared tiles in f32 (A transposed), each
 *         thread a TM x TN register block.
 * Parts that cannot go through 16-byte cp.async (element gathers such as
 * the 32x1 micro-tile, unaligned rows, conversions) are staged through
 * registers: loaded before the tile product, stored to shared after it.
 *
 * Defines: PIT_DTYPE BM BN BK THREADS STAGES TC AXIS MT_ROWS MT_COLS
 *          A_VEC B_VEC (1: rows 16-byte aligned and lengths multiples of a
 *          16-byte vector, so whole vectors are valid or invalid together).
 *          A_COMP (axis K only, 1: A is the compacted copy written by
 *          pit_compact: row-block g's gathered columns lie densely at
 *          a + g*MT_ROWS*lda, q-th gathered column at q; B still gathered
 *          through the index). C_VEC (1: C / the f32 target has 16-byte
 *          aligned rows: SWrite stores or reduces vectors of 2 or 4).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/mma.cuh"
#include "common/index.cuh"
#include "common/elem.cuh"

#ifndef A_COMP
#define A_COMP 0
#endif
#ifndef C_VEC
#define C_VEC 0
#endif

constexpr int EL = (int)sizeof(T);
constexpr int VEC = 16 / EL;
constexpr int AV = A_VEC ? VEC : 1; /* elements per A load unit */
constexpr int BV = B_VEC ? VEC : 1; /* elements per B load unit */
constexpr bool A_ASYNC = TC && A_VEC;
constexpr bool B_ASYNC = B_VEC && (TC || PIT_DTYPE == PIT_DT_F32);
constexpr int STG = STAGES < 2 ? 2 : STAGES;

/* shared layouts (element strides) */
constexpr int TC_AS = BK + 8;  /* As[BM][BK+8] in T: 16-byte pad */
constexpr int TC_BS = BN + 8;  /* Bs[BK][BN+8] in T */
constexpr int CC_AS = BM + 4;  /* As[BK][BM+4] in float (transposed) */
constexpr int CC_BS = BN + 4;  /* Bs[BK][BN+4] in float */
constexpr int A_STAGE_BYTES = TC ? BM * TC_AS * EL : BK * CC_AS * 4;
constexpr int B_STAGE_BYTES = TC ? BK * TC_BS * EL : BK * CC_BS * 4;
constexpr int SMEM_BYTES = STG * (A_STAGE_BYTES + B_STAGE_BYTES);

/* read by the host (cuModuleGetGlobal) to size dynamic shared memory */
extern "C" __device__ const int pit_smem_bytes = SMEM_BYTES;

/* load units per thread and stage */
constexpr int A_UNITS = BM * BK / AV;
constexpr int B_UNITS = BK * BN / BV;
constexpr int A_ITERS = (A_UNITS + THREADS - 1) / THREADS;
constexpr int B_ITERS = (B_UNITS + THREADS - 1) / THREADS;

/* ---- CUDA-core register block: TM x TN per thread, as square as possible */
constexpr int CC_OUT = (BM * BN) / THREADS;
__host__ __device__ constexpr int cc_pick_tm()
{
    int best = 0, bestd = 1 << 30;
    for (int tm = 1; tm <= 16; tm *= 2) {
        if (BM % tm || CC_OUT % tm) continue;
        int tn = CC_OUT / tm;
        if (tn < 1 || BN % tn || (BM / tm) * (BN / tn) != THREADS) continue;
        int d = tm > tn ? tm - tn : tn - tm;
        if (d < bestd) { bestd = d; best = tm; }
    }
    return best;
}
constexpr int CC_TM = TC ? 1 : cc_pick_tm();
constexpr int CC_TN = TC ? 1 : CC_OUT / (CC_TM ? CC_TM : 1);

/* ---- tensor-core warp layout: WM x WN warps, warp tile WTM x WTN */
constexpr int WARPS = THREADS / PIT_WARP;
__host__ __device__ constexpr int tc_pick_wm()
{
    int best = 0, bestd = 1 << 30;
    for (int wm = 1; wm <= WARPS; ++wm) {
        if (WARPS % wm || BM % wm) continue;
        int wn = WARPS / wm;
        if (BN % wn) continue;
        int wtm = BM / wm, wtn = BN / wn;
        if (wtm % 16 || wtn % 16) continue;
        int d = wtm > wtn ? wtm - wtn : wtn - wtm;
        if (d < bestd) { bestd = d; best = wm; }
    }
    return best;
}
constexpr int TC_WM = TC ? tc_pick_wm() : 1;
constexpr int TC_WN = TC ? WARPS / (TC_WM ? TC_WM : 1) : 1;
constexpr int WTM = BM / (TC_WM ? TC_WM : 1);
constexpr int WTN = BN / (TC_WN ? TC_WN : 1);
constexpr int MI = TC ? WTM / 16 : 1;
constexpr int NI = TC ? WTN / 8 : 1;

static_assert(THREADS % PIT_WARP == 0, "THREADS must be whole warps");
static_assert(BK % AV == 0 && BN % BV == 0, "tile not a multiple of the vector");
static_assert(!TC || (BK % 16 == 0 && TC_WM > 0), "no tensor-core warp layout for this tile");
static_assert(TC || CC_TM > 0, "no CUDA-core thread layout for this tile");
static_assert(!TC || PIT_DTYPE != PIT_DT_F32, "tensor-core path takes 16-bit inputs");
static_assert(AXIS != 1 || BM == MT_ROWS, "axis K: BM must equal the micro-tile rows");

/* What a CTA gathers: its group's entries and the extent of the gathered
 * axis, plus the fixed coordinates of its tile. */
struct cta_gather {
    const T *a, *b;
    const int *ent;
    int n0;
    int len;     /* axis K: gathered k length; axis M: gathered rows */
    int row0;    /* axis K: first row of the row-block; axis M: first gathered row of the chunk */
    int kbase, kend; /* axis M: the slab's k range */
    int slab;    /* axis K split: the f32 partial slab written, -1: C itself */
};

/* SRead addressing: the global element behind gathered A position (r, q)
 * of chunk c, or nullptr when it lies outside (zero-filled). */
PIT_DEV const T *a_src(const pit_mm_args &p, const cta_gather &g, int r, int kq, int c)
{
#if AXIS == 1
    int q = c * BK + kq;
    int m = g.row0 + r;
    if (q >= g.len || m >= p.M) return nullptr;
    if (A_COMP) return g.a + (pit_i64)r * p.lda + q;
    int k = pit_entry_index(__ldg(g.ent + q / MT_COLS)) * MT_COLS + q % MT_COLS;
    if (k >= p.K) return nullptr;
    return g.a + (pit_i64)m * p.lda + k;
#else
    int P = g.row0 + r;
    int k = g.kbase + c * BK + kq;
    if (P >= g.len || k >= g.kend) return nullptr;
    int m = pit_entry_index(__ldg(g.ent + P / MT_ROWS)) * MT_ROWS + P % MT_ROWS;
    if (m >= p.M) return nullptr;
    return g.a + (pit_i64)m * p.lda + k;
#endif
}

PIT_DEV const T *b_src(const pit_mm_args &p, const cta_gather &g, int kk, int nn, int c)
{
    int n = g.n0 + nn;
    if (n >= p.N) return nullptr;
#if AXIS == 1
    int q = c * BK + kk;
    if (q >= g.len) return nullptr;
    int k = pit_entry_index(__ldg(g.ent + q / MT_COLS)) * MT_COLS + q % MT_COLS;
    if (k >= p.K) return nullptr;
#else
    int k = g.kbase + c * BK + kk;
    if (k >= g.kend) return nullptr;
#endif
    return g.b + (pit_i64)k * p.ldb + n;
}

/* Row of C behind tile row r (SWrite), -1 when outside. */
PIT_DEV int c_row(const pit_mm_args &p, const cta_gather &g, int r)
{
#if AXIS == 1
    int m = g.row0 + r;
    return m < p.M ? m : -1;
#else
    int P = g.row0 + r;
    if (P >= g.len) return -1;
    int m = pit_entry_index(__ldg(g.ent + P / MT_ROWS)) * MT_ROWS + P % MT_ROWS;
    return m < p.M ? m : -1;
#endif
}

template <int W> struct unit { T v[W]; };

template <int W> PIT_DEV void load_unit(unit<W> &u, const T *src)
{
    if (W == VEC && src) {
        *(uint4 *)u.v = __ldg((const uint4 *)src);
    } else {
#pragma unroll
        for (int j = 0; j < W; ++j) u.v[j] = src ? src[j] : pit_from_float<T>(0.f);
    }
}

/* register-staged parts of one stage */
struct staged {
    unit<AV> a[A_ASYNC ? 1 : A_ITERS];
    unit<BV> b[B_ASYNC ? 1 : B_ITERS];
};

PIT_DEV T *a_stage(pit_u8 *smem, int s) { return (T *)(smem + s * A_STAGE_BYTES); }
PIT_DEV T *b_stage(pit_u8 *smem, int s) { return (T *)(smem + STG * A_STAGE_BYTES + s * B_STAGE_BYTES); }

/* Issue the asynchronous part of chunk c and load its register part. */
PIT_DEV void issue_chunk(const pit_mm_args &p, const cta_gather &g, pit_u8 *smem, int s, int c, staged &st)
{
#pragma unroll
    for (int i = 0; i < A_ITERS; ++i) {
        int u = threadIdx.x + i * THREADS;
        if (A_UNITS % THREADS != 0 && u >= A_UNITS) break;
        int r = u / (BK / AV), kq = (u % (BK / AV)) * AV;
        const T *src = a_src(p, g, r, kq, c);
        if (A_ASYNC) {
            T *dst = a_stage(smem, s) + r * TC_AS + kq;
            pit_copy16(dst, src ? src : g.a, src != nullptr);
        } else {
            load_unit<AV>(st.a[A_ASYNC ? 0 : i], src);
        }
    }
#pragma unroll
    for (int i = 0; i < B_ITERS; ++i) {
        int u = threadIdx.x + i * THREADS;
        if (B_UNITS % THREADS != 0 && u >= B_UNITS) break;
        int kk = u / (BN / BV), nn = (u % (BN / BV)) * BV;
        const T *src = b_src(p, g, kk, nn, c);
        if (B_ASYNC) {
            pit_u8 *dst = (pit_u8 *)b_stage(smem, s) + (TC ? (kk * TC_BS + nn) * EL : (kk * CC_BS + nn) * 4);
            pit_copy16(dst, src ? src : g.b, src != nullptr);
        } else {
            load_unit<BV>(st.b[B_ASYNC ? 0 : i], src);
        }
    }
}

/* Store the register part of a chunk into stage s. */
PIT_DEV void store_chunk(pit_u8 *smem, int s, const staged &st)
{
    if (!A_ASYNC) {
#pragma unroll
        for (int i = 0; i < A_ITERS; ++i) {
            int u = threadIdx.x + i * THREADS;
            if (A_UNITS % THREADS != 0 && u >= A_UNITS) break;
            int r = u / (BK / AV), kq = (u % (BK / AV)) * AV;
#pragma unroll
            for (int j = 0; j < AV; ++j) {
                if (TC) a_stage(smem, s)[r * TC_AS + kq + j] = st.a[i].v[j];
                else ((float *)a_stage(smem, s))[(kq + j) * CC_AS + r] = pit_to_float(st.a[i].v[j]);
            }
        }
    }
    if (!B_ASYNC) {
#pragma unroll
        for (int i = 0; i < B_ITERS; ++i) {
            int u = threadIdx.x + i * THREADS;
            if (B_UNITS % THREADS != 0 && u >= B_UNITS) break;
            int kk = u / (BN / BV), nn = (u % (BN / BV)) * BV;
#pragma unroll
            for (int j = 0; j < BV; ++j) {
                if (TC) b_stage(smem, s)[kk * TC_BS + nn + j] = st.b[i].v[j];
                else ((float *)b_stage(smem, s))[kk * CC_BS + nn + j] = pit_to_float(st.b[i].v[j]);
            }
        }
    }
}

/* ---- dense tile products on one stage */
struct accum {
    float v[TC ? MI : CC_TM][TC ? NI * 4 : CC_TN];
};

PIT_DEV void tile_product_tc(const pit_u8 *smem, int s, accum &acc)
{
#if TC
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    const int wm0 = (warp / TC_WN) * WTM, wn0 = (warp % TC_WN) * WTN;
    const T *As = a_stage((pit_u8 *)smem, s);
    const T *Bs = b_stage((pit_u8 *)smem, s);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        pit_u32 af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            pit_ldmatrix_x4(af[mi], As + (wm0 + mi * 16 + (lane & 15)) * TC_AS + kk + (lane >> 4) * 8);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
            pit_u32 r[4];
            int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
            int n = wn0 + nj * 16 + (lane >> 4) * 8;
            pit_ldmatrix_x4_trans(r, Bs + k * TC_BS + n);
            bf[2 * nj][0] = r[0]; bf[2 * nj][1] = r[1];
            bf[2 * nj + 1][0] = r[2]; bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
                pit_mma_16816<PIT_DTYPE>(&acc.v[mi][ni * 4], af[mi], bf[ni]);
    }
#else
    (void)smem; (void)s; (void)acc;
#endif
}

/* CUDA-core columns of thread column tc: groups of 4 consecutive columns
 * spaced BN*4/CC_TN apart (LDS.128 without bank conflicts, float4 SWrite) */
PIT_DEV int cc_col(int tc, int j)
{
    if (CC_TN % 4 == 0) return (j / 4) * (BN * 4 / CC_TN) + tc * 4 + (j % 4);
    return tc * CC_TN + j;
}

PIT_DEV void tile_product_cc(const pit_u8 *smem, int s, accum &acc)
{
#if !TC
    const int tr = threadIdx.x / (BN / CC_TN), tc = threadIdx.x % (BN / CC_TN);
    const float *As = (const float *)a_stage((pit_u8 *)smem, s) + tr * CC_TM;
    const float *Bs = (const float *)b_stage((pit_u8 *)smem, s);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a[CC_TM], b[CC_TN];
#pragma unroll
        for (int i = 0; i < CC_TM; ++i) a[i] = As[k * CC_AS + i];
#pragma unroll
        for (int j = 0; j < CC_TN; ++j) b[j] = Bs[k * CC_BS + cc_col(tc, j)];
#pragma unroll
        for (int i = 0; i < CC_TM; ++i)
#pragma unroll
            for (int j = 0; j < CC_TN; ++j) acc.v[i][j] = fmaf(a[i], b[j], acc.v[i][j]);
    }
#else
    (void)smem; (void)s; (void)acc;
#endif
}

/* ---- SWrite */
/* f32 reductions of 2 or 4 consecutive values: one vector red on sm_90 */
template <int W> PIT_DEV void red_vec(float *p, const float *v)
{
#if !defined(PIT_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (W == 4) {
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]),
                     "f"(v[3])
                     : "memory");
        return;
    }
    if (W == 2) {
        asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v[0]), "f"(v[1]) : "memory");
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < W; ++j) pit_atomic_addf(p + j, v[j]);
}

/* the 16 bits of a 16-bit T converted from f (only used when EL == 2) */
PIT_DEV pit_u32 bits16(float f)
{
    T x = pit_from_float<T>(f);
    return (pit_u32)(*(const pit_u16 *)&x);
}

/* W consecutive values of row m from column n: one vector when C_VEC and
 * all W columns are inside, else element by element */
template <int W> PIT_DEV void swrite_vec(const pit_mm_args &p, const cta_gather &g, int batch, int m, int n,
                                         const float *v)
{
    if (m < 0 || n >= p.N) return;
#if AXIS == 1
    if (g.slab >= 0) { /* split K: a plain f32 partial, summed by the convert pass */
        float *w = p.acc + (pit_i64)g.slab * p.sacc + (pit_i64)m * p.ldacc + n;
        if (W == 2 && n + 2 <= p.N) { *(float2 *)w = make_float2(v[0], v[1]); return; }
        if (W == 4 && n + 4 <= p.N) { *(float4 *)w = make_float4(v[0], v[1], v[2], v[3]); return; }
#pragma unroll
        for (int j = 0; j < W; ++j)
            if (n + j < p.N) w[j] = v[j];
        return;
    }
    T *c = (T *)p.c + (pit_i64)batch * p.sc + (pit_i64)m * p.ldc + n;
    if (C_VEC && n + W <= p.N) {
        if (W == 4 && EL == 4) {
            *(float4 *)c = make_float4(v[0], v[1], v[2], v[3]);
            return;
        }
        if (W == 2 && EL == 2) {
            *(pit_u32 *)c = bits16(v[0]) | (bits16(v[1]) << 16);
            return;
        }
        if (W == 4 && EL == 2) {
            *(uint2 *)c = make_uint2(bits16(v[0]) | (bits16(v[1]) << 16), bits16(v[2]) | (bits16(v[3]) << 16));
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < W; ++j)
        if (n + j < p.N) c[j] = pit_from_float<T>(v[j]);
#else
    float *c = p.acc + (pit_i64)batch * p.sacc + (pit_i64)m * p.ldacc + n;
    if (C_VEC && n + W <= p.N && (W == 2 || W == 4)) {
        red_vec<W>(c, v);
        return;
    }
#pragma unroll
    for (int j = 0; j < W; ++j)
        if (n + j < p.N) pit_atomic_addf(c + j, v[j]);
#endif
}

PIT_DEV void swrite(const pit_mm_args &p, const cta_gather &g, int batch, const accum &acc)
{
#if TC
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    const int wm0 = (warp / TC_WN) * WTM, wn0 = (warp % TC_WN) * WTN;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int m = c_row(p, g, wm0 + mi * 16 + (lane >> 2) + h * 8);
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                int n = g.n0 + wn0 + ni * 8 + (lane & 3) * 2;
                swrite_vec<2>(p, g, batch, m, n, &acc.v[mi][ni * 4 + h * 2]);
            }
        }
    }
#else
    const int tr = threadIdx.x / (BN / CC_TN), tc = threadIdx.x % (BN / CC_TN);
    constexpr int W = CC_TN % 4 == 0 ? 4 : 1;
#pragma unroll
    for (int i = 0; i < CC_TM; ++i) {
        int m = c_row(p, g, tr * CC_TM + i);
#pragma unroll
        for (int j = 0; j < CC_TN; j += W) swrite_vec<W>(p, g, batch, m, g.n0 + cc_col(tc, j), &acc.v[i][j]);
    }
#endif
}

/* ---- the kernel: multi-stage pipeline over the gathered chunks */
PIT_KERNEL void __launch_bounds__(THREADS)
pit_matmul(const pit_mm_args p)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    cta_gather g;
    int batch, c0 = 0, nchunks;
    g.slab = -1;
#if AXIS == 1
    /* row-blocks vary fastest: the CTAs resident together share n-tiles, so
     * the B columns they gather (all rows, a few n-tiles) stay in L2 */
    const int rb = blockIdx.x;
    g.n0 = blockIdx.y * BN;
    const int splits = p.splits > 1 ? p.splits : 1;
    batch = blockIdx.z / splits;
    const int grp = batch * p.groups_per_batch + rb;
    const int count = __ldg(p.counts + grp); /* read on the device: no host read-back */
    g.len = count * MT_COLS;
    g.row0 = rb * MT_ROWS;
    g.kbase = 0;
    g.kend = p.K;
    /* split K (few row-blocks, e.g. decode): CTA z covers chunks [c0, c0 +
     * nchunks) of its row-block and writes an f32 partial slab, also when
     * its range is empty, so the sum needs no zeroing */
    const int all = (g.len + BK - 1) / BK, split = blockIdx.z % splits;
    c0 = (int)((pit_i64)split * all / splits);
    nchunks = (int)((pit_i64)(split + 1) * all / splits) - c0;
    if (splits > 1) g.slab = blockIdx.z;
#else
    g.n0 = blockIdx.x * BN;
    const int grp = blockIdx.z;
    batch = grp / p.groups_per_batch;
    const int slab = grp % p.groups_per_batch;
    const int count = __ldg(p.counts + grp);
    g.len = count * MT_ROWS;
    g.row0 = blockIdx.y * BM;
    if (g.row0 >= g.len) return; /* worst-case grid: nothing for this CTA */
    g.kbase = slab * MT_COLS;
    g.kend = min(g.kbase + MT_COLS, p.K);
    nchunks = (g.kend - g.kbase + BK - 1) / BK;
#endif
    g.ent = p.entries + (pit_i64)grp * p.capacity;
    g.a = (const T *)p.a + (pit_i64)batch * p.sa;
#if AXIS == 1
    if (A_COMP) g.a += (pit_i64)rb * MT_ROWS * p.lda;
#endif
    g.b = (const T *)p.b + (pit_i64)batch * p.sb;

    accum acc;
#pragma unroll
    for (int i = 0; i < (TC ? MI : CC_TM); ++i)
#pragma unroll
        for (int j = 0; j < (TC ? NI * 4 : CC_TN); ++j) acc.v[i][j] = 0.f;

    staged st;
#pragma unroll
    for (int s = 0; s < STG - 1; ++s) {
        if (s < nchunks) {
            issue_chunk(p, g, smem, s, c0 + s, st);
            store_chunk(smem, s, st);
        }
        pit_copy_commit();
    }
    for (int c = 0; c < nchunks; ++c) {
        pit_copy_wait<STG - 2>();
        __syncthreads();
        const int nxt = c + STG - 1;
        if (nxt < nchunks) issue_chunk(p, g, smem, nxt % STG, c0 + nxt, st);
        pit_copy_commit();
        if (TC) tile_product_tc(smem, c % STG, acc);
        else tile_product_cc(smem, c % STG, acc);
        if (nxt < nchunks) store_chunk(smem, nxt % STG, st);
    }
    swrite(p, g, batch, acc);
}
