/*
 * pit_util.cu - small helpers of the axis-M path, whose SWrite accumulates:
 * zero a strided f32 matrix first, and convert the f32 accumulation to the
 * output dtype afterwards. Defines: PIT_DTYPE (of the converted output).
 */
#include "pit_port.cuh"

#if PIT_DTYPE == PIT_DT_F32
typedef float T;
#elif PIT_DTYPE == PIT_DT_F16
typedef pit_half T;
#else
typedef pit_bf16 T;
#endif

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

struct pit_util_args {
    float *f32;        /* the f32 matrix: zeroed, or converted from */
    pit_u8 *out;       /* converted into (T) */
    pit_i64 ld32, s32; /* row and batch strides of f32 (elements) */
    pit_i64 ldo, so;   /* of out */
    int rows, cols;
};

/* grid: x covers columns (256 per CTA), y rows, z batch */
PIT_KERNEL void __launch_bounds__(256) pit_zero_f32(const pit_util_args a)
{
    int n = blockIdx.x * 256 + threadIdx.x;
    for (int m = blockIdx.y; m < a.rows; m += gridDim.y)
        if (n < a.cols) a.f32[(pit_i64)blockIdx.z * a.s32 + (pit_i64)m * a.ld32 + n] = 0.f;
}

PIT_KERNEL void __launch_bounds__(256) pit_convert_f32(const pit_util_args a)
{
    int n = blockIdx.x * 256 + threadIdx.x;
    for (int m = blockIdx.y; m < a.rows; m += gridDim.y) {
        if (n >= a.cols) continue;
        float v = a.f32[(pit_i64)blockIdx.z * a.s32 + (pit_i64)m * a.ld32 + n];
        ((T *)a.out)[(pit_i64)blockIdx.z * a.so + (pit_i64)m * a.ldo + n] = pit_from_float<T>(v);
    }
}
