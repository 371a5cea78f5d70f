/*
 * pit_sddmm.cu - SDDMM on CUDA cores: C = (A . B^T) masked, on the blocks
 * of the index only (pit_op_sddmm). Defines: PIT_DTYPE, MASK_DT.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/index.cuh"
#include "common/elem.cuh"

/* SDDMM on CUDA cores. CTA = 32x32 part of one indexed block: x = entry
 * slot x part, y = row-block, z = batch; 256 threads, 2x2 outputs each.
 * C was zeroed before; only the listed blocks are written here. */
extern "C" __device__ const int pit_smem_bytes = 0;

PIT_KERNEL void __launch_bounds__(256) pit_op_sddmm(const pit_sddmm_args p)
{
    __shared__ float As[32][33], Bs[32][33];
    const int parts = ((p.br + 31) / 32) * p.parts_c;
    const int i = blockIdx.x / parts, part = blockIdx.x % parts, batch = blockIdx.z;
    const int grp = ix_group(p.ix, batch, blockIdx.y);
    if (i >= __ldg(p.ix.counts + grp)) return;
    const int blk = pit_entry_index(__ldg(p.ix.entries + (pit_i64)grp * p.ix.capacity + i));
    const int rb0 = blockIdx.y * p.br, cb0 = blk * p.bc;
    const int row0 = rb0 + (part / p.parts_c) * 32, col0 = cb0 + (part % p.parts_c) * 32;
    const int rend = min(rb0 + p.br, p.M), cend = min(cb0 + p.bc, p.N);
    const T *A = (const T *)p.a + batch * p.sa, *B = (const T *)p.b + batch * p.sb;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int k0 = 0; k0 < p.K; k0 += 32) {
        for (int u = threadIdx.x; u < 32 * 32; u += 256) {
            int r = u / 32, kk = u % 32, k = k0 + kk;
            As[r][kk] = row0 + r < rend && k < p.K ? pit_to_float(A[(pit_i64)(row0 + r) * p.lda + k]) : 0.f;
            Bs[r][kk] = col0 + r < cend && k < p.K ? pit_to_float(B[(pit_i64)(col0 + r) * p.ldb + k]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < 32; ++kk)
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
                for (int y = 0; y < 2; ++y) acc[x][y] = fmaf(As[ty * 2 + x][kk], Bs[tx * 2 + y][kk], acc[x][y]);
        __syncthreads();
    }
    const pit_u8 *mask = p.mask + (pit_i64)batch * p.ms * MASK_BYTES;
    T *C = (T *)p.c + batch * p.sc;
#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int y = 0; y < 2; ++y) {
            int r = row0 + ty * 2 + x, col = col0 + tx * 2 + y;
            if (r < rend && col < cend)
                C[(pit_i64)r * p.ldc + col] = pit_from_float<T>(mask_on(mask, (pit_i64)r * p.mld + col) ? acc[x][y] : 0.f);
        }
}
