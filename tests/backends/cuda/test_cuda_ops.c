/*
 * test_cuda_ops.c - drives the operators of dynamic-sparse models of
 * libpit-cuda.so through its pit_backend table alone (no libpit): the block
 * index is built by the backend's own detect on the mask, outputs are
 * NaN-poisoned first, and every result is compared with the double-precision
 * CPU references of core/reference/reference.c (f32 1e-4, f16/bf16 1e-2
 * relative norm error). Exit 77 (skipped) when there is no CUDA driver or
 * device.
 *
 *   test_cuda_ops            correctness (odd shapes, empty and full patterns)
 *   test_cuda_ops --bench [attention|moe [skewed|even|one]]
 *                            the attention and MoE bench points (or one of
 *                            them), timed with events (warm-up, median of
 *                            20) next to cuBLAS (test_cuda_ops_bench.c)
 * Helpers: test_cuda_ops_util.c.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_plugin.h"
#include "../host_cache.h"
#include "test_cuda_ops.h"

static int host_inject(void)
{
    return 0;
}

static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_inject,
                                host_open_cache_entry, host_cache_load, host_cache_store, host_cache_drop};
const pit_backend *be;
void *bctx, *stream;
int failures;
pit_rng rng;
int test_arch; /* sm_XY as XY */

const char *test_last_error(void)
{
    return last_error;
}

double test_time_ms(void (*fn)(void *), void *user, double *host_ms)
{
    double ms;
    CHECK(test_median_ms(be, bctx, stream, fn, user, &ms, host_ms));
    return ms;
}

/* ---- cases ------------------------------------------------------------------------ */
static void test_sddmm(pit_dtype dt, int kind, int mask_rank, pit_dtype mdt)
{
    int64_t B = 2, M = 70, N = 90, K = 33;
    int br = 32, bc = 16;
    int64_t sa[3] = {B, M, K}, sb[3] = {B, N, K}, sc[3] = {B, M, N};
    int64_t sm[3] = {mask_rank == 3 ? B : 1, M, N};
    double *a = randoms((size_t)(B * M * K)), *b = randoms((size_t)(B * N * K));
    double *mv = mask_values(sm[0], M, N, br, bc, 0.6, kind);
    pit_ref_encode_mask(mdt, mv, (size_t)(sm[0] * M * N));
    dten A = make(dt, 3, sa, a), Bt = make(dt, 3, sb, b), C = make(dt, 3, sc, NULL);
    dten Mk = make(mdt, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    dindex ix = build_index(&Mk, B, br, bc, PIT_AXIS_K);
    CHECK(be->sddmm(bctx, stream, &ix.ix, &A.d, &Bt.d, &Mk.d, &C.d));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref);
    pit_ref_sddmm(B, M, N, K, A.h, Bt.h, Mk.h, mask_rank == 3, ref);
    char what[128];
    snprintf(what, sizeof what, "sddmm 2x70x90x33 block 32x16 %s mask rank %d %s", test_kind_names[kind], mask_rank,
             dt_name(mdt));
    compare(what, &C, ref);
    free(a), free(b), free(mv), free(ref);
    drop(&A), drop(&Bt), drop(&C), drop(&Mk), drop_index(&ix);
}

