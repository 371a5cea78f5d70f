/*
 * examples/sparse_attention.c - pit_attention on the masks real models make.
 *
 * 1. Longformer-style dynamic sparse attention. Each query attends to a
 *    sliding window of keys around it plus a few global tokens (the [CLS]
 *    token and tokens the input marks, e.g. a question), which attend to and
 *    are attended by everything; padding keys and queries past each
 *    sequence's length are masked. The global tokens and the lengths come
 *    from the input, so the mask changes with every call. It is one
 *    [B, 1, L, L] bool mask a sequence, shared by its heads; pit builds its
 *    block index on the device in the call and walks only the allowed
 *    blocks. The dense way computes the full L x L scores with two dense
 *    GEMMs and a masked softmax.
 * 2. Prefill with a KV cache: L/4 new tokens attend causally to L keys (the
 *    cache and themselves), 8 query heads share 2 key/value heads (GQA), no
 *    mask tensor at all; the log-sum-exp comes back too.
 *
 *   sparse_attention [--tokens L]      (sequence length, default 512)
 */
#include <math.h>

#include "example_util.h"

enum { BATCH = 2, HEADS = 4, HEAD_DIM = 64, WINDOW = 32, GLOBALS = 8, CALLS = 5 };
enum { GQA_HEADS = 8, GQA_KV_HEADS = 2 };

typedef struct attn_run {
    pit_context *ctx;
    pit_rng rng;
    int64_t L;
    double *mask;                   /* host copy of the current mask, [B, 1, L, L] */
    pit_tensor *Q, *K, *V, *M, *O;  /* pit's layer: [B, H, L, D], mask [B, 1, L, L] */
    pit_tensor *Q3, *V3, *Md;       /* the dense way: [BH, L, D] views, a [BH, L, L] mask */
    pit_tensor *Kt, *S, *P, *Od;
    pit_attention_options opt;
} attn_run;

/* A new mask: window of +-WINDOW, [CLS] plus GLOBALS random global tokens,
 * and a random length per sequence. */
static pit_status new_mask(void *u)
{
    attn_run *r = u;
    const int64_t L = r->L;
    char *global = ex_alloc((size_t)L, 1);
    for (int b = 0; b < BATCH; b++) {
        int64_t len = L / 2 + (int64_t)(pit_rng_next(&r->rng) % (uint64_t)(L / 2 + 1));
        memset(global, 0, (size_t)L);
        global[0] = 1;
        for (int g = 0; g < GLOBALS; g++)
            global[pit_rng_next(&r->rng) % (uint64_t)len] = 1;
        double *m = r->mask + (int64_t)b * L * L;
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) {
                int near = llabs((long long)(i - j)) <= WINDOW;
                m[i * L + j] = i < len && j < len && (near || global[i] || global[j]);
            }
    }
    free(global);
    ex_upload_mask(r->M, r->mask, (size_t)(BATCH * L * L));
    return PIT_SUCCESS;
}

/* The dense way's mask: the sequence's mask repeated for each head (untimed). */
static pit_status new_dense_mask(void *u)
{
    attn_run *r = u;
    EX_CHECK(new_mask(u));
    const size_t ll = (size_t)(r->L * r->L);
    double *m = ex_alloc(ll * BATCH * HEADS, sizeof(double));
    for (int bh = 0; bh < BATCH * HEADS; bh++)
        memcpy(m + bh * ll, r->mask + (bh / HEADS) * ll, ll * sizeof(double));
    ex_upload_mask(r->Md, m, ll * BATCH * HEADS);
    free(m);
    return PIT_SUCCESS;
}

static pit_status run_pit(void *u)
{
    attn_run *r = u;
    return pit_attention(r->ctx, NULL, r->Q, r->K, r->V, r->O, &r->opt, NULL, NULL);
}

/* Dense: S = Q . K^T, P = masked softmax(scale * S), O = P . V. */
static pit_status run_dense(void *u)
{
    attn_run *r = u;
    pit_status s = pit_matmul_dense(r->ctx, NULL, r->Q3, r->Kt, r->S);
    if (s == PIT_SUCCESS)
        s = pit_sparse_softmax(r->ctx, NULL, r->S, r->Md, r->P, 1.0f / sqrtf(HEAD_DIM), NULL);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(r->ctx, NULL, r->P, r->V3, r->Od);
    return s;
}

