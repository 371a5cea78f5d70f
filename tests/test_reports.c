/*
 * tests/test_reports.c - pit_report says what ran, on the OpenCL device
 * (PoCL in CI):
 *  - docs/api.md's table of choice forms is exactly core/pit/choice.h's
 *    PIT_CHOICE_FORMS, and each row's example has the row's form;
 *  - every path of every operator stores a choice (and runner_up) of one of
 *    those forms, the one its path names;
 *  - the dense GEMM's report gives the pattern as seen (nonzero_tiles of a
 *    named micro-tile), a settled dense plan the count of its last look, a
 *    call that never looks -1;
 *  - pit_context_set_redetect_interval(ctx, 1) makes every call look.
 * Usage: test_reports DOCS_API_MD WORKDIR
 */
#include <math.h>

#include "choice.h"
#include "rtest.h"

static const char *const forms[] = {PIT_CHOICE_FORMS};
#define NFORMS ((int)(sizeof forms / sizeof forms[0]))

/* Whether s has the printf form f: %c one character, %d and %lld an
 * integer, %s one character or more. */
static int has_form(const char *f, const char *s)
{
    if (!*f)
        return !*s;
    if (f[0] == '%' && f[1] == 'c')
        return *s && has_form(f + 2, s + 1);
    if (f[0] == '%' && (f[1] == 'd' || !strncmp(f + 1, "lld", 3))) {
        const char *rest = f + (f[1] == 'd' ? 2 : 4);
        if (*s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
        return has_form(rest, s);
    }
    if (f[0] == '%' && f[1] == 's') {
        for (const char *end = s + 1; end <= s + strlen(s); end++)
            if (has_form(f + 2, end))
                return 1;
        return 0;
    }
    return *f == *s && has_form(f + 1, s + 1);
}

static int documented(const char *s)
{
    for (int i = 0; i < NFORMS; i++)
        if (has_form(forms[i], s))
            return 1;
    return 0;
}

/* ---- the docs' table -------------------------------------------------------- */

/* The text of the n-th `...` cell of a table row ("" for `""`), 0 if none. */
static int cell_code(const char *row, int n, char *out, size_t size)
{
    const char *p = row;
    for (int i = 0; i <= n; i++) {
        p = strstr(p, "| `");
        if (!p)
            return 0;
        p += 3;
    }
    const char *end = strstr(p, "` |");
    if (!end || (size_t)(end - p) >= size)
        return 0;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    if (!strcmp(out, "\"\""))
        out[0] = '\0';
    return 1;
}

static void test_docs_table(const char *docs)
{
    FILE *f = fopen(docs, "r");
    RT_CHECK(f != NULL, "cannot read %s", docs);
    if (!f)
        return;
    char line[1024], form[256], example[256];
    int in_table = 0, rows = 0, seen[NFORMS];
    memset(seen, 0, sizeof seen);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "#", 1)) {
            in_table = strstr(line, "`pit_report.choice`") != NULL;
            continue;
        }
        if (!in_table || !cell_code(line, 0, form, sizeof form))
            continue;
        rows++;
        int at = -1;
        for (int i = 0; i < NFORMS; i++)
            if (!strcmp(forms[i], form))
                at = i;
        RT_CHECK(at >= 0, "docs/api.md lists \"%s\", which choice.h does not", form);
        if (at >= 0)
            seen[at]++;
        if (cell_code(line, 1, example, sizeof example))
            RT_CHECK(has_form(form, example), "docs/api.md: the example \"%s\" is not \"%s\"",
                     example, form);
    }
    fclose(f);
    RT_CHECK(rows > 0, "docs/api.md has no table under a `pit_report.choice` heading");
    for (int i = 0; i < NFORMS; i++)
        RT_CHECK(seen[i] == 1, "choice.h's \"%s\" is listed %d times in docs/api.md", forms[i],
                 seen[i]);
}

/* ---- operators -------------------------------------------------------------- */

static void expect_choice(const char *what, const pit_report *r, const char *form)
{
    RT_CHECK(has_form(form, r->choice), "%s: choice \"%s\", want the form \"%s\"", what, r->choice,
             form);
    RT_CHECK(documented(r->choice), "%s: choice \"%s\" is no documented form", what, r->choice);
    RT_CHECK(!r->runner_up[0] || documented(r->runner_up), "%s: runner_up \"%s\" is no documented "
             "form", what, r->runner_up);
}

