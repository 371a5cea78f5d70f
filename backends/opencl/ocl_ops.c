/*
 * ocl_ops.c - the OpenCL entries of the operators of dynamic-sparse models
 * (kernels/pit_ops.cl): sddmm, softmax_sparse (+ backward), moe_route,
 * moe_matmul (modes 0-3), matmul_rows, relu and transpose. attention_sparse
 * stays NULL: core composes sddmm -> softmax -> matmul_sparse on one index.
 *
 * pit_ocl_register_ops() fills these entries of the plug-in's table.
 */
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"
#include "ocl_ops.h"

#define OPS_BK 16
#define OPS_ROW_WG 128 /* softmax: one row per work-group, a power of two */
#define OPS_ELEMENTWISE_WG 64
#define OPS_MAX_BLOCK 128 /* largest side of an SDDMM output block */
#define OPS_TRANSPOSE_TILE 16

/* ---- programs ------------------------------------------------------------------ */

/* A configuration of pit_ops.cl: storage dtype, mask word, tile, work-group. */
typedef struct ops_config {
    pit_dtype dtype;
    int mask_word; /* bytes of a mask element: 4, 2 or 1 (-DMW) */
    int bm, bn, bk;
    size_t wg;
} ops_config;

static ops_config elementwise_config(pit_dtype dtype)
{
    ops_config k = {dtype, 4, 1, 1, 1, OPS_ELEMENTWISE_WG};
    return k;
}

static pit_status ops_kernel(ocl_ctx *c, const ops_config *k, const char *kname, size_t wg,
                             cl_kernel *out)
{
    if (ocl_dtype_code(k->dtype) < 0)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "opencl %s: dtype %d (f32, f16, bf16)",
                               kname, (int)k->dtype);
    size_t local = ((size_t)k->bk * (size_t)(k->bm + k->bn) + (size_t)k->bm * (size_t)k->bn +
                    (size_t)k->bm * 4) * 4;
    if (local > c->local_mem)
        return ocl_host->error(PIT_ERR_UNSUPPORTED,
                               "opencl %s: tile %dx%dx%d needs %zu B of local memory, the "
                               "device has %zu B", kname, k->bm, k->bn, k->bk, local,
                               c->local_mem);
    char defines[160];
    snprintf(defines, sizeof defines, "-DDT=%d -DMW=%d -DBM=%d -DBN=%d -DBK=%d -DWG=%zu",
             ocl_dtype_code(k->dtype), k->mask_word, k->bm, k->bn, k->bk, k->wg);
    cl_program prog;
    OCL_TRY(ocl_program_get(c, "pit_ops", defines, &prog));
    return ocl_kernel_create(c, prog, kname, wg, out);
}

/* ---- tensor views ----------------------------------------------------------------- */

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

/* A rank 2/3 operand: element offset, row stride, batch stride (0 for rank 2:
 * shared by every batch). */
typedef struct mat_view {
    cl_mem mem;
    cl_long off, ld, bs;
} mat_view;

static mat_view mat_of(const pit_tdesc *t)
{
    mat_view v = {(cl_mem)t->mem, (cl_long)(t->offset / ocl_dtype_bytes(t->dtype)),
                  (cl_long)t->strides[t->rank - 2], t->rank == 3 ? (cl_long)t->strides[0] : 0};
    return v;
}

static void arg_mat(ocl_args *a, const mat_view *v)
{
    ocl_arg_mem(a, v->mem);
    ocl_arg_long(a, v->off);
    ocl_arg_long(a, v->ld);
    ocl_arg_long(a, v->bs);
}

/* Row-major matrix [rows, cols] without a batch: offset and row stride. */
static void arg_rows(ocl_args *a, const pit_tdesc *t)
{
    mat_view v = mat_of(t);
    ocl_arg_mem(a, v.mem);
    ocl_arg_long(a, v.off);
    ocl_arg_long(a, v.ld);
}

static int64_t rows_of(const pit_tdesc *t)
{
    return t->shape[t->rank - 2];
}

static int64_t cols_of(const pit_tdesc *t)
{
    return t->shape[t->rank - 1];
}

static int64_t batch_of(const pit_tdesc *t)
{
    return t->rank == 3 ? t->shape[0] : 1;
}

/* The mask's -DMW code; a dtype that cannot be a mask is refused here, as
 * core does (a plug-in must not trust it), so no kernel reads it wrongly. */
