/* core/runtime/tensor.c - tensor descriptors, device memory, host copies. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

PIT_API const char *pit_dtype_name(pit_dtype dtype)
{
    switch (dtype) {
    case PIT_F32: return "f32";
    case PIT_F16: return "f16";
    case PIT_BF16: return "bf16";
    case PIT_I32: return "i32";
    case PIT_U8: return "u8";
    }
    return "?";
}

PIT_API size_t pit_dtype_size(pit_dtype dtype)
{
    switch (dtype) {
    case PIT_F32: return 4;
    case PIT_F16: return 2;
    case PIT_BF16: return 2;
    case PIT_I32: return 4;
    case PIT_U8: return 1;
    }
    return 0;
}

static int has_zero_extent(const int64_t *shape, int rank)
{
    for (int i = 0; i < rank; i++)
        if (shape[i] == 0)
            return 1;
    return 0;
}

/* 0 as soon as one extent is 0: the product of the others may not fit. */
int64_t pit_tensor_numel(const pit_tdesc *d)
{
    if (has_zero_extent(d->shape, d->rank))
        return 0;
    int64_t n = 1;
    for (int i = 0; i < d->rank; i++)
        n *= d->shape[i];
    return n;
}

size_t pit_tensor_extent_bytes(const pit_tdesc *d)
{
    if (pit_tensor_numel(d) == 0)
        return 0;
    int64_t last = 0;
    for (int i = 0; i < d->rank; i++)
        last += (d->shape[i] - 1) * d->strides[i];
    return (size_t)(last + 1) * pit_dtype_size(d->dtype);
}

/* Whether two views share bytes of one allocation (empty views never do). */
int pit_tdesc_overlap(const pit_tdesc *a, const pit_tdesc *b)
{
    if (a->mem != b->mem)
        return 0;
    size_t a0 = a->offset, a1 = a0 + pit_tensor_extent_bytes(a);
    size_t b0 = b->offset, b1 = b0 + pit_tensor_extent_bytes(b);
    return a1 > a0 && b1 > b0 && a0 < b1 && b0 < a1;
}

int pit_tdesc_contiguous(const pit_tdesc *d)
{
    int64_t expect = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        if (d->shape[i] != 1 && d->strides[i] != expect)
            return 0;
        expect *= d->shape[i];
    }
    return 1;
}

/* Element count and extent in bytes must fit in int64_t: byte sizes, offsets
 * and overlap checks are computed from them. Hostile shapes and strides (four
 * dimensions of 2^31-1, a stride of 2^62) would otherwise overflow. An empty
 * tensor (an extent of 0) holds no byte, whatever its other extents: it is
 * seen first, before any product that could overflow. */
static pit_status check_extent(const pit_tdesc *d)
{
    if (has_zero_extent(d->shape, d->rank))
        return PIT_SUCCESS;
    int64_t numel = 1, last = 0, term;
    for (int i = 0; i < d->rank; i++)
        if (__builtin_mul_overflow(numel, d->shape[i], &numel))
            goto too_big;
    for (int i = 0; i < d->rank; i++)
        if (d->shape[i] > 1 && (__builtin_mul_overflow(d->shape[i] - 1, d->strides[i], &term) ||
                                __builtin_add_overflow(last, term, &last)))
            goto too_big;
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, (int64_t)pit_dtype_size(d->dtype), &last))
        goto too_big;
    return PIT_SUCCESS;
too_big:
    return pit_error(PIT_ERR_INVALID_ARGUMENT, "tensor of shape [%lld, %lld, %lld, %lld] (rank %d) "
                     "with these strides spans more than 2^63 bytes",
                     (long long)d->shape[0], (long long)d->shape[1], (long long)d->shape[2],
                     (long long)d->shape[3], d->rank);
}

/* Contiguous row-major strides. An empty tensor has no rows to overlap:
 * once the span of its inner dimensions passes 2^63, the outer strides
 * saturate at INT64_MAX instead of overflowing. */
