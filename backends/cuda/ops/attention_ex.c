/*
 * attention_ex.c - attention with every option of pit_attention and its
 * backward (core/backend.h, pit_attention_desc), on CUDA and HIP: a call
 * the fused tensor-core kernel of attention.c takes (16-bit, head dims and
 * square blocks of 64 or 128, 16-byte rows, batch and heads that merge
 * into one dimension; any window, causal bound, grouped-query heads, Lq !=
 * Lk, lse, element mask with its index, block mask's index or none) goes
 * there; every other call runs kernels/pit_attention_ex.cu, any dtype,
 * head dims and strides. The backward always runs the generic kernels.
 */
#include <string.h>

#include "ops.h"

#define OP "attention"

static uint64_t device_ptr(const pit_tdesc *t)
{
    return (uint64_t)(uintptr_t)t->mem + t->offset;
}

/* element 0 and the batch, head and row strides; zeros for an absent one */
static pit_attn_view view_of(const pit_tdesc *t)
{
    pit_attn_view v;
    memset(&v, 0, sizeof v);
    if (!t) return v;
    v.ptr = device_ptr(t);
    v.sb = t->strides[0];
    v.sh = t->strides[1];
    v.ld = t->strides[2];
    return v;
}

/* Rank 4, columns contiguous where there are several (the kernels read
 * rows); core promises both, so this only guards the kernels. */
static pit_status check_view(const pit_tdesc *t, const char *name)
{
    if (!t) return PIT_SUCCESS;
    if (t->rank != 4 || (t->shape[3] > 1 && t->strides[3] != 1))
        return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s must be rank 4 with unit-stride rows",
                              OP, name);
    for (int i = 0; i < 4; ++i)
        if (t->shape[i] > INT32_MAX)
            return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s has a dimension above 2^31 - 1", OP,
                                  name);
    return PIT_SUCCESS;
}

static pit_status check_desc(const pit_attention_desc *d)
{
    const int64_t lq = d->Q.shape[2], hq = d->Q.shape[1], hkv = d->K.shape[1];
    const int br = d->tile.rows, bc = d->tile.cols;
    pit_status st;
    const pit_tdesc *all[5] = {&d->Q, &d->K, &d->V, &d->O, d->mask};
    const char *names[5] = {"Q", "K", "V", "O", "mask"};
    for (int i = 0; i < 5; ++i)
        if ((st = check_view(all[i], names[i])) != PIT_SUCCESS) return st;
    if (br < 1 || bc < 1 || hkv < 1 || hq % hkv != 0 || (d->idx && (int64_t)d->idx->groups_per_batch * br < lq))
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME " attention: blocks %dx%d, %lld query heads over %lld, an index "
                                                    "of %d groups a set for %lld query rows",
                                    br, bc, (long long)hq, (long long)hkv, d->idx ? d->idx->groups_per_batch : -1,
                                    (long long)lq);
    if (d->lse && d->lse->dtype != PIT_F32)
        return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s must be f32", OP, "lse");
    return PIT_SUCCESS;
}

/* No query row, or no output column and no lse: nothing to write. */
static int nothing_to_do(const pit_attention_desc *d)
{
    return d->Q.shape[0] * d->Q.shape[1] * d->Q.shape[2] == 0 || (d->V.shape[3] == 0 && !d->lse);
}

/* The arguments every kernel of the family shares. */
static void fill_args(const pit_attention_desc *d, pit_attn_ex_args *a)
{
    memset(a, 0, sizeof *a);
    a->q = view_of(&d->Q);
    a->k = view_of(&d->K);
    a->v = view_of(&d->V);
    a->o = view_of(&d->O);
    a->mask = view_of(d->mask);
    if (d->lse) {
        a->lse = device_ptr(d->lse);
        a->lse_sb = d->lse->strides[0];
        a->lse_sh = d->lse->strides[1];
    }
    if (d->idx) {
        a->counts = (uint64_t)(uintptr_t)d->idx->counts;
        a->entries = (uint64_t)(uintptr_t)d->idx->entries;
        a->cap = d->idx->capacity;
        a->idx_sb = d->idx_batch_stride;
        a->idx_sh = d->idx_head_stride;
    }
    a->wl = d->window_left;
    a->wr = d->window_right;
    a->Lq = (int32_t)d->Q.shape[2];
    a->Lk = (int32_t)d->K.shape[2];
    a->D = (int32_t)d->Q.shape[3];
    a->Dv = (int32_t)d->V.shape[3];
    a->group = (int32_t)(d->Q.shape[1] / d->K.shape[1]);
    a->flags = (d->mask ? PIT_ATTN_EX_MASK : 0) | (d->idx ? PIT_ATTN_EX_INDEX : 0);
    a->scale = d->scale;
    a->scale_log2 = d->scale * 1.4426950408889634f;
}