static pit_status mask_word(const pit_tdesc *mask, const char *op, int *out)
{
    *out = ocl_pattern_bytes(mask->dtype);
    if (*out == 0)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE,
                               "opencl %s: mask dtype %d (" OCL_PATTERN_DTYPES ")", op,
                               (int)mask->dtype);
    return PIT_SUCCESS;
}

/* ---- elementwise --------------------------------------------------------------------- */

static void grid_of(const view4 *v, size_t global[3])
{
    global[0] = (size_t)v->cols;
    global[1] = (size_t)v->rows;
    global[2] = (size_t)(v->d0 * v->d1);
}

/* Every element of t set to zero (strided views keep their gaps). */
static pit_status zero_tensor(ocl_ctx *c, cl_command_queue q, const pit_tdesc *t)
{
    ops_config k = elementwise_config(t->dtype);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_zero", 1, &kern));
    view4 v = view4_of(t);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_zero");
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

static void arg_view4(ocl_args *a, const view4 *v)
{
    ocl_arg_mem(a, v->mem);
    ocl_arg_long(a, v->off);
    ocl_arg_long(a, v->s0);
    ocl_arg_long(a, v->s1);
    ocl_arg_long(a, v->s2);
}

static pit_status ocl_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ops_config k = elementwise_config(X->dtype);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_relu", 1, &kern));
    view4 x = view4_of(X), y = view4_of(Y);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_relu");
    arg_view4(&a, &x);
    arg_view4(&a, &y);
    ocl_arg_int(&a, (cl_int)x.d1);
    ocl_arg_int(&a, (cl_int)x.rows);
    ocl_arg_int(&a, (cl_int)x.cols);
    size_t global[3];
    grid_of(&x, global);
    return ocl_launch(&a, s->queue, 3, global, NULL);
}

static size_t round_up(int64_t n, size_t m)
{
    return ((size_t)n + m - 1) / m * m;
}

static pit_status ocl_transpose(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    /* i32 is moved as the same 32-bit words as f32. */
    ops_config k = elementwise_config(X->dtype == PIT_I32 ? PIT_F32 : X->dtype);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_transpose", OPS_TRANSPOSE_TILE * OPS_TRANSPOSE_TILE,
                       &kern));
    view4 x = view4_of(X), y = view4_of(Y);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_transpose");
    arg_view4(&a, &x);
    arg_view4(&a, &y);
    ocl_arg_int(&a, (cl_int)x.d1);
    ocl_arg_int(&a, (cl_int)x.rows);
    ocl_arg_int(&a, (cl_int)x.cols);
    size_t global[3] = {round_up(x.cols, OPS_TRANSPOSE_TILE), round_up(x.rows, OPS_TRANSPOSE_TILE),
                        (size_t)(x.d0 * x.d1)};
    size_t local[3] = {OPS_TRANSPOSE_TILE, OPS_TRANSPOSE_TILE, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

/* ---- SDDMM ---------------------------------------------------------------------------- */

static size_t pow2_at_most(size_t n)
{
    size_t p = 1;
    while (p * 2 <= n)
        p <<= 1;
    return p;
}

/* The index: counts, entries, groups per batch, the group stride between
 * batches (0 for an index shared by every batch: groups == groups_per_batch,
 * a rank-2 mask indexed once) and the capacity. */
static void arg_index(ocl_args *a, const pit_index *idx)
{
    ocl_arg_mem(a, (cl_mem)idx->counts);
    ocl_arg_mem(a, (cl_mem)idx->entries);
    ocl_arg_int(a, idx->groups_per_batch);
    ocl_arg_int(a, idx->groups == idx->groups_per_batch ? 0 : idx->groups_per_batch);
    ocl_arg_int(a, idx->capacity);
}

static pit_status check_block(const pit_index *idx, const char *op)
{
    const pit_microtile *t = &idx->tile;
    if (t->rows < 1 || t->cols < 1 || t->rows > OPS_MAX_BLOCK || t->cols > OPS_MAX_BLOCK)
        return ocl_host->error(PIT_ERR_UNSUPPORTED, "opencl %s: block %dx%d (sides 1..%d)", op,
                               t->rows, t->cols, OPS_MAX_BLOCK);
    return PIT_SUCCESS;
}

static pit_status ocl_sddmm(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A,
                            const pit_tdesc *B, const pit_tdesc *mask, const pit_tdesc *C)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    OCL_TRY(check_block(idx, "sddmm"));
    ops_config k = {A->dtype, 0, idx->tile.rows, idx->tile.cols, OPS_BK, 0};
    OCL_TRY(mask_word(mask, "sddmm", &k.mask_word));
    /* Every work-item owns at least one output of the block. */
    size_t outputs = (size_t)k.bm * (size_t)k.bn;
    k.wg = pow2_at_most(outputs < 128 ? outputs : 128);
    while (k.wg > c->max_wg)
        k.wg /= 2;
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_sddmm", k.wg, &kern));
    /* Off the listed blocks C is zero: one pass first, then the blocks. */
    pit_status st = zero_tensor(c, s->queue, C);
    if (st != PIT_SUCCESS) {
        ocl_kernel_release(kern);
        return st;
    }
    mat_view a = mat_of(A), b = mat_of(B), m = mat_of(mask), cv = mat_of(C);
    ocl_args args;
    ocl_args_begin(&args, kern, "pit_ops_sddmm");
    arg_mat(&args, &a);
    arg_mat(&args, &b);
    arg_mat(&args, &m);
    arg_mat(&args, &cv);
    ocl_arg_int(&args, (cl_int)rows_of(C));
    ocl_arg_int(&args, (cl_int)cols_of(C));
    ocl_arg_int(&args, (cl_int)cols_of(A));
    arg_index(&args, idx);
    /* The grid covers every slot of the index for every batch: no host
     * read-back needed. */
    size_t global[2] = {(size_t)idx->capacity * k.wg,
                        (size_t)idx->groups_per_batch * (size_t)batch_of(C)};
    size_t local[2] = {k.wg, 1};
    return ocl_launch(&args, s->queue, 2, global, local);
}

