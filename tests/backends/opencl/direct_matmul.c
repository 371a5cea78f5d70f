/*
 * direct_matmul.c - detection and the matmuls of test_opencl_direct: for
 * every shape x sparsity pattern x dtype, detect with several micro-tile
 * candidates at once, then matmul_sparse (axis K and M, grid from max_entries
 * and worst-case grid) and matmul_dense, each into a C poisoned with NaN;
 * and the matmuls' refusals.
 */
#include <string.h>

#include "direct.h"

/* Dense tiles tried per candidate (bm, bn, bk, threads). */
static const pit_tile g_tiles[NCANDS][2] = {
    {{32, 32, 32, 64, 1, 0}, {16, 64, 16, 0, 1, 0}},
    {{32, 32, 64, 64, 1, 0}, {7, 16, 16, 0, 1, 0}},
    {{32, 64, 64, 128, 1, 0}, {32, 16, 8, 32, 1, 0}},
    {{16, 32, 8, 0, 1, 0}, {8, 48, 4, 24, 1, 0}},
    {{3, 16, 8, 0, 1, 0}, {1, 32, 5, 0, 1, 0}},
};

void run_case(const shape *s, int pat, pit_dtype dt)
{
    const int64_t batch = s->batch, M = s->M, K = s->K, N = s->N;
    const int rank3 = batch > 1;
    const uint64_t seed = (uint64_t)(M * 1000003 + K * 1009 + N + pat * 7 + batch);
    char label[192];
    dtensor A, B, C;
    dtensor_make(&A, dt, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&B, dt, batch, K, N, s->pad, s->off, rank3);
    dtensor_make(&C, dt, batch, M, N, s->pad, s->off, rank3);

    /* Data: A with the pattern's zeros (half of them -0.0), B dense. */
    double *a = calloc((size_t)(batch * M * K) + 1, sizeof(double));
    double *bm = calloc((size_t)(batch * K * N) + 1, sizeof(double));
    double *ref = calloc((size_t)(batch * M * N) + 1, sizeof(double));
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
                double v = value_at(seed, b, m, k);
                if (is_zero(pat, seed, b, m, k))
                    v = hash01(seed, b, k, m) < 0.5 ? -0.0 : 0.0;
                size_t i = elem_index(&A, b, m, k);
                store_elem(dt, A.host, i, v);
                a[(b * M + m) * K + k] = load_elem(dt, A.host, i);
            }
        for (int64_t k = 0; k < K; ++k)
            for (int64_t n = 0; n < N; ++n) {
                size_t i = elem_index(&B, b, k, n);
                store_elem(dt, B.host, i, value_at(seed + 99, b, k, n));
                bm[(b * K + k) * N + n] = load_elem(dt, B.host, i);
            }
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += a[(b * M + m) * K + k] * bm[(b * K + k) * N + n];
                ref[(b * M + m) * N + n] = acc;
            }
    }
    OK(be->mem_write(ctx, stream, A.d.mem, 0, A.host, A.bytes));
    OK(be->mem_write(ctx, stream, B.d.mem, 0, B.host, B.bytes));

    /* Detection: all candidates in one call. */
    host_index idx[NCANDS];
    detect_candidates(idx, &A.d, batch, M, K);
    const char *dname = dt == PIT_F32 ? "f32" : dt == PIT_F16 ? "f16" : "bf16";
    for (int i = 0; i < NCANDS; ++i) {
        index_read(&idx[i]);
        snprintf(label, sizeof label, "%s %lldx%lldx%lldx%lld %s %dx%d/%c detect", dname,
                 (long long)batch, (long long)M, (long long)K, (long long)N, pat_name[pat],
                 g_cands[i].rows, g_cands[i].cols, g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K');
        int32_t max_count = check_index(&idx[i], &A, batch, M, K, label);
        for (int t = 0; t < 2; ++t) {
            for (int worst = 0; worst < 2; ++worst) {
                pit_tile tile_buf = g_tiles[i][t];
                const char *ov = getenv("PIT_TEST_TILE"); /* debugging: "bm,bn,bk,threads" */
                if (ov && t == 1)
                    sscanf(ov, "%d,%d,%d,%d", &tile_buf.bm, &tile_buf.bn, &tile_buf.bk,
                           &tile_buf.threads);
                const pit_tile *tile = &tile_buf;
                snprintf(label, sizeof label,
                         "%s %lldx%lldx%lldx%lld %s %dx%d/%c tile %dx%dx%d%s", dname,
                         (long long)batch, (long long)M, (long long)K, (long long)N,
                         pat_name[pat], g_cands[i].rows, g_cands[i].cols,
                         g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K', tile->bm, tile->bn,
                         tile->bk, worst ? " worst" : "");
                poison(&C);
                pit_status st = be->matmul_sparse(ctx, stream, tile, &idx[i].idx, max_count,
                                                  worst, &A.d, &B.d, &C.d);
                if (st == PIT_ERR_UNSUPPORTED && g_cands[i].axis == PIT_AXIS_K &&
                    g_cands[i].rows % tile->bm != 0) {
                    ++g_checks; /* documented refusal */
                    continue;
                }
                EXPECT(st == PIT_SUCCESS, "%s: matmul_sparse -> %d %s", label, (int)st,
                       g_error);
                if (st == PIT_SUCCESS)
                    check_c(&C, ref, batch, M, N, label);
            }
        }
    }
    for (int i = 0; i < NCANDS; ++i)
        index_free(&idx[i]);

    /* Dense GEMM. */
    snprintf(label, sizeof label, "%s %lldx%lldx%lldx%lld %s dense (%s)", dname,
             (long long)batch, (long long)M, (long long)K, (long long)N, pat_name[pat],
             dt == PIT_F32 ? be->dense_name(ctx) : "pit dense tile");
    poison(&C);
    pit_status st = be->matmul_dense(ctx, stream, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_SUCCESS, "%s: matmul_dense -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&C, ref, batch, M, N, label);

    free(a);
    free(bm);
    free(ref);
    dtensor_free(&A);
    dtensor_free(&B);
    dtensor_free(&C);
}

/* ---- error paths --------------------------------------------------------------------- */

/* A real (not injected) allocation failure: one byte more than the device's
 * largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) is out of memory, and
 * the message names the size and the driver's error. */
static void test_real_alloc_failure(void)
{
    const ocl_ctx *c = ctx;
    cl_ulong largest = 0;
    EXPECT(clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof largest, &largest,
                           NULL) == CL_SUCCESS, "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
    size_t bytes = (size_t)largest + 1;
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%zu bytes", bytes);
    void *mem = NULL;
    g_error[0] = '\0';
    pit_status st = be->mem_alloc(ctx, bytes, &mem);
    EXPECT(st == PIT_ERR_OUT_OF_MEMORY && strstr(g_error, size_text) && strstr(g_error, "CL_"),
           "allocation of %s (largest %llu) -> %d (%s)", size_text, (unsigned long long)largest,
           (int)st, g_error);
    if (st == PIT_SUCCESS)
        be->mem_free(ctx, mem);
}

void test_errors(void)
{
    void *mem = NULL;
    g_fail_next_alloc = 1;
    pit_status st = be->mem_alloc(ctx, 64, &mem);
    EXPECT(st == PIT_ERR_OUT_OF_MEMORY, "injected allocation failure -> %d", (int)st);
    test_real_alloc_failure();

    /* Sparse B (axis N) is refused cleanly. */
    dtensor A, B, C;
    dtensor_make(&A, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&B, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&C, PIT_F32, 1, 8, 8, 0, 0, 0);
    host_index h;
    index_make(&h, (pit_microtile){1, 8, PIT_AXIS_N}, 1, 8, 8);
    pit_tile tile = {8, 16, 8, 0, 1, 0};
    st = be->matmul_sparse(ctx, stream, &tile, &h.idx, 1, 0, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED && strstr(g_error, "axis"),
           "axis N -> %d (%s)", (int)st, g_error);
    /* A tile too large for local memory is refused, not crashed. */
    pit_tile huge = {512, 256, 256, 0, 1, 0};
    host_index hk;
    index_make(&hk, (pit_microtile){512, 1, PIT_AXIS_K}, 1, 8, 8);
    st = be->matmul_sparse(ctx, stream, &huge, &hk.idx, 1, 0, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED, "huge tile -> %d (%s)", (int)st, g_error);
    if (g_verbose)
        fprintf(stderr, "  huge tile message: %s\n", g_error);
    /* Mismatched shapes. */
    C.d.shape[1] = 9;
    st = be->matmul_dense(ctx, stream, &A.d, &B.d, &C.d);
    EXPECT(st == PIT_ERR_SHAPE_MISMATCH, "shape mismatch -> %d", (int)st);
    index_free(&h);
    index_free(&hk);
    dtensor_free(&A);
    dtensor_free(&B);
    dtensor_free(&C);
}

/* A program that does not compile gives PIT_ERR_COMPILE with the build log. */
