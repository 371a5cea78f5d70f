/*
 * gmm.c - the gathered GEMM on CUDA (kernels/pit_gmm_tc.cu, pit_gmm_cc.cu):
 * for each group and its listed slots, out[slot / cdiv] (+)= gate(slot) *
 * A[slot / adiv] . B[group]; a slot's gate is at slot / kdiv, slot % kdiv.
 * MoE's expert GEMMs (moe.c) and matmul_rows (rows.c) run through it, on
 * the tile core asks for.
 */
#include <string.h>

#include "ops.h"

pit_status pit_cuda_gmm_tile_of(const pit_cuda_ctx *c, const char *op, pit_dtype dt, const pit_tile *asked,
                                pit_tile *t)
{
    *t = asked && asked->bm > 0 ? *asked : pit_cuda_gmm_default_tile(c->arch, dt); /* bm 0: no database row */
    const char *why = "";
    if (!pit_cuda_gmm_tile_valid(c->arch, dt, t, &why))
        return pit_cuda_host->error(
            PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: tile %dx%dx%d (%d threads, %d stages, %s) on sm_%d: %s", op,
            t->bm, t->bn, t->bk, t->threads, t->stages, t->tensor_core ? "tensor cores" : "CUDA cores", c->arch, why);
    return PIT_SUCCESS;
}

/* The warp-specialised kernel's B through the tensor copy engine: where the
 * driver encodes tensor maps. B is [groups, K, N] (one group when sb = 0:
 * shared), boxes of 64 x bk under 128-byte swizzle, the layout the
 * kernel's wgmma's read; the strides (16-byte multiples) are what the
 * tensor-core path already requires. 0 where the driver makes no map. */
static int gmm_tma_b(const pit_cuda_gmm_job *j, const pit_tile *t, pit_gmm_args *a)
{
#ifdef PIT_HIP_SHIM_H /* no copy engine through the HIP shim */
    (void)j, (void)t, (void)a;
    return 0;
#else
    if (!pit_cu.TensorMapEncodeTiled) return 0;
    /* B^T: W [groups, N, K] read as boxes of bk x bn (one a stage) */
    const int64_t rows = j->bt ? a->N : a->K, cols = j->bt ? a->K : j->glu ? 2 * (int64_t)a->N : a->N;
    const uint64_t es = 2, groups = a->sb ? (uint64_t)j->groups : 1;
    cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, groups};
    cuuint64_t strides[2] = {(cuuint64_t)a->ldb * es, (cuuint64_t)(a->sb ? a->sb : a->ldb * rows) * es};
    cuuint32_t box[3] = {64, (cuuint32_t)(j->bt ? t->bn : t->bk), 1}, step[3] = {1, 1, 1};
    CUtensorMapDataType dt = j->dt == PIT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return pit_cu.TensorMapEncodeTiled((CUtensorMap *)a->map_b, dt, 3, (void *)(uintptr_t)a->b, dims, strides, box,
                                       step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#endif
}

int pit_cuda_gmm_ws_runs(const pit_cuda_ctx *c, pit_dtype dt, const pit_tile *t)
{
#ifdef PIT_HIP_SHIM_H
    (void)c, (void)dt, (void)t;
    return 0;
#else
    return c->arch == 90 && pit_cu.TensorMapEncodeTiled && pit_cuda_gmm_ws(t) &&
           pit_cuda_gmm_tile_valid(c->arch, dt, t, NULL);
#endif
}

/* Work items a band of the tensor-core tile order (see pit_gmm_args.band) */
#define GMM_BAND_ITEMS 16

/* Tensor cores: work list on the device (no read-back), persistent CTAs.
 * The warp-specialised tile runs where B's tensor map can be made, the
 * sm_80 mma.sync tile where it cannot; the gated epilogue needs the former
 * (pit_cuda_gmm_ws_runs checked it). */
