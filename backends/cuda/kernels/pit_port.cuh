/*
 * pit_port.cuh - the small portability layer every pit device kernel is
 * written against, so the same sources compile with NVRTC (CUDA) and, later,
 * hiprtc (HIP). It holds: fixed-width integers (NVRTC has no libc headers),
 * warp size and shuffles, atomics, the 16-bit float types as raw bits with
 * their conversions, asynchronous global->shared copies, and THE one
 * vendor-specific matrix step (pit_mma_16816).
 *
 * No CUDA header is included on purpose: NVRTC ships none by default and
 * the HIP port maps these few functions instead of a whole header.
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
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
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

/* An index entry marked "full" (core/backend.h: detection found every
 * element of its micro-tile non-zero). Kernels that only need the position
 * read it through pit_entry_index, so a marked index serves them all. */
#define PIT_ENTRY_FULL 0x40000000
#define pit_entry_index(e) ((e) & ~PIT_ENTRY_FULL)

/* dtype codes (pit_dtype's), as -DPIT_DTYPE=... and -DMASK_DT=... */
#define PIT_DT_F32 0
#define PIT_DT_F16 1
#define PIT_DT_BF16 2
#define PIT_DT_I32 3
#define PIT_DT_U8 4 /* pattern masks only: bytes, non-zero = on */

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

/* ---- the matrix step: D(16x8,f32) += A(16x16) . B(16x8), 16-bit inputs.
 * NVIDIA: ldmatrix + mma.sync m16n8k16 (sm_80+). This is the one function
 * (with its two fragment loaders) that another vendor replaces. */
#if defined(PIT_AMD)
/* ---- AMD: the three functions keep NVIDIA's exact semantics on each
 * 32-lane logical warp (ldmatrix.x4 / .x4.trans fragments, mma.sync
 * m16n8k16 row.col operands and accumulators), so kernels may move
 * fragments between them as on NVIDIA (e.g. accumulators packed into an A
 * operand). With g = lane/4, t = lane%4:
 *   A: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t..], a[2] = A[g][8+2t..], a[3] = A[g+8][8+2t..]
 *   B: b[0] = B[2t, 2t+1][g], b[1] = B[8+2t, 9+2t][g]
 *   D: d[0], d[1] = D[g][2t, 2t+1], d[2], d[3] = D[g+8][2t, 2t+1]
 * Lanes exchange registers with ds_bpermute; the matrix step itself is
 * MFMA (CDNA2/3), WMMA (RDNA3) or FMAs. */
#define PIT_HAS_MMA 1

/* the u32 at byte offset off of the LDS row whose address lane src holds */
PIT_DEV pit_u32 pit_lds_u32(pit_u32 row, pit_u32 off)
{
    return *(const __attribute__((address_space(3))) pit_u32 *)(row + off);
}

/* lane l, register i: row l/4 of 8x8 matrix i (its address is lane 8i + l/4's), elements 2(l%4), +1 */
PIT_DEV void pit_ldmatrix_x4(pit_u32 r[4], const void *smem)
{
    const int base = pit_warp_base(), l = pit_hw_lane() - base;
    const pit_u32 mine = pit_smem_addr(smem);
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = pit_lds_u32(pit_bperm(base + 8 * i + (l >> 2), mine), 4u * (pit_u32)(l & 3));
}
/* transposed: lane l, register i: elements l/4 of rows 2(l%4) and 2(l%4)+1 of matrix i */
PIT_DEV void pit_ldmatrix_x4_trans(pit_u32 r[4], const void *smem)
{
    const int base = pit_warp_base(), l = pit_hw_lane() - base;
    const pit_u32 mine = pit_smem_addr(smem), col = 2u * (pit_u32)(l >> 2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        pit_u32 lo = *(pit_lds_u16)(pit_bperm(base + 8 * i + 2 * (l & 3), mine) + col);
        pit_u32 hi = *(pit_lds_u16)(pit_bperm(base + 8 * i + 2 * (l & 3) + 1, mine) + col);
        r[i] = lo | (hi << 16);
    }
}

template <int DT> PIT_DEV float pit_half_to_float(pit_u32 bits)
{
    if (DT == PIT_DT_BF16) return __builtin_bit_cast(float, bits << 16);
    return (float)__builtin_bit_cast(_Float16, (pit_u16)bits);
}

