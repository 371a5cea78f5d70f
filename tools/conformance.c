/*
 * tools/conformance.c - `pit conformance`: runs every operator's cases on every
 * device of every backend present (or the one PIT_BACKEND / --backend names),
 * prints the device x operator matrix, exits non-zero on any failure.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "tool.h"

static const conf_op conf_ops[] = {
    {"matmul", conf_matmul},
    {"sddmm", conf_sddmm},
    {"softmax", conf_softmax},
    {"attention", conf_attention},
    {"moe", conf_moe},
    {"moe_ffn", conf_moe_ffn},
    {"rows", conf_rows},
    {"ffn", conf_ffn},
    {"backward", conf_backward},
    {"prune", conf_prune},
};
#define CONF_NOPS ((int)(sizeof conf_ops / sizeof conf_ops[0]))

pit_status conf_upload(pit_tensor *t, const double *x, size_t n)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    size_t es = pit_dtype_size(d.dtype);
    void *buf = malloc(n * es + 1);
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_ref_from_double(d.dtype, x, n, buf);
    pit_status s = pit_tensor_upload(t, NULL, buf, n * es);
    free(buf);
    return s;
}

pit_status conf_download(const pit_tensor *t, double *x, size_t n)
{
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    size_t es = pit_dtype_size(d.dtype);
    void *buf = malloc(n * es + 1);
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_status s = pit_tensor_download(t, NULL, buf, n * es);
    if (s == PIT_SUCCESS)
        pit_ref_to_double(d.dtype, buf, n, x);
    free(buf);
    return s;
}

pit_status conf_poison(pit_tensor *t, size_t n)
{
    double *nan = malloc(n * sizeof(double) + 1);
    if (!nan)
        return PIT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    pit_status s = conf_upload(t, nan, n);
    free(nan);
    return s;
}

void conf_round(pit_dtype dt, double *x, size_t n)
{
    uint32_t tmp;
    for (size_t i = 0; i < n; i++) {
        pit_ref_from_double(dt, &x[i], 1, &tmp);
        pit_ref_to_double(dt, &tmp, 1, &x[i]);
    }
}

void conf_check(conf_tally *t, const conf_opts *o, const char *what, double err, double tol)
{
    int ok = err <= tol;
    if (ok)
        t->passed++;
    else
        t->failed++;
    if (!ok || o->verbose)
        printf("    %s %s: rel error %.3g (tolerance %.0e)\n", ok ? "pass" : "FAIL", what, err, tol);
}

void conf_compare_tensor(conf_tally *t, const conf_opts *o, const char *what, const pit_tensor *out,
                         double *host, const double *ref, size_t n, double tol)
{
    pit_status s = conf_download(out, host, n);
    if (s != PIT_SUCCESS) {
        conf_call_failed(t, what, s);
        return;
    }
    conf_check(t, o, what, pit_ref_rel_error(ref, host, n), tol);
}

void conf_call_failed(conf_tally *t, const char *what, pit_status s)
{
    t->failed++;
    printf("    FAIL %s: %s: %s\n", what, pit_status_string(s), pit_last_error());
}

/* ---- patterns ------------------------------------------------------------------ */

const char *const conf_pattern_names[PAT_COUNT] = {
    "dense", "empty", "32x32@0.7", "8x8@0.6+unaligned", "1x1@0.5", "masked-rows",
    "window+global", "longformer", "many-global"};

static void fill_ones(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0;
}

/* A sliding window of `window` each side, and global tokens: a token is
 * global when glob[t] is set (t < m for a row, t < n for a column). */
static void window_global(double *x, int64_t batch, int64_t m, int64_t n, int64_t window, const char *glob)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t d = i > j ? i - j : j - i;
                x[(b * m + i) * n + j] = (d <= window || glob[i] || glob[j]) ? 1.0 : 0.0;
            }
}

/* The window-and-global-tokens mask with `count` global tokens: the first
 * ones, or at random positions (the same for rows and columns). */
