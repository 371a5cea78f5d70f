/*
 * pit_attention.cu - fused sparse attention: tensor cores, FlashAttention
 * style over the block index of the mask (pit_op_attention). With
 * ATT_DETECT the kernel detects the mask's blocks itself, detection of
 * later groups running beside the attention of earlier ones.
 *
 * pit_attention's options ride on the same kernel (pit_attention_args:
 * Lk keys aligned to the end of the rows, grouped-query heads, window
 * bounds, lse, a block mask's index or none): a chunk wholly inside the
 * bounds of every row of the CTA loads no mask and checks nothing; others
 * check the bounds per element (and the mask where there is one).
 *
 * With ATT_COLS the query rows and key columns come gathered
 * (pit_attention_cols.cu built the tiles): PIT along both axes of an
 * element mask.
 *
 * Defines: PIT_DTYPE (16-bit), BLOCK, HD, HDV, MASK_DT, ATT_DETECT, ATT_WS,
 * ATT_COLS.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/mma.cuh"
#include "common/sm90.cuh"
#include "common/index.cuh"
#include "common/elem.cuh"

/* Fused attention. Defines: BLOCK (64/128: query rows per CTA = the index's
 * block), HD (Q/K head dim), HDV (V/O head dim), MASK_DT. 16-bit only.
 * CTA = (query block, bh). Each warp owns 16 query rows; keys stream in
 * chunks of 64 (a block is BLOCK/64 chunks), double-buffered with cp.async.
 * S = Q.K^T and O += P.V on mma.sync; the online softmax keeps a running
 * max and sum per row in f32 (exp2 with the scale folded in).
 * An entry marked PIT_ENTRY_FULL (detection found every mask element of the
 * block non-zero) skips the mask loads of its chunks: only the bounds
 * (row, key < L) decide. Other entries read the mask element by element. */
/* On sm_90a with head dims of 64 or 128 the products run on wgmma
 * (ATT_WGMMA): a warpgroup's 64 rows at once, A (Q, then P) from the same
 * registers as mma.sync's fragments, K and V read by the tensor cores from
 * shared memory, where a chunk's key rows sit under 128-byte swizzle in
 * 64-column slabs (a 128-wide row is two slabs, KC rows apart): K is B
 * K-major for S = Q.K^T, V is B N-major for O += P.V (N = HDV: the slabs
 * are the descriptor's leading offset). The ldmatrix traffic of K and V
 * (every warp read the whole chunk: at head dim 128, twice the time of the
 * products at the shared-memory rate) is gone. */
#if PIT_HAS_WGMMA && (HD == 64 || HD == 128) && (HDV == 64 || HDV == 128)
#define ATT_WGMMA 1
#else
#define ATT_WGMMA 0
#endif
/* ATT_WS: warp-specialised (sm_90a, blocks of 128, no detection inside):
 * warpgroup 0 copies Q once and each chunk's K and V by TMA into a ring of
 * stages; warpgroups 1 and 2 multiply 64 query rows each, Q.K^T with both
 * operands in shared memory, and overlap the softmax of chunk c with the
 * P.V product of chunk c - 1. Head dims of 128 (Q's or V's): at 64 the
 * kernel of two CTAs an SM below is faster. */
#if defined(ATT_WS) && ATT_WS
#if !(ATT_WGMMA && BLOCK == 128 && !ATT_DETECT && (HD == 128 || HDV == 128))
#error "the warp-specialised attention needs wgmma, blocks of 128, a head dim of 128 and no detection inside"
#endif
#else
#undef ATT_WS
#define ATT_WS 0
#endif
/* ATT_COLS: key-column micro-tiles (args.h, pit_cols_ix): a CTA a tile of
 * gathered query rows (or a segment of a heavy tile's chunks), its chunks
 * the tile's listed keys 64 at a time, the mask bits a word a row and
 * chunk, the window bounds already in them. */
#if defined(ATT_COLS) && ATT_COLS
#if !(BLOCK == PIT_ATTN_COLS_ROWS && !ATT_DETECT && !(defined(ATT_WS) && ATT_WS))
#error "key-column tiles take blocks of 64 rows, without detection inside or warp specialisation"
#endif
#else
#undef ATT_COLS
#define ATT_COLS 0
#endif
constexpr int BQ = BLOCK, KC = 64, WARPS = BQ / 16, THREADS = ATT_WS ? 384 : WARPS * 32;
/* pit_attention's options; the variant that detects inside the kernel runs
 * pit_sparse_attention's calls alone, and its registers stay below 128 */
