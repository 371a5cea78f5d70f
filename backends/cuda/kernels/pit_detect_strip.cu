/*
 * pit_detect_strip.cu - online sparsity detection at the read bandwidth:
 * ONE pass over the sparse operand X that fills up to PIT_DETECT_MAX
 * indexes whose micro-tiles tile a warp's strip (every matmul candidate;
 * ops/detect.c sends any other set, and "full" marks, to pit_detect.cu).
 *
 * A CTA owns a strip of STRIP_H (64) rows x 32 16-byte vectors; each of
 * its 4 warps reads one group of 16 rows, its 16 loads all issued before
 * any is used. Per lane a warp keeps the OR of its vectors: an element is
 * non-zero when its magnitude bits are (the sign alone is -0, all bits of
 * an i32 or u8 count), and the OR of the raw bits has a magnitude bit set
 * exactly when one of the 16 rows has, so one OR a load answers for every
 * element. Per row it takes a ballot of the lanes whose vector holds a
 * non-zero element. The ORs and ballots meet in shared memory (one barrier
 * a strip), and the candidates are spread over the warps (warp w takes
 * candidates w and w + 4), each read off those two: micro-tiles of 16, 32
 * or 64 rows from the ORs, of one row from the ballots; sums and prefix
 * sums across the warp are ballots of bit planes, not chains of shuffles.
 * A warp a group keeps 4x the loads in flight of a warp a strip, and a
 * strip's candidate work runs on 4 warps, not one
 * (docs/design/detect-read-speed.md).
 *
 * Entries: first the groups of a warp's candidates reserve room in
 * counts[g] with one atomicAdd each, all issued before any result is used
 * (one round trip a strip, not one a candidate); then the entries are written from
 * the returned bases, in any order (the index contract). counts and total
 * were zeroed before the launch (ops/detect.c: one memset for a plan).
 *
 * No races by design (compute-sanitizer racecheck and memcheck have
 * nothing to find): X is only read, from rows and columns inside it; a
 * position of entries is written by the one lane whose atomicAdd on
 * counts[g] reserved it, below capacity; counts and total change only
 * through atomics; a strip's ORs and ballots are written before the
 * strip's barrier and read after it, in a buffer no warp writes again
 * before the next barrier; the CTA's totals are zeroed before a barrier,
 * added to with atomics, and read after the last one.
 *
 * Defines: PIT_DTYPE (a pit_dtype code: f32, f16, bf16, i32 for int
 * masks, or 4 = u8 for bool masks), VEC (elements in 16 bytes). The host
 * launches it only for 16-byte aligned rows and micro-tiles that fit a
 * strip (pit_cuda_strip_fits, cuda_kernels.c).
 */
#include "common/port.cuh"
#include "args.h"

#define STRIP_H PIT_DETECT_STRIP_H
#define STRIP_G PIT_DETECT_STRIP_G
#define STRIP_GROUPS (STRIP_H / STRIP_G)
#define STRIP_WARPS (PIT_DETECT_STRIP_THREADS / PIT_WARP)
#define STRIP_W (PIT_WARP * VEC)

#define ELEM_BYTES PIT_DT_BYTES(PIT_DTYPE)
#define WORD_ELEMS (4 / ELEM_BYTES)

#if VEC * ELEM_BYTES != 16 || STRIP_GROUPS != 4 || STRIP_H != 2 * PIT_WARP || STRIP_WARPS != STRIP_GROUPS
#error "pit_detect_strip: VEC elements make 16 bytes; a strip is 4 groups of 16 rows, two rows a lane, a warp a group"
#endif

/* The bits that make an element of a 32-bit word non-zero. */
#if PIT_DTYPE == PIT_DT_F16 || PIT_DTYPE == PIT_DT_BF16
#define NZ_MASK 0x7fff7fffu
#elif PIT_DTYPE == PIT_DT_F32
#define NZ_MASK 0x7fffffffu
#else
#define NZ_MASK 0xffffffffu /* i32 (no -0: INT_MIN is non-zero), u8 */
#endif

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

PIT_DEV uint4 load_vec(const pit_u8 *p) { return __ldg((const uint4 *)p); }
PIT_DEV uint4 or4(uint4 a, uint4 b) { return make_uint4(a.x | b.x, a.y | b.y, a.z | b.z, a.w | b.w); }
PIT_DEV bool vec_any(uint4 v) { return ((v.x | v.y | v.z | v.w) & NZ_MASK) != 0u; }