/* The grid over `heads` (b, h) pairs of `n` rows (or keys) in blocks of
 * `block`, a CTA a `rows` piece of a block, all in x; param: the variant's. */
static pit_status launch_parts(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, const pit_attention_desc *d,
                               pit_attn_ex_args *a, int64_t heads, int64_t n, int block, int rows,
                               const int param[5])
{
    a->blocks = (int32_t)pit_cuda_cdiv(n, block);
    a->parts = (int32_t)pit_cuda_cdiv(block, rows);
    const int64_t ctas = d->Q.shape[0] * heads * a->blocks * a->parts;
    if (ctas > INT32_MAX)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED,
                                    PIT_VENDOR_NAME " attention: %lld thread blocks (at most 2^31 - 1 in one launch)",
                                    (long long)ctas);
    a->heads = (int32_t)heads;
    return pit_cuda_launch_kind(c, s, kind, d->Q.dtype, param, ctas, 1, 1, PIT_ATTN_EX_THREADS, a);
}

/* The CUDA-core kernels: a CTA a PIT_ATTN_EX_ROWS piece of a block. */
static pit_status launch(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, const pit_attention_desc *d,
                         pit_attn_ex_args *a, int64_t heads, int64_t n, int block)
{
    /* without a mask the variant of the data's dtype (built in on HIP) */
    const int param[5] = {0, 0, 0, (int)(d->mask ? d->mask->dtype : d->Q.dtype), 0};
    return launch_parts(c, s, kind, d, a, heads, n, block, PIT_ATTN_EX_ROWS, param);
}

/* ---- the fused tensor-core kernel (attention.c) for the calls it takes ------ */
/* The rank-3 view [B * H, L, cols] of a rank-4 one; 0 when batch and heads
 * do not merge into one stride. */
static int merged(const pit_tdesc *t, pit_tdesc *v)
{
    const int64_t b = t->shape[0], h = t->shape[1];
    if (b > 1 && h > 1 && t->strides[0] != h * t->strides[1]) return 0;
    *v = *t;
    v->rank = 3;
    v->shape[0] = b * h;
    v->strides[0] = h > 1 ? t->strides[1] : t->strides[0];
    v->shape[1] = t->shape[2];
    v->strides[1] = t->strides[2];
    v->shape[2] = t->shape[3];
    v->strides[2] = 1;
    v->shape[3] = v->strides[3] = 0;
    return b * h <= 65535;
}

/* The mask [B * H, Lq, Lk] (batch stride 0: one mask), rank 3. */
static int merged_mask(const pit_attention_desc *d, pit_tdesc *m)
{
    const int64_t b = d->Q.shape[0], h = d->Q.shape[1];
    const int64_t sb = b > 1 ? d->mask->strides[0] : 0, sh = h > 1 ? d->mask->strides[1] : 0;
    int64_t ms;
    if (sb == 0 && sh == 0) ms = 0;
    else if (h == 1 || (sh != 0 && sb == h * sh)) ms = h > 1 ? sh : sb;
    else if (b == 1) ms = sh;
    else return 0;
    *m = *d->mask;
    m->rank = 3;
    m->shape[0] = ms == 0 ? 1 : b * h;
    m->strides[0] = ms;
    m->shape[1] = d->mask->shape[2];
    m->strides[1] = d->mask->strides[2];
    m->shape[2] = d->mask->shape[3];
    m->strides[2] = 1;
    m->shape[3] = m->strides[3] = 0;
    return 1;
}

