/*
 * ocl_moe.c - Mixture of Experts (kernels/pit_moe.cl): routing token-slots
 * to experts (moe_route), the grouped expert products of moe_matmul (mode 0
 * forward, 1 dX, 2 dW, 3 dgates, with the slot-row flags of core/backend.h),
 * and the expert FFN's activation (moe_activation).
 */
#include "ocl_internal.h"

pit_status ocl_moe_route(void *bctx, void *stream, const pit_tdesc *ids, const pit_index *idx)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    if (ids->dtype != PIT_I32 || ids->rank != 2)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_route: expert_ids must be "
                               "i32 [T,k]");
    OCL_TRY(ocl_fill32(s->queue, (cl_mem)idx->counts, 0, 0u, (size_t)idx->groups * 4));
    OCL_TRY(ocl_fill32(s->queue, (cl_mem)idx->total, 0, 0u, 4));
    ocl_op_config k = ocl_op_elementwise(PIT_F32);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_moe", &k, "pit_moe_route", 1, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_moe_route");
    ocl_arg_rows(&a, ids);
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

/* A row tensor's argument, or a NULL one: gates NULL are all 1; a NULL
 * output of moe_activation is not written, a NULL input not read. */
static void arg_rows_or_null(ocl_args *a, const pit_tdesc *t)
{
    if (t) {
        ocl_arg_rows(a, t);
        return;
    }
    ocl_arg_mem(a, NULL);
    ocl_arg_long(a, 0);
    ocl_arg_long(a, 0);
}

/* The expert's slots as the kernels read them: counts, entries, capacity. */
static void arg_slots(ocl_args *a, const pit_index *idx)
{
    ocl_arg_mem(a, (cl_mem)idx->counts);
    ocl_arg_mem(a, (cl_mem)idx->entries);
    ocl_arg_int(a, idx->capacity);
}

/* Sums the f32 slot rows Ys per token into Out (mode 0/1 with k > 1). */
static pit_status moe_combine(ocl_ctx *c, cl_command_queue q, cl_mem ys, int topk,
                              const pit_tdesc *Out)
{
    ocl_op_config k = ocl_op_elementwise(Out->dtype);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_moe", &k, "pit_moe_combine", 1, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_moe_combine");
    ocl_arg_mem(&a, ys);
    ocl_arg_int(&a, topk);
    ocl_arg_rows(&a, Out);
    ocl_arg_int(&a, (cl_int)Out->shape[0]);
    ocl_arg_int(&a, (cl_int)Out->shape[1]);
    size_t global[2] = {(size_t)Out->shape[1], (size_t)Out->shape[0]};
    return ocl_launch(&a, q, 2, global, NULL);
}

/* The f32 slot rows of a k > 1 product, zeroed: slots with a skipped id stay
 * 0 and add nothing when combined. Given back only once the queued kernels
 * using it are done, so the caller releases it right after enqueuing. */
static pit_status slot_buffer(ocl_ctx *c, cl_command_queue q, size_t bytes, ocl_block *out)
{
    OCL_TRY(ocl_block_new(c, q, bytes, "moe slot results", out));
    pit_status st = ocl_fill32(q, out->mem, 0, 0u, bytes);
    if (st != PIT_SUCCESS)
        ocl_block_release(out);
    return st;
}

/* How a call of moe_matmul reads its operands: top-k, and the divisor of
 * slot s's row in X and in Y (or D): k for a per-token operand, 1 for
 * slot rows. */
typedef struct moe_rows {
    int topk, xdiv, ydiv;
} moe_rows;

