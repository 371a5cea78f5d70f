/*
 * cuda_model_ops.c - the CUDA backend's operators of dynamic-sparse models
 * (backend.h): fused sparse attention, SDDMM, sparse softmax and its
 * backward, MoE routing and the gathered expert GEMMs, row-sparse matmul,
 * ReLU and transpose. Kernels: kernels/pit_ops.cu (variants: cuda_model.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_model.h"

/* ---- argument blocks: byte-for-byte the structs of pit_ops.cu ----------- */
typedef struct ix_arg {
    uint64_t counts, entries;
    int32_t capacity, gpb, batched, pad;
} ix_arg;

typedef struct attn_args {
    uint64_t q, k, v, mask, o;
    int64_t ldq, ldk, ldv, ldo, mld;
    int64_t sq, sk, sv, so, ms;
    ix_arg ix;
    uint64_t order;
    int32_t L, mask_pair;
    float scale_log2;
    int32_t pad0;
    uint64_t det, total;
    int32_t groups, parts, heads, ahead;
    int32_t part_blocks, pad;
} attn_args;

typedef struct sddmm_args {
    uint64_t a, b, mask, c;
    int64_t lda, ldb, ldc, mld;
    int64_t sa, sb, sc, ms;
    ix_arg ix;
    int32_t M, N, K, br, bc, parts_c;
} sddmm_args;

typedef struct softmax_args {
    uint64_t x, y, mask, out;
    int64_t ldx, ldy, mld, ldo;
    int64_t sx, sy, ms, so;
    ix_arg ix;
    int32_t M, N, br, bc;
    float scale;
    int32_t pad;
} softmax_args;

typedef struct route_args {
    uint64_t ids, counts, entries, total;
    int64_t ld;
    int32_t T, k, E, capacity;
} route_args;

typedef struct plan_args {
    uint64_t counts, list;
    int32_t groups, bm, capacity, mode;
} plan_args;

typedef struct gmm_args {
    _Alignas(64) uint8_t map_b[128]; /* a CUtensorMap of B (TMA_B variants) */
    uint64_t a, b, d, c, acc, gates, counts, entries, list;
    int64_t lda, ldb, ldc, ldd, ldacc, ldg;
    int64_t sa, sb, sc, sacc;
    int32_t M, N, K, kdiv, capacity, ntn;
} gmm_args;

typedef struct ew_args {
    uint64_t x, y, ids;
    int64_t ldx, sx, ldy, sy, ldid, sid;
    int32_t rows, cols, E, pad;
} ew_args;

typedef struct mark_args {
    uint64_t counts, entries, mark;
    int64_t stride;
    int32_t capacity, kdiv;
} mark_args;

/* pit_util.cu's argument block (f32 -> dtype conversion is reused) */
typedef struct util_args {
    uint64_t f32, out;
    int64_t ld32, s32, ldo, so;
    int32_t rows, cols;
} util_args;

#define SOFTMAX_MAX_BLOCKS 65536 /* pit_ops.cu's shared bitmap */

/* ---- views ---------------------------------------------------------------- */
/* A tensor as [batch, rows, cols] with strides; rank 2 has batch stride 0. */
typedef struct view {
    uint64_t ptr;
    pit_dtype dt;
    int64_t batch, rows, cols, ld, bs;
} view;

static pit_status err(pit_status st, const char *fmt, const char *a, const char *b)
{
    return pit_cuda_host->error(st, fmt, a, b);
}

static size_t el_bytes(pit_dtype d)
{
    return d == PIT_F16 || d == PIT_BF16 ? 2 : d == PIT_U8 ? 1 : 4;
}

static int is_float(pit_dtype d)
{
    return d == PIT_F32 || d == PIT_F16 || d == PIT_BF16;
}

static pit_status view_of(const pit_tdesc *t, const char *op, const char *name, view *v)
{
    memset(v, 0, sizeof *v);
    if (!t || t->rank < 2 || t->rank > 3)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s must have rank 2 or 3", op, name);
    int r = t->rank;
    v->ptr = (uint64_t)(uintptr_t)t->mem + t->offset;
    v->dt = t->dtype;
    v->batch = r == 3 ? t->shape[0] : 1;
    v->rows = t->shape[r - 2];
    v->cols = t->shape[r - 1];
    v->ld = t->strides[r - 2];
    v->bs = r == 3 ? t->strides[0] : 0;
    if (v->rows > INT32_MAX || v->cols > INT32_MAX || t->strides[r - 1] != 1)
        return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s is too large or not unit-stride in its rows", op, name);
    return PIT_SUCCESS;
}

/* Elementwise view of any rank: up to rank 3 as is, above only contiguous. */
static pit_status flat_view(const pit_tdesc *t, const char *op, const char *name, view *v)
{
    if (t->rank >= 2 && t->rank <= 3) return view_of(t, op, name, v);
    int64_t n = 1, stride = 1;
    for (int i = t->rank - 1; i >= 0; --i) {
        if (t->shape[i] != 1 && t->strides[i] != stride)
            return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s of rank above 3 must be contiguous", op, name);
        stride *= t->shape[i];
        n *= t->shape[i];
    }
    int64_t cols = t->rank >= 1 ? t->shape[t->rank - 1] : 1;
    if (cols < 1) cols = 1;
    *v = (view){(uint64_t)(uintptr_t)t->mem + t->offset, t->dtype, 1, n / cols, cols, cols, 0};
    if (v->rows > INT32_MAX || v->cols > INT32_MAX)
        return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s is too large", op, name);
    return PIT_SUCCESS;
}

/* Batch stride of an operand broadcast over `batch` (rank 2: shared). */
static pit_status batch_stride(const view *v, int64_t batch, const char *op, const char *name, int64_t *s)
{
    if (v->batch != batch && !(v->batch == 1 && v->bs == 0))
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s has another batch", op, name);
    *s = v->bs;
    return PIT_SUCCESS;
}

/* MASK_DT of pit_ops.cu: the pit_dtype code */
static int mask_code(pit_dtype d)
{
    return (int)d;
}

static pit_status check_mask(const view *m, const view *out, const char *op)
{
    if (m->dt != PIT_F32 && m->dt != PIT_F16 && m->dt != PIT_BF16 && m->dt != PIT_I32 && m->dt != PIT_U8)
        return err(PIT_ERR_UNSUPPORTED_DTYPE, "cuda %s: %s dtype (f32, f16, bf16, i32 or u8)", op, "mask");
    if (m->rows != out->rows || m->cols != out->cols)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s shape differs from the output's", op, "mask");
    int64_t s;
    return batch_stride(m, out->batch, op, "mask", &s);
}

/* The block index over an output of `batch` x rows x cols: one set of
 * groups per batch, or one set shared by all (index of a rank-2 mask). */
