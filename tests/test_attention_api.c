/*
 * tests/test_attention_api.c - pit_attention's contract outside its numbers
 * (those are the conformance suite's): every bad argument refused with its
 * status and a message, the report of each index form, an output dimension
 * of 0 with lse, views whose strides are not in row-major order (taken by
 * pit_attention, refused by the other operators), and the backward's own
 * checks. Needs an OpenCL device
 * (PoCL in CI); exit 77 without one.
 */
#include <math.h>
#include <string.h>

#include "rtest.h"

static pit_context *g_ctx;

static pit_tensor *tensor4(pit_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return rt_tensor4(g_ctx, dt, a, b, c, d);
}

static void expect(const char *what, pit_status got, pit_status want, const char *needle)
{
    const char *msg = pit_last_error();
    RT_CHECK(got == want && (want == PIT_SUCCESS || msg[0]) && (!needle || strstr(msg, needle)),
             "%s: got %s, want %s%s%s", what, pit_status_string(got), pit_status_string(want),
             needle ? " naming " : "", needle ? needle : "");
}

/* Q [1, 4, 10, 8], K and V [1, 2, 12, 8] and [1, 2, 12, 6], O [1, 4, 10, 6]. */
typedef struct operands {
    pit_tensor *Q, *K, *V, *O;
} operands;

static operands make_operands(void)
{
    operands x = {tensor4(PIT_F32, 1, 4, 10, 8), tensor4(PIT_F32, 1, 2, 12, 8),
                  tensor4(PIT_F32, 1, 2, 12, 6), tensor4(PIT_F32, 1, 4, 10, 6)};
    return x;
}

static void free_operands(operands *x)
{
    pit_tensor_destroy(x->Q);
    pit_tensor_destroy(x->K);
    pit_tensor_destroy(x->V);
    pit_tensor_destroy(x->O);
}

static pit_status call(const operands *x, const pit_attention_options *o, pit_tensor *lse)
{
    return pit_attention(g_ctx, NULL, x->Q, x->K, x->V, x->O, o, lse, NULL);
}

static void test_defaults(void)
{
    pit_attention_options o = pit_attention_options_default();
    RT_CHECK(o.scale == 0.0f && o.causal == 0 && o.window_left == -1 && o.window_right == -1 &&
                 !o.mask && !o.block_mask && o.block_q == 0 && o.block_k == 0 &&
                 o.microtile.rows == 0 && o.microtile.cols == 0,
             "pit_attention_options_default");
}

