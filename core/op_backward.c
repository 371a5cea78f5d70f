/*
 * core/op_backward.c - sparse training: the backward of a dynamic-sparse
 * matmul, the transpose it needs, and magnitude pruning.
 *
 * For C = A . B with A sparse: dA = (dC . B^T) only on A's non-zero
 * micro-tiles (an SDDMM whose mask is A itself), and dB = A^T . dC with A^T
 * as the sparse operand of pit_matmul (A's M axis becomes the reduction axis).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- transpose ---------------------------------------------------------------- */

static pit_status check_transpose(pit_context *ctx, const pit_tensor *X, const pit_tensor *Y)
{
    static const char *const fn = "pit_transpose";
    PIT_TRY(ops_check_tensor(ctx, X, fn, "X", 2, PIT_MAX_RANK));
    PIT_TRY(ops_check_tensor(ctx, Y, fn, "Y", X->d.rank, X->d.rank));
    if (X->d.dtype != PIT_I32)
        PIT_TRY(ops_check_float(ctx, X, fn, "X"));
    PIT_TRY(ops_check_same_dtype(X, Y, fn, "X", "Y"));
    int r = X->d.rank;
    for (int i = 0; i < r - 2; i++)
        PIT_TRY(ops_check_dim(Y, i, X->d.shape[i], fn, "Y"));
    PIT_TRY(ops_check_dim(Y, -2, X->d.shape[r - 1], fn, "Y"));
    PIT_TRY(ops_check_dim(Y, -1, X->d.shape[r - 2], fn, "Y"));
    return ops_check_no_overlap(Y, X, fn, "Y", "X");
}

PIT_API pit_status pit_transpose(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                 pit_tensor *Y)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, "pit_transpose", &bs));
    PIT_TRY(check_transpose(ctx, X, Y));
    if (!ctx->be->transpose)
        return ops_unsupported(ctx, "transpose");
    if (pit_tensor_numel(&X->d) == 0)
        return PIT_SUCCESS;
    return ctx->be->transpose(ctx->bctx, bs, &X->d, &Y->d);
}

/* ---- matmul backward ------------------------------------------------------------- */

static pit_status check_backward(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                                 const pit_tensor *dC, const pit_tensor *dA, const pit_tensor *dB)
{
    static const char *const fn = "pit_matmul_backward";
    PIT_TRY(ops_check_tensor(ctx, A, fn, "A", 2, 3));
    int r = A->d.rank;
    PIT_TRY(ops_check_tensor(ctx, B, fn, "B", r, r));
    PIT_TRY(ops_check_tensor(ctx, dC, fn, "dC", r, r));
    PIT_TRY(ops_check_float(ctx, A, fn, "A"));
    PIT_TRY(ops_check_same_dtype(A, B, fn, "A", "B"));
    PIT_TRY(ops_check_same_dtype(A, dC, fn, "A", "dC"));
    if (r == 3) {
        PIT_TRY(ops_check_dim(B, 0, A->d.shape[0], fn, "B"));
        PIT_TRY(ops_check_dim(dC, 0, A->d.shape[0], fn, "dC"));
    }
    PIT_TRY(ops_check_dim(B, -2, ops_cols(&A->d), fn, "B"));
    PIT_TRY(ops_check_dim(dC, -2, ops_rows(&A->d), fn, "dC"));
    PIT_TRY(ops_check_dim(dC, -1, ops_cols(&B->d), fn, "dC"));
    const pit_tensor *in[3] = {A, B, dC}, *out[2] = {dA, dB}, *like[2] = {A, B};
    const char *in_names[3] = {"A", "B", "dC"}, *out_names[2] = {"dA", "dB"};
    for (int o = 0; o < 2; o++) {
        if (!out[o])
            continue;
        PIT_TRY(ops_check_tensor(ctx, out[o], fn, out_names[o], r, r));
        PIT_TRY(ops_check_same_dtype(A, out[o], fn, "A", out_names[o]));
        for (int i = 0; i < r; i++)
            PIT_TRY(ops_check_dim(out[o], i, like[o]->d.shape[i], fn, out_names[o]));
        for (int i = 0; i < 3; i++)
            PIT_TRY(ops_check_no_overlap(out[o], in[i], fn, out_names[o], in_names[i]));
    }
    return ops_check_no_overlap(dA, dB, fn, "dA", "dB");
}

/* dB = A^T . dC: A^T into a workspace, then the PIT matmul with it sparse. */
static pit_status backward_db(pit_context *ctx, pit_stream *stream, void *bs, const pit_tensor *A,
                              const pit_tensor *dC, pit_tensor *dB)
{
    if (!ctx->be->transpose)
        return ops_unsupported(ctx, "transpose (for dB of pit_matmul_backward)");
    int r = A->d.rank;
    int64_t shape[3] = {ops_batch(&A->d), ops_cols(&A->d), ops_rows(&A->d)};
    void *mem;
    PIT_TRY(pit_workspace_get(ctx, bs, "backward.At", (size_t)(shape[0] * shape[1] * shape[2]) *
                              pit_dtype_size(A->d.dtype), &mem));
    pit_tdesc at = ops_scratch_desc(mem, A->d.dtype, r, r == 3 ? shape : shape + 1);
    if (pit_tensor_numel(&at) > 0)
        PIT_TRY(ctx->be->transpose(ctx->bctx, bs, &A->d, &at));
    pit_tensor At = ops_tensor_of(ctx, &at);
    return pit_matmul(ctx, stream, &At, dC, dB, NULL, NULL);
}

PIT_API pit_status pit_matmul_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                       const pit_tensor *B, const pit_tensor *dC, pit_tensor *dA,
                                       pit_tensor *dB)
{
    void *bs;
    PIT_TRY(ops_begin(ctx, stream, "pit_matmul_backward", &bs));
    PIT_TRY(check_backward(ctx, A, B, dC, dA, dB));
    if (dA) {
        /* sddmm(dC [M,N], B as [K rows, N], mask A) = dC . B^T on A's pattern. */
        pit_microtile tile = {32, 32, PIT_AXIS_K};
        PIT_TRY(ops_sddmm_run(ctx, bs, &dC->d, &B->d, &A->d, &dA->d, tile, "backward.dA", NULL));
    }
    if (dB)
        PIT_TRY(backward_db(ctx, stream, bs, A, dC, dB));
    return PIT_SUCCESS;
}

/* ---- magnitude pruning ------------------------------------------------------------ */

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
    PIT_TRY(ops_check_tensor(ctx, W, fn, "W", 2, 2));
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
