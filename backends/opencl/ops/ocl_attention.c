/*
 * ocl_attention.c - fused sparse attention (kernels/pit_attention.cl): an
 * online softmax over the key blocks the mask's index lists, so the only
 * memory besides Q, K, V, the mask and O is the index itself, however long
 * the sequence and however few its blocks (no batch x L x L score buffer).
 */
#include "ocl_internal.h"

#define ATT_ROWS 32 /* query rows of a work-group, at most */
#define ATT_KEYS 32 /* keys scored at once */
#define ATT_COLS 64 /* output columns accumulated in one pass */
#define ATT_WG 128

/* Query rows a work-group takes: the block's rows up to ATT_ROWS, a power of
 * two (a program per size, so few sizes). */
static int rows_per_group(int block_rows)
{
    int r = 1;
    while (r < block_rows && r < ATT_ROWS)
        r *= 2;
    return r;
}

pit_status ocl_attention(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Q,
                         const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                         const pit_tdesc *O, float scale)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    const int64_t batch = ocl_batch_of(Q), L = ocl_rows_of(Q);
    const int br = idx->tile.rows, bc = idx->tile.cols;
    if (batch == 0 || L == 0 || ocl_cols_of(V) == 0)
        return PIT_SUCCESS;
    if (br < 1 || bc < 1 || idx->groups_per_batch < ocl_cdiv(L, br))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl attention: index of %dx%d blocks with %d groups per "
                               "batch for %lld query rows", br, bc, idx->groups_per_batch,
                               (long long)L);
    ocl_op_config k = {Q->dtype, 0, rows_per_group(br), ATT_COLS, ATT_KEYS,
                       ocl_op_fit_wg(c, ATT_WG)};
    OCL_TRY(ocl_pattern_code(mask, "attention: mask", &k.mask_code));
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_attention", &k, "pit_attention", k.wg, &kern));
    ocl_args a;
    ocl_args_begin(&a, kern, "pit_attention");
    ocl_arg_mat(&a, Q);
    ocl_arg_mat(&a, K);
    ocl_arg_mat(&a, V);
    ocl_arg_mat(&a, mask);
    ocl_arg_mat(&a, O);
    ocl_arg_int(&a, (cl_int)L);
    ocl_arg_int(&a, (cl_int)ocl_cols_of(Q));
    ocl_arg_int(&a, (cl_int)ocl_cols_of(V));
    ocl_arg_int(&a, br);
    ocl_arg_int(&a, bc);
    ocl_arg_raw(&a, sizeof(cl_float), &scale);
    ocl_arg_index(&a, idx);
    /* every query block gets its work-groups: an empty group writes zeros,
     * and nothing is read back between detection and this launch */
    size_t groups = (size_t)ocl_cdiv(L, br) * (size_t)ocl_cdiv(br, k.bm);
    size_t global[2] = {groups * k.wg, (size_t)batch};
    size_t local[2] = {k.wg, 1};
    return ocl_launch(&a, s->queue, 2, global, local);
}
