/*
 * detect.c - online sparsity detection on CUDA: one pass over the sparse
 * operand fills up to 8 indexes. Micro-tiles that tile a warp's strip
 * (every matmul candidate) go to kernels/pit_detect_strip.cu, which runs
 * at the read bandwidth (pit_cuda_strip_fits); any other set (micro-tiles
 * that straddle a strip, "full" marks, rows not 16-byte aligned) to
 * kernels/pit_detect.cu.
 */
#include <string.h>

#include "ops.h"

/* Elements per load of pit_detect (its VEC): 16 bytes, 8 for u8 (the
 * kernel keeps 8 bits per row and load), 1 when rows are not aligned. */
static int detect_vec(const pit_cuda_view *x, pit_dtype dt)
{
    int bytes = dt == PIT_U8 ? 8 : 16;
    return pit_cuda_rows_aligned(x, x->cols, bytes) ? bytes / (int)pit_cuda_el_bytes(dt) : 1;
}

static pit_status check_index(const pit_cuda_view *x, const pit_index *ix, int i)
{
    const pit_microtile *t = &ix->tile;
    if (t->rows < 1 || t->cols < 1)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " detect: index %d has micro-tile %dx%d",
                                    i, t->rows, t->cols);
    if (t->axis != PIT_AXIS_K && t->axis != PIT_AXIS_M && t->axis != PIT_AXIS_N)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " detect: index %d has axis %d", i,
                                    (int)t->axis);
    int64_t tiles_rows = pit_cuda_cdiv(x->rows, t->rows), tiles_cols = pit_cuda_cdiv(x->cols, t->cols);
    int row_groups = t->axis != PIT_AXIS_M; /* K and N group by row-block */
    int64_t gpb = row_groups ? tiles_rows : tiles_cols;
    int64_t cap = row_groups ? tiles_cols : tiles_rows;
    if (ix->groups_per_batch < gpb || (int64_t)ix->groups < gpb * x->batch || ix->capacity < cap)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME " detect: index %d (%dx%d) has %d groups per batch, %d in all, "
                                                    "capacity %d; the operand needs %lld, %lld and %lld",
                                    i, t->rows, t->cols, ix->groups_per_batch, ix->groups, ix->capacity, (long long)gpb,
                                    (long long)(gpb * x->batch), (long long)cap);
    return PIT_SUCCESS;
}

/* A micro-tile that does not tile the CTA region needs global dedup. */
static int needs_dedup(const pit_microtile *t, int vec)
{
    return PIT_CUDA_DETECT_H % t->rows != 0 || (PIT_CUDA_DETECT_TW * vec) % t->cols != 0;
}

/* Zeroes the counts and total of idx[0..n-1]: one memset a run of
 * adjacent words (a matmul plan keeps every candidate's counts and totals
 * in one block: one memset for all). */
pit_status pit_cuda_zero_index(CUstream s, const pit_index *idx, int n)
{
    enum { MAX_SPANS = 2 * PIT_CUDA_DETECT_MAX };
    uint64_t at[MAX_SPANS];
    size_t words[MAX_SPANS];
    int spans = 0;
    for (int i = 0; i < n && spans + 2 <= MAX_SPANS; ++i) {
        at[spans] = (uint64_t)(uintptr_t)idx[i].counts;
        words[spans++] = idx[i].groups > 0 ? (size_t)idx[i].groups : 0;
        at[spans] = (uint64_t)(uintptr_t)idx[i].total;
        words[spans++] = 1;
    }
    for (int i = 1; i < spans; ++i) /* by address (insertion: 16 at most) */
        for (int j = i; j > 0 && at[j - 1] > at[j]; --j) {
            uint64_t a = at[j];
            size_t w = words[j];
            at[j] = at[j - 1];
            words[j] = words[j - 1];
            at[j - 1] = a;
            words[j - 1] = w;
        }
    for (int i = 0; i < spans;) {
        size_t run = words[i];
        int j = i + 1;
        for (; j < spans && at[j] == at[i] + run * 4; ++j) run += words[j];
        if (run > 0)
            CU_CHECK(pit_cu.MemsetD32Async((CUdeviceptr)at[i], 0, run, s), PIT_CALL(MemsetD32Async) "(index counts)");
        i = j;
    }
    return PIT_SUCCESS;
}

static void fill_args(pit_detect_args *a, const pit_cuda_view *x, const pit_index *idx, int n)
{
    memset(a, 0, sizeof *a);
    a->x = x->ptr;
    a->ld = x->ld;
    a->batch_stride = x->bs;
    a->rows = (int32_t)x->rows;
    a->cols = (int32_t)x->cols;
    a->n = n;
    a->batch = (int32_t)x->batch;
    for (int i = 0; i < n; ++i) pit_cuda_detect_target(&a->t[i], &idx[i], x->cols);
}

/* Column micro-tiles (Tm x 1 along K, no marks) of an operand of a few
 * rows (decode's activations): pit_detect_cols, one thread a column. */
static int cols_fit(const pit_cuda_view *x, const pit_index *idx, int n)
{
    if (x->rows > PIT_DETECT_COLS_MAX_ROWS) return 0;
    for (int i = 0; i < n; ++i)
        if (idx[i].tile.axis != PIT_AXIS_K || idx[i].tile.cols != 1 || pit_cuda_detect_marks(&idx[i])) return 0;
    return 1;
}

