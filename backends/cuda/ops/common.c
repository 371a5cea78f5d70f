/*
 * common.c - what the CUDA backend's operator files share: the one kernel
 * view of a tensor, the block index as a kernel argument, launching a
 * kernel variant, zeroing and converting views, scratch memory, and the
 * table filler of the operator entries.
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"

pit_status pit_cuda_error(pit_status st, const char *fmt, const char *a, const char *b)
{
    return pit_cuda_host->error(st, fmt, a, b);
}

size_t pit_cuda_el_bytes(pit_dtype d)
{
    return d == PIT_F16 || d == PIT_BF16 ? 2 : d == PIT_U8 ? 1 : 4;
}

/* Any rank above 3 (or below 2) as rows of its last dimension: only
 * contiguous tensors. */
static pit_status flat_view(const pit_tdesc *t, const char *op, const char *name, pit_cuda_view *v)
{
    int64_t n = 1, stride = 1;
    for (int i = t->rank - 1; i >= 0; --i) {
        if (t->shape[i] != 1 && t->strides[i] != stride)
            return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s of rank above 3 must be contiguous", op,
                                  name);
        stride *= t->shape[i];
        n *= t->shape[i];
    }
    int64_t cols = t->rank >= 1 ? t->shape[t->rank - 1] : 1;
    if (cols < 1) cols = 1;
    *v = (pit_cuda_view){(uint64_t)(uintptr_t)t->mem + t->offset, t->dtype, 1, n / cols, cols, cols, 0};
    return PIT_SUCCESS;
}

pit_status pit_cuda_view_of(const pit_tdesc *t, const char *op, const char *name, int flat, pit_cuda_view *v)
{
    memset(v, 0, sizeof *v);
    if (!t) return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s is missing", op, name);
    int r = t->rank;
    if (r < 2 || r > 3) {
        if (!flat)
            return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: %s must have rank 2 or 3", op, name);
        pit_status st = flat_view(t, op, name, v);
        if (st != PIT_SUCCESS) return st;
    } else {
        if (t->strides[r - 1] != 1)
            return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s is not unit-stride in its rows", op,
                                  name);
        v->ptr = (uint64_t)(uintptr_t)t->mem + t->offset;
        v->dt = t->dtype;
        v->batch = r == 3 ? t->shape[0] : 1;
        v->rows = t->shape[r - 2];
        v->cols = t->shape[r - 1];
        v->ld = t->strides[r - 2];
        v->bs = r == 3 ? t->strides[0] : 0;
    }
    /* the grids take rows and columns as 32-bit, batches as one dimension */
    if (v->rows > INT32_MAX || v->cols > INT32_MAX || v->batch > 65535)
        return pit_cuda_error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: %s is too large", op, name);
    return PIT_SUCCESS;
}

int pit_cuda_rows_aligned(const pit_cuda_view *v, int64_t len, int vec_bytes)
{
    int64_t vec = vec_bytes / (int64_t)pit_cuda_el_bytes(v->dt);
    return v->ptr % (uint64_t)vec_bytes == 0 && v->ld % vec == 0 && v->bs % vec == 0 && len % vec == 0;
}

int pit_cuda_aligned16(const pit_cuda_view *v)
{
    return pit_cuda_rows_aligned(v, 0, 16);
}

pit_status pit_cuda_batch_stride(const pit_cuda_view *v, int64_t batch, const char *op, const char *name,
                                 int64_t *s)
{
    if (v->batch != batch && !(v->batch == 1 && v->bs == 0))
        return pit_cuda_error(PIT_ERR_SHAPE_MISMATCH, PIT_VENDOR_NAME " %s: %s has another batch", op, name);
    *s = v->bs;
    return PIT_SUCCESS;
}

pit_status pit_cuda_index_arg(const pit_index *idx, int64_t batch, int64_t rows, int64_t cols, const char *op,
                              pit_ix *ix)
{
    const pit_microtile *t = &idx->tile;
    if (t->rows < 1 || t->cols < 1 || (int64_t)idx->groups_per_batch * t->rows < rows ||
        (int64_t)idx->capacity * t->cols < cols)
        return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " %s: the %s does not cover the output", op,
                              "block index");
    ix->counts = (uint64_t)(uintptr_t)idx->counts;
    ix->entries = (uint64_t)(uintptr_t)idx->entries;
    ix->capacity = idx->capacity;
    ix->gpb = idx->groups_per_batch;
    ix->batched = (int64_t)idx->groups >= batch * idx->groups_per_batch;
    ix->pad = 0;
    if (!ix->batched && idx->groups != idx->groups_per_batch)
        return pit_cuda_error(PIT_ERR_INVALID_ARGUMENT,
                              PIT_VENDOR_NAME " %s: the %s has groups for neither one nor every batch", op,
                              "block index");
    return PIT_SUCCESS;
}