static pit_status index_arg(const pit_index *idx, int64_t batch, int64_t rows, int64_t cols, const char *op,
                            ix_arg *ix)
{
    const pit_microtile *t = &idx->tile;
    if (t->rows < 1 || t->cols < 1 || (int64_t)idx->groups_per_batch * t->rows < rows ||
        (int64_t)idx->capacity * t->cols < cols)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: the %s does not cover the output", op, "block index");
    ix->counts = (uint64_t)(uintptr_t)idx->counts;
    ix->entries = (uint64_t)(uintptr_t)idx->entries;
    ix->capacity = idx->capacity;
    ix->gpb = idx->groups_per_batch;
    ix->batched = (int64_t)idx->groups >= batch * idx->groups_per_batch;
    ix->pad = 0;
    if (!ix->batched && idx->groups != idx->groups_per_batch)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: the %s has groups for neither one nor every batch", op,
                   "block index");
    return PIT_SUCCESS;
}

static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static CUstream cu_stream(void *stream)
{
    return ((pit_cuda_stream *)stream)->s;
}

/* ---- launching ------------------------------------------------------------- */
/* 1 where the environment sets name to value (the opt-ins and opt-outs of
 * this file's kernels) */
static int env_is(const char *name, const char *value)
{
    const char *e = getenv(name);
    return e && strcmp(e, value) == 0;
}

/* The kernel of variant v (compiled or cached) on grid gx x gy x gz. */
static pit_status launch_variant(pit_cuda_ctx *c, CUstream s, const pit_cuda_variant *v, int64_t gx, int64_t gy,
                                 int64_t gz, unsigned threads, void *args)
{
    if (gx > UINT32_MAX / 2)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "cuda %s: grid of %lld blocks is too large",
                                    pit_cuda_kernel_name(v->kind), (long long)gx);
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    return pit_cuda_launch(k, s, (unsigned)gx, (unsigned)gy, (unsigned)gz, threads, args,
                           pit_cuda_kernel_name(v->kind));
}

/* A kernel without a tile: kind, dtype and its op_param. */
static pit_status launch(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, pit_dtype dt, const int *param,
                         int64_t gx, int64_t gy, int64_t gz, unsigned threads, void *args)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = dt;
    if (param) memcpy(v.op_param, param, sizeof v.op_param);
    return launch_variant(c, s, &v, gx, gy, gz, threads, args);
}

/* grid of pit_op_relu: 256 columns per CTA, groups of 8 rows looped,
 * about 32 CTAs an SM: a grid of one CTA a few rows costs more in CTA
 * launches than the work */
static pit_status launch_relu(pit_cuda_ctx *c, CUstream s, pit_dtype dt, ew_args *a, int64_t batch)
{
    int64_t gx = cdiv(a->cols, 256), gy = cdiv(32 * (int64_t)c->sm_count, gx * (batch > 0 ? batch : 1));
    if (gy > cdiv(a->rows, 8)) gy = cdiv(a->rows, 8);
    return launch(c, s, PIT_CUDA_OP_RELU, dt, NULL, gx, gy > 0 ? gy : 1, batch, 256, a);
}

/* pit_op_zero: 256 columns x chunks of 256 rows a CTA */
static pit_status launch_zero(pit_cuda_ctx *c, CUstream s, pit_dtype dt, ew_args *a, int64_t batch)
{
    int64_t gy = cdiv(a->rows, 256);
    return launch(c, s, PIT_CUDA_OP_ZERO, dt, NULL, cdiv(a->cols, 256), gy < 1 ? 1 : gy < 65535 ? gy : 65535, batch,
                  256, a);
}

static pit_status zero_view(pit_cuda_ctx *c, CUstream s, const view *v)
{
    ew_args a = {0, v->ptr, 0, 0, 0, v->ld, v->bs, 0, 0, (int32_t)v->rows, (int32_t)v->cols, 0, 0};
    return launch_zero(c, s, v->dt, &a, v->batch);
}

/* Scratch of n 4-byte words (f32 sums, int counters), zeroed, ordered on
 * s; nothing left allocated on failure */
static pit_status scratch_words(CUstream s, size_t n, CUdeviceptr *p)
{
    CU_CHECK(pit_cu.MemAllocAsync(p, (n ? n : 1) * 4, s), "cuMemAllocAsync(scratch)");
    CUresult r = n ? pit_cu.MemsetD32Async(*p, 0, n, s) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
        pit_cu.MemFreeAsync(*p, s);
        *p = 0;
        return pit_cu_fail(r, "cuMemsetD32Async(scratch)", __FILE__, __LINE__);
    }
    return PIT_SUCCESS;
}

static pit_status free_scratch(CUstream s, CUdeviceptr p, pit_status st)
{
    if (!p) return st;
    CUresult r = pit_cu.MemFreeAsync(p, s);
    if (st == PIT_SUCCESS && r != CUDA_SUCCESS) return pit_cu_fail(r, "cuMemFreeAsync(scratch)", __FILE__, __LINE__);
    return st;
}

/* f32 [rows, cols] scratch -> the output view (pit_util.cu's converter) */
static pit_status convert_into(pit_cuda_ctx *c, CUstream s, CUdeviceptr f32, const view *out)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_CONVERT;
    v.dtype = out->dt;
    util_args u = {f32, out->ptr, out->cols, out->rows * out->cols, out->ld, out->bs, (int32_t)out->rows,
                   (int32_t)out->cols};
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    return pit_cuda_launch(k, s, (unsigned)cdiv(out->cols, 256), (unsigned)(out->rows < 4096 ? out->rows : 4096),
                           (unsigned)out->batch, 256, &u, "pit_convert_f32");
}

/* Runs body between push and pop of the context. */
#define WITH_CONTEXT(c, body)                               \
    do {                                                    \
        pit_status st_push_ = pit_cuda_push(c);             \
        if (st_push_ != PIT_SUCCESS) return st_push_;       \
        pit_status st_body_ = (body);                       \
        pit_cuda_pop();                                     \
        return st_body_;                                    \
    } while (0)

/* ---- SDDMM ------------------------------------------------------------------- */
static pit_status sddmm_run(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const view *a, const view *b,
                            const view *m, const view *o)
{
    sddmm_args p;
    memset(&p, 0, sizeof p);
    pit_status st;
    if ((st = index_arg(idx, o->batch, o->rows, o->cols, "sddmm", &p.ix)) != PIT_SUCCESS ||
        (st = batch_stride(a, o->batch, "sddmm", "A", &p.sa)) != PIT_SUCCESS ||
        (st = batch_stride(b, o->batch, "sddmm", "B", &p.sb)) != PIT_SUCCESS)
        return st;
    p.a = a->ptr, p.b = b->ptr, p.mask = m->ptr, p.c = o->ptr;
    p.lda = a->ld, p.ldb = b->ld, p.ldc = o->ld, p.mld = m->ld;
    p.sc = o->bs, p.ms = m->bs;
    p.M = (int32_t)o->rows, p.N = (int32_t)o->cols, p.K = (int32_t)a->cols;
    p.br = idx->tile.rows, p.bc = idx->tile.cols;
    p.parts_c = (int32_t)cdiv(p.bc, 32);
    if ((st = zero_view(c, s, o)) != PIT_SUCCESS) return st;
    int param[5] = {0, 0, 0, mask_code(m->dt)};
    int64_t parts = cdiv(p.br, 32) * p.parts_c;
    return launch(c, s, PIT_CUDA_OP_SDDMM, o->dt, param, (int64_t)idx->capacity * parts, cdiv(o->rows, p.br),
                  o->batch, 256, &p);
}