typedef struct mm {
    int64_t m, k, n;
    double *A, *B, *R;
    pit_tensor *tA, *tB, *tC;
} mm;

/* A [m,k] with a fraction `zero` of its 32x1 micro-tiles zero, B [k,n]. */
static void mm_make(pit_context *ctx, mm *p, int64_t m, int64_t k, int64_t n, double zero, pit_rng *rng)
{
    memset(p, 0, sizeof *p);
    p->m = m, p->k = k, p->n = n;
    p->A = malloc((size_t)(m * k) * 8);
    p->B = malloc((size_t)(k * n) * 8);
    p->R = malloc((size_t)(m * n) * 8);
    pit_ref_fill_random(rng, p->A, (size_t)(m * k));
    pit_ref_fill_random(rng, p->B, (size_t)(k * n));
    if (zero > 0)
        pit_ref_sparsify_tiles(rng, p->A, 1, m, k, 32, 1, 0, 0, zero);
    p->tA = rt_tensor(ctx, PIT_F32, 2, 1, m, k);
    p->tB = rt_tensor(ctx, PIT_F32, 2, 1, k, n);
    p->tC = rt_tensor(ctx, PIT_F32, 2, 1, m, n);
    rt_upload(p->tA, NULL, p->A, (size_t)(m * k));
    rt_upload(p->tB, NULL, p->B, (size_t)(k * n));
}

/* Runs options o and checks C against the reference. */
static pit_status mm_run(pit_context *ctx, mm *p, const pit_matmul_options *o, pit_report *r,
                         const char *what)
{
    pit_status s = pit_matmul(ctx, NULL, p->tA, p->tB, p->tC, o, r);
    if (s != PIT_SUCCESS)
        return s;
    pit_ref_matmul(1, p->m, p->n, p->k, p->A, p->B, p->R);
    double *got = malloc((size_t)(p->m * p->n) * 8);
    rt_download(p->tC, NULL, got, (size_t)(p->m * p->n));
    double err = pit_ref_rel_error(p->R, got, (size_t)(p->m * p->n));
    RT_CHECK(err <= 1e-4, "%s: rel error %g", what, err);
    free(got);
    return s;
}

static void mm_zero_a(mm *p)
{
    memset(p->A, 0, (size_t)(p->m * p->k) * 8);
    rt_upload(p->tA, NULL, p->A, (size_t)(p->m * p->k));
}

static void mm_free(mm *p)
{
    pit_tensor_destroy(p->tA);
    pit_tensor_destroy(p->tB);
    pit_tensor_destroy(p->tC);
    free(p->A);
    free(p->B);
    free(p->R);
}