constexpr bool OPTIONS = !ATT_DETECT;
/* the largest |max| (scaled, base 2) the exponent's FFMA may fold the scale
 * for: half its ulp is 2^-5 (attend below) */
constexpr float ATT_FOLD_MAX = 1048576.f; /* 2^20 */
constexpr int QS = ATT_WS ? HD : HD + 8; /* padded: ldmatrix without conflicts; swizzled slabs for TMA */
#if ATT_WGMMA
constexpr int KS = HD, VS = HDV, ALIGN = 1024; /* swizzle atoms start 1024-byte aligned */
#else
constexpr int KS = HD + 8, VS = HDV + 8, ALIGN = 0;
#endif
constexpr int Q_BYTES = BQ * QS * 2, K_BYTES = KC * KS * 2, V_BYTES = KC * VS * 2;
/* the ring of the warp-specialised kernel (one CTA an SM: its 384
 * threads take the registers) */
constexpr int WS_STAGES = ATT_WS ? 4 : 2;
constexpr int WS_BARS = Q_BYTES + WS_STAGES * (K_BYTES + V_BYTES); /* full[s], empty[s], Q's */
extern "C" __device__ const int pit_smem_bytes =
    ATT_WS ? WS_BARS + 16 * WS_STAGES + 8 + ALIGN : Q_BYTES + 2 * (K_BYTES + V_BYTES) + ALIGN;
static_assert(!ATT_WGMMA || Q_BYTES % 1024 == 0, "attention: K and V stages 1024-byte aligned");
static_assert(BLOCK % KC == 0 && HD % 16 == 0 && HDV % 16 == 0, "attention tile");
static_assert(PIT_DTYPE != PIT_DT_F32, "tensor cores take 16-bit inputs");

/* (batch, query block) of this CTA. With an order, the CTAs that start
 * first take the groups with the most blocks (longest first: no long CTA
 * left alone at the end of the grid); a shared index runs a group's every
 * batch one after another. */
