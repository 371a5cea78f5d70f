/*
 * pit_gmm_tc.cu - the gathered GEMM on tensor cores (pit_op_gmm_tc): the
 * 16-bit MoE forward and matmul_rows. For group g (expert, or batch for
 * matmul_rows) and its listed slots s (rows of the output), out[s / cdiv]
 * (+)= gate(s) * A[s / adiv] . B[g]: the MoE FFN's slot rows (adiv or cdiv
 * 1) as well as token rows (kdiv). SRead gathers A's rows, SWrite
 * scatters with the gate, a plain store of T (a token's k results are
 * stored as slot rows and summed apart: gmm.c). GLU 1 (SwiGLU) or 2
 * (GeGLU), warp-specialised only: the expert FFN's first product with its activation in the
 * epilogue. B is then [K, 2N] (the gate's N columns, then the up's): a
 * tile multiplies BN / 2 gate columns and the same up columns and stores
 * act(gate) * up, BN / 2 columns of the [., N] output. BT 1,
 * warp-specialised only: B^T, the MoE backward's mode 1 (dY . W^T): the
 * tile's B is BN rows of W [N, K] (K contiguous), loaded as one box and
 * read by wgmma K-major.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/mma.cuh"
#include "common/sm90.cuh"
#include "common/elem.cuh"
#include "common/act.cuh"

#ifndef GLU
#define GLU 0
#endif
#ifndef BT
#define BT 0
#endif

PIT_DEV float gate_of(const pit_gmm_args &p, int slot)
{
    if (!p.gates) return 1.f;
    return __ldg(p.gates + (pit_i64)(slot / p.kdiv) * p.ldg + slot % p.kdiv);
}

/* Tensor cores, 16-bit, rows 16-byte aligned, K and N multiples of 8.
 * Defines: BM BN BK STAGES, WS. Persistent CTAs walk the work list (from
 * pit_op_plan) x n-tiles in bands of p.band items, item fastest within a
 * band, so concurrent CTAs share a band's gathered A rows and a few
 * n-tiles of B in L2. Two main loops:
 *
 * WS, warp-specialised wgmma (sm_90a, tile 128 x {128, 256} x 64, 384
 * threads): warpgroup 0 only copies (A's gathered rows by cp.async, B by
 * the tensor copy engine, one thread's BN / 64 box loads a stage
 * completing on the stage's mbarrier) up to STAGES k-steps ahead;
 * warpgroups 1 and 2 only multiply, 64 rows x BN each with the
 * accumulators in registers, both operands read by the tensor cores from
 * shared memory under 128-byte swizzle (common/port.cuh): a full and an
 * empty barrier a stage instead of a CTA barrier a k-step, and the copies'
 * address math off the wgmma warps.
 *
 * mma.sync (sm_80+, 256 threads, every other tile): 2 x 4 warps, CUTLASS's
 * multistage loop: a warp's fragments are double-buffered in registers,
 * those of the next k-step (of the next stage too) are loaded while the
 * mma's of this one issue, and a stage's one barrier comes before its last
 * k-step: mma's rarely wait for their ldmatrix, and ptxas can interleave
 * the cp.async address math with the mma's. */
#if PIT_HAS_WGMMA && defined(WS) && WS && BM == 128 && BK == 64 && (BN == 128 || BN == 256)
#define GMM_WGMMA 1
#else
#define GMM_WGMMA 0
#endif
#if !defined(WS) || !GMM_WGMMA
#undef WS
#define WS 0
#endif
constexpr int THREADS = 256, WM = 2, WN = 4, WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8;
/* CT: the threads that copy (all of them, or warpgroup 0 under WS) */
constexpr int CT = WS ? 128 : THREADS;
constexpr int KS = BK / 16;
#if GMM_WGMMA
/* smem element offsets: A [BM][64] K-major, B [BN / 64][BK][64] N-major,
 * 16-byte chunk c of row r stored at chunk c ^ (r % 8) */
