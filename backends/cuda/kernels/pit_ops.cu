/*
 * pit_ops.cu - kernels of the operators of dynamic-sparse models (backend.h
 * "operators of dynamic-sparse models"). One source, one kernel per
 * compilation: PIT_OP picks it, so NVRTC compiles only what is launched.
 *
 *   1 pit_op_attention  fused sparse attention (tensor cores, FlashAttention
 *                       style over the block index of the mask)
 *   2 pit_op_sddmm      C = A.B^T on the indexed blocks (CUDA cores)
 *   3 pit_op_softmax    row softmax over indexed blocks and mask
 *   4 pit_op_softmax_bwd
 *   5 pit_op_route      MoE routing: per expert its token-slots (atomics)
 *   6 pit_op_plan       (group, first row) work list of a gathered GEMM
 *   7 pit_op_gmm_tc     gathered GEMM on tensor cores (MoE forward, rows)
 *   8 pit_op_gmm_cc     gathered GEMM on CUDA cores, every MoE mode
 *   9 pit_op_zero, 10 pit_op_relu, 11 pit_op_transpose
 *  12 pit_op_mark      rows a gathered GEMM stores (the others get zeroed)
 *
 * Defines: PIT_OP, PIT_DTYPE, MASK_DT (0 f32, 1 f16, 2 bf16, 3 i32) and the
 * per-kernel ones documented at each kernel. Argument structs are mirrored
 * byte for byte in cuda_model_ops.c.
 */
#include "pit_port.cuh"

#if PIT_DTYPE == PIT_DT_F32
typedef float T;
#elif PIT_DTYPE == PIT_DT_F16
typedef pit_half T;
#else
typedef pit_bf16 T;
#endif

#define PIT_NEG_INF (__uint_as_float(0xff800000u))

/* ---- shared helpers ------------------------------------------------------ */

/* The block index as the kernels see it. batched 0: one set of groups
 * shared by every batch (a rank-2 mask indexed once). */
struct pit_ix {
    const int *counts, *entries;
    int capacity, gpb, batched, pad;
};

PIT_DEV int ix_group(const pit_ix &ix, int batch, int g)
{
    return (ix.batched ? batch * ix.gpb : 0) + g;
}

#ifdef MASK_DT
/* mask element bytes: f16/bf16 2, u8 (bool) 1, f32/i32 4 (a macro: #if reads it) */
#define MASK_BYTES (MASK_DT == PIT_DT_F16 || MASK_DT == PIT_DT_BF16 ? 2 : MASK_DT == PIT_DT_U8 ? 1 : 4)

/* Mask element "on": non-zero bits (NaN on, -0.0 off), i32 and u8 non-zero. */
PIT_DEV bool mask_on(const pit_u8 *m, pit_i64 i)
{
#if MASK_DT == 0
    return pit_bits_nonzero32(__ldg((const pit_u32 *)m + i));
#elif MASK_DT == PIT_DT_I32
    return __ldg((const int *)m + i) != 0;
#elif MASK_DT == PIT_DT_U8
    return __ldg(m + i) != 0;
#else
    return pit_bits_nonzero16(__ldg((const pit_u16 *)m + i));
#endif
}

/* One 32-bit word of mask: bit 0 some element on, bit 1 some element off
 * (an i32 mask is read as f32 words, core/op_util.c) */
PIT_DEV pit_u32 mask_word_flags(pit_u32 w)
{
#if MASK_BYTES == 2
    const bool lo = pit_bits_nonzero16(w & 0xffffu), hi = pit_bits_nonzero16(w >> 16);
    return (pit_u32)(lo || hi) | (pit_u32)(!lo || !hi) << 1;
#elif MASK_BYTES == 1
    const pit_u32 on = pit_bytes_nonzero(w);
    return (pit_u32)(on != 0u) | (pit_u32)(on != 0x80808080u) << 1;
#else
    const bool nz = pit_bits_nonzero32(w);
    return (pit_u32)nz | (pit_u32)!nz << 1;
#endif
}
#endif

PIT_DEV float shfl_xor_f(float v, int x)
{
    return __uint_as_float((pit_u32)pit_shfl((int)__float_as_uint(v), pit_lane() ^ x));
}

#if PIT_DTYPE != PIT_DT_F32
/* two values as the 16-bit pair of one 32-bit word (low first) */
PIT_DEV pit_u32 pack2(float lo, float hi)
{
    return (pit_u32)pit_from_float<T>(lo).bits | ((pit_u32)pit_from_float<T>(hi).bits << 16);
}
#endif

/* ======================================================================== */
#if PIT_OP == 1
/* Fused attention. Defines: BLOCK (64/128: query rows per CTA = the index's
 * block), HD (Q/K head dim), HDV (V/O head dim), MASK_DT. 16-bit only.
 * CTA = (query block, bh). Each warp owns 16 query rows; keys stream in
 * chunks of 64 (a block is BLOCK/64 chunks), double-buffered with cp.async.
 * S = Q.K^T and O += P.V on mma.sync; the online softmax keeps a running
 * max and sum per row in f32 (exp2 with the scale folded in).
 * An entry marked PIT_ENTRY_FULL (detection found every mask element of the
 * block non-zero) skips the mask loads of its chunks: only the bounds
 * (row, key < L) decide. Other entries read the mask element by element. */
/* On sm_90a with head dims 64 the products run on wgmma (ATT_WGMMA): a
 * warpgroup's 64 rows at once, A (Q, then P) from the same registers as
 * mma.sync's fragments, K and V read by the tensor cores from shared
 * memory, where a chunk's key rows (128 bytes) sit under 128-byte swizzle:
 * K is B K-major for S = Q.K^T, V is B N-major for O += P.V. The ldmatrix
 * traffic of K and V (every warp read the whole chunk) is gone. */
#if PIT_HAS_WGMMA && HD == 64 && HDV == 64
#define ATT_WGMMA 1
#else
#define ATT_WGMMA 0
#endif
constexpr int BQ = BLOCK, KC = 64, WARPS = BQ / 16, THREADS = WARPS * 32;
constexpr int QS = HD + 8; /* padded: ldmatrix without conflicts */
#if ATT_WGMMA
constexpr int KS = HD, VS = HDV, ALIGN = 1024; /* swizzle atoms start 1024-byte aligned */
#else
constexpr int KS = HD + 8, VS = HDV + 8, ALIGN = 0;
#endif
constexpr int Q_BYTES = BQ * QS * 2, K_BYTES = KC * KS * 2, V_BYTES = KC * VS * 2;
extern "C" __device__ const int pit_smem_bytes = Q_BYTES + 2 * (K_BYTES + V_BYTES) + ALIGN;
static_assert(!ATT_WGMMA || Q_BYTES % 1024 == 0, "attention: K and V stages 1024-byte aligned");
static_assert(BLOCK % KC == 0 && HD % 16 == 0 && HDV % 16 == 0, "attention tile");
static_assert(PIT_DTYPE != PIT_DT_F32, "tensor cores take 16-bit inputs");

struct attn_args {
    const pit_u8 *q, *k, *v, *mask;
    pit_u8 *o;
    pit_i64 ldq, ldk, ldv, ldo, mld;
    pit_i64 sq, sk, sv, so, ms; /* batch strides (elements); ms 0: one mask */
    pit_ix ix;
    const int *order; /* NULL, or the groups by falling count (pit_op_plan mode 1) */
    int L, mask_pair; /* mask_pair: two mask elements load as one word */
    float scale_log2;
    int pad0;
    /* Detection inside the kernel (det != NULL; L a multiple of BLOCK, mask
     * rows 16-byte aligned): det[0] hands out work items in order, det[1 +
     * g] counts the finished detection parts of group g. */
    int *det, *total;
    int groups, parts, heads, ahead; /* groups; detection parts and attention items a group; lookahead */
    int part_blocks, pad;            /* key blocks a detection part */
};

/* (batch, query block) of this CTA. With an order, the CTAs that start
 * first take the groups with the most blocks (longest first: no long CTA
 * left alone at the end of the grid); a shared index runs a group's every
 * batch one after another. */
PIT_DEV void attn_work(const attn_args &a, int &b, int &qb)
{
    if (!a.order) {
        b = blockIdx.y;
        qb = blockIdx.x;
        return;
    }
    const int lin = blockIdx.x + blockIdx.y * gridDim.x;
    if (a.ix.batched) {
        const int g = __ldg(a.order + lin);
        b = g / a.ix.gpb;
        qb = g % a.ix.gpb;
    } else {
        qb = __ldg(a.order + lin / gridDim.y);
        b = lin % gridDim.y;
    }
}

/* P's A fragment of k-step kk (keys 16 kk ..): the S accumulators of
 * column tiles 2 kk and 2 kk + 1 packed to 16 bits (the m16n8 accumulator
 * layout is the m16n8k16 A layout, on mma.sync and on wgmma) */
