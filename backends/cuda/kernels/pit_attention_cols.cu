/*
 * pit_attention_cols.cu - key-column micro-tiles of an attention element
 * mask (args.h, pit_cols_ix): PIT along the key axis, where the keys of a
 * query block are permutation invariant. pit_op_attn_cols_scan reads the
 * mask once into bits (the window bounds folded in) and finds each query
 * block's heavy rows; pit_op_attn_cols_tiles gathers, for each tile of
 * query rows, the key columns any of its rows allows and the mask bits of
 * every gathered chunk. pit_attention.cu (ATT_COLS) then attends over the
 * gathered K/V rows. One kernel a compilation: PIT_KERNEL_OP_ATTN_COLS_SCAN
 * (defines MASK_DT) or PIT_KERNEL_OP_ATTN_COLS_TILES.
 */
#include "common/port.cuh"
#include "args.h"
#if defined(PIT_KERNEL_OP_ATTN_COLS_SCAN)
#include "common/index.cuh"
#endif

constexpr int ROWS = PIT_ATTN_COLS_ROWS, THREADS = PIT_ATTN_COLS_THREADS, WARPS = THREADS / PIT_WARP;
extern "C" __device__ const int pit_smem_bytes = 0;

PIT_DEV int warp_sum(int v)
{
#pragma unroll
    for (int o = PIT_WARP / 2; o > 0; o >>= 1) v += pit_shfl(v, pit_lane() ^ o);
    return v;
}

PIT_DEV int warp_min(int v)
{
#pragma unroll
    for (int o = PIT_WARP / 2; o > 0; o >>= 1) {
        const int w = pit_shfl(v, pit_lane() ^ o);
        v = w < v ? w : v;
    }
    return v;
}

/* the index of b's lowest set bit (b != 0) */
PIT_DEV int lowest_bit(pit_u32 b) { return pit_popc((b & (0u - b)) - 1u); }

/* inclusive prefix sum across the warp */
PIT_DEV int warp_scan(int v)
{
    const int lane = pit_lane();
#pragma unroll
    for (int o = 1; o < PIT_WARP; o <<= 1) {
        const int w = pit_shfl(v, lane - o);
        if (lane >= o) v += w;
    }
    return v;
}

/* Exclusive prefix sums of v[0, n) in shared memory, in place (a thread a
 * run of them); returns the total. Every thread calls it. */
PIT_DEV int cta_scan(int *v, int n)
{
    __shared__ int warp_total[WARPS], total;
    const int per = (n + THREADS - 1) / THREADS, i0 = threadIdx.x * per, i1 = i0 + per < n ? i0 + per : n;
    int s = 0;
    for (int i = i0; i < i1; ++i) s += v[i];
    const int incl = warp_scan(s), warp = threadIdx.x / PIT_WARP;
    if (pit_lane() == PIT_WARP - 1) warp_total[warp] = incl;
    __syncthreads();
    if (threadIdx.x < PIT_WARP) {
        const int t = threadIdx.x < WARPS ? warp_total[threadIdx.x] : 0, ti = warp_scan(t);
        if (threadIdx.x < WARPS) warp_total[threadIdx.x] = ti - t;
        if (threadIdx.x == WARPS - 1) total = ti;
    }
    __syncthreads();
    int run = warp_total[warp] + incl - s;
    for (int i = i0; i < i1; ++i) {
        const int x = v[i];
        v[i] = run;
        run += x;
    }
    __syncthreads();
    return total;
}

#if defined(PIT_KERNEL_OP_ATTN_COLS_SCAN)
/* a row is heavy when it allows more than twice the block's 3/4 quantile
 * of keys plus two chunks: a global token among window rows, never a row
 * of a causal or a random mask */
constexpr int HEAVY_SLACK = 128;

/* keys [lo, hi) inside row's window bounds (the diagonal at the end of the keys) */
PIT_DEV void row_bounds(const pit_attn_cols_args &a, int row, pit_i64 &lo, pit_i64 &hi)
{
    const pit_i64 at = (pit_i64)row + a.Lk - a.Lq;
    lo = a.wl >= 0 && at - a.wl > 0 ? at - a.wl : 0;
    hi = a.wr >= 0 && at + a.wr + 1 < a.Lk ? at + a.wr + 1 : a.Lk;
}

