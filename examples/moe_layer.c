/*
 * examples/moe_layer.c - a Mixture-of-Experts expert layer with pit.
 *
 * A router scores every token for every expert; each token goes to its top-2
 * experts with gates from a softmax over those two scores. Some experts are
 * far more popular than others (as in trained MoE models), so the number of
 * tokens per expert is skewed and changes with every batch. pit_moe_forward
 * gathers each expert's tokens on the device (no padding, no capacity limit,
 * no token dropped), runs all experts in one launch and scatters the results
 * back with the gates. The dense way pads every expert to the busiest one's
 * load and runs one batched GEMM.
 *
 *   moe_layer [--tokens T]      (default 512)
 */
#include <math.h>

#include "example_gen.h"
#include "example_util.h"

enum { HIDDEN = 256, FFN = 512, EXPERTS = 8, TOP_K = 2 };

/* Router: logits = X . Wr on the device, plus a popularity bias per expert;
 * top-k on the host; gates = softmax over the k chosen logits. */
static void route(pit_context *ctx, pit_tensor *X, pit_tensor *Wr, int64_t T, int32_t *ids,
                  double *gates, int64_t *load)
{
    pit_tensor *L = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, EXPERTS});
    EX_CHECK(pit_matmul_dense(ctx, NULL, X, Wr, L));
    double *logit = ex_alloc((size_t)(T * EXPERTS), sizeof(double));
    ex_download(L, logit, (size_t)(T * EXPERTS));
    /* expert 0 is the most popular, expert 7 the least */
    ex_gen_route(logit, T, EXPERTS, TOP_K, 0.5, ids, gates, load);
    free(logit);
    EX_CHECK(pit_tensor_destroy(L));
}

typedef struct moe_run {
    pit_context *ctx;
    pit_tensor *X, *ids, *gates, *W, *Y;          /* pit's layer */
    pit_tensor *Xpad, *Ypad;                      /* the dense way: [E, cap, H] x [E, H, N] */
    pit_report rep;
} moe_run;

static pit_status run_pit(void *u)
{
    moe_run *r = u;
    return pit_moe_forward(r->ctx, NULL, r->X, r->ids, r->gates, r->W, r->Y, &r->rep);
}

static pit_status run_dense(void *u)
{
    moe_run *r = u;
    return pit_matmul_dense(r->ctx, NULL, r->Xpad, r->W, r->Ypad);
}

int main(int argc, char **argv)
{
    int64_t T = 512;
    ex_parse_flag(argc, argv, "--tokens", &T, "tokens in the batch");
    pit_context *ctx = ex_open("MoE expert layer (top-2 of 8 experts, skewed popularity)");
    const int64_t H = HIDDEN, N = FFN, E = EXPERTS, K = TOP_K;
    pit_rng rng;
    pit_rng_seed(&rng, 42);

    /* Inputs, router and expert weights (scaled so outputs stay O(1)). */
    double *x = ex_alloc((size_t)(T * H), sizeof(double));
    double *wr = ex_alloc((size_t)(H * E), sizeof(double));
    double *w = ex_alloc((size_t)(E * H * N), sizeof(double));
    pit_ref_fill_random(&rng, x, (size_t)(T * H));
    pit_ref_fill_random(&rng, wr, (size_t)(H * E));
    pit_ref_fill_random(&rng, w, (size_t)(E * H * N));
    for (int64_t i = 0; i < H * E; i++)
        wr[i] *= 3.0 / sqrt((double)H);
    for (int64_t i = 0; i < E * H * N; i++)
        w[i] /= sqrt((double)H);
    moe_run r = {.ctx = ctx};
    r.X = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, H});
    r.W = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, H, N});
    r.Y = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, N});
    pit_tensor *Wr = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){H, E});
    ex_upload(r.X, x, (size_t)(T * H));
    ex_upload(r.W, w, (size_t)(E * H * N));
    ex_upload(Wr, wr, (size_t)(H * E));

    /* Routing: expert ids (i32) and gates (f32), [T, K]. */
    int32_t *ids = ex_alloc((size_t)(T * K), sizeof(int32_t));
    double *gates = ex_alloc((size_t)(T * K), sizeof(double));
    int64_t load[EXPERTS] = {0}, cap = 0;
    route(ctx, r.X, Wr, T, ids, gates, load);
    r.ids = ex_tensor(ctx, PIT_I32, 2, (int64_t[]){T, K});
    r.gates = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, K});
    EX_CHECK(pit_tensor_upload(r.ids, NULL, ids, (size_t)(T * K) * sizeof(int32_t)));
    ex_upload(r.gates, gates, (size_t)(T * K));
    printf("T %lld tokens, H %lld, N %lld; tokens per expert:", (long long)T, (long long)H,
           (long long)N);
    for (int e = 0; e < EXPERTS; e++) {
        printf(" %lld", (long long)load[e]);
        cap = load[e] > cap ? load[e] : cap;
    }
    printf(" (busiest %.1fx the mean)\n", (double)cap * E / (double)(T * K));

    /* pit, checked against the CPU reference. */
    double *ref = ex_alloc((size_t)(T * N), sizeof(double));
    pit_ref_moe_forward(T, H, N, E, K, x, ids, gates, w, ref);
    double pit_ms = ex_time_ms(ctx, 5, NULL, run_pit, &r);
    int ok = ex_check_close("pit_moe_forward Y", r.Y, ref, (size_t)(T * N));

    /* The dense way: every expert padded to the busiest expert's load (the
     * capacity at which no token is dropped), one batched GEMM. The gather
     * into Xpad and the gated scatter of Ypad are not timed. */
    double *xpad = ex_alloc((size_t)(E * cap * H), sizeof(double));
    int64_t fill[EXPERTS];
    ex_gen_pad_by_expert(x, ids, T, TOP_K, H, EXPERTS, cap, fill, xpad);
    r.Xpad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, H});
    r.Ypad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, N});
    ex_upload(r.Xpad, xpad, (size_t)(E * cap * H));
    double dense_ms = ex_time_ms(ctx, 5, NULL, run_dense, &r);

    printf("  pit's choice: %s, %lld routed token-slots\n", r.rep.choice,
           (long long)r.rep.nonzero_tiles);
    ex_print_times("pit_moe_forward (no padding)", pit_ms,
                   "padded batched GEMM (capacity = max load)", dense_ms);

    pit_tensor *all[] = {r.X, r.ids, r.gates, r.W, r.Y, r.Xpad, r.Ypad, Wr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    EX_CHECK(pit_context_destroy(ctx));
    free(x);
    free(wr);
    free(w);
    free(ids);
    free(gates);
    free(ref);
    free(xpad);
    printf("%s\n", ok ? "PASSED" : "FAILED: pit's result differs from the CPU reference");
    return ok ? 0 : 1;
}
