/*
 * test_opencl_no_attention_ex.c - pit_attention on a backend without the
 * attention_ex entry (the CUDA plug-in's state until its kernels take every
 * option), played by the OpenCL plug-in's table with that entry removed,
 * installed in the "cuda" slot (pit_debug_install_backend). The calls that
 * reduce to attention_sparse must run there and match the reference (cut
 * into one call a batch or a head where the mask or the views ask for it);
 * every other option, and the backward, must be refused with
 * PIT_ERR_UNSUPPORTED naming the backend and the option. Exit 77 without an
 * OpenCL device.
 */
#include <math.h>
#include <stdarg.h>

#include "backend.h"
#include "pit_testing.h"
#include "rtest.h"

const pit_backend *pit_backend_register(const pit_host *host);

static char g_plugin_error[1024];

static pit_status host_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_plugin_error, sizeof g_plugin_error, fmt, ap);
    va_end(ap);
    return st;
}

static void host_log(const char *fmt, ...)
{
    (void)fmt;
}

static const char *host_cache_dir(void)
{
    return NULL;
}

static const pit_host g_host = {.abi_version = PIT_BACKEND_ABI_VERSION, .error = host_error,
                                .log_debug = host_log, .cache_dir = host_cache_dir};

static pit_context *g_ctx;

enum { B = 2, H = 3, L = 37, D = 16, DV = 8 };

static pit_tensor *tensor4(pit_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return rt_tensor4(g_ctx, dt, a, b, c, d);
}

typedef struct problem {
    pit_tensor *Q, *K, *V, *O, *mask4, *mask2;
    double q[B * H * L * D], k[B * H * L * D], v[B * H * L * DV];
    double m4[B * H * L * L], m2[L * L], o[B * H * L * DV], ref[B * H * L * DV];
} problem;

static void make_problem(problem *p)
{
    pit_rng rng;
    pit_rng_seed(&rng, 5);
    p->Q = tensor4(PIT_F32, B, H, L, D);
    p->K = tensor4(PIT_F32, B, H, L, D);
    p->V = tensor4(PIT_F32, B, H, L, DV);
    p->O = tensor4(PIT_F32, B, H, L, DV);
    p->mask4 = tensor4(PIT_U8, B, H, L, L);
    p->mask2 = rt_tensor(g_ctx, PIT_U8, 2, 1, L, L);
    pit_ref_fill_random(&rng, p->q, sizeof p->q / sizeof p->q[0]);
    pit_ref_fill_random(&rng, p->k, sizeof p->k / sizeof p->k[0]);
    pit_ref_fill_random(&rng, p->v, sizeof p->v / sizeof p->v[0]);
    for (size_t i = 0; i < sizeof p->m4 / sizeof p->m4[0]; i++)
        p->m4[i] = pit_rng_uniform(&rng) < 0.2 ? 1.0 : 0.0;
    for (size_t i = 0; i < sizeof p->m2 / sizeof p->m2[0]; i++)
        p->m2[i] = pit_rng_uniform(&rng) < 0.0 ? 1.0 : 0.0;
    RT_CHECK(rt_upload(p->Q, NULL, p->q, sizeof p->q / sizeof p->q[0]) == PIT_SUCCESS &&
                 rt_upload(p->K, NULL, p->k, sizeof p->k / sizeof p->k[0]) == PIT_SUCCESS &&
                 rt_upload(p->V, NULL, p->v, sizeof p->v / sizeof p->v[0]) == PIT_SUCCESS &&
                 rt_upload(p->mask4, NULL, p->m4, sizeof p->m4 / sizeof p->m4[0]) ==
                     PIT_SUCCESS &&
                 rt_upload(p->mask2, NULL, p->m2, sizeof p->m2 / sizeof p->m2[0]) == PIT_SUCCESS,
             "uploads");
}