/* the keys of [lo, hi) among [32 w, 32 w + 32) as bits */
PIT_DEV pit_u32 range_word(int w, pit_i64 lo, pit_i64 hi)
{
    const pit_i64 k0 = 32 * (pit_i64)w;
    const pit_i64 b0 = lo - k0 > 0 ? lo - k0 : 0, b1 = hi - k0 < 32 ? hi - k0 : 32;
    if (b1 <= b0) return 0u;
    const pit_u32 upper = b1 >= 32 ? 0xffffffffu : (1u << b1) - 1u;
    return upper & ~((1u << b0) - 1u);
}

/* the elements of one 32-bit word of mask as bits (4 / MASK_BYTES of them) */
PIT_DEV pit_u32 element_bits(pit_u32 w)
{
#if MASK_BYTES == 1
    const pit_u32 on = pit_bytes_nonzero(w);
    return (on >> 7 & 1u) | (on >> 14 & 2u) | (on >> 21 & 4u) | (on >> 28 & 8u);
#elif MASK_BYTES == 2
    return (pit_u32)pit_bits_nonzero16(w & 0xffffu) | (pit_u32)pit_bits_nonzero16(w >> 16) << 1;
#elif MASK_DT == PIT_DT_I32
    return (pit_u32)(w != 0u);
#else
    return (pit_u32)pit_bits_nonzero32(w);
#endif
}

/* keys [32 w, 32 w + 32) of a mask row (m: its element 0) as bits, keys
 * past Lk off */
PIT_DEV pit_u32 mask_word(const pit_attn_cols_args &a, const pit_u8 *m, int w)
{
    const int k0 = 32 * w;
    pit_u32 bits = 0;
    if (a.mask_vec && k0 + 32 <= a.Lk) {
        constexpr int LOADS = 2 * MASK_BYTES, PER_WORD = 4 / MASK_BYTES;
        const uint4 *p = (const uint4 *)(m + (pit_i64)k0 * MASK_BYTES);
#pragma unroll
        for (int i = 0; i < LOADS; ++i) {
            const uint4 u = __ldg(p + i);
            bits |= element_bits(u.x) << (4 * i + 0) * PER_WORD | element_bits(u.y) << (4 * i + 1) * PER_WORD |
                    element_bits(u.z) << (4 * i + 2) * PER_WORD | element_bits(u.w) << (4 * i + 3) * PER_WORD;
        }
        return bits;
    }
    for (int j = 0; j < 32 && k0 + j < a.Lk; ++j) bits |= (pit_u32)mask_on(m, k0 + j) << j;
    return bits;
}

/* A CTA a query block of ROWS rows of mask set blockIdx.y: each row's bits
 * and count of allowed keys (a warp a row, two rows a warp: the loads of
 * 32 warps an SM keep the memory busy), then the block's heavy rows. */
