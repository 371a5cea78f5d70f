/*
 * core/ops/op_util.c - what the public operators share: the workspace cache,
 * argument checks and tensor views.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choice.h"
#include "ops.h"

/* ---- workspace ---------------------------------------------------------------- */

#define PIT_WORKSPACE_KEY 48

typedef struct pit_workspace {
    char key[PIT_WORKSPACE_KEY];
    void *stream;
    void *mem;
    size_t bytes;
    const pit_mem_source *mem_source; /* of mem */
    struct pit_workspace *next;
} pit_workspace;

static pit_workspace *find_workspace(pit_context *ctx, void *stream, const char *key)
{
    for (pit_workspace *w = ctx->workspaces; w; w = w->next)
        if (w->stream == stream && strcmp(w->key, key) == 0)
            return w;
    return NULL;
}

static void free_workspace_memory(pit_context *ctx, pit_workspace *w)
{
    if (w->mem) {
        pit_mem_wait(ctx, w->mem_source, w->stream);
        pit_mem_free(ctx, w->mem_source, w->mem);
    }
    w->mem = NULL;
    w->bytes = 0;
}

static pit_status grow_workspace(pit_context *ctx, pit_workspace *w, size_t bytes)
{
    free_workspace_memory(ctx, w);
    w->mem_source = pit_mem_source_of(ctx);
    PIT_TRY(pit_mem_alloc(ctx, w->mem_source, bytes, &w->mem));
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

/* Frees the workspaces of one stream, or of all when stream is NULL. */
static void release_workspaces(pit_context *ctx, void *stream)
{
    pit_workspace **link = &ctx->workspaces;
    while (*link) {
        pit_workspace *w = *link;
        if (stream && w->stream != stream) {
            link = &w->next;
            continue;
        }
        *link = w->next;
        free_workspace_memory(ctx, w);
        free(w);
    }
}

void pit_workspaces_release(pit_context *ctx)
{
    release_workspaces(ctx, NULL);
}

void pit_workspaces_release_stream(pit_context *ctx, void *stream)
{
    pthread_mutex_lock(&ctx->lock);
    release_workspaces(ctx, stream);
    pthread_mutex_unlock(&ctx->lock);
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

pit_status ops_begin_report(pit_context *ctx, pit_stream *stream, const char *fn,
                            pit_report *report, void **bs)
{
    if (report) /* before any check: a refused call leaves no stale report */
        memset(report, 0, sizeof *report);
    return ops_begin(ctx, stream, fn, bs);
}

pit_status ops_check_tensor(pit_context *ctx, const pit_tensor *t, const char *fn,
                            const char *name, int rank_lo, int rank_hi)
{
    PIT_TRY(ops_check_view(ctx, t, fn, name, rank_lo, rank_hi));
    return pit_tensor_check_row_major(t, fn, name);
}

pit_status ops_check_view(pit_context *ctx, const pit_tensor *t, const char *fn,
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

pit_status ops_check_output(pit_context *ctx, const pit_tensor *t, const char *fn,
                            const char *name, int rank_lo, int rank_hi)
{
    PIT_TRY(ops_check_tensor(ctx, t, fn, name, rank_lo, rank_hi));
    return pit_tensor_check_writable(t, fn, name);
}

pit_status ops_check_output_view(pit_context *ctx, const pit_tensor *t, const char *fn,
                                 const char *name, int rank_lo, int rank_hi)
{
    PIT_TRY(ops_check_view(ctx, t, fn, name, rank_lo, rank_hi));
    return pit_tensor_check_writable(t, fn, name);
}

pit_status ops_check_float(pit_context *ctx, const pit_tensor *t, const char *fn,
                           const char *name)
{
    pit_dtype dt = t->d.dtype;
    if (dt != PIT_F32 && dt != PIT_F16 && dt != PIT_BF16)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: '%s' is %s; f32, f16 or bf16 needed", fn,
                         name, pit_dtype_name(dt));
    return ops_check_on_device(ctx, dt, fn);
}

pit_status ops_check_on_device(const pit_context *ctx, pit_dtype dt, const char *fn)
{
    if (!pit_device_stores(&ctx->info, dt))
        return pit_error(PIT_ERR_UNSUPPORTED,
                         "%s: %s is not supported on %s device \"%s\" (no %s storage)", fn,
                         pit_dtype_name(dt), ctx->be->name, ctx->info.name, pit_dtype_name(dt));
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

pit_status ops_check_result(pit_context *ctx, const char *fn, const pit_tensor *out,
                            const char *name, pit_dtype dt, int rank, const int64_t *shape,
                            const pit_tensor *const *inputs, const char *const *names,
                            int ninputs)
{
    PIT_TRY(ops_check_output(ctx, out, fn, name, rank, rank));
    PIT_TRY(ops_check_dtype(out, dt, fn, name));
    for (int i = 0; i < rank; i++)
        PIT_TRY(ops_check_dim(out, i, shape[i], fn, name));
    for (int i = 0; i < ninputs; i++)
        PIT_TRY(ops_check_no_overlap(out, inputs[i], fn, name, names[i]));
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

void ops_report_tile(pit_report *r, const pit_tile *tile)
{
    if (!r)
        return;
    r->bm = tile->bm;
    r->bn = tile->bn;
    r->bk = tile->bk;
    /* the tile that ran, named the way pit_matmul names its choice */
    size_t used = strlen(r->choice);
    snprintf(r->choice + used, sizeof r->choice - used, PIT_CHOICE_TILE, tile->bm, tile->bn, tile->bk);
}
