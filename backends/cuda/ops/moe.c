/*
 * moe.c - MoE on CUDA: routing (kernels/pit_moe_route.cu), the expert GEMMs
 * of the forward and backward modes (gmm.c) with the slot-row flags of
 * core/backend.h, and the expert FFN's activation
 * (kernels/pit_elementwise.cu).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- routing ------------------------------------------------------------------ */
static pit_status route_run(pit_cuda_ctx *c, CUstream s, const pit_cuda_view *ids, const pit_index *idx)
{
    pit_status st = pit_cuda_zero_index(s, idx, 1);
    if (st != PIT_SUCCESS) return st;
    pit_route_args a = {ids->ptr, (uint64_t)(uintptr_t)idx->counts, (uint64_t)(uintptr_t)idx->entries,
                        (uint64_t)(uintptr_t)idx->total, ids->ld, (int32_t)ids->rows, (int32_t)ids->cols,
                        idx->groups, idx->capacity};
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ROUTE, PIT_F32, NULL, pit_cuda_cdiv(ids->rows * ids->cols, 256), 1,
                                1, 256, &a);
}

static pit_status cuda_moe_route(void *bctx, void *stream, const pit_tdesc *expert_ids, const pit_index *idx)
{
    pit_cuda_view ids;
    pit_status st = pit_cuda_view_of(expert_ids, "moe_route", "expert_ids", 0, &ids);
    if (st != PIT_SUCCESS) return st;
    if (ids.rows * ids.cols > INT32_MAX)
        return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s", "moe_route",
                              "more than 2^31 token-slots");
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, route_run(c, pit_cuda_stream_of(stream), &ids, idx));
}

/* ---- the expert GEMMs --------------------------------------------------------------- */
typedef struct moe_views {
    pit_cuda_view x, w, g, y;
    int has_gates;
    int flags; /* PIT_MOE_SLOT_X, PIT_MOE_SLOT_Y or 0, and PIT_MOE_GLU(act) */
    int64_t T, H, N, E, k;
} moe_views;

/* X, W, gates, Y as views (core checked their shapes and dtypes); T is the
 * row count of the operand that is one row a token */
static pit_status moe_shapes(const pit_index *idx, int flags, const pit_tdesc *X, const pit_tdesc *W,
                             const pit_tdesc *gates, const pit_tdesc *Y, moe_views *v)
{
    const char *op = "moe_matmul";
    pit_status st;
    if ((st = pit_cuda_view_of(X, op, "X", 0, &v->x)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(W, op, "W", 0, &v->w)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(Y, op, "Y", 0, &v->y)) != PIT_SUCCESS)
        return st;
    v->has_gates = gates != NULL && gates->mem != NULL;
    if (v->has_gates && (st = pit_cuda_view_of(gates, op, "gates", 0, &v->g)) != PIT_SUCCESS) return st;
    v->flags = flags;
    v->T = flags & PIT_MOE_SLOT_X ? v->y.rows : v->x.rows;
    v->E = v->w.batch, v->H = v->w.rows, v->N = v->w.cols;
    if (flags & PIT_MOE_GLU_MASK) { /* W is [E, H, 2N]: the gate's columns, then the up's */
        if (v->w.cols != 2 * v->y.cols)
            return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: gated W has %lld columns, "
                                        "twice Y's %lld needed", op, (long long)v->w.cols, (long long)v->y.cols);
        v->N = v->y.cols;
    }
    v->k = v->has_gates ? v->g.cols : (v->T > 0 ? idx->capacity / v->T : 1);
    return PIT_SUCCESS;
}

