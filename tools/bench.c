/*
 * tools/bench.c - `pit bench`: the paper's micro-benchmarks against the vendor
 * baselines measured in the same run, as a table, JSON and a plot.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tool.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pit bench [--suite matmul|convert|select|layers|decode|moe|attention|all] [--quick]\n"
            "                 [--size N] [--dtype f32,f16,bf16] [--repeats R] [--json FILE]\n"
            "                 [--plot FILE.png] [--explain] [--only KIND|MODEL]\n"
            "  matmul   M=N=K sparse matmul, micro-tiles 32x1, 1x64, 32x64 at sparsity\n"
            "           0.5/0.9/0.95/0.99, against dense, the vendor sparse library, the\n"
            "           memory floor and the L2 floor of the plan that ran\n"
            "  convert  detection+index against the vendor's dense->sparse conversion\n"
            "  select   host cost of a selection and the cost model's accuracy\n"
            "  layers   MoE, sparse attention and ReLU FFN layers (pit's operator) against\n"
            "           the dense way of computing each layer\n"
            "  decode   x[M,K] . W[K,N] for M = 1, 4, 16, 64 tokens, (K, N) = (d, 3.5d) and\n"
            "           (3.5d, d) with d the size, 50%% and 75%% of x zero (the same columns\n"
            "           in every row), bf16 and f16 (f32 too where one is missing), against\n"
            "           dense, the memory floor (1 - s) bytes(W) / bandwidth and the L2 floor\n"
            "  moe      pit_moe_ffn (SwiGLU) at the shapes of MoE models (Mixtral, fine-grained\n"
            "           128 experts top-8, Qwen-MoE, DeepSeek; 8192 and 512 tokens), skewed\n"
            "           top-k routing, bf16 (--dtype for others), against dense GEMMs of the\n"
            "           same FLOPs, the per-expert loop of dense GEMMs and the memory floor, and\n"
            "           pit_moe_ffn_backward (every gradient) against the forward;\n"
            "           its shapes are the models' (--size does not change them);\n"
            "           --only MODEL (mixtral-8x7b, qwen3-30b-a3b, ...) runs that model's points\n"
            "  attention pit_attention on masks new every call: a 256-key window with 16\n"
            "           global tokens (element mask), 128x128 blocks kept at 10%%, causal\n"
            "           prefill with grouped-query heads, decode over a long KV cache with\n"
            "           10%% of 64-key blocks kept; bf16 (--dtype for others), against the\n"
            "           floor (mask bytes + FLOPs at FlashAttention-3's H100 rate; decode:\n"
            "           the kept K/V bytes), and pit_attention_backward (every gradient) against\n"
            "           the forward but at decode; the shapes are models' (--size does not change\n"
            "           them); --only window|blocks|causal|decode runs that kind's points alone\n"
            "On a CPU device the default is --quick (size 256).\n");
}

void bench_progress(const char *what, int done, int total)
{
    if (!isatty(2))
        return;
    int width = 30, filled = total ? done * width / total : width;
    fprintf(stderr, "\r[%.*s%*s] %3d/%-3d %-40.40s", filled, "##############################",
            width - filled, "", done, total, what);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0.0;
}

double bench_spread(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (n < 3 || v[n / 2] <= 0)
        return 0.0;
    return (v[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] - v[n / 10]) / v[n / 2];
}

pit_status bench_time(pit_context *ctx, const bench_opts *o, bench_fn fn, void *arg, double *median_ms,
                      double *spread)
{
    for (int i = 0; i < o->warmup; i++) {
        pit_status w = fn(arg, i);
        if (w != PIT_SUCCESS)
            return w;
    }
    double *ms = calloc((size_t)o->repeats, sizeof *ms);
    if (!ms)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_status s = PIT_SUCCESS;
    for (int i = 0; i < o->repeats && s == PIT_SUCCESS; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        s = pit_event_record(ctx, o->stream, &e0);
        if (s == PIT_SUCCESS)
            s = fn(arg, i);
        if (s == PIT_SUCCESS)
            s = pit_event_record(ctx, o->stream, &e1);
        if (s == PIT_SUCCESS)
            s = pit_event_elapsed_ms(e0, e1, &ms[i]);
        pit_event_destroy(e0);
        pit_event_destroy(e1);
    }
    if (s == PIT_SUCCESS) {
        *spread = bench_spread(ms, o->repeats);
        *median_ms = bench_median(ms, o->repeats);
    }
    free(ms);
    return s;
}

void bench_best_forced(pit_context *ctx, const bench_opts *o, const bench_forced *alts, int n,
                       pit_matmul_options *opt, bench_fn fn, void *arg, double *best_ms, const char **best_name)
{
    *best_ms = INFINITY;
    *best_name = "?";
    for (int a = 0; a < n; a++) {
        *opt = pit_matmul_options_default();
        opt->microtile = alts[a].t;
        opt->force_dense = alts[a].dense;
        double ms = 0, spread = 0;
        if (bench_time(ctx, o, fn, arg, &ms, &spread) == PIT_SUCCESS && ms < *best_ms) {
            *best_ms = ms;
            *best_name = alts[a].name;
        }
    }
    *opt = pit_matmul_options_default();
}

pit_status bench_upload(pit_tensor *t, pit_dtype dt, const double *x, size_t n)
{
    void *buf = malloc(n * pit_dtype_size(dt));
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_ref_from_double(dt, x, n, buf);
    pit_status s = pit_tensor_upload(t, NULL, buf, n * pit_dtype_size(dt));
    free(buf);
    return s;
}

pit_status bench_download(const pit_tensor *t, pit_dtype dt, double *x, size_t n)
{
    void *buf = malloc(n * pit_dtype_size(dt));
    if (!buf)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_status s = pit_tensor_download(t, NULL, buf, n * pit_dtype_size(dt));
    if (s == PIT_SUCCESS)
        pit_ref_to_double(dt, buf, n, x);
    free(buf);
    return s;
}

void bench_round(pit_dtype dt, double *x, size_t n)
{
    uint32_t tmp;
    for (size_t i = 0; i < n; i++) {
        pit_ref_from_double(dt, &x[i], 1, &tmp);
        pit_ref_to_double(dt, &tmp, 1, &x[i]);
    }
}

void bench_table_add(bench_table *t, const char *what, pit_status s, const char *error, int ok,
                     const void *result)
{
    if (s != PIT_SUCCESS) {
        fprintf(stderr, "\npit bench %s: %s: %s\n", t->suite, what, error);
        t->failed = 1;
        return;
    }
    t->print(result);
    fflush(stdout);
    t->failed |= !ok;
    if (t->json)
        t->json_row(t->json, result, !t->written++);
}

pit_status bench_note_failure(char *buf, size_t size, const char *call, pit_status s)
{
    snprintf(buf, size, "%s: %s: %s", call, pit_status_string(s),
             s == PIT_ERR_OUT_OF_MEMORY && !pit_last_error()[0] ? "out of host memory" : pit_last_error());
    return s;
}

pit_status bench_host_ok(int all_allocated)
{
    return all_allocated ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
}

int64_t bench_sample_count(const bench_opts *o, int64_t rows, int64_t full)
{
    return o->quick || rows < full ? rows : full;
}

int64_t bench_sample_row(const bench_opts *o, int64_t rows, int64_t full, int64_t i)
{
    return o->quick || rows < full ? i : (i * 7919) % rows;
}

int bench_suite_dtypes(const bench_opts *o, const pit_device_info *d, const char *suite, int defaults,
                       pit_dtype *out, FILE *json)
{
    const int has[3] = {1, d->has_f16_storage, d->has_bf16};
    const int want = o->dtype_given ? o->dtype_mask : defaults;
    const pit_dtype order[3] = {PIT_BF16, PIT_F16, PIT_F32};
    int n = 0;
    if (json)
        fprintf(json, "  \"%s_skipped\": [", suite);
    for (int i = 0, skipped = 0; i < 3; i++) {
        if (!(want & (1 << order[i])))
            continue;
        if (has[order[i]]) {
            out[n++] = order[i];
            continue;
        }
        printf("%s: %s skipped: %s has no %s\n", suite, pit_dtype_name(order[i]), d->name,
               order[i] == PIT_F16 ? "f16 arithmetic" : "bf16 storage");
        if (json)
            fprintf(json, "%s\"%s\"", skipped++ ? ", " : "", pit_dtype_name(order[i]));
    }
    if (json)
        fprintf(json, "],\n");
    return n;
}

static const char *const dtype_names[] = {"f32", "f16", "bf16"};
static const pit_dtype dtype_values[] = {PIT_F32, PIT_F16, PIT_BF16};
static const char *const suite_names[] = {"matmul", "convert", "select", "layers", "decode", "moe", "attention", "all"};
#define BENCH_NSUITES ((int)(sizeof suite_names / sizeof suite_names[0]))

/* A comma-separated list of dtype names into a mask of 1 << pit_dtype. */
static int parse_dtypes(const tool_command *c, const char *list, int *mask)
{
    *mask = 0;
    for (const char *tok = list;; tok++) {
        size_t len = strcspn(tok, ",");
        char name[16];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), tok);
        int i = len < sizeof name ? tool_find_name(name, dtype_names, 3) : -1;
        if (i < 0)
            return tool_usage_error(c, "--dtype: '%s' is not a list of f32, f16, bf16", list);
        *mask |= 1 << dtype_values[i];
        tok += len;
        if (!*tok)
            return 0;
    }
}