constexpr int A_ROW = BK, B_ROW = 64;
PIT_DEV int a_at(int r, int k) { return pit_swz128(r, k); }
PIT_DEV int b_at(int k, int n) { return (n >> 6) * (BK * 64) + pit_swz128(k, n & 63); }
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE_BYTES = STAGES * (A_STAGE + B_STAGE);
/* after the stages: the full and the empty barriers, one each a stage (8
 * bytes each), then the output tile's staging rows, padded 16 bytes so the
 * 8 rows of a warp's store hit different banks */
constexpr int C_ROW = BN * 2 + 16, C_AT = STAGE_BYTES + 8 * STAGES + 8 * STAGES;
constexpr int SMEM = C_AT + BM * C_ROW + 1024;
static_assert(!GLU || !BT, "the gated epilogue multiplies B, not B^T");
/* a stage's "full" barrier (its copies landed) and its "empty" one (its
 * wgmma's are done) */
PIT_DEV pit_u32 gmm_stage_bar(pit_u32 stages_addr, int s) { return stages_addr + STAGE_BYTES + 8 * s; }
PIT_DEV pit_u32 gmm_empty_bar(pit_u32 stages_addr, int s) { return stages_addr + STAGE_BYTES + 8 * (STAGES + s); }
#else
constexpr int A_ROW = BK + 8, B_ROW = BN + 8; /* padded rows: ldmatrix without bank conflicts */
PIT_DEV int a_at(int r, int k) { return r * A_ROW + k; }
PIT_DEV int b_at(int k, int n) { return k * B_ROW + n; }
constexpr int A_STAGE = BM * A_ROW * 2, B_STAGE = BK * B_ROW * 2, SMEM = STAGES * (A_STAGE + B_STAGE);
#endif
extern "C" __device__ const int pit_smem_bytes = SMEM;
static_assert(PIT_DTYPE != PIT_DT_F32 && WTM % 16 == 0 && WTN % 16 == 0 && BK % 16 == 0, "gmm tile");
static_assert(sizeof(T) == 2, "gmm element");
constexpr int A_UNITS = BM * BK / 8, B_UNITS = BK * BN / 8;
/* output columns a tile: BN, or the gated epilogue's BN / 2 */
constexpr int OUT_N = GLU ? BN / 2 : BN;
static_assert(A_UNITS % CT == 0 && B_UNITS % CT == 0, "gmm loads");

/* CTAs an SM should hold, so the registers stay within their share: 2 up
 * to 64 accumulators a thread (the default 128 x 128 tile: <= 128
 * registers), 3 for small tiles whose shared memory allows it (<= 80), 1
 * above (no bound). AMD's macro takes the thread count only. */
constexpr bool GMM_SMALL = MI * NI <= 8 && MI * 4 + NI * 2 <= 16 && 3 * (SMEM + BM * 8 + 1024) <= 228 * 1024;
constexpr int GMM_MINB = GMM_SMALL ? 3 : MI * NI <= 16 ? 2 : 1;
#if defined(PIT_AMD)
#define GMM_BOUNDS __launch_bounds__(THREADS)
#elif WS
#define GMM_BOUNDS __launch_bounds__(384, 1)
#else
#define GMM_BOUNDS __launch_bounds__(THREADS, GMM_MINB)
#endif

struct gmm_tile {
    int grp, row0, n0, count;
};

/* The copies of stage c into slot s (live false: zeros, no global read).
 * A thread's units of 8 elements are u = threadIdx.x + i * CT (the copying threads); where
 * CT is a multiple of a row's units (A: BK / 8, B: BN / 8), unit i is
 * unit 0 moved di = i * CT / (row's units) rows down (a multiple of 8,
 * so the swizzle of its row is unit 0's), and its address math is unit 0's
 * plus a constant. */
constexpr int A_PER = A_UNITS / CT; /* A units (rows) a thread copies */

