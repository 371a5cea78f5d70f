/*
 * ocl_softmax.c - sparse softmax and its backward (kernels/pit_softmax.cl):
 * one work-group per row reduces over the listed blocks where the mask is on.
 */
#include "ocl_internal.h"

#define ROW_WG 128 /* one row per work-group, a power of two */

/* The index and its micro-tile (rows per group, columns per entry). */
static void arg_row_index(ocl_args *a, const pit_index *idx)
{
    ocl_arg_index(a, idx);
    ocl_arg_int(a, idx->tile.rows);
    ocl_arg_int(a, idx->tile.cols);
}

/* Kernel kname of pit_softmax.cl over `tensors` (in the kernel's order; the
 * first gives the rows, the mask is among them), one work-group per row of
 * every batch. */
static pit_status softmax_rows(ocl_ctx *c, ocl_stream *s, const char *kname, const char *what,
                               const pit_tdesc *const *tensors, int n, const pit_tdesc *mask,
                               const pit_index *idx, float scale)
{
    const pit_tdesc *X = tensors[0];
    ocl_op_config k = {X->dtype, 0, 1, 1, 1, ocl_op_fit_wg(c, ROW_WG)};
    OCL_TRY(ocl_pattern_code(mask, what, &k.mask_code));
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_softmax", &k, kname, k.wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, kname);
    for (int i = 0; i < n; ++i)
        ocl_arg_mat(&a, tensors[i]);
    ocl_arg_int(&a, (cl_int)ocl_cols_of(X));
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    arg_row_index(&a, idx);
    size_t global[3] = {k.wg, (size_t)ocl_rows_of(X), (size_t)ocl_batch_of(X)};
    size_t local[3] = {k.wg, 1, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

pit_status ocl_softmax_sparse(void *bctx, void *stream, const pit_index *idx,
                              const pit_tdesc *X, const pit_tdesc *mask, const pit_tdesc *Y,
                              float scale)
{
    const pit_tdesc *tensors[] = {X, mask, Y};
    return softmax_rows(bctx, stream, "pit_softmax", "softmax_sparse: mask", tensors, 3, mask,
                        idx, scale);
}

pit_status ocl_softmax_sparse_backward(void *bctx, void *stream, const pit_index *idx,
                                       const pit_tdesc *Y, const pit_tdesc *dY,
                                       const pit_tdesc *mask, const pit_tdesc *dX,
                                       float scale)
{
    const pit_tdesc *tensors[] = {Y, dY, mask, dX};
    return softmax_rows(bctx, stream, "pit_softmax_backward", "softmax_sparse_backward: mask",
                        tensors, 4, mask, idx, scale);
}