PIT_DEV void attn_work(const pit_attention_args &a, int &b, int &qb)
{
    if (!a.order) {
        b = blockIdx.y;
        qb = a.flags & PIT_ATT_REVERSE ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
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

/* ROWS rows x COLS of src into shared, row r from source row row_of(r)
 * where has(r, that row), else zeros: stride S, or SW: 64-column slabs of
 * ROWS rows, each under 128-byte swizzle (pit_swz128) */
template <int ROWS, int COLS, int S, bool SW = false, typename RowOf, typename Has>
PIT_DEV void load_rows_of(T *dst, const T *src, pit_i64 ld, RowOf row_of, Has has)
{
    static_assert(!SW || COLS % 64 == 0, "swizzled rows are slabs of 128 bytes");
    constexpr int VPR = COLS / 8, UNITS = ROWS * VPR;
#pragma unroll
    for (int i = 0; i < (UNITS + THREADS - 1) / THREADS; ++i) {
        int u = threadIdx.x + i * THREADS;
        if (UNITS % THREADS && u >= UNITS) break;
        int r = u / VPR, c = (u % VPR) * 8;
        const int from = row_of(r);
        const bool ok = has(r, from);
        T *at = dst + (SW ? (c / 64) * ROWS * 64 + pit_swz128(r, c % 64) : r * S + c);
        pit_copy16(at, ok ? src + (pit_i64)from * ld + c : src, ok);
    }
}

/* rows [r0, r0 + ROWS) of src, zeros past L */
template <int ROWS, int COLS, int S, bool SW = false>
PIT_DEV void load_rows(T *dst, const T *src, pit_i64 ld, int r0, int L)
{
    load_rows_of<ROWS, COLS, S, SW>(dst, src, ld, [=](int r) { return r0 + r; }, [=](int r, int) { return r0 + r < L; });
}

/* the rows a list names (-1: none, zeros) */
template <int ROWS, int COLS, int S, bool SW = false, typename RowOf>
PIT_DEV void load_listed(T *dst, const T *src, pit_i64 ld, RowOf row_of)
{
    load_rows_of<ROWS, COLS, S, SW>(dst, src, ld, row_of, [](int, int from) { return from >= 0; });
}

/* Two adjacent mask elements (col, col + 1) of row as bits 0 and 1; m:
 * element (row, col). */
PIT_DEV pit_u32 mask_pair(const pit_attention_args &a, const pit_u8 *m, int row, int col)
{
    if (row >= a.L || col >= a.Lk) return 0;
    const pit_i64 i = 0;
    if (a.mask_pair && col + 1 < a.Lk) {
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
    if (col + 1 < a.Lk) b |= (pit_u32)mask_on(m, i + 1) << 1;
    return b;
}

/* Whether key `key` is inside row's window bounds (the diagonal aligned to
 * the end of the keys) and the keys. */
PIT_DEV bool in_bounds(const pit_attention_args &a, int row, int key)
{
    const pit_i64 at = (pit_i64)row + a.Lk - a.L;
    return key < a.Lk && (!OPTIONS || ((a.wl < 0 || key >= at - a.wl) && (a.wr < 0 || key <= at + a.wr)));
}

/* mask_pair of a block whose mask is all non-zero: the bounds alone */
PIT_DEV pit_u32 bounds_pair(const pit_attention_args &a, int row, int col)
{
    if (row >= a.L) return 0;
    return (pit_u32)in_bounds(a, row, col) | (pit_u32)in_bounds(a, row, col + 1) << 1;
}

/* Whether every row of [q0, q0 + BQ) sees every key of [key0, key0 + KC):
 * then a chunk of a full block loads no mask and checks nothing. */
PIT_DEV bool chunk_inside(const pit_attention_args &a, int q0, int key0)
{
    const pit_i64 diag = (pit_i64)a.Lk - a.L;
    return q0 + BQ <= a.L && key0 + KC <= a.Lk &&
           (!OPTIONS || ((a.wr < 0 || key0 + KC - 1 <= q0 + diag + a.wr) && (a.wl < 0 || key0 >= q0 + BQ - 1 + diag - a.wl)));
}

/* The key blocks [*first, *first + *count) inside the window bounds of
 * rows [q0, q0 + BQ), for a call without an index. */
PIT_DEV void bounded_blocks(const pit_attention_args &a, int q0, int *first, int *count)
{
    const pit_i64 diag = (pit_i64)a.Lk - a.L, last_row = (q0 + BQ < a.L ? q0 + BQ : a.L) - 1;
    const pit_i64 from = q0 + diag - a.wl, to = last_row + diag + a.wr + 1;
    const pit_i64 lo = a.wl >= 0 && from > 0 ? from : 0;
    const pit_i64 hi = a.wr >= 0 && to < a.Lk ? to : a.Lk; /* exclusive */
    *first = (int)(lo / BLOCK);
    *count = hi > lo ? (int)((hi - 1) / BLOCK - lo / BLOCK + 1) : 0;
}

/* The K/V rows query row set b (batch * heads_q + head) reads. */
PIT_DEV int kv_set(const pit_attention_args &a, int b)
{
    return a.group == 1 ? b : b / a.heads_q * (a.heads_q / a.group) + b % a.heads_q / a.group;
}

/* The key chunks of query block qb of query set b: the key blocks its
 * index group lists (entries read through L2, pit_ldcg: with detection
 * inside the kernel they were written during this launch), else those
 * inside the window bounds; KC keys a chunk. */
struct att_walk {
    const int *ent; /* the group's entries; NULL without an index */
    int first;      /* without an index: the first key block */
    int chunks;
};

PIT_DEV att_walk walk_of(const pit_attention_args &a, int b, int qb)
{
    att_walk w;
    int count;
    w.ent = nullptr;
    w.first = 0;
    if (!OPTIONS || !(a.flags & PIT_ATT_NO_INDEX)) {
        const int grp = ix_group(a.ix, b, qb);
        count = pit_ldcg(a.ix.counts + grp);
        w.ent = a.ix.entries + (pit_i64)grp * a.ix.capacity;
    } else {
        bounded_blocks(a, qb * BQ, &w.first, &count);
    }
    w.chunks = count * (BLOCK / KC);
    return w;
}

/* chunk c's entry: its key block, PIT_ENTRY_FULL when the block's mask is all on */
PIT_DEV int walk_entry(const att_walk &w, int c)
{
    return w.ent ? pit_ldcg(w.ent + c / (BLOCK / KC)) : w.first + c / (BLOCK / KC);
}

/* the first key of chunk c, whose entry is e */
PIT_DEV int walk_key0(int e, int c) { return pit_entry_index(e) * BLOCK + (c % (BLOCK / KC)) * KC; }

/* The allowed keys of a warp's 16 rows (from row0) in the chunk of KC keys
 * at key0: bit 4 j + 2 h + e is row row0 + g + 8 h, key key0 + 8 j + 2 t +
 * e (the m16n8 accumulator layout). full: no element mask, or detection
 * found the block's all on (uniform over the CTA); a chunk inside every
 * row's bounds loads nothing. */
PIT_DEV pit_u32 chunk_bits(const pit_attention_args &a, const pit_u8 *mask, int q0, int row0, int key0, bool full)
{
    const int lane = pit_lane(), g = lane >> 2, t = lane & 3;
    const bool windowed = OPTIONS && (a.wl >= 0 || a.wr >= 0);
    pit_u32 on = 0;
    if (full && chunk_inside(a, q0, key0)) return ~0u;
    if (full) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) on |= bounds_pair(a, row0 + g + 8 * h, key0 + j * 8 + 2 * t) << (4 * j + 2 * h);
        return on;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + g + 8 * h;
        const pit_u8 *m = mask + ((pit_i64)row * a.mld + key0 + 2 * t) * MASK_BYTES;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            on |= (mask_pair(a, m + j * 8 * MASK_BYTES, row, key0 + j * 8 + 2 * t) &
                   (windowed ? bounds_pair(a, row, key0 + j * 8 + 2 * t) : 3u))
                  << (4 * j + 2 * h);
    }
    return on;
}

/* The online softmax of one chunk: this thread's scores s (element e of
 * tile j is row g + 8 (e / 2), key 8 j + 2 t + e % 2), masked by on, become
 * P (not normalised); m_run and l_run (base 2) move on, and alpha[h] is the
 * factor O's rows h take.
 * With a positive scale (uniform) the scores stay unscaled: the max of the
 * raw scores times the scale is the max of the scaled ones, and the scale
 * joins the exponent's FFMA (one FMUL an element fewer). That FFMA
 * subtracts the rounded max from an exact product, so the largest score's
 * exponent is off by up to half an ulp of the max: nothing below 2^20, but
 * for larger logits enough to overflow 2^x or to zero the row. There (a
 * compare a row and chunk) the scores are scaled first, rounded as the max
 * was (pit_mul_rn), and the largest gives exactly 2^0. Max and sum run as
 * two chains (e = 0, 1): half the dependent steps. */
PIT_DEV void softmax_chunk(const pit_attention_args &a, float (&s)[8][4], pit_u32 on, float (&m_run)[2],
                           float (&l_run)[2], float (&alpha)[2])
{
    const bool fold = a.scale_log2 > 0.f;
    const float post = fold ? a.scale_log2 : 1.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!fold) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) s[j][2 * h + e] = pit_mul_rn(s[j][2 * h + e], a.scale_log2);
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
        mx = pit_mul_rn(mx, post); /* -inf stays -inf: post > 0 */
        const float m_new = fmaxf(m_run[h], mx);
        const float m_use = m_new == PIT_NEG_INF ? 0.f : m_new; /* nothing allowed yet */
        alpha[h] = pit_exp2_ftz(m_run[h] - m_use);
        m_run[h] = m_new;
        float mul = post;
        if (fold && !(fabsf(m_use) < ATT_FOLD_MAX)) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) s[j][2 * h + e] = pit_mul_rn(s[j][2 * h + e], post);
            mul = 1.f;
        }
        float rs2[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float p = pit_exp2_ftz(fmaf(s[j][2 * h + e], mul, -m_use));
                s[j][2 * h + e] = p;
                rs2[e] += p;
            }
        l_run[h] = l_run[h] * alpha[h] + (rs2[0] + rs2[1]);
    }
}

