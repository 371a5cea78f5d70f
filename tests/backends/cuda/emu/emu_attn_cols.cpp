/*
 * emu_attn_cols.cpp - kernels/pit_attention_cols.cu compiled for the host,
 * one kernel a compilation (-DPIT_KERNEL_OP_ATTN_COLS_SCAN with -DMASK_DT,
 * or -DPIT_KERNEL_OP_ATTN_COLS_TILES; -DEMU_ENTRY the name it gets): what
 * the emulated key-column test runs (emu_warps.cpp). Test code only.
 */
#include "emu_device.h"

#define EMU_CAT2(a, b) a##b
#define EMU_CAT(a, b) EMU_CAT2(a, b)
#define pit_smem_bytes EMU_CAT(EMU_ENTRY, _smem)
#define pit_op_attn_cols_scan EMU_CAT(EMU_ENTRY, _scan)
#define pit_op_attn_cols_tiles EMU_CAT(EMU_ENTRY, _tiles)
namespace {
#include "kernels/pit_attention_cols.cu"
}

extern "C" void EMU_ENTRY(const void *args)
{
#if defined(PIT_KERNEL_OP_ATTN_COLS_SCAN)
    pit_op_attn_cols_scan(*(const pit_attn_cols_args *)args);
#else
    pit_op_attn_cols_tiles(*(const pit_attn_cols_args *)args);
#endif
}
