/*
 * emu_device.h - the device layer pit_detect_strip.cu and
 * pit_attention_cols.cu are written against (kernels/common/port.cuh), on
 * the host, for the emulated tests (emu_warps.cpp runs the kernels). Included instead of port.cuh: it
 * defines PIT_PORT_CUH, so the kernel's own include of port.cuh is empty.
 * The element tests are port.cuh's, restated; a warp step (ballot,
 * shuffle) and __syncthreads hand control to emu_warps.cpp's scheduler.
 * Test code only.
 */
#ifndef PIT_EMU_DEVICE_H
#define PIT_EMU_DEVICE_H

#define PIT_PORT_CUH 1
typedef unsigned char pit_u8; /* the types the kernel and args.h use */
typedef unsigned short pit_u16;
typedef unsigned int pit_u32;
typedef long long pit_i64;
typedef unsigned long long pit_u64;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static /* one CTA runs at a time */
#define PIT_WARP 32
#define PIT_DEV static inline
#define PIT_KERNEL extern "C"
#define PIT_DT_F32 0
#define PIT_DT_F16 1
#define PIT_DT_BF16 2
#define PIT_DT_I32 3
#define PIT_DT_U8 4
#define PIT_DT_BYTES(dt) ((dt) == PIT_DT_F32 || (dt) == PIT_DT_I32 ? 4 : (dt) == PIT_DT_U8 ? 1 : 2)

struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }

struct emu_dim3 {
    unsigned x, y, z;
};
emu_dim3 emu_thread_idx(void);
emu_dim3 emu_block_idx(void);
emu_dim3 emu_grid_dim(void);
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx())
#define gridDim (emu_grid_dim())

void __syncthreads(void);
pit_u32 pit_ballot(bool p);
int pit_shfl(int v, int src);
static inline int pit_popc(pit_u32 x) { return __builtin_popcount(x); }
static inline int pit_lane(void) { return (int)(threadIdx.x & (PIT_WARP - 1)); }
/* one host thread runs every device thread: plain read-modify-writes are atomic */
static inline int pit_atomic_add(int *p, int v)
{
    int old = *p;
    *p += v;
    return old;
}
static inline int atomicAdd(int *p, int v) { return pit_atomic_add(p, v); }
static inline pit_u32 pit_atomic_or(pit_u32 *p, pit_u32 v)
{
    pit_u32 old = *p;
    *p |= v;
    return old;
}
static inline pit_u32 pit_bytes_nonzero(pit_u32 w) { return (((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u; }
static inline bool pit_bits_nonzero32(pit_u32 w) { return (w & 0x7fffffffu) != 0; }
static inline bool pit_bits_nonzero16(pit_u32 h) { return (h & 0x7fffu) != 0; }

/* args.h in its device form (typed pointers) */
#define __CUDACC__ 1

#endif /* PIT_EMU_DEVICE_H */
