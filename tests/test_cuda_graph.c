/*
 * tests/test_cuda_graph.c - a fixed-plan pit_matmul, pit_sparse_attention,
 * a 16-bit pit_moe_forward and a 16-bit pit_moe_ffn without a report read
 * nothing back, so each can be captured in a CUDA graph and replayed on new
 * data (attention with its detection inside the fused kernel, whose work
 * counters are zeroed by a memset in the graph, and with the automatic
 * micro-tile: key-column tiles, three kernels and a memset; MoE with new
 * routing each replay). Opens the driver with
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

/* An operation captured once and replayed on new inputs: call queues it on
 * the stream; refresh writes new inputs and their reference (and poisons
 * the output where a replay must write all of it); error compares the
 * output with the reference. */
typedef struct graph_case {
    const char *name;
    double tol;
    pit_context *ctx;
    pit_stream *stream;
    pit_status (*call)(pit_context *ctx, pit_stream *stream, void *u);
    pit_status (*refresh)(void *u);
    double (*error)(void *u);
    void *u;
} graph_case;

/* A warm-up outside the capture (plan buffers, workspaces and kernels are
 * made once), the capture, then three replays on new inputs. 1 on a
 * failure. */
static int graph_case_run(const driver *d, CUstream native, const graph_case *c)
{
    PIT_OK(c->refresh(c->u));
    PIT_OK(c->call(c->ctx, c->stream, c->u));
    PIT_OK(pit_synchronize(c->ctx, c->stream));
    const double err0 = c->error(c->u);
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(d->begin(native, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pit_status cap = c->call(c->ctx, c->stream, c->u);
    CU_OK(d->end(native, &graph));
    PIT_OK(cap);
    CU_OK(d->instantiate(&exec, graph, 0));
    int failed = !(err0 <= c->tol);
    for (int replay = 0; replay < 3; replay++) {
        PIT_OK(c->refresh(c->u));
        CU_OK(d->launch(exec, native));
        CU_OK(d->sync(native));
        const double err = c->error(c->u);
        printf("%s replay %d: rel error %.3g\n", c->name, replay, err);
        failed |= !(err <= c->tol);
    }
    printf("%s warm-up rel error %.3g\n", c->name, err0);
    return failed;
}

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

/* A fixed-plan matmul (f16, 32x1 micro-tiles at random) replayed on a new
 * sparsity pattern each time. */
typedef struct mm_case {
    pit_rng *rng;
    pit_tensor *A, *B, *C;
    double *a, *b, *ref;
    pit_matmul_options o;
} mm_case;

static pit_status mm_call(pit_context *ctx, pit_stream *stream, void *u)
{
    mm_case *m = u;
    return pit_matmul(ctx, stream, m->A, m->B, m->C, &m->o, NULL);
}

static pit_status mm_refresh(void *u)
{
    mm_case *m = u;
    pit_status s = new_inputs(m->rng, m->A, m->b, m->a, m->ref);
    return s == PIT_SUCCESS ? poison(m->C) : s;
}

static double mm_error(void *u)
{
    mm_case *m = u;
    return download_error(m->C, m->ref);
}

static int matmul_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    mm_case m = {.rng = rng, .o = pit_matmul_options_default()};
    m.o.fixed_plan = 1;
    m.o.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sa, &m.A));
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sb, &m.B));
    PIT_OK(pit_tensor_create(ctx, PIT_F16, 2, sc, &m.C));
    m.a = malloc(sizeof(double) * M * K);
    m.b = malloc(sizeof(double) * K * N);
    m.ref = malloc(sizeof(double) * M * N);
    pit_ref_fill_random(rng, m.b, (size_t)K * N);
    uint16_t *hb = malloc(sizeof(uint16_t) * K * N);
    pit_ref_from_double(PIT_F16, m.b, (size_t)K * N, hb);
    pit_ref_to_double(PIT_F16, hb, (size_t)K * N, m.b);
    PIT_OK(pit_tensor_upload(m.B, NULL, hb, sizeof(uint16_t) * K * N));
    free(hb);
    const graph_case c = {"matmul", 1e-2, ctx, stream, mm_call, mm_refresh, mm_error, &m};
    const int failed = graph_case_run(d, native, &c);
    pit_tensor_destroy(m.A);
    pit_tensor_destroy(m.B);
    pit_tensor_destroy(m.C);
    free(m.a), free(m.b), free(m.ref);
    return failed;
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

typedef struct att_case {
    pit_rng *rng;
    int32_t block; /* the micro-tile side: 64, or 0 (automatic: key columns on CUDA) */
    pit_tensor *t[4], *O; /* Q, K, V, mask; O */
    double *h[4], *ref;
} att_case;