static pit_status cuda_sddmm(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A, const pit_tdesc *B,
                             const pit_tdesc *mask, const pit_tdesc *C)
{
    view a, b, m, o;
    pit_status st;
    if ((st = view_of(A, "sddmm", "A", &a)) != PIT_SUCCESS || (st = view_of(B, "sddmm", "B", &b)) != PIT_SUCCESS ||
        (st = view_of(mask, "sddmm", "mask", &m)) != PIT_SUCCESS || (st = view_of(C, "sddmm", "C", &o)) != PIT_SUCCESS ||
        (st = check_mask(&m, &o, "sddmm")) != PIT_SUCCESS)
        return st;
    if (!is_float(o.dt) || a.dt != o.dt || b.dt != o.dt)
        return err(PIT_ERR_UNSUPPORTED_DTYPE, "cuda %s: %s must share one float dtype", "sddmm", "A, B and C");
    if (a.rows != o.rows || b.rows != o.cols || a.cols != b.cols)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s do not match", "sddmm", "A, B and C");
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, sddmm_run(c, cu_stream(stream), idx, &a, &b, &m, &o));
}

/* ---- sparse softmax (forward 3, backward 4) ----------------------------------- */
static pit_status softmax_run(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, const pit_index *idx,
                              const view *x, const view *y, const view *m, const view *o, float scale)
{
    softmax_args p;
    memset(&p, 0, sizeof p);
    pit_status st = index_arg(idx, o->batch, o->rows, o->cols, "softmax", &p.ix);
    if (st != PIT_SUCCESS) return st;
    if (idx->capacity > SOFTMAX_MAX_BLOCKS)
        return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s", "softmax", "more than 65536 column blocks per row");
    p.x = x->ptr, p.y = y ? y->ptr : 0, p.mask = m->ptr, p.out = o->ptr;
    p.ldx = x->ld, p.ldy = y ? y->ld : 0, p.mld = m->ld, p.ldo = o->ld;
    p.sx = x->bs, p.sy = y ? y->bs : 0, p.ms = m->bs, p.so = o->bs;
    p.M = (int32_t)o->rows, p.N = (int32_t)o->cols;
    p.br = idx->tile.rows, p.bc = idx->tile.cols;
    p.scale = scale;
    int param[5] = {0, 0, 0, mask_code(m->dt)};
    unsigned warps = p.br < 8 ? (unsigned)p.br : 8; /* a warp per row of the row-block */
    return launch(c, s, kind, o->dt, param, cdiv(o->rows, p.br), o->batch, 1, 32 * warps, &p);
}

static pit_status softmax_views(const char *op, const pit_tdesc *X, const pit_tdesc *Y2, const pit_tdesc *mask,
                                const pit_tdesc *out, view *x, view *y, view *m, view *o)
{
    pit_status st;
    if ((st = view_of(X, op, "X", x)) != PIT_SUCCESS || (st = view_of(mask, op, "mask", m)) != PIT_SUCCESS ||
        (st = view_of(out, op, "Y", o)) != PIT_SUCCESS || (Y2 && (st = view_of(Y2, op, "dY", y)) != PIT_SUCCESS) ||
        (st = check_mask(m, o, op)) != PIT_SUCCESS)
        return st;
    int same = x->dt == o->dt && x->rows == o->rows && x->cols == o->cols && x->batch == o->batch;
    if (Y2) same = same && y->dt == o->dt && y->rows == o->rows && y->cols == o->cols && y->batch == o->batch;
    if (!is_float(o->dt) || !same)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s must share dtype and shape", op, "the operands");
    return PIT_SUCCESS;
}

static pit_status cuda_softmax_sparse(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *X,
                                      const pit_tdesc *mask, const pit_tdesc *Y, float scale)
{
    view x, m, o;
    pit_status st = softmax_views("softmax", X, NULL, mask, Y, &x, NULL, &m, &o);
    if (st != PIT_SUCCESS) return st;
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, softmax_run(c, cu_stream(stream), PIT_CUDA_OP_SOFTMAX, idx, &x, NULL, &m, &o, scale));
}

static pit_status cuda_softmax_backward(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Y,
                                        const pit_tdesc *dY, const pit_tdesc *mask, const pit_tdesc *dX, float scale)
{
    view y, dy, m, o;
    pit_status st = softmax_views("softmax backward", Y, dY, mask, dX, &y, &dy, &m, &o);
    if (st != PIT_SUCCESS) return st;
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, softmax_run(c, cu_stream(stream), PIT_CUDA_OP_SOFTMAX_BWD, idx, &y, &dy, &m, &o, scale));
}

/* ---- attention ----------------------------------------------------------------- */
static int aligned16(const view *v)
{
    int64_t vec = 16 / (int64_t)el_bytes(v->dt);
    return v->ptr % 16 == 0 && v->ld % vec == 0 && v->bs % vec == 0;
}

/* The fused kernel's shapes: 16-bit on tensor cores, blocks 64/128, head
 * dims 64/128, 16-byte rows. */
static int attention_fusable(const pit_cuda_ctx *c, const pit_index *idx, const view *q, const view *k,
                             const view *v, const view *o)
{
    int block = idx->tile.rows;
    return q->dt != PIT_F32 && c->arch >= 80 && idx->tile.cols == block && (block == 64 || block == 128) &&
           (q->cols == 64 || q->cols == 128) && (v->cols == 64 || v->cols == 128) && aligned16(q) &&
           aligned16(k) && aligned16(v) && aligned16(o);
}

/* The fused kernel's arguments that both launches share (not the order
 * plan, nor the detection inside the kernel) */
static pit_status attention_args(const pit_index *idx, const view *q, const view *k, const view *v, const view *m,
                                 const view *o, float scale, attn_args *a)
{
    memset(a, 0, sizeof *a);
    pit_status st = index_arg(idx, q->batch, q->rows, q->rows, "attention", &a->ix);
    if (st != PIT_SUCCESS) return st;
    a->q = q->ptr, a->k = k->ptr, a->v = v->ptr, a->mask = m->ptr, a->o = o->ptr;
    a->ldq = q->ld, a->ldk = k->ld, a->ldv = v->ld, a->ldo = o->ld, a->mld = m->ld;
    a->sq = q->bs, a->sk = k->bs, a->sv = v->bs, a->so = o->bs, a->ms = m->bs;
    a->L = (int32_t)q->rows;
    uint64_t pair = 2 * el_bytes(m->dt); /* two elements as one aligned load */
    a->mask_pair = m->ptr % pair == 0 && m->ld % 2 == 0 && m->bs % 2 == 0;
    a->scale_log2 = scale * 1.4426950408889634f;
    return PIT_SUCCESS;
}

