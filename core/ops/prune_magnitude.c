/*
 * core/ops/prune_magnitude.c - magnitude pruning: zeroes the blocks of
 * smallest L1 norm of a weight matrix (on the host: pruning runs between
 * training steps, not inside one).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Magnitude of a stored element; f16 decoded by its fields (sign dropped). */
static double magnitude(pit_dtype dt, const void *data, size_t i)
{
    if (dt == PIT_F32)
        return fabs((double)((const float *)data)[i]);
    uint16_t h = ((const uint16_t *)data)[i];
    if (dt == PIT_BF16) {
        uint32_t bits = (uint32_t)(h & 0x7fffu) << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (e == 0x1f)
        return man ? NAN : INFINITY;
    return e ? ldexp(1024.0 + man, e - 25) : ldexp((double)man, -24);
}

typedef struct block_norm {
    double l1;
    int64_t block;
} block_norm;

/* Smallest first; NaN norms last (a NaN block is never "small"); ties by index. */
static int cmp_norm(const void *a, const void *b)
{
    const block_norm *x = a, *y = b;
    int xn = isnan(x->l1), yn = isnan(y->l1);
    if (xn != yn)
        return xn - yn;
    if (!xn && x->l1 != y->l1)
        return x->l1 < y->l1 ? -1 : 1;
    return (x->block > y->block) - (x->block < y->block);
}

static void zero_block(void *data, size_t es, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1)
{
    for (int64_t r = r0; r < r1; r++)
        memset((char *)data + (size_t)(r * cols + c0) * es, 0, (size_t)(c1 - c0) * es);
}

/* Zeroes the `nzero` blocks of smallest L1 norm of a rows x cols host matrix. */
static pit_status prune_host(pit_dtype dt, void *data, int64_t rows, int64_t cols, int32_t br,
                             int32_t bc, double sparsity)
{
    int64_t nbr = (rows + br - 1) / br, nbc = (cols + bc - 1) / bc, nb = nbr * nbc;
    block_norm *norms = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *norms);
    if (!norms)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_prune_magnitude: out of host memory");
    for (int64_t b = 0; b < nb; b++) {
        int64_t r0 = (b / nbc) * br, c0 = (b % nbc) * bc;
        double l1 = 0;
        for (int64_t r = r0; r < rows && r < r0 + br; r++)
            for (int64_t c = c0; c < cols && c < c0 + bc; c++)
                l1 += magnitude(dt, data, (size_t)(r * cols + c));
        norms[b] = (block_norm){l1, b};
    }
    qsort(norms, (size_t)nb, sizeof *norms, cmp_norm);
    int64_t nzero = (int64_t)llround(sparsity * (double)nb);
    size_t es = pit_dtype_size(dt);
    for (int64_t i = 0; i < nzero && i < nb; i++) {
        int64_t r0 = (norms[i].block / nbc) * br, c0 = (norms[i].block % nbc) * bc;
        zero_block(data, es, cols, r0, r0 + br < rows ? r0 + br : rows, c0,
                   c0 + bc < cols ? c0 + bc : cols);
    }
    free(norms);
    return PIT_SUCCESS;
}

PIT_API pit_status pit_prune_magnitude(pit_context *ctx, pit_stream *stream, pit_tensor *W,
                                       int32_t block_rows, int32_t block_cols, double sparsity)
{
    static const char *const fn = "pit_prune_magnitude";
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, fn, &bs));
    PIT_TRY(ops_check_output(ctx, W, fn, "W", 2, 2));
    PIT_TRY(ops_check_float(ctx, W, fn, "W"));
    if (block_rows <= 0 || block_cols <= 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: block %dx%d must have positive sides", fn,
                         block_rows, block_cols);
    if (!(sparsity >= 0.0 && sparsity <= 1.0))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: sparsity %g is outside 0..1", fn, sparsity);
    int64_t rows = W->d.shape[0], cols = W->d.shape[1];
    size_t bytes = (size_t)(rows * cols) * pit_dtype_size(W->d.dtype);
    if (bytes == 0)
        return PIT_SUCCESS;
    void *host = malloc(bytes);
    if (!host)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", fn, bytes);
    pit_status s = pit_tensor_download(W, stream, host, bytes);
    if (s == PIT_SUCCESS)
        s = prune_host(W->d.dtype, host, rows, cols, block_rows, block_cols, sparsity);
    if (s == PIT_SUCCESS)
        s = pit_tensor_upload(W, stream, host, bytes);
    free(host);
    return s;
}