/* One bit per non-zero element of a word, element 0 in bit 0. */
PIT_DEV pit_u32 word_bits(pit_u32 w)
{
#if ELEM_BYTES == 4
    return (w & NZ_MASK) != 0u ? 1u : 0u;
#elif ELEM_BYTES == 2
    /* a half's magnitude + 0x7fff carries into its bit 15 when non-zero,
     * never into the next half */
    const pit_u32 t = ((w & NZ_MASK) + NZ_MASK) & 0x80008000u;
    return ((t >> 15) & 1u) | (t >> 30);
#else
    const pit_u32 t = pit_bytes_nonzero(w); /* bits 7, 15, 23, 31 */
    return ((t >> 7) & 1u) | ((t >> 14) & 2u) | ((t >> 21) & 4u) | (t >> 28);
#endif
}

/* VEC bits: the non-zero elements of a vector. */
PIT_DEV pit_u32 vec_bits(uint4 v)
{
    return word_bits(v.x) | word_bits(v.y) << WORD_ELEMS | word_bits(v.z) << (2 * WORD_ELEMS) |
           word_bits(v.w) << (3 * WORD_ELEMS);
}

/* ---- a strip and what the warp keeps of it ------------------------------- */
struct strip {
    const pit_u8 *x; /* element 0 of the strip's batch */
    int batch, row0, col0;
};

PIT_DEV strip strip_of(const pit_detect_args &a, pit_i64 u, pit_i64 strips_r, pit_i64 strips_c)
{
    strip s;
    const pit_i64 per_batch = strips_r * strips_c;
    const pit_i64 b = u / per_batch, rest = u - b * per_batch;
    const pit_i64 sr = rest / strips_c;
    s.batch = (int)b;
    s.row0 = (int)(sr * STRIP_H);
    s.col0 = (int)((rest - sr * strips_c) * STRIP_W);
    s.x = a.x + b * a.batch_stride * ELEM_BYTES;
    return s;
}

struct strip_bits {
    pit_u32 group[STRIP_GROUPS]; /* the lane's non-zero elements in rows 16g..16g+15 (VEC bits) */
    pit_u32 row[2];              /* rows lane and 32 + lane: the lanes whose vector has a non-zero */
};

/* Reads the lane's column of the strip's group g (rows 16g..16g+15) and
 * returns the non-zero elements of its vectors (VEC bits); with ballots
 * (some candidate has 1-row micro-tiles) each row's ballot of lanes goes to
 * rows[16g + k]. Loads are unconditional (a row below X reads X's last
 * row, a column right of it column 0, both masked to zero after): a
 * predicated load into a zeroed register would make the compiler wait for
 * it at once. */
PIT_DEV pit_u32 read_group(const pit_detect_args &a, const strip &s, int lane, int g, bool ballots, pit_u32 *rows)
{
    const int c = s.col0 + lane * VEC;
    const bool cvalid = c < a.cols;
    const int last = a.rows - 1 - s.row0; /* the strip's last row inside X */
    const pit_u8 *col = s.x + ((pit_i64)s.row0 * a.ld + (cvalid ? c : 0)) * ELEM_BYTES;
    const pit_i64 step = a.ld * ELEM_BYTES;
    uint4 v[STRIP_G];
#pragma unroll
    for (int k = 0; k < STRIP_G; ++k) v[k] = load_vec(col + min(g * STRIP_G + k, last) * step);
    uint4 acc = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int k = 0; k < STRIP_G; ++k) {
        const int r = g * STRIP_G + k;
        const uint4 x = cvalid && r <= last ? v[k] : make_uint4(0u, 0u, 0u, 0u);
        acc = or4(acc, x);
        if (ballots) {
            const pit_u32 lanes = pit_ballot(vec_any(x));
            if (lane == k) rows[r] = lanes;
        }
    }
    return vec_bits(acc);
}

/* ---- a candidate as a strip sees it (warp-uniform) ------------------------ */
/* log2 of a power of two */
PIT_DEV int log2_pow2(int x) { return pit_popc((pit_u32)x - 1u); }

#define VEC_LOG (VEC == 4 ? 2 : VEC == 8 ? 3 : 4)
#define STRIP_G_LOG 4
#if (1 << VEC_LOG) != VEC || (1 << STRIP_G_LOG) != STRIP_G
#error "pit_detect_strip: VEC and STRIP_G are 4, 8 or 16"
#endif