PIT_KERNEL void __launch_bounds__(PIT_ATTN_COLS_SCAN_THREADS, 1) pit_op_attn_cols_scan(const pit_attn_cols_args a)
{
    constexpr int SCAN_WARPS = PIT_ATTN_COLS_SCAN_THREADS / PIT_WARP;
    __shared__ int count[ROWS], quantile[2];
    const pit_cols_ix &x = a.cx;
    const int qb = blockIdx.x, set = blockIdx.y, warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    for (int r = warp; r < ROWS; r += SCAN_WARPS) {
        const int row = qb * ROWS + r;
        int n = 0;
        if (row < a.Lq) {
            const pit_u8 *m = a.mask + ((pit_i64)set * a.ms + (pit_i64)row * a.mld) * MASK_BYTES;
            pit_u32 *out = x.bits + ((pit_i64)set * a.Lq + row) * x.words;
            pit_i64 lo, hi;
            row_bounds(a, row, lo, hi);
#pragma unroll 2
            for (int w = lane; w < x.words; w += PIT_WARP) {
                const pit_u32 b = mask_word(a, m, w) & range_word(w, lo, hi);
                out[w] = b;
                n += pit_popc(b);
            }
        }
        n = warp_sum(n);
        if (lane == 0) count[r] = row < a.Lq ? n : -1;
    }
    __syncthreads();
    /* the 3/4 quantile of the rows' counts: the least count that at least
     * 3/4 of the block's rows do not exceed (warps 0 and 1, a row a lane) */
    if (warp < ROWS / PIT_WARP) {
        const int c = count[threadIdx.x];
        int valid = 0, le = 0;
        for (int j = 0; j < ROWS; ++j) {
            const int cj = count[j];
            valid += cj >= 0;
            le += cj >= 0 && cj <= c;
        }
        const int q = warp_min(c >= 0 && 4 * le >= 3 * valid ? c : 0x7fffffff);
        if (lane == 0) quantile[warp] = q;
    }
    __syncthreads();
    if (warp < ROWS / PIT_WARP) {
        const int q = quantile[0] < quantile[1] ? quantile[0] : quantile[1];
        const int c = count[threadIdx.x];
        const pit_u32 heavy = pit_ballot(c >= 0 && (pit_i64)c > 2 * (pit_i64)q + HEAVY_SLACK);
        if (lane == 0) x.heavy[((pit_i64)set * x.nqb + qb) * 2 + warp] = heavy;
    }
}

#endif

#if defined(PIT_KERNEL_OP_ATTN_COLS_TILES)
/* x's bits where m has one, packed from bit 0 up (x holds no bit outside m) */
PIT_DEV pit_u32 compress(pit_u32 x, pit_u32 m)
{
    if (m == 0xffffffffu) return x;
    pit_u32 v = 0;
    int k = 0;
    for (pit_u32 b = m; b; b &= b - 1u, ++k) v |= (x >> lowest_bit(b) & 1u) << k;
    return v;
}

/* *w |= v for a 64-bit word of global memory, as two 32-bit atomics */
PIT_DEV void or64(pit_u64 *w, pit_u64 v)
{
    if ((pit_u32)v) pit_atomic_or((pit_u32 *)w, (pit_u32)v);
    if ((pit_u32)(v >> 32)) pit_atomic_or((pit_u32 *)w + 1, (pit_u32)(v >> 32));
}

/* The rows of tile t (rows[r], -1 past the last): a light tile's are its
 * block's rows but the heavy ones moved out; a heavy tile's the heavy rows
 * of ranks [ROWS h, ROWS h + ROWS) of the set. before[i]: heavy rows in
 * blocks before block i; moved: heavy rows that go to heavy tiles. */
PIT_DEV void tile_rows(const pit_attn_cols_args &a, const pit_u32 *hv, const int *before, int moved, int t,
                       int *rows)
{
    const pit_cols_ix &x = a.cx;
    const int lane = pit_lane();
    if (t < x.nqb) {
        if (threadIdx.x >= PIT_WARP) return;
        int base = 0;
        for (int h = 0; h < ROWS / 32; ++h) {
            const pit_u32 heavy = hv[2 * t + h], below = (1u << lane) - 1u;
            const int row = t * ROWS + 32 * h + lane;
            const int rank = before[t] + (h ? pit_popc(hv[2 * t]) : 0) + pit_popc(heavy & below);
            const bool keep = row < a.Lq && !((heavy >> lane & 1u) && rank < moved);
            const pit_u32 kept = pit_ballot(keep);
            if (keep) rows[base + pit_popc(kept & below)] = row;
            base += pit_popc(kept);
        }
        return;
    }
    const int lo = (t - x.nqb) * ROWS, hi = lo + ROWS < moved ? lo + ROWS : moved;
    for (int i = threadIdx.x; i < x.nqb; i += THREADS) {
        int rank = before[i];
        if (rank >= hi) continue;
        for (int h = 0; h < ROWS / 32; ++h)
            for (pit_u32 b = hv[2 * i + h]; b; b &= b - 1u, ++rank)
                if (rank >= lo && rank < hi) rows[rank - lo] = i * ROWS + 32 * h + lowest_bit(b);
    }
}