PIT_DEV void p_fragment(const float (&s)[8][4], int kk, pit_u32 (&pa)[4])
{
    pa[0] = pack2(s[2 * kk][0], s[2 * kk][1]), pa[1] = pack2(s[2 * kk][2], s[2 * kk][3]);
    pa[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pa[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/* rows [r0, r0 + ROWS) x COLS of src into shared, zeros past L: stride S,
 * or SW: 64-element rows under 128-byte swizzle (pit_swz128) */
template <int ROWS, int COLS, int S, bool SW = false>
PIT_DEV void load_rows(T *dst, const T *src, pit_i64 ld, int r0, int L)
{
    static_assert(!SW || COLS == 64, "swizzled rows are 128 bytes");
    constexpr int VPR = COLS / 8, UNITS = ROWS * VPR;
#pragma unroll
    for (int i = 0; i < (UNITS + THREADS - 1) / THREADS; ++i) {
        int u = threadIdx.x + i * THREADS;
        if (UNITS % THREADS && u >= UNITS) break;
        int r = u / VPR, c = (u % VPR) * 8;
        bool ok = r0 + r < L;
        T *at = dst + (SW ? pit_swz128(r, c) : r * S + c);
        pit_copy16(at, ok ? src + (pit_i64)(r0 + r) * ld + c : src, ok);
    }
}

/* Two adjacent mask elements (col, col + 1) of row as bits 0 and 1. */
PIT_DEV pit_u32 mask_pair(const attn_args &a, const pit_u8 *m, int row, int col)
{
    if (row >= a.L || col >= a.L) return 0;
    pit_i64 i = (pit_i64)row * a.mld + col;
    if (a.mask_pair && col + 1 < a.L) {
#if MASK_BYTES == 2
        pit_u32 w = __ldg((const pit_u32 *)(m + 2 * i));
        return (pit_u32)pit_bits_nonzero16(w & 0xffffu) | ((pit_u32)pit_bits_nonzero16(w >> 16) << 1);
#elif MASK_DT == PIT_DT_U8
        pit_u32 w = __ldg((const pit_u16 *)(m + i));
        return (pit_u32)((w & 0xffu) != 0) | ((pit_u32)((w >> 8) != 0) << 1);
#else
        uint2 w = __ldg((const uint2 *)(m + 4 * i));
#if MASK_DT == PIT_DT_I32
        return (pit_u32)(w.x != 0) | ((pit_u32)(w.y != 0) << 1);
#else
        return (pit_u32)pit_bits_nonzero32(w.x) | ((pit_u32)pit_bits_nonzero32(w.y) << 1);
#endif
#endif
    }
    pit_u32 b = mask_on(m, i);
    if (col + 1 < a.L) b |= (pit_u32)mask_on(m, i + 1) << 1;
    return b;
}

/* mask_pair of a block whose mask is all non-zero: the bounds alone */
PIT_DEV pit_u32 bounds_pair(const attn_args &a, int row, int col)
{
    if (row >= a.L || col >= a.L) return 0;
    return col + 1 < a.L ? 3u : 1u;
}

/* Attention of batch b's query block qb over its group's entries. The
 * index is read through L2 (pit_ldcg): with detection inside the kernel
 * it was written during this launch. */
PIT_DEV void attend(const attn_args &a, pit_u8 *smem, int b, int qb)
{
    T *Qs = (T *)smem;
    /* stage i of K and V (computed, not an array: no local memory) */
    auto Kb = [&](int i) { return (T *)(smem + Q_BYTES + i * K_BYTES); };
    auto Vb = [&](int i) { return (T *)(smem + Q_BYTES + 2 * K_BYTES + i * V_BYTES); };
    const int q0 = qb * BQ;
    const int grp = ix_group(a.ix, b, qb);
    const int count = pit_ldcg(a.ix.counts + grp);
    const int *ent = a.ix.entries + (pit_i64)grp * a.ix.capacity;
    const T *q = (const T *)a.q + b * a.sq, *k = (const T *)a.k + b * a.sk, *v = (const T *)a.v + b * a.sv;
    const pit_u8 *mask = a.mask + (pit_i64)b * a.ms * MASK_BYTES;
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane(), g = lane >> 2, t = lane & 3;
    const int nchunks = count * (BLOCK / KC);

    float o[HDV / 8][4];
#pragma unroll
    for (int j = 0; j < HDV / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_run[2] = {PIT_NEG_INF, PIT_NEG_INF}, l_run[2] = {0.f, 0.f};
    pit_u32 qf[HD / 16][4];

    if (nchunks > 0) {
        load_rows<BQ, HD, QS>(Qs, q, a.ldq, q0, a.L);
    }
    /* an entry: the key block, PIT_ENTRY_FULL when its mask is all on */
    auto key0_of = [&](int e, int c) { return pit_entry_index(e) * BLOCK + (c % (BLOCK / KC)) * KC; };
    auto entry_of = [&](int c) { return pit_ldcg(ent + c / (BLOCK / KC)); };
    int e_next = nchunks > 0 ? entry_of(0) : 0;
    if (nchunks > 0) {
        int k0 = key0_of(e_next, 0);
        load_rows<KC, HD, KS, ATT_WGMMA>(Kb(0), k, a.ldk, k0, a.L);
        load_rows<KC, HDV, VS, ATT_WGMMA>(Vb(0), v, a.ldv, k0, a.L);
    }
    pit_copy_commit();
    for (int c = 0; c < nchunks; ++c) {
        const int e = e_next;
        const int key0 = key0_of(e, c);
        const bool full = (e & PIT_ENTRY_FULL) != 0; /* uniform over the CTA */
        if (c + 1 < nchunks) {
            e_next = entry_of(c + 1);
            int k1 = key0_of(e_next, c + 1);
            load_rows<KC, HD, KS, ATT_WGMMA>(Kb((c + 1) & 1), k, a.ldk, k1, a.L);
            load_rows<KC, HDV, VS, ATT_WGMMA>(Vb((c + 1) & 1), v, a.ldv, k1, a.L);
        }
        pit_copy_commit();
        /* mask bits of this thread's 16 rows x 64 keys, loaded before the
         * wait; a full block needs no load */
        pit_u32 on = 0;
        if (full && q0 + BQ <= a.L && key0 + KC <= a.L) {
            on = ~0u;
        } else if (full) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    on |= bounds_pair(a, q0 + warp * 16 + g + 8 * h, key0 + j * 8 + 2 * t) << (4 * j + 2 * h);
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    on |= mask_pair(a, mask, q0 + warp * 16 + g + 8 * h, key0 + j * 8 + 2 * t) << (4 * j + 2 * h);
        }
        pit_copy_wait<1>();
#if ATT_WGMMA
        pit_fence_async_smem();
#endif
        __syncthreads();
        /* On wgmma Q's fragments load every chunk: kept across chunks,
         * ptxas (CUDA 13) gave their registers to P's fragments (the A of
         * O += P.V), and later chunks multiplied P, not Q, by K (SASS) */
        if (ATT_WGMMA || c == 0) {
#pragma unroll
            for (int kk = 0; kk < HD / 16; ++kk)
                pit_ldmatrix_x4(qf[kk], Qs + (warp * 16 + (lane & 15)) * QS + kk * 16 + (lane >> 4) * 8);
        }
        const T *Ks = Kb(c & 1), *Vs = Vb(c & 1);
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#if ATT_WGMMA
        /* B = K K-major: a k-step is 32 bytes into the swizzled rows, 8-row groups 1024 B apart */
        float(&sd)[32] = reinterpret_cast<float(&)[32]>(s);
        pit_wgmma_pin(sd);
        pit_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
            pit_wgmma_rs<PIT_DTYPE, 0>(sd, qf[kk], pit_wgmma_desc(pit_smem_addr(Ks) + kk * 32, 16, 1024));
        pit_wgmma_commit();
        pit_wgmma_wait<0>();
        pit_wgmma_pin(sd);
#else
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
#pragma unroll
            for (int nj = 0; nj < 4; ++nj) {
                pit_u32 r[4];
                pit_ldmatrix_x4(r, Ks + (nj * 16 + (lane & 7) + (lane >> 4) * 8) * KS + kk * 16 + ((lane >> 3) & 1) * 8);
                pit_u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                pit_mma_16816<PIT_DTYPE>(s[2 * nj], qf[kk], b0);
                pit_mma_16816<PIT_DTYPE>(s[2 * nj + 1], qf[kk], b1);
            }
#endif
        /* mask, online softmax: element e of tile j is row g + 8(e/2), key 2t + e%2.
         * With a positive scale (uniform) the scores stay unscaled: the max of
         * the raw scores times the scale is the max of the scaled ones, and
         * the scale joins the exponent's FFMA (one FMUL an element fewer).
         * Max and sum run as two chains (e = 0, 1): half the dependent steps. */
        const bool fold = a.scale_log2 > 0.f;
        const float post = fold ? a.scale_log2 : 1.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!fold) {
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) s[j][2 * h + e] *= a.scale_log2;
            }
            float mx2[2] = {PIT_NEG_INF, PIT_NEG_INF};
            if (on != ~0u) { /* masked scores to -inf (the common case, all allowed, skips it) */
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (!((on >> (4 * j + 2 * h + e)) & 1u)) s[j][2 * h + e] = PIT_NEG_INF;
            }
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) mx2[e] = fmaxf(mx2[e], s[j][2 * h + e]);
            float mx = fmaxf(mx2[0], mx2[1]);
            mx = fmaxf(mx, shfl_xor_f(mx, 1));
            mx = fmaxf(mx, shfl_xor_f(mx, 2));
            mx *= post; /* -inf stays -inf: post > 0 */
            const float m_new = fmaxf(m_run[h], mx);
            const float m_use = m_new == PIT_NEG_INF ? 0.f : m_new; /* nothing allowed yet */
            const float alpha = pit_exp2_ftz(m_run[h] - m_use);
            m_run[h] = m_new;
            float rs2[2] = {0.f, 0.f};
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float p = pit_exp2_ftz(fmaf(s[j][2 * h + e], post, -m_use));
                    s[j][2 * h + e] = p;
                    rs2[e] += p;
                }
            const float rs = rs2[0] + rs2[1];
            l_run[h] = l_run[h] * alpha + rs;
#pragma unroll
            for (int j = 0; j < HDV / 8; ++j) {
                o[j][2 * h] *= alpha;
                o[j][2 * h + 1] *= alpha;
            }
        }
        /* O += P.V: P's accumulators are already the A fragments */
