/*
 * cuda_ops.c - the PIT operations of the CUDA backend: detection (one pass,
 * up to 8 indexes), the fused SRead/tile/SWrite matmul along K or M, and
 * the dense cuBLAS GEMM.
 */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* ---- argument blocks: byte-for-byte the structs of the kernels --------- */
typedef struct detect_target {
    int32_t tm, tk, axis;
    int32_t groups_per_batch, capacity;
    int32_t tiles_cols;
    uint64_t counts, entries, total, dedup;
    uint64_t zero, arrive; /* the "full" target: with dedup, bits / counters per micro-tile */
    int32_t full, pad;
} detect_target;

typedef struct detect_args {
    uint64_t x;
    int64_t ld, batch_stride;
    int32_t rows, cols, n, pad;
    detect_target t[PIT_CUDA_DETECT_MAX];
} detect_args;

typedef struct mm_args {
    uint64_t a, b, c, acc;
    int64_t lda, ldb, ldc, ldacc;
    int64_t sa, sb, sc, sacc;
    int32_t M, N, K, pad;
    uint64_t counts, entries;
    int32_t capacity, groups_per_batch;
} mm_args;

typedef struct compact_args {
    uint64_t a, out;
    int64_t lda, sa, ldo, so;
    int32_t M, K, tm, tk;
    uint64_t counts, entries;
    int32_t capacity, groups_per_batch;
} compact_args;

typedef struct util_args {
    uint64_t f32, out;
    int64_t ld32, s32, ldo, so;
    int32_t rows, cols;
} util_args;

/* ---- shapes --------------------------------------------------------------- */
typedef struct mat {
    uint64_t ptr;      /* element 0 */
    int64_t rows, cols, ld, bstride, batch;
} mat;

static size_t dtype_bytes(pit_dtype d)
{
    return d == PIT_F32 ? 4 : d == PIT_U8 ? 1 : 2;
}

/* The matrix view of t, whose dtype is f32, f16 or bf16, or also u8 (a
 * pattern mask: detection only) when u8_ok. */
static pit_status as_matrix_of(const pit_tdesc *t, const char *name, int u8_ok, mat *m)
{
    if (t->rank != 2 && t->rank != 3)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda: %s has rank %d; 2 or 3 expected", name, t->rank);
    if (t->dtype != PIT_F32 && t->dtype != PIT_F16 && t->dtype != PIT_BF16 && !(u8_ok && t->dtype == PIT_U8))
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "cuda: %s has dtype %d; f32, f16 or bf16%s expected",
                                    name, (int)t->dtype, u8_ok ? " (or a u8 mask)" : "");
    int r = t->rank;
    m->ptr = (uint64_t)(uintptr_t)t->mem + t->offset;
    m->rows = t->shape[r - 2];
    m->cols = t->shape[r - 1];
    m->ld = t->strides[r - 2];
    m->batch = r == 3 ? t->shape[0] : 1;
    m->bstride = r == 3 ? t->strides[0] : 0;
    if (m->rows > INT32_MAX || m->cols > INT32_MAX || m->batch > 65535)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "cuda: %s is too large (%lld x %lld, batch %lld)", name,
                                    (long long)m->rows, (long long)m->cols, (long long)m->batch);
    return PIT_SUCCESS;
}

static pit_status as_matrix(const pit_tdesc *t, const char *name, mat *m)
{
    return as_matrix_of(t, name, 0, m);
}

/* Whole vectors of vec_bytes along the rows: aligned base, row and batch
 * strides, and a row length, all multiples of the vector. */
static int rows_aligned_to(const mat *m, pit_dtype dt, int64_t len, int vec_bytes)
{
    int64_t vec = vec_bytes / (int64_t)dtype_bytes(dt);
    return m->ptr % (uint64_t)vec_bytes == 0 && m->ld % vec == 0 && m->bstride % vec == 0 && len % vec == 0;
}

static int rows_vector_aligned(const mat *m, pit_dtype dt, int64_t len)
{
    return rows_aligned_to(m, dt, len, 16);
}

