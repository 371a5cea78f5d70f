/*
 * examples/sparse_attention.c - Longformer-style dynamic sparse attention.
 *
 * Each query attends to a sliding window of keys around it plus a few global
 * tokens (the [CLS] token and tokens the input marks, e.g. a question), which
 * attend to and are attended by everything; padding keys and queries past
 * each sequence's length are masked. The global tokens and the lengths come
 * from the input, so the mask changes with every call. It is given per
 * (batch x head) as [BH, L, L]; pit builds its block index on the device in
 * the call and reuses it for QK^T (SDDMM), the softmax and PV. The dense way
 * computes the full L x L scores with two dense GEMMs and a masked softmax.
 *
 *   sparse_attention [--tokens L]      (sequence length, default 512)
 */
#include <math.h>

#include "example_util.h"

enum { BATCH = 2, HEADS = 4, HEAD_DIM = 64, WINDOW = 32, GLOBALS = 8, CALLS = 5 };

typedef struct attn_run {
    pit_context *ctx;
    pit_rng rng;
    int64_t L;
    double *mask;                    /* host copy of the current mask, [BH, L, L] */
    pit_tensor *Q, *K, *V, *M, *O;   /* pit's layer */
    pit_tensor *Kt, *S, *P, *Od;     /* the dense way */
    float scale;
} attn_run;

/* A new mask: window of +-WINDOW, [CLS] plus GLOBALS random global tokens,
 * and a random length per sequence (heads of one sequence share it). */
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
        for (int h = 0; h < HEADS; h++) {
            double *m = r->mask + (int64_t)(b * HEADS + h) * L * L;
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < L; j++) {
                    int near = llabs((long long)(i - j)) <= WINDOW;
                    m[i * L + j] = i < len && j < len && (near || global[i] || global[j]);
                }
        }
    }
    free(global);
    ex_upload_mask(r->M, r->mask, (size_t)(BATCH * HEADS * L * L));
    return PIT_SUCCESS;
}

static pit_status run_pit(void *u)
{
    attn_run *r = u;
    return pit_sparse_attention(r->ctx, NULL, r->Q, r->K, r->V, r->M, r->O, r->scale, 0, NULL);
}

/* Dense: S = Q . K^T, P = masked softmax(scale * S), O = P . V. */
static pit_status run_dense(void *u)
{
    attn_run *r = u;
    pit_status s = pit_matmul_dense(r->ctx, NULL, r->Q, r->Kt, r->S);
    if (s == PIT_SUCCESS)
        s = pit_sparse_softmax(r->ctx, NULL, r->S, r->M, r->P, r->scale, NULL);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(r->ctx, NULL, r->P, r->V, r->Od);
    return s;
}

int main(int argc, char **argv)
{
    int64_t L = 512;
    ex_parse_flag(argc, argv, "--tokens", &L, "sequence length");
    pit_context *ctx = ex_open("Longformer-style sparse attention (window + global tokens)");
    const int64_t BH = BATCH * HEADS, D = HEAD_DIM;
    attn_run r = {.ctx = ctx, .L = L, .scale = 1.0f / sqrtf((float)D)};
    pit_rng_seed(&r.rng, 7);
    const int64_t qshape[3] = {BH, L, D}, sshape[3] = {BH, L, L};
    size_t nq = (size_t)(BH * L * D), ns = (size_t)(BH * L * L);
    double *q = ex_alloc(nq, sizeof(double)), *k = ex_alloc(nq, sizeof(double));
    double *v = ex_alloc(nq, sizeof(double)), *ref = ex_alloc(nq, sizeof(double));
    r.mask = ex_alloc(ns, sizeof(double));
    pit_ref_fill_random(&r.rng, q, nq);
    pit_ref_fill_random(&r.rng, k, nq);
    pit_ref_fill_random(&r.rng, v, nq);
    r.Q = ex_tensor(ctx, PIT_F32, 3, qshape);
    r.K = ex_tensor(ctx, PIT_F32, 3, qshape);
    r.V = ex_tensor(ctx, PIT_F32, 3, qshape);
    r.O = ex_tensor(ctx, PIT_F32, 3, qshape);
    r.M = ex_tensor(ctx, PIT_U8, 3, sshape); /* a bool mask: 1 byte an element */
    ex_upload(r.Q, q, nq);
    ex_upload(r.K, k, nq);
    ex_upload(r.V, v, nq);
    /* The dense way's buffers; K^T is made once, outside the timing. */
    r.Kt = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){BH, D, L});
    r.S = ex_tensor(ctx, PIT_F32, 3, sshape);
    r.P = ex_tensor(ctx, PIT_F32, 3, sshape);
    r.Od = ex_tensor(ctx, PIT_F32, 3, qshape);
    EX_CHECK(pit_transpose(ctx, NULL, r.K, r.Kt));
    printf("batch %d x %d heads, L %lld, head dim %lld, window +-%d, %d global tokens + [CLS]\n",
           BATCH, HEADS, (long long)L, (long long)D, WINDOW, GLOBALS);

    /* pit: a new mask before every call (untimed); the last call is checked. */
    double pit_ms = ex_time_ms(ctx, CALLS, new_mask, run_pit, &r);
    size_t on = 0;
    for (size_t i = 0; i < ns; i++)
        on += r.mask[i] != 0.0;
    printf("  mask density of the last call: %.1f%%\n", 100.0 * (double)on / (double)ns);
    pit_ref_attention(BH, L, D, D, q, k, v, r.mask, 1, r.scale, ref);
    int ok = ex_check_close("pit_sparse_attention O", r.O, ref, nq);

    double dense_ms = ex_time_ms(ctx, CALLS, new_mask, run_dense, &r);
    pit_ref_attention(BH, L, D, D, q, k, v, r.mask, 1, r.scale, ref);
    ok &= ex_check_close("dense attention O", r.Od, ref, nq);
    ex_print_times("pit_sparse_attention (mask new each call)", pit_ms,
                   "QK^T GEMM + masked softmax + PV GEMM", dense_ms);

    pit_tensor *all[] = {r.Q, r.K, r.V, r.M, r.O, r.Kt, r.S, r.P, r.Od};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    EX_CHECK(pit_context_destroy(ctx));
    free(q);
    free(k);
    free(v);
    free(ref);
    free(r.mask);
    printf("%s\n", ok ? "PASSED" : "FAILED: a result differs from the CPU reference");
    return ok ? 0 : 1;
}