static void test_softmax(pit_dtype dt, int kind, int br, int bc, int mask_rank)
{
    int64_t B = 2, M = 37, N = 100;
    int64_t s[3] = {B, M, N}, sm[3] = {mask_rank == 3 ? B : 1, M, N};
    double *x = randoms((size_t)(B * M * N)), *dy = randoms((size_t)(B * M * N));
    double *mv = mask_values(sm[0], M, N, 4, 8, 0.5, kind);
    pit_ref_encode_mask(PIT_F32, mv, (size_t)(sm[0] * M * N));
    dten X = make(dt, 3, s, x), dY = make(dt, 3, s, dy), Y = make(dt, 3, s, NULL), dX = make(dt, 3, s, NULL);
    dten Mk = make(PIT_F32, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    dindex ix = build_index(&Mk, B, br, bc, PIT_AXIS_K);
    float scale = 0.7f;
    CHECK(be->softmax_sparse(bctx, stream, &ix.ix, &X.d, &Mk.d, &Y.d, scale));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref), *yd = malloc((size_t)(B * M * N) * sizeof *yd);
    pit_ref_softmax(B, M, N, X.h, Mk.h, mask_rank == 3, scale, ref);
    char what[128];
    snprintf(what, sizeof what, "softmax 2x37x100 tile %dx%d %s mask rank %d", br, bc, test_kind_names[kind], mask_rank);
    compare(what, &Y, ref);
    download(&Y, yd); /* the backward from the device's Y */
    CHECK(be->softmax_sparse_backward(bctx, stream, &ix.ix, &Y.d, &dY.d, &Mk.d, &dX.d, scale));
    pit_ref_softmax_backward(B, M, N, yd, dY.h, Mk.h, mask_rank == 3, scale, ref);
    snprintf(what, sizeof what, "softmax backward 2x37x100 tile %dx%d %s", br, bc, test_kind_names[kind]);
    compare(what, &dX, ref);
    /* in place, as the composed attention runs it */
    CHECK(be->softmax_sparse(bctx, stream, &ix.ix, &X.d, &Mk.d, &X.d, scale));
    pit_ref_softmax(B, M, N, X.h, Mk.h, mask_rank == 3, scale, ref);
    snprintf(what, sizeof what, "softmax in place tile %dx%d %s", br, bc, test_kind_names[kind]);
    compare(what, &X, ref);
    free(x), free(dy), free(mv), free(ref), free(yd);
    drop(&X), drop(&dY), drop(&Y), drop(&dX), drop(&Mk), drop_index(&ix);
}

/* block x block blocks of an L x L mask, each (by a draw) empty, all on,
 * on but for ONE element, or with elements off at random (kind "mixed") */
static double *mixed_mask(int64_t batch, int64_t L, int block)
{
    double *m = malloc((size_t)(batch * L * L + 1) * sizeof *m);
    int64_t nb = (L + block - 1) / block;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < nb; ++i)
            for (int64_t j = 0; j < nb; ++j) {
                int how = (int)(pit_rng_next(&rng) % 4); /* 0 empty, 1 full, 2 one zero, 3 random */
                int64_t h = (i + 1) * block < L ? block : L - i * block, w = (j + 1) * block < L ? block : L - j * block;
                int64_t hole = (int64_t)(pit_rng_next(&rng) % (uint64_t)(h * w));
                for (int64_t y = 0; y < h; ++y)
                    for (int64_t x = 0; x < w; ++x) {
                        double on = how == 1 || (how == 2 && y * w + x != hole) ||
                                    (how == 3 && pit_rng_next(&rng) % 3 != 0);
                        m[(b * L + i * block + y) * L + j * block + x] = on;
                    }
            }
    return m;
}

/* kind: 0 random, 1 empty, 2 full (mask_values), 3 mixed (mixed_mask);
 * marks: build the index with flag_full, as core does for the fused kernel,
 * and check the marks themselves as well */
