/*
 * common/shares.cuh - split K across CTAs without a second launch: each
 * share of K stores its f32 partial tile in its own slab, and the share
 * that arrives last at its tile of C sums every share's slab, in share
 * order, into C. Deterministic (the order never depends on arrival), no
 * atomics on the data, one counter a tile of C (zeroed before the launch,
 * ops/matmul.c launch_shares). Used by the decode kernels (pit_decode.cu,
 * pit_decode_mma.cu). Needs common/port.cuh, args.h and common/elem.cuh.
 */
#ifndef PIT_SHARES_CUH
#define PIT_SHARES_CUH

/* Slab of share `split` of batch `batch`: [rows][ldacc] f32 over the whole
 * of C's columns, sacc apart. */
PIT_DEV float *pit_share_slab(const pit_mm_args &p, int batch, int split, int splits)
{
    return p.acc + ((pit_i64)batch * splits + split) * p.sacc;
}

/* Called by every thread of the CTA after it stored its part of the slab.
 * The tile of C is rows [row0, row0 + rows) x columns [n0, n0 + cols) of
 * batch `batch`; `tile` numbers it among the grid's tiles of C. */
template <int NTHREADS>
PIT_DEV void pit_sum_shares_last(const pit_mm_args &p, int tile, int batch, int splits, int row0, int rows, int n0,
                                 int cols)
{
    __shared__ int last;
    pit_fence_device(); /* this thread's slab stores before the arrival */
    __syncthreads();
    if (threadIdx.x == 0) last = pit_atomic_add(p.arrivals + tile, 1) == splits - 1;
    __syncthreads();
    if (!last) return;
    pit_fence_device(); /* the other shares' slabs after their arrivals */
    const float *slab0 = pit_share_slab(p, batch, 0, splits);
    for (int i = threadIdx.x; i < rows * cols; i += NTHREADS) {
        const int m = i / cols, col = n0 + i % cols;
        if (col >= p.N) continue;
        const pit_i64 at = (pit_i64)(row0 + m) * p.ldacc + col;
        float v = 0.f;
        for (int j = 0; j < splits; ++j) v += pit_ldcg_f32(slab0 + (pit_i64)j * p.sacc + at);
        ((T *)p.c)[(pit_i64)batch * p.sc + (pit_i64)(row0 + m) * p.ldc + col] = pit_from_float<T>(v);
    }
}

#endif