PIT_DEV void gmm_issue(const pit_gmm_args &p, const gmm_tile &w, const int (&tok)[A_PER], pit_u8 *smem, int s, int c,
                       bool live)
{
    constexpr int AU = BK / 8, BU = BN / 8;
    constexpr bool BE = CT % BU == 0;
    static_assert(CT % AU == 0, "gmm: a thread's A units share their k");
    static_assert(!GMM_WGMMA || ((CT / AU) % 8 == 0 && (WS || (BE && (CT / BU) % 8 == 0))), "gmm swizzle");
    T *As = (T *)(smem + s * A_STAGE), *Bs = (T *)(smem + STAGES * A_STAGE + s * B_STAGE);
    const T *A = (const T *)p.a + w.grp * p.sa;
    const T *B = (const T *)p.b + w.grp * p.sb + (pit_i64)(c * BK) * p.ldb + w.n0;
    const int t = threadIdx.x, kleft = p.K - c * BK;
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
        const int di = i * (CT / AU), r = t / AU, kq = (t % AU) * 8;
        const bool ok = live && tok[i] >= 0 && kq < kleft;
        pit_copy16(As + a_at(r, kq) + di * A_ROW, ok ? A + (pit_i64)tok[i] * p.lda + c * BK + kq : A, ok);
    }
#if WS
    /* b_at's layout is the copy engine's 128-byte swizzle of 64 x BK boxes
     * (the swizzle follows the 1024-byte aligned shared address); rows past
     * K and columns past N arrive as zeros */
    (void)B;
    if (t == 0 && live) {
        const pit_u32 bar = gmm_stage_bar(pit_smem_addr(smem), s), dst = pit_smem_addr(Bs);
        pit_mbar_expect_tx(bar, B_STAGE);
        const int z = p.sb ? w.grp : 0;
        if (BT) { /* B^T: BN rows of W (the output's columns), BK of their columns */
            pit_tma_load_3d(dst, &p.map_b, bar, c * BK, w.n0, z);
            return;
        }
#pragma unroll
        for (int j = 0; j < BN / 64; ++j) {
            /* gated: the first half of the boxes are gate columns, the
             * second half the up columns N further */
            const int col = GLU && j >= BN / 128 ? p.N + w.n0 + (j - BN / 128) * 64 : w.n0 + j * 64;
            pit_tma_load_3d(dst + j * BK * 128, &p.map_b, bar, col, c * BK, z);
        }
    }
#else
#pragma unroll
    for (int i = 0; i < B_UNITS / CT; ++i) {
        const int u = BE ? t : t + i * CT, di = BE ? i * (CT / BU) : 0;
        const int kk = u / BU, nn = (u % BU) * 8;
        const bool ok = live && kk + di < kleft && w.n0 + nn < p.N;
        pit_copy16(Bs + b_at(kk, nn) + di * B_ROW, ok ? B + ((pit_i64)kk * p.ldb + nn) + (pit_i64)di * p.ldb : B, ok);
    }
#endif
}

/* The tile of work item `tile` (none past total: no rows). */
PIT_DEV gmm_tile gmm_tile_of(const pit_gmm_args &p, int tile, int total)
{
    gmm_tile w = {0, 0, 0, 0};
    if (tile >= total) return w;
    /* bands of p.band items (the last one shorter), item-fastest within */
    const int items = total / p.ntn, first = tile / (p.band * p.ntn) * p.band;
    const int in_band = min(p.band, items - first), at = tile - first * p.ntn;
    const int *e = p.list + 1 + 3 * (first + at % in_band);
    w.grp = __ldg(e);
    w.row0 = __ldg(e + 1);
    w.count = __ldg(e + 2);
    w.n0 = (at / in_band) * OUT_N;
    return w;
}

/* Row r of the tile: its slot in the group's list, -1 past its rows. */
PIT_DEV int gmm_slot(const pit_gmm_args &p, const gmm_tile &w, int r)
{
    const int P = w.row0 + r;
    return P < w.count ? __ldg(p.entries + (pit_i64)w.grp * p.capacity + P) : -1;
}

/* the tokens of the A rows this thread copies (see gmm_issue) */
PIT_DEV void gmm_tokens(const pit_gmm_args &p, const gmm_tile &w, int (&tok)[A_PER])
{
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
        const int slot = gmm_slot(p, w, threadIdx.x / (BK / 8) + i * (CT / (BK / 8)));
        tok[i] = slot < 0 ? -1 : slot / p.adiv;
    }
}