#if ATT_WGMMA
        /* B = V N-major: a k-step is 16 key rows (2048 B) on */
        pit_u32 pa[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) p_fragment(s, kk, pa[kk]);
        float(&od)[32] = reinterpret_cast<float(&)[32]>(o);
        pit_wgmma_pin(od);
        pit_wgmma_pin(reinterpret_cast<pit_u32(&)[16]>(pa));
        pit_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            pit_wgmma_rs<PIT_DTYPE, 1>(od, pa[kk], pit_wgmma_desc(pit_smem_addr(Vs) + kk * 2048, KC * 128, 1024));
        pit_wgmma_commit();
        pit_wgmma_wait<0>();
        pit_wgmma_pin(od);
#else
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            pit_u32 pa[4];
            p_fragment(s, kk, pa);
#pragma unroll
            for (int nj = 0; nj < HDV / 16; ++nj) {
                pit_u32 r[4];
                pit_ldmatrix_x4_trans(r, Vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VS + nj * 16 + (lane >> 4) * 8);
                pit_u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                pit_mma_16816<PIT_DTYPE>(o[2 * nj], pa, b0);
                pit_mma_16816<PIT_DTYPE>(o[2 * nj + 1], pa, b1);
            }
        }
#endif
        __syncthreads(); /* the next iteration refills this buffer */
    }
    /* O = acc / l; rows with no allowed key (l == 0) are 0 */
    T *out = (T *)a.o + b * a.so;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += shfl_xor_f(l, 1);
        l += shfl_xor_f(l, 2);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int row = q0 + warp * 16 + g + 8 * h;
        if (row >= a.L) continue;
#pragma unroll
        for (int j = 0; j < HDV / 8; ++j)
            *(pit_u32 *)(out + (pit_i64)row * a.ldo + j * 8 + 2 * t) = pack2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
    }
}

#if ATT_DETECT
/* ---- detection inside the kernel ------------------------------------------
 * A CTA takes one work item, in the order the CTAs start (det[0]): the
 * detection parts of the first `ahead` groups, then for each group g the
 * parts of group g + ahead followed by g's attention items (its heads, or
 * one with a per-head mask). An attention item waits for its group's
 * parts, which CTAs that started before it took, and those wait for
 * nothing: no deadlock whatever the hardware runs at once. Memory-bound
 * detection of later groups runs beside the tensor-core work of earlier
 * ones. One item a CTA, not a loop over items: with the loop the attention
 * took 125 registers (116 now, 106 without detection); at 128 two CTAs no
 * longer fit an SM. */
constexpr int ROW_UNITS = BLOCK * MASK_BYTES / 16, BLOCK_UNITS = BLOCK * ROW_UNITS;
static_assert(BLOCK_UNITS % THREADS == 0, "detection: whole 16-byte loads per thread");

/* item -> (detect: part >= 0, or attend: part = -1 - item of the group),
 * group; false past the last item */
PIT_DEV bool work_item(const attn_args &a, int t, int &g, int &part)
{
    const int nd = a.parts, na = a.heads, W = a.ahead, G = a.groups;
    if (t < W * nd) {
        g = t / nd, part = t % nd;
        return true;
    }
    t -= W * nd;
    const int S = nd + na;
    if (t < (G - W) * S) {
        g = t / S;
        const int r = t % S;
        if (r < nd) g += W, part = r;
        else part = -1 - (r - nd);
        return true;
    }
    t -= (G - W) * S;
    g = G - W + t / na, part = -1 - t % na;
    return g < G;
}

/* 16 bytes of mask: bit 0 some element non-zero, bit 1 some element zero
 * (non-zero on the bits, as detection: -0.0 is zero) */
PIT_DEV pit_u32 unit_flags(uint4 u)
{
    return mask_word_flags(u.x) | mask_word_flags(u.y) | mask_word_flags(u.z) | mask_word_flags(u.w);
}

/* Part `part` of group g: key blocks [part * part_blocks, ...) of query
 * block qb, appended to the index (out of order, atomics), marked full
 * when no element is zero; then the group's count of finished parts. */
PIT_DEV void detect_part(const attn_args &a, int g, int part)
{
    __shared__ pit_u32 any_bits, zero_bits;
    const int nkb = a.L / BLOCK, kb0 = part * a.part_blocks;
    const int nb = a.part_blocks < nkb - kb0 ? a.part_blocks : nkb - kb0;
    const int mb = a.ix.batched ? g / a.ix.gpb : 0, qb = a.ix.batched ? g % a.ix.gpb : g;
    const pit_u8 *rows = a.mask + ((pit_i64)mb * a.ms + (pit_i64)qb * BLOCK * a.mld) * MASK_BYTES;
    if (threadIdx.x == 0) any_bits = 0, zero_bits = 0;
    __syncthreads();
    pit_u32 any = 0, zero = 0;
    /* one block at a time: two in flight (or streaming loads, ld.cs) made
     * the call 0.03 ms slower on the H100 (docs/PERF-NOTES.md) */
#pragma unroll 1
    for (int j = 0; j < nb; ++j) {
        const pit_u8 *blk = rows + (pit_i64)(kb0 + j) * BLOCK * MASK_BYTES;
        uint4 u[BLOCK_UNITS / THREADS];
#pragma unroll
        for (int i = 0; i < BLOCK_UNITS / THREADS; ++i) {
            const int unit = threadIdx.x + i * THREADS, r = unit / ROW_UNITS, c = unit % ROW_UNITS;
            u[i] = __ldg((const uint4 *)(blk + (pit_i64)r * a.mld * MASK_BYTES) + c);
        }
        pit_u32 f = 0;
#pragma unroll
        for (int i = 0; i < BLOCK_UNITS / THREADS; ++i) f |= unit_flags(u[i]);
        any |= (f & 1u) << j, zero |= (f >> 1) << j;
    }
    /* a warp's bits, then the CTA's */
#pragma unroll 1
    for (int j = 0; j < nb; ++j) {
        const pit_u32 ba = pit_ballot((any >> j) & 1u), bz = pit_ballot((zero >> j) & 1u);
        if (pit_lane() == 0) {
            if (ba) pit_atomic_or(&any_bits, 1u << j);
            if (bz) pit_atomic_or(&zero_bits, 1u << j);
        }
    }
    __syncthreads();
    if (threadIdx.x < PIT_WARP) {
        const int j = threadIdx.x;
        const bool on = j < nb && ((any_bits >> j) & 1u);
        if (on) {
            /* the index this launch fills (read-only to every other kernel) */
            const int slot = pit_atomic_add(const_cast<int *>(a.ix.counts) + g, 1);
            const int full = (zero_bits >> j) & 1u ? 0 : PIT_ENTRY_FULL;
            const_cast<int *>(a.ix.entries)[(pit_i64)g * a.ix.capacity + slot] = (kb0 + j) | full;
        }
        const int n = pit_popc(pit_ballot(on));
        if (j == 0 && n) pit_atomic_add(a.total, n);
        pit_fence_device();
    }
    __syncthreads();
    if (threadIdx.x == 0) pit_atomic_add(a.det + 1 + g, 1);
}

/* Waits (one thread, then the CTA) until group g's parts are all in. */
PIT_DEV void wait_detected(const attn_args &a, int g)
{
    if (threadIdx.x == 0)
        while (pit_ld_acquire(a.det + 1 + g) < a.parts) pit_sleep();
    __syncthreads();
}

#endif

PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attention(const attn_args a)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    pit_u8 *smem = smem_raw + (ALIGN ? (ALIGN - (pit_smem_addr(smem_raw) & (ALIGN - 1))) & (ALIGN - 1) : 0);
#if !ATT_DETECT
    int b, qb;
    attn_work(a, b, qb);
    attend(a, smem, b, qb);