static pit_status contiguous_strides(pit_tdesc *d, int empty)
{
    int64_t expect = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        d->strides[i] = expect;
        if (expect == INT64_MAX || d->shape[i] <= 1 ||
            !__builtin_mul_overflow(expect, d->shape[i], &expect))
            continue;
        if (!empty)
            return pit_error(PIT_ERR_INVALID_ARGUMENT, "dimension %d (%lld x stride %lld) spans "
                             "more than 2^63 elements", i, (long long)d->shape[i],
                             (long long)d->strides[i]);
        expect = INT64_MAX;
    }
    return PIT_SUCCESS;
}

/* The dimensions of extent > 1 in ascending stride order (ties: the inner
 * one first); returns how many. */
static int stride_order(const pit_tdesc *d, int *order)
{
    int n = 0;
    for (int i = d->rank - 1; i >= 0; i--) {
        if (d->shape[i] <= 1)
            continue;
        int k = n++;
        while (k > 0 && d->strides[order[k - 1]] > d->strides[i]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    return n;
}

/* Given strides: the innermost 1, and no two elements at one place. The
 * dimensions may come in any stride order (a [B, L, H, D] buffer seen as
 * [B, H, L, D]): each stride, in ascending order, must be at least the span
 * of the dimensions with smaller strides. Operators other than pit_attention
 * also want that order to be row-major (pit_tensor_check_row_major). An
 * empty tensor's strides are checked only until that span passes 2^63. */
static pit_status check_strides(const pit_tdesc *d, int empty)
{
    const int last = d->rank - 1;
    if (d->shape[last] > 1 && d->strides[last] != 1)
        return pit_error(PIT_ERR_BAD_STRIDES, "innermost stride is %lld; pit needs 1",
                         (long long)d->strides[last]);
    int order[PIT_MAX_RANK];
    const int n = stride_order(d, order);
    int64_t expect = 1;
    for (int k = 0; k < n; k++) {
        const int i = order[k];
        if (d->strides[i] < expect)
            return pit_error(PIT_ERR_BAD_STRIDES, "stride[%d] = %lld overlaps the %lld "
                             "elements of the dimensions with smaller strides", i,
                             (long long)d->strides[i], (long long)expect);
        if (!__builtin_mul_overflow(d->strides[i], d->shape[i], &expect))
            continue;
        if (empty)
            return PIT_SUCCESS;
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "dimension %d (%lld x stride %lld) spans "
                         "more than 2^63 elements", i, (long long)d->shape[i],
                         (long long)d->strides[i]);
    }
    return PIT_SUCCESS;
}

int pit_tdesc_row_major(const pit_tdesc *d)
{
    int64_t expect = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        if (d->shape[i] <= 1)
            continue;
        if (d->strides[i] < expect)
            return 0;
        if (__builtin_mul_overflow(d->strides[i], d->shape[i], &expect))
            return 1; /* only an empty view gets this far: nothing outside it to order */
    }
    return 1;
}

/* Checks dtype, rank and shape; fills contiguous strides when none are given,
 * else checks them (check_strides). */
static pit_status describe(pit_dtype dtype, int rank, const int64_t *shape,
                           const int64_t *strides, pit_tdesc *d)
{
    if (pit_dtype_size(dtype) == 0)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "dtype %d is not a pit_dtype", (int)dtype);
    if (rank < 1 || rank > PIT_MAX_RANK)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "rank %d is outside 1..%d", rank, PIT_MAX_RANK);
    PIT_CHECK_ARG(shape != NULL, "shape");
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->rank = rank;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || shape[i] > ((int64_t)1 << 31) - 1)
            return pit_error(PIT_ERR_INVALID_ARGUMENT, "shape[%d] = %lld is outside 0..2^31-1", i,
                             (long long)shape[i]);
        d->shape[i] = shape[i];
    }
    const int empty = has_zero_extent(shape, rank);
    if (!strides) {
        PIT_TRY(contiguous_strides(d, empty));
    } else {
        memcpy(d->strides, strides, (size_t)rank * sizeof *strides);
        PIT_TRY(check_strides(d, empty));
    }
    return check_extent(d);
}

