/*
 * tests/test_bench_floors.c - the L2 traffic model of pit bench
 * (tools/bench_floors.c) against byte counts worked out by hand, so the
 * figures its L2 floor column prints follow the model its comment states.
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"

static int failed, passed;

static void expect_bytes(const char *what, double got, double want)
{
    if (fabs(got - want) <= 1e-9 * fabs(want)) {
        passed++;
        return;
    }
    failed++;
    printf("FAIL %s: %.0f bytes, want %.0f\n", what, got, want);
}

static pit_report sparse(int tr, int tc, pit_axis axis, int bm, int bn, int64_t nz, int64_t total)
{
    pit_report r = {0};
    r.microtile = (pit_microtile){tr, tc, axis};
    r.bm = bm;
    r.bn = bn;
    r.bk = 32;
    r.nonzero_tiles = nz;
    r.total_tiles = total;
    return r;
}

int main(void)
{
    const double n = 4096, mn = n * n;
    /* Dense 4096^3 bf16, 128x256 tiles: M N K (1/bn + 1/bm) + C. */
    pit_report r = sparse(32, 64, PIT_AXIS_K, 128, 256, 100, 8192);
    r.used_dense = 1;
    expect_bytes("dense 4096^3 bf16", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_BF16),
                 2 * (n * n * n * (1.0 / 256 + 1.0 / 128) + mn));
    /* Dense with one row: B read once, not 1/128 of a time; no tile: 128. */
    r.bm = r.bn = 0;
    expect_bytes("dense 1 x 4096 x 14336 f16, tile 128 assumed", bench_l2_bytes(&r, 1, 14336, 4096, PIT_F16),
                 2 * (4096.0 * 112 + 4096.0 * 14336 + 14336));
    /* Along K, 32x64 micro-tiles, tile 32x128: each non-zero micro-tile's A
     * block once per column of tiles (32), its 64 rows of B in full. */
    r = sparse(32, 64, PIT_AXIS_K, 32, 128, 819, 8192);
    expect_bytes("k32x64 4096^3 f16", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_F16),
                 2 * (819.0 * 32 * 64 * 32 + 819.0 * 64 * 4096 + mn));
    /* One token along K (32x1 micro-tiles over one row): a row of A per
     * micro-tile, and (1 - s) of W: the memory floor's bytes. */
    r = sparse(32, 1, PIT_AXIS_K, 32, 64, 2048, 4096);
    expect_bytes("k32x1 decode M=1 bf16", bench_l2_bytes(&r, 1, 14336, 4096, PIT_BF16),
                 2 * (2048.0 * 1 * 224 + 2048.0 * 14336 + 14336));
    /* A CTA over 4 micro-tile rows reads the union of their k lists:
     * density 1/2 gives 1 - 1/16 of the k micro-tiles per 128-row CTA. */
    r = sparse(32, 64, PIT_AXIS_K, 128, 128, 4096, 8192);
    double units = 32.0 * 64 * (1 - 1.0 / 16);
    expect_bytes("k32x64 under a 128-row CTA f32", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_F32),
                 4 * (units * 128 * 64 * 32 + units * 64 * 4096 + mn));
    /* Along M, 1x64 micro-tiles, tile 64x128: 64 groups of 640 rows, 10 CTA
     * rows each; the f32 additions, the zeroing and the conversion (16-bit). */
    r = sparse(1, 64, PIT_AXIS_M, 64, 128, 40960, 262144);
    double rows = 40960, a_b = 2 * (rows * 64 * 32 + 640.0 * 64 * 4096);
    expect_bytes("m1x64 4096^3 bf16", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_BF16),
                 a_b + 4 * rows * 4096 + 4 * mn + 4 * mn + 2 * mn);
    /* Nothing non-zero: C zeroed. */
    r = sparse(32, 64, PIT_AXIS_K, 32, 128, 0, 8192);
    r.skipped_compute = 1;
    expect_bytes("skipped", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_F32), 4 * mn);
    /* What the report cannot tell: a fixed plan (counts never read), axis N. */
    r = sparse(32, 64, PIT_AXIS_K, 32, 128, -1, 8192);
    expect_bytes("fixed plan: unknown", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_F32), -1);
    r = sparse(32, 64, PIT_AXIS_N, 32, 128, 10, 8192);
    expect_bytes("axis N: unknown", bench_l2_bytes(&r, 4096, 4096, 4096, PIT_F32), -1);
    /* The floor: bytes at the run's bandwidth, none without one. */
    bench_opts o = {.l2_gbps = 5000};
    expect_bytes("floor ms x 1e9", 1e9 * bench_l2_floor_ms(&o, 5e9), 1e9);
    o.l2_gbps = 0;
    expect_bytes("no bandwidth", bench_l2_floor_ms(&o, 5e9), -1);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
