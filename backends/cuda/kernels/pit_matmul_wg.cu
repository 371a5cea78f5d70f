/*
 * pit_matmul_wg.cu - the sm_90 tile engine of the sparse matmul along K
 * (A sparse in micro-tiles of MT_ROWS x mt_cols, mt_cols a multiple of 64,
 * 16-bit data): C = A.B with only the non-zero micro-tiles multiplied.
 *
 * A CTA owns 128 rows of C (NRB = 128 / MT_ROWS row-blocks) and BN columns.
 * Its row-blocks' index entries are merged into a presence word per
 * micro-tile column (bit r: row-block r has it), in shared memory. The CTA
 * walks the union of its row-blocks' columns: each 64-deep k-step loads
 * B's 64 rows x BN once for every row-block that needs them (the union is
 * what crosses L2, not one copy a row-block), and A's micro-tile of each
 * present row-block only.
 *
 * The product is taken with the roles turned, C^T = B^T . A^T: wgmma's M is
 * 64 columns of C (B^T's fragment, read from shared memory once a k-step
 * into registers by ldmatrix.trans and used by every row-block), its N is
 * one row-block's MT_ROWS rows (A's micro-tile, K-major in shared memory).
 * So a row-block whose micro-tile is zero costs no tensor-core work at all:
 * exactly the non-zero micro-tiles are multiplied, at MT_ROWS 16, 32 or 64.
 *
 * Warp-specialised (384 threads): warp 0 loads every k-step with the
 * tensor copy engine (128-byte swizzle, rows past M or K and columns past N
 * arrive as zeros) into STAGES stages, each with a "full" mbarrier (the
 * bytes landed) and an "empty" one (both multiplying warpgroups are done);
 * warpgroups 1 and 2 multiply, each BN / 2 columns for every row-block,
 * with the accumulators in registers, then stage C row-major through the
 * freed stage memory and store it with 16-byte writes.
 *
 * Defines: PIT_DTYPE MT_ROWS BN (128 or 256) STAGES C_VEC, and from the host's
 * constants CTA_ROWS (128) and KT_MAX (the micro-tile columns the presence
 * words hold: the host runs K <= KT_MAX * mt_cols).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/mma.cuh"
#include "common/sm90.cuh"
#include "common/index.cuh"
#include "common/elem.cuh"

#ifndef C_VEC
#define C_VEC 0
#endif

constexpr int NRB = CTA_ROWS / MT_ROWS, WBK = 64;
constexpr int SLICES = BN / 128;           /* 64-column slices of C a multiplying warpgroup owns */
constexpr int RB_BYTES = MT_ROWS * WBK * 2; /* one row-block's micro-tile part of a k-step */
constexpr int A_STAGE = CTA_ROWS * WBK * 2, B_STAGE = BN * WBK * 2;
constexpr int STAGE_AREA = STAGES * (A_STAGE + B_STAGE);
constexpr int BAR_AT = STAGE_AREA, PRES_AT = BAR_AT + 16 * STAGES;
constexpr int C_ROW = BN * 2 + 16; /* staging row of C, padded 16 bytes */
constexpr int SMEM = PRES_AT + KT_MAX * 4 + 1024;
extern "C" __device__ const int pit_smem_bytes = SMEM;

static_assert(sizeof(T) == 2, "the tile engine takes 16-bit data");
static_assert(CTA_ROWS == 128, "two multiplying warpgroups take 64 columns of C^T each a slice, every row a CTA");
static_assert(MT_ROWS == 16 || MT_ROWS == 32 || MT_ROWS == 64, "row-block heights of the engine");
static_assert(BN == 128 || BN == 256, "engine tile width");
static_assert(CTA_ROWS * C_ROW <= STAGE_AREA, "C's staging fits the stages");

/* One CTA an SM (the launch bounds cap a thread at 168 registers; two CTAs
 * would leave 80, too few for a warpgroup's accumulators and fragments).
 * Registers a thread after the copying warpgroup gives its share to the
 * multiplying ones: 128 x 40 + 256 x 232 within the 384 x 168 of the CTA
 * (a larger request would wait forever). */
constexpr int COPY_REGS = 40, MMA_REGS = 232;