/* sum over the two 16-bit pairs of x and y, added to acc */
template <int DT> PIT_DEV float pit_dot2(pit_u32 x, pit_u32 y, float acc)
{
    acc = __builtin_fmaf(pit_half_to_float<DT>(x & 0xffffu), pit_half_to_float<DT>(y & 0xffffu), acc);
    return __builtin_fmaf(pit_half_to_float<DT>(x >> 16), pit_half_to_float<DT>(y >> 16), acc);
}

/* Any AMD GPU: FMAs on operands gathered by 32 lane permutes per step. */
template <int DT> PIT_DEV void pit_mma_fma(float d[4], const pit_u32 a[4], const pit_u32 b[2])
{
    const int base = pit_warp_base(), l = pit_hw_lane() - base;
    const int g = l >> 2, t = l & 3;
#pragma unroll
    for (int j = 0; j < 4; ++j) { /* k = 2j, 2j+1 and 8+2j, 9+2j */
        const int asrc = base + 4 * g + j;
        const pit_u32 r0 = pit_bperm(asrc, a[0]), r1 = pit_bperm(asrc, a[1]);
        const pit_u32 r2 = pit_bperm(asrc, a[2]), r3 = pit_bperm(asrc, a[3]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int bsrc = base + 4 * (2 * t + e) + j;
            const pit_u32 k0 = pit_bperm(bsrc, b[0]), k8 = pit_bperm(bsrc, b[1]);
            d[e] = pit_dot2<DT>(r2, k8, pit_dot2<DT>(r0, k0, d[e]));
            d[2 + e] = pit_dot2<DT>(r3, k8, pit_dot2<DT>(r1, k0, d[2 + e]));
        }
    }
}

typedef float pit_f4 __attribute__((ext_vector_type(4)));
typedef float pit_f8 __attribute__((ext_vector_type(8)));

/* acc[reg] of lane src, where reg differs from lane to lane: every
 * register is permuted and the wanted one kept. */
template <int N, typename V> PIT_DEV float pit_pick(const V &acc, int src, int reg)
{
    float v = 0.f;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        float x = __builtin_bit_cast(float, pit_bperm(src, __builtin_bit_cast(pit_u32, (float)acc[j])));
        v = reg == j ? x : v;
    }
    return v;
}

#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
typedef _Float16 pit_h4 __attribute__((ext_vector_type(4)));
typedef short pit_s4 __attribute__((ext_vector_type(4)));
template <int DT> PIT_DEV pit_f4 pit_mfma16(pit_u32 a0, pit_u32 a1, pit_u32 b0, pit_u32 b1)
{
    const pit_u64 a = (pit_u64)a0 | ((pit_u64)a1 << 32), b = (pit_u64)b0 | ((pit_u64)b1 << 32);
    const pit_f4 z = {0.f, 0.f, 0.f, 0.f};
    if (DT == PIT_DT_BF16)
        return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(pit_s4, a),
                                                         __builtin_bit_cast(pit_s4, b), z, 0, 0, 0);
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(pit_h4, a), __builtin_bit_cast(pit_h4, b),
                                                 z, 0, 0, 0);
}
/* CDNA (wave64): one v_mfma_f32_16x16x16 per logical warp of the
 * wavefront. MFMA lane L (i = L%16, q = L/16) takes row i of A and column
 * i of B at four k; q picks which (k = 2q, 2q+1, 8+2q, 9+2q: the order of
 * k is free as A and B agree), and returns D[4q + r][i]. Logical warp w's
 * B goes to columns 8w..8w+7 with zeros elsewhere, each warp its own
 * accumulator (a zero column never meets the other warp's A, which may
 * hold Inf). Both halves run this together: the callers' loops are
 * warp-uniform. */
