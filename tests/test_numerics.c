/*
 * tests/test_numerics.c - special values through the PIT path, on the OpenCL
 * device (PoCL in CI), against the dense GEMM (pit_matmul_dense) and the
 * double reference:
 *  - NaN and Inf in A are non-zeros: the micro-tile holding one is computed,
 *    and C gets NaN / Inf exactly where the dense GEMM puts them (Inf * 0 in
 *    a product is NaN there too); -0.0 is a zero;
 *  - an all-zero A gives an all-zero C (C held NaN before) with no compute
 *    launched (pit_report.skipped_compute), batched and sparse B too;
 *  - a micro-tile holding only denormals is a non-zero (detection must not
 *    flush them) and C matches the dense GEMM;
 *  - f16 results that overflow are Inf as with the dense GEMM (f16 is
 *    stored on every OpenCL device, computed in f32 without cl_khr_fp16);
 *    f32 and bf16 accumulations that overflow too.
 */
#include <float.h>
#include <math.h>

#include "rtest.h"

/* Same special value class and, for finite values, within rel tolerance. */
static int same_value(double a, double b, double tol)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= tol * fmax(fmax(fabs(a), fabs(b)), 1e-30);
}

typedef struct run {
    pit_report rep;
    pit_status st;
    double *C;
} run;

static const pit_microtile k32x1 = {32, 1, PIT_AXIS_K}, m1x32 = {1, 32, PIT_AXIS_M};

/* C = A.B through PIT (options), and through the dense GEMM; compares them
 * element by element, and with the reference where it is finite. */
static void compare_paths(pit_context *ctx, const char *what, pit_dtype dt, int64_t m, int64_t k,
                          int64_t n, double *A, double *B, const pit_microtile *forced,
                          pit_sparse_operand sparse, pit_report *rep_out)
{
    size_t nc = (size_t)(m * n);
    pit_tensor *tA = rt_tensor(ctx, dt, 2, 1, m, k), *tB = rt_tensor(ctx, dt, 2, 1, k, n),
               *tC = rt_tensor(ctx, dt, 2, 1, m, n), *tD = rt_tensor(ctx, dt, 2, 1, m, n);
    rt_upload(tA, NULL, A, (size_t)(m * k));
    rt_upload(tB, NULL, B, (size_t)(k * n));
    double *nan = malloc(nc * 8), *C = malloc(nc * 8), *D = malloc(nc * 8), *R = malloc(nc * 8);
    for (size_t i = 0; i < nc; i++)
        nan[i] = NAN;
    rt_upload(tC, NULL, nan, nc); /* every element must be written */
    pit_matmul_options o = pit_matmul_options_default();
    o.sparse = sparse;
    if (forced)
        o.microtile = *forced;
    pit_report rep;
    pit_status st = pit_matmul(ctx, NULL, tA, tB, tC, &o, &rep);
    if (st == PIT_ERR_UNSUPPORTED) {
        printf("  %-44s %-5s skipped: %s\n", what, pit_dtype_name(dt), pit_last_error());
        memset(&rep, 0, sizeof rep);
        rep.nonzero_tiles = -1;
        goto out;
    }
    RT_CHECK(st == PIT_SUCCESS, "%s: pit_matmul: %s", what, pit_status_string(st));
    st = pit_matmul_dense(ctx, NULL, tA, tB, tD);
    RT_CHECK(st == PIT_SUCCESS, "%s: pit_matmul_dense: %s", what, pit_status_string(st));
    rt_download(tC, NULL, C, nc);
    rt_download(tD, NULL, D, nc);
    pit_ref_matmul(1, m, n, k, A, B, R);
    double tol = dt == PIT_F32 ? 1e-4 : 2e-2;
    int64_t diff = 0, ref_diff = 0, first = -1;
    for (size_t i = 0; i < nc; i++) {
        if (!same_value(C[i], D[i], tol)) {
            diff++;
            if (first < 0)
                first = (int64_t)i;
        }
        if (!same_value(C[i], R[i], tol))
            ref_diff++;
    }
    RT_CHECK(diff == 0, "%s (%s, %s): %lld of %zu elements differ from the dense GEMM; first at "
             "%lld: pit %g, dense %g, reference %g", what, pit_dtype_name(dt), rep.choice,
             (long long)diff, nc, (long long)first, first >= 0 ? C[first] : 0,
             first >= 0 ? D[first] : 0, first >= 0 ? R[first] : 0);
    printf("  %-44s %-5s pit vs dense: %lld differ; pit vs double reference: %lld differ (%s)\n",
           what, pit_dtype_name(dt), (long long)diff, (long long)ref_diff, rep.choice);
out:
    if (rep_out)
        *rep_out = rep;
    pit_tensor_destroy(tA);
    pit_tensor_destroy(tB);
    pit_tensor_destroy(tC);
    pit_tensor_destroy(tD);
    free(nan);
    free(C);
    free(D);
    free(R);
}