static pit_status gmm_tensor_core(pit_cuda_ctx *c, CUstream s, pit_cuda_gmm_job *j)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_OP_GMM_TC;
    v.dtype = j->dt;
    v.tile = j->tile;
    v.op_param[1] = j->glu;
    v.op_param[2] = j->bt;
    if (pit_cuda_gmm_ws(&v.tile)) {
        v.op_param[0] = gmm_tma_b(j, &v.tile, &j->a);
        if (!v.op_param[0]) v.tile = pit_cuda_gmm_tile_sm80();
    }
    if ((j->glu || j->bt) && !v.op_param[0])
        return pit_cuda_host->error(PIT_ERR_BACKEND, PIT_VENDOR_NAME " moe_matmul: the driver made no tensor map "
                                    "of the expert weights for the %s", j->glu ? "gated epilogue" : "product with W^T");
    j->tile = v.tile; /* the tile that runs */
    const pit_tile t = v.tile; /* the one tile the list and the grid are sized for */
    const unsigned threads = v.op_param[0] ? PIT_CUDA_GMM_WS_THREADS : 256;
    const int per_sm = pit_cuda_gmm_smem(&t) > 113 * 1024 ? 1 : 2; /* CTAs that fit an SM */
    const int64_t ctas = per_sm * (int64_t)c->sm_count;
    int64_t bound = j->listed_max / t.bm + j->groups + 1; /* items along M, at most */
    CUdeviceptr list = 0;
    pit_status st = pit_cuda_scratch_alloc(c, s, (size_t)(1 + 3 * bound) * 4, "gmm work list", &list);
    if (st != PIT_SUCCESS) return st;
    pit_plan_args pl = {j->a.counts, list, (int32_t)j->groups, t.bm, j->a.capacity, 2}; /* mixed order */
    st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_PLAN, PIT_F32, NULL, 1, 1, 1, 1024, &pl);
    j->a.list = list;
    j->a.ntn = (int32_t)pit_cuda_cdiv(j->a.N, j->glu ? t.bn / 2 : t.bn);
    const int32_t band = c->switches.value[PIT_SWITCH_GMM_BAND];
    j->a.band = band > 0 ? band : GMM_BAND_ITEMS;
    const int64_t work = bound * j->a.ntn, grid = work < ctas ? work : ctas;
    if (st == PIT_SUCCESS) st = pit_cuda_launch_variant(c, s, &v, grid, 1, 1, threads, &j->a);
    return pit_cuda_free_scratch(c, s, list, st);
}

/* The CUDA-core tile (pit_cuda_gmm_tile_cuda_core): 64 x 64 outputs a CTA */
pit_status pit_cuda_gmm_cuda_core(pit_cuda_ctx *c, CUstream s, const pit_cuda_gmm_job *j)
{
    int param[5] = {j->acc, j->mode, 0, 0};
    int64_t gy = j->mode == 2 ? pit_cuda_cdiv(j->a.M, 64) : pit_cuda_cdiv(j->max_rows, 64);
    pit_gmm_args a = j->a;
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_GMM_CC, j->dt, param, pit_cuda_cdiv(a.N, 64), gy, j->groups, 256,
                                &a);
}

/* Before a storing GEMM: zero the output rows no group lists (a row
 * mask on the device, so nothing is read back). */
static pit_status zero_unlisted(pit_cuda_ctx *c, CUstream s, const pit_cuda_gmm_job *j, const pit_cuda_view *out)
{
    size_t n = (size_t)(out->rows * out->batch);
    CUdeviceptr mark = 0;
    pit_status st = pit_cuda_scratch_fill(c, s, n, 0xffffffffu, "row mark", &mark);
    if (st != PIT_SUCCESS) return st;
    pit_mark_args m = {j->a.counts, j->a.entries, mark, j->mark_stride, j->a.capacity, j->a.cdiv};
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_MARK, PIT_F32, NULL, pit_cuda_cdiv(j->a.capacity, 256), j->groups,
                                  1, 256, &m);
    pit_ew_args z = {0, out->ptr, mark, 0, 0, out->ld, out->bs, 1, out->rows, (int32_t)out->rows, (int32_t)out->cols,
                     1, 0};
    if (st == PIT_SUCCESS) st = pit_cuda_launch_zero(c, s, out->dt, &z, out->batch);
    return pit_cuda_free_scratch(c, s, mark, st);
}