PIT_DEV void rescale_rows(float (&o)[HDV / 8][4], const float (&alpha)[2])
{
#pragma unroll
    for (int j = 0; j < HDV / 8; ++j) {
        o[j][0] *= alpha[0];
        o[j][1] *= alpha[0];
        o[j][2] *= alpha[1];
        o[j][3] *= alpha[1];
    }
}

/* O = acc / l for this thread's rows of the warp's 16 (from row0; with
 * rows, the query rows rows[row0 ..], -1 none), and their lse when asked;
 * rows with no allowed key (l == 0) are 0. */
PIT_DEV void store_out(const pit_attention_args &a, int b, int row0, const int *rows, const float (&o)[HDV / 8][4],
                       const float (&m_run)[2], const float (&l_run)[2])
{
    const int lane = pit_lane(), g = lane >> 2, t = lane & 3;
    T *out = (T *)a.o + b * a.so;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += shfl_xor_f(l, 1);
        l += shfl_xor_f(l, 2);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int row = rows ? __ldg(rows + row0 + g + 8 * h) : row0 + g + 8 * h;
        if (rows ? row < 0 : row >= a.L) continue;
        if (OPTIONS && a.lse && t == 0) { /* natural log: m_run and the sum are base 2 */
            float *lse = (float *)a.lse + (pit_i64)(b / a.heads_q) * a.lse_sb + (pit_i64)(b % a.heads_q) * a.lse_sh;
            lse[row] = l > 0.f ? (m_run[h] + pit_log2f(l)) * 0.6931471805599453f : PIT_NEG_INF;
        }
#pragma unroll
        for (int j = 0; j < HDV / 8; ++j)
            *(pit_u32 *)(out + (pit_i64)row * a.ldo + j * 8 + 2 * t) = pack2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
    }
}

