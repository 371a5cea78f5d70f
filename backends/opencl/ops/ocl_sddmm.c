/*
 * ocl_sddmm.c - SDDMM on the blocks an index lists (kernels/pit_sddmm.cl):
 * C = A . B^T where the mask is on, zero elsewhere.
 */
#include "ocl_internal.h"

#define MAX_BLOCK 128 /* largest side of an output block */

static size_t pow2_at_most(size_t n)
{
    size_t p = 1;
    while (p * 2 <= n)
        p <<= 1;
    return p;
}

static pit_status check_block(const pit_index *idx)
{
    const pit_microtile *t = &idx->tile;
    if (t->rows < 1 || t->cols < 1 || t->rows > MAX_BLOCK || t->cols > MAX_BLOCK)
        return ocl_host->error(PIT_ERR_UNSUPPORTED, "opencl sddmm: block %dx%d (sides 1..%d)",
                               t->rows, t->cols, MAX_BLOCK);
    return PIT_SUCCESS;
}

pit_status ocl_sddmm(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A,
                     const pit_tdesc *B, const pit_tdesc *mask, const pit_tdesc *C)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    OCL_TRY(check_block(idx));
    ocl_op_config k = {A->dtype, 0, idx->tile.rows, idx->tile.cols, OCL_OP_BK, 0};
    OCL_TRY(ocl_pattern_code(mask, "sddmm: mask", &k.mask_code));
    /* Every work-item owns at least one output of the block. */
    size_t outputs = (size_t)k.bm * (size_t)k.bn;
    k.wg = ocl_op_fit_wg(c, pow2_at_most(outputs < 128 ? outputs : 128));
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_sddmm", &k, "pit_sddmm", k.wg, &kern));
    /* Off the listed blocks C is zero: one pass first, then the blocks. */
    pit_status st = ocl_zero_tensor(c, s->queue, C);
    if (st != PIT_SUCCESS) {
        ocl_kernel_release(kern);
        return st;
    }
    ocl_args args;
    ocl_args_begin(&args, kern, "pit_sddmm");
    ocl_arg_mat(&args, A);
    ocl_arg_mat(&args, B);
    ocl_arg_mat(&args, mask);
    ocl_arg_mat(&args, C);
    ocl_arg_int(&args, (cl_int)ocl_rows_of(C));
    ocl_arg_int(&args, (cl_int)ocl_cols_of(C));
    ocl_arg_int(&args, (cl_int)ocl_cols_of(A));
    ocl_arg_index(&args, idx);
    /* The grid covers every slot of the index for every batch: no host
     * read-back needed. */
    size_t global[2] = {(size_t)idx->capacity * k.wg,
                        (size_t)idx->groups_per_batch * (size_t)ocl_batch_of(C)};
    size_t local[2] = {k.wg, 1};
    return ocl_launch(&args, s->queue, 2, global, local);
}