/* Modes 0 and 1: R (X or dY) rows gathered per expert times W[e] or W[e]^T. */
static pit_status moe_rows_product(ocl_ctx *c, ocl_stream *s, int mode, const ocl_op_config *k,
                                   const pit_index *idx, int32_t max_entries,
                                   const pit_tdesc *R, const pit_tdesc *W,
                                   const pit_tdesc *gates, const pit_tdesc *Out,
                                   const moe_rows *rows)
{
    const int64_t ND = Out->shape[1], KD = R->shape[1];
    const int topk = rows->topk;
    ocl_block slots = {0};
    /* summed over k: through f32 slot rows; stored: the rows no slot
     * writes (unrouted tokens, skipped slots) are zero */
    if (rows->ydiv > 1)
        OCL_TRY(slot_buffer(c, s->queue, (size_t)(idx->capacity * ND) * 4, &slots));
    else
        OCL_TRY(ocl_zero_tensor(c, s->queue, Out));
    const cl_mem ys = slots.mem; /* NULL when k == 1 */
    cl_int nchunks = ocl_op_chunks(max_entries, idx, k->bm);
    cl_kernel kern;
    pit_status st = ocl_op_kernel(c, "pit_moe", k, "pit_moe_gemm", k->wg, &kern);
    if (st == PIT_SUCCESS) {
        ocl_args a;
        ocl_args_begin(&a, kern, "pit_moe_gemm");
        ocl_arg_int(&a, mode);
        ocl_arg_rows(&a, R);
        ocl_arg_mat(&a, W);
        arg_rows_or_null(&a, gates);
        ocl_arg_rows(&a, Out);
        ocl_arg_mem(&a, ys);
        ocl_arg_int(&a, (cl_int)KD);
        ocl_arg_int(&a, (cl_int)ND);
        ocl_arg_int(&a, topk);
        ocl_arg_int(&a, rows->xdiv);
        ocl_arg_int(&a, rows->ydiv); /* unused where ys sums the slots */
        arg_slots(&a, idx);
        ocl_arg_int(&a, nchunks);
        size_t global[2] = {(size_t)ocl_cdiv(ND, k->bn) * k->wg,
                            (size_t)idx->groups * (size_t)nchunks};
        size_t local[2] = {k->wg, 1};
        st = ocl_launch(&a, s->queue, 2, global, local);
    }
    if (st == PIT_SUCCESS && ys)
        st = moe_combine(c, s->queue, ys, topk, Out);
    ocl_block_release(&slots);
    return st;
}

static pit_status moe_dgates(ocl_ctx *c, ocl_stream *s, const ocl_op_config *k,
                             const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                             const pit_tdesc *W, const pit_tdesc *dgates, const pit_tdesc *D)
{
    OCL_TRY(ocl_zero_tensor(c, s->queue, dgates)); /* slots with a skipped id */
    cl_int nchunks = ocl_op_chunks(max_entries, idx, k->bm);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_moe", k, "pit_moe_dgates", k->wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_moe_dgates");
    ocl_arg_rows(&a, X);
    ocl_arg_mat(&a, W);
    ocl_arg_rows(&a, D);
    ocl_arg_rows(&a, dgates);
    ocl_arg_int(&a, (cl_int)X->shape[1]);
    ocl_arg_int(&a, (cl_int)D->shape[1]);
    ocl_arg_int(&a, (cl_int)dgates->shape[1]);
    arg_slots(&a, idx);
    ocl_arg_int(&a, nchunks);
    size_t global[2] = {k->wg, (size_t)idx->groups * (size_t)nchunks};
    size_t local[2] = {k->wg, 1};
    return ocl_launch(&a, s->queue, 2, global, local);
}

static pit_status moe_dw(ocl_ctx *c, ocl_stream *s, const ocl_op_config *k, const pit_index *idx,
                         const pit_tdesc *X, const pit_tdesc *dW, const pit_tdesc *gates,
                         const pit_tdesc *D, const moe_rows *rows)
{
    const int64_t H = X->shape[1], N = D->shape[1];
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_moe", k, "pit_moe_dw", k->wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_moe_dw");
    ocl_arg_rows(&a, X);
    ocl_arg_rows(&a, D);
    arg_rows_or_null(&a, gates);
    ocl_arg_mat(&a, dW);
    ocl_arg_int(&a, (cl_int)H);
    ocl_arg_int(&a, (cl_int)N);
    ocl_arg_int(&a, rows->topk);
    ocl_arg_int(&a, rows->xdiv);
    ocl_arg_int(&a, rows->ydiv);
    arg_slots(&a, idx);
    size_t global[3] = {(size_t)ocl_cdiv(N, k->bn) * k->wg, (size_t)ocl_cdiv(H, k->bm),
                        (size_t)idx->groups};
    size_t local[3] = {k->wg, 1, 1};
    return ocl_launch(&a, s->queue, 3, global, local);
}

