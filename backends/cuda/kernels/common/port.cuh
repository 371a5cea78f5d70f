/*
 * common/port.cuh - the vendor portability layer every pit device kernel is
 * written against, so the same sources compile with NVRTC (CUDA), hiprtc
 * and plain clang (HIP). It holds: fixed-width integers (NVRTC has no libc
 * headers), warp size and shuffles, atomics, the 16-bit float types as raw
 * bits with their conversions, and asynchronous global->shared copies.
 * The tensor-core step is common/mma.cuh, Hopper's features common/sm90.cuh,
 * index and mask access common/index.cuh.
 *
 * No CUDA header is included on purpose: NVRTC ships none by default and
 * the HIP port maps these few functions instead of a whole header. The
 * common headers include no other header (NVRTC matches include names
 * exactly, a disk compile resolves them by folder): a kernel file includes
 * the ones it needs, this one first.
 */
#ifndef PIT_PORT_CUH
#define PIT_PORT_CUH

typedef unsigned char pit_u8;
typedef unsigned short pit_u16;
typedef unsigned int pit_u32;
typedef int pit_i32;
typedef unsigned long long pit_u64;
typedef long long pit_i64;

/* ---- AMD (HIP). The kernels' warp is a 32-lane logical warp on every
 * vendor (the u32 ballots and the m16n8k16 fragments assume it); on a
 * wave64 GPU (gfx9) each hardware wavefront runs two logical warps, and
 * every warp step below stays inside its own 32-lane half. PIT_WAVE is the
 * hardware width the code object is compiled for; the host checks it
 * against the device's warpSize before loading. */
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define PIT_AMD 1
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define PIT_WAVE __AMDGCN_WAVEFRONT_SIZE
#elif defined(__GFX9__)
#define PIT_WAVE 64
#else
#define PIT_WAVE 32
#endif
#if !defined(PIT_HIP_BARE) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h> /* hipcc: the HIP headers give the CUDA names */
#endif
#if defined(PIT_HIP_BARE)
/* Build-time code objects are compiled by plain clang without any HIP
 * header (-nogpuinc -nogpulib: no ROCm device library is needed, so one
 * compiler builds every target). The few CUDA names the kernels use come
 * from clang builtins here; hipcc and hiprtc provide them themselves. */
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(n, ...) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define __align__(n) __attribute__((aligned(n)))
#define PIT_BARE static __device__ __forceinline__

struct pit_dim3 { unsigned x, y, z; };
PIT_BARE pit_dim3 pit_thread_idx(void)
{
    return pit_dim3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),
                    __builtin_amdgcn_workitem_id_z()};
}
PIT_BARE pit_dim3 pit_block_idx(void)
{
    return pit_dim3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),
                    __builtin_amdgcn_workgroup_id_z()};
}
/* Grid size in work-groups from the HSA dispatch packet (work-group sizes
 * are 16-bit at bytes 4..9, grid sizes in work-items 32-bit at 12..23). */
typedef const __attribute__((address_space(4))) unsigned char *pit_dispatch_ptr;
PIT_BARE pit_dim3 pit_grid_dim(void)
{
    pit_dispatch_ptr p = (pit_dispatch_ptr)__builtin_amdgcn_dispatch_ptr();
    const __attribute__((address_space(4))) unsigned short *wg =
        (const __attribute__((address_space(4))) unsigned short *)(p + 4);
    const __attribute__((address_space(4))) unsigned *gs =
        (const __attribute__((address_space(4))) unsigned *)(p + 12);
    return pit_dim3{(gs[0] + wg[0] - 1) / wg[0], (gs[1] + wg[1] - 1) / wg[1], (gs[2] + wg[2] - 1) / wg[2]};
}
PIT_BARE pit_dim3 pit_block_dim(void)
{
    pit_dispatch_ptr p = (pit_dispatch_ptr)__builtin_amdgcn_dispatch_ptr();
    const __attribute__((address_space(4))) unsigned short *wg =
        (const __attribute__((address_space(4))) unsigned short *)(p + 4);
    return pit_dim3{wg[0], wg[1], wg[2]};
}
#define threadIdx (pit_thread_idx())
#define blockIdx (pit_block_idx())
#define blockDim (pit_block_dim())
#define gridDim (pit_grid_dim())

