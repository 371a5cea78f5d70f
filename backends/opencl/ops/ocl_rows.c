/*
 * ocl_rows.c - row-sparse matmul (kernels/pit_rows.cl): the rows of A an
 * axis-M index lists, times B, into the same rows of C.
 */
#include "ocl_internal.h"

pit_status ocl_matmul_rows(void *bctx, void *stream, pit_tile *tile,
                           const pit_index *idx, int32_t max_entries, const pit_tdesc *A,
                           const pit_tdesc *B, const pit_tdesc *C, int keep_skipped)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    if (A->dtype != B->dtype || A->dtype != C->dtype)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "opencl matmul_rows: dtypes differ");
    if (idx->groups != ocl_batch_of(A) || idx->tile.axis != PIT_AXIS_M)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl matmul_rows: the index must have "
                               "one axis-M group per batch (%d groups for batch %lld)",
                               idx->groups, (long long)ocl_batch_of(A));
    if (!keep_skipped)
        OCL_TRY(ocl_zero_tensor(c, s->queue, C));
    ocl_op_config k = ocl_op_tile(c, A->dtype, tile);
    ocl_op_tile_ran(&k, tile);
    cl_int nchunks = ocl_op_chunks(max_entries, idx, k.bm);
    cl_kernel kern;
    OCL_TRY(ocl_op_kernel(c, "pit_rows", &k, "pit_matmul_rows", k.wg, &kern));
    ocl_args args;
    ocl_args_begin(&args, kern, "pit_matmul_rows");
    ocl_arg_mat(&args, A);
    ocl_arg_mat(&args, B);
    ocl_arg_mat(&args, C);
    ocl_arg_int(&args, (cl_int)ocl_cols_of(C));
    ocl_arg_int(&args, (cl_int)ocl_cols_of(A));
    ocl_arg_mem(&args, (cl_mem)idx->counts);
    ocl_arg_mem(&args, (cl_mem)idx->entries);
    ocl_arg_int(&args, idx->capacity);
    size_t global[3] = {(size_t)ocl_cdiv(ocl_cols_of(C), k.bn) * k.wg, (size_t)nchunks,
                        (size_t)ocl_batch_of(A)};
    size_t local[3] = {k.wg, 1, 1};
    return ocl_launch(&args, s->queue, 3, global, local);
}