/* A mostly zero, with special values in otherwise zero micro-tiles. */
static void nan_inf(pit_context *ctx, pit_dtype dt)
{
    const int64_t m = 64, k = 128, n = 32;
    double *A = calloc((size_t)(m * k), 8), *B = malloc((size_t)(k * n) * 8);
    pit_rng rng;
    pit_rng_seed(&rng, 3);
    pit_ref_fill_random(&rng, B, (size_t)(k * n));
    A[5 * k + 7] = NAN;          /* row 5: all NaN */
    A[40 * k + 70] = INFINITY;   /* row 40: +-Inf, NaN where B[70][j] == 0 */
    A[41 * k + 71] = -INFINITY;
    A[50 * k + 3] = -0.0;        /* a zero */
    A[60 * k + 100] = 1.0;       /* an ordinary non-zero */
    B[70 * n + 4] = 0.0;         /* Inf * 0 = NaN in row 40, column 4 */
    for (int64_t j = 0; j < n; j++)
        B[71 * n + j] = 0.5; /* row 41: -Inf throughout */
    for (int f = 0; f < 3; f++) {
        const pit_microtile *t = f == 0 ? &k32x1 : f == 1 ? &m1x32 : NULL;
        char what[96];
        snprintf(what, sizeof what, "NaN/Inf in A, %s", f == 0 ? "32x1 axis K" : f == 1 ? "1x32 axis M"
                 : "automatic");
        pit_report rep;
        compare_paths(ctx, what, dt, m, k, n, A, B, t, PIT_SPARSE_A, &rep);
        if (f == 0 && rep.nonzero_tiles >= 0)
            RT_CHECK(!rep.used_dense && rep.nonzero_tiles == 4,
                     "%s: %lld non-zero micro-tiles found, want 4 (NaN, +Inf, -Inf, 1.0; not -0.0)",
                     what, (long long)rep.nonzero_tiles);
    }
    /* Sparse B holding NaN: the same through axis N. */
    double *A2 = malloc((size_t)(m * k) * 8), *B2 = calloc((size_t)(k * n), 8);
    pit_ref_fill_random(&rng, A2, (size_t)(m * k));
    B2[9 * n + 2] = NAN;
    B2[100 * n + 30] = INFINITY;
    pit_microtile n32x1 = {32, 1, PIT_AXIS_N};
    compare_paths(ctx, "NaN/Inf in sparse B, 32x1 axis N", dt, m, k, n, A2, B2, &n32x1,
                  PIT_SPARSE_B, NULL);
    free(A);
    free(B);
    free(A2);
    free(B2);
}

static void all_zero(pit_context *ctx, pit_dtype dt, int rank, pit_sparse_operand sparse,
                     const pit_microtile *forced)
{
    const int64_t b = rank == 3 ? 3 : 1, m = 48, k = 80, n = 24;
    size_t na = (size_t)(b * m * k), nb = (size_t)(b * k * n), nc = (size_t)(b * m * n);
    double *A = calloc(na, 8), *B = malloc(nb * 8), *C = malloc(nc * 8);
    pit_rng rng;
    pit_rng_seed(&rng, 4);
    pit_ref_fill_random(&rng, B, nb);
    if (sparse == PIT_SPARSE_B) { /* swap roles: B zero, A random */
        double *t = A;
        A = realloc(B, na * 8);
        pit_ref_fill_random(&rng, A, na);
        B = realloc(t, nb * 8);
        memset(B, 0, nb * 8);
    }
    pit_tensor *tA = rt_tensor(ctx, dt, rank, b, m, k), *tB = rt_tensor(ctx, dt, rank, b, k, n),
               *tC = rt_tensor(ctx, dt, rank, b, m, n);
    rt_upload(tA, NULL, A, na);
    rt_upload(tB, NULL, B, nb);
    for (size_t i = 0; i < nc; i++)
        C[i] = NAN;
    rt_upload(tC, NULL, C, nc);
    pit_matmul_options o = pit_matmul_options_default();
    o.sparse = sparse;
    if (forced)
        o.microtile = *forced;
    pit_report rep;
    pit_status st = pit_matmul(ctx, NULL, tA, tB, tC, &o, &rep);
    rt_download(tC, NULL, C, nc);
    size_t nonzero = 0;
    for (size_t i = 0; i < nc; i++)
        nonzero += C[i] != 0.0;
    RT_CHECK(st == PIT_SUCCESS && nonzero == 0, "all-zero %s %s rank %d: %s, %zu non-zero elements "
             "of C", sparse == PIT_SPARSE_A ? "A" : "B", pit_dtype_name(dt), rank,
             pit_status_string(st), nonzero);
    RT_CHECK(rep.skipped_compute == 1 && rep.nonzero_tiles == 0,
             "all-zero %s %s rank %d (%s): skipped_compute %d, nonzero_tiles %lld",
             sparse == PIT_SPARSE_A ? "A" : "B", pit_dtype_name(dt), rank,
             forced ? "forced" : "automatic", rep.skipped_compute, (long long)rep.nonzero_tiles);
    printf("  all-zero %s %-4s rank %d %-9s: C zero, skipped_compute %d (%s)\n",
           sparse == PIT_SPARSE_A ? "A" : "B", pit_dtype_name(dt), rank,
           forced ? "forced" : "automatic", rep.skipped_compute, rep.choice);
    pit_tensor_destroy(tA);
    pit_tensor_destroy(tB);
    pit_tensor_destroy(tC);
    free(A);
    free(B);
    free(C);
}

