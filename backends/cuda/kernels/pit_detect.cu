/*
 * pit_detect.cu - online sparsity detection: ONE pass over the sparse
 * operand X that fills up to PIT_DETECT_MAX indexes (micro-tile candidates)
 * at once.
 *
 * A CTA owns a region of DETECT_H rows x (DETECT_TW * VEC) columns. Phase 1
 * loads it with 16-byte vectors (each thread keeps 8 loads in flight: all
 * are issued before any is used) and sets, per candidate, one bit per
 * non-zero micro-tile in shared memory. A warp reads 32 vectors of one row;
 * when a micro-tile column holds whole vectors (tk % VEC == 0, the common
 * case) a vector only tells "some element non-zero" / "some element zero",
 * and the warp folds its lanes' bits with ballots: one lane sets them.
 * Phase 2 turns the bits into index entries: a ballot per 32 entries of a
 * group, one atomicAdd per group on counts[g] (out-of-order append, no
 * sort). A micro-tile that sticks out of the region (not aligned to it)
 * is deduplicated through a global bitmap so each one is appended once.
 *
 * "Full" micro-tiles (pit_index.flag_full, core/backend.h): for at most one
 * target (full != 0) phase 1 also sets a "has a zero" bit per local
 * micro-tile in a second shared bitmap, and an entry whose micro-tile is
 * non-zero, has no zero element and lies inside the operand is written as
 * `entry | PIT_ENTRY_FULL`. A micro-tile inside the region decides that
 * alone. One that spans several CTAs is decided by the LAST of them to
 * arrive: each adds to arrive[tile] one packed word (1 piece, + 1 << 10 if
 * it has a non-zero, + 1 << 20 if it has a zero), so the one atomic that
 * completes the count also returns every piece's bits; that piece appends
 * the entry, marked or not. (Over ARRIVE_MAX pieces, which a packed field
 * cannot count, each piece publishes its bits in the dedup / zero bitmaps
 * with atomics and fences before it counts itself in arrive[tile].)
 *
 * Defines: PIT_DTYPE (a pit_dtype code: f32, f16, bf16, i32 for int masks,
 * or 4 = u8 for bool masks), VEC (elements per load: 16/elem_size, 8 for u8, or 1 when rows
 * are not aligned to the load), DETECT_H, DETECT_TW.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"

#define DETECT_W (DETECT_TW * VEC)
#define DETECT_THREADS 256
#define DETECT_ROWS_PER_PASS (DETECT_THREADS / DETECT_TW)
#define DETECT_ITERS (DETECT_H / DETECT_ROWS_PER_PASS)
/* bitmap of local micro-tiles: at most H+1 rows (Tm=1 gives H) and
 * W/Tk+1 columns */
#define FLAG_ROWS (DETECT_H + 1)
#define FLAG_WORDS ((DETECT_W + 1 + 31) / 32)
/* phase-2 items (group x 32 entries): axis K at most FLAG_ROWS groups of
 * FLAG_WORDS chunks; axis M at most DETECT_W+1 groups of 2 chunks */
#define ITEMS_A (FLAG_ROWS * FLAG_WORDS)
#define ITEMS_B (2 * (DETECT_W + 1))
#define ITEMS_MAX (ITEMS_A > ITEMS_B ? ITEMS_A : ITEMS_B)
#define FLAG_SIZE (FLAG_ROWS * FLAG_WORDS)
#define VEC_ALL ((1u << VEC) - 1u) /* every element of a vector */
/* packed arrive[tile] fields (see above): 10 bits each */
#define ARRIVE_BITS 10
#define ARRIVE_MAX ((1 << ARRIVE_BITS) - 1)
/* a warp's lanes share one row; a thread's rows fit two words of 8 bits
 * per row (pm, pz in the kernel) */
#if DETECT_TW % PIT_WARP != 0 || DETECT_ITERS > 8 || VEC > 8
#error "pit_detect: DETECT_TW must be a multiple of the warp, DETECT_H <= 8 * (256 / DETECT_TW), VEC <= 8"
#endif

#define ELEM_BYTES PIT_DT_BYTES(PIT_DTYPE)

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

/* One load: a 16-byte vector, or one element when rows are not 16-byte
 * aligned (VEC = 1). Unconditional (an invalid one reads a valid address
 * and is masked away after): a predicated load into a zeroed register
 * makes the compiler wait for it at once. */