#else
    /* one item a CTA, in the order the CTAs start (not blockIdx's) */
    __shared__ int item;
    if (threadIdx.x == 0) item = pit_atomic_add(a.det, 1);
    __syncthreads();
    int g, part;
    if (!work_item(a, item, g, part)) return;
    if (part >= 0) {
        detect_part(a, g, part);
        return;
    }
    wait_detected(a, g);
    /* a shared index: item i of group g is head i; per head: its one item */
    if (a.ix.batched) attend(a, smem, g / a.ix.gpb, g % a.ix.gpb);
    else attend(a, smem, -1 - part, g);
#endif
}
#endif

/* ======================================================================== */
#if PIT_OP == 2
/* SDDMM on CUDA cores. CTA = 32x32 part of one indexed block: x = entry
 * slot x part, y = row-block, z = batch; 256 threads, 2x2 outputs each.
 * C was zeroed before; only the listed blocks are written here. */
extern "C" __device__ const int pit_smem_bytes = 0;

struct sddmm_args {
    const pit_u8 *a, *b, *mask;
    pit_u8 *c;
    pit_i64 lda, ldb, ldc, mld;
    pit_i64 sa, sb, sc, ms;
    pit_ix ix;
    int M, N, K, br, bc, parts_c; /* parts_c: 32-wide parts across a block */
};

PIT_KERNEL void __launch_bounds__(256) pit_op_sddmm(const sddmm_args p)
{
    __shared__ float As[32][33], Bs[32][33];
    const int parts = ((p.br + 31) / 32) * p.parts_c;
    const int i = blockIdx.x / parts, part = blockIdx.x % parts, batch = blockIdx.z;
    const int grp = ix_group(p.ix, batch, blockIdx.y);
    if (i >= __ldg(p.ix.counts + grp)) return;
    const int blk = pit_entry_index(__ldg(p.ix.entries + (pit_i64)grp * p.ix.capacity + i));
    const int rb0 = blockIdx.y * p.br, cb0 = blk * p.bc;
    const int row0 = rb0 + (part / p.parts_c) * 32, col0 = cb0 + (part % p.parts_c) * 32;
    const int rend = min(rb0 + p.br, p.M), cend = min(cb0 + p.bc, p.N);
    const T *A = (const T *)p.a + batch * p.sa, *B = (const T *)p.b + batch * p.sb;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int k0 = 0; k0 < p.K; k0 += 32) {
        for (int u = threadIdx.x; u < 32 * 32; u += 256) {
            int r = u / 32, kk = u % 32, k = k0 + kk;
            As[r][kk] = row0 + r < rend && k < p.K ? pit_to_float(A[(pit_i64)(row0 + r) * p.lda + k]) : 0.f;
            Bs[r][kk] = col0 + r < cend && k < p.K ? pit_to_float(B[(pit_i64)(col0 + r) * p.ldb + k]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < 32; ++kk)
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
                for (int y = 0; y < 2; ++y) acc[x][y] = fmaf(As[ty * 2 + x][kk], Bs[tx * 2 + y][kk], acc[x][y]);
        __syncthreads();
    }
    const pit_u8 *mask = p.mask + (pit_i64)batch * p.ms * MASK_BYTES;
    T *C = (T *)p.c + batch * p.sc;
#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int y = 0; y < 2; ++y) {
            int r = row0 + ty * 2 + x, col = col0 + tx * 2 + y;
            if (r < rend && col < cend)
                C[(pit_i64)r * p.ldc + col] = pit_from_float<T>(mask_on(mask, (pit_i64)r * p.mld + col) ? acc[x][y] : 0.f);
        }
}
#endif

/* ======================================================================== */
#if PIT_OP == 3 || PIT_OP == 4
/* Sparse softmax (3) and its backward (4). CTA = one row-block of the
 * index (y = batch), a warp per row. A shared bitmap of the listed column
 * blocks lets pass 2 write every element of the row (0 off the pattern)
 * while pass 1 reads only the listed blocks. Out may be the input. */
extern "C" __device__ const int pit_smem_bytes = 0;
#define SOFTMAX_MAX_BLOCKS 65536

struct softmax_args {
    const pit_u8 *x, *y, *mask; /* fwd: x = X; bwd: x = Y, y = dY */
    pit_u8 *out;
    pit_i64 ldx, ldy, mld, ldo;
    pit_i64 sx, sy, ms, so;
    pit_ix ix;
    int M, N, br, bc;
    float scale;
    int pad;
};

PIT_KERNEL void __launch_bounds__(256) pit_op_softmax(const softmax_args p)
{
    __shared__ pit_u32 listed[SOFTMAX_MAX_BLOCKS / 32];
    const int batch = blockIdx.y, grp = ix_group(p.ix, batch, blockIdx.x);
    const int count = __ldg(p.ix.counts + grp);
    const int *ent = p.ix.entries + (pit_i64)grp * p.ix.capacity;
    const int nwords = (p.ix.capacity + 31) / 32;
    for (int w = threadIdx.x; w < nwords; w += blockDim.x) listed[w] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        int e = pit_entry_index(__ldg(ent + i));
        pit_atomic_or(&listed[e / 32], 1u << (e % 32));
    }
    __syncthreads();
    const T *X = (const T *)p.x + batch * p.sx;
#if PIT_OP == 4
    const T *Y = (const T *)p.y + batch * p.sy;
#endif
    const pit_u8 *mask = p.mask + (pit_i64)batch * p.ms * MASK_BYTES;
    T *O = (T *)p.out + batch * p.so;
    const int lane = pit_lane(), warp = threadIdx.x / 32;
    const int rend = min((int)blockIdx.x * p.br + p.br, p.M);
    for (int r = blockIdx.x * p.br + warp; r < rend; r += blockDim.x / 32) {
        const T *xr = X + (pit_i64)r * p.ldx;
#if PIT_OP == 4
        const T *yr = Y + (pit_i64)r * p.ldy;
#endif
        const pit_i64 mr = (pit_i64)r * p.mld;
        /* pass 1 over the listed blocks: fwd running (max, sum), bwd sum(dY*Y) */
        float mx = PIT_NEG_INF, sum = 0.f;
        for (int i = 0; i < count; ++i) {
            int c0 = pit_entry_index(__ldg(ent + i)) * p.bc, c1 = min(c0 + p.bc, p.N);
            for (int c = c0 + lane; c < c1; c += 32) {
                if (!mask_on(mask, mr + c)) continue;
#if PIT_OP == 3
                float v = pit_to_float(xr[c]) * p.scale;
                if (v > mx) {
                    sum = sum * exp2f((mx - v) * 1.4426950408889634f) + 1.f;
                    mx = v;
                } else {
                    sum += exp2f((v - mx) * 1.4426950408889634f);
                }
#else
                sum += pit_to_float(xr[c]) * pit_to_float(yr[c]);
#endif
            }
        }
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
#if PIT_OP == 3
            float om = shfl_xor_f(mx, d), os = shfl_xor_f(sum, d);
            float nm = fmaxf(mx, om);
            float a = mx == PIT_NEG_INF ? 0.f : sum * exp2f((mx - nm) * 1.4426950408889634f);
            float b = om == PIT_NEG_INF ? 0.f : os * exp2f((om - nm) * 1.4426950408889634f);
            mx = nm;
            sum = a + b;
#else
            sum += shfl_xor_f(sum, d);
#endif
        }
        /* pass 2: every element of the row */
#if PIT_OP == 3
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
#endif
        for (int c = lane; c < p.N; c += 32) {
            int blk = c / p.bc;
            bool on = ((listed[blk / 32] >> (blk % 32)) & 1u) && mask_on(mask, mr + c);
            float v = 0.f;
#if PIT_OP == 3
            if (on) v = exp2f((pit_to_float(xr[c]) * p.scale - mx) * 1.4426950408889634f) * inv;
#else
            if (on) v = p.scale * pit_to_float(xr[c]) * (pit_to_float(yr[c]) - sum);
#endif
            O[(pit_i64)r * p.ldo + c] = pit_from_float<T>(v);
        }
    }
}
#endif

/* ======================================================================== */
#if PIT_OP == 5
/* MoE routing: slot s = t*k + j goes to expert ids[t][j]; out of order,
 * atomics, no sort. counts and total were zeroed. */
extern "C" __device__ const int pit_smem_bytes = 0;

struct route_args {
    const int *ids;
    int *counts, *entries, *total;
    pit_i64 ld;
    int T, k, E, capacity;
};

PIT_KERNEL void __launch_bounds__(256) pit_op_route(const route_args a)
{
    const pit_i64 s = (pit_i64)blockIdx.x * 256 + threadIdx.x;
    bool routed = false;
    if (s < (pit_i64)a.T * a.k) {
        const int t = (int)(s / a.k), j = (int)(s % a.k);
        const int e = __ldg(a.ids + (pit_i64)t * a.ld + j);
        if (e >= 0 && e < a.E) {
            const int pos = pit_atomic_add(a.counts + e, 1);
            a.entries[(pit_i64)e * a.capacity + pos] = (int)s;
            routed = true;
        }
    }
    const pit_u32 votes = pit_ballot(routed); /* one total update per warp */
    if (pit_lane() == 0 && votes) pit_atomic_add(a.total, pit_popc(votes));
}
#endif

