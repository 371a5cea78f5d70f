/*
 * common/elem.cuh - the element type T of a kernel compiled for one dtype
 * (-DPIT_DTYPE), and the small value helpers of the operator kernels: -inf,
 * the lowest finite float, a float shuffle across the warp, two values packed as a 16-bit pair.
 * Needs common/port.cuh first.
 */
#ifndef PIT_ELEM_CUH
#define PIT_ELEM_CUH
#ifndef PIT_PORT_CUH
#error "include common/port.cuh before common/elem.cuh"
#endif

#if PIT_DTYPE == PIT_DT_F32
typedef float T;
#elif PIT_DTYPE == PIT_DT_F16
typedef pit_half T;
#else
typedef pit_bf16 T;
#endif

#define PIT_NEG_INF (__uint_as_float(0xff800000u))
/* -FLT_MAX: a running max that starts here never gives exp(-inf - (-inf)) */
#define PIT_LOWEST (__uint_as_float(0xff7fffffu))

PIT_DEV float shfl_xor_f(float v, int x)
{
    return __uint_as_float((pit_u32)pit_shfl((int)__float_as_uint(v), pit_lane() ^ x));
}

#if PIT_DTYPE != PIT_DT_F32
/* two values as the 16-bit pair of one 32-bit word (low first) */
PIT_DEV pit_u32 pack2(float lo, float hi)
{
    return (pit_u32)pit_from_float<T>(lo).bits | ((pit_u32)pit_from_float<T>(hi).bits << 16);
}

/* The m16n8k16 A fragment of k-step kk from f32 accumulators of m16n8
 * column tiles: tiles 2 kk and 2 kk + 1 packed to 16 bits (the m16n8
 * accumulator layout is the A layout, on mma.sync and on wgmma) */
template <int TILES> PIT_DEV void pit_acc_fragment(const float (&s)[TILES][4], int kk, pit_u32 (&a)[4])
{
    a[0] = pack2(s[2 * kk][0], s[2 * kk][1]), a[1] = pack2(s[2 * kk][2], s[2 * kk][3]);
    a[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), a[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}
#endif

#endif /* PIT_ELEM_CUH */
