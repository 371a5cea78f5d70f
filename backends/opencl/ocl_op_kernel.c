/*
 * ocl_op_kernel.c - the configuration the operator kernels of sddmm, attention,
 * softmax, moe, rows and elementwise share (kernels/pit_tile.cl's -D set),
 * and building one kernel of a family's program with it.
 */
#include <stdio.h>

#include "ocl_internal.h"

#define OP_ELEMENTWISE_WG 64

ocl_op_config ocl_op_elementwise(pit_dtype dtype)
{
    ocl_op_config k = {dtype, PIT_F32, 1, 1, 1, OP_ELEMENTWISE_WG};
    return k;
}

size_t ocl_op_fit_wg(const ocl_ctx *c, size_t wg)
{
    while (wg > c->max_wg)
        wg /= 2;
    return wg;
}

ocl_op_config ocl_op_tile(const ocl_ctx *c, pit_dtype dtype, const pit_tile *tile)
{
    static const pit_tile own = {32, 64, OCL_OP_BK, 128, 1, 0}; /* when core passes none */
    if (!tile)
        tile = &own;
    ocl_op_config k = {dtype, PIT_F32, tile->bm, tile->bn, tile->bk, (size_t)tile->threads};
    if (k.bm < 1 || k.bm > 128)
        k.bm = 32;
    if (k.bn < 1 || k.bn > 128)
        k.bn = 64;
    if (k.bk < 1 || k.bk > 64)
        k.bk = OCL_OP_BK;
    if (k.wg < 1 || k.wg > 256)
        k.wg = 128;
    k.wg = ocl_op_fit_wg(c, k.wg);
    return k;
}

void ocl_op_tile_ran(const ocl_op_config *k, pit_tile *tile)
{
    if (!tile)
        return;
    tile->bm = k->bm;
    tile->bn = k->bn;
    tile->bk = k->bk;
    tile->threads = (int32_t)k->wg;
}

cl_int ocl_op_chunks(int32_t max_entries, const pit_index *idx, int bm)
{
    int64_t n = max_entries < idx->capacity ? max_entries : idx->capacity;
    return (cl_int)ocl_cdiv(n, bm);
}

pit_status ocl_op_kernel(ocl_ctx *c, const char *source, const ocl_op_config *k,
                         const char *kname, size_t wg, cl_kernel *out)
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
    snprintf(defines, sizeof defines, "-DDT=%d -DMDT=%d -DBM=%d -DBN=%d -DBK=%d -DWG=%zu",
             ocl_dtype_code(k->dtype), k->mask_code, k->bm, k->bn, k->bk, k->wg);
    cl_program prog;
    OCL_TRY(ocl_program_get(c, source, defines, &prog));
    return ocl_kernel_create(c, prog, kname, wg, out);
}