static pit_status check_moe_args(int mode, int flags, const pit_index *idx, const pit_tdesc *X,
                                 const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y)
{
    if (mode < 0 || mode > 3 || flags == (PIT_MOE_SLOT_X | PIT_MOE_SLOT_Y) || (mode == 3 && flags))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_matmul: mode %d flags 0x%x (0..3; "
                               "one slot-row flag, none in mode 3)", mode, flags);
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

pit_status ocl_moe_matmul(void *bctx, void *stream, int mode, pit_tile *tile,
                          const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                          const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    const int flags = mode & ~PIT_MOE_MODE_MASK;
    mode &= PIT_MOE_MODE_MASK;
    OCL_TRY(check_moe_args(mode, flags, idx, X, W, gates, Y));
    /* the operand that is still one row a token */
    const int64_t T = (flags & PIT_MOE_SLOT_X) ? Y->shape[0] : X->shape[0];
    if (T == 0)
        return PIT_SUCCESS;
    /* capacity = T * k by the contract: every token-slot may be routed. */
    const int topk = (int)(idx->capacity / T);
    const moe_rows rows = {topk, (flags & PIT_MOE_SLOT_X) ? 1 : topk,
                           (flags & PIT_MOE_SLOT_Y) ? 1 : topk};
    ocl_op_config k = ocl_op_tile(c, X->dtype, tile);
    ocl_op_tile_ran(&k, tile);
    switch (mode) {
    case 0:
    case 1:
        return moe_rows_product(c, s, mode, &k, idx, max_entries, X, W, gates, Y, &rows);
    case 2:
        return moe_dw(c, s, &k, idx, X, W, gates, Y, &rows);
    default:
        return moe_dgates(c, s, &k, idx, max_entries, X, W, gates, Y);
    }
}

/* ---- the expert FFN's activation ------------------------------------------------ */

pit_status ocl_moe_activation(void *bctx, void *stream, int act, const pit_tdesc *U,
                              const pit_tdesc *dA, const pit_tdesc *gates, const pit_tdesc *A,
                              const pit_tdesc *dU, const pit_tdesc *dgates)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    const pit_tdesc *rows = dA ? dA : A;
    if (act < PIT_ACT_SWIGLU || act > PIT_ACT_SILU || !rows || (dA && !dU))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl moe_activation: activation %d, "
                               "A or dA (backward: with dU) needed", act);
    const int64_t R = U->shape[0], F = rows->shape[1];
    const int k = dgates ? (int)dgates->shape[1] : gates ? (int)gates->shape[1] : 1;
    ocl_op_config cfg = ocl_op_elementwise(U->dtype);
    cfg.wg = ocl_op_fit_wg(c, cfg.wg);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_moe", &cfg, "pit_moe_act", cfg.wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_moe_act");
    ocl_arg_int(&a, act);
    ocl_arg_int(&a, (cl_int)F);
    ocl_arg_rows(&a, U);
    arg_rows_or_null(&a, dA);
    arg_rows_or_null(&a, gates);
    ocl_arg_int(&a, k);
    arg_rows_or_null(&a, A);
    arg_rows_or_null(&a, dU);
    arg_rows_or_null(&a, dgates);
    size_t global[2] = {cfg.wg, (size_t)R}, local[2] = {cfg.wg, 1};
    return ocl_launch(&a, s->queue, 2, global, local);
}
