/*
 * core/op_util.c - what the operators of dynamic-sparse models share: the
 * workspace cache, argument checks and the block index of a pattern tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- workspace ---------------------------------------------------------------- */

#define PIT_WORKSPACE_KEY 48

typedef struct pit_workspace {
    char key[PIT_WORKSPACE_KEY];
    void *stream;
    void *mem;
    size_t bytes;
    struct pit_workspace *next;
} pit_workspace;

static pit_workspace *find_workspace(pit_context *ctx, void *stream, const char *key)
{
    for (pit_workspace *w = ctx->workspaces; w; w = w->next)
        if (w->stream == stream && strcmp(w->key, key) == 0)
            return w;
    return NULL;
}

static pit_status grow_workspace(pit_context *ctx, pit_workspace *w, size_t bytes)
{
    if (w->mem)
        ctx->be->mem_free(ctx->bctx, w->mem);
    w->mem = NULL;
    w->bytes = 0;
    PIT_TRY(ctx->be->mem_alloc(ctx->bctx, bytes ? bytes : 4, &w->mem));
    w->bytes = bytes;
    return PIT_SUCCESS;
}

pit_status pit_workspace_get(pit_context *ctx, void *stream, const char *key, size_t bytes,
                             void **mem)
{
    if (strlen(key) >= PIT_WORKSPACE_KEY)
        return pit_error(PIT_ERR_INTERNAL, "workspace key '%s' is too long", key);
    pthread_mutex_lock(&ctx->lock);
    pit_workspace *w = find_workspace(ctx, stream, key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) {
            pthread_mutex_unlock(&ctx->lock);
            return pit_error(PIT_ERR_OUT_OF_MEMORY, "workspace: out of host memory");
        }
        snprintf(w->key, sizeof w->key, "%s", key);
        w->stream = stream;
        w->next = ctx->workspaces;
        ctx->workspaces = w;
    }
    pit_status s = PIT_SUCCESS;
    if (!w->mem || w->bytes < bytes)
        s = grow_workspace(ctx, w, bytes);
    *mem = w->mem;
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

void pit_workspaces_release(pit_context *ctx)
{
    pit_workspace *w = ctx->workspaces;
    while (w) {
        pit_workspace *next = w->next;
        if (w->mem)
            ctx->be->mem_free(ctx->bctx, w->mem);
        free(w);
        w = next;
    }
    ctx->workspaces = NULL;
}

/* ---- checks --------------------------------------------------------------------- */

pit_status ops_begin(pit_context *ctx, pit_stream *stream, const char *fn, void **bs)
{
    pit_clear_error();
    if (!ctx)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: argument 'ctx' is NULL", fn);
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "%s: stream belongs to another context", fn);
    *bs = pit_stream_or_default(ctx, stream)->bs;
    return PIT_SUCCESS;
}

pit_status ops_check_tensor(pit_context *ctx, const pit_tensor *t, const char *fn,
                            const char *name, int rank_lo, int rank_hi)
{
    if (!t)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: tensor argument '%s' is NULL", fn, name);
    if (t->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "%s: tensor '%s' belongs to another context",
                         fn, name);
    if (t->d.rank < rank_lo || t->d.rank > rank_hi) {
        if (rank_lo == rank_hi)
            return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: '%s' has rank %d; it must be %d", fn,
                             name, t->d.rank, rank_lo);
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: '%s' has rank %d; it must be %d..%d", fn,
                         name, t->d.rank, rank_lo, rank_hi);
    }
    return PIT_SUCCESS;
}

pit_status ops_check_float(pit_context *ctx, const pit_tensor *t, const char *fn,
                           const char *name)
{
    pit_dtype dt = t->d.dtype;
    if (dt != PIT_F32 && dt != PIT_F16 && dt != PIT_BF16)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: '%s' is %s; f32, f16 or bf16 needed", fn,
                         name, pit_dtype_name(dt));
    if ((dt == PIT_F16 && !ctx->info.has_f16) || (dt == PIT_BF16 && !ctx->info.has_bf16))
        return pit_error(PIT_ERR_UNSUPPORTED, "%s: %s is not supported on %s device \"%s\"%s", fn,
                         pit_dtype_name(dt), ctx->be->name, ctx->info.name,
                         dt == PIT_F16 && strcmp(ctx->be->name, "opencl") == 0
                             ? " (no cl_khr_fp16)" : "");
    return PIT_SUCCESS;
}

pit_status ops_check_dtype(const pit_tensor *t, pit_dtype want, const char *fn, const char *name)
{
    if (t->d.dtype != want)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: '%s' is %s; it must be %s", fn, name,
                         pit_dtype_name(t->d.dtype), pit_dtype_name(want));
    return PIT_SUCCESS;
}