/* ---- launching ------------------------------------------------------------- */
pit_status pit_cuda_launch_variant(pit_cuda_ctx *c, CUstream s, const pit_cuda_variant *v, int64_t gx, int64_t gy,
                                   int64_t gz, unsigned threads, void *args)
{
    if (gx > UINT32_MAX / 2)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " %s: grid of %lld blocks is too large",
                                    pit_cuda_kernel_name(v->kind), (long long)gx);
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    return pit_cuda_launch(k, s, (unsigned)gx, (unsigned)gy, (unsigned)gz, threads, args,
                           pit_cuda_kernel_name(v->kind));
}

pit_status pit_cuda_launch_kind(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, pit_dtype dt,
                                const int *param, int64_t gx, int64_t gy, int64_t gz, unsigned threads, void *args)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = dt;
    if (param) memcpy(v.op_param, param, sizeof v.op_param);
    return pit_cuda_launch_variant(c, s, &v, gx, gy, gz, threads, args);
}

/* pit_op_zero: 256 columns x chunks of 256 rows a CTA */
pit_status pit_cuda_launch_zero(pit_cuda_ctx *c, CUstream s, pit_dtype dt, pit_ew_args *a, int64_t batch)
{
    int64_t gy = pit_cuda_cdiv(a->rows, 256);
    return pit_cuda_launch_kind(c, s, PIT_CUDA_OP_ZERO, dt, NULL, pit_cuda_cdiv(a->cols, 256),
                                gy < 1 ? 1 : gy < 65535 ? gy : 65535, batch, 256, a);
}

pit_status pit_cuda_zero_view(pit_cuda_ctx *c, CUstream s, const pit_cuda_view *v)
{
    pit_ew_args a = {0, v->ptr, 0, 0, 0, v->ld, v->bs, 0, 0, (int32_t)v->rows, (int32_t)v->cols, 0, 0};
    return pit_cuda_launch_zero(c, s, v->dt, &a, v->batch);
}

pit_status pit_cuda_convert_into(pit_cuda_ctx *c, CUstream s, CUdeviceptr f32, const pit_cuda_view *out)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_CONVERT;
    v.dtype = out->dt;
    pit_util_args u = {f32, out->ptr, out->cols, out->rows * out->cols, out->ld, out->bs, (int32_t)out->rows,
                       (int32_t)out->cols, 1, 0};
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    return pit_cuda_launch(k, s, (unsigned)pit_cuda_cdiv(out->cols, 256),
                           (unsigned)(out->rows < 4096 ? out->rows : 4096), (unsigned)out->batch, 256, &u,
                           "pit_convert_f32");
}

/* ---- scratch ----------------------------------------------------------------- */
pit_status pit_cuda_scratch_alloc(pit_cuda_ctx *c, CUstream s, size_t bytes, const char *what, CUdeviceptr *p)
{
    *p = 0;
    bytes = bytes ? bytes : 16;
    if (c->scratch.alloc) {
        void *mem = NULL;
        pit_status st = c->scratch.alloc(c->scratch.owner, bytes, (void *)s, &mem);
        *p = (CUdeviceptr)(uintptr_t)mem;
        return st;
    }
    CUresult r = pit_cu.MemAllocAsync(p, bytes, s);
    if (r == CUDA_SUCCESS) return PIT_SUCCESS;
    *p = 0;
    char call[128];
    snprintf(call, sizeof call, PIT_CALL(MemAllocAsync) "(%s, %zu bytes)", what, bytes);
    return pit_cu_fail(r, call, __FILE__, __LINE__);
}

pit_status pit_cuda_scratch_fill(pit_cuda_ctx *c, CUstream s, size_t n, uint32_t word, const char *what,
                                 CUdeviceptr *p)
{
    pit_status st = pit_cuda_scratch_alloc(c, s, n * 4, what, p);
    if (st != PIT_SUCCESS) return st;
    CUresult r = n ? pit_cu.MemsetD32Async(*p, word, n, s) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
        pit_cuda_free_scratch(c, s, *p, PIT_SUCCESS);
        *p = 0;
        char call[128];
        snprintf(call, sizeof call, PIT_CALL(MemsetD32Async) "(%s)", what);
        return pit_cu_fail(r, call, __FILE__, __LINE__);
    }
    return PIT_SUCCESS;
}

pit_status pit_cuda_free_scratch(pit_cuda_ctx *c, CUstream s, CUdeviceptr p, pit_status st)
{
    if (!p) return st;
    if (c->scratch.free) {
        c->scratch.free(c->scratch.owner, (void *)(uintptr_t)p, (void *)s);
        return st;
    }
    CUresult r = pit_cu.MemFreeAsync(p, s);
    if (st == PIT_SUCCESS && r != CUDA_SUCCESS)
        return pit_cu_fail(r, PIT_CALL(MemFreeAsync) "(scratch)", __FILE__, __LINE__);
    return st;
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

/* ---- the table ----------------------------------------------------------------- */
void pit_cuda_register_ops(pit_backend *be)
{
    pit_cuda_register_sddmm(be);
    pit_cuda_register_softmax(be);
    pit_cuda_register_attention(be);
    pit_cuda_register_moe(be);
    pit_cuda_register_rows(be);
    pit_cuda_register_elementwise(be);
}