/* A warp's output rows: wm0 + 16 mi + lane / 4 + 8 h. Slots and gates load
 * apart, so a kernel can issue the gates' loads once the slots are in. */
template <int MI_> struct gmm_rows {
    int slot[MI_][2];
    float gate[MI_][2];
};
template <int MI_> PIT_DEV void gmm_rows_slots(const pit_gmm_args &p, const gmm_tile &w, int wm0, gmm_rows<MI_> &o)
{
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) o.slot[mi][h] = gmm_slot(p, w, wm0 + mi * 16 + (pit_lane() >> 2) + 8 * h);
}
template <int MI_> PIT_DEV void gmm_rows_gates(const pit_gmm_args &p, gmm_rows<MI_> &o)
{
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) o.gate[mi][h] = o.slot[mi][h] < 0 ? 0.f : gate_of(p, o.slot[mi][h]);
}

/* SWrite of a warp's accumulators (m16n8 layout, MI_ x NI_ blocks) of
 * rows `rows` from column wn0 of the tile. */
template <int MI_, int NI_>
PIT_DEV void gmm_swrite(const pit_gmm_args &p, const gmm_tile &w, const gmm_rows<MI_> &rows, int wn0,
                        const float (&acc)[MI_][NI_][4])
{
    const int lane = pit_lane();
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (rows.slot[mi][h] < 0) continue;
            const int tok = rows.slot[mi][h] / p.cdiv;
            const float gt = rows.gate[mi][h];
#pragma unroll
            for (int ni = 0; ni < NI_; ++ni) {
                const int n = w.n0 + wn0 + ni * 8 + (lane & 3) * 2;
                if (n >= p.N) continue;
                const float v0 = gt * acc[mi][ni][2 * h], v1 = gt * acc[mi][ni][2 * h + 1];
                T *dst = (T *)p.c + w.grp * p.sc + (pit_i64)tok * p.ldc + n;
                *(pit_u32 *)dst = pack2(v0, v1);
            }
        }
}

#if GMM_WGMMA
/* this warpgroup's wgmma's of the stage in slot s: 64 rows x BN, BK deep */
PIT_DEV void gmm_wgmma_stage(float (&acc)[1][BN / 8][4], pit_u32 sbase, int s, int wg)
{
    const pit_u32 a0 = sbase + s * A_STAGE + wg * 64 * BK * 2, b0 = sbase + STAGES * A_STAGE + s * B_STAGE;
    float(&d)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(acc);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        /* A: 8-row groups 1024 B apart, a k-step 32 B into the swizzled row;
         * B: 64-column chunks BK * 128 B apart, 8-row groups 1024 B apart */
        const pit_u64 da = pit_wgmma_desc(a0 + ks * 32, 16, 1024);
        /* B^T (BT): K-major rows of 64 elements, as A */
        const pit_u64 db = BT ? pit_wgmma_desc(b0 + ks * 32, 16, 1024)
                              : pit_wgmma_desc(b0 + ks * 16 * 128, BK * 128, 1024);
        pit_wgmma<PIT_DTYPE, BT ? 0 : 1>(d, da, db);
    }
}

/* Registers a thread: the copying warpgroup gives most of its share to the
 * multiplying ones (128 x 56 + 256 x 224 = 64512 of 65536; the copiers
 * spill below 56) */
constexpr int WS_COPY_REGS = 56, WS_MMA_REGS = 224, WS_MMA_WARPS = 8;

/* Warpgroup 0: the copies of every k-step of the CTA's tiles into the
 * stages in turn, each stage once the wgmma's of its last use are done
 * (its empty barrier). A thread's A copies arrive on the stage's full
 * barrier when they land; B's TMA bytes complete on it too. */