static void test_matmul_reports(pit_context *ctx, pit_rng *rng)
{
    pit_matmul_options o = pit_matmul_options_default();
    pit_report r;
    mm p;

    /* a few non-zero micro-tiles: the sparse kernel */
    mm_make(ctx, &p, 256, 256, 64, 0.97, rng);
    RT_CHECK(mm_run(ctx, &p, &o, &r, "sparse") == PIT_SUCCESS, "sparse matmul");
    expect_choice("sparse", &r, PIT_CHOICE_SPARSE);
    RT_CHECK(!r.used_dense && r.microtile.rows > 0 && r.nonzero_tiles >= 0 &&
                 r.nonzero_tiles < r.total_tiles,
             "sparse: used_dense %d, %lld of %lld micro-tiles", r.used_dense,
             (long long)r.nonzero_tiles, (long long)r.total_tiles);
    pit_matmul_options tiled = o;
    tiled.tile_bm = r.bm, tiled.tile_bn = r.bn, tiled.tile_bk = r.bk;
    if (!r.used_dense && mm_run(ctx, &p, &tiled, &r, "tile set") == PIT_SUCCESS)
        expect_choice("tile set", &r, PIT_CHOICE_SPARSE_TILE_SET);
    pit_matmul_options fixed = o;
    fixed.fixed_plan = 1;
    fixed.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    RT_CHECK(mm_run(ctx, &p, &fixed, &r, "fixed") == PIT_SUCCESS, "fixed plan");
    expect_choice("fixed", &r, PIT_CHOICE_FIXED);
    RT_CHECK(r.nonzero_tiles == -1 && r.total_tiles > 0, "fixed plan: %lld of %lld (-1: not read)",
             (long long)r.nonzero_tiles, (long long)r.total_tiles);
    fixed.tile_bm = r.bm, fixed.tile_bn = r.bn, fixed.tile_bk = r.bk;
    RT_CHECK(mm_run(ctx, &p, &fixed, &r, "fixed, tile set") == PIT_SUCCESS, "fixed plan, tile set");
    expect_choice("fixed, tile set", &r, PIT_CHOICE_FIXED);
    mm_free(&p);

    /* every element non-zero: the dense GEMM, and what the pattern looked like */
    mm_make(ctx, &p, 128, 192, 96, 0.0, rng);
    RT_CHECK(mm_run(ctx, &p, &o, &r, "dense") == PIT_SUCCESS, "dense matmul");
    expect_choice("dense", &r, PIT_CHOICE_DENSE);
    RT_CHECK(r.used_dense && r.reselected, "dense: used_dense %d reselected %d", r.used_dense,
             r.reselected);
    RT_CHECK(r.microtile.rows > 0 && r.total_tiles > 0 && r.nonzero_tiles == r.total_tiles,
             "dense: the pattern as seen: %dx%d, %lld of %lld micro-tiles non-zero", r.microtile.rows,
             r.microtile.cols, (long long)r.nonzero_tiles, (long long)r.total_tiles);
    /* settled: no detection, the counts of the last look even once A is zero */
    mm_zero_a(&p);
    RT_CHECK(mm_run(ctx, &p, &o, &r, "kept") == PIT_SUCCESS, "kept dense matmul");
    expect_choice("kept", &r, PIT_CHOICE_DENSE_KEPT);
    RT_CHECK(r.used_dense && !r.reselected && r.nonzero_tiles == r.total_tiles && r.total_tiles > 0,
             "kept: the last look's %lld of %lld", (long long)r.nonzero_tiles, (long long)r.total_tiles);
    /* a forced micro-tile on a pattern that favours dense */
    pit_matmul_options forced = o;
    forced.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    mm_free(&p);
    mm_make(ctx, &p, 128, 192, 96, 0.0, rng);
    RT_CHECK(mm_run(ctx, &p, &forced, &r, "forced") == PIT_SUCCESS, "forced micro-tile");
    RT_CHECK(!r.used_dense && (has_form(PIT_CHOICE_FORCED, r.choice) ||
                               has_form(PIT_CHOICE_SPARSE, r.choice)),
             "forced micro-tile: \"%s\"", r.choice);
    expect_choice("forced", &r, r.choice[0] == 'f' ? PIT_CHOICE_FORCED : PIT_CHOICE_SPARSE);
    pit_matmul_options dense = o;
    dense.force_dense = 1;
    RT_CHECK(mm_run(ctx, &p, &dense, &r, "force_dense") == PIT_SUCCESS, "force_dense");
    expect_choice("force_dense", &r, PIT_CHOICE_DENSE_FORCED);
    RT_CHECK(r.used_dense && r.nonzero_tiles == -1 && r.microtile.rows == 0,
             "force_dense: never looks (%lld, %dx%d)", (long long)r.nonzero_tiles, r.microtile.rows,
             r.microtile.cols);
    mm_free(&p);

    /* K = 0: nothing ran */
    mm_make(ctx, &p, 32, 0, 16, 0.0, rng);
    RT_CHECK(pit_matmul(ctx, NULL, p.tA, p.tB, p.tC, &o, &r) == PIT_SUCCESS, "K = 0");
    expect_choice("K = 0", &r, "");
    RT_CHECK(r.skipped_compute, "K = 0 skips the compute");
    mm_free(&p);
}

/* A settled dense plan sees a pattern that turned all-zero only at its next
 * full look; with an interval of 1, at once. */
