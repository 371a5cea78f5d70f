/*
 * attention_cols.c - attention over key-column micro-tiles of an element
 * mask on CUDA (core/backend.h attention_columns; args.h pit_cols_ix):
 * pit_op_attn_cols_scan reads the mask once into bits and finds each
 * query block's heavy rows, pit_op_attn_cols_tiles lists every tile's
 * keys and chunk bits, then pit_op_attention (ATT_COLS) attends over the
 * gathered K/V rows, a heavy tile's chunks split over several CTAs. Three
 * launches, nothing read back without a report.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define ROWS PIT_ATTN_COLS_ROWS
/* Tiles of heavy rows a mask set keeps (more heavy rows stay in their
 * blocks), and the chunks a CTA of a heavy tile takes before they split
 * over more CTAs: a heavy tile's rows see up to every key, a light tile's
 * a few chunks. */
#define HEAVY_TILES 2
#define SEGMENT_CHUNKS 8
#define MAX_SEGMENTS 64

int pit_cuda_attention_cols_takes(const pit_cuda_attention_call *call, const pit_cuda_view *q,
                                  const pit_cuda_view *k)
{
    return call->mask && !call->idx && call->block == ROWS && k->rows <= 32 * (int64_t)PIT_ATTN_COLS_MAX_WORDS &&
           pit_cuda_cdiv(q->rows, ROWS) <= 2 * (int64_t)PIT_ATTN_COLS_MAX_WORDS;
}

/* The tiles' shape and the scratch they take, one allocation cut into
 * parts 256-byte aligned (offsets from its base). */
typedef struct cols_plan {
    pit_cols_ix cx;
    int64_t msets, qsets;
    size_t bits, heavy, rows, cols, ncols, tbits, part_o, part_ml, bytes;
} cols_plan;

static size_t take(size_t *at, size_t bytes)
{
    size_t off = *at;
    *at += (bytes + 255) / 256 * 256;
    return off;
}

static void plan_of(const pit_cuda_view *q, const pit_cuda_view *k, const pit_cuda_view *v, int64_t msets,
                    cols_plan *p)
{
    memset(p, 0, sizeof *p);
    const int64_t nqb = pit_cuda_cdiv(q->rows, ROWS), cap = pit_cuda_cdiv(k->rows, 64) * 64;
    /* at most 16 heavy rows a block of 64 (above the 3/4 quantile) */
    const int64_t heavy = pit_cuda_cdiv(nqb, 4) < HEAVY_TILES ? pit_cuda_cdiv(nqb, 4) : HEAVY_TILES;
    int64_t segs = pit_cuda_cdiv(cap / 64, SEGMENT_CHUNKS);
    segs = segs > MAX_SEGMENTS ? MAX_SEGMENTS : segs;
    p->msets = msets;
    p->qsets = q->batch;
    p->cx.words = (int32_t)pit_cuda_cdiv(k->rows, 32);
    p->cx.nqb = (int32_t)nqb;
    p->cx.heavy_tiles = (int32_t)heavy;
    p->cx.tiles = (int32_t)(nqb + heavy);
    p->cx.cap = (int32_t)cap;
    p->cx.segs = (int32_t)segs;
    const size_t tiles = (size_t)msets * (size_t)(nqb + heavy), slots = (size_t)q->batch * (size_t)heavy;
    size_t at = 0;
    p->bits = take(&at, (size_t)msets * (size_t)q->rows * (size_t)p->cx.words * 4);
    p->heavy = take(&at, (size_t)msets * (size_t)nqb * 8);
    p->rows = take(&at, tiles * ROWS * 4);
    p->cols = take(&at, tiles * (size_t)cap * 4);
    p->ncols = take(&at, tiles * 4);
    p->tbits = take(&at, tiles * (size_t)(cap / 64) * ROWS * 8);
    p->part_o = take(&at, slots * (size_t)segs * ROWS * (size_t)v->cols * 4);
    p->part_ml = take(&at, slots * (size_t)segs * ROWS * 2 * 4);
    p->bytes = at;
}

