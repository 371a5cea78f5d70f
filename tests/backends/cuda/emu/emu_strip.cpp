/*
 * emu_strip.cpp - kernels/pit_detect_strip.cu compiled for the host, once
 * a dtype (-DPIT_DTYPE, -DVEC, -DEMU_ENTRY=its name): the kernel the
 * emulated detection test runs (emu_warps.cpp). Test code only.
 */
#include "emu_device.h"

#define EMU_CAT2(a, b) a##b
#define EMU_CAT(a, b) EMU_CAT2(a, b)
#define pit_detect_strip EMU_ENTRY
#define pit_smem_bytes EMU_CAT(EMU_ENTRY, _smem)
namespace {
#include "kernels/pit_detect_strip.cu"
}
