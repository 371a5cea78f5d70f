/*
 * examples/moe_layer.c - a whole Mixture-of-Experts block with pit: router,
 * SwiGLU experts, the gated top-k sum, forward and backward.
 *
 * A router scores every token for every expert; each token goes to its top-2
 * experts with gates from a softmax over those two scores. Some experts are
 * far more popular than others (as in trained MoE models), so the number of
 * tokens per expert is skewed and changes with every batch. Each expert is a
 * SwiGLU FFN, down(silu(x . W_gate) * (x . W_up)), as in Mixtral, Qwen-MoE
 * and DeepSeek. pit_moe_ffn runs the experts in one call: it routes the
 * tokens once on the device (no padding, no capacity limit, no token
 * dropped), gathers each expert's tokens into its gate/up product, applies
 * the activation, and scatters the down product back with the gates, each
 * token's two results summed. pit_moe_ffn_backward gives the gradients of
 * the input, both weights and the gates; in training the forward keeps its
 * first product (options->saved_h) and the backward reads it instead of
 * computing it again. The dense way pads every expert to the busiest one's
 * load and runs two batched GEMMs.
 *
 *   moe_layer [--tokens T]      (default 256)
 */
#include <math.h>

#include "example_gen.h"
#include "example_util.h"

enum { HIDDEN = 128, FFN = 256, EXPERTS = 8, TOP_K = 2 };

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

typedef struct moe_block {
    pit_context *ctx;
    pit_tensor *X, *ids, *gates, *W1, *W2, *Y;   /* the layer: W1 = W_gate_up, W2 = W_down */
    pit_tensor *dY, *dX, *dW1, *dW2, *dgates;    /* its gradients */
    pit_tensor *Xpad, *Hpad, *Apad, *Ypad;       /* the dense way, [E, cap, .] */
    const pit_moe_ffn_options *opt;              /* NULL, or keeping the first product */
    pit_report rep;
} moe_block;

static pit_status run_forward(void *u)
{
    moe_block *b = u;
    return pit_moe_ffn(b->ctx, NULL, b->X, b->ids, b->gates, b->W1, b->W2, b->Y, b->opt, &b->rep);
}

static pit_status run_backward(void *u)
{
    moe_block *b = u;
    return pit_moe_ffn_backward(b->ctx, NULL, b->X, b->ids, b->gates, b->W1, b->W2, b->dY, b->dX,
                                b->dW1, b->dW2, b->dgates, b->opt);
}

/* Every gradient against the reference; title names the backward. */
static int check_grads(const moe_block *b, const char *title, double *const *ref, const size_t *sizes)
{
    const pit_tensor *grads[4] = {b->dX, b->dW1, b->dW2, b->dgates};
    const char *names[4] = {"  dX", "  dW_gate_up", "  dW_down", "  dgates"};
    int ok = 1;
    printf("%s\n", title);
    for (int i = 0; i < 4; i++)
        ok &= ex_check_close(names[i], grads[i], ref[i], sizes[i]);
    return ok;
}

/* The dense way's two GEMMs (the activation between them, the gather and
 * the gated scatter are left out: its time is a lower bound). */
static pit_status run_dense(void *u)
{
    moe_block *b = u;
    pit_status s = pit_matmul_dense(b->ctx, NULL, b->Xpad, b->W1, b->Hpad);
    return s != PIT_SUCCESS ? s : pit_matmul_dense(b->ctx, NULL, b->Apad, b->W2, b->Ypad);
}

/* Uniform values in [-scale, scale], uploaded (rounded to f32). */
static double *random_tensor(pit_rng *rng, pit_tensor *t, size_t n, double scale)
{
    double *x = ex_alloc(n, sizeof(double));
    pit_ref_fill_random(rng, x, n);
    for (size_t i = 0; i < n; i++)
        x[i] *= scale;
    ex_upload(t, x, n);
    return x;
}

