/*
 * pit_util.cu - small helpers of the axis-M path, whose SWrite accumulates:
 * zero a strided f32 matrix first, and convert the f32 accumulation to the
 * output dtype afterwards. Defines: PIT_DTYPE (of the converted output).
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"

/* static shared memory only; read by the host like every pit kernel */
extern "C" __device__ const int pit_smem_bytes = 0;

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
    const int slabs = a.nsum > 1 ? a.nsum : 1;
    const float *f32 = a.f32 + (pit_i64)blockIdx.z * slabs * a.s32;
    for (int m = blockIdx.y; m < a.rows; m += gridDim.y) {
        if (n >= a.cols) continue;
        float v = 0.f;
        for (int j = 0; j < slabs; ++j) v += f32[(pit_i64)j * a.s32 + (pit_i64)m * a.ld32 + n];
        ((T *)a.out)[(pit_i64)blockIdx.z * a.so + (pit_i64)m * a.ldo + n] = pit_from_float<T>(v);
    }
}

/* ---- SRead as a gather pass (axis K, micro-tiles too narrow for 16-byte
 * vectors, e.g. 32x1): row-block g's non-zero micro-tile columns are copied
 * densely, in index order, to out + g*tm*ldo (gathered column q at q), so the
 * fused kernel then reads A with 16-byte cp.async. Reads only the indexed
 * micro-tiles. ldo must be a multiple of 8. grid: x = 256 gathered columns, y = row-block, z = batch. */
PIT_KERNEL void __launch_bounds__(256) pit_compact(const pit_compact_args a)
{
    const int grp = blockIdx.z * a.groups_per_batch + blockIdx.y;
    const int count = min(__ldg(a.counts + grp), a.capacity);
    const int q = blockIdx.x * 256 + threadIdx.x;
    const int len = count * a.tk;
    /* zeros up to the next 8 columns: a 16-byte vector that starts below len
     * is read whole by the fused kernel */
    if (q >= ((len + 7) & ~7)) return;
    const int k = q < len ? pit_entry_index(__ldg(a.entries + (pit_i64)grp * a.capacity + q / a.tk)) * a.tk + q % a.tk : a.K;
    const int row0 = blockIdx.y * a.tm;
    const int rows = k < a.K ? min(a.tm, a.M - row0) : 0;
    const T *src = (const T *)a.a + (pit_i64)blockIdx.z * a.sa + (pit_i64)row0 * a.lda + k;
    T *dst = (T *)a.out + (pit_i64)blockIdx.z * a.so + (pit_i64)row0 * a.ldo + q;
    const T zero = pit_from_float<T>(0.f);
#pragma unroll 8
    for (int r = 0; r < a.tm; ++r) dst[(pit_i64)r * a.ldo] = r < rows ? src[(pit_i64)r * a.lda] : zero;
}