/* ======================================================================== */
#if PIT_OP == 6
/* Mode 0, the work list of a gathered GEMM: for each group, ceil(count /
 * bm) triples (group, first row, the group's rows), groups in order
 * (neighbouring CTAs share a weight matrix in L2); list[0] = number of
 * triples. A tile's three numbers load at once (no load waits on another).
 * Mode 2: the same, groups in plan_mix's order. Mode 1: the groups by
 * falling count (the fused attention's order). One CTA of 1024 threads. */
extern "C" __device__ const int pit_smem_bytes = 0;

struct plan_args {
    const int *counts;
    int *list; /* mode 0: [0] = n, then triples; mode 1: the order */
    int groups, bm, capacity, mode;
};

/* Exclusive prefix sum of c over the CTA's 1024 threads (all must call). */
PIT_DEV int block_exclusive_sum(int c, int *warp_sum)
{
    const int lane = pit_lane(), warp = threadIdx.x / 32;
    int incl = c;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        int o = pit_shfl(incl, lane >= d ? lane - d : lane);
        if (lane >= d) incl += o;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int w = warp_sum[lane], wi = w;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            int o = pit_shfl(wi, lane >= d ? lane - d : lane);
            if (lane >= d) wi += o;
        }
        warp_sum[lane] = wi - w; /* exclusive */
    }
    __syncthreads();
    const int r = warp_sum[warp] + incl - c;
    __syncthreads(); /* warp_sum free for the next call */
    return r;
}

/* Mode 1: list[0..groups) = the groups by falling count (a counting sort,
 * capacity < 1024 so a bin per thread; ties in any order). */
PIT_DEV void plan_order(const plan_args &a, int *warp_sum)
{
    __shared__ int bin[1024];
    bin[threadIdx.x] = 0;
    __syncthreads();
    for (int g = threadIdx.x; g < a.groups; g += 1024)
        atomicAdd(&bin[a.capacity - min(__ldg(a.counts + g), a.capacity)], 1);
    __syncthreads();
    const int at = block_exclusive_sum(bin[threadIdx.x], warp_sum);
    bin[threadIdx.x] = at;
    __syncthreads();
    for (int g = threadIdx.x; g < a.groups; g += 1024)
        a.list[atomicAdd(&bin[a.capacity - min(__ldg(a.counts + g), a.capacity)], 1)] = g;
}

/* Mode 2 (groups <= 1024): the groups' order for the work list, largest
 * and smallest alternating (rank 0, rank G - 1, rank 1, ...): a wave of
 * CTAs mixes tiles of a large group, which share its weights in L2 and
 * are bound by the tensor cores, with tiles of small groups, which are
 * bound by reading their weights. */
PIT_DEV void plan_mix(const plan_args &a, int *order)
{
    __shared__ int cnt[1024];
    const int g = threadIdx.x, G = a.groups;
    if (g < G) cnt[g] = min(__ldg(a.counts + g), a.capacity);
    __syncthreads();
    if (g < G) {
        int rank = 0;
        for (int h = 0; h < G; ++h) rank += cnt[h] > cnt[g] || (cnt[h] == cnt[g] && h < g);
        order[rank < (G + 1) / 2 ? 2 * rank : 2 * (G - 1 - rank) + 1] = g;
    }
    __syncthreads();
}

PIT_KERNEL void __launch_bounds__(1024) pit_op_plan(const plan_args a)
{
    __shared__ int warp_sum[32];
    __shared__ int base;
    if (a.mode == 1) {
        plan_order(a, warp_sum);
        return;
    }
    __shared__ int order[1024];
    const bool mix = a.mode == 2 && a.groups <= 1024;
    if (mix) plan_mix(a, order);
    if (threadIdx.x == 0) base = 0;
    __syncthreads();
    for (int g0 = 0; g0 < a.groups; g0 += 1024) {
        const int g = mix ? (threadIdx.x < a.groups ? order[threadIdx.x] : a.groups) : g0 + threadIdx.x;
        const int cnt = g < a.groups ? min(__ldg(a.counts + g), a.capacity) : 0;
        const int c = (cnt + a.bm - 1) / a.bm;
        const int at = base + block_exclusive_sum(c, warp_sum);
        for (int q = 0; q < c; ++q) {
            a.list[1 + 3 * (at + q)] = g;
            a.list[2 + 3 * (at + q)] = q * a.bm;
            a.list[3 + 3 * (at + q)] = cnt;
        }
        __syncthreads();
        if (threadIdx.x == 1023) base = at + c;
        __syncthreads();
    }
    if (threadIdx.x == 0) a.list[0] = base;
}
#endif

/* ======================================================================== */
#if PIT_OP == 7 || PIT_OP == 8
/* Gathered GEMM: for group g (expert, or batch for matmul_rows) and its
 * listed slots s (rows of the output), out[s / kdiv] (+)= gate(s) *
 * A[s / kdiv] . B[g]. SRead gathers A's rows, SWrite scatters with the gate.
 * ACC 0: plain store of T; ACC 1: atomicAdd into the f32 target acc. */
/* a CUtensorMap: 128 opaque bytes, 64-byte aligned (also in parameter space) */
struct alignas(64) pit_tensor_map {
    pit_u64 w[16];
};

struct gmm_args {
    pit_tensor_map map_b; /* TMA_B: B as [groups, K, N] (or [1, K, N] when sb = 0) */
    const pit_u8 *a, *b, *d; /* d: MoE mode 2/3 second operand dY */
    pit_u8 *c;
    float *acc;
    const float *gates; /* [T,k] f32, row stride ldg; NULL: 1 */
    const int *counts, *entries, *list;
    pit_i64 lda, ldb, ldc, ldd, ldacc, ldg;
    pit_i64 sa, sb, sc, sacc; /* per-group strides (elements) */
    int M, N, K, kdiv, capacity, ntn; /* M: rows of dW (H) in MoE mode 2 */
};

PIT_DEV float gate_of(const gmm_args &p, int slot)
{
    if (!p.gates) return 1.f;
    return __ldg(p.gates + (pit_i64)(slot / p.kdiv) * p.ldg + slot % p.kdiv);
}
#endif

#if PIT_OP == 7
/* Tensor cores, 16-bit, rows 16-byte aligned, K and N multiples of 8.
 * Defines: BM BN BK STAGES (THREADS = 256). Persistent CTAs walk the work
 * list (pairs from pit_op_plan) x n-tiles, n-tile fastest so concurrent
 * CTAs share the gathered A rows and B in L2. Two main loops:
 *
 * wgmma (sm_90a, tile 128 x {128, 256} x 64): two warpgroups, each 64 rows
 * x BN with its accumulators in registers, both operands read by the
 * tensor cores from shared memory under 128-byte swizzle (pit_port.cuh).
 * One barrier a stage; stage c + STAGES - 2 is copied while wgmma's of
 * stages c and c - 1 are in flight.
 *
 * mma.sync (sm_80+ and other tiles): 2 x 4 warps, CUTLASS's multistage
 * loop: a warp's fragments are double-buffered in registers, those of the
 * next k-step (of the next stage too) are loaded while the mma's of this
 * one issue, and a stage's one barrier comes before its last k-step: mma's
 * rarely wait for their ldmatrix, and ptxas can interleave the cp.async
 * address math with the mma's. */
#if PIT_HAS_WGMMA && BM == 128 && BK == 64 && (BN == 128 || BN == 256)
#define GMM_WGMMA 1
#else
#define GMM_WGMMA 0
#endif
/* TMA_B (wgmma only): B's stages come through the tensor copy engine, one
 * thread's BN / 64 box loads a stage completing on the stage's mbarrier,
 * instead of 16-byte cp.async copies from every thread */
#if !defined(TMA_B) || !GMM_WGMMA
#undef TMA_B
#define TMA_B 0
#endif
/* WS (with TMA_B): warp-specialised. Warpgroup 0 only copies (A's gathered
 * rows by cp.async, B by TMA) up to STAGES k-steps ahead, warpgroups 1 and
 * 2 only multiply, 64 rows each: a full and an empty barrier a stage
 * instead of a CTA barrier a k-step, and the copies' address math off the
 * wgmma warps. */
#if !defined(WS) || !TMA_B
#undef WS
#define WS 0
#endif
/* PAIR (with WS): the two CTAs of a cluster take the halves of a 256-row
 * work item (128 rows each; 64 where it has 128 or fewer) at the same
 * n-tile, and each copies half of B's boxes into both (TMA multicast): B
 * crosses from L2 once for up to 256 rows, which halves the bytes the
 * weights put on L2, the bound of the unpaired kernel. A stage goes back
 * to the copiers once the multiplying warps of both CTAs are done with it. */
#if !defined(PAIR) || !WS
#undef PAIR
#define PAIR 0
#endif
constexpr int CTAS_AN_ITEM = PAIR ? 2 : 1;
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
/* after the stages: TMA_B's barriers, one a stage (8 bytes each), then
 * under WS with stores (EPI_BULK) the output tile's staging rows, padded
 * 16 bytes so the 8 rows of a warp's store hit different banks */
