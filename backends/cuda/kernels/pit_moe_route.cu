/*
 * pit_moe_route.cu - MoE routing (pit_op_route: per expert its token-slots)
 * and the work lists and orders of the kernels that run over an index
 * (pit_op_plan). One of the two per compilation: PIT_KERNEL_OP_ROUTE or
 * PIT_KERNEL_OP_PLAN.
 */
#include "common/port.cuh"
#include "args.h"

extern "C" __device__ const int pit_smem_bytes = 0;

#if defined(PIT_KERNEL_OP_ROUTE)
/* MoE routing: slot s = t*k + j goes to expert ids[t][j]; out of order,
 * atomics, no sort. counts and total were zeroed. */
PIT_KERNEL void __launch_bounds__(256) pit_op_route(const pit_route_args a)
{
    const pit_i64 s = (pit_i64)blockIdx.x * 256 + threadIdx.x;
    bool routed = false;
    if (s < (pit_i64)a.T * a.k) {
        const int t = (int)(s / a.k), j = (int)(s % a.k);
        const int e = __ldg(a.ids + (pit_i64)t * a.ld + j);
        if (e >= 0 && e < a.E) {
            const int pos = pit_atomic_add(a.counts + e, 1);
            a.entries[(pit_i64)e * a.capacity + pos] = (int)s;
            routed = true;
        }
    }
    const pit_u32 votes = pit_ballot(routed); /* one total update per warp */
    if (pit_lane() == 0 && votes) pit_atomic_add(a.total, pit_popc(votes));
}
#endif

#if defined(PIT_KERNEL_OP_PLAN)
/* Mode 0, the work list of a gathered GEMM: for each group, ceil(count /
 * bm) triples (group, first row, the group's rows), groups in order
 * (neighbouring CTAs share a weight matrix in L2); list[0] = number of
 * triples. A tile's three numbers load at once (no load waits on another).
 * Mode 2: the same, groups in plan_mix's order. Mode 1: the groups by
 * falling count (the fused attention's order). One CTA of 1024 threads. */
/* Exclusive prefix sum of c over the CTA's 1024 threads (all must call). */
PIT_DEV int block_exclusive_sum(int c, int *warp_sum)
{
    const int lane = pit_lane(), warp = threadIdx.x / 32;
    int incl = c;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        int o = pit_shfl(incl, lane >= d ? lane - d : lane);
        if (lane >= d) incl += o;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int w = warp_sum[lane], wi = w;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            int o = pit_shfl(wi, lane >= d ? lane - d : lane);
            if (lane >= d) wi += o;
        }
        warp_sum[lane] = wi - w; /* exclusive */
    }
    __syncthreads();
    const int r = warp_sum[warp] + incl - c;
    __syncthreads(); /* warp_sum free for the next call */
    return r;
}

/* Mode 1: list[0..groups) = the groups by falling count (a counting sort,
 * capacity < 1024 so a bin per thread; ties in any order). */
PIT_DEV void plan_order(const pit_plan_args &a, int *warp_sum)
{
    __shared__ int bin[1024];
    bin[threadIdx.x] = 0;
    __syncthreads();
    for (int g = threadIdx.x; g < a.groups; g += 1024)
        atomicAdd(&bin[a.capacity - min(__ldg(a.counts + g), a.capacity)], 1);
    __syncthreads();
    const int at = block_exclusive_sum(bin[threadIdx.x], warp_sum);
    bin[threadIdx.x] = at;
    __syncthreads();
    for (int g = threadIdx.x; g < a.groups; g += 1024)
        a.list[atomicAdd(&bin[a.capacity - min(__ldg(a.counts + g), a.capacity)], 1)] = g;
}

/* Mode 2 (groups <= 1024): the groups' order for the work list, largest
 * and smallest alternating (rank 0, rank G - 1, rank 1, ...): a wave of
 * CTAs mixes tiles of a large group, which share its weights in L2 and
 * are bound by the tensor cores, with tiles of small groups, which are
 * bound by reading their weights. */
PIT_DEV void plan_mix(const pit_plan_args &a, int *order)
{
    __shared__ int cnt[1024];
    const int g = threadIdx.x, G = a.groups;
    if (g < G) cnt[g] = min(__ldg(a.counts + g), a.capacity);
    __syncthreads();
    if (g < G) {
        int rank = 0;
        for (int h = 0; h < G; ++h) rank += cnt[h] > cnt[g] || (cnt[h] == cnt[g] && h < g);
        order[rank < (G + 1) / 2 ? 2 * rank : 2 * (G - 1 - rank) + 1] = g;
    }
    __syncthreads();
}

PIT_KERNEL void __launch_bounds__(1024) pit_op_plan(const pit_plan_args a)
{
    __shared__ int warp_sum[32];
    __shared__ int base;
    if (a.mode == 1) {
        plan_order(a, warp_sum);
        return;
    }
    __shared__ int order[1024];
    const bool mix = a.mode == 2 && a.groups <= 1024;
    if (mix) plan_mix(a, order);
    if (threadIdx.x == 0) base = 0;
    __syncthreads();
    for (int g0 = 0; g0 < a.groups; g0 += 1024) {
        const int g = mix ? (threadIdx.x < a.groups ? order[threadIdx.x] : a.groups) : g0 + threadIdx.x;
        const int cnt = g < a.groups ? min(__ldg(a.counts + g), a.capacity) : 0;
        const int c = (cnt + a.bm - 1) / a.bm;
        const int at = base + block_exclusive_sum(c, warp_sum);
        for (int q = 0; q < c; ++q) {
            a.list[1 + 3 * (at + q)] = g;
            a.list[2 + 3 * (at + q)] = q * a.bm;
            a.list[3 + 3 * (at + q)] = cnt;
        }
        __syncthreads();
        if (threadIdx.x == 1023) base = at + c;
        __syncthreads();
    }
    if (threadIdx.x == 0) a.list[0] = base;
}
#endif
