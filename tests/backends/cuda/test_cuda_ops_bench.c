/*
 * test_cuda_ops_bench.c - test_cuda_ops --bench: the attention and MoE
 * bench points, timed with events next to cuBLAS.
 */
#include <math.h>
#include <string.h>

#include "test_cuda_ops.h"

typedef void (*bench_fn)(void *user);

static double time_ms(bench_fn fn, void *user)
{
    return test_time_ms(fn, user, NULL);
}

static double time_ms_host(bench_fn fn, void *user, double *host_ms)
{
    return test_time_ms(fn, user, host_ms);
}

typedef struct attn_bench {
    dten Q, K, V, O, M, S, KT;
    dindex ix, full;
    pit_tdesc dv;
} attn_bench;

static void run_attention(void *u)
{
    attn_bench *b = u;
    CHECK(be->detect(bctx, stream, &b->M.d, &b->ix.ix, 1));
    CHECK(be->attention_sparse(bctx, stream, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

/* as core's pit_sparse_attention: detection handed over with the kernel */
static void run_attention_detect(void *u)
{
    attn_bench *b = u;
    CHECK(be->attention_detect(bctx, stream, &b->dv, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

static void run_attention_only(void *u)
{
    attn_bench *b = u;
    CHECK(be->attention_sparse(bctx, stream, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

static void run_detect(void *u)
{
    attn_bench *b = u;
    CHECK(be->detect(bctx, stream, &b->M.d, &b->ix.ix, 1));
}

static void run_dense_gemms(void *u)
{
    attn_bench *b = u;
    CHECK(be->matmul_dense(bctx, stream, &b->Q.d, &b->KT.d, &b->S.d));
    CHECK(be->matmul_dense(bctx, stream, &b->S.d, &b->V.d, &b->O.d));
}

static void run_dense_softmax(void *u)
{
    attn_bench *b = u;
    CHECK(be->softmax_sparse(bctx, stream, &b->full.ix, &b->S.d, &b->M.d, &b->S.d, 0.125f));
}

/* mask -> index -> output with b's mask (the index built on it, marked) */
static void bench_attention_mask(attn_bench *b, int64_t blk, int64_t D, int64_t BH)
{
    double host_all, t_all = time_ms_host(run_attention_detect, b, &host_all);
    double t_seq = time_ms(run_attention, b);
    double t_det = time_ms(run_detect, b), t_att = time_ms(run_attention_only, b);
    double flops = 0;
    int32_t *counts = malloc((size_t)b->ix.ix.groups * 4);
    CHECK(be->mem_read(bctx, stream, b->ix.ix.counts, 0, counts, (size_t)b->ix.ix.groups * 4));
    for (int g = 0; g < b->ix.ix.groups; ++g) flops += 4.0 * blk * blk * D * counts[g] * BH;
    free(counts);
    printf("attention 1x16x8192x64 bf16, 128x128 block mask 0.9, %s mask: mask->index->output %.3f ms "
           "(detection inside the kernel, the default; host queueing %.3f ms a call; detect %.3f, fused kernel %.3f ms, "
           "%.0f TFLOP/s; detect then kernel, apart %.3f ms)\n",
           dt_name(b->M.d.dtype), t_all, host_all, t_det, t_att, flops / t_att * 1e-9, t_seq);
}

void test_bench_attention(void)
{
    const int64_t BH = 16, L = 8192, D = 64, blk = 128;
    attn_bench b;
    memset(&b, 0, sizeof b);
    int64_t sq[3] = {BH, L, D}, sm[2] = {L, L}, skt[3] = {BH, D, L}, ss[3] = {BH, L, L};
    size_t n = (size_t)(BH * L * D);
    double *x = randoms(n);
    b.Q = make(PIT_BF16, 3, sq, x), b.K = make(PIT_BF16, 3, sq, x), b.V = make(PIT_BF16, 3, sq, x);
    b.O = make(PIT_BF16, 3, sq, NULL);
    free(x);
    /* random 128x128 block mask at sparsity 0.9, shared by the heads: as
     * bf16 (the data's dtype) and as u8 (a bool mask), the same pattern */
    double *mv = mask_values(1, L, L, (int)blk, (int)blk, 0.9, 2);
    pit_ref_sparsify_tiles(&rng, mv, 1, L, L, (int)blk, (int)blk, 0, 0, 0.9);
    static const pit_dtype mask_dts[] = {PIT_BF16, PIT_U8};
    for (int i = 0; i < 2; ++i) {
        if (i) drop(&b.M), drop_index(&b.ix);
        b.M = make(mask_dts[i], 2, sm, mv);
        /* marked as core builds it for the fused kernel: every indexed block is all on */
        b.ix = build_index_marked(&b.M, 1, (int)blk, (int)blk, PIT_AXIS_K, 1);
        check_marks(&b.M, 1, &b.ix, 1, "bench mask: index marks");
        b.dv = detect_view(&b.M, 1);
        bench_attention_mask(&b, blk, D, BH);
    }
    free(mv);
    /* rough dense reference: Q.K^T and S.V with cuBLAS, softmax over all blocks */
    b.KT = make(PIT_BF16, 3, skt, NULL);
    CHECK(be->transpose(bctx, stream, &b.K.d, &b.KT.d));
    b.S = make(PIT_BF16, 3, ss, NULL);
    double *ones = malloc((size_t)(L * L) * sizeof *ones);
    for (int64_t i = 0; i < L * L; ++i) ones[i] = 1.0;
    drop(&b.M);
    b.M = make(PIT_BF16, 2, sm, ones);
    free(ones);
    b.full = build_index(&b.M, BH, 1, 8192, PIT_AXIS_K);
    double t_gemm = time_ms(run_dense_gemms, &b), t_sm = time_ms(run_dense_softmax, &b);
    printf("dense attention (cuBLAS Q.K^T + S.V %.3f ms, softmax %.3f ms): %.3f ms\n", t_gemm, t_sm, t_gemm + t_sm);
    drop(&b.Q), drop(&b.K), drop(&b.V), drop(&b.O), drop(&b.M), drop(&b.S), drop(&b.KT);
    drop_index(&b.ix), drop_index(&b.full);
}

typedef struct moe_bench {
    dten X, W, W0, G, I, Y;
    pit_index ix;
    int32_t T;
} moe_bench;

static void run_moe(void *u)
{
    moe_bench *b = u;
    CHECK(be->moe_route(bctx, stream, &b->I.d, &b->ix));
    /* max_entries = T: the tensor-core path plans on the device, no read-back;
     * the backend's tile for the device */
    CHECK(be->moe_matmul(bctx, stream, 0, NULL, &b->ix, b->T, &b->X.d, &b->W.d, &b->G.d, &b->Y.d));
}

static void run_moe_dense(void *u)
{
    moe_bench *b = u;
    CHECK(be->matmul_dense(bctx, stream, &b->X.d, &b->W0.d, &b->Y.d));
}

/* a device-to-device copy of Y's bytes (from the weights): the copy
 * bandwidth of the memory floor */
static void run_moe_copy(void *u)
{
    moe_bench *b = u;
    CHECK(be->mem_copy(bctx, stream, b->Y.d.mem, b->Y.d.offset, b->W.d.mem, b->W.d.offset, b->Y.n * 2));
}

/* 64 expert loads from 4 to 1130 tokens summing to T (a power-law ramp) */
static void skewed_counts(int64_t T, int E, int32_t *c)
{
    int64_t sum = 0;
    for (int e = 0; e < E; ++e) {
        c[e] = 4 + (int32_t)(1126.0 * pow((double)e / (E - 1), 3.46));
        sum += c[e];
    }
    for (int e = E / 2; sum != T; e = e + 1 < E - 1 ? e + 1 : E / 2) {
        int32_t d = sum < T ? 1 : -1;
        if (c[e] + d >= 4 && c[e] + d <= 1130) c[e] += d, sum += d;
    }
}

/* expert loads of the MoE bench: "skewed" (a power-law ramp), "even" (T / E
 * each) or "one" (every token to expert 0: one gathered dense GEMM); returns
 * the load's name for the bench line */
static const char *moe_loads(const char *kind, int64_t T, int E, int32_t *c)
{
    const int even = !strcmp(kind, "even"), one = !strcmp(kind, "one");
    for (int e = 0; e < E; ++e) c[e] = even ? (int32_t)(T / E) : one && e == 0 ? (int32_t)T : 0;
    if (even || one) return kind;
    skewed_counts(T, E, c);
    return "skewed (4..1130)";
}

void test_bench_moe(const char *loads)
{
    const int64_t T = 16384, H = 1024, N = 4096, E = 64;
    moe_bench b;
    memset(&b, 0, sizeof b);
    b.T = (int32_t)T;
    int64_t sx[2] = {T, H}, sw[3] = {E, H, N}, sw0[2] = {H, N}, sy[2] = {T, N}, sg[2] = {T, 1};
    double *x = randoms((size_t)(E * H * N));
    b.X = make(PIT_BF16, 2, sx, x), b.W = make(PIT_BF16, 3, sw, x), b.W0 = make(PIT_BF16, 2, sw0, x);
    b.G = make(PIT_F32, 2, sg, x);
    free(x);
    int32_t counts[64];
    const char *load = moe_loads(loads, T, (int)E, counts);
    double *ids = malloc((size_t)T * sizeof *ids);
    int64_t at = 0;
    for (int e = 0; e < E; ++e)
        for (int i = 0; i < counts[e]; ++i) ids[at++] = e;
    for (int64_t i = T - 1; i > 0; --i) { /* tokens in random order */
        int64_t j = (int64_t)(pit_rng_next(&rng) % (uint64_t)(i + 1));
        double t = ids[i];
        ids[i] = ids[j], ids[j] = t;
    }
    b.I = make(PIT_I32, 2, sg, ids);
    free(ids);
    b.Y = make(PIT_BF16, 2, sy, NULL);
    b.ix.tile = (pit_microtile){1, (int32_t)H, PIT_AXIS_M};
    b.ix.groups = b.ix.groups_per_batch = (int32_t)E;
    b.ix.capacity = (int32_t)T;
    CHECK(be->mem_alloc(bctx, (size_t)E * 4, &b.ix.counts));
    CHECK(be->mem_alloc(bctx, (size_t)(E * T) * 4, &b.ix.entries));
    CHECK(be->mem_alloc(bctx, 4, &b.ix.total));
    double host_moe, t_moe = time_ms_host(run_moe, &b, &host_moe), t_dense = time_ms(run_moe_dense, &b);
    double flops = 2.0 * T * H * N;
    /* the memory floor: what the layer moves at least (the routed experts'
     * weights and X read once, Y written) at the copy bandwidth of this run;
     * with 64 experts' 512 MB of weights it lies above the dense GEMM */
    int used = 0;
    for (int e = 0; e < E; ++e) used += counts[e] > 0;
    const double bytes = 2.0 * ((double)used * H * N + (double)T * H + (double)T * N) + 8.0 * T;
    const double t_copy = time_ms(run_moe_copy, &b), bw = 2.0 * (double)b.Y.n * 2 / t_copy * 1e-9; /* TB/s */
    const double t_mem = bytes / bw * 1e-9, t_floor = t_mem > t_dense ? t_mem : t_dense;
    printf("moe 16384 tokens 1024->4096, 64 experts top-1 %s, bf16: routing->output %.3f ms "
           "(%.0f TFLOP/s, host queueing %.3f ms a call); dense GEMM of all tokens (cuBLAS) %.3f ms (%.0f TFLOP/s); "
           "ratio %.2f; memory floor %.3f ms (%.0f MB: the weights of the %d routed experts, X and Y, "
           "at the copy bandwidth %.2f TB/s); floor max(dense, memory) %.3f ms, pit/floor %.2f\n",
           load, t_moe, flops / t_moe * 1e-9, host_moe, t_dense, flops / t_dense * 1e-9, t_moe / t_dense, t_mem, bytes * 1e-6, used, bw, t_floor,
           t_moe / t_floor);
    drop(&b.X), drop(&b.W), drop(&b.W0), drop(&b.G), drop(&b.I), drop(&b.Y);
    be->mem_free(bctx, b.ix.counts), be->mem_free(bctx, b.ix.entries), be->mem_free(bctx, b.ix.total);
}