static void test_attention(pit_dtype dt, int64_t BH, int64_t L, int64_t D, int block, int kind, int mask_rank,
                           pit_dtype mdt, int marks)
{
    int64_t sq[3] = {BH, L, D}, sm[3] = {mask_rank == 3 ? BH : 1, L, L};
    double *q = randoms((size_t)(BH * L * D)), *k = randoms((size_t)(BH * L * D)), *v = randoms((size_t)(BH * L * D));
    double *mv = kind == 3 ? mixed_mask(sm[0], L, block) : mask_values(sm[0], L, L, block, block, 0.6, kind);
    pit_ref_encode_mask(mdt, mv, (size_t)(sm[0] * L * L));
    dten Q = make(dt, 3, sq, q), K = make(dt, 3, sq, k), V = make(dt, 3, sq, v), O = make(dt, 3, sq, NULL);
    dten Mk = make(mdt, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    /* a rank-2 mask is indexed once and shared by every head */
    dindex ix = build_index_marked(&Mk, mask_rank == 3 ? BH : 1, block, block, PIT_AXIS_K, marks);
    char what[128];
    snprintf(what, sizeof what, "attention %lldx%lldx%lld block %d %s mask rank %d %s%s", (long long)BH, (long long)L,
             (long long)D, block, test_kind_names[kind], mask_rank, dt_name(mdt), marks ? " marked" : "");
    if (marks) check_marks(&Mk, sm[0], &ix, 1, what);
    float scale = 1.0f / sqrtf((float)D);
    /* the fused kernel's shapes (16-bit, sm_80+, blocks and head dims 64 or
     * 128); the backend refuses others before any work, and core composes
     * them from sddmm, softmax and the sparse matmul */
    const int fusable = dt != PIT_F32 && test_arch >= 80 && (block == 64 || block == 128) && (D == 64 || D == 128);
    if (!fusable) {
        pit_tdesc dv = detect_view(&Mk, mask_rank == 3 ? BH : 1);
        const pit_status fused = be->attention_sparse(bctx, stream, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale);
        const pit_status with = be->attention_detect(bctx, stream, &dv, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale);
        const int ok = fused == PIT_ERR_UNSUPPORTED && with == PIT_ERR_UNSUPPORTED;
        if (!ok) ++failures;
        printf("%s %-58s unsupported (core composes)\n", ok ? "ok  " : "FAIL", what);
        free(q), free(k), free(v), free(mv);
        drop(&Q), drop(&K), drop(&V), drop(&O), drop(&Mk), drop_index(&ix);
        return;
    }
    CHECK(be->attention_sparse(bctx, stream, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale));
    double *ref = malloc((size_t)(BH * L * D) * sizeof *ref);
    pit_ref_attention(BH, L, D, D, Q.h, K.h, V.h, Mk.h, mask_rank == 3, scale, ref);
    compare(what, &O, ref);
    /* detection in the call: inside the fused kernel where it can be (whole
     * blocks, aligned mask rows), as a kernel of its own otherwise; the index
     * it leaves is checked too */
    if (marks) {
        pit_tdesc dv = detect_view(&Mk, mask_rank == 3 ? BH : 1);
        poison(&O);
        poison_index(&ix);
        CHECK(be->attention_detect(bctx, stream, &dv, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale));
        char with[160];
        snprintf(with, sizeof with, "%s, detection in the call", what);
        compare(with, &O, ref);
        check_marks(&Mk, sm[0], &ix, 1, with);
    }
    free(q), free(k), free(v), free(mv), free(ref);
    drop(&Q), drop(&K), drop(&V), drop(&O), drop(&Mk), drop_index(&ix);
}

/* MoE: every mode against the reference; ids include skipped -1 and E. */
static void test_moe(pit_dtype dt, int64_t T, int64_t H, int64_t N, int64_t E, int64_t k)
{
    int64_t sx[2] = {T, H}, sw[3] = {E, H, N}, sy[2] = {T, N}, sg[2] = {T, k};
    double *x = randoms((size_t)(T * H)), *w = randoms((size_t)(E * H * N)), *g = randoms((size_t)(T * k));
    double *dy = randoms((size_t)(T * N));
    double *idv = malloc((size_t)(T * k) * sizeof *idv);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
    for (int64_t i = 0; i < T * k; ++i) {
        uint64_t r = pit_rng_next(&rng) % (uint64_t)(E + 2);
        ids[i] = r == (uint64_t)E + 1 ? -1 : (int32_t)r; /* E and -1 are skipped */
        idv[i] = ids[i];
    }
    dten X = make(dt, 2, sx, x), W = make(dt, 3, sw, w), G = make(PIT_F32, 2, sg, g), DY = make(dt, 2, sy, dy);
    dten I = make(PIT_I32, 2, sg, idv), Y = make(dt, 2, sy, NULL), DX = make(dt, 2, sx, NULL);
    dten DW = make(dt, 3, sw, NULL), DG = make(PIT_F32, 2, sg, NULL);
    pit_index ix;
    memset(&ix, 0, sizeof ix);
    ix.tile = (pit_microtile){1, (int32_t)H, PIT_AXIS_M};
    ix.groups = ix.groups_per_batch = (int32_t)E;
    ix.capacity = (int32_t)(T * k);
    CHECK(be->mem_alloc(bctx, (size_t)E * 4, &ix.counts));
    CHECK(be->mem_alloc(bctx, (size_t)(E * T * k) * 4, &ix.entries));
    CHECK(be->mem_alloc(bctx, 4, &ix.total));
    CHECK(be->moe_route(bctx, stream, &I.d, &ix));
    int32_t *counts = malloc((size_t)E * 4), maxc = 0, total = 0, want = 0;
    CHECK(be->mem_read(bctx, stream, ix.counts, 0, counts, (size_t)E * 4));
    CHECK(be->mem_read(bctx, stream, ix.total, 0, &total, 4));
    for (int64_t e = 0; e < E; ++e) maxc = counts[e] > maxc ? counts[e] : maxc;
    for (int64_t i = 0; i < T * k; ++i) want += ids[i] >= 0 && ids[i] < E;
    char what[128];
    snprintf(what, sizeof what, "moe_route T %lld k %lld E %lld: %d routed", (long long)T, (long long)k, (long long)E,
             total);
    if (total != want) ++failures;
    printf("%s %s (expected %d)\n", total == want ? "ok  " : "FAIL", what, want);

    size_t nx = (size_t)(T * H), nw = (size_t)(E * H * N), ny = (size_t)(T * N), ng = (size_t)(T * k);
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8), *rdw = malloc(nw * 8), *rdg = malloc(ng * 8);
    pit_ref_moe_forward(T, H, N, E, k, X.h, ids, G.h, W.h, ry);
    pit_ref_moe_backward(T, H, N, E, k, X.h, ids, G.h, W.h, DY.h, rdx, rdw, rdg);
    pit_tile *tile = NULL; /* the backend's tile for the device and dtype */
    CHECK(be->moe_matmul(bctx, stream, 0, tile, &ix, maxc, &X.d, &W.d, &G.d, &Y.d));
    snprintf(what, sizeof what, "moe forward T %lld H %lld N %lld E %lld k %lld", (long long)T, (long long)H,
             (long long)N, (long long)E, (long long)k);
    compare(what, &Y, ry);
    CHECK(be->moe_matmul(bctx, stream, 1, tile, &ix, maxc, &DY.d, &W.d, &G.d, &DX.d));
    snprintf(what, sizeof what, "moe dX T %lld H %lld N %lld E %lld k %lld", (long long)T, (long long)H,
             (long long)N, (long long)E, (long long)k);
    compare(what, &DX, rdx);
    CHECK(be->moe_matmul(bctx, stream, 2, tile, &ix, maxc, &X.d, &DW.d, &G.d, &DY.d));
    snprintf(what, sizeof what, "moe dW (every expert written)");
    compare(what, &DW, rdw);
    CHECK(be->moe_matmul(bctx, stream, 3, tile, &ix, maxc, &X.d, &W.d, &DG.d, &DY.d));
    snprintf(what, sizeof what, "moe dgates (0 for skipped ids)");
    compare(what, &DG, rdg);
    free(x), free(w), free(g), free(dy), free(idv), free(ids), free(counts);
    free(ry), free(rdx), free(rdw), free(rdg);
    drop(&X), drop(&W), drop(&G), drop(&DY), drop(&I), drop(&Y), drop(&DX), drop(&DW), drop(&DG);
    be->mem_free(bctx, ix.counts), be->mem_free(bctx, ix.entries), be->mem_free(bctx, ix.total);
}

