/*
 * common/index.cuh - how kernels read a block index and a pattern mask:
 * entry marks, the group of a batch in a shared or per-batch index, and
 * mask elements of any mask dtype (MASK_DT). Needs common/port.cuh first.
 */
#ifndef PIT_INDEX_CUH
#define PIT_INDEX_CUH
#ifndef PIT_PORT_CUH
#error "include common/port.cuh before common/index.cuh"
#endif

/* An index entry marked "full" (core/backend.h: detection found every
 * element of its micro-tile non-zero). Kernels that only need the position
 * read it through pit_entry_index, so a marked index serves them all. */
#define PIT_ENTRY_FULL 0x40000000
#define pit_entry_index(e) ((e) & ~PIT_ENTRY_FULL)

#ifdef PIT_ARGS_H
/* The group of batch `batch`'s row-block g. batched 0: one set of groups
 * shared by every batch (a rank-2 mask indexed once). */
PIT_DEV int ix_group(const pit_ix &ix, int batch, int g)
{
    return (ix.batched ? batch * ix.gpb : 0) + g;
}
#endif

#ifdef MASK_DT
/* mask element bytes: f16/bf16 2, u8 (bool) 1, f32/i32 4 (a macro: #if reads it) */
#define MASK_BYTES (MASK_DT == PIT_DT_F16 || MASK_DT == PIT_DT_BF16 ? 2 : MASK_DT == PIT_DT_U8 ? 1 : 4)

/* Mask element "on": non-zero bits (NaN on, -0.0 off), i32 and u8 non-zero. */
PIT_DEV bool mask_on(const pit_u8 *m, pit_i64 i)
{
#if MASK_DT == 0
    return pit_bits_nonzero32(__ldg((const pit_u32 *)m + i));
#elif MASK_DT == PIT_DT_I32
    return __ldg((const int *)m + i) != 0;
#elif MASK_DT == PIT_DT_U8
    return __ldg(m + i) != 0;
#else
    return pit_bits_nonzero16(__ldg((const pit_u16 *)m + i));
#endif
}

/* One 32-bit word of mask: bit 0 some element on, bit 1 some element off */
PIT_DEV pit_u32 mask_word_flags(pit_u32 w)
{
#if MASK_BYTES == 2
    const bool lo = pit_bits_nonzero16(w & 0xffffu), hi = pit_bits_nonzero16(w >> 16);
    return (pit_u32)(lo || hi) | (pit_u32)(!lo || !hi) << 1;
#elif MASK_BYTES == 1
    const pit_u32 on = pit_bytes_nonzero(w);
    return (pit_u32)(on != 0u) | (pit_u32)(on != 0x80808080u) << 1;
#else
#if MASK_DT == PIT_DT_I32
    const bool nz = w != 0u; /* no -0 in an i32: INT_MIN is on */
#else
    const bool nz = pit_bits_nonzero32(w);
#endif
    return (pit_u32)nz | (pit_u32)!nz << 1;
#endif
}
#endif

#endif /* PIT_INDEX_CUH */