PIT_DEV void gmm_ws_copy(const pit_gmm_args &p, pit_u8 *smem, pit_u32 sbase, int total, int nk)
{
    int q = 0; /* k-step, counted over the CTA's tiles: stage q % STAGES */
    for (int item = blockIdx.x; item < total; item += gridDim.x) {
        const gmm_tile w = gmm_tile_of(p, item, total);
        int tok[A_PER];
        gmm_tokens(p, w, tok);
        for (int c = 0; c < nk; ++c, ++q) {
            const int s = q % STAGES;
            if (q >= STAGES) pit_mbar_wait(gmm_empty_bar(sbase, s), (pit_u32)(q / STAGES - 1) & 1u);
            gmm_issue(p, w, tok, smem, s, c, true);
            pit_copy_arrive(gmm_stage_bar(sbase, s));
        }
    }
}

/* A multiplying warpgroup's k-steps of one tile (MUL false: a warpgroup
 * past the tile's rows, whose wgmma's would multiply zeros, only keeps the
 * barriers' count). A stage goes back to the copiers as soon as its own
 * wgmma's are done (wait_group 0), so the copies run STAGES - 1 k-steps
 * ahead; waiting a k-step later (wait_group 1, two k-steps' wgmma's in
 * flight) left them one, and the multiplying warps waited for their data
 * (the other warpgroup's wgmma's keep the tensor cores busy across this
 * one's wait). Two loops, not a branch among the wgmma's, which would
 * serialise them. */
template <bool MUL>
PIT_DEV void gmm_ws_ksteps(float (&acc)[1][BN / 8][4], pit_u32 sbase, int &q, int nk, int cw, bool first_lane)
{
    for (int c = 0; c < nk; ++c, ++q) {
        pit_mbar_wait(gmm_stage_bar(sbase, q % STAGES), (pit_u32)(q / STAGES) & 1u);
        if (MUL) {
            pit_fence_async_smem(); /* the copies' writes, seen through the barrier, before wgmma reads them */
            pit_wgmma_fence();
            gmm_wgmma_stage(acc, sbase, q % STAGES, cw);
            pit_wgmma_commit();
            pit_wgmma_wait<0>();
        }
        if (first_lane) pit_mbar_arrive(gmm_empty_bar(sbase, q % STAGES));
    }
}

/* SWrite through shared memory: the warp's 16 rows, gated and packed, go to
 * its part of the staging tile at shared address part, then each row leaves
 * as one bulk copy (its BN outputs are contiguous in the token's row) while
 * the next tile's k-steps run. The part is written again once the warp's
 * previous copies have read it. */
PIT_DEV void gmm_swrite_bulk(const pit_gmm_args &p, const gmm_tile &w, const gmm_rows<1> &rows, pit_u32 part,
                             const float (&acc)[1][BN / 8][4])
{
    const int lane = pit_lane();
    pit_bulk_wait<true>();
    __syncwarp();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const pit_u32 row = part + ((lane >> 2) + 8 * h) * C_ROW + (lane & 3) * 4;
        const float gt = rows.gate[0][h];
#pragma unroll
        for (int ni = 0; ni < OUT_N / 8; ++ni) {
            float v0 = acc[0][ni][2 * h], v1 = acc[0][ni][2 * h + 1];
            if (GLU) { /* column ni of the gate half with the same column of the up half */
                float grad;
                v0 = act_scalar(GLU - 1, v0, &grad) * acc[0][ni + BN / 16][2 * h];
                v1 = act_scalar(GLU - 1, v1, &grad) * acc[0][ni + BN / 16][2 * h + 1];
            }
            pit_st_shared_u32(row + ni * 16, pack2(gt * v0, gt * v1));
        }
    }
    pit_fence_async_smem(); /* the rows, written by this warp, before the copy engine reads them */
    __syncwarp();
    /* row `lane` (< 16) of the warp: its slot is held by lane 4 (lane % 8) */
    const int s0 = pit_shfl(rows.slot[0][0], 4 * (lane & 7));
    const int s1 = pit_shfl(rows.slot[0][1], 4 * (lane & 7));
    const int slot = lane < 8 ? s0 : s1;
    if (lane < 16 && slot >= 0) {
        T *dst = (T *)p.c + w.grp * p.sc + (pit_i64)(slot / p.cdiv) * p.ldc + w.n0;
        pit_bulk_store(dst, part + lane * C_ROW, (pit_u32)min(OUT_N, p.N - w.n0) * 2);
    }
    pit_bulk_commit();
}