/* ---- sparse softmax ------------------------------------------------------------------- */

static pit_status row_config(const pit_tdesc *X, const pit_tdesc *mask, const ocl_ctx *c,
                             const char *op, ops_config *k)
{
    ops_config r = {X->dtype, 0, 1, 1, 1, OPS_ROW_WG};
    OCL_TRY(mask_word(mask, op, &r.mask_word));
    while (r.wg > c->max_wg)
        r.wg /= 2;
    *k = r;
    return PIT_SUCCESS;
}

static void arg_row_index(ocl_args *a, const pit_index *idx)
{
    arg_index(a, idx);
    ocl_arg_int(a, idx->tile.rows);
    ocl_arg_int(a, idx->tile.cols);
}

static pit_status ocl_softmax_sparse(void *bctx, void *stream, const pit_index *idx,
                                     const pit_tdesc *X, const pit_tdesc *mask, const pit_tdesc *Y,
                                     float scale)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ops_config k;
    OCL_TRY(row_config(X, mask, c, "softmax_sparse", &k));
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_softmax", k.wg, &kern));
    mat_view x = mat_of(X), m = mat_of(mask), y = mat_of(Y);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_softmax");
    arg_mat(&a, &x);
    arg_mat(&a, &m);
    arg_mat(&a, &y);
    ocl_arg_int(&a, (cl_int)cols_of(X));
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    arg_row_index(&a, idx);
    size_t global[3] = {k.wg, (size_t)rows_of(X), (size_t)batch_of(X)};
    size_t local[3] = {k.wg, 1, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

static pit_status ocl_softmax_sparse_backward(void *bctx, void *stream, const pit_index *idx,
                                              const pit_tdesc *Y, const pit_tdesc *dY,
                                              const pit_tdesc *mask, const pit_tdesc *dX,
                                              float scale)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    ops_config k;
    OCL_TRY(row_config(Y, mask, c, "softmax_sparse_backward", &k));
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_softmax_backward", k.wg, &kern));
    mat_view y = mat_of(Y), dy = mat_of(dY), m = mat_of(mask), dx = mat_of(dX);
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_softmax_backward");
    arg_mat(&a, &y);
    arg_mat(&a, &dy);
    arg_mat(&a, &m);
    arg_mat(&a, &dx);
    ocl_arg_int(&a, (cl_int)cols_of(Y));
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    arg_row_index(&a, idx);
    size_t global[3] = {k.wg, (size_t)rows_of(Y), (size_t)batch_of(Y)};
    size_t local[3] = {k.wg, 1, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

/* ---- Mixture of Experts ------------------------------------------------------------------ */

static pit_status ocl_moe_route(void *bctx, void *stream, const pit_tdesc *ids,
                                const pit_index *idx)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    if (ids->dtype != PIT_I32 || ids->rank != 2)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_route: expert_ids must be "
                               "i32 [T,k]");
    OCL_TRY(ocl_fill32(s->queue, (cl_mem)idx->counts, 0, 0u, (size_t)idx->groups * 4));
    OCL_TRY(ocl_fill32(s->queue, (cl_mem)idx->total, 0, 0u, 4));
    ops_config k = elementwise_config(PIT_F32);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_moe_route", 1, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_moe_route");
    ocl_arg_mem(&a, (cl_mem)ids->mem);
    ocl_arg_long(&a, (cl_long)(ids->offset / 4));
    ocl_arg_long(&a, (cl_long)ids->strides[0]);
    ocl_arg_int(&a, (cl_int)ids->shape[0]);
    ocl_arg_int(&a, (cl_int)ids->shape[1]);
    ocl_arg_int(&a, idx->groups);
    ocl_arg_mem(&a, (cl_mem)idx->counts);
    ocl_arg_mem(&a, (cl_mem)idx->entries);
    ocl_arg_mem(&a, (cl_mem)idx->total);
    ocl_arg_int(&a, idx->capacity);
    size_t global[1] = {(size_t)(ids->shape[0] * ids->shape[1])};
    return ocl_launch(&a, s->queue, 1, global, NULL);
}