static void test_rows(pit_dtype dt, int64_t B, int64_t M, int64_t K, int64_t N, int keep, int b_batched)
{
    int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, sc[3] = {B, M, N};
    double *a = randoms((size_t)(B * M * K)), *b = randoms((size_t)(B * K * N)), *c = randoms((size_t)(B * M * N));
    for (int64_t r = 0; r < B * M; ++r)
        if (pit_rng_uniform(&rng) > 0.3) memset(a + r * K, 0, (size_t)K * sizeof *a); /* padding rows */
    dten A = make(dt, 3, sa, a), Bm = make(dt, b_batched ? 3 : 2, b_batched ? sb : sb + 1, b), C = make(dt, 3, sc, c);
    pit_index ix;
    memset(&ix, 0, sizeof ix);
    dindex r = build_index(&A, B, 1, (int)K, PIT_AXIS_M);
    ix = r.ix;
    CHECK(be->matmul_rows(bctx, stream, NULL, &ix, r.max_entries, &A.d, &Bm.d, &C.d, keep));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref);
    memcpy(ref, C.h, (size_t)(B * M * N) * sizeof *ref);
    pit_ref_matmul_rows(B, M, N, K, A.h, Bm.h, b_batched, keep, ref);
    char what[128];
    snprintf(what, sizeof what, "matmul_rows %lldx%lldx%lldx%lld keep %d B batched %d", (long long)B, (long long)M,
             (long long)K, (long long)N, keep, b_batched);
    compare(what, &C, ref);
    free(a), free(b), free(c), free(ref);
    drop(&A), drop(&Bm), drop(&C), drop_index(&r);
}