static void moe_job(int mode, const pit_index *idx, int32_t max_entries, const moe_views *v, pit_cuda_gmm_job *j)
{
    memset(j, 0, sizeof *j);
    j->dt = v->x.dt;
    j->mode = mode;
    j->glu = (v->flags & PIT_MOE_GLU_MASK) >> 8;
    j->bt = mode == 1;
    j->groups = v->E;
    /* -1: core read no counts back (moe_plans_on_device); a CUDA-core tile
     * then sizes its grid for every slot in one group */
    j->max_rows = max_entries > 0 ? max_entries : max_entries < 0 ? idx->capacity : 0;
    j->listed_max = idx->capacity;
    pit_gmm_args *a = &j->a;
    a->a = v->x.ptr, a->lda = v->x.ld;
    a->b = v->w.ptr, a->ldb = v->w.ld, a->sb = v->w.bs;
    a->gates = v->has_gates && mode != 3 ? v->g.ptr : 0;
    a->ldg = v->has_gates ? v->g.ld : 0;
    a->counts = (uint64_t)(uintptr_t)idx->counts;
    a->entries = (uint64_t)(uintptr_t)idx->entries;
    a->capacity = idx->capacity;
    a->kdiv = (int32_t)v->k;
    a->adiv = v->flags & PIT_MOE_SLOT_X ? 1 : a->kdiv;
    a->cdiv = v->flags & PIT_MOE_SLOT_Y ? 1 : a->kdiv;
    a->N = (int32_t)(mode == 1 ? v->H : v->N);
    a->K = (int32_t)(mode == 1 ? v->N : v->H);
    a->M = (int32_t)v->H;
    if (mode == 0 || mode == 1) {
        a->c = v->y.ptr, a->ldc = v->y.ld;
        j->acc = a->cdiv > 1; /* a token's k results summed; slot rows are stored */
    } else if (mode == 2) { /* out dW = W arg; D = Y arg */
        a->c = v->w.ptr, a->ldc = v->w.ld, a->sc = v->w.bs;
        a->d = v->y.ptr, a->ldd = v->y.ld;
        a->K = 0;
    } else { /* mode 3: dgates += row dots with D = Y arg */
        a->d = v->y.ptr, a->ldd = v->y.ld;
        a->acc = v->g.ptr, a->ldacc = v->g.ld;
    }
}

/* 1 where MoE mode `mode` (slot-row flags allowed) can run on the tensor
 * cores (16-bit, rows 16-byte aligned, W's rows and columns multiples of 8:
 * the forward, and on sm_90 mode 1's product with W^T), whose work list is
 * planned on the device; the CUDA-core grids are sized by the largest count */
static int moe_tensor_core(const pit_cuda_ctx *c, int mode, const pit_cuda_view *x, const pit_cuda_view *w,
                           const pit_cuda_view *y)
{
    const int m = mode & PIT_MOE_MODE_MASK;
    return (m == 0 || (m == 1 && c->arch == 90)) && x->dt != PIT_F32 && c->arch >= 80 && pit_cuda_aligned16(x) &&
           pit_cuda_aligned16(w) && pit_cuda_aligned16(y) && w->rows % 8 == 0 && w->cols % 8 == 0;
}

static int cuda_moe_plans_on_device(void *bctx, int mode, const pit_tdesc *X, const pit_tdesc *W, const pit_tdesc *Y)
{
    pit_cuda_view x, w, y;
    return pit_cuda_view_of(X, "moe_matmul", "X", 0, &x) == PIT_SUCCESS &&
           pit_cuda_view_of(W, "moe_matmul", "W", 0, &w) == PIT_SUCCESS &&
           pit_cuda_view_of(Y, "moe_matmul", "Y", 0, &y) == PIT_SUCCESS && moe_tensor_core(bctx, mode, &x, &w, &y);
}

/* ---- mode 2 (dW) on cuBLAS --------------------------------------------------------------- */
/* Where mode 2's weight gradients run as one cuBLAS GEMM an expert over
 * its listed rows gathered in expert order: 16-bit, rows 16-byte aligned,
 * dW's rows and columns multiples of 8 (the gather's 16-byte steps) */
static int moe_dw_blas_runs(const moe_views *v)
{
    return v->x.dt != PIT_F32 && pit_cuda_aligned16(&v->x) && pit_cuda_aligned16(&v->y) &&
           pit_cuda_aligned16(&v->w) && v->w.rows % 8 == 0 && v->w.cols % 8 == 0;
}