static void test_redetect_interval(pit_context *ctx, pit_rng *rng)
{
    RT_CHECK(pit_context_set_redetect_interval(NULL, 1) == PIT_ERR_INVALID_ARGUMENT, "ctx NULL");
    RT_CHECK(pit_context_set_redetect_interval(ctx, 0) == PIT_ERR_INVALID_ARGUMENT, "0 calls");
    RT_CHECK(pit_context_set_redetect_interval(ctx, 1025) == PIT_ERR_INVALID_ARGUMENT, "1025 calls");
    pit_matmul_options o = pit_matmul_options_default();
    pit_report r;
    for (int every = 8; every >= 1; every -= 7) {
        RT_CHECK(pit_context_set_redetect_interval(ctx, every) == PIT_SUCCESS, "interval %d", every);
        mm p;
        mm_make(ctx, &p, 96, 160, 64, 0.0, rng);
        RT_CHECK(mm_run(ctx, &p, &o, &r, "full") == PIT_SUCCESS, "interval %d: full", every);
        RT_CHECK(r.used_dense, "interval %d: a full operand runs dense (\"%s\")", every, r.choice);
        mm_zero_a(&p);
        int looked = -1;
        for (int call = 1; call <= 8; call++) {
            RT_CHECK(mm_run(ctx, &p, &o, &r, "zero") == PIT_SUCCESS, "interval %d: call %d", every,
                     call);
            expect_choice("after the pattern changed", &r,
                          r.skipped_compute ? PIT_CHOICE_SPARSE : PIT_CHOICE_DENSE_KEPT);
            if (looked < 0 && r.nonzero_tiles == 0 && r.skipped_compute)
                looked = call;
        }
        if (every == 1)
            RT_CHECK(looked == 1, "interval 1: the zero pattern seen at call %d", looked);
        else
            RT_CHECK(looked == 8, "interval 8: the zero pattern seen at call %d, not at the 8th "
                     "(its full look)", looked);
        mm_free(&p);
    }
    pit_context_set_redetect_interval(ctx, 8);
}

/* A tile database whose only matmul_k f32 tile the device refuses. */
static void test_refused_tile(const char *workdir, pit_rng *rng)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/refused.tiledb", workdir);
    FILE *f = fopen(path, "w");
    RT_CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    /* bn 512 is past the OpenCL kernel's 256; almost free, so it is chosen */
    fputs("* opencl matmul_k f32 32 512 32 256 1 0 0.0001 10485760\n", f);
    fclose(f);
    setenv("PIT_TILEDB", path, 1);
    pit_context *ctx = rt_context_or_skip("test_reports");
    unsetenv("PIT_TILEDB");
    mm p;
    mm_make(ctx, &p, 128, 256, 64, 0.9, rng);
    pit_matmul_options o = pit_matmul_options_default();
    pit_report r;
    RT_CHECK(mm_run(ctx, &p, &o, &r, "refused") == PIT_SUCCESS, "refused tile");
    expect_choice("refused", &r, PIT_CHOICE_DENSE_REFUSED);
    RT_CHECK(r.used_dense && r.microtile.rows == 32 && r.nonzero_tiles > 0 &&
                 r.nonzero_tiles <= r.total_tiles,
             "refused: dense, the pattern through the refused candidate (%lld of %lld)",
             (long long)r.nonzero_tiles, (long long)r.total_tiles);
    mm_free(&p);
    pit_context_destroy(ctx);
}