/* A [BH, L, D] view of a contiguous [B, H, L, D] tensor's memory. */
static pit_tensor *heads_merged(pit_context *ctx, const pit_tensor *t, int64_t L)
{
    pit_tensor_desc d;
    pit_tensor *v = NULL;
    EX_CHECK(pit_tensor_get_desc(t, &d));
    const int64_t shape[3] = {BATCH * HEADS, L, HEAD_DIM};
    EX_CHECK(pit_tensor_wrap(ctx, PIT_F32, 3, shape, NULL, d.data, d.byte_offset, &v));
    return v;
}

static int longformer(pit_context *ctx, int64_t L)
{
    attn_run r = {.ctx = ctx, .L = L, .opt = pit_attention_options_default()};
    pit_rng_seed(&r.rng, 7);
    const int64_t qshape[4] = {BATCH, HEADS, L, HEAD_DIM}, mshape[4] = {BATCH, 1, L, L};
    const int64_t sshape[3] = {BATCH * HEADS, L, L};
    size_t nq = (size_t)(BATCH * HEADS * L * HEAD_DIM);
    double *q = ex_alloc(nq, sizeof(double)), *k = ex_alloc(nq, sizeof(double));
    double *v = ex_alloc(nq, sizeof(double)), *ref = ex_alloc(nq, sizeof(double));
    r.mask = ex_alloc((size_t)(BATCH * L * L), sizeof(double));
    pit_ref_fill_random(&r.rng, q, nq);
    pit_ref_fill_random(&r.rng, k, nq);
    pit_ref_fill_random(&r.rng, v, nq);
    r.Q = ex_tensor(ctx, PIT_F32, 4, qshape);
    r.K = ex_tensor(ctx, PIT_F32, 4, qshape);
    r.V = ex_tensor(ctx, PIT_F32, 4, qshape);
    r.O = ex_tensor(ctx, PIT_F32, 4, qshape);
    r.M = ex_tensor(ctx, PIT_U8, 4, mshape); /* a bool mask, shared by the heads */
    ex_upload(r.Q, q, nq);
    ex_upload(r.K, k, nq);
    ex_upload(r.V, v, nq);
    r.opt.mask = r.M;
    /* The dense way's buffers; K^T is made once, outside the timing. */
    pit_tensor *K3 = heads_merged(ctx, r.K, L);
    r.Q3 = heads_merged(ctx, r.Q, L);
    r.V3 = heads_merged(ctx, r.V, L);
    r.Md = ex_tensor(ctx, PIT_U8, 3, sshape);
    r.Kt = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){BATCH * HEADS, HEAD_DIM, L});
    r.S = ex_tensor(ctx, PIT_F32, 3, sshape);
    r.P = ex_tensor(ctx, PIT_F32, 3, sshape);
    r.Od = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){BATCH * HEADS, L, HEAD_DIM});
    EX_CHECK(pit_transpose(ctx, NULL, K3, r.Kt));
    printf("1. batch %d x %d heads, L %lld, head dim %d, window +-%d, %d global tokens + [CLS]\n",
           BATCH, HEADS, (long long)L, HEAD_DIM, WINDOW, GLOBALS);

    /* pit: a new mask before every call (untimed); the last call is checked. */
    pit_ref_attn p = {.b = BATCH, .hq = HEADS, .hkv = HEADS, .lq = L, .lk = L, .d = HEAD_DIM,
                      .dv = HEAD_DIM, .scale = 1.0f / sqrtf(HEAD_DIM), .window_left = -1,
                      .window_right = -1, .mask = r.mask, .mask_b = BATCH, .mask_h = 1};
    double pit_ms = ex_time_ms(ctx, CALLS, new_mask, run_pit, &r);
    size_t on = 0;
    for (size_t i = 0; i < (size_t)(BATCH * L * L); i++)
        on += r.mask[i] != 0.0;
    printf("  mask density of the last call: %.1f%%\n", 100.0 * (double)on / (double)(BATCH * L * L));
    pit_ref_attention_full(&p, q, k, v, ref, NULL);
    int ok = ex_check_close("pit_attention O", r.O, ref, nq);

    double dense_ms = ex_time_ms(ctx, CALLS, new_dense_mask, run_dense, &r);
    pit_ref_attention_full(&p, q, k, v, ref, NULL);
    ok &= ex_check_close("dense attention O", r.Od, ref, nq);
    ex_print_times("pit_attention (mask new each call)", pit_ms,
                   "QK^T GEMM + masked softmax + PV GEMM", dense_ms);

    pit_tensor *all[] = {r.Q, r.K, r.V, r.M, r.O, K3, r.Q3, r.V3, r.Md, r.Kt, r.S, r.P, r.Od};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    free(q);
    free(k);
    free(v);
    free(ref);
    free(r.mask);
    return ok;
}