static void test_elementwise(pit_dtype dt)
{
    int64_t s[3] = {3, 45, 77}, st[3] = {3, 77, 45};
    size_t n = 3 * 45 * 77;
    double *x = randoms(n), *ref = malloc(n * sizeof *ref);
    dten X = make(dt, 3, s, x), Y = make(dt, 3, s, NULL), T = make(dt, 3, st, NULL);
    CHECK(be->relu(bctx, stream, &X.d, &Y.d));
    pit_ref_relu(n, X.h, ref);
    compare("relu 3x45x77", &Y, ref);
    CHECK(be->transpose(bctx, stream, &X.d, &T.d));
    pit_ref_transpose(3, 45, 77, X.h, ref);
    compare("transpose 3x45x77", &T, ref);
    CHECK(be->relu(bctx, stream, &X.d, &X.d));
    pit_ref_relu(n, X.h, ref);
    compare("relu in place", &X, ref);
    free(x), free(ref);
    drop(&X), drop(&Y), drop(&T);
}

int test_correctness(void)
{
    for (int d = 0; d < 3; ++d) {
        pit_dtype dt = test_dtypes[d];
        for (int kind = 0; kind < 3; ++kind) test_sddmm(dt, kind, kind == 0 ? 3 : 2, PIT_F32);
        test_sddmm(dt, 0, 2, PIT_I32);
        test_sddmm(dt, 0, 2, PIT_BF16);
        test_sddmm(dt, 0, 3, PIT_U8);
        for (int kind = 0; kind < 3; ++kind) test_softmax(dt, kind, 1, 32, 2);
        test_softmax(dt, 0, 4, 16, 3);
        test_softmax(dt, 0, 16, 8, 2);
        /* fused for 16-bit (blocks 64/128, head dims 64/128), unsupported otherwise */
        test_attention(dt, 3, 200, 64, 64, 0, 2, PIT_F32, 0);
        test_attention(dt, 2, 300, 128, 128, 0, 3, PIT_BF16, 0);
        test_attention(dt, 2, 256, 64, 128, 0, 2, PIT_F16, 0);
        test_attention(dt, 2, 130, 64, 64, 2, 2, PIT_I32, 0);
        test_attention(dt, 2, 100, 64, 64, 1, 2, PIT_F32, 0);
        test_attention(dt, 2, 70, 24, 32, 0, 3, PIT_F32, 0);
        /* "full" marks (flag_full, as core builds the index): the fused
         * kernel skips the mask of marked blocks; f32 and block 32 are
         * unsupported (core composes them) */
        test_attention(dt, 2, 256, 64, 128, 2, 2, PIT_BF16, 1);  /* every block all on */
        test_attention(dt, 2, 512, 64, 128, 3, 2, PIT_BF16, 1);  /* full, partial, one-zero, empty */
        test_attention(dt, 3, 512, 64, 64, 3, 3, PIT_F16, 1);    /* per head */
        test_attention(dt, 2, 300, 64, 128, 3, 2, PIT_F32, 1);   /* L odd to the block: edges never marked */
        test_attention(dt, 2, 200, 128, 64, 2, 2, PIT_BF16, 1);  /* all on, L odd to the block */
        test_attention(dt, 2, 259, 64, 64, 3, 3, PIT_I32, 1);    /* odd L, 1-element loads */
        test_attention(dt, 2, 256, 64, 32, 3, 2, PIT_F32, 1);    /* blocks inside one detection region */
        test_attention(dt, 2, 100, 64, 64, 1, 2, PIT_BF16, 1);   /* every key masked: O = 0 */
        test_attention(dt, 2, 256, 64, 64, 1, 2, PIT_BF16, 1);   /* the same, detection inside the kernel */
        test_attention(dt, 3, 384, 64, 64, 3, 2, PIT_F32, 1);    /* f32 mask, detection inside */
        test_attention(dt, 2, 256, 128, 128, 3, 3, PIT_I32, 1);  /* i32 per-head mask, detection inside */
        test_attention(dt, 5, 1024, 64, 128, 0, 2, PIT_BF16, 1); /* more items than run at once */
        /* u8 (bool) masks: 8-byte detection loads, pair loads of 2 bytes */
        test_attention(dt, 2, 512, 64, 128, 3, 2, PIT_U8, 1);    /* full, partial, one-zero, empty */
        test_attention(dt, 3, 259, 64, 64, 3, 3, PIT_U8, 1);     /* odd L, per head, 1-byte loads */
        test_attention(dt, 2, 256, 64, 64, 0, 2, PIT_U8, 0);     /* unmarked */
        test_moe(dt, 77, 40, 72, 5, 1);
        test_moe(dt, 150, 64, 48, 7, 2);
        test_moe(dt, 33, 20, 30, 3, 1);
        test_rows(dt, 2, 50, 40, 24, 0, 0);
        test_rows(dt, 2, 50, 40, 24, 1, 1);
        test_rows(dt, 1, 77, 33, 19, 0, 0);
        test_elementwise(dt);
    }
    return failures;
}

int main(int argc, char **argv)
{
    pit_device_info info;
    int loaded = load_cuda_plugin(&host, &be, &info);
    if (loaded != 0) return loaded;
    printf("device: %s %s, %s\n", info.name, info.arch, info.driver_version);
    test_arch = !strncmp(info.arch, "sm_", 3) ? atoi(info.arch + 3) : 0;
    CHECK(be->context_create(0, &(pit_switches){{0}}, &bctx));
    CHECK(be->stream_create(bctx, &stream));
    pit_rng_seed(&rng, 5);
    int rc = 0;
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        const char *only = argc > 2 ? argv[2] : "";
        if (strcmp(only, "moe")) test_bench_attention();
        if (strcmp(only, "attention")) test_bench_moe(argc > 3 ? argv[3] : "skewed");
    } else {
        rc = test_correctness();
    }
    be->stream_destroy(bctx, stream);
    be->context_destroy(bctx);
    be->shutdown();
    printf(rc ? "FAILED: %d failures\n" : "PASSED\n", rc);
    return rc ? 1 : 0;
}

