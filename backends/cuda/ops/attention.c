/*
 * attention.c - fused sparse attention on CUDA (kernels/pit_attention.cu):
 * over a detected index, or with the detection inside the kernel. Shapes
 * the fused kernel cannot take are PIT_ERR_UNSUPPORTED: core then composes
 * SDDMM, softmax and the sparse matmul itself.
 */
#include <string.h>

#include "ops.h"

/* The fused kernel's shapes: 16-bit on tensor cores, square blocks of 64
 * or 128, head dims 64/128, 16-byte rows. */
static int fusable(const pit_cuda_ctx *c, int rows, int cols, const pit_cuda_view *q, const pit_cuda_view *k,
                   const pit_cuda_view *v, const pit_cuda_view *o)
{
    int block = rows;
    return q->dt != PIT_F32 && c->arch >= 80 && cols == block && (block == 64 || block == 128) &&
           (q->cols == 64 || q->cols == 128) && (v->cols == 64 || v->cols == 128) && pit_cuda_aligned16(q) &&
           pit_cuda_aligned16(k) && pit_cuda_aligned16(v) && pit_cuda_aligned16(o);
}

static int attention_fusable(const pit_cuda_ctx *c, const pit_index *idx, const pit_cuda_view *q,
                             const pit_cuda_view *k, const pit_cuda_view *v, const pit_cuda_view *o)
{
    return fusable(c, idx->tile.rows, idx->tile.cols, q, k, v, o);
}

static pit_status not_fusable(void)
{
    return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s", "attention",
                          "the fused kernel takes 16-bit Q, K, V on tensor cores, blocks and head dims of 64 or 128, "
                          "16-byte aligned rows");
}

/* The fused kernel's arguments that every launch shares (not the order
 * plan, nor the detection inside the kernel): pit_sparse_attention's call
 * (an element mask m and its index; Lk = L, one group, no window, no lse),
 * which pit_attention's options then change. idx NULL: none. */
static pit_status attention_args(const pit_index *idx, const pit_cuda_view *q, const pit_cuda_view *k,
                                 const pit_cuda_view *v, const pit_cuda_view *m, const pit_cuda_view *o, float scale,
                                 pit_attention_args *a)
{
    memset(a, 0, sizeof *a);
    pit_status st = idx ? pit_cuda_index_arg(idx, q->batch, q->rows, k->rows, "attention", &a->ix) : PIT_SUCCESS;
    if (st != PIT_SUCCESS) return st;
    a->Lk = (int32_t)k->rows;
    a->heads_q = a->group = 1;
    a->flags = PIT_ATT_MASK | (idx ? 0 : PIT_ATT_NO_INDEX);
    a->wl = a->wr = -1;
    a->q = q->ptr, a->k = k->ptr, a->v = v->ptr, a->mask = m->ptr, a->o = o->ptr;
    a->ldq = q->ld, a->ldk = k->ld, a->ldv = v->ld, a->ldo = o->ld, a->mld = m->ld;
    a->sq = q->bs, a->sk = k->bs, a->sv = v->bs, a->so = o->bs, a->ms = m->bs;
    a->L = (int32_t)q->rows;
    uint64_t pair = 2 * pit_cuda_el_bytes(m->dt); /* two elements as one aligned load */
    a->mask_pair = m->ptr % pair == 0 && m->ld % 2 == 0 && m->bs % 2 == 0;
    a->scale_log2 = scale * 1.4426950408889634f;
    return PIT_SUCCESS;
}

/* A tensor map of view t ([sets, rows, cols], 16-bit) with boxes of 64
 * columns x box_rows under 128-byte swizzle, the layout the
 * warp-specialised kernel's wgmma's read; 0 where the driver makes none. */