/* Warpgroup 1 + cw: rows 64 cw .. 64 cw + 63 of every tile; the tile's
 * rows and gates load a tile early. */
PIT_DEV void gmm_ws_multiply(const pit_gmm_args &p, pit_u32 sbase, int total, int nk, int cw)
{
    const int wm0 = cw * 64 + (threadIdx.x / 32 % 4) * 16;
    const bool first_lane = pit_lane() == 0;
    int q = 0;
    gmm_tile next = gmm_tile_of(p, blockIdx.x, total);
    gmm_rows<1> rows_next;
    gmm_rows_slots(p, next, wm0, rows_next);
    gmm_rows_gates(p, rows_next);
    for (int item = blockIdx.x; item < total; item += gridDim.x) {
        const gmm_tile w = next;
        next = gmm_tile_of(p, item + gridDim.x, total);
        const gmm_rows<1> rows = rows_next;
        gmm_rows_slots(p, next, wm0, rows_next);
        float acc[1][BN / 8][4];
#pragma unroll
        for (int ni = 0; ni < BN / 8; ++ni) acc[0][ni][0] = acc[0][ni][1] = acc[0][ni][2] = acc[0][ni][3] = 0.f;
        if (w.row0 + cw * 64 < w.count)
            gmm_ws_ksteps<true>(acc, sbase, q, nk, cw, first_lane);
        else
            gmm_ws_ksteps<false>(acc, sbase, q, nk, cw, first_lane);
        gmm_rows_gates(p, rows_next); /* its slots arrived during this tile */
        gmm_swrite_bulk(p, w, rows, sbase + C_AT + wm0 * C_ROW, acc);
    }
    pit_bulk_wait<false>();
}

PIT_KERNEL void GMM_BOUNDS pit_op_gmm_tc(const __grid_constant__ pit_gmm_args p)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    pit_u8 *smem = smem_raw + ((1024 - (pit_smem_addr(smem_raw) & 1023)) & 1023);
    const pit_u32 sbase = pit_smem_addr(smem);
    const int total = __ldg(p.list) * p.ntn, nk = (p.K + BK - 1) / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            pit_mbar_init(gmm_stage_bar(sbase, s), CT + 1); /* the copiers, and B's bytes announced */
            pit_mbar_init(gmm_empty_bar(sbase, s), WS_MMA_WARPS);
        }
        pit_fence_mbar_init();
    }
    __syncthreads();
    if (threadIdx.x < CT) {
        pit_regs_dec<WS_COPY_REGS>();
        gmm_ws_copy(p, smem, sbase, total, nk);
    } else {
        pit_regs_inc<WS_MMA_REGS>();
        gmm_ws_multiply(p, sbase, total, nk, threadIdx.x / 128 - 1);
    }
}
#else
static_assert(!GLU && !BT, "the gated epilogue and B^T are the warp-specialised kernel's");
/* A warp's operands of one 16-wide k-step. */
struct gmm_frag {
    pit_u32 a[MI][4], b[NI][2];
};

/* Bs: this thread's ldmatrix row of the k-step (see pit_op_gmm_tc) */
PIT_DEV void gmm_load_b(pit_u32 (&b)[NI][2], const T *Bs)
{
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
        pit_u32 r[4];
        pit_ldmatrix_x4_trans(r, Bs + nj * 16);
        b[2 * nj][0] = r[0];
        b[2 * nj][1] = r[1];
        b[2 * nj + 1][0] = r[2];
        b[2 * nj + 1][1] = r[3];
    }
}

/* The mma's of one k-step on cur, with the loads of the next k-step's
 * fragments (this thread's rows at An, Bn) into nxt between them: B's
 * first, then row block mi's A after its mma's, into the registers
 * cur.a[mi] frees (a k-step's A plus two B's live, not two whole sets). */