#if PIT_HAS_WGMMA
PIT_DEV pit_u32 full_bar(pit_u32 base, int s) { return base + BAR_AT + 8 * s; }
PIT_DEV pit_u32 empty_bar(pit_u32 base, int s) { return base + BAR_AT + 8 * (STAGES + s); }
PIT_DEV pit_u32 a_stage(pit_u32 base, int s) { return base + s * A_STAGE; }
PIT_DEV pit_u32 b_stage(pit_u32 base, int s) { return base + STAGES * A_STAGE + s * B_STAGE; }

struct wg_cta {
    int row0, n0, batch;
    int mt_cols, kt; /* micro-tile columns: their width, and how many K has */
};

/* Presence words of the CTA's row-blocks: bit r of word j says row-block r
 * has micro-tile column j. Read by every thread, then shared. Every tile
 * waits for this before its first load, so the row-blocks' counts load
 * together, then their first entries (a thread's one of each list)
 * together: two memory latencies, not two a row-block. */
PIT_DEV void build_presence(const pit_mm_args &p, const wg_cta &w, pit_u32 *pres)
{
    for (int j = threadIdx.x; j < w.kt; j += blockDim.x) pres[j] = 0;
    const int rb0 = w.row0 / MT_ROWS, t = (int)threadIdx.x;
    int count[NRB];
    const int *ent[NRB];
#pragma unroll
    for (int r = 0; r < NRB; ++r) {
        const int rb = rb0 + r, grp = w.batch * p.groups_per_batch + rb;
        const bool live = rb < p.groups_per_batch && rb * MT_ROWS < p.M;
        count[r] = live ? __ldg(p.counts + grp) : 0;
        ent[r] = p.entries + (pit_i64)(live ? grp : 0) * p.capacity;
    }
    int first[NRB];
#pragma unroll
    for (int r = 0; r < NRB; ++r) first[r] = t < count[r] ? __ldg(ent[r] + t) : -1;
    __syncthreads(); /* the words are zero */
#pragma unroll
    for (int r = 0; r < NRB; ++r) {
        for (int q = t, e = first[r]; q < count[r]; q += blockDim.x, e = q < count[r] ? __ldg(ent[r] + q) : 0) {
            const int j = pit_entry_index(e);
            if (j < w.kt) atomicOr(pres + j, 1u << r);
        }
    }
    __syncthreads();
}

/* Calls f(k0, mask) for every k-step of the union, in column order: the
 * same sequence in every warp (a warp's lanes read 32 words at a time),
 * so the copying and the multiplying warps agree without a message. */
template <class F> PIT_DEV void for_each_kstep(const pit_mm_args &p, const wg_cta &w, const pit_u32 *pres, F &&f)
{
    const int lane = pit_lane();
    for (int base = 0; base < w.kt; base += 32) {
        const pit_u32 mine = base + lane < w.kt ? pres[base + lane] : 0u;
        pit_u32 live = pit_ballot(mine != 0u);
        while (live) {
            const int b = __ffs(live) - 1;
            live &= live - 1;
            const pit_u32 mask = (pit_u32)pit_shfl((int)mine, b);
            for (int k0 = (base + b) * w.mt_cols, k1 = min(k0 + w.mt_cols, p.K); k0 < k1; k0 += WBK) f(k0, mask);
        }
    }
}

/* Warp 0: the loads of every k-step into the stages in turn, each stage
 * once both multiplying warpgroups are done with its last use. */
PIT_DEV void copy_ksteps(const pit_mmwg_args &args, const wg_cta &w, const pit_u32 *pres, pit_u32 base)
{
    const pit_mm_args &p = args.mm;
    const void *map_a = args.map_a, *map_b = args.map_b;
    const bool issuer = pit_lane() == 0;
    int q = 0;
    for_each_kstep(p, w, pres, [&](int k0, pit_u32 mask) {
        const int s = q % STAGES;
        if (q >= STAGES) pit_mbar_wait(empty_bar(base, s), (pit_u32)(q / STAGES - 1) & 1u);
        if (issuer) {
            const pit_u32 bar = full_bar(base, s);
            pit_mbar_expect_tx(bar, (pit_u32)(B_STAGE + __popc(mask) * RB_BYTES));
            const int za = p.sa ? w.batch : 0, zb = p.sb ? w.batch : 0;
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
                pit_tma_load_3d(b_stage(base, s) + j * (WBK * 128), map_b, bar, w.n0 + j * 64, k0, zb);
#pragma unroll
            for (int r = 0; r < NRB; ++r)
                if (mask >> r & 1u)
                    pit_tma_load_3d(a_stage(base, s) + r * RB_BYTES, map_a, bar, k0, w.row0 + r * MT_ROWS, za);
        }
        __syncwarp();
        ++q;
    });
}