struct shape {
    bool by_row;   /* axis K or N: a group is a micro-tile row; M: a micro-tile column */
    bool one_row;  /* tm == 1: the micro-tile rows are the strip's rows (ballots) */
    int tk;
    int span_log;  /* log2 of the 16-row groups a micro-tile row (tm 16, 32, 64) */
    int nrows;     /* micro-tile rows in the strip */
    int lanes;     /* lanes a micro-tile column (tk / VEC); 0: a lane holds several */
    int per_lane;  /* micro-tile columns a lane (VEC / tk; 1 when lanes > 0) */
    int planes;    /* bit planes of a lane's count of them (per_lane < 2^planes) */
    int ncols;     /* micro-tile columns in the strip */
    int tr0, tc0;  /* the strip's first micro-tile row and column */
    pit_i64 gbase; /* the first group of the strip's batch */
};

/* tm and tk are powers of two here (pit_cuda_strip_fits): shifts, no
 * division. */
PIT_DEV shape shape_of(const pit_detect_target &t, const strip &s)
{
    shape h;
    const int tm_log = log2_pow2(t.tm), tk_log = log2_pow2(t.tk);
    h.by_row = t.axis != 2;
    h.one_row = t.tm == 1;
    h.tk = t.tk;
    h.span_log = h.one_row ? 0 : tm_log - STRIP_G_LOG;
    h.nrows = h.one_row ? STRIP_H : STRIP_GROUPS >> h.span_log;
    h.lanes = t.tk >= VEC ? t.tk >> VEC_LOG : 0;
    h.per_lane = t.tk >= VEC ? 1 : VEC >> tk_log;
    h.planes = log2_pow2(h.per_lane) + 1;
    h.ncols = STRIP_W >> tk_log;
    h.tr0 = s.row0 >> tm_log;
    h.tc0 = s.col0 >> tk_log;
    h.gbase = (pit_i64)s.batch * t.groups_per_batch;
    return h;
}

/* The lane's micro-tile columns with a non-zero among the element bits m
 * of its vector: bit p is column lane * per_lane + p of the strip. Every
 * lane calls it (a ballot when a column spans lanes). */
PIT_DEV pit_u32 lane_columns(const shape &h, pit_u32 m, int lane)
{
    if (h.lanes > 0) {
        const pit_u32 any = pit_ballot(m != 0u);
        if (lane >= h.ncols) return 0u;
        const pit_u32 mine = h.lanes == PIT_WARP ? any : (any >> (lane * h.lanes)) & ((1u << h.lanes) - 1u);
        return mine != 0u ? 1u : 0u;
    }
    if (h.tk == 1) return m;
    const pit_u32 tmask = (1u << h.tk) - 1u;
    pit_u32 t = 0u;
    for (int p = 0; p < h.per_lane; ++p) t |= (((m >> (p * h.tk)) & tmask) != 0u ? 1u : 0u) << p;
    return t;
}

/* Micro-tile row j of a block candidate (tm 16, 32 or 64). */
PIT_DEV pit_u32 block_columns(const shape &h, const strip_bits &d, int j, int lane)
{
    pit_u32 m = 0u;
#pragma unroll
    for (int g = 0; g < STRIP_GROUPS; ++g)
        if ((g >> h.span_log) == j) m |= d.group[g];
    return lane_columns(h, m, lane);
}

/* A 1-row candidate's micro-tile columns with a non-zero in one row, from
 * the row's ballot of lanes (bit q: column q; a column is h.lanes lanes). */
PIT_DEV pit_u32 row_columns(const shape &h, pit_u32 lanes)
{
    if (h.lanes == 1) return lanes;
    const pit_u32 mask = h.lanes == PIT_WARP ? ~0u : (1u << h.lanes) - 1u;
    pit_u32 t = 0u;
    for (int q = 0; q < h.ncols; ++q) t |= (((lanes >> (q * h.lanes)) & mask) != 0u ? 1u : 0u) << q;
    return t;
}

/* The sum of v (0 <= v < 2^planes <= 32) over the warp, and *below over
 * the lanes below this one: ballots of v's bit planes, independent of each
 * other (one for a bit a lane). */