static int tma_map(const pit_cuda_view *t, int box_rows, pit_u8 *map)
{
#ifdef PIT_HIP_SHIM_H /* no copy engine through the HIP shim */
    (void)t, (void)box_rows, (void)map;
    return 0;
#else
    if (!pit_cu.TensorMapEncodeTiled) return 0;
    const uint64_t es = 2;
    cuuint64_t dims[3] = {(cuuint64_t)t->cols, (cuuint64_t)t->rows, (cuuint64_t)t->batch};
    cuuint64_t strides[2] = {(cuuint64_t)t->ld * es, (cuuint64_t)(t->bs ? t->bs : t->ld * t->rows) * es};
    cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, step[3] = {1, 1, 1};
    CUtensorMapDataType dt = t->dt == PIT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return pit_cu.TensorMapEncodeTiled((CUtensorMap *)map, dt, 3, (void *)(uintptr_t)t->ptr, dims, strides, box, step,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#endif
}

/* Whether the warp-specialised kernel runs the call: sm_90, blocks of 128,
 * a head dim of 128 (at 64 on both sides it is slower), and the driver
 * made the maps of Q, K, V. */
static int warp_specialised(const pit_cuda_ctx *c, int block, const pit_cuda_view *q, const pit_cuda_view *k,
                            const pit_cuda_view *v, pit_attention_args *a)
{
    return c->arch == 90 && block == 128 && (q->cols == 128 || v->cols == 128) && tma_map(q, 128, a->map_q) &&
           tma_map(k, 64, a->map_k) && tma_map(v, 64, a->map_v);
}

/* The fused kernel's launch over the query blocks of `block` rows of
 * every query set; mask_dt names the variant (any without a mask). */
static pit_status launch_fused(pit_cuda_ctx *c, CUstream s, const pit_index *idx, int block, const pit_cuda_view *q,
                               const pit_cuda_view *k, const pit_cuda_view *v, pit_dtype mask_dt,
                               pit_attention_args *ap)
{
    pit_attention_args a = *ap;
    pit_status st = PIT_SUCCESS;
    const int ws = warp_specialised(c, block, q, k, v, &a);
    int param[5] = {block, (int)q->cols, (int)v->cols, (int)mask_dt, ws ? 2 : 0};
    /* the query blocks with the most key blocks start first (pit_op_plan
     * mode 1), when there are more CTAs than fit at once */
    const int64_t nqb = pit_cuda_cdiv(q->rows, block);
    int64_t ctas = nqb * q->batch;
    CUdeviceptr order = 0;
    if (idx && idx->capacity < 1024 && ctas > 2 * (int64_t)c->sm_count) {
        int64_t groups = a.ix.batched ? q->batch * idx->groups_per_batch : nqb;
        st = pit_cuda_scratch_alloc(c, s, (size_t)groups * 4, "attention order", &order);
        if (st != PIT_SUCCESS) return st;
        pit_plan_args pl = {a.ix.counts, order, (int32_t)groups, 1, idx->capacity, 1};
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_PLAN, PIT_F32, NULL, 1, 1, 1, 1024, &pl);
        a.order = order;
    }
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTENTION, q->dt, param, (unsigned)nqb, q->batch, 1,
                                  ws ? 384u : (unsigned)(block / 16 * 32), &a);
    return pit_cuda_free_scratch(c, s, order, st);
}

/* The fused kernel over a detected index. */
static pit_status attention_fused(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const pit_cuda_view *q,
                                  const pit_cuda_view *k, const pit_cuda_view *v, const pit_cuda_view *m,
                                  const pit_cuda_view *o, float scale)
{
    pit_attention_args a;
    pit_status st = attention_args(idx, q, k, v, m, o, scale, &a);
    if (st != PIT_SUCCESS) return st;
    return launch_fused(c, s, idx, idx->tile.rows, q, k, v, m->dt, &a);
}

/* Q, K, V, mask and O as views (core checked dtypes and shapes); *none:
 * nothing to compute */
static pit_status attention_views(const pit_tdesc *Q, const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                                  const pit_tdesc *O, pit_cuda_view *q, pit_cuda_view *k, pit_cuda_view *v,
                                  pit_cuda_view *m, pit_cuda_view *o, int *none)
{
    pit_status st;
    const char *op = "attention";
    int64_t ms;
    if ((st = pit_cuda_view_of(Q, op, "Q", 0, q)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(K, op, "K", 0, k)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(V, op, "V", 0, v)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(mask, op, "mask", 0, m)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(O, op, "O", 0, o)) != PIT_SUCCESS ||
        (st = pit_cuda_batch_stride(m, q->batch, op, "mask", &ms)) != PIT_SUCCESS)
        return st;
    *none = q->rows == 0 || q->batch == 0 || v->cols == 0;
    return PIT_SUCCESS;
}

