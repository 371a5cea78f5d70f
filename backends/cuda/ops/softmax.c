/*
 * softmax.c - sparse softmax on CUDA over the indexed blocks and the mask,
 * and its backward (kernels/pit_softmax.cu).
 */
#include <string.h>

#include "ops.h"

static pit_status softmax_run(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, const pit_index *idx,
                              const pit_cuda_view *x, const pit_cuda_view *y, const pit_cuda_view *m,
                              const pit_cuda_view *o, float scale)
{
    pit_softmax_args p;
    memset(&p, 0, sizeof p);
    pit_status st = pit_cuda_index_arg(idx, o->batch, o->rows, o->cols, "softmax", &p.ix);
    if (st != PIT_SUCCESS) return st;
    if ((st = pit_cuda_batch_stride(m, o->batch, "softmax", "mask", &p.ms)) != PIT_SUCCESS) return st;
    if (idx->capacity > PIT_SOFTMAX_MAX_BLOCKS)
        return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s", "softmax",
                              "more than 65536 column blocks per row");
    p.x = x->ptr, p.y = y ? y->ptr : 0, p.mask = m->ptr, p.out = o->ptr;
    p.ldx = x->ld, p.ldy = y ? y->ld : 0, p.mld = m->ld, p.ldo = o->ld;
    p.sx = x->bs, p.sy = y ? y->bs : 0, p.so = o->bs;
    p.M = (int32_t)o->rows, p.N = (int32_t)o->cols;
    p.br = idx->tile.rows, p.bc = idx->tile.cols;
    p.scale = scale;
    int param[5] = {0, 0, 0, (int)m->dt}; /* MASK_DT: the pit_dtype code */
    unsigned warps = p.br < 8 ? (unsigned)p.br : 8; /* a warp per row of the row-block */
    return pit_cuda_launch_kind(c, s, kind, o->dt, param, pit_cuda_cdiv(o->rows, p.br), o->batch, 1, 32 * warps,
                                &p);
}

static pit_status softmax_views(const char *op, const pit_tdesc *X, const pit_tdesc *Y2, const pit_tdesc *mask,
                                const pit_tdesc *out, pit_cuda_view *x, pit_cuda_view *y, pit_cuda_view *m,
                                pit_cuda_view *o)
{
    pit_status st;
    if ((st = pit_cuda_view_of(X, op, "X", 0, x)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(mask, op, "mask", 0, m)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(out, op, "Y", 0, o)) != PIT_SUCCESS ||
        (Y2 && (st = pit_cuda_view_of(Y2, op, "dY", 0, y)) != PIT_SUCCESS))
        return st;
    return PIT_SUCCESS;
}

static pit_status cuda_softmax_sparse(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *X,
                                      const pit_tdesc *mask, const pit_tdesc *Y, float scale)
{
    pit_cuda_view x, m, o;
    pit_status st = softmax_views("softmax", X, NULL, mask, Y, &x, NULL, &m, &o);
    if (st != PIT_SUCCESS) return st;
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, softmax_run(c, pit_cuda_stream_of(stream), PIT_CUDA_OP_SOFTMAX, idx, &x, NULL, &m, &o,
                                         scale));
}

static pit_status cuda_softmax_backward(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Y,
                                        const pit_tdesc *dY, const pit_tdesc *mask, const pit_tdesc *dX, float scale)
{
    pit_cuda_view y, dy, m, o;
    pit_status st = softmax_views("softmax backward", Y, dY, mask, dX, &y, &dy, &m, &o);
    if (st != PIT_SUCCESS) return st;
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, softmax_run(c, pit_cuda_stream_of(stream), PIT_CUDA_OP_SOFTMAX_BWD, idx, &y, &dy, &m,
                                         &o, scale));
}

void pit_cuda_register_softmax(pit_backend *be)
{
    be->softmax_sparse = cuda_softmax_sparse;
    be->softmax_sparse_backward = cuda_softmax_backward;
}