PIT_DEV int warp_sum(int v, int planes, int lane, int *below)
{
    const pit_u32 lt = (1u << lane) - 1u;
    int sum = 0, low = 0;
#pragma unroll
    for (int k = 0; k < 5; ++k) {
        if (k >= planes) break;
        const pit_u32 b = pit_ballot(((v >> k) & 1) != 0);
        sum += pit_popc(b) << k;
        low += pit_popc(b & lt) << k;
    }
    *below = low;
    return sum;
}

/* What one candidate asks of a lane, worked out once for both steps:
 * its micro-tiles in the strip and the entries it reserves in its (at most
 * two) groups, lane_group k:
 *   block, by row:  micro-tile row `lane`;  w[j]: row j's columns of the
 *                   lane (low 16 bits) and the entries of row j the lanes
 *                   below it hold (high 16 bits: at most 32 x 16);
 *   block, by col:  column `lane`;          w[j]: 1 when row j of it is non-zero;
 *   1-row, by row:  rows lane, 32 + lane;   w[k]: the columns of row 32k + lane;
 *   1-row, by col:  column `lane`;          w[k]: as by row. */
struct lane_tiles {
    pit_u32 w[STRIP_GROUPS];
    int mine[2];
    int group[2]; /* lane_group(k) */
};

/* The group of the lane's k-th reservation (lane_tiles). */
PIT_DEV int lane_group(const shape &h, int lane, int k)
{
    return (int)h.gbase + (h.by_row ? h.tr0 + lane + (h.one_row ? k * PIT_WARP : 0) : h.tc0 + lane);
}

PIT_DEV lane_tiles tiles_of(const shape &h, const strip_bits &d, int lane)
{
    lane_tiles r;
#pragma unroll
    for (int j = 0; j < STRIP_GROUPS; ++j) r.w[j] = 0u;
    r.mine[0] = r.mine[1] = 0;
    r.group[0] = lane_group(h, lane, 0);
    r.group[1] = lane_group(h, lane, 1);
    if (h.one_row) {
        r.w[0] = row_columns(h, d.row[0]);
        r.w[1] = row_columns(h, d.row[1]);
        if (h.by_row) {
            r.mine[0] = pit_popc(r.w[0]);
            r.mine[1] = pit_popc(r.w[1]);
        } else {
            for (int q = 0; q < h.ncols; ++q) {
                const int c = pit_popc(pit_ballot(((r.w[0] >> q) & 1u) != 0u)) +
                              pit_popc(pit_ballot(((r.w[1] >> q) & 1u) != 0u));
                if (lane == q) r.mine[0] = c;
            }
        }
        return r;
    }
#pragma unroll
    for (int j = 0; j < STRIP_GROUPS; ++j) {
        if (j >= h.nrows) break;
        const pit_u32 b = block_columns(h, d, j, lane);
        if (h.by_row) {
            int below;
            const int c = warp_sum(pit_popc(b), h.planes, lane, &below);
            if (lane == j) r.mine[0] = c;
            r.w[j] = b | (pit_u32)below << 16;
        } else {
            r.w[j] = b; /* one column a lane: 0 or 1 */
            r.mine[0] += (int)b;
        }
    }
    return r;
}

PIT_DEV void put(const pit_detect_target &t, pit_i64 g, int pos, int entry)
{
    if (pos < t.capacity) t.entries[g * t.capacity + pos] = entry;
}

/* Writes the strip's entries of one candidate from the bases its
 * reservations returned. */
PIT_DEV void write_entries(const pit_detect_target &t, const shape &h, const lane_tiles &r, int lane, const int base[2])
{
    if (h.one_row) {
        if (h.by_row) {
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                int pos = base[k];
                for (int q = 0; q < h.ncols; ++q)
                    if ((r.w[k] >> q) & 1u) put(t, r.group[k], pos++, h.tc0 + q);
            }
            return;
        }
        const pit_u32 lt = (1u << lane) - 1u;
        for (int q = 0; q < h.ncols; ++q) {
            int pos = pit_shfl(base[0], q);
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const bool on = ((r.w[k] >> q) & 1u) != 0u;
                const pit_u32 b = pit_ballot(on);
                if (on) put(t, h.gbase + h.tc0 + q, pos + pit_popc(b & lt), h.tr0 + k * PIT_WARP + lane);
                pos += pit_popc(b);
            }
        }
        return;
    }
    int pos = base[0]; /* by column: the lane's column, filled row by row */
