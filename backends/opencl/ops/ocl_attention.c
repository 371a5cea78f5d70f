/*
 * ocl_attention.c - fused attention (kernels/pit_attention.cl): an online
 * softmax over the keys each query block may see (the key blocks the index
 * lists, or every key, within the causal bound and window), so the only
 * memory besides the operands is the index itself, however long the
 * sequence and however few its blocks (no batch x L x L score buffer). One
 * kernel serves both entries: attention_ex (pit_attention_desc) and
 * attention_sparse (rank-3 operands, one head a batch).
 */
#include <string.h>

#include "ocl_internal.h"

#define ATT_ROWS 32 /* query rows of a work-group, at most */
#define ATT_KEYS 32 /* keys scored at once */
#define ATT_COLS 64 /* output columns accumulated in one pass */
#define ATT_WG 128

/* the kernels' flags */
#define ATT_MASK 1
#define ATT_LSE 2
#define ATT_INDEX 4
#define ATT_DK 8
#define ATT_DV 16

/* Query rows a work-group takes: the block's rows up to ATT_ROWS, a power of
 * two (a program per size, so few sizes). */
static int rows_per_group(int block_rows)
{
    int r = 1;
    while (r < block_rows && r < ATT_ROWS)
        r *= 2;
    return r;
}

static cl_long elements_of(const pit_tdesc *t)
{
    return (cl_long)(t->offset / ocl_dtype_bytes(t->dtype));
}

/* A rank-4 operand: buffer, element offset, batch, head and row strides. */
static void arg_view4(ocl_args *a, const pit_tdesc *t)
{
    ocl_arg_mem(a, (cl_mem)t->mem);
    ocl_arg_long(a, elements_of(t));
    for (int i = 0; i < 3; i++)
        ocl_arg_long(a, (cl_long)t->strides[i]);
}

/* A rank-4 view, or for an absent one a stand-in the kernel never reads. */
static void arg_view4_or_none(ocl_args *a, const pit_tdesc *t, cl_mem none)
{
    if (t) {
        arg_view4(a, t);
        return;
    }
    ocl_arg_mem(a, none);
    for (int i = 0; i < 4; i++)
        ocl_arg_long(a, 0);
}

/* Q, K, V, the mask and O: the arguments every kernel of the family starts with. */
static void arg_operands(ocl_args *a, const pit_attention_desc *d, cl_mem none)
{
    arg_view4(a, &d->Q);
    arg_view4(a, &d->K);
    arg_view4(a, &d->V);
    arg_view4_or_none(a, d->mask, none);
    arg_view4(a, &d->O);
}

/* lse [B, Hq, Lq]: buffer, element offset, batch and head strides. */
static void arg_lse(ocl_args *a, const pit_tdesc *lse, cl_mem none)
{
    ocl_arg_mem(a, lse ? (cl_mem)lse->mem : none);
    ocl_arg_long(a, lse ? elements_of(lse) : 0);
    ocl_arg_long(a, lse ? (cl_long)lse->strides[0] : 0);
    ocl_arg_long(a, lse ? (cl_long)lse->strides[1] : 0);
}

static void arg_index(ocl_args *a, const pit_attention_desc *d, cl_mem none)
{
    ocl_arg_mem(a, d->idx ? (cl_mem)d->idx->counts : none);
    ocl_arg_mem(a, d->idx ? (cl_mem)d->idx->entries : none);
    ocl_arg_long(a, (cl_long)d->idx_batch_stride);
    ocl_arg_long(a, (cl_long)d->idx_head_stride);
    ocl_arg_int(a, d->idx ? d->idx->capacity : 0);
}

