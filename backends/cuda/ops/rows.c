/*
 * rows.c - row-sparse matmul on CUDA: the rows of C an index lists = those
 * rows of A . B, on the gathered GEMM (gmm.c); the others zeroed unless
 * kept.
 */
#include <string.h>

#include "ops.h"

static pit_status rows_run(pit_cuda_ctx *c, CUstream s, pit_tile *tile, const pit_index *idx,
                           int32_t max_entries, const pit_cuda_view *a, const pit_cuda_view *b,
                           const pit_cuda_view *o, int keep)
{
    pit_cuda_gmm_job j;
    memset(&j, 0, sizeof j);
    j.dt = o->dt;
    j.tile = *tile;
    j.groups = o->batch;
    /* -1: no counts read back; a CUDA-core tile sizes its grid for every row */
    j.max_rows = max_entries > 0 ? max_entries : max_entries < 0 ? idx->capacity : 0;
    j.listed_max = (int64_t)idx->capacity * o->batch;
    j.mark_stride = o->rows;
    pit_status st = pit_cuda_batch_stride(b, o->batch, "matmul_rows", "B", &j.a.sb);
    if (st != PIT_SUCCESS) return st;
    j.a.a = a->ptr, j.a.lda = a->ld, j.a.sa = a->bs;
    j.a.b = b->ptr, j.a.ldb = b->ld;
    j.a.c = o->ptr, j.a.ldc = o->ld, j.a.sc = o->bs;
    j.a.counts = (uint64_t)(uintptr_t)idx->counts;
    j.a.entries = (uint64_t)(uintptr_t)idx->entries;
    j.a.capacity = idx->capacity;
    j.a.kdiv = j.a.adiv = j.a.cdiv = 1;
    j.a.N = (int32_t)o->cols, j.a.K = (int32_t)a->cols, j.a.M = (int32_t)o->rows;
    int tc = tile->tensor_core && o->dt != PIT_F32 && c->arch >= 80 && pit_cuda_aligned16(a) &&
             pit_cuda_aligned16(b) && pit_cuda_aligned16(o) && a->cols % 8 == 0 && o->cols % 8 == 0;
    st = pit_cuda_gmm_scatter(c, s, &j, o, tc, keep);
    *tile = j.tile;
    return st;
}

static pit_status cuda_matmul_rows(void *bctx, void *stream, pit_tile *tile, const pit_index *idx,
                                   int32_t max_entries, const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C,
                                   int keep_skipped)
{
    pit_cuda_view a, b, o;
    pit_tile t;
    pit_status st;
    pit_cuda_ctx *c = bctx;
    const char *op = "matmul_rows";
    if ((st = pit_cuda_view_of(A, op, "A", 0, &a)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(B, op, "B", 0, &b)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(C, op, "C", 0, &o)) != PIT_SUCCESS ||
        (st = pit_cuda_gmm_tile_of(c, op, o.dt, tile, &t)) != PIT_SUCCESS)
        return st;
    if (idx->tile.rows != 1 || idx->groups < o.batch || idx->capacity < o.rows)
        return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s", op,
                              "the index must list rows (1 x K, a group per batch)");
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_tile *ran = tile ? tile : &t; /* the caller learns which tile ran */
    *ran = t;
    PIT_CUDA_WITH_CONTEXT(c, rows_run(c, pit_cuda_stream_of(stream), ran, idx, max_entries, &a, &b, &o, keep_skipped));
}

void pit_cuda_register_rows(pit_backend *be)
{
    be->matmul_rows = cuda_matmul_rows;
}