pit_status ops_check_same_dtype(const pit_tensor *a, const pit_tensor *b, const char *fn,
                                const char *na, const char *nb)
{
    if (a->d.dtype != b->d.dtype)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: dtypes differ ('%s' %s, '%s' %s)", fn, na,
                         pit_dtype_name(a->d.dtype), nb, pit_dtype_name(b->d.dtype));
    return PIT_SUCCESS;
}

pit_status ops_check_dim(const pit_tensor *t, int d, int64_t want, const char *fn,
                         const char *name)
{
    int i = d < 0 ? t->d.rank + d : d;
    if (i < 0 || i >= t->d.rank || t->d.shape[i] != want)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: dimension %d of '%s' is %lld; %lld expected",
                         fn, i, name, i >= 0 && i < t->d.rank ? (long long)t->d.shape[i] : -1LL,
                         (long long)want);
    return PIT_SUCCESS;
}

pit_status ops_check_mask(pit_context *ctx, const pit_tensor *mask, const char *fn, int out_rank,
                          int64_t batch, int64_t rows, int64_t cols)
{
    PIT_TRY(ops_check_tensor(ctx, mask, fn, "mask", 2, out_rank > 2 ? out_rank : 2));
    pit_dtype dt = mask->d.dtype;
    if (dt != PIT_F32 && dt != PIT_F16 && dt != PIT_BF16 && dt != PIT_I32 && dt != PIT_U8)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: mask dtype %s (f32, f16, bf16, i32 or u8)", fn,
                         pit_dtype_name(dt));
    if (mask->d.rank == 3)
        PIT_TRY(ops_check_dim(mask, 0, batch, fn, "mask"));
    PIT_TRY(ops_check_dim(mask, -2, rows, fn, "mask"));
    return ops_check_dim(mask, -1, cols, fn, "mask");
}

pit_status ops_check_no_overlap(const pit_tensor *out, const pit_tensor *in, const char *fn,
                                const char *nout, const char *nin)
{
    if (out && in && pit_tdesc_overlap(&out->d, &in->d))
        return pit_error(PIT_ERR_ALIASING, "%s: '%s' overlaps '%s'", fn, nout, nin);
    return PIT_SUCCESS;
}

static int same_view(const pit_tdesc *a, const pit_tdesc *b)
{
    return a->mem == b->mem && a->offset == b->offset && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof a->shape) == 0 &&
           memcmp(a->strides, b->strides, sizeof a->strides) == 0;
}

pit_status ops_check_inplace_or_disjoint(const pit_tensor *out, const pit_tensor *in,
                                         const char *fn, const char *nout, const char *nin)
{
    if (out && in && same_view(&out->d, &in->d))
        return PIT_SUCCESS;
    return ops_check_no_overlap(out, in, fn, nout, nin);
}

pit_status ops_zero(pit_context *ctx, void *bs, const pit_tdesc *d)
{
    pit_tensor t = ops_tensor_of(ctx, d);
    return pit_tensor_zero(&t, &(pit_stream){.ctx = ctx, .bs = bs});
}

pit_status ops_unsupported(const pit_context *ctx, const char *op)
{
    return pit_error(PIT_ERR_UNSUPPORTED, "backend %s does not implement %s", ctx->be->name, op);
}

int64_t ops_batch(const pit_tdesc *d)
{
    return d->rank == 3 ? d->shape[0] : 1;
}

int64_t ops_rows(const pit_tdesc *d)
{
    return d->shape[d->rank - 2];
}

int64_t ops_cols(const pit_tdesc *d)
{
    return d->shape[d->rank - 1];
}

/* ---- views ------------------------------------------------------------------------- */

pit_tdesc ops_view3(const pit_tdesc *d, int64_t batch)
{
    pit_tdesc v = *d;
    v.rank = 3;
    v.shape[0] = batch;
    v.shape[1] = ops_rows(d);
    v.shape[2] = ops_cols(d);
    v.strides[0] = d->rank == 3 ? d->strides[0] : 0;
    v.strides[1] = d->strides[d->rank - 2];
    v.strides[2] = 1;
    v.shape[3] = v.strides[3] = 0;
    return v;
}

pit_tdesc ops_scratch_desc(void *mem, pit_dtype dtype, int rank, const int64_t *shape)
{
    pit_tdesc d;
    memset(&d, 0, sizeof d);
    d.dtype = dtype;
    d.rank = rank;
    d.mem = mem;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        d.shape[i] = shape[i];
        d.strides[i] = stride;
        stride *= shape[i];
    }
    return d;
}

pit_tensor ops_tensor_of(pit_context *ctx, const pit_tdesc *d)
{
    pit_tensor t;
    memset(&t, 0, sizeof t);
    t.ctx = ctx;
    t.d = *d;
    return t;
}