static void free_problem(problem *p)
{
    pit_tensor *all[] = {p->Q, p->K, p->V, p->O, p->mask4, p->mask2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

/* O of a reduced call against the reference, with mask m of (mb, mh) sets. */
static void expect_reference(const char *what, problem *p, const double *m, int64_t mb,
                             int64_t mh)
{
    const pit_ref_attn r = {.b = B, .hq = H, .hkv = H, .lq = L, .lk = L, .d = D, .dv = DV,
                            .scale = (double)(1.0f / sqrtf((float)D)), .window_left = -1,
                            .window_right = -1, .mask = m, .mask_b = mb, .mask_h = mh};
    pit_ref_attention_full(&r, p->q, p->k, p->v, p->ref, NULL);
    const size_t n = sizeof p->o / sizeof p->o[0];
    RT_CHECK(rt_download(p->O, NULL, p->o, n) == PIT_SUCCESS, "%s: download", what);
    double err = pit_ref_rel_error(p->ref, p->o, n);
    RT_CHECK(err <= pit_ref_tolerance(PIT_F32), "%s: rel error %g", what, err);
}

static void test_reduced_calls(problem *p)
{
    pit_attention_options o = pit_attention_options_default();
    o.mask = p->mask4;
    pit_status s = pit_attention(g_ctx, NULL, p->Q, p->K, p->V, p->O, &o, NULL, NULL);
    RT_CHECK(s == PIT_SUCCESS, "mask [B, H, L, L] reduces to attention_sparse");
    if (s == PIT_SUCCESS)
        expect_reference("mask [B, H, L, L]", p, p->m4, B, H);
    o.mask = p->mask2;
    s = pit_attention(g_ctx, NULL, p->Q, p->K, p->V, p->O, &o, NULL, NULL);
    RT_CHECK(s == PIT_SUCCESS, "mask [L, L] reduces to attention_sparse");
    if (s == PIT_SUCCESS)
        expect_reference("mask [L, L]", p, p->m2, 1, 1);
}

/* A mask shared by the heads of a batch: one attention_sparse call a batch. */
static void test_mask_per_batch(problem *p)
{
    pit_tensor *m = tensor4(PIT_U8, B, 1, L, L);
    RT_CHECK(rt_upload(m, NULL, p->m4, B * L * L) == PIT_SUCCESS, "upload [B, 1, L, L]");
    pit_attention_options o = pit_attention_options_default();
    o.mask = m;
    pit_report r;
    pit_status s = pit_attention(g_ctx, NULL, p->Q, p->K, p->V, p->O, &o, NULL, &r);
    RT_CHECK(s == PIT_SUCCESS && r.total_tiles == B * H, /* one 64 x 64 block a head */
             "mask [B, 1, L, L] runs a batch at a time: %s, %lld blocks counted",
             pit_status_string(s), (long long)r.total_tiles);
    if (s == PIT_SUCCESS)
        expect_reference("mask [B, 1, L, L]", p, p->m4, B, 1);
    pit_tensor_destroy(m);
}

/* Q as a view of a [B, L, H, D] buffer: one attention_sparse call a head. */
static void test_blhd_query(problem *p)
{
    pit_tensor *store = tensor4(PIT_F32, B, L, H, D);
    pit_tensor_desc sd;
    pit_tensor_get_desc(store, &sd);
    const int64_t shape[4] = {B, H, L, D}, strides[4] = {L * H * D, D, H * D, 1};
    pit_tensor *view = NULL;
    RT_CHECK(pit_tensor_wrap(g_ctx, PIT_F32, 4, shape, strides, sd.data, 0, &view) == PIT_SUCCESS &&
                 rt_upload(view, NULL, p->q, sizeof p->q / sizeof p->q[0]) == PIT_SUCCESS,
             "Q as a [B, L, H, D] view");
    pit_attention_options o = pit_attention_options_default();
    o.mask = p->mask4;
    pit_status s = pit_attention(g_ctx, NULL, view, p->K, p->V, p->O, &o, NULL, NULL);
    RT_CHECK(s == PIT_SUCCESS, "[B, L, H, D] Q runs a head at a time");
    if (s == PIT_SUCCESS)
        expect_reference("[B, L, H, D] Q", p, p->m4, B, H);
    pit_tensor_destroy(view);
    pit_tensor_destroy(store);
}

static void expect_refused(const char *what, pit_status s, const char *option)
{
    const char *msg = pit_last_error();
    RT_CHECK(s == PIT_ERR_UNSUPPORTED && strstr(msg, "backend cuda") && strstr(msg, option),
             "%s: got %s, want PIT_ERR_UNSUPPORTED naming the backend and \"%s\"", what,
             pit_status_string(s), option);
}

static void test_refusals(problem *p)
{
    pit_attention_options o = pit_attention_options_default();
    o.mask = p->mask2;
    pit_tensor *Q = p->Q, *K = p->K, *V = p->V, *O = p->O;
#define REFUSE(what, option) \
    expect_refused(what, pit_attention(g_ctx, NULL, Q, K, V, O, &o, lse, NULL), option)
    pit_tensor *lse = NULL;
    o.causal = 1;
    REFUSE("causal", "causal");
    o.causal = 0;
    o.window_left = 4;
    REFUSE("window", "window");
    o.window_left = -1;
    pit_tensor *bm = rt_tensor(g_ctx, PIT_U8, 2, 1, 3, 3);
    o.block_mask = bm;
    o.block_q = o.block_k = 16;
    REFUSE("block mask", "block mask");
    o.block_mask = NULL;
    o.block_q = o.block_k = 0;
    lse = rt_tensor(g_ctx, PIT_F32, 3, B, H, L);
    REFUSE("lse", "lse");
    pit_tensor_destroy(lse);
    lse = NULL;
    o.mask = NULL;
    REFUSE("no mask", "without an element mask");
    o.mask = p->mask2;
    pit_tensor *q_short = tensor4(PIT_F32, B, H, L - 1, D), *o_short = tensor4(PIT_F32, B, H, L - 1, DV);
    pit_tensor *m_short = rt_tensor(g_ctx, PIT_U8, 2, 1, L - 1, L);
    Q = q_short;
    O = o_short;
    o.mask = m_short;
    REFUSE("Lq != Lk", "Lq != Lk");
    o.mask = p->mask2;
    Q = p->Q;
    O = p->O;
    pit_tensor *k1 = tensor4(PIT_F32, B, 1, L, D), *v1 = tensor4(PIT_F32, B, 1, L, DV);
    K = k1;
    V = v1;
    REFUSE("GQA", "Hq != Hkv");
    K = p->K;
    V = p->V;
#undef REFUSE
    pit_tensor *lse2 = rt_tensor(g_ctx, PIT_F32, 3, B, H, L), *dQ = tensor4(PIT_F32, B, H, L, D);
    pit_status bs = pit_attention_backward(g_ctx, NULL, p->Q, p->K, p->V, p->O, p->O, lse2, NULL,
                                           dQ, NULL, NULL);
    RT_CHECK(bs == PIT_ERR_UNSUPPORTED && strstr(pit_last_error(), "backend cuda") &&
                 strstr(pit_last_error(), "attention_backward"),
             "the backward without its entry: %s", pit_status_string(bs));
    pit_tensor_destroy(lse2);
    pit_tensor_destroy(dQ);
    pit_tensor *all[] = {bm, q_short, o_short, m_short, k1, v1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

/* pit_sparse_attention, the wrapper, takes the reduced path too. */
static void test_sparse_attention(problem *p)
{
    pit_tensor *Q = rt_tensor(g_ctx, PIT_F32, 3, B * H, L, D), *K = rt_tensor(g_ctx, PIT_F32, 3, B * H, L, D);
    pit_tensor *V = rt_tensor(g_ctx, PIT_F32, 3, B * H, L, DV), *O = rt_tensor(g_ctx, PIT_F32, 3, B * H, L, DV);
    pit_tensor *M = rt_tensor(g_ctx, PIT_U8, 3, B * H, L, L);
    rt_upload(Q, NULL, p->q, sizeof p->q / sizeof p->q[0]);
    rt_upload(K, NULL, p->k, sizeof p->k / sizeof p->k[0]);
    rt_upload(V, NULL, p->v, sizeof p->v / sizeof p->v[0]);
    rt_upload(M, NULL, p->m4, sizeof p->m4 / sizeof p->m4[0]);
    pit_report r;
    pit_status s = pit_sparse_attention(g_ctx, NULL, Q, K, V, M, O, 1.0f / sqrtf((float)D), 16, &r);
    RT_CHECK(s == PIT_SUCCESS && !strcmp(r.choice, "attention 16x16"),
             "pit_sparse_attention without attention_ex: %s, \"%s\"", pit_status_string(s),
             r.choice);
    pit_tensor *swap = p->O;
    p->O = O;
    if (s == PIT_SUCCESS)
        expect_reference("pit_sparse_attention", p, p->m4, B, H);
    p->O = swap;
    pit_tensor *all[] = {Q, K, V, O, M};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

int main(void)
{
    static pit_backend table;
    const pit_backend *ocl = pit_backend_register(&g_host);
    if (!ocl) {
        printf("test_opencl_no_attention_ex: FAIL: the plug-in refused the host\n");
        return 1;
    }
    table = *ocl;
    table.name = "cuda";
    table.attention_ex = NULL;
    table.attention_backward = NULL;
    if (pit_debug_install_backend("cuda", &table) != PIT_SUCCESS ||
        pit_context_create("cuda", 0, &g_ctx) != PIT_SUCCESS) {
        printf("test_opencl_no_attention_ex: SKIPPED: no OpenCL device: %s %s\n", pit_last_error(),
               g_plugin_error);
        return 77;
    }
    problem *p = calloc(1, sizeof *p);
    if (!p)
        return 1;
    make_problem(p);
    test_reduced_calls(p);
    test_mask_per_batch(p);
    test_blhd_query(p);
    test_refusals(p);
    test_sparse_attention(p);
    free_problem(p);
    free(p);
    pit_context_destroy(g_ctx);
    if (rt_failed)
        printf("last plug-in error: %s\n", g_plugin_error);
    return rt_finish("test_opencl_no_attention_ex");
}
