/*
 * tools/bench_floors.c - the bounds a bench point is read against: the
 * memory and L2 bandwidths of the run, and the bytes a plan moves through L2
 * (its L2 floor is those bytes at the L2 bandwidth).
 */
#include <math.h>
#include <string.h>

#include "bench.h"

/* pit_device_info gives no cache size: a fixed size known to fit twice
 * (source and destination) in the L2 of the GPUs pit tunes for (40 MB and
 * more on A100 and H100), and a size that fits a CPU core's L2. */
#define L2_COPY_BYTES_GPU ((size_t)8 << 20)
#define L2_COPY_BYTES_CPU ((size_t)256 << 10)

pit_status bench_measure_memory(pit_context *ctx, const bench_opts *o, size_t bytes, double *gbps)
{
    *gbps = 0;
    return pit_measure_copy_bandwidth(ctx, bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes, o->quick ? 5 : 20,
                                      gbps);
}

pit_status bench_measure_l2(pit_context *ctx, const bench_opts *o, double *gbps, size_t *bytes)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    *bytes = strstr(d.arch, "cpu") ? L2_COPY_BYTES_CPU : L2_COPY_BYTES_GPU;
    *gbps = 0;
    return pit_measure_queued_copy_bandwidth(ctx, *bytes, o->quick ? 5 : 20, gbps);
}

static double cdiv(int64_t a, int64_t b)
{
    return (double)((a + b - 1) / b);
}

/*
 * The bytes the plan in r moves through L2 for C[m,n] = A[m,k] . B[k,n]
 * with A sparse: what the cores request (hits and misses alike), counted
 * element by element. -1 when r does not say enough (a fixed plan, axis N).
 *
 * - Dense GEMM (used_dense): bm x bn tiles of C, each reading its rows of A
 *   and its columns of B in full: A once per column of tiles, B once per
 *   row of tiles, C written once,
 *       m k ceil(n/bn) + k n ceil(m/bm) + m n  elements,
 *   i.e. M N K (1/bn + 1/bm) when the tiles divide the shape. bm, bn are the
 *   report's: the tile-database row the dense cost was modelled with (a
 *   vendor library picks its own); 128 where the report has none.
 * - Along K (micro-tile tr x tc): a CTA per bm rows x bn columns of C walks
 *   the k micro-tiles of its rows and reads, for each, its tr x tc block of
 *   A and the tc rows of B under it (bn wide); C is written once. With
 *   bm = tr (every kernel pit ships) the grid reads nz micro-tiles of A per
 *   column of tiles and nz x tc rows of B in full, nz = r->nonzero_tiles.
 *   A CTA over g = bm / tr micro-tile rows reads the union of their k
 *   lists, estimated for micro-tiles non-zero independently at density
 *   d = nz / total: ceil(m/bm) ceil(k/tc) (1 - (1 - d)^g) units in place
 *   of nz.
 * - Along M (micro-tile tr x tc; a group is tc columns of K): a CTA takes
 *   bm gathered rows of one group and bn columns of C, reads their tr x tc
 *   blocks of A and the group's tc rows of B (bn wide), and adds bm x bn
 *   f32 partial sums into C. A: nz tr tc per column of tiles; B: tc x n per
 *   CTA row, groups x ceil(nz tr / groups / bm) of them (rows spread evenly
 *   over the groups); the f32 additions nz tr x n; zeroing the f32
 *   accumulator (m n f32) and, for 16-bit, converting it into C.
 * - No non-zero micro-tile (skipped_compute): C zeroed.
 * Not counted: detection and the index, the one-column compaction pass,
 * partial sums of a kernel that splits K across CTAs, the 32-byte sectors a
 * gather of narrow micro-tiles touches beyond its elements, L1 hits. The
 * floor is the kernel's, not the call's.
 */
double bench_l2_bytes(const pit_report *r, int64_t m, int64_t n, int64_t k, pit_dtype dt)
{
    const double el = (double)pit_dtype_size(dt), acc = 4.0, mn = (double)m * (double)n;
    const int64_t bm = r->bm > 0 ? r->bm : 128, bn = r->bn > 0 ? r->bn : 128;
    const int64_t tr = r->microtile.rows, tc = r->microtile.cols;
    if (r->skipped_compute)
        return mn * el;
    if (r->used_dense)
        return el * ((double)m * (double)k * cdiv(n, bn) + (double)k * (double)n * cdiv(m, bm) + mn);
    if (r->nonzero_tiles < 0 || r->total_tiles <= 0 || tr <= 0 || tc <= 0)
        return -1;
    const double nz = (double)r->nonzero_tiles;
    if (r->microtile.axis == PIT_AXIS_K) {
        const double d = nz / (double)r->total_tiles, g = bm > tr ? (double)(bm / tr) : 1.0;
        const double row_blocks = cdiv(m, bm), units = row_blocks * cdiv(k, tc) * (1.0 - pow(1.0 - d, g));
        const double rows = (double)m / row_blocks; /* rows of A a CTA holds, on average */
        return el * (units * rows * (double)tc * cdiv(n, bn) + units * (double)tc * (double)n + mn);
    }
    if (r->microtile.axis == PIT_AXIS_M) {
        const double groups = cdiv(k, tc), rows = nz * (double)tr;
        const double cta_rows = groups * ceil(rows / groups / (double)bm);
        double bytes = el * (rows * (double)tc * cdiv(n, bn) + cta_rows * (double)tc * (double)n);
        bytes += acc * rows * (double)n + acc * mn; /* the f32 additions, the zeroing */
        if (dt != PIT_F32)
            bytes += acc * mn + el * mn; /* the accumulator converted into C */
        return bytes;
    }
    return -1;
}

double bench_l2_floor_ms(const bench_opts *o, double l2_bytes)
{
    if (o->l2_gbps <= 0 || l2_bytes < 0)
        return -1;
    return l2_bytes / (o->l2_gbps * 1e9) * 1e3;
}

const char *bench_l2_phrase(const bench_opts *o, char *buf, size_t size)
{
    if (o->l2_gbps > 0)
        snprintf(buf, size, "L2 floor at %.1f GB/s (copies of %zu KB in L2)", o->l2_gbps, o->l2_bytes >> 10);
    else
        snprintf(buf, size, "no L2 floor (L2 bandwidth not measured)");
    return buf;
}
