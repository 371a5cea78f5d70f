/*
 * pit_softmax.cu - row softmax over the blocks of the index and the mask
 * (pit_op_softmax), and its backward from the same source. Defines:
 * PIT_DTYPE, MASK_DT, PIT_KERNEL_OP_SOFTMAX_BWD for the backward.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"

/* Sparse softmax and, compiled with PIT_KERNEL_OP_SOFTMAX_BWD, its backward. CTA = one row-block of the
 * index (y = batch), a warp per row. A shared bitmap of the listed column
 * blocks lets pass 2 write every element of the row (0 off the pattern)
 * while pass 1 reads only the listed blocks. Out may be the input. */
extern "C" __device__ const int pit_smem_bytes = 0;

PIT_KERNEL void __launch_bounds__(256) pit_op_softmax(const pit_softmax_args p)
{
    __shared__ pit_u32 listed[PIT_SOFTMAX_MAX_BLOCKS / 32];
    const int batch = blockIdx.y, grp = ix_group(p.ix, batch, blockIdx.x);
    const int count = __ldg(p.ix.counts + grp);
    const int *ent = p.ix.entries + (pit_i64)grp * p.ix.capacity;
    const int nwords = (p.ix.capacity + 31) / 32;
    for (int w = threadIdx.x; w < nwords; w += blockDim.x) listed[w] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        int e = pit_entry_index(__ldg(ent + i));
        pit_atomic_or(&listed[e / 32], 1u << (e % 32));
    }
    __syncthreads();
    const T *X = (const T *)p.x + batch * p.sx;
#if defined(PIT_KERNEL_OP_SOFTMAX_BWD)
    const T *Y = (const T *)p.y + batch * p.sy;
#endif
    const pit_u8 *mask = p.mask + (pit_i64)batch * p.ms * MASK_BYTES;
#if !defined(PIT_KERNEL_OP_SOFTMAX_BWD)
    const float scale_log2 = p.scale * 1.4426950408889634f;
#endif
    T *O = (T *)p.out + batch * p.so;
    const int lane = pit_lane(), warp = threadIdx.x / 32;
    const int rend = min((int)blockIdx.x * p.br + p.br, p.M);
    for (int r = blockIdx.x * p.br + warp; r < rend; r += blockDim.x / 32) {
        const T *xr = X + (pit_i64)r * p.ldx;
#if defined(PIT_KERNEL_OP_SOFTMAX_BWD)
        const T *yr = Y + (pit_i64)r * p.ldy;
#endif
        const pit_i64 mr = (pit_i64)r * p.mld;
        /* pass 1 over the listed blocks: fwd running (max, sum), bwd sum(dY*Y).
         * The forward works in base 2 on v = x * scale * log2(e), rounded the
         * same way (pit_mul_rn) in both passes, so the largest v gives exactly
         * exp2(0). The max starts at the lowest finite float: a -inf logit
         * weighs 0, and a row of them (or none) sums to 0 and writes 0. */
        float mx = PIT_LOWEST, sum = 0.f;
        for (int i = 0; i < count; ++i) {
            int c0 = pit_entry_index(__ldg(ent + i)) * p.bc, c1 = min(c0 + p.bc, p.N);
            for (int c = c0 + lane; c < c1; c += 32) {
                if (!mask_on(mask, mr + c)) continue;
#if !defined(PIT_KERNEL_OP_SOFTMAX_BWD)
                float v = pit_mul_rn(pit_to_float(xr[c]), scale_log2);
                if (v > mx) {
                    sum = sum * exp2f(mx - v) + 1.f;
                    mx = v;
                } else {
                    sum += exp2f(v - mx);
                }
#else
                sum += pit_to_float(xr[c]) * pit_to_float(yr[c]);
#endif
            }
        }
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
#if !defined(PIT_KERNEL_OP_SOFTMAX_BWD)
            float om = shfl_xor_f(mx, d), os = shfl_xor_f(sum, d);
            float nm = fmaxf(mx, om);
            sum = sum * exp2f(mx - nm) + os * exp2f(om - nm);
            mx = nm;
#else
            sum += shfl_xor_f(sum, d);
#endif
        }
        /* pass 2: every element of the row */
#if !defined(PIT_KERNEL_OP_SOFTMAX_BWD)
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
#endif
        for (int c = lane; c < p.N; c += 32) {
            int blk = c / p.bc;
            bool on = ((listed[blk / 32] >> (blk % 32)) & 1u) && mask_on(mask, mr + c);
            float v = 0.f;
#if !defined(PIT_KERNEL_OP_SOFTMAX_BWD)
            if (on) v = exp2f(pit_mul_rn(pit_to_float(xr[c]), scale_log2) - mx) * inv;
#else
            if (on) v = p.scale * pit_to_float(xr[c]) * (pit_to_float(yr[c]) - sum);
#endif
            O[(pit_i64)r * p.ldo + c] = pit_from_float<T>(v);
        }
    }
}