PIT_BARE void __syncthreads(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
PIT_BARE void __trap(void) { __builtin_trap(); }
PIT_BARE float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
PIT_BARE int min(int a, int b) { return a < b ? a : b; }
PIT_BARE int max(int a, int b) { return a > b ? a : b; }
PIT_BARE unsigned __float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
PIT_BARE float __uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
PIT_BARE uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
PIT_BARE uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
struct __attribute__((aligned(8))) float2 { float x, y; };
PIT_BARE float2 make_float2(float x, float y) { return float2{x, y}; }
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
PIT_BARE float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
/* f32 math as single instructions (llvm.maxnum, llvm.exp2: v_max, v_exp) */
PIT_BARE float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
PIT_BARE float fminf(float a, float b) { return __builtin_fminf(a, b); }
PIT_BARE float fabsf(float x) { return __builtin_fabsf(x); }
PIT_BARE float exp2f(float x) { return __builtin_exp2f(x); }
/* read-only loads: plain loads (AMD has no separate texture path to ask for) */
template <typename T> PIT_BARE T __ldg(const T *p) { return *p; }
/* device-wide relaxed atomics, as CUDA's atomicAdd/atomicOr */
PIT_BARE int atomicAdd(int *p, int v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
PIT_BARE float atomicAdd(float *p, float v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
PIT_BARE unsigned atomicOr(unsigned *p, unsigned v)
{
    return __hip_atomic_fetch_or(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#endif /* PIT_HIP_BARE */
#endif /* AMD */

#define PIT_WARP 32
#define PIT_DEV __device__ __forceinline__
#define PIT_KERNEL extern "C" __global__

/* dtype codes (pit_dtype's), as -DPIT_DTYPE=... and -DMASK_DT=... */
#define PIT_DT_F32 0
#define PIT_DT_F16 1
#define PIT_DT_BF16 2
#define PIT_DT_I32 3
#define PIT_DT_U8 4 /* pattern masks only: bytes, non-zero = on */
/* bytes of an element of dtype code dt (usable in #if) */
#define PIT_DT_BYTES(dt) ((dt) == PIT_DT_F32 || (dt) == PIT_DT_I32 ? 4 : (dt) == PIT_DT_U8 ? 1 : 2)

/* ---- 16-bit float types: raw bits, converted with explicit instructions */
struct pit_half { pit_u16 bits; };
struct pit_bf16 { pit_u16 bits; };

PIT_DEV float pit_to_float(float x) { return x; }
PIT_DEV float pit_to_float(pit_half x)
{
    float f;
#if defined(PIT_AMD)
    f = (float)__builtin_bit_cast(_Float16, x.bits);
#else
    asm("{ .reg .b16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x.bits));
#endif
    return f;
}
PIT_DEV float pit_to_float(pit_bf16 x) { return __uint_as_float(((pit_u32)x.bits) << 16); }

template <typename T> PIT_DEV T pit_from_float(float f);
template <> PIT_DEV float pit_from_float<float>(float f) { return f; }
template <> PIT_DEV pit_half pit_from_float<pit_half>(float f)
{
    pit_half h;
#if defined(PIT_AMD)
    h.bits = __builtin_bit_cast(pit_u16, (_Float16)f);
#else
    asm("{ .reg .b16 r; cvt.rn.f16.f32 r, %1; mov.b16 %0, r; }" : "=h"(h.bits) : "f"(f));
#endif
    return h;
}
template <> PIT_DEV pit_bf16 pit_from_float<pit_bf16>(float f)
{
    pit_bf16 b;
#if __CUDA_ARCH__ >= 800
    asm("{ .reg .b16 r; cvt.rn.bf16.f32 r, %1; mov.b16 %0, r; }" : "=h"(b.bits) : "f"(f));
#else
    /* round to nearest even by hand; NaN kept quiet */
    pit_u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        b.bits = (pit_u16)((u >> 16) | 0x40u);
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);
        b.bits = (pit_u16)(u >> 16);
    }
#endif
    return b;
}

/* "Non-zero" is decided on the bits, so -0.0 counts as zero and NaN as
 * non-zero: mask away the sign bit. */
PIT_DEV bool pit_bits_nonzero32(pit_u32 w) { return (w & 0x7fffffffu) != 0; }
PIT_DEV bool pit_bits_nonzero16(pit_u32 h) { return (h & 0x7fffu) != 0; }
/* The high bit of each byte of w that is not 0 (u8 masks, 4 elements a word). */
PIT_DEV pit_u32 pit_bytes_nonzero(pit_u32 w) { return (((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u; }

/* ---- warp primitives */
#if defined(PIT_AMD)
/* the hardware lane, and the first hardware lane of this logical warp */
PIT_DEV int pit_hw_lane(void)
{
    return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
PIT_DEV int pit_warp_base(void) { return pit_hw_lane() & ~(PIT_WARP - 1); }
/* the value v of hardware lane src (ds_bpermute, any lane of the wavefront) */
PIT_DEV pit_u32 pit_bperm(int src, pit_u32 v)
{
    return (pit_u32)__builtin_amdgcn_ds_bpermute(src << 2, (int)v);
}
PIT_DEV pit_u32 pit_ballot(bool p)
{
    /* llvm.amdgcn.icmp "!= 0" is the ballot (33 = ICMP_NE); older clang has no ballot builtin */
#if PIT_WAVE == 64
    return (pit_u32)(__builtin_amdgcn_uicmpl((unsigned long)p, 0ul, 33) >> pit_warp_base());
#else
    return __builtin_amdgcn_uicmp((unsigned)p, 0u, 33);
#endif
}
PIT_DEV int pit_popc(pit_u32 x) { return __builtin_popcount(x); }
PIT_DEV int pit_shfl(int v, int src) { return (int)pit_bperm(pit_warp_base() + (src & (PIT_WARP - 1)), (pit_u32)v); }
#else
PIT_DEV pit_u32 pit_ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
PIT_DEV int pit_popc(pit_u32 x) { return __popc(x); }
PIT_DEV int pit_shfl(int v, int src) { return __shfl_sync(0xffffffffu, v, src); }
#endif
PIT_DEV int pit_lane(void) { return threadIdx.x & (PIT_WARP - 1); }

/* ---- atomics */
#if defined(PIT_AMD)
PIT_DEV int pit_atomic_add(int *p, int v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
PIT_DEV float pit_atomic_addf(float *p, float v)
{
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
PIT_DEV pit_u32 pit_atomic_or(pit_u32 *p, pit_u32 v)
{
    return __hip_atomic_fetch_or(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#else
PIT_DEV int pit_atomic_add(int *p, int v) { return atomicAdd(p, v); }
PIT_DEV float pit_atomic_addf(float *p, float v) { return atomicAdd(p, v); }
PIT_DEV pit_u32 pit_atomic_or(pit_u32 *p, pit_u32 v) { return atomicOr(p, v); }
#endif
/* Device-wide order of this thread's memory operations before / after it
 * (with relaxed atomics on either side: the "last to arrive" pattern). */
#if defined(PIT_AMD)
PIT_DEV void pit_fence_device(void) { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
#else
PIT_DEV void pit_fence_device(void) { __threadfence(); }
#endif

/* A load through L2 only (data written during this launch by other CTAs:
 * not the read-only path), an acquiring load (gpu scope), and a short sleep
 * for a spinning thread. */
#if defined(PIT_AMD)
PIT_DEV int pit_ldcg(const int *p) { return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }
PIT_DEV int pit_ld_acquire(const int *p) { return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT); }
PIT_DEV void pit_sleep(void) { __builtin_amdgcn_s_sleep(2); }
#else
PIT_DEV int pit_ldcg(const int *p) { return __ldcg(p); }
PIT_DEV int pit_ld_acquire(const int *p)
{
    int v;
#if __CUDA_ARCH__ >= 700
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
    v = *(const volatile int *)p;
    __threadfence();
#endif
    return v;
}
PIT_DEV void pit_sleep(void)
{
#if __CUDA_ARCH__ >= 700
    __nanosleep(128);
#endif
}
#endif

PIT_DEV float pit_ldcg_f32(const float *p) { return __uint_as_float((unsigned)pit_ldcg((const int *)p)); }

/* log2 of a float (the bare HIP build declares no libm) */
#if defined(PIT_HIP_BARE)
PIT_DEV float pit_log2f(float x) { return __builtin_log2f(x); }
#else
PIT_DEV float pit_log2f(float x) { return log2f(x); }
#endif

/* ---- global -> shared copies. cp.async on sm_80+, a plain copy before. */
#if defined(PIT_AMD)
/* LDS address (32 bits): what ds_bpermute moves between lanes */
typedef const __attribute__((address_space(3))) pit_u16 *pit_lds_u16;
PIT_DEV pit_u32 pit_smem_addr(const void *p)
{
    return (pit_u32)(unsigned long)(const __attribute__((address_space(3))) void *)p;
}
#else
PIT_DEV pit_u32 pit_smem_addr(const void *p) { return (pit_u32)__cvta_generic_to_shared(p); }
#endif

/* Element offset of (row r, column c) in rows of 64 16-bit elements (128
 * bytes) under 128-byte swizzle, as wgmma and TMA read them: 16-byte chunk
 * c / 8 of row r stored at chunk (c / 8) ^ (r % 8); c a multiple of 8. */
PIT_DEV int pit_swz128(int r, int c) { return r * 64 + (((c >> 3) ^ (r & 7)) << 3); }

/* 2^x, results below 2^-126 flushed to zero: one MUFU.EX2 on NVIDIA, where
 * exp2f's ex2.approx.f32 wraps it in a denormal fix-up (three more
 * instructions); softmax weights that small leave an f32 sum unchanged. */
PIT_DEV float pit_exp2_ftz(float x)
{
#if defined(PIT_AMD)
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* a * b rounded to f32 by itself: never fused into an FMA with the add that
 * follows (nvcc and clang both fuse by default). A softmax's max pass and
 * its exp pass must see the same scaled logit: exp(scaled - max) with the
 * exact product in one and the rounded one in the other is off by up to
 * half an ulp of the max, which for large logits overflows or zeroes the
 * whole row. */
PIT_DEV float pit_mul_rn(float a, float b)
{
#if defined(PIT_AMD)
#pragma clang fp contract(off)
    return a * b;
#else
    return __fmul_rn(a, b);
#endif
}

/* 16 bytes, or zeros when !valid (src-size 0 zero-fills). */
PIT_DEV void pit_copy16(void *dst, const void *src, bool valid)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(pit_smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
#else
    uint4 v = make_uint4(0, 0, 0, 0);
    if (valid) v = *(const uint4 *)src;
    *(uint4 *)dst = v;
#endif
}
/* 4 bytes, or zeros when !valid (a gather of 16-bit pairs) */
PIT_DEV void pit_copy4(void *dst, const void *src, bool valid)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(pit_smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0));
#else
    *(pit_u32 *)dst = valid ? *(const pit_u32 *)src : 0u;
#endif
}
PIT_DEV void pit_copy_commit(void)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> PIT_DEV void pit_copy_wait(void)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#endif
}


#endif /* PIT_PORT_CUH */