PIT_DEV void gmm_product(float (&acc)[MI][NI][4], const gmm_frag &cur, gmm_frag &nxt, const T *An, const T *Bn)
{
    gmm_load_b(nxt.b, Bn);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) pit_mma_16816<PIT_DTYPE>(acc[mi][ni], cur.a[mi], cur.b[ni]);
        pit_ldmatrix_x4(nxt.a[mi], An + mi * 16 * A_ROW);
    }
}

PIT_KERNEL void GMM_BOUNDS pit_op_gmm_tc(const pit_gmm_args p)
{
    extern __shared__ __align__(16) pit_u8 smem[];
    const int total = __ldg(p.list) * p.ntn;
    const int nk = (p.K + BK - 1) / BK;
    /* this thread's ldmatrix rows in stage 0, k-step 0: A's row wm0 + lane % 16
     * at k = (lane / 16) * 8, B's row k = lane % 16 at n = wn0 + (lane / 16) * 8 */
    const int warp = threadIdx.x / 32, lane = pit_lane();
    const T *As0 = (const T *)smem + ((warp / WN) * WTM + (lane & 15)) * A_ROW + (lane >> 4) * 8;
    const T *Bs0 = (const T *)(smem + STAGES * A_STAGE) + ((lane & 7) + ((lane >> 3) & 1) * 8) * B_ROW +
                   (warp % WN) * WTN + (lane >> 4) * 8;
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
        const gmm_tile w = gmm_tile_of(p, tile, total);
        __syncthreads(); /* the previous tile is done with the stages */
        int tok[A_PER];
        gmm_tokens(p, w, tok);
        float acc[MI][NI][4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.f;
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < nk) gmm_issue(p, w, tok, smem, s, s, true);
            pit_copy_commit();
        }
        pit_copy_wait<STAGES - 2>();
        __syncthreads();
        gmm_frag cur;
        gmm_load_b(cur.b, Bs0);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) pit_ldmatrix_x4(cur.a[mi], As0 + mi * 16 * A_ROW);
        /* Stage c is read from slot rd; stage c + STAGES - 1 is copied into
         * slot wr = rd - 1 (mod STAGES) at c's first k-step: every warp read
         * that slot's last fragments before the barrier of stage c - 1. The
         * barrier of stage c, before its last k-step, has stage c + 1 landed,
         * whose first fragments that k-step loads (after the last stage: not
         * used, and nothing is in flight into the slot by then). The copies
         * of stages past the end (zeros, no global read, stage 0's addresses)
         * keep one cp.async group a stage and the loop free of branches. */
        for (int c = 0; c < nk; ++c) {
            const int rd = c % STAGES, rn = (c + 1) % STAGES, wr = (c + STAGES - 1) % STAGES;
            const T *Ar = As0 + rd * (BM * A_ROW), *Br = Bs0 + rd * (BK * B_ROW);
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                if (ks == 0) {
                    const int ahead = c + STAGES - 1;
                    gmm_issue(p, w, tok, smem, wr, ahead < nk ? ahead : 0, ahead < nk);
                    pit_copy_commit();
                }
                const T *An = Ar + (ks + 1) * 16, *Bn = Br + (ks + 1) * 16 * B_ROW;
                if (ks == KS - 1) {
                    pit_copy_wait<STAGES - 2>();
                    __syncthreads();
                    An = As0 + rn * (BM * A_ROW);
                    Bn = Bs0 + rn * (BK * B_ROW);
                }
                gmm_frag nxt;
                gmm_product(acc, cur, nxt, An, Bn);
                cur = nxt;
            }
        }
        pit_copy_wait<0>();
        gmm_rows<MI> rows; /* loaded here: registers are dear in the main loop */
        gmm_rows_slots(p, w, (warp / WN) * WTM, rows);
        gmm_rows_gates(p, rows);
        gmm_swrite<MI, NI>(p, w, rows, (warp % WN) * WTN, acc);
    }
}
#endif