#if WS && !ACC
#define EPI_BULK 1
#else
#define EPI_BULK 0
#endif
constexpr int C_ROW = BN * 2 + 16, C_AT = STAGE_BYTES + (TMA_B ? 8 * STAGES : 0) + (WS ? 8 * STAGES : 0);
constexpr int SMEM = C_AT + (EPI_BULK ? BM * C_ROW : 0) + 1024;
/* a stage's "full" barrier (its copies landed) and, under WS, its "empty"
 * one (its wgmma's are done) */
PIT_DEV pit_u32 gmm_stage_bar(pit_u32 stages_addr, int s) { return stages_addr + STAGE_BYTES + 8 * s; }
PIT_DEV pit_u32 gmm_empty_bar(pit_u32 stages_addr, int s) { return stages_addr + STAGE_BYTES + 8 * (STAGES + s); }
/* LAG: wgmma groups left in flight at the end of a k-step (wait_group LAG);
 * the copies run STAGES - 1 - LAG k-steps ahead. LAG 0 (one more stage
 * ahead, the tensor cores idle across each barrier) measured the same on
 * the MoE bench, within noise. */
constexpr int LAG = 1, AHEAD = STAGES - 1 - LAG;
static_assert(AHEAD >= 1, "gmm wgmma pipeline");
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
static_assert(A_UNITS % CT == 0 && B_UNITS % CT == 0, "gmm loads");

/* CTAs an SM should hold, so the registers stay within their share: 2 up
 * to 64 accumulators a thread (the default 128 x 128 tile: <= 128
 * registers), 3 for small tiles whose shared memory allows it (<= 80), 1
 * above (no bound). AMD's macro takes the thread count only. */
constexpr bool GMM_SMALL = MI * NI <= 8 && MI * 4 + NI * 2 <= 16 && 3 * (SMEM + BM * 8 + 1024) <= 228 * 1024;
constexpr int GMM_MINB = GMM_WGMMA ? (2 * SMEM <= 227 * 1024 ? 2 : 1) : GMM_SMALL ? 3 : MI * NI <= 16 ? 2 : 1;
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

PIT_DEV void gmm_issue(const gmm_args &p, const gmm_tile &w, const int (&tok)[A_PER], pit_u8 *smem, int s, int c,
                       bool live)
{
    constexpr int AU = BK / 8, BU = BN / 8;
    constexpr bool BE = CT % BU == 0;
    static_assert(CT % AU == 0, "gmm: a thread's A units share their k");
    static_assert(!GMM_WGMMA || ((CT / AU) % 8 == 0 && (TMA_B || (BE && (CT / BU) % 8 == 0))), "gmm swizzle");
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
#if TMA_B
    /* b_at's layout is the copy engine's 128-byte swizzle of 64 x BK boxes
     * (the swizzle follows the 1024-byte aligned shared address); rows past
     * K and columns past N arrive as zeros */
    (void)B;
    if (t == 0 && live) {
        const pit_u32 bar = gmm_stage_bar(pit_smem_addr(smem), s), dst = pit_smem_addr(Bs);
        pit_mbar_expect_tx(bar, B_STAGE); /* under PAIR half of it comes from the peer's copies */
        const int z = p.sb ? w.grp : 0;
#pragma unroll
        for (int j = PAIR ? (int)pit_cluster_rank() : 0; j < BN / 64; j += PAIR ? 2 : 1) {
            const pit_u32 to = dst + j * BK * 128;
            if (PAIR)
                pit_tma_load_3d_multicast(to, &p.map_b, bar, w.n0 + j * 64, c * BK, z, 3);
            else
                pit_tma_load_3d(to, &p.map_b, bar, w.n0 + j * 64, c * BK, z);
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
PIT_DEV gmm_tile gmm_tile_of(const gmm_args &p, int tile, int total)
{
    gmm_tile w = {0, 0, 0, 0};
    if (tile >= total) return w;
    const int *e = p.list + 1 + 3 * (tile / p.ntn);
    w.grp = __ldg(e);
    w.row0 = __ldg(e + 1);
    w.count = __ldg(e + 2);
    w.n0 = (tile % p.ntn) * BN;
    return w;
}

/* Row r of the tile: its slot in the group's list, -1 past its rows. */
PIT_DEV int gmm_slot(const gmm_args &p, const gmm_tile &w, int r)
{
    const int P = w.row0 + r;
    return P < w.count ? __ldg(p.entries + (pit_i64)w.grp * p.capacity + P) : -1;
}

/* the tokens of the A rows this thread copies (see gmm_issue) */
PIT_DEV void gmm_tokens(const gmm_args &p, const gmm_tile &w, int (&tok)[A_PER])
{
#pragma unroll
    for (int i = 0; i < A_PER; ++i) {
        const int slot = gmm_slot(p, w, threadIdx.x / (BK / 8) + i * (CT / (BK / 8)));
        tok[i] = slot < 0 ? -1 : slot / p.kdiv;
    }
}

/* A warp's output rows: wm0 + 16 mi + lane / 4 + 8 h. Slots and gates load
 * apart, so a kernel can issue the gates' loads once the slots are in. */
template <int MI_> struct gmm_rows {
    int slot[MI_][2];
    float gate[MI_][2];
};
template <int MI_> PIT_DEV void gmm_rows_slots(const gmm_args &p, const gmm_tile &w, int wm0, gmm_rows<MI_> &o)
{
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) o.slot[mi][h] = gmm_slot(p, w, wm0 + mi * 16 + (pit_lane() >> 2) + 8 * h);
}
template <int MI_> PIT_DEV void gmm_rows_gates(const gmm_args &p, gmm_rows<MI_> &o)
{
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) o.gate[mi][h] = o.slot[mi][h] < 0 ? 0.f : gate_of(p, o.slot[mi][h]);
}

/* SWrite of a warp's accumulators (m16n8 layout, MI_ x NI_ blocks) of
 * rows `rows` from column wn0 of the tile. */
template <int MI_, int NI_>
PIT_DEV void gmm_swrite(const gmm_args &p, const gmm_tile &w, const gmm_rows<MI_> &rows, int wn0,
                        const float (&acc)[MI_][NI_][4])
{
    const int lane = pit_lane();
#pragma unroll
    for (int mi = 0; mi < MI_; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (rows.slot[mi][h] < 0) continue;
            const int tok = rows.slot[mi][h] / p.kdiv;
            const float gt = rows.gate[mi][h];
#pragma unroll
            for (int ni = 0; ni < NI_; ++ni) {
                const int n = w.n0 + wn0 + ni * 8 + (lane & 3) * 2;
                if (n >= p.N) continue;
                float v0 = gt * acc[mi][ni][2 * h], v1 = gt * acc[mi][ni][2 * h + 1];
#if ACC
                float *dst = p.acc + w.grp * p.sacc + (pit_i64)tok * p.ldacc + n;
                pit_atomic_addf(dst, v0);
                pit_atomic_addf(dst + 1, v1);
#else
                T *dst = (T *)p.c + w.grp * p.sc + (pit_i64)tok * p.ldc + n;
                *(pit_u32 *)dst = pack2(v0, v1);
#endif
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
        const pit_u64 db = pit_wgmma_desc(b0 + ks * 16 * 128, BK * 128, 1024);
        pit_wgmma<PIT_DTYPE>(d, da, db);
    }
}

/* The copies' side of the pipeline: the tile and k-step it copies next
 * (tile >= total: done) and the tokens of its A rows. */
struct gmm_feed {
    gmm_tile w, next; /* next: the tile after, loaded a tile early */
    int tile, c, tok[A_PER];
};

PIT_DEV void gmm_feed_start(const gmm_args &p, gmm_feed &f, int total)
{
    f.tile = blockIdx.x;
    f.c = 0;
    f.w = gmm_tile_of(p, f.tile, total);
    gmm_tokens(p, f.w, f.tok);
    f.next = gmm_tile_of(p, f.tile + gridDim.x, total);
}

/* copies of the next k-step into slot s (none past the last tile) */
PIT_DEV void gmm_feed_next(const gmm_args &p, gmm_feed &f, pit_u8 *smem, int s, int total, int nk)
{
    if (f.tile >= total) return;
    gmm_issue(p, f.w, f.tok, smem, s, f.c, true);
    if (++f.c < nk) return;
    f.c = 0;
    f.tile += gridDim.x;
    f.w = f.next;
    gmm_tokens(p, f.w, f.tok);
    f.next = gmm_tile_of(p, f.tile + gridDim.x, total);
}

#if WS
/* Registers a thread: the copying warpgroup gives most of its share to the
 * multiplying ones (128 x 56 + 256 x 224 = 64512 of 65536; the copiers
 * spill below 56) */
constexpr int WS_COPY_REGS = 56, WS_MMA_REGS = 224, WS_MMA_WARPS = 8;

/* The CTA's work items: item, item + step, ... (a pair walks them together,
 * each CTA with its half of the rows) */
PIT_DEV int gmm_ws_first(void) { return blockIdx.x / CTAS_AN_ITEM; }
PIT_DEV int gmm_ws_step(void) { return gridDim.x / CTAS_AN_ITEM; }
PIT_DEV gmm_tile gmm_ws_tile(const gmm_args &p, int item, int total)
{
    gmm_tile w = gmm_tile_of(p, item, total);
#if PAIR
    const int half = w.count - w.row0 > 128 ? 128 : 64;
    w.row0 += (int)pit_cluster_rank() * half;
    w.count = min(w.count, w.row0 + half);
#endif
    return w;
}

/* A multiplying warp hands slot s back to the copiers (of both CTAs under
 * PAIR: each copies into both) */
PIT_DEV void gmm_ws_release(pit_u32 sbase, int s)
{
#if PAIR
    pit_mbar_arrive_at(gmm_empty_bar(sbase, s), 0);
    pit_mbar_arrive_at(gmm_empty_bar(sbase, s), 1);
#else
    pit_mbar_arrive(gmm_empty_bar(sbase, s));
#endif
}

/* Warpgroup 0: the copies of every k-step of the CTA's tiles into the
 * stages in turn, each stage once the wgmma's of its last use are done
 * (its empty barrier). A thread's A copies arrive on the stage's full
 * barrier when they land; B's TMA bytes complete on it too. */
PIT_DEV void gmm_ws_copy(const gmm_args &p, pit_u8 *smem, pit_u32 sbase, int total, int nk)
{
    int q = 0; /* k-step, counted over the CTA's tiles: stage q % STAGES */
    for (int item = gmm_ws_first(); item < total; item += gmm_ws_step()) {
        const gmm_tile w = gmm_ws_tile(p, item, total);
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
        if (first_lane) gmm_ws_release(sbase, q % STAGES);
    }
}

#if EPI_BULK
/* SWrite through shared memory: the warp's 16 rows, gated and packed, go to
 * its part of the staging tile at shared address part, then each row leaves
 * as one bulk copy (its BN outputs are contiguous in the token's row) while
 * the next tile's k-steps run. The part is written again once the warp's
 * previous copies have read it. */
PIT_DEV void gmm_swrite_bulk(const gmm_args &p, const gmm_tile &w, const gmm_rows<1> &rows, pit_u32 part,
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
        for (int ni = 0; ni < BN / 8; ++ni)
            pit_st_shared_u32(row + ni * 16, pack2(gt * acc[0][ni][2 * h], gt * acc[0][ni][2 * h + 1]));
    }
    pit_fence_async_smem(); /* the rows, written by this warp, before the copy engine reads them */
    __syncwarp();
    /* row `lane` (< 16) of the warp: its slot is held by lane 4 (lane % 8) */
    const int s0 = pit_shfl(rows.slot[0][0], 4 * (lane & 7));
    const int s1 = pit_shfl(rows.slot[0][1], 4 * (lane & 7));
    const int slot = lane < 8 ? s0 : s1;
    if (lane < 16 && slot >= 0) {
        T *dst = (T *)p.c + w.grp * p.sc + (pit_i64)(slot / p.kdiv) * p.ldc + w.n0;
        pit_bulk_store(dst, part + lane * C_ROW, (pit_u32)min(BN, p.N - w.n0) * 2);
    }
    pit_bulk_commit();
}
#endif

/* Warpgroup 1 + cw: rows 64 cw .. 64 cw + 63 of every tile; the tile's
 * rows and gates load a tile early. */
PIT_DEV void gmm_ws_multiply(const gmm_args &p, pit_u32 sbase, int total, int nk, int cw)
{
    const int wm0 = cw * 64 + (threadIdx.x / 32 % 4) * 16;
    const bool first_lane = pit_lane() == 0;
    int q = 0;
    gmm_tile next = gmm_ws_tile(p, gmm_ws_first(), total);
    gmm_rows<1> rows_next;
    gmm_rows_slots(p, next, wm0, rows_next);
    gmm_rows_gates(p, rows_next);
    for (int item = gmm_ws_first(); item < total; item += gmm_ws_step()) {
        const gmm_tile w = next;
        next = gmm_ws_tile(p, item + gmm_ws_step(), total);
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
#if EPI_BULK
        gmm_swrite_bulk(p, w, rows, sbase + C_AT + wm0 * C_ROW, acc);
#else
        gmm_swrite<1, BN / 8>(p, w, rows, 0, acc);
#endif
    }
    if (EPI_BULK) pit_bulk_wait<false>();
}

PIT_KERNEL void GMM_BOUNDS pit_op_gmm_tc(const __grid_constant__ gmm_args p)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    pit_u8 *smem = smem_raw + ((1024 - (pit_smem_addr(smem_raw) & 1023)) & 1023);
    const pit_u32 sbase = pit_smem_addr(smem);
    const int total = __ldg(p.list) * p.ntn, nk = (p.K + BK - 1) / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            pit_mbar_init(gmm_stage_bar(sbase, s), CT + 1); /* the copiers, and B's bytes announced */
            pit_mbar_init(gmm_empty_bar(sbase, s), WS_MMA_WARPS * CTAS_AN_ITEM);
        }
        pit_fence_mbar_init();
    }