/* The listed slots' rows of x (row slot / div, times the slot's gate with
 * gates) into dst, expert after expert */
static pit_status moe_gather(pit_cuda_ctx *c, CUstream s, const pit_gmm_args *a, const pit_cuda_view *x, int div,
                             uint64_t gates, int64_t E, int64_t most, CUdeviceptr dst)
{
    pit_gather_args g;
    memset(&g, 0, sizeof g);
    g.x = x->ptr, g.y = dst, g.counts = a->counts, g.entries = a->entries, g.gates = gates;
    g.ldx = x->ld, g.ldy = x->cols, g.ldg = a->ldg;
    g.cols = (int32_t)x->cols, g.capacity = a->capacity, g.div = div, g.kdiv = a->kdiv, g.E = (int32_t)E;
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_MOE_GATHER, x->dt, NULL, (unsigned)pit_cuda_cdiv(most, 8),
                                (unsigned)E, 1, 256, &g);
}

/* dW[e] = sum over e's slots gate(s) X[s / adiv]^T . D[s / cdiv]: both
 * operands gathered in expert order, then dW[e]^T = Dg_e^T . Xg_e on
 * cuBLAS (column-major), zeros for an expert without slots. The counts
 * are read back (the backward's grids need them anyway). */
static pit_status moe_dw_blas(pit_cuda_ctx *c, CUstream s, const pit_cuda_gmm_job *j, const moe_views *v)
{
    const int64_t E = v->E, Mr = v->w.rows, Nc = v->w.cols;
    const size_t el = pit_cuda_el_bytes(v->x.dt);
    if (E <= 0) return PIT_SUCCESS;
    int32_t *cnt = calloc((size_t)E, sizeof *cnt);
    pit_cuda_blas_gemm *g = calloc((size_t)E, sizeof *g);
    pit_status st = cnt && g ? PIT_SUCCESS : pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME
                                                                  " moe_matmul: host lists of %lld experts",
                                                                  (long long)E);
    CUresult r = st == PIT_SUCCESS ? pit_cu.MemcpyDtoHAsync(cnt, (CUdeviceptr)j->a.counts, (size_t)E * 4, s)
                                   : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && st == PIT_SUCCESS) r = pit_cu.StreamSynchronize(s);
    if (r != CUDA_SUCCESS) st = pit_cu_fail(r, PIT_CALL(MemcpyDtoHAsync), __FILE__, __LINE__);
    int64_t total = 0, most = 0, n = 0;
    for (int64_t e = 0; st == PIT_SUCCESS && e < E; ++e) {
        pit_cuda_view we = v->w;
        we.batch = 1, we.ptr = v->w.ptr + (uint64_t)(e * v->w.bs) * el;
        if (cnt[e] <= 0) {
            st = pit_cuda_zero_view(c, s, &we);
            continue;
        }
        g[n++] = (pit_cuda_blas_gemm){v->x.dt, 0, 1, Nc, Mr, cnt[e], (uint64_t)(total * Nc) * el, Nc, 0,
                                      (uint64_t)(total * Mr) * el, Mr, 0, we.ptr, v->w.ld, 0, 1};
        total += cnt[e];
        most = cnt[e] > most ? cnt[e] : most;
    }
    CUdeviceptr buf = 0;
    if (st == PIT_SUCCESS && total > 0)
        st = pit_cuda_scratch_alloc(c, s, (size_t)total * (size_t)(Mr + Nc) * el, "moe_matmul dW operands", &buf);
    if (st == PIT_SUCCESS && total > 0) {
        const CUdeviceptr xg = buf, dg = buf + (size_t)total * (size_t)Mr * el;
        for (int64_t i = 0; i < n; ++i) g[i].a += dg, g[i].b += xg;
        st = moe_gather(c, s, &j->a, &v->x, j->a.adiv, j->a.gates, E, most, xg);
        if (st == PIT_SUCCESS) st = moe_gather(c, s, &j->a, &v->y, j->a.cdiv, 0, E, most, dg);
        if (st == PIT_SUCCESS) st = pit_cuda_blas_gemms(c, s, g, (int)n);
        st = pit_cuda_free_scratch(c, s, buf, st);
    }
    free(cnt);
    free(g);
    return st;
}