/* Micro-tiles whose only non-zeros are f32 denormals, times large B values so
 * that C is an ordinary number: skipping such a tile would be visible. */
static void denormals(pit_context *ctx)
{
    const int64_t m = 64, k = 64, n = 16;
    double *A = calloc((size_t)(m * k), 8), *B = malloc((size_t)(k * n) * 8);
    for (int64_t i = 0; i < k * n; i++)
        B[i] = 1e30;
    A[3 * k + 5] = 1e-40;           /* a denormal alone in its 32x1 micro-tile */
    A[33 * k + 40] = FLT_TRUE_MIN;  /* the smallest f32 denormal */
    A[20 * k + 60] = 2.5;
    for (int f = 0; f < 2; f++) {
        const pit_microtile *t = f == 0 ? &k32x1 : &m1x32;
        char what[96];
        snprintf(what, sizeof what, "f32 denormals in A, %s", f == 0 ? "32x1 axis K" : "1x32 axis M");
        pit_report rep;
        compare_paths(ctx, what, PIT_F32, m, k, n, A, B, t, PIT_SPARSE_A, &rep);
        RT_CHECK(rep.nonzero_tiles == 3 || rep.nonzero_tiles < 0, "%s: %lld non-zero micro-tiles, want 3 (denormals are "
                 "non-zeros)", what, (long long)rep.nonzero_tiles);
    }
    free(A);
    free(B);
}

/* Results beyond the dtype's range become +-Inf as in the dense GEMM. */
static void overflow(pit_context *ctx, pit_dtype dt, double big)
{
    const int64_t m = 32, k = 64, n = 16;
    double *A = calloc((size_t)(m * k), 8), *B = malloc((size_t)(k * n) * 8);
    for (int64_t i = 0; i < k * n; i++)
        B[i] = i % 2 ? 1.0 : -1.0;
    for (int64_t j = 0; j < k; j++) {
        A[2 * k + j] = big;           /* row 2 sums to +-k*big: overflows */
        A[9 * k + j] = j % 2 ? big : -big; /* row 9 cancels: stays finite */
    }
    char what[96];
    snprintf(what, sizeof what, "overflow (A = %g)", big);
    compare_paths(ctx, what, dt, m, k, n, A, B, &k32x1, PIT_SPARSE_A, NULL);
    free(A);
    free(B);
}

int main(void)
{
    pit_context *ctx = rt_context_or_skip("test_numerics");
    pit_device_info info;
    pit_context_get_info(ctx, &info);
    printf("NaN and Inf:\n");
    nan_inf(ctx, PIT_F32);
    nan_inf(ctx, PIT_BF16);
    printf("all-zero operands:\n");
    all_zero(ctx, PIT_F32, 2, PIT_SPARSE_A, NULL);
    all_zero(ctx, PIT_F32, 2, PIT_SPARSE_A, &k32x1);
    all_zero(ctx, PIT_BF16, 3, PIT_SPARSE_A, &m1x32);
    all_zero(ctx, PIT_F32, 3, PIT_SPARSE_B, NULL);
    printf("denormals:\n");
    denormals(ctx);
    printf("overflow:\n");
    overflow(ctx, PIT_F32, 1e37);
    overflow(ctx, PIT_BF16, 1e37);
    if (info.has_f16_storage) {
        nan_inf(ctx, PIT_F16);
        overflow(ctx, PIT_F16, 3e3);
    } else {
        printf("  f16 overflow: skipped, device stores no f16\n");
    }
    pit_context_destroy(ctx);
    return rt_finish("test_numerics");
}
