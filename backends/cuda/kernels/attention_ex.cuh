/*
 * attention_ex.cuh - what the backward kernels of pit_attention share
 * (pit_attention_ex.cu on CUDA cores, pit_attention_bwd.cu on tensor
 * cores): an operand's rows of one (batch, head), and whether an index
 * group lists a key block. Needs common/port.cuh, args.h, common/index.cuh
 * and common/elem.cuh (T) first.
 */
#ifndef PIT_ATTENTION_EX_CUH
#define PIT_ATTENTION_EX_CUH

/* The operand's rows of (batch b, head h), typed. */
PIT_DEV const T *rows_of(const pit_attn_view &v, int b, int h)
{
    return (const T *)v.ptr + (pit_i64)b * v.sb + (pit_i64)h * v.sh;
}

/* Whether group g of the index lists key block kb (the same answer in
 * every warp: each scans the group itself). */
PIT_DEV bool block_listed(const pit_attn_ex_args &p, pit_i64 g, pit_i64 kb)
{
    const int n = min(__ldg(p.counts + g), p.cap);
    const int *ent = p.entries + g * p.cap;
    for (int e0 = 0; e0 < n; e0 += PIT_WARP) {
        const int e = e0 + pit_lane();
        if (pit_ballot(e < n && pit_entry_index(__ldg(ent + e)) == kb)) return true;
    }
    return false;
}

#endif