static int on_option(const tool_command *c, void *user, int id, const char *value)
{
    bench_opts *o = user;
    int size = 0;
    switch (id) {
    case 'q':
        o->quick = 1;
        return 0;
    case 'e':
        o->explain = 1;
        return 0;
    case 's':
        if (tool_find_name(value, suite_names, BENCH_NSUITES) < 0)
            return tool_usage_error(c, "--suite: unknown suite '%s'", value);
        o->suite = value;
        return 0;
    case 'n':
        if (tool_int_option(c, "--size", value, 1, 65536, &size) != 0)
            return 2;
        o->size = size;
        return 0;
    case 'r':
        return tool_int_option(c, "--repeats", value, 1, 100000, &o->repeats);
    case 'j':
        o->json_path = value;
        return 0;
    case 'p':
        o->plot_path = value;
        return 0;
    case 'o':
        if (!bench_attention_has_kind(value) && !bench_moe_has_model(value)) {
            char msg[256];
            snprintf(msg, sizeof msg, "'%s' is neither an attention kind (window, blocks, causal, decode) nor a "
                     "MoE model (%s)", value, bench_moe_model_list());
            return tool_usage_error(c, "--only: %s", msg);
        }
        o->only = value;
        return 0;
    default: /* 'd' */
        return parse_dtypes(c, value, &o->dtype_mask);
    }
}