PIT_API pit_status pit_tensor_create(pit_context *ctx, pit_dtype dtype, int rank,
                                     const int64_t *shape, pit_tensor **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(out != NULL, "tensor");
    *out = NULL; /* on every failure below */
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    pit_tdesc d;
    PIT_TRY(describe(dtype, rank, shape, NULL, &d));
    size_t bytes = (size_t)pit_tensor_numel(&d) * pit_dtype_size(dtype);
    pit_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tensor_create: out of host memory");
    /* Zero-element tensors still get a small buffer so every handle is valid. */
    t->mem_source = pit_mem_source_of(ctx);
    pit_status s = pit_mem_alloc(ctx, t->mem_source, bytes, &d.mem);
    if (s != PIT_SUCCESS) {
        free(t);
        return s;
    }
    t->ctx = ctx;
    t->d = d;
    t->owned = 1;
    t->alloc_bytes = bytes;
    pit_live_count(ctx, PIT_LIVE_TENSOR, 1);
    *out = t;
    return PIT_SUCCESS;
}

/* A wrapped view must lie inside its buffer, and the buffer must be of this
 * context, where the backend can tell (mem_query): a view past the end would
 * let an operator write beyond it. An empty view spans no byte, but its
 * handle still reaches the backend and is checked. The caller has checked
 * that offset + extent fits in 2^63. */
static pit_status check_inside_buffer(pit_context *ctx, const pit_tdesc *d)
{
    if (!ctx->be->mem_query)
        return PIT_SUCCESS;
    size_t extent = pit_tensor_extent_bytes(d), end = d->offset + extent, bytes = 0;
    PIT_TRY(ctx->be->mem_query(ctx->bctx, d->mem, end, &bytes));
    if (extent > 0 && end > bytes)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "the view spans bytes %zu..%zu of its buffer "
                         "(byte_offset %zu + extent %zu bytes), which holds %zu bytes", d->offset,
                         end - 1, d->offset, extent, bytes);
    return PIT_SUCCESS;
}

/* The checks every view of caller's memory passes (describe, then its byte
 * offset); d->mem is data, d->offset byte_offset. */
static pit_status describe_view(pit_dtype dtype, int rank, const int64_t *shape,
                                const int64_t *strides, void *data, size_t byte_offset,
                                pit_tdesc *d)
{
    PIT_CHECK_ARG(data != NULL, "data");
    PIT_TRY(describe(dtype, rank, shape, strides, d));
    if (byte_offset % pit_dtype_size(dtype) != 0)
        return pit_error(PIT_ERR_BAD_STRIDES, "byte_offset %zu is not a multiple of the %s element "
                         "size %zu", byte_offset, pit_dtype_name(dtype), pit_dtype_size(dtype));
    if (byte_offset > (size_t)INT64_MAX - pit_tensor_extent_bytes(d))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "byte_offset %zu plus the tensor's extent of "
                         "%zu bytes exceeds 2^63", byte_offset, pit_tensor_extent_bytes(d));
    d->mem = data;
    d->offset = byte_offset;
    return PIT_SUCCESS;
}