/* The tile core asked for, kept inside what the kernels and device allow. */
static ops_config gemm_config(ocl_ctx *c, pit_dtype dtype, const pit_tile *tile)
{
    ops_config k = {dtype, 4, tile->bm, tile->bn, tile->bk, (size_t)tile->threads};
    if (k.bm < 1 || k.bm > 128)
        k.bm = 32;
    if (k.bn < 1 || k.bn > 128)
        k.bn = 64;
    if (k.bk < 1 || k.bk > 64)
        k.bk = OPS_BK;
    if (k.wg < 1 || k.wg > 256)
        k.wg = 128;
    while (k.wg > c->max_wg)
        k.wg /= 2;
    return k;
}

/* The gate argument of a token-slot kernel (NULL: all gates are 1). */
static void arg_gates(ocl_args *a, const pit_tdesc *gates)
{
    ocl_arg_mem(a, gates ? (cl_mem)gates->mem : NULL);
    ocl_arg_long(a, gates ? (cl_long)(gates->offset / 4) : 0);
    ocl_arg_long(a, gates ? (cl_long)gates->strides[0] : 0);
}

static void arg_experts(ocl_args *a, const pit_tdesc *W)
{
    ocl_arg_mem(a, (cl_mem)W->mem);
    ocl_arg_long(a, (cl_long)(W->offset / ocl_dtype_bytes(W->dtype)));
    ocl_arg_long(a, (cl_long)W->strides[1]);
    ocl_arg_long(a, (cl_long)W->strides[0]);
}

static cl_int chunks_of(int32_t max_entries, const pit_index *idx, int bm)
{
    int64_t n = max_entries < idx->capacity ? max_entries : idx->capacity;
    return (cl_int)ocl_cdiv(n, bm);
}

/* Sums the f32 slot rows Ys per token into Out (mode 0/1 with k > 1). */
static pit_status moe_combine(ocl_ctx *c, cl_command_queue q, cl_mem ys, int topk,
                              const pit_tdesc *Out)
{
    ops_config k = elementwise_config(Out->dtype);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_moe_combine", 1, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_moe_combine");
    ocl_arg_mem(&a, ys);
    ocl_arg_int(&a, topk);
    arg_rows(&a, Out);
    ocl_arg_int(&a, (cl_int)Out->shape[0]);
    ocl_arg_int(&a, (cl_int)Out->shape[1]);
    size_t global[2] = {(size_t)Out->shape[1], (size_t)Out->shape[0]};
    return ocl_launch(&a, q, 2, global, NULL);
}

/* The f32 slot rows of a k > 1 product, zeroed: slots with a skipped id stay
 * 0 and add nothing when combined. Released by OpenCL only once the queued
 * kernels using it are done, so the caller releases it right after enqueuing. */
static pit_status slot_buffer(ocl_ctx *c, cl_command_queue q, size_t bytes, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    *out = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    OCL_TRY(OCL_CHECK("clCreateBuffer(moe slot results)", err));
    pit_status st = ocl_fill32(q, *out, 0, 0u, bytes);
    if (st != PIT_SUCCESS) {
        clReleaseMemObject(*out);
        *out = NULL;
    }
    return st;
}

