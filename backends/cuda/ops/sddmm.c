/*
 * sddmm.c - SDDMM on CUDA: C = (A . B^T) masked, on the indexed blocks only
 * (kernels/pit_sddmm.cu); C is zeroed first.
 */
#include <string.h>

#include "ops.h"

static pit_status sddmm_run(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const pit_cuda_view *a,
                            const pit_cuda_view *b, const pit_cuda_view *m, const pit_cuda_view *o)
{
    pit_sddmm_args p;
    memset(&p, 0, sizeof p);
    pit_status st;
    if ((st = pit_cuda_index_arg(idx, o->batch, o->rows, o->cols, "sddmm", &p.ix)) != PIT_SUCCESS ||
        (st = pit_cuda_batch_stride(a, o->batch, "sddmm", "A", &p.sa)) != PIT_SUCCESS ||
        (st = pit_cuda_batch_stride(b, o->batch, "sddmm", "B", &p.sb)) != PIT_SUCCESS ||
        (st = pit_cuda_batch_stride(m, o->batch, "sddmm", "mask", &p.ms)) != PIT_SUCCESS)
        return st;
    p.a = a->ptr, p.b = b->ptr, p.mask = m->ptr, p.c = o->ptr;
    p.lda = a->ld, p.ldb = b->ld, p.ldc = o->ld, p.mld = m->ld;
    p.sc = o->bs, p.ms = m->bs;
    p.M = (int32_t)o->rows, p.N = (int32_t)o->cols, p.K = (int32_t)a->cols;
    p.br = idx->tile.rows, p.bc = idx->tile.cols;
    p.parts_c = (int32_t)pit_cuda_cdiv(p.bc, 32);
    if ((st = pit_cuda_zero_view(c, s, o)) != PIT_SUCCESS) return st;
    int param[5] = {0, 0, 0, (int)m->dt}; /* MASK_DT: the pit_dtype code */
    int64_t parts = pit_cuda_cdiv(p.br, 32) * p.parts_c;
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_SDDMM, o->dt, param, (int64_t)idx->capacity * parts,
                                pit_cuda_cdiv(o->rows, p.br), o->batch, 256, &p);
}

static pit_status cuda_sddmm(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A, const pit_tdesc *B,
                             const pit_tdesc *mask, const pit_tdesc *C)
{
    pit_cuda_view a, b, m, o;
    pit_status st;
    if ((st = pit_cuda_view_of(A, "sddmm", "A", 0, &a)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(B, "sddmm", "B", 0, &b)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(mask, "sddmm", "mask", 0, &m)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(C, "sddmm", "C", 0, &o)) != PIT_SUCCESS)
        return st;
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, sddmm_run(c, pit_cuda_stream_of(stream), idx, &a, &b, &m, &o));
}

void pit_cuda_register_sddmm(pit_backend *be)
{
    be->sddmm = cuda_sddmm;
}
