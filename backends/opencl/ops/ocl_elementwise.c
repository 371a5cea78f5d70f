/*
 * ocl_elementwise.c - the element-wise and layout entries (relu, transpose)
 * and the zero pass the operators start with (kernels/pit_elementwise.cl).
 */
#include "ocl_internal.h"

#define TRANSPOSE_TILE 16 /* TT of pit_elementwise.cl */

/* A rank <= 4 tensor as [d0, d1, rows, cols] with strides (cols contiguous). */
typedef struct view4 {
    cl_mem mem;
    cl_long off, s0, s1, s2;
    int64_t d0, d1, rows, cols;
} view4;

static view4 view4_of(const pit_tdesc *t)
{
    int64_t shape[4] = {1, 1, 1, 1}, strides[4] = {0, 0, 0, 1};
    for (int i = 0; i < t->rank; i++) {
        shape[4 - t->rank + i] = t->shape[i];
        strides[4 - t->rank + i] = t->strides[i];
    }
    view4 v = {(cl_mem)t->mem, (cl_long)(t->offset / ocl_dtype_bytes(t->dtype)), strides[0],
               strides[1], strides[2], shape[0], shape[1], shape[2], shape[3]};
    return v;
}

static void arg_view4(ocl_args *a, const view4 *v)
{
    ocl_arg_mem(a, v->mem);
    ocl_arg_long(a, v->off);
    ocl_arg_long(a, v->s0);
    ocl_arg_long(a, v->s1);
    ocl_arg_long(a, v->s2);
}

static void grid_of(const view4 *v, size_t global[3])
{
    global[0] = (size_t)v->cols;
    global[1] = (size_t)v->rows;
    global[2] = (size_t)(v->d0 * v->d1);
}

static size_t round_up(int64_t n, size_t m)
{
    return ((size_t)n + m - 1) / m * m;
}

pit_status ocl_zero_tensor(ocl_ctx *c, cl_command_queue q, const pit_tdesc *t)
{
    ocl_op_config k = ocl_op_elementwise(t->dtype);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_elementwise", &k, "pit_zero", 1, &kern));
    view4 v = view4_of(t);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_zero");
    ocl_arg_mem(&a, v.mem);
    ocl_arg_long(&a, v.off);
    ocl_arg_int(&a, (cl_int)v.d1);
    ocl_arg_long(&a, v.s0);
    ocl_arg_long(&a, v.s1);
    ocl_arg_long(&a, v.s2);
    ocl_arg_int(&a, (cl_int)v.rows);
    ocl_arg_int(&a, (cl_int)v.cols);
    size_t global[3];
    grid_of(&v, global);
    return ocl_launch(&a, q, 3, global, NULL);
}

pit_status ocl_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ocl_op_config k = ocl_op_elementwise(X->dtype);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_elementwise", &k, "pit_relu", 1, &kern));
    view4 x = view4_of(X), y = view4_of(Y);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_relu");
    arg_view4(&a, &x);
    arg_view4(&a, &y);
    ocl_arg_int(&a, (cl_int)x.d1);
    ocl_arg_int(&a, (cl_int)x.rows);
    ocl_arg_int(&a, (cl_int)x.cols);
    size_t global[3];
    grid_of(&x, global);
    return ocl_launch(&a, s->queue, 3, global, NULL);
}

pit_status ocl_transpose(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    /* i32 is moved as the same 32-bit words as f32. */
    ocl_op_config k = ocl_op_elementwise(X->dtype == PIT_I32 ? PIT_F32 : X->dtype);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_elementwise", &k, "pit_transpose",
                          TRANSPOSE_TILE * TRANSPOSE_TILE, &kern));
    view4 x = view4_of(X), y = view4_of(Y);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_transpose");
    arg_view4(&a, &x);
    arg_view4(&a, &y);
    ocl_arg_int(&a, (cl_int)x.d1);
    ocl_arg_int(&a, (cl_int)x.rows);
    ocl_arg_int(&a, (cl_int)x.cols);
    size_t global[3] = {round_up(x.cols, TRANSPOSE_TILE), round_up(x.rows, TRANSPOSE_TILE),
                        (size_t)(x.d0 * x.d1)};
    size_t local[3] = {TRANSPOSE_TILE, TRANSPOSE_TILE, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}
