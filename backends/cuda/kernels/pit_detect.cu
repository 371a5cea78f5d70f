/*
 * pit_detect.cu - online sparsity detection: ONE pass over the sparse
 * operand X that fills up to PIT_DETECT_MAX indexes (micro-tile candidates)
 * at once.
 *
 * A CTA owns a region of DETECT_H rows x (DETECT_TW * VEC) columns. Phase 1
 * loads it with 16-byte vectors (each thread keeps 8 loads in flight) and
 * sets, per candidate, one bit per non-zero micro-tile in shared memory.
 * Phase 2 turns the bits into index entries: one warp per group, a ballot
 * per 32 entries, one atomicAdd per warp on counts[g] (out-of-order append,
 * no sort). A micro-tile that sticks out of the region (not aligned to it)
 * is deduplicated through a global bitmap so each one is appended once.
 *
 * "Full" micro-tiles (pit_index.flag_full, core/backend.h): for at most one
 * target (full != 0) phase 1 also sets a "has a zero" bit per local
 * micro-tile in a second shared bitmap, and an entry whose micro-tile is
 * non-zero, has no zero element and lies inside the operand is written as
 * `entry | PIT_ENTRY_FULL`. A micro-tile inside the region decides that
 * alone. One that spans several CTAs is decided by the LAST of them to
 * arrive: each publishes its "non-zero" (the dedup bitmap) and "has a zero"
 * bits with atomics, fences, and counts itself in arrive[tile]; the one that
 * completes the count (all pieces known) appends the entry, marked or not.
 *
 * Defines: PIT_DTYPE, VEC (elements per load: 16/elem_size, or 1 when rows
 * are not 16-byte aligned), DETECT_H, DETECT_TW.
 */
#include "pit_port.cuh"

#define PIT_DETECT_MAX 8
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

#if PIT_DTYPE == PIT_DT_F32
#define ELEM_BYTES 4
#else
#define ELEM_BYTES 2
#endif

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

struct pit_detect_target {
    int tm, tk, axis;       /* axis: 1 = K, 2 = M */
    int groups_per_batch, capacity;
    int tiles_cols;         /* micro-tiles along the columns of X */
    int *counts, *entries, *total;
    pit_u32 *dedup;         /* NULL when every micro-tile is region-aligned */
    /* "full" marks (at most one target has full = 1): zero and arrive exist
     * when dedup does (bits / counters per micro-tile, as dedup's bits) */
    pit_u32 *zero;          /* a piece of the micro-tile has a zero element */
    int *arrive;            /* pieces (CTAs) that have published their bits */
    int full, pad;
};

struct pit_detect_args {
    const pit_u8 *x;        /* element 0 */
    pit_i64 ld, batch_stride; /* elements */
    int rows, cols, n;
    pit_detect_target t[PIT_DETECT_MAX];
};

/* Non-zero bit per element of one loaded vector (or scalar). */
PIT_DEV pit_u32 nonzero_mask(const pit_u8 *p, bool valid)
{
    if (!valid) return 0;
#if VEC * ELEM_BYTES == 16
    uint4 v = __ldg((const uint4 *)p);
    pit_u32 w[4] = {v.x, v.y, v.z, v.w};
    pit_u32 m = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if ELEM_BYTES == 4
        m |= (pit_bits_nonzero32(w[i]) ? 1u : 0u) << i;
#else
        m |= (pit_bits_nonzero16(w[i] & 0xffffu) ? 1u : 0u) << (2 * i);
        m |= (pit_bits_nonzero16(w[i] >> 16) ? 1u : 0u) << (2 * i + 1);
#endif
    }
    return m;
#elif ELEM_BYTES == 4
    return pit_bits_nonzero32(__ldg((const unsigned int *)p)) ? 1u : 0u;
#else
    return pit_bits_nonzero16(__ldg((const unsigned short *)p)) ? 1u : 0u;
#endif
}

/* Which micro-tile columns (relative to the one holding column c) the set
 * elements of a vector fall in. */
PIT_DEV pit_u32 tile_column_mask(pit_u32 mask, int c, int tk)
{
    if (mask == 0) return 0;
    if (tk == 1) return mask;
    int first = c / tk;
    if ((c % tk) + VEC <= tk) return 1u; /* the vector lies in one micro-tile */
    pit_u32 rel = 0;
#pragma unroll
    for (int j = 0; j < VEC; ++j)
        if (mask & (1u << j)) rel |= 1u << ((c + j) / tk - first);
    return rel;
}