static pit_status cols_launch(pit_cuda_ctx *c, CUstream s, const pit_cuda_view *x, const pit_index *idx, int n)
{
    pit_detect_args a;
    fill_args(&a, x, idx, n);
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_DETECT_COLS;
    v.dtype = x->dt;
    return pit_cuda_launch_variant(c, s, &v, pit_cuda_cdiv(x->cols, PIT_DETECT_COLS_THREADS), 1, x->batch,
                                   PIT_DETECT_COLS_THREADS, &a);
}

/* One CTA a strip; CTAs beyond a few waves loop (the grid stays small). */
static pit_status strip_launch(pit_cuda_ctx *c, CUstream s, pit_dtype dt, const pit_cuda_view *x, const pit_index *idx,
                               int n, int vec)
{
    pit_detect_args a;
    fill_args(&a, x, idx, n);
    int64_t strips = x->batch * pit_cuda_cdiv(x->rows, PIT_DETECT_STRIP_H) * pit_cuda_cdiv(x->cols, PIT_CUDA_STRIP_W(vec));
    int64_t most = (int64_t)(c->sm_count > 0 ? c->sm_count : 1) * 64;
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_DETECT_STRIP;
    v.dtype = dt;
    v.vec = vec;
    return pit_cuda_launch_variant(c, s, &v, strips < most ? strips : most, 1, 1, PIT_DETECT_STRIP_THREADS, &a);
}

static pit_status detect_launch(pit_cuda_ctx *c, CUstream s, const pit_tdesc *X, const pit_cuda_view *x, const pit_index *idx,
                                int n)
{
    int vec = detect_vec(x, X->dtype);
    pit_detect_args a;
    fill_args(&a, x, idx, n);
    /* "full" marks for the first index that asks (the kernel keeps one
     * shared bitmap of zeros) */
    int full = -1;
    for (int i = 0; i < n && full < 0; ++i)
        if (pit_cuda_detect_marks(&idx[i])) full = i;
    /* one dedup bitmap per index that needs one, in a single stream-ordered
     * block; the full index also gets a bitmap of zeros and a counter per
     * micro-tile there */
    size_t dedup_words[PIT_CUDA_DETECT_MAX] = {0}, full_words = 0, total_words = 0;
    for (int i = 0; i < n; ++i) {
        const pit_microtile *t = &idx[i].tile;
        if (needs_dedup(t, vec)) {
            int64_t tiles = pit_cuda_cdiv(x->rows, t->rows) * pit_cuda_cdiv(x->cols, t->cols) * x->batch;
            dedup_words[i] = (size_t)pit_cuda_cdiv(tiles, 32);
            if (i == full) full_words = dedup_words[i] + (size_t)tiles;
        }
        total_words += dedup_words[i];
    }
    total_words += full_words;
    CUdeviceptr dedup = 0;
    if (total_words) {
        pit_status st = pit_cuda_scratch_fill(c, s, total_words, 0, "detect dedup", &dedup);
        if (st != PIT_SUCCESS) return st;
    }
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
        pit_detect_target *t = &a.t[i];
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
        st = pit_cuda_launch(k, s, (unsigned)pit_cuda_cdiv(x->cols, PIT_CUDA_DETECT_TW * vec),
                             (unsigned)pit_cuda_cdiv(x->rows, PIT_CUDA_DETECT_H), (unsigned)x->batch,
                             PIT_CUDA_DETECT_THREADS, &a, PIT_CALL(LaunchKernel) "(pit_detect)");
    return pit_cuda_free_scratch(c, s, dedup, st);
}

pit_status pit_cuda_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n)
{
    pit_cuda_ctx *c = bctx;
    pit_cuda_view x;
    pit_status st = pit_cuda_view_of(X, "detect", "X", 0, &x);
    if (st != PIT_SUCCESS) return st;
    /* the kernel's element types: floats, i32 masks, or bytes of a bool mask */
    if (x.dt != PIT_F32 && x.dt != PIT_F16 && x.dt != PIT_BF16 && x.dt != PIT_I32 && x.dt != PIT_U8)
        return pit_cuda_error(PIT_ERR_UNSUPPORTED_DTYPE, PIT_VENDOR_NAME " %s: %s dtype (f32, f16, bf16, i32 or u8)",
                              "detect", "X");
    if (n < 1 || n > PIT_CUDA_DETECT_MAX)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " detect: %d indexes; 1..%d expected", n,
                                    PIT_CUDA_DETECT_MAX);
    for (int i = 0; i < n; ++i)
        if ((st = check_index(&x, &idx[i], i)) != PIT_SUCCESS) return st;
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    CUstream s = pit_cuda_stream_of(stream);
    st = pit_cuda_zero_index(s, idx, n);
    int vec = 16 / (int)pit_cuda_el_bytes(x.dt), strip = pit_cuda_rows_aligned(&x, x.cols, 16);
    for (int i = 0; i < n && strip; ++i) strip = pit_cuda_strip_fits(&idx[i], vec);
    if (st == PIT_SUCCESS && x.rows > 0 && x.cols > 0 && x.batch > 0)
        st = cols_fit(&x, idx, n) ? cols_launch(c, s, &x, idx, n)
             : strip              ? strip_launch(c, s, x.dt, &x, idx, n, vec)
                                  : detect_launch(c, s, X, &x, idx, n);
    pit_cuda_pop();
    return st;
}