/* The fused kernel over a detected index. */
static pit_status attention_fused(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const view *q, const view *k,
                                  const view *v, const view *m, const view *o, float scale)
{
    attn_args a;
    pit_status st = attention_args(idx, q, k, v, m, o, scale, &a);
    if (st != PIT_SUCCESS) return st;
    int block = idx->tile.rows;
    int param[5] = {block, (int)q->cols, (int)v->cols, mask_code(m->dt), 0};
    /* the query blocks with the most key blocks start first (pit_op_plan
     * mode 1), when there are more CTAs than fit at once */
    const int64_t nqb = cdiv(q->rows, block);
    int64_t groups = a.ix.batched ? q->batch * idx->groups_per_batch : nqb;
    int64_t ctas = nqb * q->batch;
    CUdeviceptr order = 0;
    if (idx->capacity < 1024 && ctas > 2 * (int64_t)c->sm_count && !getenv("PIT_CUDA_NO_ORDER")) {
        CU_CHECK(pit_cu.MemAllocAsync(&order, (size_t)groups * 4, s), "cuMemAllocAsync(attention order)");
        plan_args pl = {a.ix.counts, order, (int32_t)groups, 1, idx->capacity, 1};
        st = launch(c, s, PIT_CUDA_OP_PLAN, PIT_F32, NULL, 1, 1, 1, 1024, &pl);
        a.order = order;
    }
    if (st == PIT_SUCCESS)
        st = launch(c, s, PIT_CUDA_OP_ATTENTION, q->dt, param, (unsigned)nqb, q->batch, 1,
                    (unsigned)(block / 16 * 32), &a);
    return free_scratch(s, order, st);
}

/* A CUDA-core tile for P.V with bm = the block (pit_cuda_tile_valid picks). */
static pit_status compose_tile(pit_dtype dt, int block, pit_tile *t)
{
    static const int threads[] = {256, 128, 64, 32}, widths[] = {64, 32, 16};
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) {
            *t = (pit_tile){block, widths[j], 16, threads[i], 2, 0};
            if (pit_cuda_tile_valid(dt, t, NULL)) return PIT_SUCCESS;
        }
    return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s", "attention", "no dense tile for this block size");
}

static pit_tdesc desc3(uint64_t ptr, pit_dtype dt, int64_t batch, int64_t rows, int64_t cols, int64_t ld, int64_t bs)
{
    pit_tdesc d;
    memset(&d, 0, sizeof d);
    d.dtype = dt;
    d.rank = 3;
    d.shape[0] = batch, d.shape[1] = rows, d.shape[2] = cols;
    d.strides[0] = bs, d.strides[1] = ld, d.strides[2] = 1;
    d.mem = (void *)(uintptr_t)ptr;
    return d;
}

/* Any dtype or shape: SDDMM -> softmax in place -> P.V on the same index,
 * through a scratch score matrix [BH, L, L]. */
static pit_status attention_composed(pit_cuda_ctx *c, void *stream, const pit_index *idx, const view *q,
                                     const view *k, const view *v, const view *m, const view *o, float scale)
{
    CUstream s = cu_stream(stream);
    pit_tile tile;
    pit_status st = compose_tile(q->dt, idx->tile.rows, &tile);
    if (st != PIT_SUCCESS) return st;
    int64_t L = q->rows, bh = q->batch;
    CUdeviceptr S = 0;
    CU_CHECK(pit_cu.MemAllocAsync(&S, (size_t)(bh * L * L) * el_bytes(q->dt) + 4, s), "cuMemAllocAsync(attention S)");
    view sv = {S, q->dt, bh, L, L, L, L * L};
    st = sddmm_run(c, s, idx, q, k, m, &sv);
    if (st == PIT_SUCCESS) st = softmax_run(c, s, PIT_CUDA_OP_SOFTMAX, idx, &sv, NULL, m, &sv, scale);
    int batched = (int64_t)idx->groups >= bh * idx->groups_per_batch;
    /* matmul_sparse reads batch b's groups at b * groups_per_batch: a shared
     * index goes one batch at a time */
    for (int64_t b = 0; st == PIT_SUCCESS && b < (batched ? 1 : bh); ++b) {
        int64_t nb = batched ? bh : 1;
        pit_tdesc P = desc3(S + (uint64_t)(b * L * L) * el_bytes(q->dt), q->dt, nb, L, L, L, L * L);
        pit_tdesc V = desc3(v->ptr + (uint64_t)(b * v->bs) * el_bytes(v->dt), v->dt, nb, L, v->cols, v->ld, v->bs);
        pit_tdesc O = desc3(o->ptr + (uint64_t)(b * o->bs) * el_bytes(o->dt), o->dt, nb, L, o->cols, o->ld, o->bs);
        pit_cuda_pop(); /* matmul_sparse pushes the context itself */
        st = pit_cuda_matmul_sparse(c, stream, &tile, idx, idx->capacity, 0, &P, &V, &O);
        pit_status pst = pit_cuda_push(c);
        if (st == PIT_SUCCESS) st = pst;
    }
    return free_scratch(s, S, st);
}

/* Q, K, V, mask and O as checked views; *none: nothing to compute */
static pit_status attention_views(const pit_tdesc *Q, const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                                  const pit_tdesc *O, view *q, view *k, view *v, view *m, view *o, int *none)
{
    pit_status st;
    const char *op = "attention";
    if ((st = view_of(Q, op, "Q", q)) != PIT_SUCCESS || (st = view_of(K, op, "K", k)) != PIT_SUCCESS ||
        (st = view_of(V, op, "V", v)) != PIT_SUCCESS || (st = view_of(mask, op, "mask", m)) != PIT_SUCCESS ||
        (st = view_of(O, op, "O", o)) != PIT_SUCCESS)
        return st;
    if (!is_float(q->dt) || k->dt != q->dt || v->dt != q->dt || o->dt != q->dt)
        return err(PIT_ERR_UNSUPPORTED_DTYPE, "cuda %s: %s must share one float dtype", op, "Q, K, V and O");
    if (k->batch != q->batch || v->batch != q->batch || o->batch != q->batch || k->rows != q->rows ||
        v->rows != q->rows || o->rows != q->rows || k->cols != q->cols || o->cols != v->cols)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s do not match", op, "Q, K, V and O");
    view sq = {0, q->dt, q->batch, q->rows, q->rows, 0, 0}; /* the score matrix, for the mask check */
    if ((st = check_mask(m, &sq, op)) != PIT_SUCCESS) return st;
    *none = q->rows == 0 || q->batch == 0 || v->cols == 0;
    return PIT_SUCCESS;
}

/* attention over a detected index, on checked views (context pushed) */
static pit_status attention_indexed(pit_cuda_ctx *c, void *stream, const pit_index *idx, const view *q,
                                    const view *k, const view *v, const view *m, const view *o, float scale)
{
    if (attention_fusable(c, idx, q, k, v, o))
        return attention_fused(c, cu_stream(stream), idx, q, k, v, m, o, scale);
    /* The composed kernels read entries through pit_entry_index: the "full"
     * marks core asks for (backend.h) cost them nothing. */
    return attention_composed(c, stream, idx, q, k, v, m, o, scale);
}

static pit_status cuda_attention(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Q,
                                 const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask, const pit_tdesc *O,
                                 float scale)
{
    view q, k, v, m, o;
    int none = 1;
    pit_status st = attention_views(Q, K, V, mask, O, &q, &k, &v, &m, &o, &none);
    if (st != PIT_SUCCESS || none) return st;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, attention_indexed(c, stream, idx, &q, &k, &v, &m, &o, scale));
}