#if VEC * ELEM_BYTES == 16
typedef uint4 vec_t;
PIT_DEV vec_t load_vec(const pit_u8 *p) { return __ldg((const uint4 *)p); }
#elif VEC * ELEM_BYTES == 8
typedef uint2 vec_t;
PIT_DEV vec_t load_vec(const pit_u8 *p) { return __ldg((const uint2 *)p); }
#elif ELEM_BYTES == 1
typedef pit_u32 vec_t;
PIT_DEV vec_t load_vec(const pit_u8 *p) { return __ldg(p); }
#elif ELEM_BYTES == 4
typedef pit_u32 vec_t;
PIT_DEV vec_t load_vec(const pit_u8 *p) { return __ldg((const unsigned int *)p); }
#else
typedef pit_u32 vec_t;
PIT_DEV vec_t load_vec(const pit_u8 *p) { return __ldg((const unsigned short *)p); }
#endif

/* A 32-bit element non-zero: an f32's bits but the sign (-0.0 zero, NaN
 * not); an i32 has no -0, so INT_MIN (the bits of -0.0f) is non-zero. */
PIT_DEV bool word_nonzero(pit_u32 w)
{
#if PIT_DTYPE == PIT_DT_I32
    return w != 0u;
#else
    return pit_bits_nonzero32(w);
#endif
}

/* Non-zero bit per element of one loaded vector (or scalar). */
PIT_DEV pit_u32 nonzero_mask(vec_t v)
{
#if VEC * ELEM_BYTES == 16
    pit_u32 w[4] = {v.x, v.y, v.z, v.w};
    pit_u32 m = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if ELEM_BYTES == 4
        m |= (word_nonzero(w[i]) ? 1u : 0u) << i;
#else
        m |= (pit_bits_nonzero16(w[i] & 0xffffu) ? 1u : 0u) << (2 * i);
        m |= (pit_bits_nonzero16(w[i] >> 16) ? 1u : 0u) << (2 * i + 1);
#endif
    }
    return m;
#elif VEC * ELEM_BYTES == 8
    const pit_u32 nzx = pit_bytes_nonzero(v.x), nzy = pit_bytes_nonzero(v.y);
    pit_u32 m = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) m |= ((nzx >> (8 * i + 7)) & 1u) << i | ((nzy >> (8 * i + 7)) & 1u) << (i + 4);
    return m;
#elif ELEM_BYTES == 1
    return v != 0 ? 1u : 0u;
#elif ELEM_BYTES == 4
    return word_nonzero(v) ? 1u : 0u;
#else
    return pit_bits_nonzero16(v) ? 1u : 0u;
#endif
}

/* Which micro-tile columns (relative to the one holding column c) the set
 * elements of a vector fall in; one: the vector lies in one micro-tile. */
PIT_DEV pit_u32 tile_column_mask(pit_u32 mask, int c, int tk, bool one)
{
    if (mask == 0) return 0;
    if (tk == 1) return mask;
    if (one) return 1u;
    const int first = c / tk;
    pit_u32 rel = 0;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
        if (mask & (1u << j)) rel |= 1u << ((c + j) / tk - first);
    return rel;
}

/* the 8 bits of row it in a pair of words of 4 rows (pm, pz below) */
PIT_DEV pit_u32 row_bits(const pit_u32 *w, int it) { return ((it < 4 ? w[0] : w[1]) >> (8 * (it & 3))) & 0xffu; }

/* a / b for a >= 0, b >= 1 (unsigned: fewer instructions) */
PIT_DEV int udiv(int a, int b) { return (int)((unsigned)a / (unsigned)b); }

/* How many CTA regions the (clipped) micro-tile (tr, tc) spans; 1: the
 * region holding it decides alone. */
PIT_DEV int tile_pieces(int tr, int tc, int tm, int tk, int rows, int cols)
{
    const int r0 = tr * tm, r1 = (int)((pit_i64)r0 + tm < rows ? (pit_i64)r0 + tm : rows) - 1;
    const int c0 = tc * tk, c1 = (int)((pit_i64)c0 + tk < cols ? (pit_i64)c0 + tk : cols) - 1;
    return (r1 / DETECT_H - r0 / DETECT_H + 1) * (c1 / DETECT_W - c0 / DETECT_W + 1);
}

