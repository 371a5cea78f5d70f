/*
 * elementwise.c - element-wise and layout helpers on CUDA: ReLU and
 * transpose (kernels/pit_elementwise.cu; its zero kernel serves the other
 * operator files through common.c).
 */
#include <string.h>

#include "ops.h"

/* grid of pit_op_relu: 256 columns per CTA, groups of 8 rows looped,
 * about 32 CTAs an SM: a grid of one CTA a few rows costs more in CTA
 * launches than the work */
static pit_status launch_relu(pit_cuda_ctx *c, CUstream s, pit_dtype dt, pit_ew_args *a, int64_t batch)
{
    int64_t gx = pit_cuda_cdiv(a->cols, 256), gy = pit_cuda_cdiv(32 * (int64_t)c->sm_count, gx * (batch > 0 ? batch : 1));
    if (gy > pit_cuda_cdiv(a->rows, 8)) gy = pit_cuda_cdiv(a->rows, 8);
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_RELU, dt, NULL, gx, gy > 0 ? gy : 1, batch, 256, a);
}

static pit_status cuda_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    pit_cuda_view x, y;
    pit_status st;
    if ((st = pit_cuda_view_of(X, "relu", "X", 1, &x)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(Y, "relu", "Y", 1, &y)) != PIT_SUCCESS)
        return st;
    if (x.rows == 0 || x.cols == 0 || x.batch == 0) return PIT_SUCCESS;
    pit_ew_args a = {x.ptr, y.ptr, 0, x.ld, x.bs, y.ld, y.bs, 0, 0, (int32_t)x.rows, (int32_t)x.cols, 0, 0};
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, launch_relu(c, pit_cuda_stream_of(stream), x.dt, &a, x.batch));
}

static pit_status cuda_transpose(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    pit_cuda_view x, y;
    pit_status st;
    if ((st = pit_cuda_view_of(X, "transpose", "X", 0, &x)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(Y, "transpose", "Y", 0, &y)) != PIT_SUCCESS)
        return st;
    if (x.rows == 0 || x.cols == 0 || x.batch == 0) return PIT_SUCCESS;
    pit_ew_args a = {x.ptr, y.ptr, 0, x.ld, x.bs, y.ld, y.bs, 0, 0, (int32_t)x.rows, (int32_t)x.cols, 0, 0};
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, pit_cuda_launch_kind(c, pit_cuda_stream_of(stream), PIT_CUDA_OP_TRANSPOSE, x.dt, NULL,
                                                  pit_cuda_cdiv(x.cols, 32), pit_cuda_cdiv(x.rows, 32), x.batch, 256,
                                                  &a));
}

void pit_cuda_register_elementwise(pit_backend *be)
{
    be->relu = cuda_relu;
    be->transpose = cuda_transpose;
}