/* Whether the index's groups follow the merged (b, h) order of the query
 * sets, or are one set shared by all (then one mask serves all too). */
static int merged_index(const pit_attention_desc *d, const pit_tdesc *m)
{
    const int64_t b = d->Q.shape[0], h = d->Q.shape[1], gpb = d->idx->groups_per_batch;
    const int64_t ib = b > 1 ? d->idx_batch_stride : 0, ih = h > 1 ? d->idx_head_stride : 0;
    const int shared = ib == 0 && ih == 0;
    if (!shared && !((h == 1 || ih == gpb) && (b == 1 || ib == h * gpb))) return 0;
    return !m || (m->strides[0] == 0) == shared; /* one mask with one index set, or neither */
}

/* The call's views with the query and key sets merged, its mask and
 * options (no index, no block yet); 0 where they do not merge. */
static int merged_call(const pit_attention_desc *d, pit_tdesc *mask3, pit_cuda_attention_call *call)
{
    memset(call, 0, sizeof *call);
    if (!merged(&d->Q, &call->q) || !merged(&d->K, &call->k) || !merged(&d->V, &call->v) || !merged(&d->O, &call->o))
        return 0;
    if (d->mask && !merged_mask(d, mask3)) return 0;
    call->mask = d->mask ? mask3 : NULL;
    call->lse = d->lse;
    call->heads_q = d->Q.shape[1];
    call->group = d->Q.shape[1] / d->K.shape[1];
    call->wl = d->window_left;
    call->wr = d->window_right;
    call->scale = d->scale;
    return 1;
}

/* The call of the fused tensor-core kernel (attention.c) for d, when it
 * takes it: its blocks square (the index's, or 128 without one), the
 * query and key sets merged, an element mask only with its index. */
static int fused_call(pit_cuda_ctx *c, const pit_attention_desc *d, pit_tdesc *mask3, pit_cuda_attention_call *call)
{
    /* One query block holding every query (decode: a block mask of Lq rows
     * and 64- or 128-key blocks): the kernel's square block of tile.cols
     * rows holds them all, so the index's key blocks are the kernel's. */
    const int one_block = d->idx && d->idx->groups_per_batch == 1 && d->Q.shape[2] <= d->tile.cols;
    if ((d->mask && !d->idx) || (d->idx && d->tile.rows != d->tile.cols && !one_block)) return 0;
    if (!merged_call(d, mask3, call)) return 0;
    if (d->idx && !merged_index(d, d->mask ? mask3 : NULL)) return 0;
    call->idx = d->idx;
    call->block = d->idx ? d->tile.cols : 128;
    return pit_cuda_attention_takes(c, call);
}

/* ---- key-column micro-tiles ------------------------------------------------------ *
 * CUDA only, as attention_detect: the HIP plug-in, which compiles this file
 * through its shim, leaves the entry NULL (core indexes the mask in blocks
 * there). */
#ifndef PIT_HIP_SHIM_H
/* The call of the key-column micro-tiles (attention_cols.c) for d, when
 * they take it: an element mask without an index, R x 1 micro-tiles. */
static int columns_call(pit_cuda_ctx *c, const pit_attention_desc *d, pit_tdesc *mask3, pit_cuda_attention_call *call)
{
    if (!d->mask || d->idx || d->tile.cols != 1 || !merged_call(d, mask3, call)) return 0;
    call->block = d->tile.rows;
    call->columns = 1;
    return pit_cuda_attention_takes(c, call);
}

static pit_status cuda_attention_columns(void *bctx, void *stream, const pit_attention_desc *d, int64_t *listed)
{
    pit_cuda_ctx *c = bctx;
    if (listed) *listed = 0;
    if (nothing_to_do(d)) return PIT_SUCCESS;
    pit_status st = check_desc(d);
    if (st != PIT_SUCCESS) return st;
    pit_tdesc mask3;
    pit_cuda_attention_call call;
    if (!columns_call(c, d, &mask3, &call))
        return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s", OP,
                              "key-column micro-tiles take an element mask, 16-bit Q, K, V on tensor cores, head "
                              "dims of 64 or 128, 64 query rows a tile, at most 131072 keys");
    PIT_CUDA_WITH_CONTEXT(c, pit_cuda_attention_fused_call(c, pit_cuda_stream_of(stream), &call, listed));
}
#endif