/* The (query tile, key) pairs listed: every tile's count, read back. */
static pit_status read_listed(CUstream s, const cols_plan *p, CUdeviceptr ncols, int64_t *listed)
{
    const size_t n = (size_t)p->msets * (size_t)p->cx.tiles;
    int32_t *counts = calloc(n, sizeof *counts);
    if (!counts)
        return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME " attention: host memory for %lld counts",
                                    (long long)n);
    CUresult r = pit_cu.MemcpyDtoHAsync(counts, ncols, n * sizeof *counts, s);
    if (r == CUDA_SUCCESS) r = pit_cu.StreamSynchronize(s);
    pit_status st = r == CUDA_SUCCESS ? PIT_SUCCESS : pit_cu_fail(r, PIT_CALL(MemcpyDtoHAsync), __FILE__, __LINE__);
    int64_t sum = 0;
    for (size_t i = 0; st == PIT_SUCCESS && i < n; ++i) sum += counts[i];
    free(counts);
    /* a mask shared by the sets lists its tiles once for all of them */
    *listed = sum * (p->msets == 1 ? p->qsets : 1);
    return st;
}

static pit_status launch_cols(pit_cuda_ctx *c, CUstream s, const pit_cuda_view *q, const pit_cuda_view *v,
                              const pit_cuda_view *m, pit_attention_args *a, const cols_plan *p, CUdeviceptr base,
                              CUdeviceptr done, int64_t *listed)
{
    pit_attn_cols_args ca;
    memset(&ca, 0, sizeof ca);
    const uint64_t es = pit_cuda_el_bytes(m->dt);
    ca.mask = m->ptr;
    ca.mld = m->ld;
    ca.ms = m->bs;
    ca.wl = a->wl;
    ca.wr = a->wr;
    ca.Lq = a->L;
    ca.Lk = a->Lk;
    ca.mask_vec = m->ptr % 16 == 0 && (m->ld * es) % 16 == 0 && (m->bs * es) % 16 == 0;
    ca.cx = p->cx;
    ca.cx.bits = base + p->bits;
    ca.cx.heavy = base + p->heavy;
    ca.cx.rows = base + p->rows;
    ca.cx.cols = base + p->cols;
    ca.cx.ncols = base + p->ncols;
    ca.cx.tbits = base + p->tbits;
    a->cx = ca.cx;
    a->part_o = base + p->part_o;
    a->part_ml = base + p->part_ml;
    a->done = done;
    const int scan[5] = {0, 0, 0, (int)m->dt};
    const int attend[5] = {ROWS, (int)q->cols, (int)v->cols, PIT_U8, 3};
    const int64_t items = p->cx.nqb + (int64_t)p->cx.heavy_tiles * p->cx.segs;
    pit_status st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTN_COLS_SCAN, PIT_F32, scan, p->cx.nqb, p->msets, 1,
                                         PIT_ATTN_COLS_SCAN_THREADS, &ca);
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTN_COLS_TILES, PIT_F32, NULL, p->cx.tiles, p->msets, 1,
                                  PIT_ATTN_COLS_THREADS, &ca);
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTENTION, q->dt, attend, items, q->batch, 1, ROWS / 16 * 32, a);
    if (st == PIT_SUCCESS && listed) st = read_listed(s, p, base + p->ncols, listed);
    return st;
}

pit_status pit_cuda_attention_cols(pit_cuda_ctx *c, CUstream s, const pit_cuda_attention_call *call,
                                   const pit_cuda_view *q, const pit_cuda_view *k, const pit_cuda_view *v,
                                   const pit_cuda_view *m, pit_attention_args *a, int64_t *listed)
{
    (void)call;
    cols_plan p;
    plan_of(q, k, v, a->ms ? q->batch : 1, &p);
    CUdeviceptr base = 0, done = 0;
    pit_status st = pit_cuda_scratch_alloc(c, s, p.bytes, "attention key-column tiles", &base);
    if (st != PIT_SUCCESS) return st;
    /* every heavy tile's count of finished segments starts at 0 (the last
     * segment sets it back) */
    st = pit_cuda_scratch_fill(c, s, (size_t)p.qsets * (size_t)p.cx.heavy_tiles, 0, "attention heavy tiles", &done);
    if (st == PIT_SUCCESS) st = launch_cols(c, s, q, v, m, a, &p, base, done, listed);
    st = pit_cuda_free_scratch(c, s, done, st);
    return pit_cuda_free_scratch(c, s, base, st);
}
