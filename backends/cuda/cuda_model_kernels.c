/*
 * cuda_model_kernels.c - the variants of the operator kernels of
 * dynamic-sparse models: -D defines, the gathered GEMM's tiles, and the CI
 * list that pit-nvrtc-check compiles through pit_cuda_for_each_variant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_model.h"

char *pit_cuda_model_defines(const pit_cuda_variant *v, char *buf, size_t size)
{
    const int *p = v->op_param;
    int dt = (int)v->dtype;
    switch (v->kind) {
    case PIT_CUDA_OP_ATTENTION:
        snprintf(buf, size,
                 "-DPIT_DTYPE=%d -DBLOCK=%d -DHD=%d -DHDV=%d -DMASK_DT=%d -DATT_DETECT=%d -DATT_WS=%d -DATT_COLS=%d", dt,
                 p[0], p[1], p[2], p[3], p[4] == 1, p[4] == 2, p[4] == 3);
        break;
    case PIT_CUDA_OP_ATTN_COLS_SCAN:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DMASK_DT=%d", dt, p[3]);
        break;
    case PIT_CUDA_OP_ATTN_DECODE:
    case PIT_CUDA_OP_ATTN_COMBINE:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DKB=%d -DHD=%d", dt, p[0], p[1]);
        break;
    case PIT_CUDA_OP_ATTN_BWD_DQ:
    case PIT_CUDA_OP_ATTN_BWD_DKV:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DHD=%d", dt, p[1]);
        break;
    case PIT_CUDA_OP_SDDMM:
    case PIT_CUDA_OP_SOFTMAX:
    case PIT_CUDA_OP_SOFTMAX_BWD:
    case PIT_CUDA_OP_ATTN_EX:
    case PIT_CUDA_OP_ATTN_EX_DQ:
    case PIT_CUDA_OP_ATTN_EX_DKV:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DMASK_DT=%d", dt, p[3]);
        break;
    case PIT_CUDA_OP_GMM_TC:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DBM=%d -DBN=%d -DBK=%d -DSTAGES=%d -DWS=%d -DGLU=%d -DBT=%d", dt,
                 v->tile.bm, v->tile.bn, v->tile.bk, v->tile.stages, p[0], p[1], p[2]);
        break;
    case PIT_CUDA_OP_GMM_CC:
        snprintf(buf, size, "-DPIT_DTYPE=%d -DACC=%d -DMODE=%d", dt, p[0], p[1]);
        break;
    default:
        snprintf(buf, size, "-DPIT_DTYPE=%d", dt);
        break;
    }
    return buf;
}

/* ---- tiles of the gathered GEMM (cuda_model.h) ------------------------------ */
#define SMEM_MAX (227 * 1024)

pit_tile pit_cuda_gmm_tile_sm90(void)
{
    return (pit_tile){128, 256, 64, PIT_CUDA_GMM_WS_THREADS, 3, 1};
}

pit_tile pit_cuda_gmm_tile_sm80(void)
{
    return (pit_tile){128, 256, 32, 256, 3, 1};
}

pit_tile pit_cuda_gmm_tile_cuda_core(void)
{
    return (pit_tile){64, 64, 16, 256, 1, 0};
}

pit_tile pit_cuda_gmm_default_tile(int arch, pit_dtype dt)
{
    if (dt == PIT_F32 || arch < 80) return pit_cuda_gmm_tile_cuda_core();
    return arch == 90 ? pit_cuda_gmm_tile_sm90() : pit_cuda_gmm_tile_sm80();
}

int pit_cuda_gmm_ws(const pit_tile *t)
{
    return t->tensor_core && t->threads == PIT_CUDA_GMM_WS_THREADS;
}

long pit_cuda_gmm_smem(const pit_tile *t)
{
    /* warp-specialised: the stages and their two barriers, the output
     * tile's staging rows, the 1024-byte alignment */
    if (pit_cuda_gmm_ws(t))
        return (long)t->stages * ((t->bm * t->bk + t->bk * t->bn) * 2 + 16) + (long)t->bm * (t->bn * 2 + 16) + 1024;
    return (long)t->stages * (t->bm * (t->bk + 8) + t->bk * (t->bn + 8)) * 2;
}