/* ---- attention with its detection ------------------------------------------------ */
/* CUDA only: the HIP plug-in, which compiles this file through its shim,
 * leaves the entry NULL (core then detects and calls attention_sparse). */
#ifndef PIT_HIP_SHIM_H
/* Detection inside the fused kernel (pit_op_attention with ATT_DETECT) by
 * default: it saves the detection launch and the order plan. On the H100,
 * since the ex2 softmax, the call takes 0.155 ms against 0.161 ms for
 * detection then kernel with a bf16 mask and 0.141 against 0.145 ms with a
 * u8 one (three runs, docs/PERF-NOTES.md, eighth session; in the sixth it
 * lost, 0.18 against 0.17 ms). PIT_CUDA_ATTENTION_DETECT=apart keeps the
 * detection a kernel of its own. Whole blocks (L a multiple of the block),
 * 16-byte mask rows, groups one a query block. */
static int attention_detect_inside(const pit_index *idx, const view *q, const view *m)
{
    const int64_t block = idx->tile.rows, vec = 16 / (int64_t)el_bytes(m->dt), nkb = q->rows / block;
    return !env_is("PIT_CUDA_ATTENTION_DETECT", "apart") && q->rows % block == 0 && m->ptr % 16 == 0 && m->ld % vec == 0 &&
           m->bs % vec == 0 && idx->groups_per_batch == nkb && idx->capacity >= nkb &&
           idx->capacity < PIT_ENTRY_FULL;
}

/* Key blocks a detection part of the kernel reads (4 x 32 KB with bf16
 * 128 x 128 blocks; PIT_CUDA_ATTENTION_PART=n, 1..32, for sweeps). The items
 * that run ahead of the attention (PIT_CUDA_ATTENTION_AHEAD=n, for sweeps)
 * are about one wave: two CTAs an SM. */
#define ATTENTION_PART_BLOCKS 4

static pit_status attention_detect_fused(pit_cuda_ctx *c, CUstream s, const pit_index *idx, const view *q,
                                         const view *k, const view *v, const view *m, const view *o, float scale)
{
    attn_args a;
    pit_status st = attention_args(idx, q, k, v, m, o, scale, &a);
    if (st != PIT_SUCCESS) return st;
    const int block = idx->tile.rows;
    const int64_t nkb = q->rows / block, groups = a.ix.batched ? q->batch * nkb : nkb;
    const char *pe = getenv("PIT_CUDA_ATTENTION_PART");
    const int part_blocks = pe && atoi(pe) > 0 && atoi(pe) <= 32 ? atoi(pe) : ATTENTION_PART_BLOCKS;
    const int64_t parts = cdiv(nkb, part_blocks), heads = a.ix.batched ? 1 : q->batch;
    const int64_t items = groups * (parts + heads);
    if (items > INT32_MAX / 2)
        return err(PIT_ERR_UNSUPPORTED, "cuda %s: %s", "attention", "too many blocks for one launch");
    const char *e = getenv("PIT_CUDA_ATTENTION_AHEAD");
    int64_t ahead_items = e && atoi(e) > 0 ? atoi(e) : 2 * (int64_t)c->sm_count;
    int64_t ahead = cdiv(ahead_items, parts + heads);
    a.groups = (int32_t)groups, a.parts = (int32_t)parts, a.heads = (int32_t)heads;
    a.ahead = (int32_t)(ahead < 1 ? 1 : ahead > groups ? groups : ahead);
    a.part_blocks = part_blocks;
    a.total = (uint64_t)(uintptr_t)idx->total;
    CUdeviceptr det = 0;
    if ((st = pit_cuda_zero_index(s, idx)) != PIT_SUCCESS || (st = scratch_words(s, (size_t)groups + 1, &det)) != PIT_SUCCESS)
        return st; /* det[0]: the next work item; det[1 + g]: group g's finished parts */
    a.det = det;
    int param[5] = {block, (int)q->cols, (int)v->cols, mask_code(m->dt), 1};
    st = launch(c, s, PIT_CUDA_OP_ATTENTION, q->dt, param, items, 1, 1, (unsigned)(block / 16 * 32), &a);
    return free_scratch(s, det, st);
}

static pit_status cuda_attention_detect(void *bctx, void *stream, const pit_tdesc *detect_view, pit_index *idx,
                                        const pit_tdesc *Q, const pit_tdesc *K, const pit_tdesc *V,
                                        const pit_tdesc *mask, const pit_tdesc *O, float scale)
{
    view q, k, v, m, o;
    int none = 1;
    pit_cuda_ctx *c = bctx;
    pit_status st = attention_views(Q, K, V, mask, O, &q, &k, &v, &m, &o, &none);
    if (st != PIT_SUCCESS) return st;
    if (!none && idx->tile.axis == PIT_AXIS_K && attention_fusable(c, idx, &q, &k, &v, &o) &&
        attention_detect_inside(idx, &q, &m))
        WITH_CONTEXT(c, attention_detect_fused(c, cu_stream(stream), idx, &q, &k, &v, &m, &o, scale));
    st = pit_cuda_detect(bctx, stream, detect_view, idx, 1);
    if (st != PIT_SUCCESS || none) return st;
    WITH_CONTEXT(c, attention_indexed(c, stream, idx, &q, &k, &v, &m, &o, scale));
}
#endif

/* ---- MoE routing ------------------------------------------------------------------ */
static pit_status route_run(pit_cuda_ctx *c, CUstream s, const view *ids, const pit_index *idx)
{
    if (idx->groups > 0)
        CU_CHECK(pit_cu.MemsetD32Async((CUdeviceptr)(uintptr_t)idx->counts, 0, (size_t)idx->groups, s),
                 "cuMemsetD32Async(counts)");
    CU_CHECK(pit_cu.MemsetD32Async((CUdeviceptr)(uintptr_t)idx->total, 0, 1, s), "cuMemsetD32Async(total)");
    route_args a = {ids->ptr, (uint64_t)(uintptr_t)idx->counts, (uint64_t)(uintptr_t)idx->entries,
                    (uint64_t)(uintptr_t)idx->total, ids->ld, (int32_t)ids->rows, (int32_t)ids->cols,
                    idx->groups, idx->capacity};
    return launch(c, s, PIT_CUDA_OP_ROUTE, PIT_F32, NULL, cdiv(ids->rows * ids->cols, 256), 1, 1, 256, &a);
}

static pit_status cuda_moe_route(void *bctx, void *stream, const pit_tdesc *expert_ids, const pit_index *idx)
{
    view ids;
    pit_status st = view_of(expert_ids, "moe_route", "expert_ids", &ids);
    if (st != PIT_SUCCESS) return st;
    if (ids.dt != PIT_I32 || expert_ids->rank != 2)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s must be i32 [T, k]", "moe_route", "expert_ids");
    if ((int64_t)idx->capacity < ids.rows * ids.cols || ids.rows * ids.cols > INT32_MAX)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s", "moe_route", "index capacity below T * k");
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, route_run(c, cu_stream(stream), &ids, idx));
}