/* Modes 0 and 1: R (X or dY) rows gathered per expert times W[e] or W[e]^T. */
static pit_status moe_rows_product(ocl_ctx *c, ocl_stream *s, int mode, const ops_config *k,
                                   const pit_index *idx, int32_t max_entries,
                                   const pit_tdesc *R, const pit_tdesc *W,
                                   const pit_tdesc *gates, const pit_tdesc *Out, int topk)
{
    const int64_t ND = Out->shape[1], KD = R->shape[1];
    cl_mem ys = NULL;
    if (topk == 1)
        OCL_TRY(zero_tensor(c, s->queue, Out)); /* rows of unrouted tokens */
    else
        OCL_TRY(slot_buffer(c, s->queue, (size_t)(idx->capacity * ND) * 4, &ys));
    cl_int nchunks = chunks_of(max_entries, idx, k->bm);
    cl_kernel kern;
    pit_status st = ops_kernel(c, k, "pit_ops_moe_gemm", k->wg, &kern);
    if (st == PIT_SUCCESS) {
        ocl_args a;
        ocl_args_begin(&a, kern, "pit_ops_moe_gemm");
        ocl_arg_int(&a, mode);
        arg_rows(&a, R);
        arg_experts(&a, W);
        arg_gates(&a, gates);
        arg_rows(&a, Out);
        ocl_arg_mem(&a, ys);
        ocl_arg_int(&a, (cl_int)KD);
        ocl_arg_int(&a, (cl_int)ND);
        ocl_arg_int(&a, topk);
        ocl_arg_mem(&a, (cl_mem)idx->counts);
        ocl_arg_mem(&a, (cl_mem)idx->entries);
        ocl_arg_int(&a, idx->capacity);
        ocl_arg_int(&a, nchunks);
        size_t global[2] = {(size_t)ocl_cdiv(ND, k->bn) * k->wg,
                            (size_t)idx->groups * (size_t)nchunks};
        size_t local[2] = {k->wg, 1};
        st = ocl_launch(&a, s->queue, 2, global, local);
    }
    if (st == PIT_SUCCESS && ys)
        st = moe_combine(c, s->queue, ys, topk, Out);
    if (ys)
        clReleaseMemObject(ys);
    return st;
}

static pit_status moe_dgates(ocl_ctx *c, ocl_stream *s, const ops_config *k,
                             const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                             const pit_tdesc *W, const pit_tdesc *dgates, const pit_tdesc *D)
{
    OCL_TRY(zero_tensor(c, s->queue, dgates)); /* slots with a skipped id */
    cl_int nchunks = chunks_of(max_entries, idx, k->bm);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, k, "pit_ops_moe_dgates", k->wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_moe_dgates");
    arg_rows(&a, X);
    arg_experts(&a, W);
    arg_rows(&a, D);
    arg_rows(&a, dgates);
    ocl_arg_int(&a, (cl_int)X->shape[1]);
    ocl_arg_int(&a, (cl_int)D->shape[1]);
    ocl_arg_int(&a, (cl_int)dgates->shape[1]);
    ocl_arg_mem(&a, (cl_mem)idx->counts);
    ocl_arg_mem(&a, (cl_mem)idx->entries);
    ocl_arg_int(&a, idx->capacity);
    ocl_arg_int(&a, nchunks);
    size_t global[2] = {k->wg, (size_t)idx->groups * (size_t)nchunks};
    size_t local[2] = {k->wg, 1};
    return ocl_launch(&a, s->queue, 2, global, local);
}

static pit_status moe_dw(ocl_ctx *c, ocl_stream *s, const ops_config *k, const pit_index *idx,
                         const pit_tdesc *X, const pit_tdesc *dW, const pit_tdesc *gates,
                         const pit_tdesc *D, int topk)
{
    const int64_t H = X->shape[1], N = D->shape[1];
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, k, "pit_ops_moe_dw", k->wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_ops_moe_dw");
    arg_rows(&a, X);
    arg_rows(&a, D);
    arg_gates(&a, gates);
    arg_experts(&a, dW);
    ocl_arg_int(&a, (cl_int)H);
    ocl_arg_int(&a, (cl_int)N);
    ocl_arg_int(&a, topk);
    ocl_arg_mem(&a, (cl_mem)idx->counts);
    ocl_arg_mem(&a, (cl_mem)idx->entries);
    ocl_arg_int(&a, idx->capacity);
    size_t global[3] = {(size_t)ocl_cdiv(N, k->bn) * k->wg, (size_t)ocl_cdiv(H, k->bm),
                        (size_t)idx->groups};
    size_t local[3] = {k->wg, 1, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

static pit_status check_moe_args(int mode, const pit_index *idx, const pit_tdesc *X,
                                 const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y)
{
    if (mode < 0 || mode > 3)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_matmul: mode %d (0..3)", mode);
    if (X->rank != 2 || W->rank != 3 || Y->rank != 2 || W->shape[0] != idx->groups)
        return ocl_host->error(PIT_ERR_SHAPE_MISMATCH, "opencl moe_matmul: X, Y must be rank 2 "
                               "and W [E,H,N] with E = %d index groups", idx->groups);
    if (mode == 3 ? (!gates || gates->dtype != PIT_F32 || gates->rank != 2)
                  : (gates && (gates->dtype != PIT_F32 || gates->rank != 2)))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_matmul: gates must be f32 "
                               "[T,k]%s", mode == 3 ? " (dgates, required in mode 3)" : "");
    if (X->dtype != W->dtype || X->dtype != Y->dtype)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "opencl moe_matmul: X, W and Y dtypes "
                               "differ");
    return PIT_SUCCESS;
}

