/*
 * pit_elementwise.cu - element-wise and layout helpers on [batch, rows,
 * cols] strided views: zero (optionally only the rows no expert routed),
 * ReLU and transpose; and the MoE expert FFN's activation over token-slot
 * rows, and the gather of its slot rows in expert order for the weight
 * gradients. One per compilation: PIT_KERNEL_OP_ZERO, PIT_KERNEL_OP_RELU,
 * PIT_KERNEL_OP_TRANSPOSE, PIT_KERNEL_OP_MOE_ACT, PIT_KERNEL_OP_MOE_GATHER or
 * PIT_KERNEL_OP_SUM_SLOTS.
 * Defines: PIT_DTYPE.
 */
#include "common/port.cuh"
#include "args.h"
#include "common/elem.cuh"

extern "C" __device__ const int pit_smem_bytes = 0;

#if defined(PIT_KERNEL_OP_ZERO)
/* grid: x = 256 columns, y = chunks of 256 rows (strided loop), z = batch.
 * With ids, a chunk's 256 ids load at once (one per thread, coalesced)
 * and the rows to zero are read from shared memory: no global load waits
 * inside the row loop. */
PIT_KERNEL void __launch_bounds__(256) pit_op_zero(const pit_ew_args a)
{
    __shared__ bool skip[256];
    __shared__ int zeroes[8]; /* per warp: a row of the chunk to zero */
    const int c = blockIdx.x * 256 + threadIdx.x;
    T *Y = (T *)a.y + blockIdx.z * a.sy + c;
    for (int r0 = blockIdx.y * 256; r0 < a.rows; r0 += gridDim.y * 256) {
        if (a.ids) {
            const int r = r0 + threadIdx.x;
            bool routed = false; /* a routed token: its row is stored by the GEMM */
            if (r < a.rows) {
                const int e = __ldg(a.ids + blockIdx.z * a.sid + (pit_i64)r * a.ldid);
                routed = e >= 0 && e < a.E;
            }
            __syncthreads(); /* the previous chunk is done with skip and zeroes */
            skip[threadIdx.x] = routed;
            if (pit_ballot(r < a.rows && !routed)) zeroes[threadIdx.x / 32] = 1;
            else if (pit_lane() == 0) zeroes[threadIdx.x / 32] = 0;
            __syncthreads();
            bool any = false;
#pragma unroll
            for (int w = 0; w < 8; ++w) any |= zeroes[w] != 0;
            if (!any) continue; /* every row of the chunk routed */
        }
        const int n = min(256, a.rows - r0);
        if (c < a.cols)
            for (int i = 0; i < n; ++i)
                if (!a.ids || !skip[i]) Y[(pit_i64)(r0 + i) * a.ldy] = pit_from_float<T>(0.f);
    }
}
#endif

#if defined(PIT_KERNEL_OP_RELU)
/* max(x, 0) with NaN kept; Y may be X. grid: x = 256 columns, y = groups
 * of EW_ROWS rows (strided loop), z = batch. A group's loads are all issued
 * before its stores: one memory round trip a group, not one a row (a CTA
 * loops over many rows). */
constexpr int EW_ROWS = 8;
PIT_KERNEL void __launch_bounds__(256) pit_op_relu(const pit_ew_args a)
{
    const int c = blockIdx.x * 256 + threadIdx.x;
    if (c >= a.cols) return;
    const T *X = (const T *)a.x + blockIdx.z * a.sx + c;
    T *Y = (T *)a.y + blockIdx.z * a.sy + c;
    for (int r0 = blockIdx.y * EW_ROWS; r0 < a.rows; r0 += gridDim.y * EW_ROWS) {
        float v[EW_ROWS];
#pragma unroll
        for (int j = 0; j < EW_ROWS; ++j) v[j] = r0 + j < a.rows ? pit_to_float(X[(pit_i64)(r0 + j) * a.ldx]) : 0.f;
#pragma unroll
        for (int j = 0; j < EW_ROWS; ++j)
            if (r0 + j < a.rows) Y[(pit_i64)(r0 + j) * a.ldy] = pit_from_float<T>(v[j] > 0.f || v[j] != v[j] ? v[j] : 0.f);
    }
}
#endif

#if defined(PIT_KERNEL_OP_TRANSPOSE)
/* Y[b] = X[b]^T through a 32x32 shared tile (both sides coalesced).
 * grid: x = column tiles of X, y = row tiles, z = batch; 32x8 threads. */
PIT_KERNEL void __launch_bounds__(256) pit_op_transpose(const pit_ew_args a)
{
    __shared__ T tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const T *X = (const T *)a.x + blockIdx.z * a.sx;
    T *Y = (T *)a.y + blockIdx.z * a.sy;
    for (int i = ty; i < 32; i += 8)
        if (r0 + i < a.rows && c0 + tx < a.cols) tile[i][tx] = X[(pit_i64)(r0 + i) * a.ldx + c0 + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += 8)
        if (c0 + i < a.cols && r0 + tx < a.rows) Y[(pit_i64)(c0 + i) * a.ldy + r0 + tx] = tile[tx][i];
}
#endif

#if defined(PIT_KERNEL_OP_MOE_ACT)
#include "common/act.cuh"