static void global_tokens(pit_rng *rng, double *x, int64_t batch, int64_t m, int64_t n, int64_t window, int count,
                          int random)
{
    const int64_t len = m > n ? m : n;
    char *glob = calloc((size_t)len + 1, 1);
    if (!glob)
        return; /* x stays all ones: still a valid pattern */
    for (int g = 0; g < count && g < len; g++) {
        int64_t t = random ? (int64_t)(pit_rng_next(rng) % (uint64_t)len) : g;
        glob[t] = 1;
    }
    window_global(x, batch, m, n, window, glob);
    free(glob);
}

void conf_make_pattern(pit_rng *rng, pattern_kind k, int64_t batch, int64_t m, int64_t n,
                       double *x)
{
    size_t total = (size_t)(batch * m * n);
    fill_ones(x, total);
    switch (k) {
    case PAT_DENSE: break;
    case PAT_EMPTY: memset(x, 0, total * sizeof(double)); break;
    case PAT_BLOCKS_ALIGNED: pit_ref_sparsify_tiles(rng, x, batch, m, n, 32, 32, 0, 0, 0.7); break;
    case PAT_BLOCKS_UNALIGNED: pit_ref_sparsify_tiles(rng, x, batch, m, n, 8, 8, 3, 5, 0.6); break;
    case PAT_FINE: pit_ref_sparsify_tiles(rng, x, batch, m, n, 1, 1, 0, 0, 0.5); break;
    case PAT_MASKED_ROWS:
        pit_ref_sparsify_tiles(rng, x, batch, m, n, 4, 8, 0, 0, 0.5);
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < m; i += 3)
                if (i == 0 || i == 3)
                    memset(x + (b * m + i) * n, 0, (size_t)n * sizeof(double));
        break;
    case PAT_WINDOW_GLOBAL: global_tokens(rng, x, batch, m, n, 4, 2, 0); break;
    case PAT_LONGFORMER: global_tokens(rng, x, batch, m, n, 32, 6, 1); break;
    case PAT_MANY_GLOBAL: global_tokens(rng, x, batch, m, n, 16, 160, 1); break;
    case PAT_COUNT: break;
    }
}

static void kit_free(conf_probe_kit *k)
{
    pit_tensor **all[] = {&k->m[0], &k->m[1], &k->m[2], &k->m[3], &k->m[4], &k->b[0], &k->b[1],
                          &k->b[2], &k->b[3], &k->mask, &k->ids, &k->gates};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        pit_tensor_destroy(*all[i]);
        *all[i] = NULL;
    }
}

static void kit_make(pit_context *ctx, pit_dtype dt, conf_probe_kit *k)
{
    const int64_t m[2] = {2, 2}, b[3] = {1, 2, 2}, col[2] = {2, 1};
    memset(k, 0, sizeof *k);
    for (int i = 0; i < 5; i++)
        pit_tensor_create(ctx, dt, 2, m, &k->m[i]);
    for (int i = 0; i < 4; i++)
        pit_tensor_create(ctx, dt, 3, b, &k->b[i]);
    pit_tensor_create(ctx, PIT_F32, 2, m, &k->mask);
    pit_tensor_create(ctx, PIT_F32, 2, col, &k->gates);
    if (pit_tensor_create(ctx, PIT_I32, 2, col, &k->ids) == PIT_SUCCESS)
        pit_tensor_zero(k->ids, NULL);
}