/* Elements per load of pit_detect (its VEC): 16 bytes, 8 for u8 (the
 * kernel keeps 8 bits per row and load), 1 when rows are not aligned. */
static int detect_vec(const mat *x, pit_dtype dt)
{
    int bytes = dt == PIT_U8 ? 8 : 16;
    return rows_aligned_to(x, dt, x->cols, bytes) ? bytes / (int)dtype_bytes(dt) : 1;
}

/* Scratch (axis-K compaction, axis-M f32 accumulation) is stream-ordered
 * from the device's default pool. Its release threshold is 0 by default:
 * the pool gives its memory back at every synchronisation and the next
 * call maps it again (tens of microseconds for tens of MB). Keep it. */
void pit_cuda_keep_pool_memory(const pit_cuda_ctx *c)
{
    CUmemoryPool pool;
    if (pit_cu.DeviceGetDefaultMemPool(&pool, c->dev) != CUDA_SUCCESS) return;
    cuuint64_t keep = ~(cuuint64_t)0;
    pit_cu.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep); /* best effort */
}

static CUstream stream_of(void *stream)
{
    return ((pit_cuda_stream *)stream)->s;
}

/* ---- detection -------------------------------------------------------------- */
static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static pit_status check_index(const mat *x, const pit_index *ix, int i)
{
    const pit_microtile *t = &ix->tile;
    if (t->rows < 1 || t->cols < 1)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda detect: index %d has micro-tile %dx%d", i,
                                    t->rows, t->cols);
    if (t->axis != PIT_AXIS_K && t->axis != PIT_AXIS_M && t->axis != PIT_AXIS_N)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda detect: index %d has axis %d", i, (int)t->axis);
    int64_t tiles_rows = ceil_div(x->rows, t->rows), tiles_cols = ceil_div(x->cols, t->cols);
    int row_groups = t->axis != PIT_AXIS_M; /* K and N group by row-block */
    int64_t gpb = row_groups ? tiles_rows : tiles_cols;
    int64_t cap = row_groups ? tiles_cols : tiles_rows;
    if (ix->groups_per_batch < gpb || (int64_t)ix->groups < gpb * x->batch || ix->capacity < cap)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    "cuda detect: index %d (%dx%d) has %d groups per batch, %d in all, capacity %d; "
                                    "the operand needs %lld, %lld and %lld",
                                    i, t->rows, t->cols, ix->groups_per_batch, ix->groups, ix->capacity,
                                    (long long)gpb, (long long)(gpb * x->batch), (long long)cap);
    return PIT_SUCCESS;
}

/* A micro-tile that does not tile the CTA region needs global dedup. */
static int needs_dedup(const pit_microtile *t, int vec)
{
    return PIT_CUDA_DETECT_H % t->rows != 0 || (PIT_CUDA_DETECT_TW * vec) % t->cols != 0;
}

pit_status pit_cuda_zero_index(CUstream s, const pit_index *idx)
{
    if (idx->groups > 0)
        CU_CHECK(pit_cu.MemsetD32Async((CUdeviceptr)(uintptr_t)idx->counts, 0, (size_t)idx->groups, s),
                 "cuMemsetD32Async(counts)");
    CU_CHECK(pit_cu.MemsetD32Async((CUdeviceptr)(uintptr_t)idx->total, 0, 1, s), "cuMemsetD32Async(total)");
    return PIT_SUCCESS;
}