static pit_status ocl_moe_matmul(void *bctx, void *stream, int mode, const pit_tile *tile,
                                 const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                                 const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    OCL_TRY(check_moe_args(mode, idx, X, W, gates, Y));
    const int64_t T = X->shape[0];
    if (T == 0)
        return PIT_SUCCESS;
    /* capacity = T * k by the contract: every token-slot may be routed. */
    const int topk = (int)(idx->capacity / T);
    ops_config k = gemm_config(c, X->dtype, tile);
    switch (mode) {
    case 0:
    case 1:
        return moe_rows_product(c, s, mode, &k, idx, max_entries, X, W, gates, Y, topk);
    case 2:
        return moe_dw(c, s, &k, idx, X, W, gates, Y, topk);
    default:
        return moe_dgates(c, s, &k, idx, max_entries, X, W, gates, Y);
    }
}

/* ---- row-sparse matmul ------------------------------------------------------------------- */

static pit_status ocl_matmul_rows(void *bctx, void *stream, const pit_tile *tile,
                                  const pit_index *idx, int32_t max_entries, const pit_tdesc *A,
                                  const pit_tdesc *B, const pit_tdesc *C, int keep_skipped)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    if (A->dtype != B->dtype || A->dtype != C->dtype)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "opencl matmul_rows: dtypes differ");
    if (idx->groups != batch_of(A) || idx->tile.axis != PIT_AXIS_M)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl matmul_rows: the index must have "
                               "one axis-M group per batch (%d groups for batch %lld)",
                               idx->groups, (long long)batch_of(A));
    if (!keep_skipped)
        OCL_TRY(zero_tensor(c, s->queue, C));
    ops_config k = gemm_config(c, A->dtype, tile);
    cl_int nchunks = chunks_of(max_entries, idx, k.bm);
    cl_kernel kern;
    OCL_TRY(ops_kernel(c, &k, "pit_ops_matmul_rows", k.wg, &kern));
    mat_view a = mat_of(A), b = mat_of(B), cv = mat_of(C);
    ocl_args args;
    ocl_args_begin(&args, kern, "pit_ops_matmul_rows");
    arg_mat(&args, &a);
    arg_mat(&args, &b);
    arg_mat(&args, &cv);
    ocl_arg_int(&args, (cl_int)cols_of(C));
    ocl_arg_int(&args, (cl_int)cols_of(A));
    ocl_arg_mem(&args, (cl_mem)idx->counts);
    ocl_arg_mem(&args, (cl_mem)idx->entries);
    ocl_arg_int(&args, idx->capacity);
    size_t global[3] = {(size_t)ocl_cdiv(cols_of(C), k.bn) * k.wg, (size_t)nchunks,
                        (size_t)batch_of(A)};
    size_t local[3] = {k.wg, 1, 1};
    return ocl_launch(&args, s->queue, 3, global, local);
}

void pit_ocl_register_ops(pit_backend *be)
{
    be->sddmm = ocl_sddmm;
    be->softmax_sparse = ocl_softmax_sparse;
    be->softmax_sparse_backward = ocl_softmax_sparse_backward;
    be->attention_sparse = NULL; /* core composes sddmm -> softmax -> matmul_sparse */
    be->moe_route = ocl_moe_route;
    be->moe_matmul = ocl_moe_matmul;
    be->matmul_rows = ocl_matmul_rows;
    be->relu = ocl_relu;
    be->transpose = ocl_transpose;
}