static pit_status check_desc(const pit_attention_desc *d)
{
    const int64_t lq = d->Q.shape[2], hq = d->Q.shape[1], hkv = d->K.shape[1];
    const int br = d->tile.rows, bc = d->tile.cols;
    if (br < 1 || bc < 1 || hkv < 1 || hq % hkv != 0 ||
        (d->idx && d->idx->groups_per_batch < ocl_cdiv(lq, br)))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl attention: blocks %dx%d, %lld query heads over %lld, "
                               "index of %d groups a set for %lld query rows", br, bc,
                               (long long)hq, (long long)hkv,
                               d->idx ? d->idx->groups_per_batch : -1, (long long)lq);
    if (d->Q.shape[0] * hq > INT32_MAX)
        return ocl_host->error(PIT_ERR_UNSUPPORTED, "opencl attention: %lld batches x heads "
                               "(at most 2^31 - 1)", (long long)(d->Q.shape[0] * hq));
    return PIT_SUCCESS;
}

/* Lengths, dims, heads (hq for the forward and dQ, Hkv for dK and dV), the
 * group, the block, scale, bounds, flags and the index: the arguments every
 * kernel of the family ends with. */
static void arg_rest(ocl_args *a, const pit_attention_desc *d, int64_t heads, int flags,
                     cl_mem none)
{
    const cl_int dims[8] = {(cl_int)d->Q.shape[2], (cl_int)d->K.shape[2], (cl_int)d->Q.shape[3],
                            (cl_int)d->V.shape[3], (cl_int)heads,
                            (cl_int)(d->Q.shape[1] / d->K.shape[1]), d->tile.rows,
                            d->tile.cols};
    for (int i = 0; i < 8; i++)
        ocl_arg_int(a, dims[i]);
    ocl_arg_raw(a, sizeof(cl_float), &d->scale);
    ocl_arg_long(a, (cl_long)d->window_left);
    ocl_arg_long(a, (cl_long)d->window_right);
    ocl_arg_int(a, flags);
    arg_index(a, d, none);
}

static int flags_of(const pit_attention_desc *d)
{
    return (d->mask ? ATT_MASK : 0) | (d->lse ? ATT_LSE : 0) | (d->idx ? ATT_INDEX : 0);
}

/* Kernel kname of the family for blocks of `rows` rows (query rows, or keys
 * for pit_attention_dkv). */
static pit_status family_kernel(ocl_ctx *c, const pit_attention_desc *d, int rows,
                                const char *kname, ocl_op_config *k, cl_kernel *kern)
{
    *k = (ocl_op_config){d->Q.dtype, PIT_U8, rows_per_group(rows), ATT_COLS, ATT_KEYS,
                         ocl_op_fit_wg(c, ATT_WG)};
    if (d->mask)
        OCL_TRY(ocl_pattern_code(d->mask, "attention: mask", &k->mask_code));
    return ocl_op_kernel(c, "pit_attention", k, kname, k->wg, kern);
}

/* The work-groups of `n` rows (or keys) in blocks of `block`, for B x heads. */
static pit_status launch_blocks(ocl_args *a, ocl_stream *s, const ocl_op_config *k, int64_t n,
                                int block, int64_t batch_heads)
{
    size_t groups = (size_t)ocl_cdiv(n, block) * (size_t)ocl_cdiv(block, k->bm);
    size_t global[2] = {groups * k->wg, (size_t)batch_heads};
    size_t local[2] = {k->wg, 1};
    return ocl_launch(a, s->queue, 2, global, local);
}

pit_status ocl_attention_ex(void *bctx, void *stream, const pit_attention_desc *d)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    const int64_t batch = d->Q.shape[0], hq = d->Q.shape[1], lq = d->Q.shape[2];
    const int64_t dv = d->V.shape[3];
    if (batch * hq * lq == 0 || (dv == 0 && !d->lse))
        return PIT_SUCCESS;
    OCL_TRY(check_desc(d));
    ocl_op_config k;
    cl_kernel kern;
    OCL_TRY(family_kernel(c, d, d->tile.rows, "pit_attention", &k, &kern));
    /* what stands in for an absent mask, lse or index: never read */
    cl_mem none = (cl_mem)d->Q.mem;
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_attention");
    arg_operands(&a, d, none);
    arg_lse(&a, d->lse, none);
    arg_rest(&a, d, d->Q.shape[1], flags_of(d), none);
    /* every query block gets its work-groups: an empty group writes zeros,
     * and nothing is read back between detection and this launch */
    return launch_blocks(&a, s, &k, lq, d->tile.rows, batch * hq);
}