template <int DT> PIT_DEV void pit_mma_mfma(float d[4], const pit_u32 a[4], const pit_u32 b[2])
{
    const int L = pit_hw_lane(), w = L >> 5, l = L & 31;
    const int i = L & 15, q = L >> 4, hi = i >> 3;
    const int bsrc = 32 * hi + 4 * (i & 7) + q;
    const pit_u32 b0 = pit_bperm(bsrc, b[0]), b1 = pit_bperm(bsrc, b[1]);
    pit_f4 acc[2];
#pragma unroll
    for (int wp = 0; wp < 2; ++wp) {
        const int asrc = 32 * wp + 4 * (i & 7) + q;
        const pit_u32 x0 = pit_bperm(asrc, a[0]), x1 = pit_bperm(asrc, a[1]);
        const pit_u32 x2 = pit_bperm(asrc, a[2]), x3 = pit_bperm(asrc, a[3]);
        const bool own = hi == wp;
        acc[wp] = pit_mfma16<DT>(hi ? x1 : x0, hi ? x3 : x2, own ? b0 : 0u, own ? b1 : 0u);
    }
    const pit_f4 res = hi ? acc[1] : acc[0];
    const int g = l >> 2, t = l & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int row = g + 8 * h;
            d[2 * h + e] += pit_pick<4>(res, 8 * w + 2 * t + e + 16 * (row >> 2), row & 3);
        }
}
#endif

#if (defined(__GFX11__) || defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__)) && \
    __has_builtin(__builtin_amdgcn_wmma_f32_16x16x16_f16_w32)
#define PIT_AMD_WMMA 1
typedef _Float16 pit_h16 __attribute__((ext_vector_type(16)));
typedef short pit_s16 __attribute__((ext_vector_type(16)));
struct pit_u32x8 { pit_u32 v[8]; };
/* RDNA3 (wave32): v_wmma_f32_16x16x16; lane l takes row l%16 of A and
 * column l%16 of B (16 k each, in the order 2t, 2t+1, 8+2t, 9+2t for
 * t = 0..3 in both; both half-waves the same) and returns
 * D[2r + l/16][l%16]. B's columns 8..15 are zero. */
template <int DT> PIT_DEV void pit_mma_wmma(float d[4], const pit_u32 a[4], const pit_u32 b[2])
{
    const int l = pit_hw_lane() & 31, i = l & 15, hi = i >> 3;
    pit_u32x8 av, bv;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int src = 4 * (i & 7) + t;
        const pit_u32 x0 = pit_bperm(src, a[0]), x1 = pit_bperm(src, a[1]);
        const pit_u32 x2 = pit_bperm(src, a[2]), x3 = pit_bperm(src, a[3]);
        const pit_u32 y0 = pit_bperm(src, b[0]), y1 = pit_bperm(src, b[1]);
        av.v[2 * t] = hi ? x1 : x0;
        av.v[2 * t + 1] = hi ? x3 : x2;
        bv.v[2 * t] = hi ? 0u : y0;
        bv.v[2 * t + 1] = hi ? 0u : y1;
    }
    const pit_f8 z = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    pit_f8 acc;
    if (DT == PIT_DT_BF16)
        acc = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_bit_cast(pit_s16, av),
                                                          __builtin_bit_cast(pit_s16, bv), z);
    else
        acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(pit_h16, av),
                                                         __builtin_bit_cast(pit_h16, bv), z);
    const int g = l >> 2, t = l & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int row = g + 8 * h;
            d[2 * h + e] += pit_pick<8>(acc, 2 * t + e + 16 * (row & 1), row >> 1);
        }
}
#endif

/* D(16x8, f32) += A(16x16) . B(16x8): MFMA on CDNA2/3, WMMA on RDNA3,
 * FMAs elsewhere. */
template <int DT> PIT_DEV void pit_mma_16816(float d[4], const pit_u32 a[4], const pit_u32 b[2])
{
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
    pit_mma_mfma<DT>(d, a, b);
#elif defined(PIT_AMD_WMMA)
    pit_mma_wmma<DT>(d, a, b);
#else
    pit_mma_fma<DT>(d, a, b);
#endif
}

#else /* NVIDIA */
#define PIT_HAS_MMA (__CUDA_ARCH__ >= 800)