/* ---- gathered GEMMs (MoE modes, matmul_rows) ------------------------------------------ */
typedef struct gmm_job {
    gmm_args a;
    pit_dtype dt;
    int mode, acc;
    int64_t groups, max_rows; /* max_rows: most rows of one group (grid of the CUDA-core path) */
    int64_t listed_max;       /* most listed slots of all groups together */
    int64_t mark_stride;      /* output rows per group (matmul_rows) or 0 (MoE: one output) */
} gmm_job;

/* Tensor cores: work list on the device (no read-back), persistent CTAs. */
/* The wgmma GEMM's B stages through the tensor copy engine: where the
 * driver encodes tensor maps, unless PIT_CUDA_GMM_TMA=0. B is [groups, K,
 * N] (one group when sb = 0: shared), boxes of 64 x bk under 128-byte
 * swizzle, the layout the kernel's wgmma's read; the strides (16-byte
 * multiples) are what the tensor-core path already requires, and a map the
 * driver refuses keeps cp.async. */
static int gmm_tma_b(pit_cuda_ctx *c, const gmm_job *j, pit_tile t, gmm_args *a)
{
#ifdef PIT_HIP_SHIM_H /* no copy engine through the HIP shim */
    (void)c, (void)j, (void)t, (void)a;
    return 0;
#else
    if (env_is("PIT_CUDA_GMM_TMA", "0") || !pit_cu.TensorMapEncodeTiled || !pit_cuda_gmm_wgmma(c->arch, t)) return 0;
    const uint64_t es = 2, groups = a->sb ? (uint64_t)j->groups : 1;
    cuuint64_t dims[3] = {(cuuint64_t)a->N, (cuuint64_t)a->K, groups};
    cuuint64_t strides[2] = {(cuuint64_t)a->ldb * es, (cuuint64_t)(a->sb ? a->sb : a->ldb * a->K) * es};
    cuuint32_t box[3] = {64, (cuuint32_t)t.bk, 1}, step[3] = {1, 1, 1};
    CUtensorMapDataType dt = j->dt == PIT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return pit_cu.TensorMapEncodeTiled((CUtensorMap *)a->map_b, dt, 3, (void *)(uintptr_t)a->b, dims, strides, box,
                                       step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#endif
}

/* The TMA variant is warp-specialised (a copying warpgroup beside the two
 * multiplying ones: 384 threads) unless PIT_CUDA_GMM_WS=0; its CTAs go in
 * cluster pairs sharing B (PAIR) where PIT_CUDA_GMM_PAIR=1 (half the
 * weights' L2 traffic, but no faster on the H100: docs/PERF-NOTES.md). */
static unsigned gmm_threads(const pit_cuda_variant *v) { return v->op_param[2] ? 384 : 256; }

/* The paired kernel of v and the pairs the device holds at once; 0 (launch
 * unpaired) where clusters cannot be launched */
static int64_t gmm_pairs(pit_cuda_ctx *c, const pit_cuda_variant *v, pit_cuda_kernel **k)
{
#ifdef PIT_HIP_SHIM_H
    (void)c, (void)v, (void)k;
    return 0;
#else
    if (pit_cuda_get_kernel(c, v, k) != PIT_SUCCESS) return 0;
    return pit_cuda_pair_capacity(*k, gmm_threads(v));
#endif
}

/* grid work items on the paired kernel k of v, two CTAs an item */
static pit_status gmm_launch_pairs(pit_cuda_kernel *k, CUstream s, const pit_cuda_variant *v, int64_t grid,
                                   gmm_args *a)
{
#ifdef PIT_HIP_SHIM_H
    (void)k, (void)s, (void)v, (void)grid, (void)a;
    return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "hip: no CTA clusters");
#else
    return pit_cuda_launch_clusters(k, s, (unsigned)(2 * grid), 2, gmm_threads(v), a,
                                    "cuLaunchKernelEx(pit_op_gmm_tc)");
#endif
}

static pit_status gmm_tensor_core(pit_cuda_ctx *c, CUstream s, gmm_job *j)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_OP_GMM_TC;
    v.dtype = j->dt;
    v.op_param[0] = j->acc;
    v.op_param[1] = gmm_tma_b(c, j, pit_cuda_gmm_tile(c->arch, 0), &j->a);
    v.op_param[2] = v.op_param[1] && !env_is("PIT_CUDA_GMM_WS", "0");
    v.op_param[3] = v.op_param[2] && env_is("PIT_CUDA_GMM_PAIR", "1");
    const pit_tile t = pit_cuda_gmm_tile(c->arch, v.op_param[2]);
    v.tile = t; /* the one tile the list and the grid were sized for */
    const int per_sm = pit_cuda_gmm_smem(c->arch, t, v.op_param[2]) > 113 * 1024 ? 1 : 2; /* CTAs that fit an SM */
    int64_t ctas = per_sm * (int64_t)c->sm_count;
    pit_cuda_kernel *paired = NULL;
    if (v.op_param[3]) {
        const int64_t pairs = gmm_pairs(c, &v, &paired); /* a work item a pair */
        v.op_param[3] = pairs > 0;
        if (pairs > 0) ctas = pairs;
    }
    const int item_rows = t.bm * (v.op_param[3] ? 2 : 1);
    int64_t bound = j->listed_max / item_rows + j->groups + 1; /* items along M, at most */
    CUdeviceptr list = 0;
    CU_CHECK(pit_cu.MemAllocAsync(&list, (size_t)(1 + 3 * bound) * 4, s), "cuMemAllocAsync(gmm work list)");
    plan_args pl = {j->a.counts, list, (int32_t)j->groups, item_rows, j->a.capacity, 2}; /* mixed order */
    pit_status st = launch(c, s, PIT_CUDA_OP_PLAN, PIT_F32, NULL, 1, 1, 1, 1024, &pl);
    j->a.list = list;
    j->a.ntn = (int32_t)cdiv(j->a.N, t.bn);
    const int64_t work = bound * j->a.ntn, grid = work < ctas ? work : ctas;
    if (st == PIT_SUCCESS && v.op_param[3])
        st = gmm_launch_pairs(paired, s, &v, grid, &j->a);
    else if (st == PIT_SUCCESS)
        st = launch_variant(c, s, &v, grid, 1, 1, gmm_threads(&v), &j->a);
    return free_scratch(s, list, st);
}

static pit_status gmm_cuda_core(pit_cuda_ctx *c, CUstream s, const gmm_job *j)
{
    int param[5] = {j->acc, j->mode, 0, 0};
    int64_t gy = j->mode == 2 ? cdiv(j->a.M, 64) : cdiv(j->max_rows, 64);
    gmm_args a = j->a;
    return launch(c, s, PIT_CUDA_OP_GMM_CC, j->dt, param, cdiv(a.N, 64), gy, j->groups, 256, &a);
}

/* Before a storing GEMM: zero the output rows no group lists (a row
 * mask on the device, so nothing is read back). */