static pit_status detect_launch(pit_cuda_ctx *c, CUstream s, const pit_tdesc *X, const mat *x, const pit_index *idx,
                                int n)
{
    int vec = detect_vec(x, X->dtype);
    detect_args a;
    memset(&a, 0, sizeof a);
    a.x = x->ptr;
    a.ld = x->ld;
    a.batch_stride = x->bstride;
    a.rows = (int32_t)x->rows;
    a.cols = (int32_t)x->cols;
    a.n = n;
    /* "full" marks for the first index that asks (the kernel keeps one
     * shared bitmap of zeros); entries must stay below the mark's bit */
    int full = -1;
    for (int i = 0; i < n && full < 0; ++i)
        if (idx[i].flag_full && idx[i].capacity < PIT_ENTRY_FULL) full = i;
    /* one dedup bitmap per index that needs one, in a single stream-ordered
     * block; the full index also gets a bitmap of zeros and a counter per
     * micro-tile there */
    size_t dedup_words[PIT_CUDA_DETECT_MAX] = {0}, full_words = 0, total_words = 0;
    for (int i = 0; i < n; ++i) {
        const pit_microtile *t = &idx[i].tile;
        if (needs_dedup(t, vec)) {
            int64_t tiles = ceil_div(x->rows, t->rows) * ceil_div(x->cols, t->cols) * x->batch;
            dedup_words[i] = (size_t)ceil_div(tiles, 32);
            if (i == full) full_words = dedup_words[i] + (size_t)tiles;
        }
        total_words += dedup_words[i];
    }
    total_words += full_words;
    CUdeviceptr dedup = 0;
    if (total_words) {
        CU_CHECK(pit_cu.MemAllocAsync(&dedup, total_words * 4, s), "cuMemAllocAsync(detect dedup)");
        CU_CHECK(pit_cu.MemsetD32Async(dedup, 0, total_words, s), "cuMemsetD32Async(detect dedup)");
    }
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        detect_target *t = &a.t[i];
        t->tm = idx[i].tile.rows;
        t->tk = idx[i].tile.cols;
        t->axis = idx[i].tile.axis == PIT_AXIS_M ? 2 : 1;
        t->groups_per_batch = idx[i].groups_per_batch;
        t->capacity = idx[i].capacity;
        t->tiles_cols = (int32_t)ceil_div(x->cols, t->tk);
        t->counts = (uint64_t)(uintptr_t)idx[i].counts;
        t->entries = (uint64_t)(uintptr_t)idx[i].entries;
        t->total = (uint64_t)(uintptr_t)idx[i].total;
        t->dedup = dedup_words[i] ? dedup + at * 4 : 0;
        at += dedup_words[i];
        t->full = i == full;
    }
    if (full_words) { /* after every dedup bitmap: zeros, then counters */
        a.t[full].zero = dedup + at * 4;
        a.t[full].arrive = dedup + (at + dedup_words[full]) * 4;
    }
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_DETECT;
    v.dtype = X->dtype;
    v.vec = vec;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch(k, s, (unsigned)ceil_div(x->cols, PIT_CUDA_DETECT_TW * vec),
                             (unsigned)ceil_div(x->rows, PIT_CUDA_DETECT_H), (unsigned)x->batch,
                             PIT_CUDA_DETECT_THREADS, &a, "cuLaunchKernel(pit_detect)");
    if (dedup) {
        CUresult r = pit_cu.MemFreeAsync(dedup, s);
        if (st == PIT_SUCCESS && r != CUDA_SUCCESS) st = pit_cu_fail(r, "cuMemFreeAsync(detect dedup)", __FILE__, __LINE__);
    }
    return st;
}

pit_status pit_cuda_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n)
{
    pit_cuda_ctx *c = bctx;
    mat x;
    pit_status st = as_matrix_of(X, "X", 1, &x);
    if (st != PIT_SUCCESS) return st;
    if (n < 1 || n > PIT_CUDA_DETECT_MAX)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda detect: %d indexes; 1..%d expected", n,
                                    PIT_CUDA_DETECT_MAX);
    for (int i = 0; i < n; ++i)
        if ((st = check_index(&x, &idx[i], i)) != PIT_SUCCESS) return st;
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    CUstream s = stream_of(stream);
    for (int i = 0; i < n && st == PIT_SUCCESS; ++i) st = pit_cuda_zero_index(s, &idx[i]);
    if (st == PIT_SUCCESS && x.rows > 0 && x.cols > 0 && x.batch > 0) st = detect_launch(c, s, X, &x, idx, n);
    pit_cuda_pop();
    return st;
}