#if ATT_COLS
#include "attention_cols.cuh"
#endif

#if !ATT_WS
/* Attention of batch b's query block qb over its group's entries, every
 * warp loading the chunks. */
PIT_DEV void attend(const pit_attention_args &a, pit_u8 *smem, int b, int qb)
{
    T *Qs = (T *)smem;
    /* stage i of K and V (computed, not an array: no local memory) */
    auto Kb = [&](int i) { return (T *)(smem + Q_BYTES + i * K_BYTES); };
    auto Vb = [&](int i) { return (T *)(smem + Q_BYTES + 2 * K_BYTES + i * V_BYTES); };
    const int q0 = qb * BQ;
    const bool masked = !OPTIONS || (a.flags & PIT_ATT_MASK);
#if ATT_COLS
    att_cols tc;
    if (!cols_of(a, b, qb, tc)) return;
    const int c_first = tc.c0, nchunks = tc.c1;
    (void)masked, (void)q0;
    /* the source rows of chunk c's keys */
    auto keys_of = [&](int c) { return [=](int r) { return __ldg(tc.cols + c * KC + r); }; };
#else
    const att_walk w = walk_of(a, b, qb);
    const int c_first = 0, nchunks = w.chunks;
#endif
    const int kv = OPTIONS ? kv_set(a, b) : b;
    const T *q = (const T *)a.q + b * a.sq, *k = (const T *)a.k + (pit_i64)kv * a.sk,
            *v = (const T *)a.v + (pit_i64)kv * a.sv;
#if !ATT_COLS
    const pit_u8 *mask = a.mask + (pit_i64)b * a.ms * MASK_BYTES;
#endif
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();

    float o[HDV / 8][4];
#pragma unroll
    for (int j = 0; j < HDV / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_run[2] = {PIT_NEG_INF, PIT_NEG_INF}, l_run[2] = {0.f, 0.f};
    pit_u32 qf[HD / 16][4];

#if ATT_COLS
    if (nchunks > c_first) {
        load_listed<BQ, HD, QS>(Qs, q, a.ldq, [&](int r) { return __ldg(tc.rows + r); });
        load_listed<KC, HD, KS, ATT_WGMMA>(Kb(0), k, a.ldk, keys_of(c_first));
        load_listed<KC, HDV, VS, ATT_WGMMA>(Vb(0), v, a.ldv, keys_of(c_first));
    }
#else
    if (nchunks > 0) {
        load_rows<BQ, HD, QS>(Qs, q, a.ldq, q0, a.L);
    }
    int e_next = nchunks > 0 ? walk_entry(w, 0) : 0;
    if (nchunks > 0) {
        int k0 = walk_key0(e_next, 0);
        load_rows<KC, HD, KS, ATT_WGMMA>(Kb(0), k, a.ldk, k0, a.Lk);
        load_rows<KC, HDV, VS, ATT_WGMMA>(Vb(0), v, a.ldv, k0, a.Lk);
    }
#endif
    pit_copy_commit();
    for (int c = c_first; c < nchunks; ++c) {
        const int stage = (c - c_first) & 1;
#if ATT_COLS
        if (c + 1 < nchunks) {
            load_listed<KC, HD, KS, ATT_WGMMA>(Kb(stage ^ 1), k, a.ldk, keys_of(c + 1));
            load_listed<KC, HDV, VS, ATT_WGMMA>(Vb(stage ^ 1), v, a.ldv, keys_of(c + 1));
        }
        pit_copy_commit();
        const pit_u32 on = cols_bits(tc.bits, c, warp * 16);
#else
        const int e = e_next;
        const int key0 = walk_key0(e, c);
        const bool full = !masked || (e & PIT_ENTRY_FULL) != 0;
        if (c + 1 < nchunks) {
            e_next = walk_entry(w, c + 1);
            int k1 = walk_key0(e_next, c + 1);
            load_rows<KC, HD, KS, ATT_WGMMA>(Kb(stage ^ 1), k, a.ldk, k1, a.Lk);
            load_rows<KC, HDV, VS, ATT_WGMMA>(Vb(stage ^ 1), v, a.ldv, k1, a.Lk);
        }
        pit_copy_commit();
        /* mask bits loaded before the wait */
        const pit_u32 on = chunk_bits(a, mask, q0, q0 + warp * 16, key0, full);
#endif
        pit_copy_wait<1>();
#if ATT_WGMMA
        pit_fence_async_smem();
#endif
        __syncthreads();
        /* On wgmma Q's fragments load every chunk: kept across chunks,
         * ptxas (CUDA 13) gave their registers to P's fragments (the A of
         * O += P.V), and later chunks multiplied P, not Q, by K (SASS) */
        if (ATT_WGMMA || c == c_first) {
#pragma unroll
            for (int kk = 0; kk < HD / 16; ++kk)
                pit_ldmatrix_x4(qf[kk], Qs + (warp * 16 + (lane & 15)) * QS + kk * 16 + (lane >> 4) * 8);
        }
        const T *Ks = Kb(stage), *Vs = Vb(stage);
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#if ATT_WGMMA
        /* B = K K-major: a k-step is 32 bytes into a slab's swizzled rows
         * (four a slab), 8-row groups 1024 B apart */
        float(&sd)[32] = reinterpret_cast<float(&)[32]>(s);
        pit_wgmma_pin(sd);
        pit_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
            pit_wgmma_rs<PIT_DTYPE, 0>(
                sd, qf[kk], pit_wgmma_desc(pit_smem_addr(Ks) + (kk / 4) * KC * 128 + (kk % 4) * 32, 16, 1024));
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
        float alpha[2];
        softmax_chunk(a, s, on, m_run, l_run, alpha);
        rescale_rows(o, alpha);
        /* O += P.V: P's accumulators are already the A fragments */
#if ATT_WGMMA
        /* B = V N-major: a k-step is 16 key rows (2048 B) on; the next 64
         * columns of N one slab (KC * 128 B) on */
        pit_u32 pa[4][4];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) pit_acc_fragment(s, kk, pa[kk]);
        float(&od)[HDV / 2] = reinterpret_cast<float(&)[HDV / 2]>(o);
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
            pit_acc_fragment(s, kk, pa);
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
#if ATT_COLS
    if (tc.heavy >= 0) {
        store_partial(a, b, tc, warp * 16, o, m_run, l_run);
        return;
    }
    store_out(a, b, warp * 16, tc.rows, o, m_run, l_run);
#else
    store_out(a, b, q0 + warp * 16, nullptr, o, m_run, l_run);
#endif
}
#endif

#if ATT_DETECT
#include "attention_detect.cuh"
#endif

#if ATT_WS
#include "attention_ws.cuh"
#else
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attention(const pit_attention_args a)
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