typedef float wg_acc[SLICES][NRB][MT_ROWS / 2];
/* B^T's operand of one k-step in registers: this warp's 16 columns of C
 * of each slice, 16 deep a product (mma.sync's A fragment) */
typedef pit_u32 wg_frag[SLICES][WBK / 16][4];

/* The fragments of stage s, read once and shared by every row-block's
 * product: ldmatrix.trans of B's swizzled k-rows (matrix i of a product:
 * columns 8 (i % 2), k-rows 8 (i / 2) of the warp's 16 x 16). */
PIT_DEV void load_frags(wg_frag &f, const pit_u8 *smem, int s, int cw)
{
    const int lane = pit_lane(), wq = (threadIdx.x / 32) % 4;
    const int n = 16 * wq + (lane / 8 % 2) * 8, kr = (lane / 16) * 8 + lane % 8;
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl)
#pragma unroll
        for (int ks = 0; ks < WBK / 16; ++ks) {
            const int k = ks * 16 + kr;
            const pit_u8 *box = smem + STAGES * A_STAGE + s * B_STAGE + (cw * SLICES + sl) * (WBK * 128);
            pit_ldmatrix_x4_trans(f[sl][ks], box + k * 128 + (((n >> 3) ^ (k & 7)) << 4));
        }
}

/* This warpgroup's wgmma's of one k-step in stage s: for each present
 * row-block, its BN / 2 columns of C^T, 64 deep; A's rows of 128 B, a
 * product 32 B in, 8-row groups 1024 B apart. */
PIT_DEV void multiply_kstep(wg_acc &acc, const wg_frag &f, pit_u32 base, int s, pit_u32 mask)
{
#pragma unroll
    for (int r = 0; r < NRB; ++r) {
        if (!(mask >> r & 1u)) continue;
#pragma unroll
        for (int sl = 0; sl < SLICES; ++sl)
#pragma unroll
            for (int ks = 0; ks < WBK / 16; ++ks)
                pit_wgmma_rs<PIT_DTYPE, 0>(acc[sl][r], f[sl][ks],
                                           pit_wgmma_desc(a_stage(base, s) + r * RB_BYTES + ks * 32, 16, 1024));
    }
}

PIT_DEV void bar_multipliers(void) { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

/* C^T's accumulators into the staging tile (row-major C, 128 x BN), then
 * out to C with 16-byte stores where C allows. Accumulator d[4i + j] of a
 * 64 x MT_ROWS product sits at C^T row 16 (warp % 4) + lane / 4 + 8 (j / 2)
 * (a column of C), column 8i + 2 (lane % 4) + j % 2 (a row of C): pairs
 * (j, j + 1) packed are mma's fragment of the 8x8 block (i, j / 2), which
 * stmatrix.trans stores as 8 rows of C. */
PIT_DEV void store_tile(const pit_mm_args &p, const wg_cta &w, const wg_acc &acc, pit_u8 *smem, int cw)
{
    const int lane = pit_lane(), wq = (threadIdx.x / 32) % 4;
    bar_multipliers(); /* both warpgroups are done reading the stages */
    const int q = lane / 8; /* the matrix whose row this lane addresses: block (2 i2 + q / 2, q % 2) */
    const pit_u32 stage = pit_smem_addr(smem);
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl)
#pragma unroll
        for (int r = 0; r < NRB; ++r)
#pragma unroll
            for (int i2 = 0; i2 < MT_ROWS / 16; ++i2) {
                const float *d = &acc[sl][r][8 * i2];
                const pit_u32 x[4] = {pack2(d[0], d[1]), pack2(d[2], d[3]), pack2(d[4], d[5]), pack2(d[6], d[7])};
                const int row = r * MT_ROWS + 8 * (2 * i2 + q / 2) + lane % 8;
                const int col = (cw * SLICES + sl) * 64 + 16 * wq + 8 * (q % 2);
                pit_stmatrix_x4_trans(stage + row * C_ROW + col * 2, x);
            }
    bar_multipliers();
    constexpr int PIECES = BN / 8; /* 16-byte pieces of a staged row */
    for (int u = threadIdx.x - 128; u < CTA_ROWS * PIECES; u += 256) {
        const int row = u / PIECES, n = (u % PIECES) * 8, m = w.row0 + row;
        if (m >= p.M || w.n0 + n >= p.N) continue;
        const pit_u8 *src = smem + row * C_ROW + n * 2;
        T *dst = (T *)p.c + (pit_i64)w.batch * p.sc + (pit_i64)m * p.ldc + w.n0 + n;
        if (C_VEC && w.n0 + n + 8 <= p.N) {
            *(uint4 *)dst = *(const uint4 *)src;
        } else {
            for (int e = 0; e < 8 && w.n0 + n + e < p.N; ++e) dst[e] = ((const T *)src)[e];
        }
    }
}