/* OR the bits rel into a bitmap row from bit lc on. */
PIT_DEV void set_flags(pit_u32 *row, int lc, pit_u32 rel)
{
    int w = lc >> 5, s = lc & 31;
    atomicOr(row + w, rel << s);
    if (s != 0 && (rel >> (32 - s)) != 0) atomicOr(row + w + 1, rel >> (32 - s));
}

/* Warp-wide (fast path): the micro-tile columns lc0 + j (j < 32) of the
 * warp's vectors that hold a lane with `any`; tmask: the lanes in column
 * lc0 + lane. Every lane of the warp calls it. */
PIT_DEV pit_u32 warp_tile_bits(bool any, pit_u32 tmask)
{
    const pit_u32 lanes = pit_ballot(any);
    return pit_ballot((lanes & tmask) != 0);
}

/* NVIDIA sm_80+: at most 48 registers, so 5 CTAs (40 warps) fit an SM as
 * they did before the "full" marks (which take 64 left alone: 4 CTAs).
 * sm_75 holds 4 CTAs of 256 threads at most whatever the registers. */
#if defined(PIT_AMD) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
#define DETECT_BOUNDS __launch_bounds__(DETECT_THREADS)
#else
#define DETECT_BOUNDS __launch_bounds__(DETECT_THREADS, 5)
#endif