/* ---- the entries ----------------------------------------------------------------- */
static pit_status forward(pit_cuda_ctx *c, CUstream s, const pit_attention_desc *d)
{
    pit_attn_ex_args a;
    fill_args(d, &a);
    if (d->lse) a.flags |= PIT_ATTN_EX_LSE;
    /* without an index the keys are walked whole: the rows split as the CTAs like */
    a.br = d->idx ? d->tile.rows : PIT_ATTN_EX_ROWS;
    a.bc = d->tile.cols;
    return launch(c, s, PIT_CUDA_OP_ATTN_EX, d, &a, d->Q.shape[1], d->Q.shape[2], a.br);
}

static pit_status cuda_attention_ex(void *bctx, void *stream, const pit_attention_desc *d)
{
    pit_cuda_ctx *c = bctx;
    if (nothing_to_do(d)) return PIT_SUCCESS;
    pit_status st = check_desc(d);
    if (st != PIT_SUCCESS) return st;
    pit_tdesc mask3;
    pit_cuda_attention_call call;
    if (fused_call(c, d, &mask3, &call))
        PIT_CUDA_WITH_CONTEXT(c, pit_cuda_attention_fused_call(c, pit_cuda_stream_of(stream), &call, NULL));
    PIT_CUDA_WITH_CONTEXT(c, forward(c, pit_cuda_stream_of(stream), d));
}

/* A backward kernel over `heads` (b, h) pairs of `n` rows (or keys) in
 * blocks of `block`: on tensor cores (tc: pit_attention_bwd.cu, a CTA
 * PIT_ATTN_BWD_ROWS of a block) or on CUDA cores (pit_attention_ex.cu). */
static pit_status launch_backward(pit_cuda_ctx *c, CUstream s, int tc, pit_cuda_kernel_kind kind,
                                  const pit_attention_desc *d, pit_attn_ex_args *a, int64_t heads, int64_t n,
                                  int block)
{
    if (!tc) return launch(c, s, kind, d, a, heads, n, block);
    const int param[5] = {0, (int)d->Q.shape[3]};
    return launch_parts(c, s, kind, d, a, heads, n, block, PIT_ATTN_BWD_ROWS, param);
}

/* A CTA a piece of a query block of one (batch, query head); without an
 * index blocks of a CTA's rows. */
static pit_status backward_dq(pit_cuda_ctx *c, CUstream s, int tc, const pit_attention_desc *d, const pit_tdesc *dO,
                              const pit_tdesc *dQ)
{
    pit_attn_ex_args a;
    fill_args(d, &a);
    a.dout = view_of(dO);
    a.dq = view_of(dQ);
    a.br = d->idx ? d->tile.rows : tc ? PIT_ATTN_BWD_ROWS : PIT_ATTN_EX_ROWS;
    a.bc = d->tile.cols;
    return launch_backward(c, s, tc, tc ? PIT_CUDA_OP_ATTN_BWD_DQ : PIT_CUDA_OP_ATTN_EX_DQ, d, &a, d->Q.shape[1],
                           d->Q.shape[2], a.br);
}

/* A CTA a piece of a key block of one (batch, kv head); without an index
 * key blocks of a CTA's keys, and the queries walked a chunk at a time. */
static pit_status backward_dkv(pit_cuda_ctx *c, CUstream s, int tc, const pit_attention_desc *d,
                               const pit_tdesc *dO, const pit_tdesc *dK, const pit_tdesc *dV)
{
    pit_attn_ex_args a;
    fill_args(d, &a);
    a.dout = view_of(dO);
    a.dk = view_of(dK);
    a.dv = view_of(dV);
    a.flags |= (dK ? PIT_ATTN_EX_DK : 0) | (dV ? PIT_ATTN_EX_DV : 0);
    a.br = d->idx ? d->tile.rows : tc ? PIT_ATTN_BWD_ROWS : PIT_ATTN_EX_CHUNK;
    a.bc = d->idx ? d->tile.cols : tc ? PIT_ATTN_BWD_ROWS : PIT_ATTN_EX_ROWS;
    return launch_backward(c, s, tc, tc ? PIT_CUDA_OP_ATTN_BWD_DKV : PIT_CUDA_OP_ATTN_EX_DKV, d, &a, d->K.shape[1],
                           d->K.shape[2], a.bc);
}