static pit_status zero_unlisted(pit_cuda_ctx *c, CUstream s, const gmm_job *j, const view *out)
{
    size_t n = (size_t)(out->rows * out->batch);
    CUdeviceptr mark = 0;
    CU_CHECK(pit_cu.MemAllocAsync(&mark, (n ? n : 1) * 4, s), "cuMemAllocAsync(row mark)");
    pit_status st = PIT_SUCCESS;
    if (n) {
        CUresult r = pit_cu.MemsetD32Async(mark, 0xffffffffu, n, s);
        if (r != CUDA_SUCCESS) st = pit_cu_fail(r, "cuMemsetD32Async(row mark)", __FILE__, __LINE__);
    }
    mark_args m = {j->a.counts, j->a.entries, mark, j->mark_stride, j->a.capacity, j->a.kdiv};
    if (st == PIT_SUCCESS)
        st = launch(c, s, PIT_CUDA_OP_MARK, PIT_F32, NULL, cdiv(j->a.capacity, 256), j->groups, 1, 256, &m);
    ew_args z = {0, out->ptr, mark, 0, 0, out->ld, out->bs, 1, out->rows, (int32_t)out->rows, (int32_t)out->cols, 1, 0};
    if (st == PIT_SUCCESS) st = launch_zero(c, s, out->dt, &z, out->batch);
    return free_scratch(s, mark, st);
}

/* Modes 0, 1 and matmul_rows. Store (k == 1): zero the unlisted rows
 * unless keep; accumulate: into Y zeroed (f32) or an f32 scratch that is
 * converted into Y afterwards (every row written). */
static pit_status gmm_scatter(pit_cuda_ctx *c, CUstream s, gmm_job *j, const view *out, int tensor_core, int keep)
{
    pit_status st = PIT_SUCCESS;
    CUdeviceptr scratch = 0;
    if (!j->acc) {
        if (!keep) st = zero_unlisted(c, s, j, out);
    } else if (out->dt == PIT_F32) {
        st = zero_view(c, s, out);
        j->a.acc = out->ptr;
        j->a.ldacc = out->ld;
        j->a.sacc = j->a.sc;
    } else {
        st = scratch_words(s, (size_t)(out->rows * out->cols * out->batch), &scratch);
        j->a.acc = scratch;
        j->a.ldacc = out->cols;
        j->a.sacc = j->a.sc ? out->rows * out->cols : 0;
    }
    if (st == PIT_SUCCESS && (tensor_core || j->max_rows > 0))
        st = tensor_core ? gmm_tensor_core(c, s, j) : gmm_cuda_core(c, s, j);
    if (st == PIT_SUCCESS && scratch) st = convert_into(c, s, scratch, out);
    return free_scratch(s, scratch, st);
}

typedef struct moe_views {
    view x, w, g, y;
    int has_gates;
    int64_t T, H, N, E, k;
} moe_views;

static pit_status moe_shapes(int mode, const pit_index *idx, const pit_tdesc *X, const pit_tdesc *W,
                             const pit_tdesc *gates, const pit_tdesc *Y, moe_views *v)
{
    const char *op = "moe_matmul";
    pit_status st;
    if ((st = view_of(X, op, "X", &v->x)) != PIT_SUCCESS || (st = view_of(W, op, "W", &v->w)) != PIT_SUCCESS ||
        (st = view_of(Y, op, "Y", &v->y)) != PIT_SUCCESS)
        return st;
    v->has_gates = gates != NULL && gates->mem != NULL;
    if (v->has_gates && (st = view_of(gates, op, "gates", &v->g)) != PIT_SUCCESS) return st;
    if (mode == 3 && !v->has_gates) return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s", op, "mode 3 needs dgates");
    if (W->rank != 3 || X->rank != 2 || Y->rank != 2 || !is_float(v->x.dt) || v->w.dt != v->x.dt ||
        v->y.dt != v->x.dt || (v->has_gates && v->g.dt != PIT_F32))
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s", op, "X, Y [T, .], W [E, H, N] of one dtype, gates f32");
    v->T = v->x.rows;
    v->E = v->w.batch, v->H = v->w.rows, v->N = v->w.cols;
    v->k = v->has_gates ? v->g.cols : (v->T > 0 ? idx->capacity / v->T : 1);
    int64_t xc = mode == 1 ? v->N : v->H, yc = mode == 1 ? v->H : v->N;
    if (v->x.cols != xc || v->y.rows != v->T || v->y.cols != yc || idx->groups < v->E || v->k < 1 ||
        (v->has_gates && v->g.rows != v->T) || (int64_t)idx->capacity < v->T * v->k)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s", op, "shapes of X, W, gates, Y or the index do not match");
    return PIT_SUCCESS;
}

static void moe_job(int mode, const pit_index *idx, int32_t max_entries, const moe_views *v, gmm_job *j)
{
    memset(j, 0, sizeof *j);
    j->dt = v->x.dt;
    j->mode = mode;
    j->groups = v->E;
    j->max_rows = max_entries > 0 ? max_entries : 0;
    j->listed_max = idx->capacity;
    gmm_args *a = &j->a;
    a->a = v->x.ptr, a->lda = v->x.ld;
    a->b = v->w.ptr, a->ldb = v->w.ld, a->sb = v->w.bs;
    a->gates = v->has_gates && mode != 3 ? v->g.ptr : 0;
    a->ldg = v->has_gates ? v->g.ld : 0;
    a->counts = (uint64_t)(uintptr_t)idx->counts;
    a->entries = (uint64_t)(uintptr_t)idx->entries;
    a->capacity = idx->capacity;
    a->kdiv = (int32_t)v->k;
    a->N = (int32_t)(mode == 1 ? v->H : v->N);
    a->K = (int32_t)(mode == 1 ? v->N : v->H);
    a->M = (int32_t)v->H;
    if (mode == 0 || mode == 1) {
        a->c = v->y.ptr, a->ldc = v->y.ld;
        j->acc = v->k > 1;
    } else if (mode == 2) { /* out dW = W arg; D = Y arg */
        a->c = v->w.ptr, a->ldc = v->w.ld, a->sc = v->w.bs;
        a->d = v->y.ptr, a->ldd = v->y.ld;
        a->K = 0;
    } else { /* mode 3: dgates += row dots with D = Y arg */
        a->d = v->y.ptr, a->ldd = v->y.ld;
        a->acc = v->g.ptr, a->ldacc = v->g.ld;
    }
}

/* 1 where MoE mode `mode` runs on the tensor cores (the 16-bit forward,
 * rows 16-byte aligned, H and N multiples of 8), whose work list is planned
 * on the device; the CUDA-core grids are sized by the largest count */
static int moe_tensor_core(const pit_cuda_ctx *c, int mode, const view *x, const view *w, const view *y)
{
    return mode == 0 && x->dt != PIT_F32 && c->arch >= 80 && aligned16(x) && aligned16(w) && aligned16(y) &&
           w->rows % 8 == 0 && w->cols % 8 == 0;
}

static int cuda_moe_plans_on_device(void *bctx, int mode, const pit_tdesc *X, const pit_tdesc *W, const pit_tdesc *Y)
{
    view x, w, y;
    return view_of(X, "moe_matmul", "X", &x) == PIT_SUCCESS && view_of(W, "moe_matmul", "W", &w) == PIT_SUCCESS &&
           view_of(Y, "moe_matmul", "Y", &y) == PIT_SUCCESS && moe_tensor_core(bctx, mode, &x, &w, &y);
}