/* ---- sparse matmul ----------------------------------------------------------- */
typedef struct mm_problem {
    mat a, b, c;
    pit_dtype dt;
    int64_t M, N, K, batch;
} mm_problem;

static pit_status check_matmul(const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C, mm_problem *p)
{
    pit_status st;
    if ((st = as_matrix(A, "A", &p->a)) != PIT_SUCCESS || (st = as_matrix(B, "B", &p->b)) != PIT_SUCCESS ||
        (st = as_matrix(C, "C", &p->c)) != PIT_SUCCESS)
        return st;
    if (A->dtype != B->dtype || A->dtype != C->dtype)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "cuda matmul: A, B and C must share a dtype");
    if (A->rank != B->rank || A->rank != C->rank || p->a.batch != p->b.batch || p->a.batch != p->c.batch)
        return pit_cuda_host->error(PIT_ERR_SHAPE_MISMATCH, "cuda matmul: A, B and C must have the same rank and batch");
    if (p->a.cols != p->b.rows || p->a.rows != p->c.rows || p->b.cols != p->c.cols)
        return pit_cuda_host->error(PIT_ERR_SHAPE_MISMATCH, "cuda matmul: %lldx%lld . %lldx%lld -> %lldx%lld",
                                    (long long)p->a.rows, (long long)p->a.cols, (long long)p->b.rows,
                                    (long long)p->b.cols, (long long)p->c.rows, (long long)p->c.cols);
    p->dt = A->dtype;
    p->M = p->a.rows;
    p->K = p->a.cols;
    p->N = p->b.cols;
    p->batch = p->a.batch;
    return PIT_SUCCESS;
}

/* The tile actually compiled: axis K takes the micro-tile's rows as BM;
 * 16-bit inputs use tensor cores from sm_80 and at least 16 rows. */
static pit_status effective_tile(const pit_cuda_ctx *c, const mm_problem *p, const pit_tile *tile,
                                 const pit_microtile *mt, pit_tile *t)
{
    *t = *tile;
    if (t->stages < 2) t->stages = 2;
    if (mt->axis == PIT_AXIS_K) t->bm = mt->rows;
    t->tensor_core = t->tensor_core && p->dt != PIT_F32 && c->arch >= 80 && t->bm >= 16;
    const char *why = "";
    if (!pit_cuda_tile_valid(p->dt, t, &why))
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "cuda matmul: tile %dx%dx%d (%d threads, %s) for micro-tile %dx%d: %s",
                                    t->bm, t->bn, t->bk, t->threads, t->tensor_core ? "tensor cores" : "CUDA cores",
                                    mt->rows, mt->cols, why);
    return PIT_SUCCESS;
}

static void fill_mm_args(const mm_problem *p, const pit_index *idx, mm_args *a)
{
    memset(a, 0, sizeof *a);
    a->a = p->a.ptr;
    a->b = p->b.ptr;
    a->c = p->c.ptr;
    a->lda = p->a.ld;
    a->ldb = p->b.ld;
    a->ldc = p->c.ld;
    a->sa = p->a.bstride;
    a->sb = p->b.bstride;
    a->sc = p->c.bstride;
    a->M = (int32_t)p->M;
    a->N = (int32_t)p->N;
    a->K = (int32_t)p->K;
    a->counts = (uint64_t)(uintptr_t)idx->counts;
    a->entries = (uint64_t)(uintptr_t)idx->entries;
    a->capacity = idx->capacity;
    a->groups_per_batch = idx->groups_per_batch;
}

static pit_status launch_util(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, pit_dtype dt, util_args *u,
                              int64_t batch)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = kind == PIT_CUDA_ZERO ? PIT_F32 : dt;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    unsigned gy = (unsigned)(u->rows < 4096 ? u->rows : 4096);
    return pit_cuda_launch(k, s, (unsigned)ceil_div(u->cols, 256), gy, (unsigned)batch, 256, u,
                           kind == PIT_CUDA_ZERO ? "cuLaunchKernel(pit_zero_f32)" : "cuLaunchKernel(pit_convert_f32)");
}