/* Warpgroup 1 + cw: waits for each k-step's bytes, multiplies the present
 * row-blocks, hands the stage back, and stores its part of C. */
PIT_DEV void multiply_ksteps(const pit_mm_args &p, const wg_cta &w, const pit_u32 *pres, pit_u8 *smem, pit_u32 base,
                             int cw)
{
    wg_acc acc;
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl)
#pragma unroll
        for (int r = 0; r < NRB; ++r)
#pragma unroll
            for (int i = 0; i < MT_ROWS / 2; ++i) acc[sl][r][i] = 0.f;
    const bool first_lane = pit_lane() == 0;
    int q = 0;
    /* a k-step's wgmma's run while the next one's issue: its stage goes back
     * once they are done (wait_group 1 after the next one's commit), and
     * the next one's fragments go to the other set of registers */
    wg_frag f0, f1;
    auto step = [&](wg_frag &f, int s, pit_u32 mask) {
        load_frags(f, smem, s, cw);
        pit_wgmma_fence();
        multiply_kstep(acc, f, base, s, mask);
        pit_wgmma_commit();
        pit_wgmma_wait<1>();
    };
    for_each_kstep(p, w, pres, [&](int, pit_u32 mask) {
        const int s = q % STAGES;
        pit_mbar_wait(full_bar(base, s), (pit_u32)(q / STAGES) & 1u);
        if (q & 1) step(f1, s, mask);
        else step(f0, s, mask);
        if (q > 0 && first_lane) pit_mbar_arrive(empty_bar(base, (q + STAGES - 1) % STAGES));
        ++q;
    });
    pit_wgmma_wait<0>();
    store_tile(p, w, acc, smem, cw);
}

PIT_KERNEL void __launch_bounds__(384, 1) pit_matmul_wg(const __grid_constant__ pit_mmwg_args args)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    pit_u8 *smem = smem_raw + ((1024 - (pit_smem_addr(smem_raw) & 1023)) & 1023); /* the swizzle's alignment */
    const pit_u32 base = pit_smem_addr(smem);
    const pit_mm_args &p = args.mm;
    pit_u32 *pres = (pit_u32 *)(smem + PRES_AT);
    wg_cta w;
    w.row0 = blockIdx.x * CTA_ROWS;
    w.n0 = blockIdx.y * BN;
    w.batch = blockIdx.z;
    w.mt_cols = args.mt_cols;
    w.kt = (p.K + w.mt_cols - 1) / w.mt_cols;
    if (threadIdx.x == 0) {
        pit_prefetch_tensormap(args.map_a);
        pit_prefetch_tensormap(args.map_b);
        for (int s = 0; s < STAGES; ++s) {
            pit_mbar_init(full_bar(base, s), 1); /* the issuer's announcement; the bytes complete it */
            pit_mbar_init(empty_bar(base, s), 8); /* a lane of each multiplying warp */
        }
        pit_fence_mbar_init();
    }
    build_presence(p, w, pres); /* its barriers also publish the mbarrier inits */
    if (threadIdx.x < 128) {
        pit_regs_dec<COPY_REGS>();
        if (threadIdx.x < 32) copy_ksteps(args, w, pres, base);
    } else {
        pit_regs_inc<MMA_REGS>();
        multiply_ksteps(p, w, pres, smem, base, threadIdx.x / 128 - 1);
    }
}
#else
/* Not an sm_90a build: the host never launches this kernel there. */
PIT_KERNEL void pit_matmul_wg(const pit_mmwg_args args) { (void)args; }
#endif