static pit_status moe_run(pit_cuda_ctx *c, CUstream s, int mode, const pit_index *idx, int32_t max_entries,
                          const moe_views *v)
{
    gmm_job j;
    moe_job(mode, idx, max_entries, v, &j);
    if (mode == 2) return gmm_cuda_core(c, s, &j);
    if (mode == 3) {
        view g = v->g;
        pit_status st = zero_view(c, s, &g);
        return st == PIT_SUCCESS && j.max_rows > 0 ? gmm_cuda_core(c, s, &j) : st;
    }
    return gmm_scatter(c, s, &j, &v->y, moe_tensor_core(c, mode, &v->x, &v->w, &v->y), 0);
}

static pit_status cuda_moe_matmul(void *bctx, void *stream, int mode, const pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, const pit_tdesc *X, const pit_tdesc *W, const pit_tdesc *gates,
                                  const pit_tdesc *Y)
{
    (void)tile; /* the backend's own tiles: tensor cores for 16-bit forward */
    if (mode < 0 || mode > 3)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda moe_matmul: mode %d (0..3)", mode);
    moe_views v;
    pit_status st = moe_shapes(mode, idx, X, W, gates, Y, &v);
    if (st != PIT_SUCCESS) return st;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, moe_run(c, cu_stream(stream), mode, idx, max_entries, &v));
}

static pit_status rows_run(pit_cuda_ctx *c, CUstream s, const pit_index *idx, int32_t max_entries, const view *a,
                           const view *b, const view *o, int keep)
{
    gmm_job j;
    memset(&j, 0, sizeof j);
    j.dt = o->dt;
    j.groups = o->batch;
    j.max_rows = max_entries > 0 ? max_entries : 0;
    j.listed_max = (int64_t)idx->capacity * o->batch;
    j.mark_stride = o->rows;
    pit_status st = batch_stride(b, o->batch, "matmul_rows", "B", &j.a.sb);
    if (st != PIT_SUCCESS) return st;
    j.a.a = a->ptr, j.a.lda = a->ld, j.a.sa = a->bs;
    j.a.b = b->ptr, j.a.ldb = b->ld;
    j.a.c = o->ptr, j.a.ldc = o->ld, j.a.sc = o->bs;
    j.a.counts = (uint64_t)(uintptr_t)idx->counts;
    j.a.entries = (uint64_t)(uintptr_t)idx->entries;
    j.a.capacity = idx->capacity;
    j.a.kdiv = 1;
    j.a.N = (int32_t)o->cols, j.a.K = (int32_t)a->cols, j.a.M = (int32_t)o->rows;
    int tc = o->dt != PIT_F32 && c->arch >= 80 && aligned16(a) && aligned16(b) && aligned16(o) && a->cols % 8 == 0 &&
             o->cols % 8 == 0;
    return gmm_scatter(c, s, &j, o, tc, keep);
}

static pit_status cuda_matmul_rows(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                   int32_t max_entries, const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C,
                                   int keep_skipped)
{
    (void)tile;
    view a, b, o;
    pit_status st;
    const char *op = "matmul_rows";
    if ((st = view_of(A, op, "A", &a)) != PIT_SUCCESS || (st = view_of(B, op, "B", &b)) != PIT_SUCCESS ||
        (st = view_of(C, op, "C", &o)) != PIT_SUCCESS)
        return st;
    if (!is_float(o.dt) || a.dt != o.dt || b.dt != o.dt)
        return err(PIT_ERR_UNSUPPORTED_DTYPE, "cuda %s: %s must share one float dtype", op, "A, B and C");
    if (a.rows != o.rows || a.cols != b.rows || b.cols != o.cols || a.batch != o.batch)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s do not match", op, "A, B and C");
    if (idx->tile.rows != 1 || idx->groups < o.batch || idx->capacity < o.rows)
        return err(PIT_ERR_INVALID_ARGUMENT, "cuda %s: %s", op, "the index must list rows (1 x K, a group per batch)");
    if (o.rows == 0 || o.cols == 0 || o.batch == 0) return PIT_SUCCESS;
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, rows_run(c, cu_stream(stream), idx, max_entries, &a, &b, &o, keep_skipped));
}

/* ---- elementwise --------------------------------------------------------------------- */
static pit_status cuda_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    view x, y;
    pit_status st;
    if ((st = flat_view(X, "relu", "X", &x)) != PIT_SUCCESS || (st = flat_view(Y, "relu", "Y", &y)) != PIT_SUCCESS)
        return st;
    if (!is_float(x.dt) || x.dt != y.dt || x.batch != y.batch || x.rows != y.rows || x.cols != y.cols)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s must share dtype and shape", "relu", "X and Y");
    if (x.rows == 0 || x.cols == 0 || x.batch == 0) return PIT_SUCCESS;
    ew_args a = {x.ptr, y.ptr, 0, x.ld, x.bs, y.ld, y.bs, 0, 0, (int32_t)x.rows, (int32_t)x.cols, 0, 0};
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, launch_relu(c, cu_stream(stream), x.dt, &a, x.batch));
}

static pit_status cuda_transpose(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y)
{
    view x, y;
    pit_status st;
    if ((st = view_of(X, "transpose", "X", &x)) != PIT_SUCCESS || (st = view_of(Y, "transpose", "Y", &y)) != PIT_SUCCESS)
        return st;
    if (!is_float(x.dt) || x.dt != y.dt || x.batch != y.batch || x.rows != y.cols || x.cols != y.rows)
        return err(PIT_ERR_SHAPE_MISMATCH, "cuda %s: %s", "transpose", "Y must be X's transpose, same dtype");
    if (x.rows == 0 || x.cols == 0 || x.batch == 0) return PIT_SUCCESS;
    ew_args a = {x.ptr, y.ptr, 0, x.ld, x.bs, y.ld, y.bs, 0, 0, (int32_t)x.rows, (int32_t)x.cols, 0, 0};
    pit_cuda_ctx *c = bctx;
    WITH_CONTEXT(c, launch(c, cu_stream(stream), PIT_CUDA_OP_TRANSPOSE, x.dt, NULL, cdiv(x.cols, 32), cdiv(x.rows, 32),
                           x.batch, 256, &a));
}

void pit_cuda_register_ops(pit_backend *be)
{
    be->sddmm = cuda_sddmm;
    be->softmax_sparse = cuda_softmax_sparse;
    be->softmax_sparse_backward = cuda_softmax_backward;
    be->attention_sparse = cuda_attention;
#ifndef PIT_HIP_SHIM_H
    be->attention_detect = cuda_attention_detect;
#endif
    be->moe_route = cuda_moe_route;
    be->moe_matmul = cuda_moe_matmul;
    be->moe_plans_on_device = cuda_moe_plans_on_device;
    be->matmul_rows = cuda_matmul_rows;
    be->relu = cuda_relu;
    be->transpose = cuda_transpose;
}