/* A CTA a tile of mask set blockIdx.y: its rows, the union of their keys
 * as an ascending list, and the mask bits of each chunk of 64 listed keys
 * for each of its rows. */
PIT_KERNEL void __launch_bounds__(THREADS) pit_op_attn_cols_tiles(const pit_attn_cols_args a)
{
    /* the blocks' heavy rows, then the words' counts and union */
    __shared__ int sm[2 * PIT_ATTN_COLS_MAX_WORDS];
    __shared__ int rows[ROWS];
    const pit_cols_ix &x = a.cx;
    const int t = blockIdx.x, set = blockIdx.y;
    const pit_i64 tile = (pit_i64)set * x.tiles + t;
    const pit_u32 *hv = x.heavy + (pit_i64)set * x.nqb * 2;
    for (int i = threadIdx.x; i < x.nqb; i += THREADS) sm[i] = pit_popc(hv[2 * i]) + pit_popc(hv[2 * i + 1]);
    if (threadIdx.x < ROWS) rows[threadIdx.x] = -1;
    __syncthreads();
    const int total = cta_scan(sm, x.nqb);
    const int cap_rows = x.heavy_tiles * ROWS, moved = total < cap_rows ? total : cap_rows;
    tile_rows(a, hv, sm, moved, t, rows);
    __syncthreads();
    if (threadIdx.x < ROWS) x.rows[tile * ROWS + threadIdx.x] = rows[threadIdx.x];

    /* the union of the rows' bits, a word a thread at a time */
    int *cnt = sm;
    pit_u32 *uni = (pit_u32 *)(sm + x.words);
    const pit_u32 *bits = x.bits + (pit_i64)set * a.Lq * x.words;
    int nrows = 0;
    while (nrows < ROWS && rows[nrows] >= 0) ++nrows;
    for (int w = threadIdx.x; w < x.words; w += THREADS) {
        pit_u32 u = 0;
#pragma unroll 16
        for (int r = 0; r < nrows; ++r) u |= __ldg(bits + (pit_i64)rows[r] * x.words + w);
        uni[w] = u;
        cnt[w] = pit_popc(u);
    }
    __syncthreads();
    const int ncols = cta_scan(cnt, x.words);
    int *list = x.cols + tile * x.cap;
    for (int w = threadIdx.x; w < x.words; w += THREADS) {
        int at = cnt[w];
        for (pit_u32 b = uni[w]; b; b &= b - 1u) list[at++] = 32 * w + lowest_bit(b);
    }
    const int padded = (ncols + 63) / 64 * 64;
    for (int i = ncols + threadIdx.x; i < padded; i += THREADS) list[i] = -1;
    if (threadIdx.x == 0) x.ncols[tile] = ncols;
    __syncthreads();

    /* chunk c's bits of tile row r (bit j: the row allows key list[64 c +
     * j]): each row and word of the union puts the row's keys of that word,
     * packed, at the word's place in the list */
    pit_u64 *tb = x.tbits + tile * (x.cap / 64) * ROWS;
    for (int i = threadIdx.x; i < padded / 64 * ROWS; i += THREADS) tb[i] = 0;
    __syncthreads();
    /* BATCH items a thread at once: their loads in flight together (a
     * heavy tile's rows read every word) */
    constexpr int BATCH = 8;
    const int items = nrows * x.words;
    for (int base = threadIdx.x; base < items; base += THREADS * BATCH) {
        pit_u32 v[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int item = base + b * THREADS, r = item / x.words, w = item % x.words;
            v[b] = item < items && uni[w] ? __ldg(bits + (pit_i64)rows[r] * x.words + w) : 0u;
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int item = base + b * THREADS, r = item / x.words, w = item % x.words;
            if (item >= items || !v[b]) continue;
            const pit_u32 packed = compress(v[b], uni[w]);
            const int at = cnt[w], c = at / 64, o = at % 64;
            or64(tb + c * ROWS + r, (pit_u64)packed << o);
            if (o > 32) or64(tb + (c + 1) * ROWS + r, (pit_u64)packed >> (64 - o));
        }
    }
}
#endif
