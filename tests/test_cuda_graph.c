/*
 * tests/test_cuda_graph.c - a fixed-plan pit_matmul, pit_sparse_attention,
 * a 16-bit pit_moe_forward and a 16-bit pit_moe_ffn without a report read
 * nothing back, so each can be captured in a CUDA graph and replayed on new
 * data (attention with its detection inside the fused kernel, whose work
 * counters are zeroed by a memset in the graph; MoE with new routing each
 * replay). Opens the driver with
 * dlopen: without one (CI) the test reports itself skipped (exit 77).
 */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_symbols.h"
#include "pit.h"
#include "reference.h"

#define SKIP 77

typedef struct driver {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*begin)(CUstream, CUstreamCaptureMode);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*sync)(CUstream);
} driver;

static int load_driver(driver *d)
{
    const dl_symbol syms[] = {
        {(void **)&d->init, "cuInit"},
        {(void **)&d->device_get, "cuDeviceGet"},
        {(void **)&d->primary_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&d->ctx_set, "cuCtxSetCurrent"},
        {(void **)&d->stream_create, "cuStreamCreate"},
        {(void **)&d->begin, "cuStreamBeginCapture_v2"},
        {(void **)&d->end, "cuStreamEndCapture"},
        {(void **)&d->instantiate, "cuGraphInstantiateWithFlags"},
        {(void **)&d->launch, "cuGraphLaunch"},
        {(void **)&d->sync, "cuStreamSynchronize"},
    };
    return dl_load_symbols("libcuda.so.1", syms, sizeof syms / sizeof syms[0]);
}

