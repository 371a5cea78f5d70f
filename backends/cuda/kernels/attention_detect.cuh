/*
 * attention_detect.cuh - pit_attention.cu's detection inside the fused
 * kernel (ATT_DETECT): the work items of a launch that detects the mask's
 * blocks and attends over them. Included by pit_attention.cu, whose
 * constants and helpers it uses.
 */
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
PIT_DEV bool work_item(const pit_attention_args &a, int t, int &g, int &part)
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
PIT_DEV void detect_part(const pit_attention_args &a, int g, int part)
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
     * the call 0.03 ms slower on the H100 */
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
PIT_DEV void wait_detected(const pit_attention_args &a, int g)
{
    if (threadIdx.x == 0)
        while (pit_ld_acquire(a.det + 1 + g) < a.parts) pit_sleep();
    __syncthreads();
}