int conf_dtype_supported(pit_context *ctx, pit_dtype dt, conf_tally *t, int ncases,
                         const char *op, conf_probe_fn probe)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    if (dt == PIT_F32 || (dt == PIT_F16 && d.has_f16_storage) || (dt == PIT_BF16 && d.has_bf16))
        return 1;
    conf_probe_kit kit;
    kit_make(ctx, dt, &kit);
    pit_status s = probe(ctx, &kit);
    kit_free(&kit);
    if (s == PIT_ERR_UNSUPPORTED) {
        t->passed++;
    } else {
        char what[160];
        snprintf(what, sizeof what, "%s with %s (device lacks it) must give PIT_ERR_UNSUPPORTED",
                 op, pit_dtype_name(dt));
        conf_call_failed(t, what, s);
    }
    t->skipped += ncases;
    char reason[48];
    snprintf(reason, sizeof reason, "%s not supported by the device", pit_dtype_name(dt));
    if (strstr(t->skip_reason, reason)) /* said once for the operators of one suite */
        return 0;
    size_t len = strlen(t->skip_reason);
    snprintf(t->skip_reason + len, sizeof t->skip_reason - len, "%s%s", len ? "; " : "", reason);
    return 0;
}

static int run_device(const char *backend, int index, const conf_opts *o, const char *only_op,
                      conf_tally *out)
{
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(backend, index, &ctx);
    if (s != PIT_SUCCESS) {
        printf("  %s:%d FAILED to create a context: %s: %s\n", backend, index,
               pit_status_string(s), pit_last_error());
        out[0].failed++;
        return 1;
    }
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    printf("%s:%d  %s (%s)\n", backend, index, d.name, d.arch);
    int failed = 0;
    for (int i = 0; i < CONF_NOPS; i++) {
        if (only_op && strcmp(only_op, conf_ops[i].name) != 0)
            continue;
        conf_tally *t = &out[i];
        conf_ops[i].run(ctx, o, t);
        printf("  %-10s %d passed, %d failed, %d skipped%s%s\n", conf_ops[i].name, t->passed,
               t->failed, t->skipped, t->skip_reason[0] ? " - skipped: " : "", t->skip_reason);
        failed |= t->failed > 0;
    }
    pit_context_destroy(ctx);
    return failed;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pit conformance [--quick] [--verbose] [--backend NAME] [--op NAME] [--seed N]\n"
               "  runs every operator on every device present; PIT_BACKEND limits it to one\n");
}

typedef struct conf_row {
    char device[160];
    conf_tally t[CONF_NOPS];
    int skipped_backend;
    char reason[512];
} conf_row;

static void print_matrix(const conf_row *rows, int nrows)
{
    printf("\nconformance matrix (passed/failed/skipped):\n%-34s", "device");
    for (int i = 0; i < CONF_NOPS; i++)
        printf(" %-16s", conf_ops[i].name);
    printf("\n");
    for (int r = 0; r < nrows; r++) {
        printf("%-34.34s", rows[r].device);
        if (rows[r].skipped_backend) {
            printf(" SKIPPED: %s\n", rows[r].reason);
            continue;
        }
        for (int i = 0; i < CONF_NOPS; i++) {
            char cell[48];
            snprintf(cell, sizeof cell, "%d/%d/%d%s", rows[r].t[i].passed, rows[r].t[i].failed,
                     rows[r].t[i].skipped, rows[r].t[i].failed ? " FAIL" : "");
            printf(" %-16s", cell);
        }
        printf("\n");
    }
}

/* What the command line and PIT_BACKEND select. */
typedef struct conf_selection {
    conf_opts o;
    const char *only_backend, *only_op;
    int env_index; /* PIT_BACKEND's ":N", or -1 */
    char backend_env[32];
} conf_selection;

static int on_option(const tool_command *c, void *user, int id, const char *value)
{
    conf_selection *sel = user;
    unsigned long long n = 0;
    switch (id) {
    case 'q':
        sel->o.quick = 1;
        return 0;
    case 'v':
        sel->o.verbose = 1;
        return 0;
    case 'b':
        if (tool_find_name(value, pit_tool_backends, 3) < 0)
            return tool_usage_error(c, "--backend: unknown backend '%s' (cuda, hip, opencl)", value);
        sel->only_backend = value;
        return 0;
    case 'o':
        for (int i = 0; i < CONF_NOPS; i++)
            if (!strcmp(value, conf_ops[i].name)) {
                sel->only_op = value;
                return 0;
            }
        return tool_usage_error(c, "--op: unknown operator '%s'", value);
    default: /* 's' */
        if (tool_parse_number(c->name, "--seed", value, 0, UINT64_MAX, &n) != 0)
            return 2;
        sel->o.seed = n;
        return 0;
    }
}

