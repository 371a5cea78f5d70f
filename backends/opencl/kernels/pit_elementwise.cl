/*
 * pit_elementwise.cl - the element-wise and layout kernels: zero (the
 * operators' "C is zero off the listed blocks"), relu and transpose.
 * Arithmetic is f32 whatever DT (pit_common.cl) is; the tile defines the
 * program is built with are unused.
 *
 * A tensor of rank <= 4 is seen as [d0, d1, rows, cols] with strides s0, s1,
 * s2 (cols contiguous); the grid is (cols, rows, d0 * d1).
 */

inline long at4(long off, int d1, long s0, long s1, long s2)
{
    const int z = (int)get_global_id(2);
    return off + (long)(z / d1) * s0 + (long)(z % d1) * s1 + (long)get_global_id(1) * s2 +
           (long)get_global_id(0);
}

__kernel void pit_zero(__global st_t *Y, long off, int d1, long s0, long s1, long s2,
                       int rows, int cols)
{
    if ((int)get_global_id(0) < cols && (int)get_global_id(1) < rows)
        STORE(Y, at4(off, d1, s0, s1, s2), 0.0f);
}

/* NaN propagates (x < 0 is false for NaN), as in frameworks. */
__kernel void pit_relu(__global const st_t *X, long xoff, long xs0, long xs1, long xs2,
                       __global st_t *Y, long yoff, long ys0, long ys1, long ys2,
                       int d1, int rows, int cols)
{
    if ((int)get_global_id(0) >= cols || (int)get_global_id(1) >= rows)
        return;
    const float x = LOAD(X, at4(xoff, d1, xs0, xs1, xs2));
    STORE(Y, at4(yoff, d1, ys0, ys1, ys2), x < 0.0f ? 0.0f : x);
}

#define TT 16 /* transpose tile side */

/* Y[z, c, r] = X[z, r, c] through a local tile, so reads and writes are both
 * along rows. Grid (ceil(cols/TT)*TT, ceil(rows/TT)*TT, d0*d1), local TT x TT. */
__kernel __attribute__((reqd_work_group_size(TT, TT, 1)))
void pit_transpose(__global const st_t *X, long xoff, long xs0, long xs1, long xs2,
                   __global st_t *Y, long yoff, long ys0, long ys1, long ys2,
                   int d1, int rows, int cols)
{
    __local float tile[TT][TT + 1];
    const int z = (int)get_global_id(2);
    const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
    const int c0 = (int)get_group_id(0) * TT, r0 = (int)get_group_id(1) * TT;
    const long xb = xoff + (long)(z / d1) * xs0 + (long)(z % d1) * xs1;
    const long yb = yoff + (long)(z / d1) * ys0 + (long)(z % d1) * ys1;
    if (r0 + ty < rows && c0 + tx < cols)
        tile[ty][tx] = LOAD(X, xb + (long)(r0 + ty) * xs2 + (c0 + tx));
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Y row c0 + ty, column r0 + tx. */
    if (c0 + ty < cols && r0 + tx < rows)
        STORE(Y, yb + (long)(c0 + ty) * ys2 + (r0 + tx), tile[tx][ty]);
}