/* The call's views (no error set when one is not a view the kernel reads). */
static int call_views(const pit_cuda_attention_call *call, pit_cuda_view *q, pit_cuda_view *k, pit_cuda_view *v,
                      pit_cuda_view *m, pit_cuda_view *o)
{
    memset(m, 0, sizeof *m);
    m->dt = PIT_U8; /* the variant a call without a mask runs */
    return pit_cuda_view_of(&call->q, "attention", "Q", 0, q) == PIT_SUCCESS &&
           pit_cuda_view_of(&call->k, "attention", "K", 0, k) == PIT_SUCCESS &&
           pit_cuda_view_of(&call->v, "attention", "V", 0, v) == PIT_SUCCESS &&
           pit_cuda_view_of(&call->o, "attention", "O", 0, o) == PIT_SUCCESS &&
           (!call->mask || pit_cuda_view_of(call->mask, "attention", "mask", 0, m) == PIT_SUCCESS);
}

int pit_cuda_attention_takes(const pit_cuda_ctx *c, const pit_cuda_attention_call *call)
{
    pit_cuda_view q, k, v, m, o;
    return call_views(call, &q, &k, &v, &m, &o) && fusable(c, call->block, call->block, &q, &k, &v, &o) &&
           q.batch <= 65535 && (!call->columns || pit_cuda_attention_cols_takes(call, &q, &k));
}

/* ---- decode: a GQA group's query heads in one CTA, the keys split ---------------- */
/* Whether pit_attention_decode.cu takes the call: a block mask with one
 * block of rows (every query), no element mask, equal head dims of 64 or
 * 128, the group's rows within one m16 tile, the key blocks within its
 * bitmaps. */
static int decode_takes(const pit_cuda_attention_call *call, const pit_cuda_view *q, const pit_cuda_view *k,
                        const pit_cuda_view *v)
{
    const pit_index *idx = call->idx;
    return idx && !call->mask && idx->groups_per_batch == 1 && idx->tile.cols == call->block &&
           q->rows <= call->block && q->cols == k->cols && q->cols == v->cols && call->group >= 1 &&
           call->group <= PIT_ATTN_DECODE_MAX_GROUP && call->group * q->rows <= PIT_ATTN_DECODE_ROWS &&
           pit_cuda_cdiv(k->rows, call->block) <= PIT_ATTN_DECODE_MAX_BLOCKS;
}

/* The splits of the keys: as many CTAs as fit two an SM in one wave (no
 * tail), at most 16 splits, at most one a key block. */
static int decode_splits(const pit_cuda_ctx *c, int64_t ctas, int64_t key_blocks)
{
    int64_t s = 2 * (int64_t)c->sm_count / ctas;
    if (s > 16) s = 16;
    if (s > key_blocks) s = key_blocks;
    return s < 1 ? 1 : (int)s;
}

static pit_status decode_launch(pit_cuda_ctx *c, CUstream s, const pit_cuda_attention_call *call,
                                const pit_cuda_view *q, const pit_cuda_view *k, const pit_cuda_view *v,
                                const pit_cuda_view *o)
{
    pit_attn_decode_args a;
    memset(&a, 0, sizeof a);
    pit_status st = pit_cuda_index_arg(call->idx, q->batch, q->rows, k->rows, "attention", &a.ix);
    if (st != PIT_SUCCESS) return st;
    a.q = q->ptr, a.k = k->ptr, a.v = v->ptr, a.o = o->ptr;
    a.ldq = q->ld, a.ldk = k->ld, a.ldv = v->ld, a.ldo = o->ld;
    a.sq = q->bs, a.sk = k->bs, a.sv = v->bs, a.so = o->bs;
    a.wl = call->wl, a.wr = call->wr;
    a.Lq = (int32_t)q->rows, a.Lk = (int32_t)k->rows;
    a.heads_q = (int32_t)call->heads_q, a.group = (int32_t)call->group;
    a.hkv = (int32_t)(call->heads_q / call->group);
    a.nkb = (int32_t)pit_cuda_cdiv(k->rows, call->block);
    a.bkv = (int32_t)(q->batch / call->group);
    a.scale_log2 = call->scale * 1.4426950408889634f;
    if (call->lse) {
        a.lse = (uint64_t)(uintptr_t)call->lse->mem + call->lse->offset;
        a.lse_sb = call->lse->strides[0];
        a.lse_sh = call->lse->strides[1];
    }
    a.splits = decode_splits(c, a.bkv, a.nkb);
    CUdeviceptr part = 0;
    const size_t rows = (size_t)a.splits * (size_t)a.bkv * PIT_ATTN_DECODE_ROWS;
    if (a.splits > 1) {
        st = pit_cuda_scratch_alloc(c, s, rows * (size_t)(q->cols + 2) * 4, "attention decode partials", &part);
        if (st != PIT_SUCCESS) return st;
        a.part_o = part;
        a.part_ml = part + rows * (size_t)q->cols * 4;
    }
    int param[5] = {call->block, (int)q->cols};
    st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTN_DECODE, q->dt, param, (unsigned)a.bkv, (unsigned)a.splits, 1,
                              128, &a);
    if (st == PIT_SUCCESS && a.splits > 1) {
        int combine[5] = {64, (int)q->cols};
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTN_COMBINE, q->dt, combine, (unsigned)a.bkv, 1, 1, 128, &a);
    }
    return pit_cuda_free_scratch(c, s, part, st);
}