/* *tile: in, the tile asked for; out, the tile that ran */
static pit_status moe_run(pit_cuda_ctx *c, CUstream s, int mode, pit_tile *tile, const pit_index *idx,
                          int32_t max_entries, const moe_views *v)
{
    pit_cuda_gmm_job j;
    moe_job(mode, idx, max_entries, v, &j);
    j.tile = *tile;
    pit_status st;
    if (mode == 2 && tile->tensor_core && moe_dw_blas_runs(v)) return moe_dw_blas(c, s, &j, v);
    if (mode == 2 || mode == 3) {
        *tile = pit_cuda_gmm_tile_cuda_core();
        pit_cuda_view g = v->g;
        st = mode == 2 ? PIT_SUCCESS : pit_cuda_zero_view(c, s, &g);
        return st == PIT_SUCCESS && (mode == 2 || j.max_rows > 0) ? pit_cuda_gmm_cuda_core(c, s, &j) : st;
    }
    /* mode 1 (W^T) has the warp-specialised kernel only */
    const int tc = tile->tensor_core && moe_tensor_core(c, mode, &v->x, &v->w, &v->y) &&
                   (mode == 0 || pit_cuda_gmm_ws_runs(c, v->x.dt, tile));
    if (j.glu && !(tc && pit_cuda_gmm_ws_runs(c, v->x.dt, tile)))
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " moe_matmul: the gated epilogue needs "
                                    "the sm_90 warp-specialised tile and aligned 16-bit rows "
                                    "(moe_fuses_activation says where)");
    st = pit_cuda_gmm_scatter(c, s, &j, &v->y, tc, 0);
    *tile = j.tile;
    return st;
}

/* The tile runs where its kernel serves the mode: a tensor-core tile the
 * 16-bit forward with aligned rows, the CUDA-core tile everything else. */
static pit_status cuda_moe_matmul(void *bctx, void *stream, int mode, pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, const pit_tdesc *X, const pit_tdesc *W, const pit_tdesc *gates,
                                  const pit_tdesc *Y)
{
    pit_cuda_ctx *c = bctx;
    moe_views v;
    pit_tile t;
    const int flags = mode & ~PIT_MOE_MODE_MASK;
    mode &= PIT_MOE_MODE_MASK;
    const int glu = flags & PIT_MOE_GLU_MASK;
    if (mode > 3 || (mode == 3 && (flags || !(gates && gates->mem))) ||
        (flags & ~(PIT_MOE_SLOT_X | PIT_MOE_SLOT_Y | PIT_MOE_GLU_MASK)) ||
        (flags & (PIT_MOE_SLOT_X | PIT_MOE_SLOT_Y)) == (PIT_MOE_SLOT_X | PIT_MOE_SLOT_Y) ||
        (glu && (mode != 0 || !(flags & PIT_MOE_SLOT_Y) || (glu != PIT_MOE_GLU(PIT_ACT_SWIGLU) &&
                                                            glu != PIT_MOE_GLU(PIT_ACT_GEGLU)))))
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME " moe_matmul: mode %d flags 0x%x (0..3, one slot-row flag; 3 "
                                    "with dgates, no flag; a gated epilogue in mode 0 with slot rows of Y)", mode,
                                    flags);
    pit_status st = moe_shapes(idx, flags, X, W, gates, Y, &v);
    if (st != PIT_SUCCESS || (st = pit_cuda_gmm_tile_of(c, "moe_matmul", v.x.dt, tile, &t)) != PIT_SUCCESS)
        return st;
    pit_tile *ran = tile ? tile : &t; /* the caller learns which tile ran */
    *ran = t;
    PIT_CUDA_WITH_CONTEXT(c, moe_run(c, pit_cuda_stream_of(stream), mode, ran, idx, max_entries, &v));
}