/* SRead as a gather pass: A's indexed micro-tile columns copied densely
 * per row-block into scratch (ld = ldo), read by the fused kernel with
 * 16-byte cp.async. Grid from the capacity: nothing is read back. */
static pit_status compact_a(pit_cuda_ctx *c, CUstream s, const mm_problem *p, const pit_index *idx, int64_t row_blocks,
                            CUdeviceptr out, int64_t ldo)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_COMPACT;
    v.dtype = p->dt;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    compact_args a;
    memset(&a, 0, sizeof a);
    a.a = p->a.ptr;
    a.out = (uint64_t)out;
    a.lda = p->a.ld;
    a.sa = p->a.bstride;
    a.ldo = ldo;
    a.so = row_blocks * idx->tile.rows * ldo;
    a.M = (int32_t)p->M;
    a.K = (int32_t)p->K;
    a.tm = idx->tile.rows;
    a.tk = idx->tile.cols;
    a.counts = (uint64_t)(uintptr_t)idx->counts;
    a.entries = (uint64_t)(uintptr_t)idx->entries;
    a.capacity = idx->capacity;
    a.groups_per_batch = idx->groups_per_batch;
    int64_t cols = ldo;
    if (cols <= 0) return PIT_SUCCESS;
    return pit_cuda_launch(k, s, (unsigned)ceil_div(cols, 256), (unsigned)row_blocks, (unsigned)p->batch, 256, &a,
                           "cuLaunchKernel(pit_compact)");
}

static pit_status matmul_axis_k(pit_cuda_ctx *c, CUstream s, pit_cuda_variant *v, const mm_problem *p,
                                const pit_index *idx)
{
    if ((int64_t)idx->groups_per_batch * idx->tile.rows < p->M)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda matmul: the index has %d row-blocks of %d for %lld rows",
                                    idx->groups_per_batch, idx->tile.rows, (long long)p->M);
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    mm_args a;
    fill_mm_args(p, idx, &a);
    int64_t row_blocks = ceil_div(p->M, idx->tile.rows);
    CUdeviceptr scratch = 0;
    if (v->a_comp) {
        int64_t ldo = ceil_div((int64_t)idx->capacity * idx->tile.cols, 8) * 8; /* pit_compact pads to 8 */
        size_t bytes = (size_t)(row_blocks * idx->tile.rows * ldo * p->batch) * dtype_bytes(p->dt);
        CU_CHECK(pit_cu.MemAllocAsync(&scratch, bytes ? bytes : 16, s), "cuMemAllocAsync(axis K compact)");
        st = compact_a(c, s, p, idx, row_blocks, scratch, ldo);
        a.a = (uint64_t)scratch;
        a.lda = ldo;
        a.sa = row_blocks * idx->tile.rows * ldo;
    }
    /* every row-block gets a CTA (empty ones write zeros): the grid does
     * not depend on the counts, so nothing is read back */
    if (st == PIT_SUCCESS)
        st = pit_cuda_launch(k, s, (unsigned)row_blocks, (unsigned)ceil_div(p->N, v->tile.bn), (unsigned)p->batch,
                             (unsigned)v->tile.threads, &a, "cuLaunchKernel(pit_matmul axis K)");
    if (scratch) {
        CUresult r = pit_cu.MemFreeAsync(scratch, s);
        if (st == PIT_SUCCESS && r != CUDA_SUCCESS) st = pit_cu_fail(r, "cuMemFreeAsync(axis K compact)", __FILE__, __LINE__);
    }
    return st;
}