pit_status pit_cuda_attention_fused_call(pit_cuda_ctx *c, CUstream s, const pit_cuda_attention_call *call,
                                         int64_t *listed)
{
    pit_cuda_view q, k, v, m, o;
    if (!call_views(call, &q, &k, &v, &m, &o)) return not_fusable();
    if (q.rows == 0 || q.batch == 0 || (v.cols == 0 && !call->lse)) return PIT_SUCCESS;
    if (decode_takes(call, &q, &k, &v)) return decode_launch(c, s, call, &q, &k, &v, &o);
    pit_attention_args a;
    pit_status st = attention_args(call->idx, &q, &k, &v, &m, &o, call->scale, &a);
    if (st != PIT_SUCCESS) return st;
    a.heads_q = (int32_t)call->heads_q;
    a.group = (int32_t)call->group;
    a.wl = call->wl, a.wr = call->wr;
    a.flags = (call->mask ? PIT_ATT_MASK : 0) | (call->idx ? 0 : PIT_ATT_NO_INDEX) |
              (!call->idx && call->wr >= 0 && call->wl < 0 ? PIT_ATT_REVERSE : 0);
    if (call->lse) {
        a.lse = (uint64_t)(uintptr_t)call->lse->mem + call->lse->offset;
        a.lse_sb = call->lse->strides[0];
        a.lse_sh = call->lse->strides[1];
    }
    if (call->columns) return pit_cuda_attention_cols(c, s, call, &q, &k, &v, &m, &a, listed);
    return launch_fused(c, s, call->idx, call->block, &q, &k, &v, m.dt, &a);
}

static pit_status cuda_attention_sparse(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Q,
                                        const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                                        const pit_tdesc *O, float scale)
{
    pit_cuda_view q, k, v, m, o;
    int none = 1;
    pit_cuda_ctx *c = bctx;
    pit_status st = attention_views(Q, K, V, mask, O, &q, &k, &v, &m, &o, &none);
    if (st != PIT_SUCCESS || none) return st;
    if (!attention_fusable(c, idx, &q, &k, &v, &o)) return not_fusable();
    PIT_CUDA_WITH_CONTEXT(c, attention_fused(c, pit_cuda_stream_of(stream), idx, &q, &k, &v, &m, &o, scale));
}

/* ---- attention with its detection ------------------------------------------------ */
/* CUDA only: the HIP plug-in, which compiles this file through its shim,
 * leaves the entry NULL (core then detects and calls attention_sparse). */
#ifndef PIT_HIP_SHIM_H
/* Detection inside the fused kernel (pit_op_attention with ATT_DETECT): it
 * saves the detection launch and the order plan, and measured faster than
 * detection then kernel (docs/design/). Whole blocks (L a multiple of the
 * block), 16-byte mask rows, groups one a query block; other shapes detect
 * apart first. */
static int attention_detect_inside(const pit_index *idx, const pit_cuda_view *q, const pit_cuda_view *m)
{
    const int64_t block = idx->tile.rows, vec = 16 / (int64_t)pit_cuda_el_bytes(m->dt), nkb = q->rows / block;
    return q->rows % block == 0 && m->ptr % 16 == 0 && m->ld % vec == 0 && m->bs % vec == 0 &&
           idx->groups_per_batch == nkb && idx->capacity >= nkb && idx->capacity < PIT_ENTRY_FULL;
}