static pit_status att_call(pit_context *ctx, pit_stream *stream, void *u)
{
    att_case *a = u;
    return pit_sparse_attention(ctx, stream, a->t[0], a->t[1], a->t[2], a->t[3], a->O, 0.125f, a->block, NULL);
}

static pit_status att_refresh(void *u) /* a new mask each time */
{
    att_case *a = u;
    return attention_inputs(a->rng, a->t, a->h, a->ref);
}

static double att_error(void *u)
{
    att_case *a = u;
    return bf16_error(a->O, a->ref, (size_t)AH * AL * AD);
}

static int attention_graph_of(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng,
                              int32_t block, const char *name)
{
    const size_t nq = AH * AL * AD;
    int64_t sq[3] = {AH, AL, AD}, sm[2] = {AL, AL};
    att_case a = {.rng = rng, .block = block};
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &a.t[0]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &a.t[1]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &a.t[2]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sm, &a.t[3]));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sq, &a.O));
    for (int i = 0; i < 4; i++)
        a.h[i] = malloc(sizeof(double) * (i < 3 ? nq : (size_t)AL * AL));
    a.ref = malloc(sizeof(double) * nq);
    const graph_case c = {name, 2e-2, ctx, stream, att_call, att_refresh, att_error, &a};
    const int failed = graph_case_run(d, native, &c);
    for (int i = 0; i < 4; i++) {
        pit_tensor_destroy(a.t[i]);
        free(a.h[i]);
    }
    pit_tensor_destroy(a.O);
    free(a.ref);
    return failed;
}

static int attention_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    return attention_graph_of(d, ctx, native, stream, rng, 64, "attention");
}

static int attention_columns_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream,
                                   pit_rng *rng)
{
    return attention_graph_of(d, ctx, native, stream, rng, 0, "attention, automatic micro-tile");
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

typedef struct moe_case {
    pit_rng *rng;
    pit_tensor *X, *ids, *G, *W, *Y;
    double *x, *w, *g, *ref;
    int32_t *id;
    uint16_t *nan; /* Y poisoned: every row must be written */
} moe_case;

static pit_status moe_call(pit_context *ctx, pit_stream *stream, void *u)
{
    moe_case *m = u;
    return pit_moe_forward(ctx, stream, m->X, m->ids, m->G, m->W, m->Y, NULL);
}

static pit_status moe_refresh(void *u) /* new routing each time */
{
    moe_case *m = u;
    pit_status s = moe_inputs(m->rng, m->X, m->ids, m->x, m->id, m->g, m->w, m->ref);
    return s == PIT_SUCCESS ? pit_tensor_upload(m->Y, NULL, m->nan, sizeof(uint16_t) * MT * MN) : s;
}

static double moe_error(void *u)
{
    moe_case *m = u;
    return bf16_error(m->Y, m->ref, (size_t)MT * MN);
}

static int moe_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    int64_t sx[2] = {MT, MH}, sid[2] = {MT, 1}, sw[3] = {ME, MH, MN}, sy[2] = {MT, MN};
    moe_case m = {.rng = rng};
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &m.X));
    PIT_OK(pit_tensor_create(ctx, PIT_I32, 2, sid, &m.ids));
    PIT_OK(pit_tensor_create(ctx, PIT_F32, 2, sid, &m.G));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw, &m.W));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sy, &m.Y));
    m.x = malloc(sizeof(double) * MT * MH);
    m.w = malloc(sizeof(double) * ME * MH * MN);
    m.g = malloc(sizeof(double) * MT);
    m.ref = malloc(sizeof(double) * MT * MN);
    m.id = malloc(sizeof(int32_t) * MT);
    m.nan = malloc(sizeof(uint16_t) * MT * MN);
    float *gf = malloc(sizeof(float) * MT);
    pit_ref_fill_random(rng, m.w, (size_t)ME * MH * MN);
    for (int i = 0; i < MT; i++)
        gf[i] = (float)(m.g[i] = 0.25 + 0.5 * (double)(pit_rng_next(rng) % 1000) / 1000.0);
    for (int i = 0; i < MT * MN; i++)
        m.nan[i] = 0x7fc0; /* bf16 NaN */
    PIT_OK(upload_bf16(m.W, m.w, (size_t)ME * MH * MN));
    PIT_OK(pit_tensor_upload(m.G, NULL, gf, sizeof(float) * MT));
    free(gf);
    const graph_case c = {"moe", 2e-2, ctx, stream, moe_call, moe_refresh, moe_error, &m};
    const int failed = graph_case_run(d, native, &c);
    pit_tensor *t[5] = {m.X, m.ids, m.G, m.W, m.Y};
    for (int i = 0; i < 5; i++)
        pit_tensor_destroy(t[i]);
    free(m.x), free(m.w), free(m.g), free(m.ref), free(m.id), free(m.nan);
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