#define CU_OK(call)                                                              \
    do {                                                                         \
        CUresult r_ = (call);                                                    \
        if (r_ != CUDA_SUCCESS) {                                                \
            printf("FAIL %s returned %d at line %d\n", #call, (int)r_, __LINE__); \
            return 1;                                                            \
        }                                                                        \
    } while (0)
#define PIT_OK(call)                                                                             \
    do {                                                                                         \
        pit_status s_ = (call);                                                                  \
        if (s_ != PIT_SUCCESS) {                                                                 \
            printf("FAIL %s: %s: %s\n", #call, pit_status_string(s_), pit_last_error());          \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

enum { M = 256, N = 192, K = 320 };

/* New random A with 32x1 micro-tile sparsity, uploaded; reference into ref. */
static pit_status new_inputs(pit_rng *rng, pit_tensor *A, const double *b, double *a, double *ref)
{
    pit_ref_fill_random(rng, a, (size_t)M * K);
    pit_ref_sparsify_tiles(rng, a, 1, M, K, 32, 1, 0, 0, 0.8);
    uint16_t *h = malloc(sizeof(uint16_t) * M * K);
    pit_ref_from_double(PIT_F16, a, (size_t)M * K, h);
    pit_ref_to_double(PIT_F16, h, (size_t)M * K, a);
    pit_status s = pit_tensor_upload(A, NULL, h, sizeof(uint16_t) * M * K);
    free(h);
    pit_ref_matmul(1, M, N, K, a, b, ref);
    return s;
}

static pit_status poison(pit_tensor *C)
{
    uint16_t *h = malloc(sizeof(uint16_t) * M * N);
    for (int i = 0; i < M * N; i++)
        h[i] = 0x7e00; /* f16 NaN */
    pit_status s = pit_tensor_upload(C, NULL, h, sizeof(uint16_t) * M * N);
    free(h);
    return s;
}

static double download_error(pit_tensor *C, const double *ref)
{
    uint16_t *h = malloc(sizeof(uint16_t) * M * N);
    double *c = malloc(sizeof(double) * M * N);
    double err = INFINITY;
    if (pit_tensor_download(C, NULL, h, sizeof(uint16_t) * M * N) == PIT_SUCCESS) {
        pit_ref_to_double(PIT_F16, h, (size_t)M * N, c);
        err = pit_ref_rel_error(ref, c, (size_t)M * N);
    }
    free(h);
    free(c);
    return err;
}

/* Attention (bf16, 2 heads x 256, d 64, 64 x 64 blocks, a mask shared by
 * the heads) captured once and replayed on three new masks and inputs. */
enum { AH = 2, AL = 256, AD = 64 };

/* x rounded to bf16 and uploaded */
static pit_status upload_bf16(pit_tensor *t, double *x, size_t n)
{
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    if (!h)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_ref_from_double(PIT_BF16, x, n, h);
    pit_ref_to_double(PIT_BF16, h, n, x);
    pit_status s = pit_tensor_upload(t, NULL, h, sizeof(uint16_t) * n);
    free(h);
    return s;
}

static pit_status attention_inputs(pit_rng *rng, pit_tensor *const t[4], double *const h[4], double *ref)
{
    const size_t n[4] = {AH * AL * AD, AH * AL * AD, AH * AL * AD, AL * AL}; /* Q, K, V, mask */
    for (int i = 0; i < 4; i++)
        pit_ref_fill_random(rng, h[i], n[i]);
    pit_ref_sparsify_tiles(rng, h[3], 1, AL, AL, 64, 64, 0, 0, 0.6);
    pit_status s = PIT_SUCCESS;
    for (int i = 0; i < 4 && s == PIT_SUCCESS; i++)
        s = upload_bf16(t[i], h[i], n[i]);
    pit_ref_attention(AH, AL, AD, AD, h[0], h[1], h[2], h[3], 0, 0.125, ref);
    return s;
}

static double bf16_error(pit_tensor *O, const double *ref, size_t n)
{
    uint16_t *h = malloc(sizeof(uint16_t) * n);
    double *o = malloc(sizeof(double) * n);
    double err = INFINITY;
    if (h && o && pit_tensor_download(O, NULL, h, sizeof(uint16_t) * n) == PIT_SUCCESS) {
        pit_ref_to_double(PIT_BF16, h, n, o);
        err = pit_ref_rel_error(ref, o, n);
    }
    free(h);
    free(o);
    return err;
}

static int attention_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    const size_t nq = AH * AL * AD;
    int64_t sq[3] = {AH, AL, AD}, sm[2] = {AL, AL};
    pit_tensor *t[4], *O;
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &t[0]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &t[1]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &t[2]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sm, &t[3]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &O));
    double *h[4] = {malloc(sizeof(double) * nq), malloc(sizeof(double) * nq), malloc(sizeof(double) * nq),
                    malloc(sizeof(double) * AL * AL)};
    double *ref = malloc(sizeof(double) * nq);
    int failed = 0;
    /* warm-up outside the capture: index buffers, kernels */
    PIT_OK(attention_inputs(rng, t, h, ref));
    PIT_OK(pit_sparse_attention(ctx, stream, t[0], t[1], t[2], t[3], O, 0.125f, 64, NULL));
    PIT_OK(pit_synchronize(ctx, stream));
    double err0 = bf16_error(O, ref, nq);
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(d->begin(native, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pit_status cap = pit_sparse_attention(ctx, stream, t[0], t[1], t[2], t[3], O, 0.125f, 64, NULL);
    CU_OK(d->end(native, &graph));
    PIT_OK(cap);
    CU_OK(d->instantiate(&exec, graph, 0));
    failed |= !(err0 <= 2e-2);
    for (int replay = 0; replay < 3; replay++) {
        PIT_OK(attention_inputs(rng, t, h, ref)); /* a new mask each time */
        CU_OK(d->launch(exec, native));
        CU_OK(d->sync(native));
        double err = bf16_error(O, ref, nq);
        printf("attention replay %d: rel error %.3g\n", replay, err);
        failed |= !(err <= 2e-2);
    }
    printf("attention warm-up rel error %.3g\n", err0);
    for (int i = 0; i < 4; i++) {
        pit_tensor_destroy(t[i]);
        free(h[i]);
    }
    pit_tensor_destroy(O);
    free(ref);
    return failed;
}

/* MoE (bf16, top-1, 5 experts, some tokens routed nowhere: their rows are
 * zeros) captured once and replayed on new tokens and routing. */
enum { MT = 300, MH = 64, MN = 128, ME = 5 };

static pit_status moe_inputs(pit_rng *rng, pit_tensor *X, pit_tensor *ids, double *x, int32_t *id,
                             const double *g, const double *w, double *ref)
{
    pit_ref_fill_random(rng, x, (size_t)MT * MH);
    for (int i = 0; i < MT; i++) /* skewed to expert 0; one token in 16 routed nowhere */
        id[i] = (int32_t)(pit_rng_next(rng) % 16) == 0 ? -1 : (int32_t)(pit_rng_next(rng) % (ME * ME)) % (ME + 2) % ME;
    pit_status s = upload_bf16(X, x, (size_t)MT * MH);
    if (s == PIT_SUCCESS)
        s = pit_tensor_upload(ids, NULL, id, sizeof(int32_t) * MT);
    pit_ref_moe_forward(MT, MH, MN, ME, 1, x, id, g, w, ref);
    return s;
}

static int moe_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    int64_t sx[2] = {MT, MH}, sid[2] = {MT, 1}, sw[3] = {ME, MH, MN}, sy[2] = {MT, MN};
    pit_tensor *X, *ids, *G, *W, *Y;
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &X));
    PIT_OK(pit_tensor_create(ctx, PIT_I32, 2, sid, &ids));
    PIT_OK(pit_tensor_create(ctx, PIT_F32, 2, sid, &G));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw, &W));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sy, &Y));
    double *x = malloc(sizeof(double) * MT * MH), *w = malloc(sizeof(double) * ME * MH * MN),
           *g = malloc(sizeof(double) * MT), *ref = malloc(sizeof(double) * MT * MN);
    int32_t *id = malloc(sizeof(int32_t) * MT);
    float *gf = malloc(sizeof(float) * MT);
    uint16_t *nan = malloc(sizeof(uint16_t) * MT * MN);
    pit_ref_fill_random(rng, w, (size_t)ME * MH * MN);
    for (int i = 0; i < MT; i++)
        gf[i] = (float)(g[i] = 0.25 + 0.5 * (double)(pit_rng_next(rng) % 1000) / 1000.0);
    for (int i = 0; i < MT * MN; i++)
        nan[i] = 0x7fc0; /* bf16 NaN */
    PIT_OK(upload_bf16(W, w, (size_t)ME * MH * MN));
    PIT_OK(pit_tensor_upload(G, NULL, gf, sizeof(float) * MT));
    /* warm-up outside the capture: index buffers, kernels */
    PIT_OK(moe_inputs(rng, X, ids, x, id, g, w, ref));
    PIT_OK(pit_moe_forward(ctx, stream, X, ids, G, W, Y, NULL));
    PIT_OK(pit_synchronize(ctx, stream));
    double err0 = bf16_error(Y, ref, (size_t)MT * MN);
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(d->begin(native, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pit_status cap = pit_moe_forward(ctx, stream, X, ids, G, W, Y, NULL);
    CU_OK(d->end(native, &graph));
    PIT_OK(cap);
    CU_OK(d->instantiate(&exec, graph, 0));
    int failed = !(err0 <= 2e-2);
    for (int replay = 0; replay < 3; replay++) {
        PIT_OK(moe_inputs(rng, X, ids, x, id, g, w, ref)); /* new routing each time */
        PIT_OK(pit_tensor_upload(Y, NULL, nan, sizeof(uint16_t) * MT * MN)); /* every row must be written */
        CU_OK(d->launch(exec, native));
        CU_OK(d->sync(native));
        double err = bf16_error(Y, ref, (size_t)MT * MN);
        printf("moe replay %d: rel error %.3g\n", replay, err);
        failed |= !(err <= 2e-2);
    }
    printf("moe warm-up rel error %.3g\n", err0);
    pit_tensor_destroy(X);
    pit_tensor_destroy(ids);
    pit_tensor_destroy(G);
    pit_tensor_destroy(W);
    pit_tensor_destroy(Y);
    free(x), free(w), free(g), free(ref), free(id), free(gf), free(nan);
    return failed;
}

/* The expert FFN (bf16, SwiGLU, top-2 over 5 experts, H and F multiples of
 * 8 so both products run on the tensor cores; some slots routed nowhere)
 * captured once and replayed on new tokens and routing. */
enum { FT = 300, FH = 64, FF = 200, FE = 5, FK = 2 };

static pit_status ffn_inputs(pit_rng *rng, pit_tensor *X, pit_tensor *ids, double *x, int32_t *id,
                             const double *g, const double *w1, const double *w2, double *ref)
{
    const pit_ref_ffn shape = {FT, FH, FF, FE, FK, PIT_ACT_SWIGLU};
    pit_ref_fill_random(rng, x, (size_t)FT * FH);
    for (int i = 0; i < FT * FK; i++) /* skewed to expert 0; one slot in 16 routed nowhere */
        id[i] = (int32_t)(pit_rng_next(rng) % 16) == 0 ? -1 : (int32_t)(pit_rng_next(rng) % (FE + 2)) % FE;
    pit_status s = upload_bf16(X, x, (size_t)FT * FH);
    if (s == PIT_SUCCESS)
        s = pit_tensor_upload(ids, NULL, id, sizeof(int32_t) * FT * FK);
    pit_ref_moe_ffn(&shape, x, id, g, w1, w2, ref);
    return s;
}

static int ffn_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    int64_t sx[2] = {FT, FH}, sid[2] = {FT, FK}, sw1[3] = {FE, FH, 2 * FF}, sw2[3] = {FE, FF, FH};
    pit_tensor *X, *ids, *G, *W1, *W2, *Y;
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &X));
    PIT_OK(pit_tensor_create(ctx, PIT_I32, 2, sid, &ids));
    PIT_OK(pit_tensor_create(ctx, PIT_F32, 2, sid, &G));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw1, &W1));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw2, &W2));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &Y));
    const size_t n1 = (size_t)FE * FH * 2 * FF, n2 = (size_t)FE * FF * FH, ny = (size_t)FT * FH;
    double *x = malloc(sizeof(double) * ny), *w1 = malloc(sizeof(double) * n1), *w2 = malloc(sizeof(double) * n2),
           *g = malloc(sizeof(double) * FT * FK), *ref = malloc(sizeof(double) * ny);
    int32_t *id = malloc(sizeof(int32_t) * FT * FK);
    float *gf = malloc(sizeof(float) * FT * FK);
    uint16_t *nan = malloc(sizeof(uint16_t) * ny);
    pit_ref_fill_random(rng, w1, n1);
    pit_ref_fill_random(rng, w2, n2);
    for (int i = 0; i < FT * FK; i++)
        gf[i] = (float)(g[i] = 0.25 + 0.5 * (double)(pit_rng_next(rng) % 1000) / 1000.0);
    for (size_t i = 0; i < ny; i++)
        nan[i] = 0x7fc0; /* bf16 NaN */
    PIT_OK(upload_bf16(W1, w1, n1));
    PIT_OK(upload_bf16(W2, w2, n2));
    PIT_OK(pit_tensor_upload(G, NULL, gf, sizeof(float) * FT * FK));
    /* warm-up outside the capture: the workspace, index buffers, kernels */
    PIT_OK(ffn_inputs(rng, X, ids, x, id, g, w1, w2, ref));
    PIT_OK(pit_moe_ffn(ctx, stream, X, ids, G, W1, W2, Y, NULL, NULL));
    PIT_OK(pit_synchronize(ctx, stream));
    double err0 = bf16_error(Y, ref, ny);
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(d->begin(native, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pit_status cap = pit_moe_ffn(ctx, stream, X, ids, G, W1, W2, Y, NULL, NULL);
    CU_OK(d->end(native, &graph));
    PIT_OK(cap);
    CU_OK(d->instantiate(&exec, graph, 0));
    int failed = !(err0 <= 2e-2);
    for (int replay = 0; replay < 3; replay++) {
        PIT_OK(ffn_inputs(rng, X, ids, x, id, g, w1, w2, ref)); /* new routing each time */
        PIT_OK(pit_tensor_upload(Y, NULL, nan, sizeof(uint16_t) * ny)); /* every row must be written */
        CU_OK(d->launch(exec, native));
        CU_OK(d->sync(native));
        double err = bf16_error(Y, ref, ny);
        printf("moe ffn replay %d: rel error %.3g\n", replay, err);
        failed |= !(err <= 2e-2);
    }
    printf("moe ffn warm-up rel error %.3g\n", err0);
    pit_tensor *t[6] = {X, ids, G, W1, W2, Y};
    for (int i = 0; i < 6; i++)
        pit_tensor_destroy(t[i]);
    free(x), free(w1), free(w2), free(g), free(ref), free(id), free(gf), free(nan);
    return failed;
}

int main(void)
{
    driver d;
    if (!load_driver(&d) || d.init(0) != CUDA_SUCCESS) {
        printf("SKIPPED: no CUDA driver\n");
        return SKIP;
    }
    pit_context *ctx = NULL;
    if (pit_context_create("cuda", 0, &ctx) != PIT_SUCCESS) {
        printf("SKIPPED: no CUDA device for pit: %s\n", pit_last_error());
        return SKIP;
    }
    CUdevice dev;
    CUcontext cu;
    CUstream native;
    CU_OK(d.device_get(&dev, 0));
    CU_OK(d.primary_retain(&cu, dev));
    CU_OK(d.ctx_set(cu));
    CU_OK(d.stream_create(&native, CU_STREAM_NON_BLOCKING));
    pit_stream *stream = NULL;
    PIT_OK(pit_stream_wrap(ctx, native, &stream));

    int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    pit_tensor *A, *B, *C;
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sa, &A));
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sb, &B));
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sc, &C));
    pit_rng rng;
    pit_rng_seed(&rng, 99);
    double *a = malloc(sizeof(double) * M * K), *b = malloc(sizeof(double) * K * N),
           *ref = malloc(sizeof(double) * M * N);
    pit_ref_fill_random(&rng, b, (size_t)K * N);
    uint16_t *hb = malloc(sizeof(uint16_t) * K * N);
    pit_ref_from_double(PIT_F16, b, (size_t)K * N, hb);
    pit_ref_to_double(PIT_F16, hb, (size_t)K * N, b);
    PIT_OK(pit_tensor_upload(B, NULL, hb, sizeof(uint16_t) * K * N));
    free(hb);

    pit_matmul_options o = pit_matmul_options_default();
    o.fixed_plan = 1;
    o.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    /* Warm-up outside the capture: plan buffers and kernels are created once. */
    PIT_OK(new_inputs(&rng, A, b, a, ref));
    PIT_OK(pit_matmul(ctx, stream, A, B, C, &o, NULL));
    PIT_OK(pit_synchronize(ctx, stream));
    double err0 = download_error(C, ref);

    CUgraph graph;
    CUgraphExec exec;
    CU_OK(d.begin(native, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pit_status cap = pit_matmul(ctx, stream, A, B, C, &o, NULL);
    CU_OK(d.end(native, &graph));
    PIT_OK(cap);
    CU_OK(d.instantiate(&exec, graph, 0));

    int failed = err0 > 1e-2;
    for (int replay = 0; replay < 3; replay++) {
        PIT_OK(new_inputs(&rng, A, b, a, ref)); /* a new sparsity pattern each time */
        PIT_OK(poison(C)); /* the replay must write every element */
        CU_OK(d.launch(exec, native));
        CU_OK(d.sync(native));
        double err = download_error(C, ref);
        printf("matmul replay %d: rel error %.3g\n", replay, err);
        failed |= !(err <= 1e-2);
    }
    printf("matmul warm-up rel error %.3g\n", err0);
    int att_failed = attention_graph(&d, ctx, native, stream, &rng);
    int moe_failed = moe_graph(&d, ctx, native, stream, &rng);
    int ffn_failed = ffn_graph(&d, ctx, native, stream, &rng);
    printf("%d passed, %d failed\n", !failed + !att_failed + !moe_failed + !ffn_failed,
           failed + att_failed + moe_failed + ffn_failed);
    failed |= att_failed | moe_failed | ffn_failed;
    pit_tensor_destroy(A);
    pit_tensor_destroy(B);
    pit_tensor_destroy(C);
    pit_stream_destroy(stream);
    pit_context_destroy(ctx);
    free(a);
    free(ref);
    return failed;
}