static pit_status matmul_axis_m(pit_cuda_ctx *c, CUstream s, pit_cuda_variant *v, const mm_problem *p,
                                const pit_index *idx, int32_t max_entries, int worst_case_grid)
{
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    mm_args a;
    fill_mm_args(p, idx, &a);
    /* SWrite accumulates in f32: into C for f32, else into scratch that is
     * converted into C afterwards */
    CUdeviceptr scratch = 0;
    util_args u = {0};
    u.rows = (int32_t)p->M;
    u.cols = (int32_t)p->N;
    if (p->dt == PIT_F32) {
        a.acc = p->c.ptr;
        a.ldacc = p->c.ld;
        a.sacc = p->c.bstride;
        u.f32 = p->c.ptr;
        u.ld32 = p->c.ld;
        u.s32 = p->c.bstride;
        st = launch_util(c, s, PIT_CUDA_ZERO, p->dt, &u, p->batch);
    } else {
        size_t words = (size_t)(p->M * p->N * p->batch);
        CU_CHECK(pit_cu.MemAllocAsync(&scratch, (words ? words : 1) * 4, s), "cuMemAllocAsync(axis M scratch)");
        if (words) CU_CHECK(pit_cu.MemsetD32Async(scratch, 0, words, s), "cuMemsetD32Async(axis M scratch)");
        a.acc = scratch;
        a.ldacc = p->N;
        a.sacc = p->M * p->N;
    }
    int64_t rows = worst_case_grid ? ceil_div(p->M, idx->tile.rows) * idx->tile.rows
                                   : (int64_t)(max_entries > 0 ? max_entries : 0) * idx->tile.rows;
    int64_t chunks = ceil_div(rows, v->tile.bm);
    if (st == PIT_SUCCESS && chunks > 0)
        st = pit_cuda_launch(k, s, (unsigned)ceil_div(p->N, v->tile.bn), (unsigned)chunks, (unsigned)idx->groups,
                             (unsigned)v->tile.threads, &a, "cuLaunchKernel(pit_matmul axis M)");
    if (scratch) {
        if (st == PIT_SUCCESS) {
            u.f32 = scratch;
            u.ld32 = p->N;
            u.s32 = p->M * p->N;
            u.out = p->c.ptr;
            u.ldo = p->c.ld;
            u.so = p->c.bstride;
            st = launch_util(c, s, PIT_CUDA_CONVERT, p->dt, &u, p->batch);
        }
        CUresult r = pit_cu.MemFreeAsync(scratch, s);
        if (st == PIT_SUCCESS && r != CUDA_SUCCESS) st = pit_cu_fail(r, "cuMemFreeAsync(axis M scratch)", __FILE__, __LINE__);
    }
    return st;
}

pit_status pit_cuda_matmul_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, int worst_case_grid, const pit_tdesc *A, const pit_tdesc *B,
                                  const pit_tdesc *C)
{
    pit_cuda_ctx *c = bctx;
    mm_problem p;
    pit_status st = check_matmul(A, B, C, &p);
    if (st != PIT_SUCCESS) return st;
    const pit_microtile *mt = &idx->tile;
    if (mt->axis == PIT_AXIS_N)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "cuda matmul: sparse B (axis N) is not implemented by the cuda backend");
    if (mt->axis != PIT_AXIS_K && mt->axis != PIT_AXIS_M)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda matmul: index axis %d", (int)mt->axis);
    if (mt->rows < 1 || mt->cols < 1)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, "cuda matmul: micro-tile %dx%d", mt->rows, mt->cols);
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_MATMUL;
    v.dtype = p.dt;
    v.axis = mt->axis;
    v.mt_rows = mt->rows;
    v.mt_cols = mt->cols;
    if ((st = effective_tile(c, &p, tile, mt, &v.tile)) != PIT_SUCCESS) return st;
    int vec = (int)(16 / dtype_bytes(p.dt));
    v.a_vec = rows_vector_aligned(&p.a, p.dt, p.K) && mt->cols % vec == 0 && v.tile.bk % vec == 0;
    v.b_vec = rows_vector_aligned(&p.b, p.dt, p.N) && v.tile.bn % vec == 0;
    /* axis K with micro-tiles narrower than a 16-byte vector (32x1): gather
     * A densely first (pit_compact), then read it with 16-byte copies */
    if (mt->axis == PIT_AXIS_K && !v.a_vec && v.tile.bk % vec == 0 && !getenv("PIT_CUDA_NO_COMPACT")) {
        v.a_comp = 1;
        v.a_vec = 1;
    }
    /* SWrite vectors: C's rows (axis K, and axis M for f32, which reduces
     * into C) or the f32 scratch (axis M, 16-bit: ld = N) 16-byte aligned */
    if (mt->axis == PIT_AXIS_K || p.dt == PIT_F32)
        v.c_vec = p.c.ptr % 16 == 0 && p.c.ld % vec == 0 && p.c.bstride % vec == 0;
    else
        v.c_vec = p.N % 4 == 0;
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    CUstream s = stream_of(stream);
    if (p.M > 0 && p.N > 0 && p.batch > 0) {
        if (mt->axis == PIT_AXIS_K) st = matmul_axis_k(c, s, &v, &p, idx);
        else st = matmul_axis_m(c, s, &v, &p, idx, max_entries, worst_case_grid);
    }
    pit_cuda_pop();
    return st;
}

