/*
 * pit_detect_cols.cu - detection of column micro-tiles (Tm x 1 along K) on
 * an operand of a few rows: the activations of a decode step. One thread a
 * column reads its at most PIT_DETECT_COLS_MAX_ROWS elements down the rows
 * (a warp's loads are one coalesced row segment each) into a bit mask of
 * the rows holding a non-zero; a micro-tile (row-block r of index i) is
 * non-zero when the mask has a bit in its rows. Per (index, row-block) a
 * warp reserves its columns' entries with one atomicAdd (a ballot's
 * count) and writes them from the returned base; totals likewise. Entries
 * go in any order (the index contract, core/backend.h). The strip kernel
 * would run one warp a 64-row strip over a mostly empty strip, its
 * candidate work serial: 10 us for one 4096-wide row on an H100.
 *
 * No races by design: X is only read; an entry's position is written by
 * the one lane whose warp's atomicAdd reserved it, below capacity; counts
 * and totals change only through atomics (zeroed before the launch).
 *
 * Defines: PIT_DTYPE (f32, f16, bf16, i32 masks, 4 = u8 masks). The host
 * launches it when every index is Tm x 1 along K, without "full" marks,
 * and X has at most PIT_DETECT_COLS_MAX_ROWS rows (ops/detect.c).
 * grid: x = columns / 256, z = batch.
 */
#include "common/port.cuh"
#include "args.h"

#define ELEM_BYTES PIT_DT_BYTES(PIT_DTYPE)
#if PIT_DTYPE == PIT_DT_F16 || PIT_DTYPE == PIT_DT_BF16
#define NZ_MASK 0x7fffu
typedef unsigned short elem_bits;
#elif PIT_DTYPE == PIT_DT_F32
#define NZ_MASK 0x7fffffffu
typedef pit_u32 elem_bits;
#elif PIT_DTYPE == PIT_DT_I32
#define NZ_MASK 0xffffffffu
typedef pit_u32 elem_bits;
#else
#define NZ_MASK 0xffu
typedef pit_u8 elem_bits;
#endif

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

/* Rows of column c (batch b) holding a non-zero, bit m for row m. */
PIT_DEV unsigned long long column_rows(const pit_detect_args &a, int b, int c)
{
    unsigned long long rows = 0ull;
    if (c >= a.cols) return rows;
    const elem_bits *x = (const elem_bits *)(a.x + ((pit_i64)b * a.batch_stride + c) * ELEM_BYTES);
    for (int m = 0; m < a.rows; ++m)
        if ((__ldg(x + (pit_i64)m * a.ld) & NZ_MASK) != 0u) rows |= 1ull << m;
    return rows;
}

PIT_KERNEL void __launch_bounds__(PIT_DETECT_COLS_THREADS) pit_detect_cols(const pit_detect_args a)
{
    const int lane = pit_lane(), b = blockIdx.z;
    const int c = blockIdx.x * PIT_DETECT_COLS_THREADS + threadIdx.x;
    const unsigned long long rows = column_rows(a, b, c);
    const pit_u32 below = (1u << lane) - 1u;
    for (int i = 0; i < a.n; ++i) {
        const pit_detect_target &t = a.t[i];
        const int height = t.tm; /* the micro-tile's rows */
        int added = 0;
        for (int r = 0; r * height < a.rows; ++r) {
            const unsigned long long mine = height >= 64 ? ~0ull : ((1ull << height) - 1ull) << (r * height);
            const bool on = (rows & mine) != 0ull;
            const pit_u32 ballot = pit_ballot(on);
            if (ballot == 0u) continue;
            const pit_i64 g = (pit_i64)b * t.groups_per_batch + r;
            int base = 0;
            if (lane == 0) base = pit_atomic_add(t.counts + g, pit_popc(ballot));
            base = pit_shfl(base, 0);
            const int pos = base + pit_popc(ballot & below);
            if (on && pos < t.capacity) t.entries[g * t.capacity + pos] = c;
            added += pit_popc(ballot);
        }
        if (lane == 0 && added != 0) pit_atomic_add(t.total, added);
    }
}
