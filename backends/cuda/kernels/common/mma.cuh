/*
 * common/mma.cuh - the tensor-core step: D(16x8, f32) += A(16x16) . B(16x8)
 * on 16-bit inputs (pit_mma_16816) and its two fragment loaders. NVIDIA:
 * ldmatrix + mma.sync m16n8k16 (sm_80+); AMD: the same semantics on MFMA,
 * WMMA or FMAs. Needs common/port.cuh first.
 */
#ifndef PIT_MMA_CUH
#define PIT_MMA_CUH
#ifndef PIT_PORT_CUH
#error "include common/port.cuh before common/mma.cuh"
#endif

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

#endif /* AMD / NVIDIA */

#endif /* PIT_MMA_CUH */