/* ---- dense: cuBLAS ---------------------------------------------------------- */
static pit_status cublas_fail(cublasStatus_t r, const char *what, const char *file, int line)
{
    pit_status st = r == CUBLAS_STATUS_ALLOC_FAILED ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND;
    return pit_cuda_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, cublasGetStatusName(r),
                                pit_cuda_basename(file), line);
}

#define CUBLAS_CHECK(call, what)                                                          \
    do {                                                                                  \
        cublasStatus_t cb_r_ = (call);                                                    \
        if (cb_r_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(cb_r_, what, __FILE__, __LINE__); \
    } while (0)

void pit_cuda_blas_destroy(pit_cuda_ctx *c)
{
    if (c->blas) cublasDestroy((cublasHandle_t)c->blas);
    c->blas = NULL;
}

static cudaDataType_t blas_type(pit_dtype d)
{
    return d == PIT_F32 ? CUDA_R_32F : d == PIT_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Row-major C = A.B is column-major C^T = B^T.A^T: swap the operands. */
static pit_status dense_gemm(cublasHandle_t h, CUstream s, const mm_problem *p)
{
    const float alpha = 1.f, beta = 0.f;
    cudaDataType_t t = blas_type(p->dt);
    size_t el = dtype_bytes(p->dt);
    CUBLAS_CHECK(cublasSetStream(h, (cudaStream_t)s), "cublasSetStream");
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)p->N, (int)p->M, (int)p->K, &alpha,
                                            (const void *)(uintptr_t)p->b.ptr, t, (int)p->b.ld, p->b.bstride,
                                            (const void *)(uintptr_t)p->a.ptr, t, (int)p->a.ld, p->a.bstride, &beta,
                                            (void *)(uintptr_t)p->c.ptr, t, (int)p->c.ld, p->c.bstride,
                                            (int)p->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
    (void)el;
    return PIT_SUCCESS;
}

pit_status pit_cuda_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                 const pit_tdesc *C)
{
    pit_cuda_ctx *c = bctx;
    mm_problem p;
    pit_status st = check_matmul(A, B, C, &p);
    if (st != PIT_SUCCESS) return st;
    if (p.M == 0 || p.N == 0 || p.batch == 0) return PIT_SUCCESS;
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    /* one handle per context; the lock keeps SetStream + Gemm together */
    pthread_mutex_lock(&c->lock);
    if (!c->blas) {
        cublasHandle_t h = NULL;
        cublasStatus_t r = cublasCreate(&h);
        if (r != CUBLAS_STATUS_SUCCESS) st = cublas_fail(r, "cublasCreate", __FILE__, __LINE__);
        else c->blas = h;
    }
    if (st == PIT_SUCCESS) st = dense_gemm((cublasHandle_t)c->blas, stream_of(stream), &p);
    pthread_mutex_unlock(&c->lock);
    pit_cuda_pop();
    return st;
}