PIT_KERNEL void DETECT_BOUNDS
pit_detect(const pit_detect_args a)
{
    /* a bitmap per candidate, then the full target's "has a zero" one */
    __shared__ pit_u32 flags[(PIT_DETECT_MAX + 1) * FLAG_SIZE];
    __shared__ int cta_total[PIT_DETECT_MAX];
    __shared__ pit_u32 item_ballot[ITEMS_MAX];
    __shared__ int item_base[ITEMS_MAX];

    const int row0 = blockIdx.y * DETECT_H;
    const int col0 = blockIdx.x * DETECT_W;
    const int b = blockIdx.z;
    const pit_u8 *xb = a.x + (pit_i64)b * a.batch_stride * ELEM_BYTES;

    /* phase 1: all loads first (unconditional, none used before the last
     * is issued), so 8 are in flight per thread. A warp's lanes share one
     * row (DETECT_TW >= PIT_WARP): its rows and tile rows are warp-uniform.
     * pm: 8 bits per row it (in pm[it / 4], from bit 8 * (it % 4); bit j:
     * element j of the thread's vector is non-zero); pz: the same for its
     * zero elements. Both only for vectors inside X. */
    const int vc = threadIdx.x % DETECT_TW;
    const int rsub = threadIdx.x / DETECT_TW;
    const int c = col0 + vc * VEC;
    const int rfirst = row0 + rsub;
    const bool cvalid = c < a.cols;
    pit_u32 pm[2] = {0u, 0u}, pz[2] = {0u, 0u};
    {
        const pit_u8 *p = xb + ((pit_i64)rfirst * a.ld + c) * ELEM_BYTES;
        const pit_i64 step = a.ld * (DETECT_ROWS_PER_PASS * ELEM_BYTES);
        vec_t v[DETECT_ITERS];
#pragma unroll
        for (int it = 0; it < DETECT_ITERS; ++it) {
            /* element 0 of the batch stands in for a vector outside X */
            v[it] = load_vec(cvalid && rfirst + it * DETECT_ROWS_PER_PASS < a.rows ? p : xb);
            p += step;
        }
        /* zeroed while the loads fly */
        for (int i = threadIdx.x; i < (a.n + 1) * FLAG_SIZE; i += DETECT_THREADS) flags[i] = 0;
        if (threadIdx.x < PIT_DETECT_MAX) cta_total[threadIdx.x] = 0;
        /* in a block of its own: the compiler would otherwise use each
         * load as soon as it is issued, and wait for it there */
        if (cvalid) {
#pragma unroll
            for (int it = 0; it < DETECT_ITERS; ++it) pm[it / 4] |= nonzero_mask(v[it]) << (8 * (it % 4));
            /* rows inside X: the first nvr of the thread's */
            const int nvr = rfirst < a.rows ? min(udiv(a.rows - rfirst + DETECT_ROWS_PER_PASS - 1, DETECT_ROWS_PER_PASS), DETECT_ITERS) : 0;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = nvr - 4 * h; /* rows inside X among pm[h]'s */
                const pit_u32 inside = n >= 4 ? ~0u : n <= 0 ? 0u : (1u << (8 * n)) - 1u;
                pm[h] &= inside;
                pz[h] = ~pm[h] & inside & (0x01010101u * VEC_ALL);
            }
        }
    }
    __syncthreads(); /* flags zeroed */

    pit_u32 *const zflags = flags + a.n * FLAG_SIZE;
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    for (int i = 0; i < a.n; ++i) {
        const pit_detect_target t = a.t[i];
        const int tr0 = udiv(row0, t.tm), tc0 = udiv(col0, t.tk);
        pit_u32 *fl = flags + i * FLAG_SIZE;
        if (VEC == 1 || t.tk % VEC == 0) {
            /* each vector lies in one micro-tile column: per lane, only
             * "some element non-zero" and "some element zero" count. The
             * warp's vectors are V, V + 1, ..., V + 31 (V: lane 0's, in
             * vectors from column 0); k vectors per micro-tile column
             * (k >= 1: the warp spans at most 32 of them); lane 0's
             * vector is the rem-th of its column, local column lc0;
             * tmask: the lanes in local column lc0 + lane. */
            const int V = c / VEC - lane;
            const int k = t.tk / VEC;
            const int q = udiv(V, k);
            const int rem = V - q * k, lc0 = q - tc0;
            const pit_i64 lo = (pit_i64)lane * k - rem, hi = lo + k - 1;
            pit_u32 tmask = 0;
            if (lo <= 31 && hi >= 0) {
                const int l = lo < 0 ? 0 : (int)lo, h = hi > 31 ? 31 : (int)hi;
                tmask = (0xffffffffu >> (31 - h)) & (0xffffffffu << l);
            }
            if (row0 - tr0 * t.tm + DETECT_H <= t.tm) {
                /* the whole region lies in micro-tile row tr0 */
                const pit_u32 bits = warp_tile_bits((pm[0] | pm[1]) != 0, tmask);
                const pit_u32 zbits = t.full ? warp_tile_bits((pz[0] | pz[1]) != 0, tmask) : 0u;
                if (lane == 0) {
                    if (bits) set_flags(fl, lc0, bits);
                    if (zbits) set_flags(zflags, lc0, zbits);
                }
            } else {
                /* tile row of the thread's row it: tr, and the row's offset
                 * in it: rr (stepped, no division per row) */
                int tr = udiv(rfirst, t.tm);
                int rr = rfirst - tr * t.tm;
                int cur = tr;
                pit_u32 acc = 0, zacc = 0;
#pragma unroll
                for (int it = 0; it <= DETECT_ITERS; ++it) {
                    if (it == DETECT_ITERS || tr != cur) { /* warp-uniform */
                        const pit_u32 bits = warp_tile_bits(acc != 0, tmask);
                        const pit_u32 zbits = t.full ? warp_tile_bits(zacc != 0, tmask) : 0u;
                        if (lane == 0) {
                            if (bits) set_flags(fl + (cur - tr0) * FLAG_WORDS, lc0, bits);
                            if (zbits) set_flags(zflags + (cur - tr0) * FLAG_WORDS, lc0, zbits);
                        }
                        cur = tr;
                        acc = zacc = 0;
                    }
                    if (it == DETECT_ITERS) break;
                    acc |= row_bits(pm, it);
                    zacc |= row_bits(pz, it);
                    rr += DETECT_ROWS_PER_PASS;
                    if (t.tm >= DETECT_ROWS_PER_PASS) {
                        if (rr >= t.tm) {
                            rr -= t.tm;
                            ++tr;
                        }
                    } else {
                        const int r = rfirst + (it + 1) * DETECT_ROWS_PER_PASS;
                        tr = udiv(r, t.tm);
                        rr = r - tr * t.tm;
                    }
                }
            }
        } else {
            /* vectors that may straddle micro-tile columns: per element,
             * per lane */
            const int lc = udiv(c, t.tk) - tc0;
            const bool one = c - udiv(c, t.tk) * t.tk + VEC <= t.tk;
            if (row0 - tr0 * t.tm + DETECT_H <= t.tm) {
                /* one micro-tile row: OR the rows first (tile_column_mask
                 * maps each bit on its own) */
                pit_u32 m = pm[0] | pm[1], z = pz[0] | pz[1];
                m |= m >> 16;
                z |= z >> 16;
                m |= m >> 8;
                z |= z >> 8;
                const pit_u32 acc = tile_column_mask(m & 0xffu, c, t.tk, one);
                const pit_u32 zacc = t.full ? tile_column_mask(z & 0xffu, c, t.tk, one) : 0u;
                if (acc) set_flags(fl, lc, acc);
                if (zacc) set_flags(zflags, lc, zacc);
                continue;
            }
            int cur = udiv(rfirst, t.tm);
            pit_u32 acc = 0, zacc = 0;
#pragma unroll 1
            for (int it = 0; it <= DETECT_ITERS; ++it) {
                const int tr = it < DETECT_ITERS ? udiv(rfirst + it * DETECT_ROWS_PER_PASS, t.tm) : cur;
                if (it == DETECT_ITERS || tr != cur) {
                    if (acc) set_flags(fl + (cur - tr0) * FLAG_WORDS, lc, acc);
                    if (zacc) set_flags(zflags + (cur - tr0) * FLAG_WORDS, lc, zacc);
                    cur = tr;
                    acc = zacc = 0;
                }
                if (it == DETECT_ITERS) break;
                acc |= tile_column_mask(row_bits(pm, it), c, t.tk, one);
                if (t.full) zacc |= tile_column_mask(row_bits(pz, it), c, t.tk, one);
            }
        }
    }
    __syncthreads();

    /* phase 2: bits -> entries. Items = (group, chunk of 32 entries) spread
     * over all warps: (a) one ballot per item (dedup decided here, once),
     * (b) one atomicAdd per group on counts[g] for the CTA's whole share
     * (groups spread over all threads), (c) each item's lanes write their
     * entries from the group's base. */
    const int rows_end = min(row0 + DETECT_H, a.rows);
    const int cols_end = min(col0 + DETECT_W, a.cols);
    for (int i = 0; i < a.n; ++i) {
        const pit_detect_target t = a.t[i];
        const pit_u32 *fl = flags + i * FLAG_SIZE;
        const int tr0 = udiv(row0, t.tm), tc0 = udiv(col0, t.tk);
        const int nlr = udiv(rows_end - 1, t.tm) - tr0 + 1;
        const int nlc = udiv(cols_end - 1, t.tk) - tc0 + 1;
        const bool axis_k = t.axis == 1;
        const int ngroups = axis_k ? nlr : nlc;
        const int nentries = axis_k ? nlc : nlr;
        const int nchunks = (nentries + PIT_WARP - 1) / PIT_WARP;
        const int items = ngroups * nchunks;
#pragma unroll 1
        for (int it = warp; it < items; it += DETECT_THREADS / PIT_WARP) {
            const int lg = udiv(it, nchunks);
            const int le = (it - lg * nchunks) * PIT_WARP + lane;
            int lr = axis_k ? lg : le, lcol = axis_k ? le : lg;
            bool set = false, full = false;
            int tr = tr0 + lr, tc = tc0 + lcol;
            if (le < nentries) set = (fl[lr * FLAG_WORDS + (lcol >> 5)] >> (lcol & 31)) & 1u;
            if (t.full && le < nentries) {
                pit_u32 *zw = &zflags[lr * FLAG_WORDS + (lcol >> 5)];
                const bool zero = (*zw >> (lcol & 31)) & 1u;
                const bool inside = (pit_i64)tr * t.tm + t.tm <= a.rows && (pit_i64)tc * t.tk + t.tk <= a.cols;
                const int pieces = tile_pieces(tr, tc, t.tm, t.tk, a.rows, a.cols);
                if (pieces == 1 || !t.dedup) {
                    full = set && !zero && inside;
                } else {
                    /* every piece, zero or not, arrives; the last one decides
                     * with all the bits in */
                    const pit_u32 tiles_rows = ((pit_u32)a.rows + (pit_u32)t.tm - 1u) / (pit_u32)t.tm;
                    const pit_i64 bit = ((pit_i64)b * tiles_rows + tr) * t.tiles_cols + tc;
                    if (pieces <= ARRIVE_MAX) {
                        const int mine = 1 + (set ? 1 << ARRIVE_BITS : 0) + (zero ? 1 << (2 * ARRIVE_BITS) : 0);
                        const int old = pit_atomic_add(t.arrive + bit, mine);
                        const int all = old + mine;
                        const bool last = (old & ARRIVE_MAX) == pieces - 1;
                        set = last && ((all >> ARRIVE_BITS) & ARRIVE_MAX) != 0;
                        full = set && inside && ((all >> (2 * ARRIVE_BITS)) & ARRIVE_MAX) == 0;
                    } else {
                        pit_u32 m = 1u << (bit & 31);
                        if (set) pit_atomic_or(t.dedup + (bit >> 5), m);
                        if (zero) pit_atomic_or(t.zero + (bit >> 5), m);
                        pit_fence_device();
                        const bool last = pit_atomic_add(t.arrive + bit, 1) == pieces - 1;
                        set = false;
                        if (last) {
                            pit_fence_device();
                            set = (pit_atomic_or(t.dedup + (bit >> 5), 0u) & m) != 0;
                            full = set && inside && (pit_atomic_or(t.zero + (bit >> 5), 0u) & m) == 0;
                        }
                    }
                }
                /* from here on zflags says "not marked" (pass c reads it);
                 * a marked micro-tile has no zero bit here, none to clear.
                 * Only this lane touches this bit. */
                if (!full && !zero) atomicOr(zw, 1u << (lcol & 31));
            } else if (set && t.dedup) {
                /* owned when the (clipped) micro-tile lies inside the region */
                bool owned = tr * t.tm >= row0 && min(tr * t.tm + t.tm, a.rows) <= rows_end &&
                             tc * t.tk >= col0 && min(tc * t.tk + t.tk, a.cols) <= cols_end;
                if (!owned) {
                    const pit_u32 tiles_rows = ((pit_u32)a.rows + (pit_u32)t.tm - 1u) / (pit_u32)t.tm;
                    pit_i64 bit = ((pit_i64)b * tiles_rows + tr) * t.tiles_cols + tc;
                    pit_u32 m = 1u << (bit & 31);
                    set = (atomicOr(t.dedup + (bit >> 5), m) & m) == 0;
                }
            }
            pit_u32 ballot = pit_ballot(set);
            if (lane == 0) item_ballot[it] = ballot;
        }
        __syncthreads();
#pragma unroll 1
        for (int lg = threadIdx.x; lg < ngroups; lg += DETECT_THREADS) {
            int sum = 0;
            for (int ch = 0; ch < nchunks; ++ch) {
                item_base[lg * nchunks + ch] = sum;
                sum += pit_popc(item_ballot[lg * nchunks + ch]);
            }
            if (sum) {
                int g = b * t.groups_per_batch + (axis_k ? tr0 + lg : tc0 + lg);
                const int base = pit_atomic_add(t.counts + g, sum);
                atomicAdd(&cta_total[i], sum);
                for (int ch = 0; ch < nchunks; ++ch) item_base[lg * nchunks + ch] += base;
            }
        }
        __syncthreads();
#pragma unroll 1
        for (int it = warp; it < items; it += DETECT_THREADS / PIT_WARP) {
            const pit_u32 ballot = item_ballot[it];
            if (!((ballot >> lane) & 1u)) continue;
            const int lg = udiv(it, nchunks);
            const int le = (it - lg * nchunks) * PIT_WARP + lane;
            const int g = b * t.groups_per_batch + (axis_k ? tr0 + lg : tc0 + lg);
            const int pos = item_base[it] + pit_popc(ballot & ((1u << lane) - 1u));
            const int lr = axis_k ? lg : le, lcol = axis_k ? le : lg;
            const bool marked = t.full && !((zflags[lr * FLAG_WORDS + (lcol >> 5)] >> (lcol & 31)) & 1u);
            const int mark = marked ? PIT_ENTRY_FULL : 0;
            if (pos < t.capacity)
                t.entries[(pit_i64)g * t.capacity + pos] = (axis_k ? tc0 + le : tr0 + le) | mark;
        }
        __syncthreads(); /* item arrays reused by the next candidate */
    }
    if (threadIdx.x < a.n && cta_total[threadIdx.x] != 0)
        pit_atomic_add(a.t[threadIdx.x].total, cta_total[threadIdx.x]);
}