#if PAIR
    pit_cluster_sync(); /* the peer's barriers are set up before copies or arrivals reach them */
#else
    __syncthreads();
#endif
    if (threadIdx.x < CT) {
        pit_regs_dec<WS_COPY_REGS>();
        gmm_ws_copy(p, smem, sbase, total, nk);
    } else {
        pit_regs_inc<WS_MMA_REGS>();
        gmm_ws_multiply(p, sbase, total, nk, threadIdx.x / 128 - 1);
    }
#if PAIR
    pit_cluster_sync(); /* no CTA leaves while its peer may still copy into it or arrive on its barriers */
#endif
}
#else
/* The copies run AHEAD k-steps ahead of the wgmma's, across tiles: the
 * next tile's first stages land during this one's last k-steps and SWrite.
 * K-step q (counted over all of the CTA's tiles) is in slot q % STAGES. Its
 * barrier comes after every thread waited for the wgmma's of step
 * q - 1 - LAG (wait_group LAG of step q - 1), so that slot takes step
 * q + AHEAD. */
#if TMA_B
#define GMM_PARAM const __grid_constant__ gmm_args p /* the tensor map's address is taken */
#else
#define GMM_PARAM const gmm_args p
#endif
PIT_KERNEL void GMM_BOUNDS pit_op_gmm_tc(GMM_PARAM)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    /* 128-byte swizzle repeats every 1024 bytes: the stages start aligned */
    pit_u8 *smem = smem_raw + ((1024 - (pit_smem_addr(smem_raw) & 1023)) & 1023);
    const pit_u32 sbase = pit_smem_addr(smem);
    const int total = __ldg(p.list) * p.ntn, nk = (p.K + BK - 1) / BK;
    const int wg = threadIdx.x / 128, wm0 = wg * 64 + (threadIdx.x / 32 % 4) * 16;
#if TMA_B
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) pit_mbar_init(gmm_stage_bar(sbase, s), 1);
        pit_fence_mbar_init();
    }
    __syncthreads();
#endif
    gmm_feed f;
    gmm_feed_start(p, f, total);
#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        gmm_feed_next(p, f, smem, s, total, nk);
        pit_copy_commit();
    }
    int q = 0;
    gmm_tile next = gmm_tile_of(p, blockIdx.x, total);
    gmm_rows<1> rows_next; /* the next tile's rows: slots a tile early, gates after its predecessor's k-steps */
    gmm_rows_slots(p, next, wm0, rows_next);
    gmm_rows_gates(p, rows_next);
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
        /* this tile's numbers and rows were loaded a tile early: no wait
         * here, and no branch among the k-steps (a branch between the
         * wgmma's cost 3-10% on the MoE bench) */
        const gmm_tile w = next;
        next = gmm_tile_of(p, tile + gridDim.x, total);
        const gmm_rows<1> rows = rows_next;
        gmm_rows_slots(p, next, wm0, rows_next);
        float acc[1][BN / 8][4];
#pragma unroll
        for (int ni = 0; ni < BN / 8; ++ni) acc[0][ni][0] = acc[0][ni][1] = acc[0][ni][2] = acc[0][ni][3] = 0.f;
        for (int c = 0; c < nk; ++c, ++q) {
            pit_copy_wait<AHEAD - 1>();
#if TMA_B
            pit_mbar_wait(gmm_stage_bar(sbase, q % STAGES), (pit_u32)(q / STAGES) & 1u);
#endif
            pit_fence_async_smem();
            __syncthreads();
            gmm_feed_next(p, f, smem, (q + AHEAD) % STAGES, total, nk);
            pit_copy_commit();
            pit_wgmma_fence();
            gmm_wgmma_stage(acc, sbase, q % STAGES, wg);
            pit_wgmma_commit();
            pit_wgmma_wait<LAG>();
        }
        pit_wgmma_wait<0>();
        gmm_rows_gates(p, rows_next); /* its slots arrived during this tile */
        gmm_swrite<1, BN / 8>(p, w, rows, 0, acc);
    }
    pit_copy_wait<0>();
}
#endif /* WS */
#else
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