/* PIT_BACKEND=name[:N], checked as the library checks it, so the suite never
 * runs on a device the library would refuse; --backend, when given, wins. */
static int read_backend_env(const tool_command *c, conf_selection *sel)
{
    const char *env = getenv("PIT_BACKEND");
    if (!env || !*env)
        return 0;
    snprintf(sel->backend_env, sizeof sel->backend_env, "%s", env);
    char *colon = strchr(sel->backend_env, ':');
    if (colon) {
        unsigned long long n = 0;
        *colon = '\0';
        if (tool_parse_number(c->name, "PIT_BACKEND's device index", colon + 1, 0, 1000000, &n) != 0)
            return 2;
        sel->env_index = (int)n;
    }
    if (tool_find_name(sel->backend_env, pit_tool_backends, 3) < 0)
        return tool_usage_error(c, "PIT_BACKEND: unknown backend '%s' (cuda, hip, opencl)", env);
    if (!sel->only_backend)
        sel->only_backend = sel->backend_env;
    return 0;
}

int pit_cmd_conformance(int argc, char **argv)
{
    static const struct option options[] = {
        {"quick", no_argument, NULL, 'q'},       {"verbose", no_argument, NULL, 'v'},
        {"backend", required_argument, NULL, 'b'}, {"op", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, 's'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const tool_command cmd = {"conformance", ":hv", options, usage, on_option};
    conf_selection sel = {.o = {.seed = 1234}, .env_index = -1};
    int rc = tool_parse_options(&cmd, argc, argv, &sel);
    if (rc >= 0)
        return rc;
    if (read_backend_env(&cmd, &sel) != 0)
        return 2;
    const conf_opts o = sel.o;
    const char *only_backend = sel.only_backend, *only_op = sel.only_op;
    int env_index = sel.env_index;

    conf_row rows[32];
    int nrows = 0, any_failed = 0, ran = 0;
    for (int b = 0; b < 3; b++) {
        const char *name = pit_tool_backends[b];
        if (only_backend && strcmp(only_backend, name) != 0)
            continue;
        int n = 0;
        pit_status s = pit_device_count(name, &n);
        if (s != PIT_SUCCESS || n == 0) {
            conf_row *r = &rows[nrows++];
            memset(r, 0, sizeof *r);
            snprintf(r->device, sizeof r->device, "%s", name);
            r->skipped_backend = 1;
            snprintf(r->reason, sizeof r->reason, "%s", s != PIT_SUCCESS ? pit_last_error() : "no device");
            printf("%s: SKIPPED: %s\n", name, r->reason);
            /* A backend the user asked for by name must be there. */
            if (only_backend)
                any_failed = 1;
            continue;
        }
        for (int i = 0; i < n && nrows < 32; i++) {
            if (env_index >= 0 && only_backend && i != env_index)
                continue;
            conf_row *r = &rows[nrows++];
            memset(r, 0, sizeof *r);
            pit_device_info d;
            pit_device_get_info(name, i, &d);
            snprintf(r->device, sizeof r->device, "%s:%d %s", name, i, d.name);
            any_failed |= run_device(name, i, &o, only_op, r->t);
            ran++;
        }
    }
    print_matrix(rows, nrows);
    int passed = 0, failed = 0, skipped = 0;
    for (int r = 0; r < nrows; r++) {
        if (rows[r].skipped_backend) {
            skipped++;
            continue;
        }
        for (int i = 0; i < CONF_NOPS; i++) {
            passed += rows[r].t[i].passed;
            failed += rows[r].t[i].failed;
            skipped += rows[r].t[i].skipped;
        }
    }
    if (!ran) {
        printf("no device ran the suite\n");
        any_failed = 1;
    }
    printf("conformance: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return any_failed || failed ? 1 : 0;
}
