/*
 * ocl_softmax.c - sparse softmax and its backward (kernels/pit_softmax.cl):
 * one work-group per row reduces over the listed blocks where the mask is on.
 */
#include "ocl_internal.h"

#define ROW_WG 128 /* one row per work-group, a power of two */

static pit_status row_config(const ocl_ctx *c, const pit_tdesc *X, const pit_tdesc *mask,
                             const char *what, ocl_op_config *k)
{
    ocl_op_config r = {X->dtype, 0, 1, 1, 1, ROW_WG};
    OCL_TRY(ocl_pattern_word(mask, what, &r.mask_word));
    r.wg = ocl_op_fit_wg(c, r.wg);
    *k = r;
    return PIT_SUCCESS;
}

/* The index and its micro-tile (rows per group, columns per entry). */
static void arg_row_index(ocl_args *a, const pit_index *idx)
{
    ocl_arg_index(a, idx);
    ocl_arg_int(a, idx->tile.rows);
    ocl_arg_int(a, idx->tile.cols);
}

/* One work-group per row of every batch. */
static pit_status launch_rows(ocl_args *a, cl_command_queue q, const ocl_op_config *k,
                              const pit_tdesc *X)
{
    size_t global[3] = {k->wg, (size_t)ocl_rows_of(X), (size_t)ocl_batch_of(X)};
    size_t local[3] = {k->wg, 1, 1};
    return ocl_launch(a, q, 3, global, local);
}

pit_status ocl_softmax_sparse(void *bctx, void *stream, const pit_index *idx,
                              const pit_tdesc *X, const pit_tdesc *mask, const pit_tdesc *Y,
                              float scale)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ocl_op_config k;
    OCL_TRY(row_config(c, X, mask, "softmax_sparse: mask", &k));
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_softmax", &k, "pit_softmax", k.wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_softmax");
    ocl_arg_mat(&a, X);
    ocl_arg_mat(&a, mask);
    ocl_arg_mat(&a, Y);
    ocl_arg_int(&a, (cl_int)ocl_cols_of(X));
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    arg_row_index(&a, idx);
    return launch_rows(&a, s->queue, &k, X);
}

pit_status ocl_softmax_sparse_backward(void *bctx, void *stream, const pit_index *idx,
                                       const pit_tdesc *Y, const pit_tdesc *dY,
                                       const pit_tdesc *mask, const pit_tdesc *dX,
                                       float scale)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ocl_op_config k;
    OCL_TRY(row_config(c, Y, mask, "softmax_sparse_backward: mask", &k));
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_softmax", &k, "pit_softmax_backward", k.wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_softmax_backward");
    ocl_arg_mat(&a, Y);
    ocl_arg_mat(&a, dY);
    ocl_arg_mat(&a, mask);
    ocl_arg_mat(&a, dX);
    ocl_arg_int(&a, (cl_int)ocl_cols_of(Y));
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    arg_row_index(&a, idx);
    return launch_rows(&a, s->queue, &k, Y);
}