static int gmm_ws_valid(int arch, const pit_tile *t, const char **why)
{
    if (arch != 90) return *why = "the 384-thread (warp-specialised wgmma) tile needs sm_90", 0;
    if (t->bm != 128 || t->bk != 64 || (t->bn != 128 && t->bn != 256))
        return *why = "the wgmma tile is 128 x 128 or 128 x 256, 64 deep", 0;
    if (t->stages < 3 || t->stages > 8) return *why = "the wgmma tile takes 3..8 stages", 0;
    return 1;
}

static int gmm_mma_valid(int arch, const pit_tile *t, const char **why)
{
    if (arch < 80) return *why = "tensor-core tiles need sm_80", 0;
    if (t->threads != 256) return *why = "tensor-core tiles run 256 threads (384: the sm_90 wgmma tile)", 0;
    /* 2 x 4 warps of (bm / 2) x (bn / 4), whole 16-byte copies a thread */
    if (t->bm < 32 || t->bm % 32 || t->bn < 64 || t->bn % 64 || t->bk < 16 || t->bk % 16 ||
        (t->bm * t->bk / 8) % 256 || (t->bk * t->bn / 8) % 256)
        return *why = "bm a multiple of 32, bn of 64, bk of 16, whole 16-byte copies a thread", 0;
    if (t->stages < 2 || t->stages > 8) return *why = "2..8 stages", 0;
    return 1;
}

int pit_cuda_gmm_tile_valid(int arch, pit_dtype dt, const pit_tile *t, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    if (!t->tensor_core) {
        const pit_tile cc = pit_cuda_gmm_tile_cuda_core();
        if (t->bm != cc.bm || t->bn != cc.bn || t->bk != cc.bk || t->threads != cc.threads || t->stages > 1)
            return *why = "the CUDA-core tile is 64 x 64 x 16, 256 threads, 1 stage", 0;
        return 1;
    }
    if (dt != PIT_F16 && dt != PIT_BF16) return *why = "tensor-core tiles take f16/bf16", 0;
    if (!(pit_cuda_gmm_ws(t) ? gmm_ws_valid(arch, t, why) : gmm_mma_valid(arch, t, why))) return 0;
    if (pit_cuda_gmm_smem(t) > SMEM_MAX) return *why = "shared memory above 227 KB", 0;
    return 1;
}

static void emit(pit_cuda_kernel_kind kind, pit_dtype dt, const int *param, pit_cuda_variant_fn fn,
                 void *user)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = dt;
    if (param) memcpy(v.op_param, param, sizeof v.op_param);
    fn(&v, user);
}

static void emit_gmm_tc(pit_tile t, pit_dtype dt, const int *param, pit_cuda_variant_fn fn, void *user)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_OP_GMM_TC;
    v.dtype = dt;
    v.tile = t;
    memcpy(v.op_param, param, sizeof v.op_param);
    fn(&v, user);
}