/* -1 when the bench goes on, else the exit code. */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option options[] = {
        {"suite", required_argument, NULL, 's'}, {"quick", no_argument, NULL, 'q'},
        {"size", required_argument, NULL, 'n'},  {"dtype", required_argument, NULL, 'd'},
        {"repeats", required_argument, NULL, 'r'}, {"json", required_argument, NULL, 'j'},
        {"plot", required_argument, NULL, 'p'},  {"explain", no_argument, NULL, 'e'},
        {"only", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    const tool_command cmd = {"bench", ":h", options, usage, on_option};
    return tool_parse_options(&cmd, argc, argv, o);
}

static void write_header(FILE *json, const pit_device_info *d, const bench_opts *o)
{
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(json, "{\n  \"pit_version\": \"%d.%d.%d\",\n  \"commit\": \"%s\",\n  \"date\": \"%s\",\n",
            PIT_VERSION_MAJOR, PIT_VERSION_MINOR, PIT_VERSION_PATCH,
            getenv("PIT_COMMIT") ? getenv("PIT_COMMIT") : "unknown", when);
    fprintf(json, "  \"device\": {\"backend\": \"%s\", \"name\": \"%s\", \"vendor\": \"%s\", \"arch\": \"%s\", "
                  "\"driver\": \"%s\", \"compute_units\": %d},\n",
            d->backend, d->name, d->vendor, d->arch, d->driver_version, d->compute_units);
    fprintf(json, "  \"options\": {\"size\": %lld, \"repeats\": %d, \"warmup\": %d, \"sets\": %d, "
                  "\"quick\": %d},\n",
            (long long)o->size, o->repeats, o->warmup, o->sets, o->quick);
    if (o->l2_bytes)
        fprintf(json, "  \"l2\": {\"copy_bytes\": %zu, \"gbps\": %.3f},\n", o->l2_bytes, o->l2_gbps);
}

/* Once a run, for the suites whose tables have an L2 floor. */
static void measure_l2(pit_context *ctx, bench_opts *o)
{
    int all = !strcmp(o->suite, "all");
    if (!all && strcmp(o->suite, "matmul") && strcmp(o->suite, "decode"))
        return;
    pit_status s = bench_measure_l2(ctx, o, &o->l2_gbps, &o->l2_bytes);
    if (s != PIT_SUCCESS)
        fprintf(stderr, "pit bench: no L2 floor: %s: %s\n", pit_status_string(s), pit_last_error());
}

/* --only names points of the attention suite (a kind) or of the moe suite
 * (a model): 2 where the suite asked has none of that name. */
static int check_only(const bench_opts *o)
{
    if (!o->only || !strcmp(o->suite, "all"))
        return 0;
    const int kind = bench_attention_has_kind(o->only);
    if (!strcmp(o->suite, kind ? "attention" : "moe"))
        return 0;
    fprintf(stderr, "pit bench: --only %s is %s, not one of the %s suite's\n", o->only,
            kind ? "an attention kind (--suite attention or all)" : "a MoE model (--suite moe or all)", o->suite);
    return 2;
}

int pit_cmd_bench(int argc, char **argv)
{
    bench_opts o = {.suite = "matmul", .dtype_mask = 0};
    int pr = parse_args(argc, argv, &o);
    if (pr >= 0)
        return pr;
    if (check_only(&o))
        return 2;
    pit_context *ctx = NULL;
    pit_status s = pit_context_create(NULL, -1, &ctx);
    if (s != PIT_SUCCESS)
        return pit_tool_fail("no device to bench", s);
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    int cpu = strstr(d.arch, "cpu") != NULL;
    if (cpu && !o.size && !o.quick) {
        fprintf(stderr, "pit bench: %s is a CPU device: using --quick\n", d.name);
        o.quick = 1;
    }
    if (!o.size)
        o.size = o.quick ? 256 : 4096;
    if (!o.repeats)
        o.repeats = o.quick ? 5 : 20;
    o.warmup = o.quick ? 1 : 3;
    o.sets = o.quick ? 2 : 3;
    o.dtype_given = o.dtype_mask != 0;
    if (!o.dtype_mask)
        o.dtype_mask = (1 << PIT_F32) | (d.has_f16_storage ? 1 << PIT_F16 : 0) |
                       (d.has_bf16 ? 1 << PIT_BF16 : 0);
    printf("pit bench on %s:%d %s (%s, driver %s), size %lld, median of %d\n", d.backend,
           d.device_index, d.name, d.arch, d.driver_version, (long long)o.size, o.repeats);
    measure_l2(ctx, &o);

    FILE *json = NULL;
    if (o.json_path) {
        json = fopen(o.json_path, "w");
        if (!json) {
            fprintf(stderr, "pit bench: cannot write %s\n", o.json_path);
            pit_context_destroy(ctx);
            return 1;
        }
        write_header(json, &d, &o);
    }
    int all = !strcmp(o.suite, "all"), rc = 0;
    if (all || !strcmp(o.suite, "matmul"))
        rc |= bench_matmul_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "convert"))
        rc |= bench_convert_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "select"))
        rc |= bench_select_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "layers"))
        rc |= bench_layers_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "decode"))
        rc |= bench_decode_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "moe"))
        rc |= bench_moe_suite(ctx, &o, json);
    if (all || !strcmp(o.suite, "attention"))
        rc |= bench_attention_suite(ctx, &o, json);
    if (json) {
        fprintf(json, "  \"end\": true\n}\n");
        fclose(json);
    }
    pit_context_destroy(ctx);
    return rc;
}