PIT_DEV void pit_ldmatrix_x4(pit_u32 r[4], const void *smem)
{
#if PIT_HAS_MMA
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(pit_smem_addr(smem)));
#else
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
PIT_DEV void pit_ldmatrix_x4_trans(pit_u32 r[4], const void *smem)
{
#if PIT_HAS_MMA
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(pit_smem_addr(smem)));
#else
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
template <int DT> PIT_DEV void pit_mma_16816(float d[4], const pit_u32 a[4], const pit_u32 b[2])
{
#if PIT_HAS_MMA
    if (DT == PIT_DT_BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
#else
    (void)d; (void)a; (void)b;
    __trap(); /* the host never picks a tensor-core tile below sm_80 */
#endif
}

/* ---- Hopper warpgroup MMA (wgmma, sm_90a only): D(64xN, f32) += A(64x16)
 * . B(16xN), both operands in shared memory under 128-byte swizzle: A
 * K-major (rows of 64 elements = 128 bytes), B N-major (transposed: rows of
 * 64 N elements per 64-column chunk). A descriptor holds the start address,
 * the leading and stride byte offsets (>> 4) and the swizzle mode (1:
 * 128 B). Accumulator layout: thread t of the warpgroup holds, for column
 * block i (8 columns), d[4i + j] at row 16 (t / 32) + (t % 32) / 4 + 8 (j / 2),
 * column 8i + 2 (t % 4) + j % 2: mma.sync's m16n8 layout, one warp a 16-row
 * slice. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PIT_HAS_WGMMA 1
PIT_DEV pit_u64 pit_wgmma_desc(pit_u32 addr, pit_u32 lbo, pit_u32 sbo)
{
    return (pit_u64)((addr & 0x3ffff) >> 4) | ((pit_u64)(lbo >> 4) << 16) | ((pit_u64)(sbo >> 4) << 32) |
           (1ull << 62);
}
PIT_DEV void pit_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
PIT_DEV void pit_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> PIT_DEV void pit_wgmma_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
/* Pins registers a wgmma reads or writes between volatile asm statements:
 * the compiler may otherwise sink a register's last write below
 * wgmma.fence (or hoist a read above wgmma.wait_group), which the fence
 * rules make undefined. */
template <int N> PIT_DEV void pit_wgmma_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
template <int N> PIT_DEV void pit_wgmma_pin(pit_u32 (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}
/* cp.async's writes (generic proxy) become visible to wgmma (async proxy) */
PIT_DEV void pit_fence_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- the tensor copy engine (TMA) and its shared-memory barriers: a
 * barrier at shared address `bar` counts one arrival (the thread that
 * announces the bytes) and the bytes the copies deliver; a waiter spins on
 * the phase parity of its use (use k of a barrier: parity k & 1). */
PIT_DEV void pit_mbar_init(pit_u32 bar, int arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
/* barrier inits visible to the async proxy (the copy engine) */
PIT_DEV void pit_fence_mbar_init(void) { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
PIT_DEV void pit_mbar_expect_tx(pit_u32 bar, pit_u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* An arrival on bar once this thread's cp.async copies so far have landed
 * (noinc: it counts as one of the arrivals the barrier expects) */
PIT_DEV void pit_copy_arrive(pit_u32 bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* one plain arrival (a consumer handing a stage back to its producer) */
PIT_DEV void pit_mbar_arrive(pit_u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
PIT_DEV void pit_mbar_wait(pit_u32 bar, pit_u32 parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* One box of a 3-D tensor map (a __grid_constant__ parameter) at element
 * coordinates (x, y, z) into shared address dst; completes on bar. Parts of
 * the box outside the tensor arrive as zeros and count as delivered bytes. */
PIT_DEV void pit_tma_load_3d(pit_u32 dst, const void *map, pit_u32 bar, int x, int y, int z)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"(map), "r"(bar), "r"(x), "r"(y), "r"(z)
                 : "memory");
}

/* The same box copied into shared address dst of every CTA of the cluster
 * in `ctas` (a bit a CTA rank), each completing on its barrier at bar. */
PIT_DEV void pit_tma_load_3d_multicast(pit_u32 dst, const void *map, pit_u32 bar, int x, int y, int z,
                                       unsigned short ctas)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
                 "l"(map), "r"(bar), "r"(x), "r"(y), "r"(z), "h"(ctas)
                 : "memory");
}

PIT_DEV void pit_st_shared_u32(pit_u32 addr, pit_u32 v)
{
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
/* bytes (a multiple of 16) from shared address src to global dst, both
 * 16-byte aligned, in this thread's bulk group */
PIT_DEV void pit_bulk_store(void *dst, pit_u32 src, pit_u32 bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
                 : "memory");
}
PIT_DEV void pit_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* this thread's bulk stores have read their shared memory (READ) or are done */
template <bool READ> PIT_DEV void pit_bulk_wait(void)
{
    if (READ)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    else
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* ---- thread-block clusters (sm_90) */
PIT_DEV unsigned pit_cluster_rank(void)
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
/* every thread of the cluster's CTAs: writes before it seen after it */
PIT_DEV void pit_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::: "memory");
}
/* one arrival on the barrier at shared offset bar of the cluster's CTA
 * `rank`; release at CTA scope (the default), as a release at cluster scope
 * is a full memory barrier each time, which halved the paired GEMM's speed */
PIT_DEV void pit_mbar_arrive_at(pit_u32 bar, unsigned rank)
{
    asm volatile("{\n"
                 ".reg .b32 remote;\n"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
                 "}\n" ::"r"(bar),
                 "r"(rank)
                 : "memory");
}

/* A warpgroup's registers a thread, moved between warpgroups of a
 * warp-specialised kernel (all four warps execute it) */
template <int N> PIT_DEV void pit_regs_dec(void) { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> PIT_DEV void pit_regs_inc(void) { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

#define PIT_WG_D64 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define PIT_WG_D128 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63," \
    "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79," \
    "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95," \
    "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
    "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define PIT_WG_O8(d, i) "+f"((d)[i]), "+f"((d)[i + 1]), "+f"((d)[i + 2]), "+f"((d)[i + 3]), \
                        "+f"((d)[i + 4]), "+f"((d)[i + 5]), "+f"((d)[i + 6]), "+f"((d)[i + 7])
#define PIT_WG_O64(d) PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24), \
                      PIT_WG_O8(d, 32), PIT_WG_O8(d, 40), PIT_WG_O8(d, 48), PIT_WG_O8(d, 56)
/* scale-d true (accumulate), scales +1, A not transposed, B transposed */
#define PIT_WG_ASM(SHAPE, D, DA, DB) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE " " D ", " DA ", " DB \
    ", p, 1, 1, 0, 1;\n}\n"

/* N = 128 (64 accumulators a thread) and N = 256 (128) */
template <int DT> PIT_DEV void pit_wgmma(float (&d)[64], pit_u64 da, pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_ASM("m64n128k16.f32.bf16.bf16", PIT_WG_D64, "%64", "%65") : PIT_WG_O64(d) : "l"(da), "l"(db));
    else
        asm volatile(PIT_WG_ASM("m64n128k16.f32.f16.f16", PIT_WG_D64, "%64", "%65") : PIT_WG_O64(d) : "l"(da), "l"(db));
}
template <int DT> PIT_DEV void pit_wgmma(float (&d)[128], pit_u64 da, pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_ASM("m64n256k16.f32.bf16.bf16", PIT_WG_D128, "%128", "%129")
                     : PIT_WG_O64(d), PIT_WG_O64(d + 64) : "l"(da), "l"(db));
    else
        asm volatile(PIT_WG_ASM("m64n256k16.f32.f16.f16", PIT_WG_D128, "%128", "%129")
                     : PIT_WG_O64(d), PIT_WG_O64(d + 64) : "l"(da), "l"(db));
}

/* N = 64 with A from registers: this warp's 16 rows as mma.sync's
 * m16n8k16 A fragment (four 32-bit registers); TB 1: B N-major. */
#define PIT_WG_D32 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define PIT_WG_RS_ASM(SHAPE) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE " " PIT_WG_D32 \
    ", {%32,%33,%34,%35}, %36, p, 1, 1, %37;\n}\n"
template <int DT, int TB> PIT_DEV void pit_wgmma_rs(float (&d)[32], const pit_u32 (&a)[4], pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_RS_ASM("m64n64k16.f32.bf16.bf16")
                     : PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
    else
        asm volatile(PIT_WG_RS_ASM("m64n64k16.f32.f16.f16")
                     : PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
}
#else
#define PIT_HAS_WGMMA 0
#endif

#endif /* AMD / NVIDIA */

#endif /* PIT_PORT_CUH */