static int has_elements(const pit_tdesc *t)
{
    if (!t)
        return 0;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] == 0)
            return 0;
    return 1;
}

static pit_status attention_dq(ocl_ctx *c, ocl_stream *s, const pit_attention_desc *d,
                               const pit_tdesc *dO, const pit_tdesc *dQ)
{
    ocl_op_config k;
    cl_kernel kern;
    OCL_TRY(family_kernel(c, d, d->tile.rows, "pit_attention_dq", &k, &kern));
    cl_mem none = (cl_mem)d->Q.mem;
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_attention_dq");
    arg_operands(&a, d, none);
    arg_view4(&a, dO);
    arg_view4(&a, dQ);
    arg_lse(&a, d->lse, none);
    arg_rest(&a, d, d->Q.shape[1], flags_of(d), none);
    return launch_blocks(&a, s, &k, d->Q.shape[2], d->tile.rows, d->Q.shape[0] * d->Q.shape[1]);
}

static pit_status attention_dkv(ocl_ctx *c, ocl_stream *s, const pit_attention_desc *d,
                                const pit_tdesc *dO, const pit_tdesc *dK, const pit_tdesc *dV)
{
    ocl_op_config k;
    cl_kernel kern;
    OCL_TRY(family_kernel(c, d, d->tile.cols, "pit_attention_dkv", &k, &kern));
    cl_mem none = (cl_mem)d->Q.mem;
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_attention_dkv");
    arg_operands(&a, d, none);
    arg_view4(&a, dO);
    arg_view4_or_none(&a, dK, none);
    arg_view4_or_none(&a, dV, none);
    arg_lse(&a, d->lse, none);
    const int flags = flags_of(d) | (dK ? ATT_DK : 0) | (dV ? ATT_DV : 0);
    arg_rest(&a, d, d->K.shape[1], flags, none);
    return launch_blocks(&a, s, &k, d->K.shape[2], d->tile.cols, d->K.shape[0] * d->K.shape[1]);
}

pit_status ocl_attention_backward(void *bctx, void *stream, const pit_attention_desc *d,
                                  const pit_tdesc *dO, const pit_tdesc *dQ, const pit_tdesc *dK,
                                  const pit_tdesc *dV)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    if (!d->lse)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl attention backward: no lse");
    OCL_TRY(check_desc(d));
    dQ = has_elements(dQ) ? dQ : NULL;
    dK = has_elements(dK) ? dK : NULL;
    dV = has_elements(dV) ? dV : NULL;
    if (dQ)
        OCL_TRY(attention_dq(c, s, d, dO, dQ));
    if (dK || dV)
        OCL_TRY(attention_dkv(c, s, d, dO, dK, dV));
    return PIT_SUCCESS;
}

/* [batch, 1, rows, cols] of a rank-2 or rank-3 operand (one head a batch). */
static pit_tdesc one_head(const pit_tdesc *t)
{
    pit_tdesc v = *t;
    v.rank = 4;
    v.shape[0] = ocl_batch_of(t);
    v.shape[1] = 1;
    v.shape[2] = ocl_rows_of(t);
    v.shape[3] = ocl_cols_of(t);
    v.strides[0] = t->rank == 3 ? t->strides[0] : 0;
    v.strides[1] = 0;
    v.strides[2] = t->strides[t->rank - 2];
    v.strides[3] = 1;
    return v;
}

pit_status ocl_attention(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Q,
                         const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                         const pit_tdesc *O, float scale)
{
    pit_attention_desc d;
    memset(&d, 0, sizeof d);
    d.Q = one_head(Q);
    d.K = one_head(K);
    d.V = one_head(V);
    d.O = one_head(O);
    pit_tdesc m = one_head(mask);
    d.mask = &m;
    d.idx = idx;
    /* a rank-2 mask indexed once: groups == groups_per_batch */
    d.idx_batch_stride = idx->groups == idx->groups_per_batch ? 0 : idx->groups_per_batch;
    d.tile = idx->tile;
    d.scale = scale;
    d.window_left = d.window_right = -1;
    return ocl_attention_ex(bctx, stream, &d);
}