typedef struct ffn_case {
    pit_rng *rng;
    pit_tensor *X, *ids, *G, *W1, *W2, *Y;
    double *x, *w1, *w2, *g, *ref;
    int32_t *id;
    uint16_t *nan; /* Y poisoned: every row must be written */
} ffn_case;

static pit_status ffn_call(pit_context *ctx, pit_stream *stream, void *u)
{
    ffn_case *f = u;
    return pit_moe_ffn(ctx, stream, f->X, f->ids, f->G, f->W1, f->W2, f->Y, NULL, NULL);
}

static pit_status ffn_refresh(void *u) /* new routing each time */
{
    ffn_case *f = u;
    pit_status s = ffn_inputs(f->rng, f->X, f->ids, f->x, f->id, f->g, f->w1, f->w2, f->ref);
    return s == PIT_SUCCESS ? pit_tensor_upload(f->Y, NULL, f->nan, sizeof(uint16_t) * FT * FH) : s;
}

static double ffn_error(void *u)
{
    ffn_case *f = u;
    return bf16_error(f->Y, f->ref, (size_t)FT * FH);
}

static int ffn_graph(const driver *d, pit_context *ctx, CUstream native, pit_stream *stream, pit_rng *rng)
{
    int64_t sx[2] = {FT, FH}, sid[2] = {FT, FK}, sw1[3] = {FE, FH, 2 * FF}, sw2[3] = {FE, FF, FH};
    const size_t n1 = (size_t)FE * FH * 2 * FF, n2 = (size_t)FE * FF * FH, ny = (size_t)FT * FH;
    ffn_case f = {.rng = rng};
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &f.X));
    PIT_OK(pit_tensor_create(ctx, PIT_I32, 2, sid, &f.ids));
    PIT_OK(pit_tensor_create(ctx, PIT_F32, 2, sid, &f.G));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw1, &f.W1));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 3, sw2, &f.W2));
    PIT_OK(pit_tensor_create(ctx, PIT_BF16, 2, sx, &f.Y));
    f.x = malloc(sizeof(double) * ny);
    f.w1 = malloc(sizeof(double) * n1);
    f.w2 = malloc(sizeof(double) * n2);
    f.g = malloc(sizeof(double) * FT * FK);
    f.ref = malloc(sizeof(double) * ny);
    f.id = malloc(sizeof(int32_t) * FT * FK);
    f.nan = malloc(sizeof(uint16_t) * ny);
    float *gf = malloc(sizeof(float) * FT * FK);
    pit_ref_fill_random(rng, f.w1, n1);
    pit_ref_fill_random(rng, f.w2, n2);
    for (int i = 0; i < FT * FK; i++)
        gf[i] = (float)(f.g[i] = 0.25 + 0.5 * (double)(pit_rng_next(rng) % 1000) / 1000.0);
    for (size_t i = 0; i < ny; i++)
        f.nan[i] = 0x7fc0; /* bf16 NaN */
    PIT_OK(upload_bf16(f.W1, f.w1, n1));
    PIT_OK(upload_bf16(f.W2, f.w2, n2));
    PIT_OK(pit_tensor_upload(f.G, NULL, gf, sizeof(float) * FT * FK));
    free(gf);
    const graph_case c = {"moe ffn", 2e-2, ctx, stream, ffn_call, ffn_refresh, ffn_error, &f};
    const int failed = graph_case_run(d, native, &c);
    pit_tensor *t[6] = {f.X, f.ids, f.G, f.W1, f.W2, f.Y};
    for (int i = 0; i < 6; i++)
        pit_tensor_destroy(t[i]);
    free(f.x), free(f.w1), free(f.w2), free(f.g), free(f.ref), free(f.id), free(f.nan);
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
    pit_rng rng;
    pit_rng_seed(&rng, 99);
    int (*const cases[])(const driver *, pit_context *, CUstream, pit_stream *, pit_rng *) = {
        matmul_graph, attention_graph, attention_columns_graph, moe_graph, ffn_graph};
    int failed = 0, passed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int f = cases[i](&d, ctx, native, stream, &rng);
        failed += f;
        passed += !f;
    }
    printf("%d passed, %d failed\n", passed, failed);
    pit_stream_destroy(stream);
    pit_context_destroy(ctx);
    return failed != 0;
}