/* A tensor over memory pit did not allocate (owned stays 0). */
static pit_status new_view(pit_context *ctx, const pit_tdesc *d, pit_tensor **out)
{
    pit_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tensor_wrap: out of host memory");
    t->ctx = ctx;
    t->d = *d;
    pit_live_count(ctx, PIT_LIVE_TENSOR, 1);
    *out = t;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_wrap(pit_context *ctx, pit_dtype dtype, int rank,
                                   const int64_t *shape, const int64_t *strides, void *data,
                                   size_t byte_offset, pit_tensor **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(out != NULL, "tensor");
    *out = NULL; /* on every failure below */
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    pit_tdesc d;
    PIT_TRY(describe_view(dtype, rank, shape, strides, data, byte_offset, &d));
    PIT_TRY(check_inside_buffer(ctx, &d));
    return new_view(ctx, &d, out);
}

/* The buffer covers exactly the view's bytes, from element 0 (strides are
 * never negative), so the view starts at its offset 0. An empty view spans no
 * byte: it gets a buffer of the device's own, as pit_tensor_create does. */
pit_status pit_tensor_wrap_host(pit_context *ctx, pit_dtype dtype, int rank, const int64_t *shape,
                                const int64_t *strides, void *data, size_t byte_offset,
                                int read_only, pit_tensor **out)
{
    const pit_backend *be = ctx->be;
    if (!be->mem_wrap_host || !be->mem_unwrap_host || !ctx->info.takes_host_memory)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "DLPack tensor is host memory (kDLCPU); the "
                         "%s device %d (%s) takes its own memory only: copy it in with "
                         "pit_tensor_upload", be->name, ctx->device_index, ctx->info.name);
    pit_tdesc d;
    PIT_TRY(describe_view(dtype, rank, shape, strides, data, byte_offset, &d));
    size_t bytes = pit_tensor_extent_bytes(&d);
    if (bytes == 0) {
        pit_tensor *t = NULL;
        PIT_TRY(pit_tensor_create(ctx, dtype, rank, shape, &t));
        t->read_only = read_only;
        *out = t;
        return PIT_SUCCESS;
    }
    PIT_TRY(be->mem_wrap_host(ctx->bctx, (char *)data + byte_offset, bytes, read_only, &d.mem));
    d.offset = 0;
    pit_status s = new_view(ctx, &d, out);
    if (s != PIT_SUCCESS) {
        be->mem_unwrap_host(ctx->bctx, pit_stream_or_default(ctx, NULL)->bs, d.mem);
        return s;
    }
    (*out)->host_wrapped = 1;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_destroy(pit_tensor *t)
{
    pit_clear_error();
    if (!t)
        return PIT_SUCCESS;
    pit_status s = PIT_SUCCESS;
    if (t->owned)
        pit_mem_free(t->ctx, t->mem_source, t->d.mem);
    if (t->host_wrapped)
        s = t->ctx->be->mem_unwrap_host(t->ctx->bctx, pit_stream_or_default(t->ctx, NULL)->bs,
                                        t->d.mem);
    pit_dlpack_release(t);
    pit_live_count(t->ctx, PIT_LIVE_TENSOR, -1);
    free(t);
    return s;
}

PIT_API pit_status pit_tensor_get_desc(const pit_tensor *t, pit_tensor_desc *desc)
{
    pit_clear_error();
    PIT_CHECK_ARG(t != NULL, "tensor");
    PIT_CHECK_ARG(desc != NULL, "desc");
    memset(desc, 0, sizeof *desc);
    desc->dtype = t->d.dtype;
    desc->rank = t->d.rank;
    memcpy(desc->shape, t->d.shape, sizeof desc->shape);
    memcpy(desc->strides, t->d.strides, sizeof desc->strides);
    desc->data = t->d.mem;
    desc->byte_offset = t->d.offset;
    desc->owned = t->owned;
    return PIT_SUCCESS;
}

pit_status pit_tensor_check(const pit_context *ctx, const pit_tensor *t, const char *name)
{
    if (!t)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "tensor argument '%s' is NULL", name);
    if (t->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "tensor '%s' belongs to another context", name);
    return pit_tensor_check_row_major(t, NULL, name);
}

pit_status pit_tensor_check_row_major(const pit_tensor *t, const char *fn, const char *name)
{
    if (pit_tdesc_row_major(&t->d))
        return PIT_SUCCESS;
    return pit_error(PIT_ERR_BAD_STRIDES, "%s%s'%s' has strides [%lld, %lld, %lld, %lld] that are "
                     "not in row-major order (only pit_attention takes such views)",
                     fn ? fn : "", fn ? ": " : "", name, (long long)t->d.strides[0],
                     (long long)t->d.strides[1], (long long)t->d.strides[2],
                     (long long)t->d.strides[3]);
}

pit_status pit_tensor_check_writable(const pit_tensor *t, const char *fn, const char *name)
{
    if (t && t->read_only)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: '%s' is read-only (a DLPack import "
                         "flagged read-only) and cannot be written", fn, name);
    return PIT_SUCCESS;
}