/* ---- block index ------------------------------------------------------------------- */

static int32_t blocks_of(int64_t n, int32_t side)
{
    return (int32_t)((n + side - 1) / side);
}

pit_status ops_index_alloc(pit_context *ctx, void *bs, const char *key, pit_microtile tile,
                           int64_t batch, int64_t groups_per_batch, int64_t capacity,
                           pit_index *idx)
{
    if (batch * groups_per_batch * (capacity > 0 ? capacity : 1) > INT32_MAX)
        return pit_error(PIT_ERR_UNSUPPORTED, "micro-tile %dx%d: index of %lld x %lld groups and "
                         "%lld entries each exceeds 2^31", tile.rows, tile.cols, (long long)batch,
                         (long long)groups_per_batch, (long long)capacity);
    memset(idx, 0, sizeof *idx);
    idx->tile = tile;
    idx->groups_per_batch = (int32_t)groups_per_batch;
    idx->groups = (int32_t)(batch * groups_per_batch);
    idx->capacity = (int32_t)capacity;
    size_t groups = (size_t)(idx->groups > 0 ? idx->groups : 1);
    size_t cap = (size_t)(capacity > 0 ? capacity : 1);
    char k[64];
    snprintf(k, sizeof k, "%s.counts", key);
    PIT_TRY(pit_workspace_get(ctx, bs, k, groups * 4, &idx->counts));
    snprintf(k, sizeof k, "%s.entries", key);
    PIT_TRY(pit_workspace_get(ctx, bs, k, groups * cap * 4, &idx->entries));
    snprintf(k, sizeof k, "%s.total", key);
    return pit_workspace_get(ctx, bs, k, 4, &idx->total);
}

pit_status ops_index_prepare(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx,
                             pit_tdesc *view)
{
    if (!ctx->be->detect)
        return ops_unsupported(ctx, "detect");
    int64_t rows = ops_rows(mask), cols = ops_cols(mask);
    /* A rank-2 mask is the same for every batch: it is indexed once, and the
     * index (groups == groups_per_batch) is shared by all batches, which every
     * operator entry of the backend contract accepts. A rank-3 mask gets one
     * set of groups per batch. */
    int64_t ibatch = mask->rank == 3 ? batch : 1;
    PIT_TRY(ops_index_alloc(ctx, bs, key, tile, ibatch, blocks_of(rows, tile.rows),
                            blocks_of(cols, tile.cols), idx));
    idx->flag_full = flag_full ? 1 : 0;
    /* Detection reads raw bits: an i32 mask is scanned as f32 words, which
     * differ only for INT_MIN (its bits are those of -0.0f). */
    *view = ops_view3(mask, ibatch);
    if (view->dtype == PIT_I32)
        view->dtype = PIT_F32;
    return PIT_SUCCESS;
}

pit_status ops_index_pattern(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx)
{
    pit_tdesc view;
    PIT_TRY(ops_index_prepare(ctx, bs, key, mask, batch, tile, flag_full, idx, &view));
    return ctx->be->detect(ctx->bctx, bs, &view, idx, 1);
}

pit_status ops_index_stats(pit_context *ctx, void *bs, const pit_index *idx,
                           int32_t *max_entries, int64_t *nonzero)
{
    *max_entries = 0;
    *nonzero = 0;
    if (idx->groups <= 0)
        return PIT_SUCCESS;
    int32_t *counts = malloc((size_t)idx->groups * sizeof(int32_t));
    if (!counts)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "index statistics: out of host memory");
    pit_status s = ctx->be->mem_read(ctx->bctx, bs, idx->counts, 0, counts,
                                     (size_t)idx->groups * sizeof(int32_t));
    for (int32_t g = 0; s == PIT_SUCCESS && g < idx->groups; g++) {
        int32_t c = counts[g] < idx->capacity ? counts[g] : idx->capacity;
        *nonzero += c;
        if (c > *max_entries)
            *max_entries = c;
    }
    free(counts);
    return s;
}

int64_t ops_index_repeat(const pit_index *idx, int64_t batch)
{
    return batch > 1 && idx->groups == idx->groups_per_batch ? batch : 1;
}

void ops_report_index(pit_report *r, const pit_index *idx, int64_t nonzero, int64_t repeat,
                      const char *what)
{
    if (!r)
        return;
    r->microtile = idx->tile;
    r->nonzero_tiles = nonzero * repeat;
    r->total_tiles = (int64_t)idx->groups * idx->capacity * repeat;
    r->skipped_compute = nonzero == 0;
    snprintf(r->choice, sizeof r->choice, "%s %dx%d", what, idx->tile.rows, idx->tile.cols);
}
