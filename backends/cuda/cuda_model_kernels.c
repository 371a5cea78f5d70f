/*
 * cuda_model_kernels.c - the variants of pit_ops.cu (operators of
 * dynamic-sparse models): kernel names, -D defines, and the CI list that
 * pit-nvrtc-check compiles through pit_cuda_for_each_variant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_model.h"

static const char *const op_names[] = {
    "pit_op_attention", "pit_op_sddmm", "pit_op_softmax",  "pit_op_softmax", "pit_op_route", "pit_op_plan",
    "pit_op_gmm_tc",    "pit_op_gmm_cc", "pit_op_zero",    "pit_op_relu",    "pit_op_transpose", "pit_op_mark"};

#define OP_COUNT ((int)(sizeof op_names / sizeof op_names[0]))

static int op_number(pit_cuda_kernel_kind kind)
{
    int i = (int)kind - (int)PIT_CUDA_OP_ATTENTION;
    return i >= 0 && i < OP_COUNT ? i + 1 : 0; /* PIT_OP of pit_ops.cu */
}

const char *pit_cuda_model_kernel_name(pit_cuda_kernel_kind kind)
{
    int op = op_number(kind);
    return op ? op_names[op - 1] : "?";
}

char *pit_cuda_model_defines(const pit_cuda_variant *v, char *buf, size_t size)
{
    const int *p = v->op_param;
    int op = op_number(v->kind), dt = (int)v->dtype;
    switch (v->kind) {
    case PIT_CUDA_OP_ATTENTION:
        snprintf(buf, size, "-DPIT_OP=%d -DPIT_DTYPE=%d -DBLOCK=%d -DHD=%d -DHDV=%d -DMASK_DT=%d -DATT_DETECT=%d", op,
                 dt, p[0], p[1], p[2], p[3], p[4]);
        break;
    case PIT_CUDA_OP_SDDMM:
    case PIT_CUDA_OP_SOFTMAX:
    case PIT_CUDA_OP_SOFTMAX_BWD:
        snprintf(buf, size, "-DPIT_OP=%d -DPIT_DTYPE=%d -DMASK_DT=%d", op, dt, p[3]);
        break;
    case PIT_CUDA_OP_GMM_TC:
        snprintf(buf, size,
                 "-DPIT_OP=%d -DPIT_DTYPE=%d -DBM=%d -DBN=%d -DBK=%d -DSTAGES=%d -DACC=%d -DTMA_B=%d -DWS=%d -DPAIR=%d",
                 op, dt, v->tile.bm, v->tile.bn, v->tile.bk, v->tile.stages, p[0], p[1], p[2], p[3]);
        break;
    case PIT_CUDA_OP_GMM_CC:
        snprintf(buf, size, "-DPIT_OP=%d -DPIT_DTYPE=%d -DACC=%d -DMODE=%d", op, dt, p[0], p[1]);
        break;
    default:
        snprintf(buf, size, "-DPIT_OP=%d -DPIT_DTYPE=%d", op, dt);
        break;
    }
    return buf;
}

int pit_cuda_gmm_wgmma(int arch, pit_tile t)
{
    return arch == 90 && t.bm == 128 && t.bk == 64 && (t.bn == 128 || t.bn == 256);
}

long pit_cuda_gmm_smem(int arch, pit_tile t, int ws)
{
    /* wgmma: the stages and their barriers; warp-specialised, the output
     * tile's staging rows too */
    if (pit_cuda_gmm_wgmma(arch, t))
        return (long)t.stages * ((t.bm * t.bk + t.bk * t.bn) * 2 + 16) + (ws ? (long)t.bm * (t.bn * 2 + 16) : 0) +
               1024;
    return (long)t.stages * (t.bm * (t.bk + 8) + t.bk * (t.bn + 8)) * 2;
}