/* ---- the expert FFN's activation ------------------------------------------------------ */
/* t's view, or a zero one where t is NULL (not read, not written) */
static pit_status act_view(const pit_tdesc *t, const char *name, pit_cuda_view *v)
{
    memset(v, 0, sizeof *v);
    return t ? pit_cuda_view_of(t, "moe_activation", name, 0, v) : PIT_SUCCESS;
}

static pit_status cuda_moe_activation(void *bctx, void *stream, int act, const pit_tdesc *U, const pit_tdesc *dA,
                                      const pit_tdesc *gates, const pit_tdesc *A, const pit_tdesc *dU,
                                      const pit_tdesc *dgates)
{
    pit_cuda_view u, da, g, a, du, dg;
    pit_status st;
    const pit_tdesc *rows = dA ? dA : A;
    if (act < PIT_ACT_SWIGLU || act > PIT_ACT_SILU || !rows || (dA && !dU))
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " moe_activation: activation %d, A "
                                    "or dA (backward: with dU) needed", act);
    if ((st = act_view(U, "U", &u)) != PIT_SUCCESS || (st = act_view(dA, "dA", &da)) != PIT_SUCCESS ||
        (st = act_view(gates, "gates", &g)) != PIT_SUCCESS || (st = act_view(A, "A", &a)) != PIT_SUCCESS ||
        (st = act_view(dU, "dU", &du)) != PIT_SUCCESS || (st = act_view(dgates, "dgates", &dg)) != PIT_SUCCESS)
        return st;
    const int64_t F = rows->shape[1];
    if (u.rows == 0 || F == 0) return PIT_SUCCESS;
    const int k = dgates ? (int)dg.cols : gates ? (int)g.cols : 1;
    pit_act_args p = {u.ptr, da.ptr, g.ptr, a.ptr, du.ptr, dg.ptr, u.ld, da.ld, g.ld, a.ld, du.ld, dg.ld,
                      (int32_t)u.rows, (int32_t)F, k, act};
    pit_cuda_ctx *c = bctx;
    PIT_CUDA_WITH_CONTEXT(c, pit_cuda_launch_kind(c, pit_cuda_stream_of(stream), PIT_CUDA_OP_MOE_ACT, u.dt, NULL,
                                                  u.rows, 1, 1, 256, &p));
}

/* The expert FFN's first product with its gated activation in the epilogue:
 * where the gathered GEMM runs the tile on the tensor cores, warp-specialised. */
static int cuda_moe_fuses_activation(void *bctx, int act, const pit_tile *tile, const pit_tdesc *X,
                                     const pit_tdesc *W, const pit_tdesc *A)
{
    pit_cuda_ctx *c = bctx;
    pit_cuda_view x, w, a;
    if ((act != PIT_ACT_SWIGLU && act != PIT_ACT_GEGLU) ||
        pit_cuda_view_of(X, "moe_matmul", "X", 0, &x) != PIT_SUCCESS ||
        pit_cuda_view_of(W, "moe_matmul", "W", 0, &w) != PIT_SUCCESS ||
        pit_cuda_view_of(A, "moe_matmul", "A", 0, &a) != PIT_SUCCESS)
        return 0;
    const pit_tile t = tile && tile->bm > 0 ? *tile : pit_cuda_gmm_default_tile(c->arch, x.dt);
    return t.tensor_core && w.cols == 2 * a.cols && moe_tensor_core(c, 0, &x, &w, &a) &&
           pit_cuda_gmm_ws_runs(c, x.dt, &t);
}

void pit_cuda_register_moe(pit_backend *be)
{
    be->moe_route = cuda_moe_route;
    be->moe_matmul = cuda_moe_matmul;
    be->moe_plans_on_device = cuda_moe_plans_on_device;
    be->moe_activation = cuda_moe_activation;
    be->moe_fuses_activation = cuda_moe_fuses_activation;
}