/* 2. Causal prefill of L/4 new tokens over an L-key cache, GQA, with lse.
 * A backend that lacks an option says so (PIT_ERR_UNSUPPORTED): printed,
 * not a failure. */
static int causal_prefill(pit_context *ctx, int64_t L)
{
    const int64_t lq = L / 4 > 0 ? L / 4 : 1;
    const int64_t qs[4] = {1, GQA_HEADS, lq, HEAD_DIM}, ks[4] = {1, GQA_KV_HEADS, L, HEAD_DIM};
    const int64_t ls[3] = {1, GQA_HEADS, lq};
    size_t nq = (size_t)(GQA_HEADS * lq * HEAD_DIM), nk = (size_t)(GQA_KV_HEADS * L * HEAD_DIM);
    pit_rng rng;
    pit_rng_seed(&rng, 11);
    double *q = ex_alloc(nq, sizeof(double)), *k = ex_alloc(nk, sizeof(double));
    double *v = ex_alloc(nk, sizeof(double)), *ref = ex_alloc(nq, sizeof(double));
    double *ref_lse = ex_alloc((size_t)(GQA_HEADS * lq), sizeof(double));
    pit_ref_fill_random(&rng, q, nq);
    pit_ref_fill_random(&rng, k, nk);
    pit_ref_fill_random(&rng, v, nk);
    pit_tensor *Q = ex_tensor(ctx, PIT_F32, 4, qs), *K = ex_tensor(ctx, PIT_F32, 4, ks);
    pit_tensor *V = ex_tensor(ctx, PIT_F32, 4, ks), *O = ex_tensor(ctx, PIT_F32, 4, qs);
    pit_tensor *lse = ex_tensor(ctx, PIT_F32, 3, ls);
    ex_upload(Q, q, nq);
    ex_upload(K, k, nk);
    ex_upload(V, v, nk);
    printf("2. prefill: %lld new tokens over %lld keys, %d query heads / %d kv heads, causal\n",
           (long long)lq, (long long)L, GQA_HEADS, GQA_KV_HEADS);
    pit_attention_options opt = pit_attention_options_default();
    opt.causal = 1; /* aligned to the end of the keys: token i sees the cache and 0..i */
    pit_status s = pit_attention(ctx, NULL, Q, K, V, O, &opt, lse, NULL);
    int ok = 1;
    if (s == PIT_ERR_UNSUPPORTED) {
        printf("  not run here: %s\n", pit_last_error());
    } else {
        EX_CHECK(s);
        pit_ref_attn p = {.b = 1, .hq = GQA_HEADS, .hkv = GQA_KV_HEADS, .lq = lq, .lk = L,
                          .d = HEAD_DIM, .dv = HEAD_DIM, .scale = 1.0f / sqrtf(HEAD_DIM),
                          .causal = 1, .window_left = -1, .window_right = -1};
        pit_ref_attention_full(&p, q, k, v, ref, ref_lse);
        ok = ex_check_close("pit_attention O", O, ref, nq);
        ok &= ex_check_close("pit_attention lse", lse, ref_lse, (size_t)(GQA_HEADS * lq));
    }
    pit_tensor *all[] = {Q, K, V, O, lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    free(q);
    free(k);
    free(v);
    free(ref);
    free(ref_lse);
    return ok;
}

int main(int argc, char **argv)
{
    int64_t L = 512;
    ex_parse_flag(argc, argv, "--tokens", &L, "sequence length");
    pit_context *ctx = ex_open("pit_attention: Longformer-style sparse attention, causal GQA prefill");
    int ok = longformer(ctx, L);
    ok &= causal_prefill(ctx, L);
    EX_CHECK(pit_context_destroy(ctx));
    printf("%s\n", ok ? "PASSED" : "FAILED: a result differs from the CPU reference");
    return ok ? 0 : 1;
}