#pragma unroll
    for (int j = 0; j < STRIP_GROUPS; ++j) {
        if (j >= h.nrows) break;
        const pit_u32 b = r.w[j] & 0xffffu;
        if (h.by_row) {
            int at = pit_shfl(base[0], j) + (int)(r.w[j] >> 16);
            const int c0 = h.tc0 + lane * h.per_lane;
            for (int p = 0; p < h.per_lane; ++p)
                if ((b >> p) & 1u) put(t, h.gbase + h.tr0 + j, at++, c0 + p);
        } else if (b) {
            put(t, r.group[0], pos++, h.tr0 + j);
        }
    }
}

/* NVIDIA: at most 128 registers, so 4 CTAs (16 warps, 128 KB of loads in
 * flight) fit an SM. */
#if defined(PIT_AMD)
#define STRIP_BOUNDS __launch_bounds__(PIT_DETECT_STRIP_THREADS)
#else
#define STRIP_BOUNDS __launch_bounds__(PIT_DETECT_STRIP_THREADS, 4)
#endif

/* A candidate slot of a warp: warp w works candidates w, w + 4, ... */
#define SLOTS ((PIT_DETECT_MAX + STRIP_WARPS - 1) / STRIP_WARPS)

PIT_KERNEL void STRIP_BOUNDS
pit_detect_strip(const pit_detect_args a)
{
    /* A strip's bits, in two buffers: iteration i fills buffer i & 1, so
     * one barrier an iteration orders both its reads after the writes and
     * the next writes of a buffer after its reads two iterations before. */
    __shared__ pit_u32 group_bits[2][STRIP_GROUPS][PIT_WARP];
    __shared__ pit_u32 row_bits[2][STRIP_H];
    __shared__ int cta_total[PIT_DETECT_MAX];
    if (threadIdx.x < PIT_DETECT_MAX) cta_total[threadIdx.x] = 0;
    __syncthreads();

    const int lane = pit_lane(), warp = (int)threadIdx.x / PIT_WARP;
    bool ballots = false;
    for (int i = 0; i < a.n; ++i) ballots = ballots || a.t[i].tm == 1;
    const pit_i64 strips_r = (a.rows + STRIP_H - 1) / STRIP_H, strips_c = (a.cols + STRIP_W - 1) / STRIP_W;
    const pit_i64 units = strips_r * strips_c * a.batch;
    int reserved[SLOTS];
#pragma unroll
    for (int j = 0; j < SLOTS; ++j) reserved[j] = 0;
    int buf = 0;
    for (pit_i64 u = blockIdx.x; u < units; u += gridDim.x, buf ^= 1) {
        const strip s = strip_of(a, u, strips_r, strips_c);
        group_bits[buf][warp][lane] = read_group(a, s, lane, warp, ballots, row_bits[buf]);
        __syncthreads();
        strip_bits d;
#pragma unroll
        for (int g = 0; g < STRIP_GROUPS; ++g) d.group[g] = group_bits[buf][g][lane];
        d.row[0] = ballots ? row_bits[buf][lane] : 0u;
        d.row[1] = ballots ? row_bits[buf][PIT_WARP + lane] : 0u;
        /* The warp's candidates' micro-tiles, then all their reservations
         * issued before any result is used (one round trip a strip), then
         * the entries. */
        lane_tiles lt[SLOTS];
        int base[SLOTS][2];
#pragma unroll
        for (int j = 0; j < SLOTS; ++j) {
            const int i = warp + j * STRIP_WARPS;
            if (i < a.n) lt[j] = tiles_of(shape_of(a.t[i], s), d, lane);
        }
#pragma unroll
        for (int j = 0; j < SLOTS; ++j)
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const int i = warp + j * STRIP_WARPS;
                const int mine = i < a.n ? lt[j].mine[k] : 0;
                base[j][k] = mine != 0 ? pit_atomic_add(a.t[i].counts + lt[j].group[k], mine) : 0;
                reserved[j] += mine;
            }
#pragma unroll
        for (int j = 0; j < SLOTS; ++j) {
            const int i = warp + j * STRIP_WARPS;
            if (i < a.n) write_entries(a.t[i], shape_of(a.t[i], s), lt[j], lane, base[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < SLOTS; ++j)
        if (reserved[j] != 0) atomicAdd(&cta_total[warp + j * STRIP_WARPS], reserved[j]);
    __syncthreads();
    const int i = (int)threadIdx.x;
    if (i < a.n && cta_total[i] != 0) pit_atomic_add(a.t[i].total, cta_total[i]);
}