static void test_operands(void)
{
    operands x = make_operands();
    pit_report rep;
    memset(&rep, 0x5a, sizeof rep);
    expect("NULL ctx", pit_attention(NULL, NULL, x.Q, x.K, x.V, x.O, NULL, NULL, &rep),
           PIT_ERR_INVALID_ARGUMENT, "ctx");
    RT_CHECK(rep.choice[0] == '\0' && rep.nonzero_tiles == 0, "a refused call clears its report");
    expect("NULL Q", pit_attention(g_ctx, NULL, NULL, x.K, x.V, x.O, NULL, NULL, NULL),
           PIT_ERR_INVALID_ARGUMENT, "'Q'");
    pit_tensor *r3 = rt_tensor(g_ctx, PIT_F32, 3, 4, 10, 8);
    expect("rank 3 Q", pit_attention(g_ctx, NULL, r3, x.K, x.V, x.O, NULL, NULL, NULL),
           PIT_ERR_SHAPE_MISMATCH, "rank");
    pit_tensor *kb = tensor4(PIT_BF16, 1, 2, 12, 8), *qi = tensor4(PIT_I32, 1, 4, 10, 8);
    expect("K of another dtype", pit_attention(g_ctx, NULL, x.Q, kb, x.V, x.O, NULL, NULL, NULL),
           PIT_ERR_UNSUPPORTED_DTYPE, "dtypes differ");
    expect("i32 Q", pit_attention(g_ctx, NULL, qi, x.K, x.V, x.O, NULL, NULL, NULL),
           PIT_ERR_UNSUPPORTED_DTYPE, "f32, f16 or bf16");
    pit_tensor *kd = tensor4(PIT_F32, 1, 2, 12, 9), *vl = tensor4(PIT_F32, 1, 2, 11, 6);
    pit_tensor *ob = tensor4(PIT_F32, 2, 4, 10, 6), *k3 = tensor4(PIT_F32, 1, 3, 12, 8);
    pit_tensor *v3 = tensor4(PIT_F32, 1, 3, 12, 6);
    expect("K's head dim", pit_attention(g_ctx, NULL, x.Q, kd, x.V, x.O, NULL, NULL, NULL),
           PIT_ERR_SHAPE_MISMATCH, "'K'");
    expect("V's key length", pit_attention(g_ctx, NULL, x.Q, x.K, vl, x.O, NULL, NULL, NULL),
           PIT_ERR_SHAPE_MISMATCH, "'V'");
    expect("O's batch", pit_attention(g_ctx, NULL, x.Q, x.K, x.V, ob, NULL, NULL, NULL),
           PIT_ERR_SHAPE_MISMATCH, "'O'");
    expect("4 query heads over 3", pit_attention(g_ctx, NULL, x.Q, k3, v3, x.O, NULL, NULL, NULL),
           PIT_ERR_SHAPE_MISMATCH, "multiple");
    pit_tensor *all[] = {r3, kb, qi, kd, vl, ob, k3, v3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
    free_operands(&x);
}

static void test_options(void)
{
    operands x = make_operands();
    pit_attention_options o = pit_attention_options_default();
    o.causal = 2;
    expect("causal 2", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "causal");
    o = pit_attention_options_default();
    o.window_left = -2;
    expect("window_left -2", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "window_left");
    o = pit_attention_options_default();
    o.scale = NAN;
    expect("scale NaN", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "scale");
    o = pit_attention_options_default();
    o.block_q = 4;
    o.block_k = 4;
    expect("block_q without block_mask", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "block_q");
    o = pit_attention_options_default();
    o.microtile = (pit_microtile){16, 0, PIT_AXIS_AUTO};
    expect("micro-tile 16x0", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "micro-tile");
    o.microtile = (pit_microtile){16, 16, PIT_AXIS_M};
    expect("micro-tile along M", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "axis");
    free_operands(&x);
}

static void test_masks(void)
{
    operands x = make_operands();
    pit_attention_options o = pit_attention_options_default();
    pit_tensor *m3 = rt_tensor(g_ctx, PIT_U8, 3, 3, 10, 12);
    o.mask = m3;
    expect("mask of 3 heads for 4", call(&x, &o, NULL), PIT_ERR_SHAPE_MISMATCH, "Hq = 4 or 1");
    pit_tensor *m4 = tensor4(PIT_U8, 2, 4, 10, 12);
    o.mask = m4;
    expect("mask of 2 batches for 1", call(&x, &o, NULL), PIT_ERR_SHAPE_MISMATCH, "B = 1 or 1");
    pit_tensor *m2 = rt_tensor(g_ctx, PIT_U8, 2, 1, 10, 11);
    o.mask = m2;
    expect("mask [10, 11] for 12 keys", call(&x, &o, NULL), PIT_ERR_SHAPE_MISMATCH, "'mask'");
    /* [2, 2, 4, 4] row-major with a padded batch stride: batch and head do not merge */
    pit_tensor *store = rt_tensor(g_ctx, PIT_U8, 2, 1, 1, 80);
    pit_tensor_desc sd;
    pit_tensor_get_desc(store, &sd);
    const int64_t shape[4] = {2, 2, 4, 4}, strides[4] = {40, 16, 4, 1};
    pit_tensor *pad = NULL;
    expect("wrap padded mask", pit_tensor_wrap(g_ctx, PIT_U8, 4, shape, strides, sd.data, 0, &pad),
           PIT_SUCCESS, NULL);
    operands y = {tensor4(PIT_F32, 2, 2, 4, 8), tensor4(PIT_F32, 2, 2, 4, 8),
                  tensor4(PIT_F32, 2, 2, 4, 8), tensor4(PIT_F32, 2, 2, 4, 8)};
    o.mask = pad;
    expect("mask whose batch and head do not merge", call(&y, &o, NULL), PIT_ERR_BAD_STRIDES,
           "batch stride");
    o.mask = NULL;
    pit_tensor *bm = rt_tensor(g_ctx, PIT_U8, 2, 1, 2, 3); /* Lq 10 / 4 -> 3 rows, not 2 */
    o.block_mask = bm;
    o.block_q = o.block_k = 4;
    expect("block mask of 2 row blocks for 3", call(&x, &o, NULL), PIT_ERR_SHAPE_MISMATCH,
           "block_mask");
    o.block_q = 0;
    expect("block mask without block_q", call(&x, &o, NULL), PIT_ERR_INVALID_ARGUMENT, "block_q");
    pit_tensor *all[] = {m3, m4, m2, pad, store, bm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
    free_operands(&x);
    free_operands(&y);
}

static void test_lse_and_aliasing(void)
{
    operands x = make_operands();
    pit_tensor *lb = rt_tensor(g_ctx, PIT_BF16, 3, 1, 4, 10), *ls = rt_tensor(g_ctx, PIT_F32, 3, 1, 4, 9);
    expect("bf16 lse", call(&x, NULL, lb), PIT_ERR_UNSUPPORTED_DTYPE, "'lse'");
    expect("lse of 9 rows for 10", call(&x, NULL, ls), PIT_ERR_SHAPE_MISMATCH, "'lse'");
    /* lse inside O's buffer */
    pit_tensor_desc od;
    pit_tensor_get_desc(x.O, &od);
    const int64_t lshape[3] = {1, 4, 10};
    pit_tensor *in_o = NULL;
    pit_tensor_wrap(g_ctx, PIT_F32, 3, lshape, NULL, od.data, 0, &in_o);
    expect("lse overlaps O", call(&x, NULL, in_o), PIT_ERR_ALIASING, "'lse' overlaps 'O'");
    pit_attention_options o = pit_attention_options_default();
    const int64_t mshape[2] = {10, 12};
    pit_tensor *m_in_o = NULL;
    pit_tensor_wrap(g_ctx, PIT_U8, 2, mshape, NULL, od.data, 0, &m_in_o);
    o.mask = m_in_o;
    expect("O overlaps the mask", call(&x, &o, NULL), PIT_ERR_ALIASING, "'O' overlaps 'mask'");
    pit_tensor *t = tensor4(PIT_F32, 1, 2, 6, 4);
    expect("O is Q", pit_attention(g_ctx, NULL, t, t, t, t, NULL, NULL, NULL), PIT_ERR_ALIASING,
           "'O' overlaps 'Q'");
    pit_tensor *all[] = {lb, ls, in_o, m_in_o, t};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
    free_operands(&x);
}

/* A [1, L, H, D] buffer seen as [1, H, L, D]: pit_attention takes it, an
 * operator that needs row-major views refuses it, naming the argument. */
static void test_permuted_views(void)
{
    pit_tensor *store = tensor4(PIT_F32, 1, 6, 2, 4);
    pit_tensor_desc sd;
    pit_tensor_get_desc(store, &sd);
    const int64_t shape[4] = {1, 2, 6, 4}, strides[4] = {48, 4, 8, 1};
    pit_tensor *view = NULL;
    expect("wrap [B, L, H, D] as [B, H, L, D]",
           pit_tensor_wrap(g_ctx, PIT_F32, 4, shape, strides, sd.data, 0, &view), PIT_SUCCESS, NULL);
    const int64_t overlap[4] = {48, 4, 4, 1};
    pit_tensor *bad = NULL;
    expect("wrap: permuted strides whose rows overlap",
           pit_tensor_wrap(g_ctx, PIT_F32, 4, shape, overlap, sd.data, 0, &bad), PIT_ERR_BAD_STRIDES,
           "overlaps");
    if (!view) {
        pit_tensor_destroy(store);
        return;
    }
    double host[48];
    for (int i = 0; i < 48; i++)
        host[i] = (double)(i % 7) - 3.0;
    RT_CHECK(rt_upload(view, NULL, host, 48) == PIT_SUCCESS, "upload through a permuted view");
    pit_tensor *y = tensor4(PIT_F32, 1, 2, 6, 4), *o = tensor4(PIT_F32, 1, 2, 6, 4);
    expect("pit_relu refuses a permuted view", pit_relu(g_ctx, NULL, view, y), PIT_ERR_BAD_STRIDES,
           "'X'");
    expect("pit_attention takes permuted Q, K and V",
           pit_attention(g_ctx, NULL, view, view, view, o, NULL, NULL, NULL), PIT_SUCCESS, NULL);
    pit_tensor_destroy(view);
    pit_tensor_destroy(y);
    pit_tensor_destroy(o);
    pit_tensor_destroy(store);
}

static void expect_report(const char *what, const pit_report *r, int rows, int cols,
                          int64_t nonzero, int64_t total, int skipped)
{
    char choice[32];
    snprintf(choice, sizeof choice, "attention %dx%d", rows, cols);
    RT_CHECK(!strcmp(r->choice, choice) && r->microtile.rows == rows && r->microtile.cols == cols &&
                 r->nonzero_tiles == nonzero && r->total_tiles == total &&
                 r->skipped_compute == skipped,
             "%s: report \"%s\" %dx%d, %lld of %lld, skipped %d; want \"%s\", %lld of %lld, "
             "skipped %d", what, r->choice, r->microtile.rows, r->microtile.cols,
             (long long)r->nonzero_tiles, (long long)r->total_tiles, r->skipped_compute, choice,
             (long long)nonzero, (long long)total, skipped);
}

/* Lq = Lk = 130 in 64 x 64 blocks (3 x 3), 2 heads. */
static void test_reports(void)
{
    pit_tensor *Q = tensor4(PIT_F32, 1, 2, 130, 8), *O = tensor4(PIT_F32, 1, 2, 130, 8);
    double *q = calloc(2 * 130 * 8, sizeof(double));
    for (int i = 0; i < 2 * 130 * 8; i++)
        q[i] = (double)(i % 5) * 0.25 - 0.5;
    rt_upload(Q, NULL, q, 2 * 130 * 8);
    pit_attention_options o = pit_attention_options_default();
    pit_report r;
    o.causal = 1; /* row blocks see 1, 2 and 3 key blocks */
    RT_CHECK(pit_attention(g_ctx, NULL, Q, Q, Q, O, &o, NULL, &r) == PIT_SUCCESS, "causal");
    expect_report("causal, no mask", &r, 64, 64, 2 * 6, 2 * 9, 0);
    o.causal = 0;
    pit_tensor *m = rt_tensor(g_ctx, PIT_U8, 2, 1, 130, 130);
    double *mh = calloc(130 * 130, sizeof(double));
    mh[0] = mh[129 * 130 + 129] = 1.0; /* blocks (0, 0) and (2, 2) */
    rt_upload(m, NULL, mh, 130 * 130);
    o.mask = m;
    RT_CHECK(pit_attention(g_ctx, NULL, Q, Q, Q, O, &o, NULL, &r) == PIT_SUCCESS, "mask");
    expect_report("mask, shared by the heads", &r, 64, 64, 2 * 2, 2 * 9, 0);
    o.mask = NULL;
    pit_tensor *bm = rt_tensor(g_ctx, PIT_U8, 3, 2, 5, 5); /* 130 / 30 -> 5 x 5 blocks */
    double bh[50] = {0};
    bh[3] = bh[25 + 7] = bh[25 + 24] = 1.0;
    rt_upload(bm, NULL, bh, 50);
    o.block_mask = bm;
    o.block_q = o.block_k = 30;
    RT_CHECK(pit_attention(g_ctx, NULL, Q, Q, Q, O, &o, NULL, &r) == PIT_SUCCESS, "block mask");
    expect_report("block mask, one a head", &r, 30, 30, 3, 2 * 25, 0);
    memset(mh, 0, 130 * 130 * sizeof(double));
    rt_upload(m, NULL, mh, 130 * 130);
    o = pit_attention_options_default();
    o.mask = m;
    RT_CHECK(pit_attention(g_ctx, NULL, Q, Q, Q, O, &o, NULL, &r) == PIT_SUCCESS, "empty mask");
    expect_report("every key masked", &r, 64, 64, 0, 2 * 9, 1);
    free(q);
    free(mh);
    pit_tensor *all[] = {Q, O, m, bm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

/* Dv = 0: O holds nothing, lse is still written. */
static void test_lse_without_values(void)
{
    pit_tensor *Q = tensor4(PIT_F32, 1, 1, 3, 4), *V = tensor4(PIT_F32, 1, 1, 3, 0);
    pit_tensor *O = tensor4(PIT_F32, 1, 1, 3, 0), *lse = rt_tensor(g_ctx, PIT_F32, 3, 1, 1, 3);
    double q[12], l[3] = {NAN, NAN, NAN};
    for (int i = 0; i < 12; i++)
        q[i] = 0.0; /* every score 0: lse = log(allowed keys) */
    rt_upload(Q, NULL, q, 12);
    rt_upload(lse, NULL, l, 3);
    pit_attention_options o = pit_attention_options_default();
    o.causal = 1;
    RT_CHECK(pit_attention(g_ctx, NULL, Q, Q, V, O, &o, lse, NULL) == PIT_SUCCESS, "Dv = 0 with lse");
    rt_download(lse, NULL, l, 3);
    RT_CHECK(fabs(l[0]) < 1e-6 && fabs(l[1] - log(2.0)) < 1e-6 && fabs(l[2] - log(3.0)) < 1e-6,
             "lse with Dv = 0: %g %g %g, want 0, log 2, log 3", l[0], l[1], l[2]);
    pit_tensor *all[] = {Q, V, O, lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

/* pit_attention_backward's own checks (the rest are the forward's). */
static void test_backward_checks(void)
{
    operands x = make_operands();
    pit_tensor *lse = rt_tensor(g_ctx, PIT_F32, 3, 1, 4, 10), *dO = tensor4(PIT_F32, 1, 4, 10, 6);
    pit_tensor *dQ = tensor4(PIT_F32, 1, 4, 10, 8), *dK = tensor4(PIT_F32, 1, 2, 12, 8);
    pit_tensor *dV = tensor4(PIT_F32, 1, 2, 12, 6), *bad = tensor4(PIT_F32, 1, 4, 10, 7);
    expect("backward without lse",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, NULL, NULL, dQ, dK, dV),
           PIT_ERR_INVALID_ARGUMENT, "'lse'");
    expect("backward dO of 7 columns for 6",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, bad, lse, NULL, dQ, dK, dV),
           PIT_ERR_SHAPE_MISMATCH, "'dO'");
    expect("backward dQ of 7 columns for 8",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, lse, NULL, bad, dK, dV),
           PIT_ERR_SHAPE_MISMATCH, "'dQ'");
    expect("backward dV is dO",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, lse, NULL, dQ, dK, dO),
           PIT_ERR_SHAPE_MISMATCH, "'dV'"); /* dO [1, 4, 10, 6] is no [1, 2, 12, 6] */
    pit_tensor_desc kd;
    pit_tensor_get_desc(dK, &kd);
    const int64_t vshape[4] = {1, 2, 12, 6};
    pit_tensor *dv_in_dk = NULL;
    pit_tensor_wrap(g_ctx, PIT_F32, 4, vshape, NULL, kd.data, 0, &dv_in_dk);
    expect("backward dV overlaps dK",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, lse, NULL, dQ, dK, dv_in_dk),
           PIT_ERR_ALIASING, "'dV' overlaps 'dK'");
    expect("backward dQ is Q",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, lse, NULL, x.Q, NULL, NULL),
           PIT_ERR_ALIASING, "'dQ' overlaps 'Q'");
    expect("backward with no gradient asked",
           pit_attention_backward(g_ctx, NULL, x.Q, x.K, x.V, x.O, dO, lse, NULL, NULL, NULL, NULL),
           PIT_SUCCESS, NULL);
    pit_tensor *all[] = {lse, dO, dQ, dK, dV, bad, dv_in_dk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
    free_operands(&x);
}

int main(void)
{
    test_defaults();
    g_ctx = rt_context_or_skip("test_attention_api");
    test_operands();
    test_options();
    test_masks();
    test_lse_and_aliasing();
    test_permuted_views();
    test_reports();
    test_lse_without_values();
    test_backward_checks();
    pit_context_destroy(g_ctx);
    return rt_finish("test_attention_api");
}
