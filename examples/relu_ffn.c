/*
 * examples/relu_ffn.c - an OPT-style feed-forward block with ReLU activation
 * sparsity: H = relu(X . W1), Y = H . W2.
 *
 * In OPT about 90% of the activations after the ReLU are zero, and which
 * neurons fire depends on the context: tokens of one passage activate mostly
 * the same few neurons. The example builds such activations: tokens of a
 * passage share a context vector plus their own small variation, and every
 * neuron has a negative bias (a constant-1 input feature carries it) so that
 * about one neuron in ten fires. pit_relu_ffn computes H densely and the
 * second product with PIT on H's zeros, found on the device after the ReLU.
 * The dense way runs the two products as dense GEMMs.
 *
 *   relu_ffn [--tokens T]      (default 512)
 */
#include <math.h>

#include "example_gen.h"
#include "example_util.h"

enum { MODEL = 256, FFN = 1024, PASSAGE = 64 };

typedef struct ffn_run {
    pit_context *ctx;
    pit_tensor *X, *W1, *W2, *H, *Y, *Hd, *Yd;
    pit_report rep;
} ffn_run;

static pit_status run_pit(void *u)
{
    ffn_run *r = u;
    return pit_relu_ffn(r->ctx, NULL, r->X, r->W1, r->W2, r->H, r->Y, &r->rep);
}

static pit_status run_dense(void *u)
{
    ffn_run *r = u;
    pit_status s = pit_matmul_dense(r->ctx, NULL, r->X, r->W1, r->Hd);
    if (s == PIT_SUCCESS)
        s = pit_relu(r->ctx, NULL, r->Hd, r->Hd);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(r->ctx, NULL, r->Hd, r->W2, r->Yd);
    return s;
}

int main(int argc, char **argv)
{
    int64_t T = 512;
    ex_parse_flag(argc, argv, "--tokens", &T, "tokens in the batch");
    pit_context *ctx = ex_open("OPT-style ReLU FFN with activation sparsity");
    const int64_t D = MODEL, F = FFN;
    pit_rng rng;
    pit_rng_seed(&rng, 11);
    double *x = ex_alloc((size_t)(T * D), sizeof(double));
    double *w1 = ex_alloc((size_t)(D * F), sizeof(double));
    double *w2 = ex_alloc((size_t)(F * D), sizeof(double));
    double *ctxv = ex_alloc((size_t)D, sizeof(double));
    ex_gen_ffn_tokens(&rng, T, D, PASSAGE, ctxv, x);
    ex_gen_ffn_weights(&rng, D, F, D, w1, w2);

    ffn_run r = {.ctx = ctx};
    r.X = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, D});
    r.W1 = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){D, F});
    r.W2 = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){F, D});
    r.H = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, F});
    r.Y = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, D});
    r.Hd = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, F});
    r.Yd = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, D});
    ex_upload(r.X, x, (size_t)(T * D));
    ex_upload(r.W1, w1, (size_t)(D * F));
    ex_upload(r.W2, w2, (size_t)(F * D));

    double pit_ms = ex_time_ms(ctx, 5, NULL, run_pit, &r);
    double *h = ex_alloc((size_t)(T * F), sizeof(double));
    double *y = ex_alloc((size_t)(T * D), sizeof(double));
    pit_ref_relu_ffn(T, D, F, D, x, w1, w2, h, y);
    size_t zeros = 0;
    for (int64_t i = 0; i < T * F; i++)
        zeros += h[i] == 0.0;
    printf("T %lld tokens (passages of %d), model %lld, FFN %lld: %.1f%% of H is zero\n",
           (long long)T, PASSAGE, (long long)D, (long long)F,
           100.0 * (double)zeros / (double)(T * F));
    printf("  pit's choice for H . W2: %s, %lld of %lld micro-tiles non-zero\n", r.rep.choice,
           (long long)r.rep.nonzero_tiles, (long long)r.rep.total_tiles);
    int ok = ex_check_close("pit_relu_ffn H", r.H, h, (size_t)(T * F));
    ok &= ex_check_close("pit_relu_ffn Y", r.Y, y, (size_t)(T * D));

    double dense_ms = ex_time_ms(ctx, 5, NULL, run_dense, &r);
    ok &= ex_check_close("dense FFN Y", r.Yd, y, (size_t)(T * D));
    ex_print_times("pit_relu_ffn", pit_ms, "GEMM + relu + GEMM", dense_ms);

    pit_tensor *all[] = {r.X, r.W1, r.W2, r.H, r.Y, r.Hd, r.Yd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    EX_CHECK(pit_context_destroy(ctx));
    free(x);
    free(w1);
    free(w2);
    free(ctxv);
    free(h);
    free(y);
    printf("%s\n", ok ? "PASSED" : "FAILED: a result differs from the CPU reference");
    return ok ? 0 : 1;
}