PIT_KERNEL void GMM_BOUNDS pit_op_gmm_tc(const gmm_args p)
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
#undef GMM_BOUNDS
#undef GMM_WGMMA
#endif

#if PIT_OP == 8
/* CUDA cores, any dtype and layout. 64x64 tile, BK 16, 256 threads with
 * 4x4 outputs each. Grid: x = n-tile, y = row chunk (mode 2: m-tile of H),
 * z = group. MODE 0: out = A[tok] . B[g] (forward, matmul_rows); 1: out =
 * A[tok] . B[g]^T (MoE dX); 2: out[g] = sum_s gate(s) A[tok]^T . D[tok] (MoE
 * dW, gathered along K, every tile written); 3: acc[slot] += sum_n
 * (A[tok] . B[g])[n] D[tok][n] (MoE dgates). */
extern "C" __device__ const int pit_smem_bytes = 0;
constexpr int BM = 64, BN = 64, BK = 16;

/* A(r, k) of the tile (r: gathered row, or H index in mode 2) */
PIT_DEV float gmm_a(const gmm_args &p, const T *A, const int *tok, int r, int k, int m_lim)
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

PIT_DEV float gmm_b(const gmm_args &p, const T *B, const int *tok, const float *gt, int k, int n)
{
    if (n >= p.N) return 0.f;
#if MODE == 2
    int t = tok[k];
    return t >= 0 ? gt[k] * pit_to_float(((const T *)p.d)[(pit_i64)t * p.ldd + n]) : 0.f;
#elif MODE == 1
    return k < p.K ? pit_to_float(B[(pit_i64)n * p.ldb + k]) : 0.f;
#else
    return k < p.K ? pit_to_float(B[(pit_i64)k * p.ldb + n]) : 0.f;
#endif
}

PIT_KERNEL void __launch_bounds__(256) pit_op_gmm_cc(const gmm_args p)
{
    __shared__ float As[BK][BM + 4], Bs[BK][BN + 4];
    __shared__ int tok[BM > BK ? BM : BK];
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
        tok[threadIdx.x] = s < 0 ? -1 : s / p.kdiv;
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
            tok[threadIdx.x] = s < 0 ? -1 : s / p.kdiv;
            gt[threadIdx.x] = s < 0 ? 0.f : gate_of(p, s);
        }
        __syncthreads();
        for (int u = threadIdx.x; u < BK * BM; u += 256) {
            int kk = u / BM, r = u % BM;
            As[kk][r] = gmm_a(p, A, tok, m0 + r, kk, m_lim);
        }
        for (int u = threadIdx.x; u < BK * BN; u += 256) {
            int kk = u / BN, nn = u % BN;
            Bs[kk][nn] = gmm_b(p, B, tok, gt, kk, n0 + nn);
        }
#else
        for (int u = threadIdx.x; u < BK * BM; u += 256) {
            int r = u / BK, kk = u % BK;
            As[kk][r] = gmm_a(p, A, tok, r, c * BK + kk, m_lim);
        }
        for (int u = threadIdx.x; u < BK * BN; u += 256) {
            int kk = MODE == 1 ? u % BK : u / BN, nn = MODE == 1 ? u / BK : u % BN;
            Bs[kk][nn] = gmm_b(p, B, tok, gt, c * BK + kk, n0 + nn);
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
        int r = ty * 4 + i, t = tok[r];
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
        int r = ty * 4 + i, t = tok[r];
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

/* ======================================================================== */
#if PIT_OP >= 9 && PIT_OP <= 11
/* Elementwise and layout helpers on [batch, rows, cols] strided views. */
extern "C" __device__ const int pit_smem_bytes = 0;

struct ew_args {
    const pit_u8 *x;
    pit_u8 *y;
    const int *ids; /* zero: when set, only rows r whose ids[b * sid + r * ldid] is outside 0..E-1 */
    pit_i64 ldx, sx, ldy, sy, ldid, sid;
    int rows, cols, E, pad;
};
#endif

#if PIT_OP == 9
/* grid: x = 256 columns, y = chunks of 256 rows (strided loop), z = batch.
 * With ids, a chunk's 256 ids load at once (one per thread, coalesced)
 * and the rows to zero are read from shared memory: no global load waits
 * inside the row loop. */
PIT_KERNEL void __launch_bounds__(256) pit_op_zero(const ew_args a)
{
    __shared__ bool skip[256];
    __shared__ int zeroes[8]; /* per warp: a row of the chunk to zero */
    const int c = blockIdx.x * 256 + threadIdx.x;
    T *Y = (T *)a.y + blockIdx.z * a.sy + c;
    for (int r0 = blockIdx.y * 256; r0 < a.rows; r0 += gridDim.y * 256) {
        if (a.ids) {
            const int r = r0 + threadIdx.x;
            bool routed = false; /* a routed token: its row is stored by the GEMM */
            if (r < a.rows) {
                const int e = __ldg(a.ids + blockIdx.z * a.sid + (pit_i64)r * a.ldid);
                routed = e >= 0 && e < a.E;
            }
            __syncthreads(); /* the previous chunk is done with skip and zeroes */
            skip[threadIdx.x] = routed;
            if (pit_ballot(r < a.rows && !routed)) zeroes[threadIdx.x / 32] = 1;
            else if (pit_lane() == 0) zeroes[threadIdx.x / 32] = 0;
            __syncthreads();
            bool any = false;
#pragma unroll
            for (int w = 0; w < 8; ++w) any |= zeroes[w] != 0;
            if (!any) continue; /* every row of the chunk routed */
        }
        const int n = min(256, a.rows - r0);
        if (c < a.cols)
            for (int i = 0; i < n; ++i)
                if (!a.ids || !skip[i]) Y[(pit_i64)(r0 + i) * a.ldy] = pit_from_float<T>(0.f);
    }
}
#endif

#if PIT_OP == 10
/* max(x, 0) with NaN kept; Y may be X. grid: x = 256 columns, y = groups
 * of EW_ROWS rows (strided loop), z = batch. A group's loads are all issued
 * before its stores: one memory round trip a group, not one a row (a CTA
 * loops over many rows). */
constexpr int EW_ROWS = 8;
PIT_KERNEL void __launch_bounds__(256) pit_op_relu(const ew_args a)
{
    const int c = blockIdx.x * 256 + threadIdx.x;
    if (c >= a.cols) return;
    const T *X = (const T *)a.x + blockIdx.z * a.sx + c;
    T *Y = (T *)a.y + blockIdx.z * a.sy + c;
    for (int r0 = blockIdx.y * EW_ROWS; r0 < a.rows; r0 += gridDim.y * EW_ROWS) {
        float v[EW_ROWS];
#pragma unroll
        for (int j = 0; j < EW_ROWS; ++j) v[j] = r0 + j < a.rows ? pit_to_float(X[(pit_i64)(r0 + j) * a.ldx]) : 0.f;
#pragma unroll
        for (int j = 0; j < EW_ROWS; ++j)
            if (r0 + j < a.rows) Y[(pit_i64)(r0 + j) * a.ldy] = pit_from_float<T>(v[j] > 0.f || v[j] != v[j] ? v[j] : 0.f);
    }
}
#endif

#if PIT_OP == 11
/* Y[b] = X[b]^T through a 32x32 shared tile (both sides coalesced).
 * grid: x = column tiles of X, y = row tiles, z = batch; 32x8 threads. */
PIT_KERNEL void __launch_bounds__(256) pit_op_transpose(const ew_args a)
{
    __shared__ T tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const T *X = (const T *)a.x + blockIdx.z * a.sx;
    T *Y = (T *)a.y + blockIdx.z * a.sy;
    for (int i = ty; i < 32; i += 8)
        if (r0 + i < a.rows && c0 + tx < a.cols) tile[i][tx] = X[(pit_i64)(r0 + i) * a.ldx + c0 + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += 8)
        if (c0 + i < a.cols && r0 + tx < a.rows) Y[(pit_i64)(c0 + i) * a.ldy + r0 + tx] = tile[tx][i];
}
#endif

/* ======================================================================== */
#if PIT_OP == 12
/* mark[g * stride + slot / kdiv] = 0 for every listed slot of group g
 * (mark was filled with -1): the rows a storing GEMM writes, so that only
 * the others are zeroed first. grid: x = slots, y = group. */
extern "C" __device__ const int pit_smem_bytes = 0;

struct mark_args {
    const int *counts, *entries;
    int *mark;
    pit_i64 stride;
    int capacity, kdiv;
};

PIT_KERNEL void __launch_bounds__(256) pit_op_mark(const mark_args a)
{
    const int i = blockIdx.x * 256 + threadIdx.x, g = blockIdx.y;
    if (i >= min(__ldg(a.counts + g), a.capacity)) return;
    const int slot = __ldg(a.entries + (pit_i64)g * a.capacity + i);
    a.mark[g * a.stride + slot / a.kdiv] = 0;
}
#endif