/* How many CTA regions the (clipped) micro-tile (tr, tc) spans; 1: the
 * region holding it decides alone. */
PIT_DEV int tile_pieces(int tr, int tc, int tm, int tk, int rows, int cols)
{
    const int r0 = tr * tm, r1 = (int)((pit_i64)r0 + tm < rows ? (pit_i64)r0 + tm : rows) - 1;
    const int c0 = tc * tk, c1 = (int)((pit_i64)c0 + tk < cols ? (pit_i64)c0 + tk : cols) - 1;
    return (r1 / DETECT_H - r0 / DETECT_H + 1) * (c1 / DETECT_W - c0 / DETECT_W + 1);
}

PIT_DEV void set_flags(pit_u32 *flags, int lr, int lc, pit_u32 rel)
{
    pit_u32 *row = flags + lr * FLAG_WORDS;
    int w = lc >> 5, s = lc & 31;
    atomicOr(row + w, rel << s);
    if (s != 0 && (rel >> (32 - s)) != 0) atomicOr(row + w + 1, rel >> (32 - s));
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
    __shared__ pit_u32 flags[PIT_DETECT_MAX][FLAG_ROWS * FLAG_WORDS];
    __shared__ int cta_total[PIT_DETECT_MAX];
    __shared__ pit_u32 zflags[FLAG_ROWS * FLAG_WORDS]; /* the full target: "has a zero" */
    __shared__ pit_u32 item_ballot[ITEMS_MAX];
    __shared__ int item_base[ITEMS_MAX];

    const int row0 = blockIdx.y * DETECT_H;
    const int col0 = blockIdx.x * DETECT_W;
    const int b = blockIdx.z;
    const pit_u8 *xb = a.x + (pit_i64)b * a.batch_stride * ELEM_BYTES;

    for (int i = threadIdx.x; i < a.n * FLAG_ROWS * FLAG_WORDS; i += DETECT_THREADS)
        flags[i / (FLAG_ROWS * FLAG_WORDS)][i % (FLAG_ROWS * FLAG_WORDS)] = 0;
    for (int i = threadIdx.x; i < FLAG_ROWS * FLAG_WORDS; i += DETECT_THREADS) zflags[i] = 0;
    if (threadIdx.x < PIT_DETECT_MAX) cta_total[threadIdx.x] = 0;

    /* phase 1: all loads first, so 8 are in flight per thread */
    const int vc = threadIdx.x % DETECT_TW;
    const int rsub = threadIdx.x / DETECT_TW;
    const int c = col0 + vc * VEC;
    pit_u32 mask[DETECT_ITERS];
#pragma unroll
    for (int it = 0; it < DETECT_ITERS; ++it) {
        int r = row0 + rsub + it * DETECT_ROWS_PER_PASS;
        bool valid = r < a.rows && c < a.cols;
        mask[it] = nonzero_mask(xb + ((pit_i64)r * a.ld + c) * ELEM_BYTES, valid);
    }
    __syncthreads(); /* flags zeroed */

    for (int i = 0; i < a.n; ++i) {
        const pit_detect_target t = a.t[i];
        const int tr0 = row0 / t.tm, tc0 = col0 / t.tk;
        const int lc = c / t.tk - tc0;
        int cur = -1;
        pit_u32 acc = 0, zacc = 0;
#pragma unroll
        for (int it = 0; it < DETECT_ITERS; ++it) {
            int r = row0 + rsub + it * DETECT_ROWS_PER_PASS;
            int tr = r / t.tm;
            if (tr != cur) {
                if (acc) set_flags(flags[i], cur - tr0, lc, acc);
                if (zacc) set_flags(zflags, cur - tr0, lc, zacc);
                cur = tr;
                acc = zacc = 0;
            }
            acc |= tile_column_mask(mask[it], c, t.tk);
            /* a valid vector lies wholly inside the operand (VEC > 1 needs
             * cols % VEC == 0); what lies outside is never full anyway */
            if (t.full && r < a.rows && c < a.cols)
                zacc |= tile_column_mask(~mask[it] & ((1u << VEC) - 1u), c, t.tk);
        }
        if (acc) set_flags(flags[i], cur - tr0, lc, acc);
        if (zacc) set_flags(zflags, cur - tr0, lc, zacc);
    }
    __syncthreads();

    /* phase 2: bits -> entries. Items = (group, chunk of 32 entries) spread
     * over all warps: (a) one ballot per item (dedup decided here, once),
     * (b) one atomicAdd per group on counts[g] for the CTA's whole share,
     * (c) each item's lanes write their entries from the group's base. */
    const int warp = threadIdx.x / PIT_WARP, lane = pit_lane();
    const int rows_end = min(row0 + DETECT_H, a.rows);
    const int cols_end = min(col0 + DETECT_W, a.cols);
    for (int i = 0; i < a.n; ++i) {
        const pit_detect_target t = a.t[i];
        const int tr0 = row0 / t.tm, tc0 = col0 / t.tk;
        const int nlr = (rows_end - 1) / t.tm - tr0 + 1;
        const int nlc = (cols_end - 1) / t.tk - tc0 + 1;
        const bool axis_k = t.axis == 1;
        const int ngroups = axis_k ? nlr : nlc;
        const int nentries = axis_k ? nlc : nlr;
        const int nchunks = (nentries + PIT_WARP - 1) / PIT_WARP;
        const int items = ngroups * nchunks;
        for (int it = warp; it < items; it += DETECT_THREADS / PIT_WARP) {
            const int lg = it / nchunks, le = (it % nchunks) * PIT_WARP + lane;
            int lr = axis_k ? lg : le, lcol = axis_k ? le : lg;
            bool set = false, full = false;
            int tr = tr0 + lr, tc = tc0 + lcol;
            if (le < nentries) set = (flags[i][lr * FLAG_WORDS + (lcol >> 5)] >> (lcol & 31)) & 1u;
            if (t.full && le < nentries) {
                pit_u32 *zw = &zflags[lr * FLAG_WORDS + (lcol >> 5)];
                const bool zero = (*zw >> (lcol & 31)) & 1u;
                const bool inside = (pit_i64)tr * t.tm + t.tm <= a.rows && (pit_i64)tc * t.tk + t.tk <= a.cols;
                const int pieces = tile_pieces(tr, tc, t.tm, t.tk, a.rows, a.cols);
                if (pieces == 1 || !t.dedup) {
                    full = set && !zero && inside;
                } else {
                    /* every piece, zero or not, publishes and arrives; the
                     * last one decides with all the bits in */
                    pit_i64 tiles_rows = (a.rows + t.tm - 1) / t.tm;
                    pit_i64 bit = ((pit_i64)b * tiles_rows + tr) * t.tiles_cols + tc;
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
                /* from here on zflags says "not marked" (pass c reads it);
                 * a marked micro-tile has no zero bit here, none to clear.
                 * Only this lane touches this bit. */
                if (!full && !zero) atomicOr(zw, 1u << (lcol & 31));
            } else if (set && t.dedup) {
                /* owned when the (clipped) micro-tile lies inside the region */
                bool owned = tr * t.tm >= row0 && min(tr * t.tm + t.tm, a.rows) <= rows_end &&
                             tc * t.tk >= col0 && min(tc * t.tk + t.tk, a.cols) <= cols_end;
                if (!owned) {
                    pit_i64 tiles_rows = (a.rows + t.tm - 1) / t.tm;
                    pit_i64 bit = ((pit_i64)b * tiles_rows + tr) * t.tiles_cols + tc;
                    pit_u32 m = 1u << (bit & 31);
                    set = (atomicOr(t.dedup + (bit >> 5), m) & m) == 0;
                }
            }
            pit_u32 ballot = pit_ballot(set);
            if (lane == 0) item_ballot[it] = ballot;
        }
        __syncthreads();
        for (int lg = warp; lg < ngroups; lg += DETECT_THREADS / PIT_WARP) {
            if (lane != 0) continue;
            int sum = 0;
            for (int ch = 0; ch < nchunks; ++ch) {
                item_base[lg * nchunks + ch] = sum;
                sum += pit_popc(item_ballot[lg * nchunks + ch]);
            }
            int base = 0;
            if (sum) {
                int g = b * t.groups_per_batch + (axis_k ? tr0 + lg : tc0 + lg);
                base = pit_atomic_add(t.counts + g, sum);
                atomicAdd(&cta_total[i], sum);
            }
            for (int ch = 0; ch < nchunks; ++ch) item_base[lg * nchunks + ch] += base;
        }
        __syncthreads();
        for (int it = warp; it < items; it += DETECT_THREADS / PIT_WARP) {
            const pit_u32 ballot = item_ballot[it];
            if (!((ballot >> lane) & 1u)) continue;
            const int lg = it / nchunks, le = (it % nchunks) * PIT_WARP + lane;
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
