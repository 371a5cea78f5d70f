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

#define PIT_WARP 32
#define PIT_DEV __device__ __forceinline__
#define PIT_KERNEL extern "C" __global__

/* dtype codes, as -DPIT_DTYPE=... */
#define PIT_DT_F32 0
#define PIT_DT_F16 1
#define PIT_DT_BF16 2

/* ---- 16-bit float types: raw bits, converted with explicit instructions */
struct pit_half { pit_u16 bits; };
struct pit_bf16 { pit_u16 bits; };

PIT_DEV float pit_to_float(float x) { return x; }
PIT_DEV float pit_to_float(pit_half x)
{
    float f;
    asm("{ .reg .b16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x.bits));
    return f;
}
PIT_DEV float pit_to_float(pit_bf16 x) { return __uint_as_float(((pit_u32)x.bits) << 16); }

template <typename T> PIT_DEV T pit_from_float(float f);
template <> PIT_DEV float pit_from_float<float>(float f) { return f; }
template <> PIT_DEV pit_half pit_from_float<pit_half>(float f)
{
    pit_half h;
    asm("{ .reg .b16 r; cvt.rn.f16.f32 r, %1; mov.b16 %0, r; }" : "=h"(h.bits) : "f"(f));
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

/* ---- warp primitives */
PIT_DEV pit_u32 pit_ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
PIT_DEV int pit_popc(pit_u32 x) { return __popc(x); }
PIT_DEV int pit_shfl(int v, int src) { return __shfl_sync(0xffffffffu, v, src); }
PIT_DEV int pit_lane(void) { return threadIdx.x & (PIT_WARP - 1); }

/* ---- atomics */
PIT_DEV int pit_atomic_add(int *p, int v) { return atomicAdd(p, v); }
PIT_DEV float pit_atomic_addf(float *p, float v) { return atomicAdd(p, v); }
PIT_DEV pit_u32 pit_atomic_or(pit_u32 *p, pit_u32 v) { return atomicOr(p, v); }

/* ---- global -> shared copies. cp.async on sm_80+, a plain copy before. */
PIT_DEV pit_u32 pit_smem_addr(const void *p) { return (pit_u32)__cvta_generic_to_shared(p); }

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

#endif /* PIT_PORT_CUH */