static int has_elements(const pit_tdesc *t)
{
    for (int i = 0; t && i < t->rank; ++i)
        if (t->shape[i] == 0) return 0;
    return t != NULL;
}

/* Rows of 16-byte vectors (16-bit elements): element 0 aligned and the
 * batch, head and row strides multiples of 8 elements. */
static int rows_of_vectors(const pit_tdesc *t)
{
    return !t || (device_ptr(t) % 16 == 0 && t->strides[0] % 8 == 0 && t->strides[1] % 8 == 0 &&
                  t->strides[2] % 8 == 0);
}

/* Whether the tensor-core backward (pit_attention_bwd.cu) takes the call:
 * 16-bit, one head dim of 64 or 128, no element mask, blocks of the index
 * in whole 64-row pieces, every operand in rows of 16-byte vectors. */
static int tensor_core_backward(const pit_cuda_ctx *c, const pit_attention_desc *d, const pit_tdesc *const ops[8])
{
    const int64_t hd = d->Q.shape[3];
    if (c->arch < 80 || (d->Q.dtype != PIT_F16 && d->Q.dtype != PIT_BF16) || d->mask || d->V.shape[3] != hd ||
        (hd != 64 && hd != 128))
        return 0;
    if (d->idx && (d->tile.rows % PIT_ATTN_BWD_ROWS != 0 || d->tile.cols % PIT_ATTN_BWD_ROWS != 0)) return 0;
    for (int i = 0; i < 8; ++i)
        if (!rows_of_vectors(ops[i])) return 0;
    return 1;
}

static pit_status backward(pit_cuda_ctx *c, CUstream s, const pit_attention_desc *d, const pit_tdesc *dO,
                           const pit_tdesc *dQ, const pit_tdesc *dK, const pit_tdesc *dV)
{
    const pit_tdesc *const ops[8] = {&d->Q, &d->K, &d->V, &d->O, dO, dQ, dK, dV};
    const int tc = tensor_core_backward(c, d, ops);
    pit_status st = PIT_SUCCESS;
    if (dQ) st = backward_dq(c, s, tc, d, dO, dQ);
    if (st == PIT_SUCCESS && (dK || dV)) st = backward_dkv(c, s, tc, d, dO, dK, dV);
    return st;
}

static pit_status cuda_attention_backward(void *bctx, void *stream, const pit_attention_desc *d,
                                          const pit_tdesc *dO, const pit_tdesc *dQ, const pit_tdesc *dK,
                                          const pit_tdesc *dV)
{
    pit_cuda_ctx *c = bctx;
    if (!d->lse) return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s", OP, "the backward needs lse");
    dQ = has_elements(dQ) ? dQ : NULL;
    dK = has_elements(dK) ? dK : NULL;
    dV = has_elements(dV) ? dV : NULL;
    if (!dQ && !dK && !dV) return PIT_SUCCESS;
    pit_status st = check_desc(d);
    const pit_tdesc *grads[4] = {dO, dQ, dK, dV};
    const char *names[4] = {"dO", "dQ", "dK", "dV"};
    for (int i = 0; i < 4 && st == PIT_SUCCESS; ++i) st = check_view(grads[i], names[i]);
    if (st != PIT_SUCCESS) return st;
    PIT_CUDA_WITH_CONTEXT(c, backward(c, pit_cuda_stream_of(stream), d, dO, dQ, dK, dV));
}

void pit_cuda_register_attention_ex(pit_backend *be)
{
    be->attention_ex = cuda_attention_ex;
    be->attention_backward = cuda_attention_backward;
#ifndef PIT_HIP_SHIM_H
    be->attention_columns = cuda_attention_columns;
#endif
}