static void test_model_operators(pit_context *ctx, pit_rng *rng)
{
    enum { L = 64, D = 16, T = 32, E = 4 };
    pit_report r;
    double mask[L * L], x[L * L], q[2 * L * D];
    for (int i = 0; i < L * L; i++)
        mask[i] = (i / L) / 16 >= (i % L) / 16 ? 1.0 : 0.0; /* block causal */
    pit_ref_fill_random(rng, x, L * L);
    pit_ref_fill_random(rng, q, 2 * L * D);
    pit_tensor *tM = rt_tensor(ctx, PIT_F32, 2, 1, L, L), *tX = rt_tensor(ctx, PIT_F32, 2, 1, L, L),
               *tY = rt_tensor(ctx, PIT_F32, 2, 1, L, L), *tA = rt_tensor(ctx, PIT_F32, 2, 1, L, D),
               *tQ = rt_tensor(ctx, PIT_F32, 3, 2, L, D), *tO = rt_tensor(ctx, PIT_F32, 3, 2, L, D);
    rt_upload(tM, NULL, mask, L * L);
    rt_upload(tX, NULL, x, L * L);
    rt_upload(tA, NULL, q, L * D);
    rt_upload(tQ, NULL, q, 2 * L * D);
    RT_CHECK(pit_sddmm(ctx, NULL, tA, tA, tM, tY, 16, 16, &r) == PIT_SUCCESS, "sddmm");
    expect_choice("sddmm", &r, PIT_CHOICE_SDDMM);
    RT_CHECK(pit_sparse_softmax(ctx, NULL, tX, tM, tY, 0.5f, &r) == PIT_SUCCESS, "softmax");
    expect_choice("softmax", &r, PIT_CHOICE_SOFTMAX);
    RT_CHECK(pit_sparse_attention(ctx, NULL, tQ, tQ, tQ, tM, tO, 0.25f, 16, &r) == PIT_SUCCESS,
             "attention");
    expect_choice("attention", &r, PIT_CHOICE_ATTENTION); /* OpenCL: the fused kernel */
    double none[L * L] = {0};
    rt_upload(tM, NULL, none, L * L);
    RT_CHECK(pit_sparse_attention(ctx, NULL, tQ, tQ, tQ, tM, tO, 0.25f, 16, &r) == PIT_SUCCESS,
             "attention, every key masked");
    expect_choice("attention, every key masked", &r, PIT_CHOICE_ATTENTION);

    /* rows: half the rows of A zero */
    double a[T * D];
    pit_ref_fill_random(rng, a, T * D);
    for (int i = 0; i < T * D; i++)
        if ((i / D) % 2)
            a[i] = 0;
    pit_tensor *tR = rt_tensor(ctx, PIT_F32, 2, 1, T, D), *tW = rt_tensor(ctx, PIT_F32, 2, 1, D, D),
               *tC = rt_tensor(ctx, PIT_F32, 2, 1, T, D);
    rt_upload(tR, NULL, a, T * D);
    rt_upload(tW, NULL, q, D * D);
    RT_CHECK(pit_matmul_rows(ctx, NULL, tR, tW, tC, 0, &r) == PIT_SUCCESS, "rows");
    expect_choice("rows", &r, PIT_CHOICE_ROWS PIT_CHOICE_TILE);
    pit_tensor *tH = rt_tensor(ctx, PIT_F32, 2, 1, T, D);
    RT_CHECK(pit_relu_ffn(ctx, NULL, tR, tW, tW, tH, tC, &r) == PIT_SUCCESS, "relu_ffn");
    expect_choice("relu_ffn", &r, r.used_dense ? PIT_CHOICE_DENSE : PIT_CHOICE_SPARSE);
    pit_tensor_destroy(tH);

    /* moe: two experts a token */
    double ids_d[T * 2], gates[T * 2], w[E * D * D];
    for (int i = 0; i < T * 2; i++) {
        ids_d[i] = (double)(pit_rng_next(rng) % E);
        gates[i] = pit_rng_uniform(rng);
    }
    pit_ref_fill_random(rng, w, E * D * D);
    pit_tensor *tI = rt_tensor(ctx, PIT_I32, 2, 1, T, 2), *tG = rt_tensor(ctx, PIT_F32, 2, 1, T, 2),
               *tE = rt_tensor(ctx, PIT_F32, 3, E, D, D);
    rt_upload(tI, NULL, ids_d, T * 2);
    rt_upload(tG, NULL, gates, T * 2);
    rt_upload(tE, NULL, w, E * D * D);
    RT_CHECK(pit_moe_forward(ctx, NULL, tR, tI, tG, tE, tC, &r) == PIT_SUCCESS, "moe");
    expect_choice("moe", &r, PIT_CHOICE_MOE PIT_CHOICE_TILE);
    /* the expert FFN: GELU, so W_gate_up [E,D,D] is [E,H,F]; every slot routed */
    pit_moe_ffn_options fo = pit_moe_ffn_options_default();
    fo.activation = PIT_ACT_GELU;
    RT_CHECK(pit_moe_ffn(ctx, NULL, tR, tI, tG, tE, tE, tC, &fo, &r) == PIT_SUCCESS, "moe_ffn");
    expect_choice("moe_ffn", &r, PIT_CHOICE_MOE_FFN PIT_CHOICE_TILE);
    RT_CHECK(r.nonzero_tiles == T * 2 && r.total_tiles == (int64_t)E * T * 2,
             "moe_ffn report: %lld routed slots of %lld", (long long)r.nonzero_tiles,
             (long long)r.total_tiles);
    pit_tensor *all[] = {tM, tX, tY, tA, tQ, tO, tR, tW, tC, tI, tG, tE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pit_tensor_destroy(all[i]);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("usage: test_reports DOCS_API_MD WORKDIR\n");
        return 2;
    }
    test_docs_table(argv[1]);
    pit_context *ctx = rt_context_or_skip("test_reports");
    pit_rng rng;
    pit_rng_seed(&rng, 17);
    test_matmul_reports(ctx, &rng);
    test_redetect_interval(ctx, &rng);
    test_model_operators(ctx, &rng);
    pit_context_destroy(ctx);
    test_refused_tile(argv[2], &rng);
    return rt_finish("test_reports");
}
