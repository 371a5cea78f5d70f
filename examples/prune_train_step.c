/*
 * examples/prune_train_step.c - training a weight-sparse linear layer while
 * pruning it, as in the iterative pruning of BERT (32x64 and 32x1 blocks).
 *
 * Every step: magnitude-prune W with pit_prune_magnitude, first 32x64 blocks
 * then 32x1 blocks, to a sparsity that grows step by step (so the pattern
 * changes every step); forward Y^T = W . X^T with pit_matmul (W is the sparse
 * operand A: activations are kept feature-major, X^T [in, T]); backward with
 * pit_matmul_backward, which gives dW only on W's non-zero micro-tiles (the
 * pruned weights stay pruned) and dX^T = W^T . dY^T; an SGD update. The dense
 * way runs the same three products as dense GEMMs (the transposed operands
 * they need are made outside the timing).
 *
 *   prune_train_step [--size S]      (W is S x S, batch of S tokens; default 256)
 */
#include <math.h>

#include "example_util.h"

enum { STEPS = 4, RUNS = 3 };

typedef struct train_run {
    pit_context *ctx;
    pit_tensor *W, *Xt, *Yt, *dYt, *dW, *dXt; /* pit's step */
    pit_tensor *Wt, *X, *Yd, *dWd, *dXtd;     /* the dense way */
    pit_report rep;
} train_run;

static pit_status run_pit(void *u)
{
    train_run *r = u;
    pit_status s = pit_matmul(r->ctx, NULL, r->W, r->Xt, r->Yt, NULL, &r->rep);
    if (s == PIT_SUCCESS)
        s = pit_matmul_backward(r->ctx, NULL, r->W, r->Xt, r->dYt, r->dW, r->dXt);
    return s;
}

static pit_status run_dense(void *u)
{
    train_run *r = u;
    pit_status s = pit_matmul_dense(r->ctx, NULL, r->W, r->Xt, r->Yd);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(r->ctx, NULL, r->dYt, r->X, r->dWd);
    if (s == PIT_SUCCESS)
        s = pit_matmul_dense(r->ctx, NULL, r->Wt, r->dYt, r->dXtd);
    return s;
}

int main(int argc, char **argv)
{
    int64_t S = 256;
    ex_parse_flag(argc, argv, "--size", &S, "W is S x S and the batch has S tokens");
    pit_context *ctx = ex_open("Sparse training step with magnitude pruning (32x64, 32x1)");
    const int64_t OUT = S, IN = S, T = S;
    const double lr = 0.05;
    pit_rng rng;
    pit_rng_seed(&rng, 5);
    size_t nw = (size_t)(OUT * IN), nx = (size_t)(IN * T), ny = (size_t)(OUT * T);
    double *w = ex_alloc(nw, sizeof(double)), *wref = ex_alloc(nw, sizeof(double));
    double *xt = ex_alloc(nx, sizeof(double)), *dyt = ex_alloc(ny, sizeof(double));
    double *yref = ex_alloc(ny, sizeof(double)), *dwref = ex_alloc(nw, sizeof(double));
    double *dxref = ex_alloc(nx, sizeof(double)), *dw = ex_alloc(nw, sizeof(double));
    train_run r = {.ctx = ctx};
    r.W = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, IN});
    r.dW = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, IN});
    r.dWd = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, IN});
    r.Wt = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){IN, OUT});
    r.Xt = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){IN, T});
    r.dXt = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){IN, T});
    r.dXtd = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){IN, T});
    r.X = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){T, IN});
    r.Yt = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, T});
    r.Yd = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, T});
    r.dYt = ex_tensor(ctx, PIT_F32, 2, (int64_t[]){OUT, T});
    pit_ref_fill_random(&rng, w, nw);
    for (size_t i = 0; i < nw; i++)
        w[i] /= sqrt((double)IN);
    ex_upload(r.W, w, nw);
    printf("W %lld x %lld, batch %lld tokens, %d steps\n", (long long)OUT, (long long)IN,
           (long long)T, STEPS);

    int ok = 1;
    for (int step = 0; step < STEPS; step++) {
        /* Prune: 32x64 blocks, then 32x1 blocks of what is left. */
        double sparsity = 0.5 + 0.4 * step / (STEPS - 1), coarse = 0.6 * sparsity;
        memcpy(wref, w, nw * sizeof(double));
        EX_CHECK(pit_prune_magnitude(ctx, NULL, r.W, 32, 64, coarse));
        EX_CHECK(pit_prune_magnitude(ctx, NULL, r.W, 32, 1, sparsity));
        pit_ref_prune_magnitude(OUT, IN, 32, 64, coarse, wref);
        pit_ref_prune_magnitude(OUT, IN, 32, 1, sparsity, wref);
        ex_download(r.W, w, nw);
        size_t differ = 0, zero = 0;
        for (size_t i = 0; i < nw; i++) {
            differ += w[i] != wref[i];
            zero += w[i] == 0.0;
        }
        printf("step %d: pruned 32x64@%.2f then 32x1@%.2f: W %.1f%% zero, %zu weights differ "
               "from the reference  %s\n", step, coarse, sparsity,
               100.0 * (double)zero / (double)nw, differ, differ ? "FAILED" : "ok");
        ok &= differ == 0;

        /* A new batch and the gradient from the layer above. */
        pit_ref_fill_random(&rng, xt, nx);
        pit_ref_fill_random(&rng, dyt, ny);
        ex_upload(r.Xt, xt, nx);
        ex_upload(r.dYt, dyt, ny);
        double pit_ms = ex_time_ms(ctx, RUNS, NULL, run_pit, &r);
        pit_ref_matmul(1, OUT, T, IN, w, xt, yref);
        pit_ref_matmul_backward(1, OUT, T, IN, w, xt, dyt, dwref, dxref);
        ok &= ex_check_close("forward Y^T", r.Yt, yref, ny);
        ok &= ex_check_close("backward dW (on W's pattern)", r.dW, dwref, nw);
        ok &= ex_check_close("backward dX^T", r.dXt, dxref, nx);

        EX_CHECK(pit_transpose(ctx, NULL, r.W, r.Wt));
        EX_CHECK(pit_transpose(ctx, NULL, r.Xt, r.X));
        double dense_ms = ex_time_ms(ctx, RUNS, NULL, run_dense, &r);
        printf("  pit's choice for the forward: %s\n", r.rep.choice);
        ex_print_times("matmul + matmul_backward", pit_ms, "3 GEMMs (fwd, dW, dX)", dense_ms);

        /* SGD on the host (W is small next to the step; pruning is host-side too). */
        ex_download(r.dW, dw, nw);
        for (size_t i = 0; i < nw; i++)
            w[i] -= lr * dw[i];
        ex_upload(r.W, w, nw);
    }

    pit_tensor *all[] = {r.W, r.Xt, r.Yt, r.dYt, r.dW, r.dXt, r.Wt, r.X, r.Yd, r.dWd, r.dXtd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        EX_CHECK(pit_tensor_destroy(all[i]));
    EX_CHECK(pit_context_destroy(ctx));
    double *bufs[] = {w, wref, xt, dyt, yref, dwref, dxref, dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    printf("%s\n", ok ? "PASSED" : "FAILED: a result differs from the CPU reference");
    return ok ? 0 : 1;
}