/* Copies row by row when the tensor is strided: host side is always packed. */
static pit_status copy_rows(const pit_tensor *t, pit_stream *stream, void *host, size_t bytes,
                            int to_device)
{
    pit_context *ctx = t->ctx;
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "stream belongs to another context");
    pit_stream *s = pit_stream_or_default(ctx, stream);
    size_t es = pit_dtype_size(t->d.dtype);
    size_t want = (size_t)pit_tensor_numel(&t->d) * es;
    if (bytes != want)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "%s: %zu bytes given, the tensor holds %zu",
                         to_device ? "pit_tensor_upload" : "pit_tensor_download", bytes, want);
    if (want == 0)
        return PIT_SUCCESS;
    const pit_tdesc *d = &t->d;
    if (pit_tdesc_contiguous(d))
        return to_device ? ctx->be->mem_write(ctx->bctx, s->bs, d->mem, d->offset, host, bytes)
                         : ctx->be->mem_read(ctx->bctx, s->bs, d->mem, d->offset, host, bytes);
    int64_t row = d->shape[d->rank - 1];
    int64_t rows = pit_tensor_numel(d) / row;
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, off = 0;
        for (int i = d->rank - 2; i >= 0; i--) {
            off += (rem % d->shape[i]) * d->strides[i];
            rem /= d->shape[i];
        }
        char *h = (char *)host + (size_t)(r * row) * es;
        size_t dev = d->offset + (size_t)off * es;
        pit_status st = to_device ? ctx->be->mem_write(ctx->bctx, s->bs, d->mem, dev, h, (size_t)row * es)
                                  : ctx->be->mem_read(ctx->bctx, s->bs, d->mem, dev, h, (size_t)row * es);
        if (st != PIT_SUCCESS)
            return st;
    }
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_upload(pit_tensor *t, pit_stream *stream, const void *host,
                                     size_t bytes)
{
    pit_clear_error();
    PIT_CHECK_ARG(t != NULL, "tensor");
    PIT_CHECK_ARG(host != NULL || bytes == 0, "host");
    PIT_TRY(pit_tensor_check_writable(t, "pit_tensor_upload", "tensor"));
    return copy_rows(t, stream, (void *)host, bytes, 1);
}

PIT_API pit_status pit_tensor_download(const pit_tensor *t, pit_stream *stream, void *host,
                                       size_t bytes)
{
    pit_clear_error();
    PIT_CHECK_ARG(t != NULL, "tensor");
    PIT_CHECK_ARG(host != NULL || bytes == 0, "host");
    return copy_rows(t, stream, host, bytes, 0);
}

/* Zeroes any byte range: fill32 for the 4-byte-aligned middle, small host
 * writes for an unaligned head or tail (2-byte dtypes with odd counts). */
static pit_status zero_bytes(pit_context *ctx, void *bs, void *mem, size_t off, size_t bytes)
{
    static const uint8_t zeros[4];
    size_t head = (4 - off % 4) % 4;
    if (head > bytes)
        head = bytes;
    if (head)
        PIT_TRY(ctx->be->mem_write(ctx->bctx, bs, mem, off, zeros, head));
    size_t mid = (bytes - head) & ~(size_t)3, tail = bytes - head - mid;
    if (mid)
        PIT_TRY(ctx->be->mem_fill32(ctx->bctx, bs, mem, off + head, 0, mid));
    if (tail)
        PIT_TRY(ctx->be->mem_write(ctx->bctx, bs, mem, off + head + mid, zeros, tail));
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_zero(pit_tensor *t, pit_stream *stream)
{
    pit_clear_error();
    PIT_CHECK_ARG(t != NULL, "tensor");
    PIT_TRY(pit_tensor_check_writable(t, "pit_tensor_zero", "tensor"));
    pit_context *ctx = t->ctx;
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "stream belongs to another context");
    pit_stream *s = pit_stream_or_default(ctx, stream);
    size_t extent = pit_tensor_extent_bytes(&t->d);
    if (extent == 0)
        return PIT_SUCCESS;
    if (pit_tdesc_contiguous(&t->d))
        return zero_bytes(ctx, s->bs, t->d.mem, t->d.offset, extent);
    /* Strided: zero only the elements, never the gaps that may hold other data. */
    size_t es = pit_dtype_size(t->d.dtype);
    size_t row_bytes = (size_t)t->d.shape[t->d.rank - 1] * es;
    int64_t rows = pit_tensor_numel(&t->d) / t->d.shape[t->d.rank - 1];
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, off = 0;
        for (int i = t->d.rank - 2; i >= 0; i--) {
            off += (rem % t->d.shape[i]) * t->d.strides[i];
            rem /= t->d.shape[i];
        }
        PIT_TRY(zero_bytes(ctx, s->bs, t->d.mem, t->d.offset + (size_t)off * es, row_bytes));
    }
    return PIT_SUCCESS;
}