int main(int argc, char **argv)
{
    int64_t T = 256;
    ex_parse_flag(argc, argv, "--tokens", &T, "tokens in the batch");
    pit_context *ctx = ex_open("MoE block (router, top-2 of 8 SwiGLU experts, skewed popularity)");
    const int64_t H = HIDDEN, F = FFN, E = EXPERTS, K = TOP_K;
    pit_rng rng;
    pit_rng_seed(&rng, 42);

    /* Inputs, router and expert weights (scaled so activations stay O(1)). */
    moe_block b = {.ctx = ctx};
    b.X = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, H});
    b.W1 = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, H, 2 * F}); /* gate columns, then up */
    b.W2 = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, F, H});
    b.Y = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, H});
    pit_tensor *Wr = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){H, E});
    double *x = random_tensor(&rng, b.X, (size_t)(T * H), 1.0);
    double *w1 = random_tensor(&rng, b.W1, (size_t)(E * H * 2 * F), 1.0 / sqrt((double)H));
    double *w2 = random_tensor(&rng, b.W2, (size_t)(E * F * H), 1.0 / sqrt((double)F));
    double *wr = random_tensor(&rng, Wr, (size_t)(H * E), 3.0 / sqrt((double)H));

    /* Routing: expert ids (i32) and gates (f32), [T, K]. */
    int32_t *ids = ex_alloc((size_t)(T * K), sizeof(int32_t));
    double *gates = ex_alloc((size_t)(T * K), sizeof(double));
    int64_t load[EXPERTS] = {0}, cap = 0;
    route(ctx, b.X, Wr, T, ids, gates, load);
    b.ids = ex_tensor(ctx, PIT_I32, 2, (int64_t[]){T, K});
    b.gates = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, K});
    EX_CHECK(pit_tensor_upload(b.ids, NULL, ids, (size_t)(T * K) * sizeof(int32_t)));
    ex_upload(b.gates, gates, (size_t)(T * K));
    printf("T %lld tokens, H %lld, F %lld; tokens per expert:", (long long)T, (long long)H,
           (long long)F);
    for (int e = 0; e < EXPERTS; e++) {
        printf(" %lld", (long long)load[e]);
        cap = load[e] > cap ? load[e] : cap;
    }
    printf(" (busiest %.1fx the mean)\n", (double)cap * E / (double)(T * K));

    /* Forward, checked against the CPU reference. */
    const pit_ref_ffn shape = {T, H, F, E, K, PIT_ACT_SWIGLU};
    double *ref_y = ex_alloc((size_t)(T * H), sizeof(double));
    pit_ref_moe_ffn(&shape, x, ids, gates, w1, w2, ref_y);
    double fwd_ms = ex_time_ms(ctx, 3, NULL, run_forward, &b);
    int ok = ex_check_close("pit_moe_ffn Y", b.Y, ref_y, (size_t)(T * H));

    /* Backward from a loss gradient dY: every gradient checked. */
    b.dY = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, H});
    b.dX = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, H});
    b.dW1 = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, H, 2 * F});
    b.dW2 = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, F, H});
    b.dgates = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, K});
    double *dy = random_tensor(&rng, b.dY, (size_t)(T * H), 1.0);
    const size_t sizes[4] = {(size_t)(T * H), (size_t)(E * H * 2 * F), (size_t)(E * F * H),
                             (size_t)(T * K)};
    double *ref_g[4];
    for (int i = 0; i < 4; i++)
        ref_g[i] = ex_alloc(sizes[i], sizeof(double));
    pit_ref_ffn_grads g = {ref_g[0], ref_g[1], ref_g[2], ref_g[3]};
    pit_ref_moe_ffn_backward(&shape, x, ids, gates, w1, w2, dy, &g);
    double bwd_ms = ex_time_ms(ctx, 3, NULL, run_backward, &b);
    ok &= check_grads(&b, "pit_moe_ffn_backward, the first product recomputed:", ref_g, sizes);

    /* Training: the forward keeps its first product h [T*k, 2F] for the
     * backward, which reads it instead of computing it again. */
    pit_moe_ffn_options keep = pit_moe_ffn_options_default();
    keep.saved_h = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T * K, 2 * F});
    b.opt = &keep;
    double keep_ms = ex_time_ms(ctx, 3, NULL, run_forward, &b);
    ok &= ex_check_close("pit_moe_ffn Y, keeping h", b.Y, ref_y, (size_t)(T * H));
    double kept_bwd_ms = ex_time_ms(ctx, 3, NULL, run_backward, &b);
    ok &= check_grads(&b, "pit_moe_ffn_backward from the kept h:", ref_g, sizes);

    /* The dense way: every expert padded to the busiest expert's load (the
     * capacity at which no token is dropped), two batched GEMMs. */
    double *xpad = ex_alloc((size_t)(E * cap * H), sizeof(double));
    int64_t fill[EXPERTS];
    ex_gen_pad_by_expert(x, ids, T, TOP_K, H, EXPERTS, cap, fill, xpad);
    b.Xpad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, H});
    b.Hpad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, 2 * F});
    b.Apad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, F});
    b.Ypad = ex_tensor(ctx, PIT_F32, 3, (int64_t[]){E, cap, H});
    ex_upload(b.Xpad, xpad, (size_t)(E * cap * H));
    EX_CHECK(pit_tensor_zero(b.Apad, NULL));
    double dense_ms = ex_time_ms(ctx, 3, NULL, run_dense, &b);

    printf("  pit's choice: %s, %lld routed token-slots\n", b.rep.choice,
           (long long)b.rep.nonzero_tiles);
    ex_print_times("pit_moe_ffn (no padding)", fwd_ms,
                   "two padded batched GEMMs (capacity = max load)", dense_ms);
    printf("  pit   %-44s %9.3f ms\n", "pit_moe_ffn_backward", bwd_ms);
    printf("  pit   %-44s %9.3f ms\n", "pit_moe_ffn keeping h (training)", keep_ms);
    printf("  pit   %-44s %9.3f ms\n", "pit_moe_ffn_backward from the kept h", kept_bwd_ms);

    pit_tensor *all[] = {b.X, b.ids, b.gates, b.W1, b.W2, b.Y, b.dY, b.dX, b.dW1, b.dW2,
                         b.dgates, b.Xpad, b.Hpad, b.Apad, b.Ypad, Wr, keep.saved_h};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    EX_CHECK(pit_context_destroy(ctx));
    double *host[] = {x, w1, w2, wr, gates, ref_y, dy, xpad, ref_g[0], ref_g[1], ref_g[2], ref_g[3]};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
    free(ids);
    printf("%s\n", ok ? "PASSED" : "FAILED: pit's result differs from the CPU reference");
    return ok ? 0 : 1;
}