/* tensor-core kernels: f16/bf16 from sm_80 */
static int emit_tensor_core(int arch, pit_dtype dt, pit_cuda_variant_fn fn, void *user)
{
    int n = 0;
    for (int det = 0; det < 2; ++det) { /* detection apart, inside */
        for (int block = 64; block <= 128; block *= 2)
            for (int hd = 64; hd <= 128; hd *= 2) {
                int p[5] = {block, hd, hd, 2, det};
                emit(PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
                ++n;
            }
        for (int mdt = 0; mdt <= PIT_U8; ++mdt) { /* mask dtype codes = pit_dtype */
            if (mdt == 2) continue; /* above */
            int p[5] = {64, 64, 64, mdt, det};
            emit(PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
            ++n;
        }
    }
    /* sm_90: the warp-specialised kernel, blocks of 128, head dims 128 (and
     * 64 on one side), with an element mask and without (the u8 variant) */
    for (int hdv = 64; arch == 90 && hdv <= 128; hdv *= 2)
        for (int mdt = 2; mdt <= PIT_U8; mdt += 2) {
            int p[5] = {128, 128, hdv, mdt, 2};
            emit(PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
            ++n;
        }
    /* key-column tiles: blocks of 64 rows, head dims 64 and 128 (the mask
     * is bits by then: the u8 variant) */
    for (int hd = 64; hd <= 128; hd *= 2) {
        int p[5] = {64, hd, hd, PIT_U8, 3};
        emit(PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
        ++n;
    }
    /* the backward: head dims 64 and 128 */
    for (int hd = 64; hd <= 128; hd *= 2) {
        int p[5] = {0, hd};
        emit(PIT_CUDA_OP_ATTN_BWD_DQ, dt, p, fn, user);
        emit(PIT_CUDA_OP_ATTN_BWD_DKV, dt, p, fn, user);
        n += 2;
    }
    /* decode: key blocks and head dims of 64 and 128; the combine reads no
     * key block (64 only) */
    for (int kb = 64; kb <= 128; kb *= 2)
        for (int hd = 64; hd <= 128; hd *= 2) {
            int p[5] = {kb, hd};
            emit(PIT_CUDA_OP_ATTN_DECODE, dt, p, fn, user);
            ++n;
            if (kb == 64) {
                emit(PIT_CUDA_OP_ATTN_COMBINE, dt, p, fn, user);
                ++n;
            }
        }
    /* the mma.sync tile everywhere (on sm_90: where no TMA map can be made),
     * and on sm_90 the warp-specialised wgmma one, storing also with the
     * gated epilogues (SwiGLU, GeGLU), and with B^T (the backward's dY . W^T) */
    for (int ws = 0; ws < (arch == 90 ? 2 : 1); ++ws)
        for (int glu = 0; glu <= (ws ? 2 : 0); ++glu)
            for (int bt = 0; bt <= (ws && !glu); ++bt) {
                int p[5] = {ws, glu, bt};
                emit_gmm_tc(ws ? pit_cuda_gmm_tile_sm90() : pit_cuda_gmm_tile_sm80(), dt, p, fn, user);
                ++n;
            }
    return n;
}

static int emit_dtype(pit_dtype dt, pit_cuda_variant_fn fn, void *user)
{
    static const pit_cuda_kernel_kind masked[] = {PIT_CUDA_OP_SDDMM,   PIT_CUDA_OP_SOFTMAX,     PIT_CUDA_OP_SOFTMAX_BWD,
                                                  PIT_CUDA_OP_ATTN_EX, PIT_CUDA_OP_ATTN_EX_DQ, PIT_CUDA_OP_ATTN_EX_DKV};
    static const pit_cuda_kernel_kind plain[] = {PIT_CUDA_OP_ZERO, PIT_CUDA_OP_RELU, PIT_CUDA_OP_TRANSPOSE,
                                                 PIT_CUDA_OP_MOE_ACT, PIT_CUDA_OP_MOE_GATHER, PIT_CUDA_OP_SUM_SLOTS};
    static const int gmm_cc[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {0, 3}}; /* acc, mode */
    int n = 0;
    for (int k = 0; k < (int)(sizeof masked / sizeof masked[0]); ++k)
        for (int mdt = 0; mdt <= PIT_U8; ++mdt, ++n) {
            int p[5] = {0, 0, 0, mdt};
            emit(masked[k], dt, p, fn, user);
        }
    for (int k = 0; k < (int)(sizeof plain / sizeof plain[0]); ++k, ++n) emit(plain[k], dt, NULL, fn, user);
    for (int k = 0; k < 6; ++k, ++n) {
        int p[5] = {gmm_cc[k][0], gmm_cc[k][1], 0, 0};
        emit(PIT_CUDA_OP_GMM_CC, dt, p, fn, user);
    }
    return n;
}

int pit_cuda_model_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user)
{
    static const pit_dtype dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
    int n = 0;
    for (int d = 0; d < 3; ++d) {
        n += emit_dtype(dtypes[d], fn, user);
        if (dtypes[d] != PIT_F32 && arch >= 80) n += emit_tensor_core(arch, dtypes[d], fn, user);
    }
    emit(PIT_CUDA_OP_ROUTE, PIT_F32, NULL, fn, user);
    emit(PIT_CUDA_OP_PLAN, PIT_F32, NULL, fn, user);
    emit(PIT_CUDA_OP_MARK, PIT_F32, NULL, fn, user);
    emit(PIT_CUDA_OP_ATTN_COLS_TILES, PIT_F32, NULL, fn, user);
    for (int mdt = 0; mdt <= PIT_U8; ++mdt, ++n) { /* the scan reads the mask of any dtype */
        int p[5] = {0, 0, 0, mdt};
        emit(PIT_CUDA_OP_ATTN_COLS_SCAN, PIT_F32, p, fn, user);
    }
    return n + 4;
}