pit_tile pit_cuda_gmm_tile(int arch, int ws)
{
    pit_tile t = {PIT_CUDA_GMM_BM, PIT_CUDA_GMM_BN, PIT_CUDA_GMM_BK, 256, PIT_CUDA_GMM_STAGES, 1};
    if (arch == 90) {
        t.bk = PIT_CUDA_GMM_WGMMA_BK;
        t.stages = ws ? PIT_CUDA_GMM_WS_STAGES : PIT_CUDA_GMM_WGMMA_STAGES;
    }
    const char *e = getenv("PIT_CUDA_GMM_TILE");
    pit_tile u = t;
    if (!e || sscanf(e, "%dx%dx%dx%d", &u.bm, &u.bn, &u.bk, &u.stages) != 4) return t;
    /* pit_op_gmm_tc: 2 x 4 warps of (bm/2) x (bn/4), whole 16-byte loads per
     * thread; wgmma: a stage is copied two ahead */
    if (u.bm < 32 || u.bm % 32 || u.bn < 64 || u.bn % 64 || u.bk < 16 || u.bk % 16 || (u.bm * u.bk / 8) % 256 ||
        (u.bk * u.bn / 8) % 256 || u.stages < 2 || u.stages > 8 || pit_cuda_gmm_smem(arch, u, ws) > 227 * 1024 ||
        (pit_cuda_gmm_wgmma(arch, u) && u.stages < 3))
        return t;
    return u;
}

static void emit(int arch, pit_cuda_kernel_kind kind, pit_dtype dt, const int *param, pit_cuda_variant_fn fn,
                 void *user)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = dt;
    if (param) memcpy(v.op_param, param, sizeof v.op_param);
    if (kind == PIT_CUDA_OP_GMM_TC)
        v.tile = pit_cuda_gmm_tile(arch, v.op_param[2]);
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
                emit(arch, PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
                ++n;
            }
        for (int mdt = 0; mdt <= PIT_U8; ++mdt) { /* mask dtype codes = pit_dtype */
            if (mdt == 2) continue; /* above */
            int p[5] = {64, 64, 64, mdt, det};
            emit(arch, PIT_CUDA_OP_ATTENTION, dt, p, fn, user);
            ++n;
        }
    }
    /* feed 0: cp.async, 1: B by TMA, 2: B by TMA, warp-specialised, 3: and
     * CTA pairs sharing B */
    const int feeds = pit_cuda_gmm_wgmma(arch, pit_cuda_gmm_tile(arch, 0)) ? 4 : 1;
    for (int acc = 0; acc < 2; ++acc)
        for (int feed = 0; feed < feeds; ++feed) {
            int p[5] = {acc, feed > 0, feed > 1, feed > 2};
            emit(arch, PIT_CUDA_OP_GMM_TC, dt, p, fn, user);
            ++n;
        }
    return n;
}

static int emit_dtype(int arch, pit_dtype dt, pit_cuda_variant_fn fn, void *user)
{
    static const pit_cuda_kernel_kind masked[] = {PIT_CUDA_OP_SDDMM, PIT_CUDA_OP_SOFTMAX, PIT_CUDA_OP_SOFTMAX_BWD};
    static const pit_cuda_kernel_kind plain[] = {PIT_CUDA_OP_ZERO, PIT_CUDA_OP_RELU, PIT_CUDA_OP_TRANSPOSE};
    static const int gmm_cc[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {0, 3}}; /* acc, mode */
    int n = 0;
    for (int k = 0; k < 3; ++k)
        for (int mdt = 0; mdt <= PIT_U8; ++mdt, ++n) {
            int p[5] = {0, 0, 0, mdt};
            emit(arch, masked[k], dt, p, fn, user);
        }
    for (int k = 0; k < 3; ++k, ++n) emit(arch, plain[k], dt, NULL, fn, user);
    for (int k = 0; k < 6; ++k, ++n) {
        int p[5] = {gmm_cc[k][0], gmm_cc[k][1], 0, 0};
        emit(arch, PIT_CUDA_OP_GMM_CC, dt, p, fn, user);
    }
    return n;
}

int pit_cuda_model_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user)
{
    static const pit_dtype dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
    int n = 0;
    for (int d = 0; d < 3; ++d) {
        n += emit_dtype(arch, dtypes[d], fn, user);
        if (dtypes[d] != PIT_F32 && arch >= 80) n += emit_tensor_core(arch, dtypes[d], fn, user);
    }
    emit(arch, PIT_CUDA_OP_ROUTE, PIT_F32, NULL, fn, user);
    emit(arch, PIT_CUDA_OP_PLAN, PIT_F32, NULL, fn, user);
    emit(arch, PIT_CUDA_OP_MARK, PIT_F32, NULL, fn, user);
    return n + 3;
}
