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
#endif

#endif /* PIT_ELEM_CUH */