/* Key blocks a detection part of the kernel reads (4 x 32 KB with bf16
 * 128 x 128 blocks; the switch PIT_CUDA_ATTENTION_PART for sweeps). The
 * items that run ahead of the attention (PIT_CUDA_ATTENTION_AHEAD) are
 * about one wave: two CTAs an SM. */
#define ATTENTION_PART_BLOCKS 4

static pit_status attention_detect_fused(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const pit_cuda_view *q,
                                         const pit_cuda_view *k, const pit_cuda_view *v, const pit_cuda_view *m,
                                         const pit_cuda_view *o, float scale)
{
    pit_attention_args a;
    pit_status st = attention_args(idx, q, k, v, m, o, scale, &a);
    if (st != PIT_SUCCESS) return st;
    const int block = idx->tile.rows;
    const int64_t nkb = q->rows / block, groups = a.ix.batched ? q->batch * nkb : nkb;
    const int32_t part_switch = c->switches.value[PIT_SWITCH_ATTENTION_PART];
    const int part_blocks = part_switch > 0 ? part_switch : ATTENTION_PART_BLOCKS;
    const int64_t parts = pit_cuda_cdiv(nkb, part_blocks), heads = a.ix.batched ? 1 : q->batch;
    const int64_t items = groups * (parts + heads);
    if (items > INT32_MAX / 2)
        return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s", "attention",
                              "too many blocks for one launch");
    const int32_t ahead_switch = c->switches.value[PIT_SWITCH_ATTENTION_AHEAD];
    int64_t ahead_items = ahead_switch > 0 ? ahead_switch : 2 * (int64_t)c->sm_count;
    int64_t ahead = pit_cuda_cdiv(ahead_items, parts + heads);
    a.groups = (int32_t)groups, a.parts = (int32_t)parts, a.heads = (int32_t)heads;
    a.ahead = (int32_t)(ahead < 1 ? 1 : ahead > groups ? groups : ahead);
    a.part_blocks = part_blocks;
    a.total = (uint64_t)(uintptr_t)idx->total;
    CUdeviceptr det = 0;
    if ((st = pit_cuda_zero_index(s, idx, 1)) != PIT_SUCCESS ||
        (st = pit_cuda_scratch_fill(c, s, (size_t)groups + 1, 0, "attention work items", &det)) != PIT_SUCCESS)
        return st; /* det[0]: the next work item; det[1 + g]: group g's finished parts */
    a.det = det;
    int param[5] = {block, (int)q->cols, (int)v->cols, (int)m->dt, 1};
    st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ATTENTION, q->dt, param, items, 1, 1, (unsigned)(block / 16 * 32),
                              &a);
    return pit_cuda_free_scratch(c, s, det, st);
}

static pit_status cuda_attention_detect(void *bctx, void *stream, const pit_tdesc *detect_view, pit_index *idx,
                                        const pit_tdesc *Q, const pit_tdesc *K, const pit_tdesc *V,
                                        const pit_tdesc *mask, const pit_tdesc *O, float scale)
{
    pit_cuda_view q, k, v, m, o;
    int none = 1;
    pit_cuda_ctx *c = bctx;
    pit_status st = attention_views(Q, K, V, mask, O, &q, &k, &v, &m, &o, &none);
    if (st != PIT_SUCCESS) return st;
    const int fusable = attention_fusable(c, idx, &q, &k, &v, &o);
    if (!none && !fusable) return not_fusable(); /* before any work: core detects and composes */
    if (!none && idx->tile.axis == PIT_AXIS_K && attention_detect_inside(idx, &q, &m))
        PIT_CUDA_WITH_CONTEXT(c, attention_detect_fused(c, pit_cuda_stream_of(stream), idx, &q, &k, &v, &m, &o,
                                                        scale));
    st = pit_cuda_detect(bctx, stream, detect_view, idx, 1);
    if (st != PIT_SUCCESS || none) return st;
    PIT_CUDA_WITH_CONTEXT(c, attention_fused(c, pit_cuda_stream_of(stream), idx, &q, &k, &v, &m, &o, scale));
}
#endif

void pit_cuda_register_attention(pit_backend *be)
{
    be->attention_sparse = cuda_attention_sparse;
    pit_cuda_register_attention_ex(be);
#ifndef PIT_HIP_SHIM_H
    be->attention_detect = cuda_attention_detect;
#endif
}