/* One CTA a row r, its columns looped: A[r, f] = act(U[r]) (forward, da
 * NULL); backward: dU[r] = act'(U[r]) * gate[r] * dA[r, f], A[r, f] =
 * act(U[r]), dgates[r] = sum_f A * dA. In place (A over U's first columns
 * or over dA, dU over U): each thread reads an element's inputs before it
 * writes there, and no other thread touches them; plain loads, not __ldg.
 * grid: x = rows; 256 threads. */
PIT_KERNEL void __launch_bounds__(256) pit_op_moe_act(const pit_act_args p)
{
    __shared__ float part[256];
    const int r = blockIdx.x, F = p.F;
    const bool gated = p.act == 0 || p.act == 1;
    const T *U = (const T *)p.u + (pit_i64)r * p.ldu;
    const T *dA = p.da ? (const T *)p.da + (pit_i64)r * p.ldda : nullptr;
    T *A = p.a ? (T *)p.a + (pit_i64)r * p.lda : nullptr;
    T *dU = p.du ? (T *)p.du + (pit_i64)r * p.lddu : nullptr;
    const float gate = dA && p.gates ? p.gates[(pit_i64)(r / p.k) * p.ldg + r % p.k] : 1.f;
    float dot = 0.f;
    for (int f = threadIdx.x; f < F; f += 256) {
        const float x = pit_to_float(U[f]), up = gated ? pit_to_float(U[f + F]) : 1.f;
        float grad;
        const float v = act_scalar(p.act, x, &grad), a = v * up;
        if (dA) {
            const float da = pit_to_float(dA[f]), dag = gate * da;
            dot = fmaf(a, da, dot);
            dU[f] = pit_from_float<T>(grad * up * dag);
            if (gated) dU[f + F] = pit_from_float<T>(v * dag);
        }
        if (A) A[f] = pit_from_float<T>(a);
    }
    if (!p.dgates) return; /* the same for the whole CTA */
    part[threadIdx.x] = dot;
    __syncthreads();
    for (int w = 128; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) p.dgates[(pit_i64)(r / p.k) * p.lddg + r % p.k] = part[0];
}
#endif

#if defined(PIT_KERNEL_OP_MOE_GATHER)
/* Expert e's (blockIdx.y) listed slots i = blockIdx.x * 8 + warp, in list
 * order, into row off(e) + i of Y: Y[row] = gate(slot) * X[slot / div],
 * off(e) the counts of the experts before e. A warp a row, 16 bytes a
 * lane a step (cols a multiple of 16 bytes' elements, rows 16-byte
 * aligned; the host checks). grid: x = ceil(most slots of one expert / 8), y = E; 256
 * threads. */
PIT_KERNEL void __launch_bounds__(256) pit_op_moe_gather(const pit_gather_args a)
{
    __shared__ int off;
    const int e = blockIdx.y, i = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) off = 0;
    __syncthreads();
    int part = 0;
    for (int j = threadIdx.x; j < e; j += 256) part += __ldg(a.counts + j);
    if (part) atomicAdd(&off, part);
    __syncthreads();
    if (i >= __ldg(a.counts + e)) return;
    const int slot = __ldg(a.entries + (pit_i64)e * a.capacity + i);
    const float g = a.gates ? __ldg(a.gates + (pit_i64)(slot / a.kdiv) * a.ldg + slot % a.kdiv) : 1.f;
    const uint4 *src = (const uint4 *)((const T *)a.x + (pit_i64)(slot / a.div) * a.ldx);
    uint4 *dst = (uint4 *)((T *)a.y + (pit_i64)(off + i) * a.ldy);
    constexpr int V = 16 / sizeof(T); /* elements a 16-byte step */
    for (int c = lane; c < a.cols / V; c += 32) {
        uint4 v = src[c];
        if (a.gates) {
            T *t = (T *)&v;
#pragma unroll
            for (int j = 0; j < V; ++j) t[j] = pit_from_float<T>(g * pit_to_float(t[j]));
        }
        dst[c] = v;
    }
}
#endif

#if defined(PIT_KERNEL_OP_SUM_SLOTS)
/* Y[t, c] = sum over j < k (a.E) of X[t k + j, c], in f32: a token's k
 * slot rows (the MoE second product's, gated, unlisted ones zero). A thread
 * 16 bytes of columns (cols a multiple of them, rows 16-byte aligned).
 * grid: x = ceil(rows * cols / (16 bytes' elements) / 256); 256 threads. */
PIT_KERNEL void __launch_bounds__(256) pit_op_sum_slots(const pit_ew_args a)
{
    constexpr int V = 16 / sizeof(T); /* elements a 16-byte step */
    const pit_i64 u = (pit_i64)blockIdx.x * 256 + threadIdx.x, per = a.cols / V;
    if (u >= (pit_i64)a.rows * per) return;
    const pit_i64 t = u / per, c = (u % per) * V;
    float sum[V];
#pragma unroll
    for (int i = 0; i < V; ++i) sum[i] = 0.f;
    for (int j = 0; j < a.E; ++j) {
        const uint4 v = *(const uint4 *)((const T *)a.x + (t * a.E + j) * a.ldx + c);
        const T *e = (const T *)&v;
#pragma unroll
        for (int i = 0; i < V; ++i) sum[i] += pit_to_float(e[i]);
    }
    uint4 o;
    T *r = (T *)&o;
#pragma unroll
    for (int i = 0; i < V; ++i) r[i] = pit_from_float<T>(sum[i]);
    *(uint4 *)((T *)a.y + t * a.ldy + c) = o;
}
#endif