/* A token's k results summed without atomics: the tile stores every slot's
 * gated row into slot rows S [T k, N] (unlisted slots zeroed), then
 * pit_op_sum_slots adds each token's k rows in f32 into out. */
static pit_status gmm_sum_slots(pit_cuda_ctx *c, CUstream s, pit_cuda_gmm_job *j, const pit_cuda_view *out)
{
    const int64_t k = j->a.cdiv, slots = out->rows * k;
    pit_cuda_view sv = *out;
    sv.rows = slots, sv.ld = out->cols, sv.bs = slots * out->cols;
    CUdeviceptr buf = 0;
    pit_status st = pit_cuda_scratch_alloc(c, s, (size_t)(slots * out->cols) * pit_cuda_el_bytes(out->dt),
                                           "gmm slot rows", &buf);
    if (st != PIT_SUCCESS) return st;
    sv.ptr = buf;
    j->acc = 0, j->a.cdiv = 1;
    j->a.c = buf, j->a.ldc = out->cols, j->a.sc = 0;
    st = zero_unlisted(c, s, j, &sv);
    if (st == PIT_SUCCESS) st = gmm_tensor_core(c, s, j);
    pit_ew_args a = {buf, out->ptr, 0, out->cols, 0, out->ld, 0, 0, 0, (int32_t)out->rows, (int32_t)out->cols,
                     (int32_t)k, 0};
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch_kind(c, s, PIT_CUDA_OP_SUM_SLOTS, out->dt, NULL,
                                  (unsigned)pit_cuda_cdiv(out->rows * (out->cols / 8), 256), 1, 1, 256, &a);
    return pit_cuda_free_scratch(c, s, buf, st);
}

pit_status pit_cuda_gmm_scatter(pit_cuda_ctx *c, CUstream s, pit_cuda_gmm_job *j, const pit_cuda_view *out,
                                int tensor_core, int keep)
{
    pit_status st = PIT_SUCCESS;
    CUdeviceptr scratch = 0;
    if (j->acc && tensor_core) { /* the tensor-core tile only stores */
        if (out->dt != PIT_F32 && out->batch == 1 && j->a.cdiv > 1 && !j->mark_stride && out->cols % 8 == 0)
            return gmm_sum_slots(c, s, j, out);
        tensor_core = 0;
    }
    if (!j->acc) {
        if (!keep) st = zero_unlisted(c, s, j, out);
    } else if (out->dt == PIT_F32) {
        st = pit_cuda_zero_view(c, s, out);
        j->a.acc = out->ptr;
        j->a.ldacc = out->ld;
        j->a.sacc = j->a.sc;
    } else {
        st = pit_cuda_scratch_fill(c, s, (size_t)(out->rows * out->cols * out->batch), 0, "gmm f32 sums", &scratch);
        j->a.acc = scratch;
        j->a.ldacc = out->cols;
        j->a.sacc = j->a.sc ? out->rows * out->cols : 0;
    }
    if (!tensor_core) j->tile = pit_cuda_gmm_tile_cuda_core();
    if (st == PIT_SUCCESS && (tensor_core || j->max_rows > 0))
        st = tensor_core ? gmm_tensor_core(c, s, j) : pit_cuda_gmm_cuda_core(c, s, j);
    if (st == PIT_SUCCESS && scratch) st = pit_cuda_convert_into(c, s, scratch, out);
    return pit_cuda_free_scratch(c, s, scratch, st);
}
