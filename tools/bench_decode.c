/*
 * tools/bench_decode.c - the decode regime: x[M,K] . W[K,N] for a few tokens
 * with activation sparsity (zeros element-wise for one token; for more, the
 * same columns of x zero in every row, as contextual sparsity is). pit (the
 * automatic choice) against the dense GEMM, the memory floor
 * (1 - s) bytes(W) / read bandwidth, the L2 floor of the plan that ran and
 * the best forced choice (the decode micro-tiles 16x1 and 32x1, and dense),
 * all measured in the same run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_SETS 4

static const int64_t token_counts[] = {1, 4, 16, 64};
static const double sparsities[] = {0.5, 0.75};
#define NTOKENS 4
#define NSPARS 2

typedef struct dec_inputs {
    pit_context *ctx;
    pit_stream *stream;
    int sets;
    pit_tensor *X[MAX_SETS], *W, *C, *D; /* C: pit's output, D: the dense GEMM's */
    pit_matmul_options opt;
    pit_report last;
} dec_inputs;

typedef struct dec_result {
    pit_dtype dt;
    int64_t m, k, n;
    double sparsity;
    double pit_ms, pit_spread, dense_ms, floor_ms, l2_bytes, l2_floor_ms, err;
    double best_ms;        /* the fastest forced choice, or pit's when faster */
    const char *best_name; /* its name ("auto" for pit's) */
    int checked_ok;
    char choice[96];
    char error[256]; /* the failure's message, kept before the clean-up calls clear it */
} dec_result;

static pit_status run_pit(void *arg, int i)
{
    dec_inputs *in = arg;
    return pit_matmul(in->ctx, in->stream, in->X[i % in->sets], in->W, in->C, &in->opt, &in->last);
}

static pit_status run_dense(void *arg, int i)
{
    dec_inputs *in = arg;
    return pit_matmul_dense(in->ctx, in->stream, in->X[i % in->sets], in->W, in->D);
}

/* W[k,n], random and non-zero, converted a slab of rows at a time: at
 * 4096 x 14336 a whole copy in doubles would take 470 MB of host memory. */
static pit_status make_weight(pit_context *ctx, pit_dtype dt, int64_t k, int64_t n, pit_rng *rng, pit_tensor **W)
{
    const int64_t slab = 64;
    size_t es = pit_dtype_size(dt);
    char *buf = malloc((size_t)(k * n) * es);
    double *rows = malloc((size_t)(slab * n) * sizeof(double));
    int64_t shape[2] = {k, n};
    pit_status s = buf && rows ? pit_tensor_create(ctx, dt, 2, shape, W) : PIT_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < k && s == PIT_SUCCESS; r += slab) {
        size_t cnt = (size_t)((k - r < slab ? k - r : slab) * n);
        pit_ref_fill_random(rng, rows, cnt);
        pit_ref_from_double(dt, rows, cnt, buf + (size_t)(r * n) * es);
    }
    if (s == PIT_SUCCESS)
        s = pit_tensor_upload(*W, NULL, buf, (size_t)(k * n) * es);
    free(buf);
    free(rows);
    return s;
}

/* x[m,k] random and non-zero but for round(s k) columns (one at least stays
 * non-zero), zero in every row: for one token that is element-wise
 * sparsity. Returns the zero fraction. */
static double sparsify_columns(pit_rng *rng, double *x, int64_t m, int64_t k, double s)
{
    int64_t *cols = malloc((size_t)k * sizeof *cols), zeros = (int64_t)llround(s * (double)k);
    if (zeros > k - 1)
        zeros = k - 1;
    if (!cols)
        return -1;
    for (int64_t j = 0; j < k; j++)
        cols[j] = j;
    for (int64_t j = 0; j < zeros; j++) { /* the first `zeros` of a random permutation */
        int64_t pick = j + (int64_t)(pit_rng_next(rng) % (uint64_t)(k - j)), c = cols[pick];
        cols[pick] = cols[j];
        cols[j] = c;
        for (int64_t i = 0; i < m; i++)
            x[i * k + c] = 0.0;
    }
    free(cols);
    return (double)zeros / (double)k;
}

static pit_status make_activations(dec_inputs *in, pit_dtype dt, int64_t m, int64_t k, double sp,
                                   pit_rng *rng, double *real_sp)
{
    int64_t shape[2] = {m, k};
    size_t cnt = (size_t)(m * k);
    double *x = malloc(cnt * sizeof(double));
    pit_status s = x ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < in->sets && s == PIT_SUCCESS; i++) {
        pit_ref_fill_random(rng, x, cnt);
        *real_sp = sparsify_columns(rng, x, m, k, sp);
        s = *real_sp < 0 ? PIT_ERR_OUT_OF_MEMORY : pit_tensor_create(in->ctx, dt, 2, shape, &in->X[i]);
        if (s == PIT_SUCCESS)
            s = bench_upload(in->X[i], dt, x, cnt);
    }
    free(x);
    return s;
}

/* pit's C (NaN before the call, so a tile it leaves unwritten shows) against
 * the dense GEMM's on the same input: the relative error. */
static pit_status check_against_dense(dec_inputs *in, pit_dtype dt, int64_t m, int64_t n, double *err)
{
    size_t cnt = (size_t)(m * n);
    double *got = malloc(cnt * sizeof(double)), *ref = malloc(cnt * sizeof(double));
    pit_status s = got && ref ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < cnt && s == PIT_SUCCESS; i++)
        got[i] = NAN;
    if (s == PIT_SUCCESS)
        s = bench_upload(in->C, dt, got, cnt);
    if (s == PIT_SUCCESS)
        s = run_pit(in, 0);
    if (s == PIT_SUCCESS)
        s = run_dense(in, 0);
    if (s == PIT_SUCCESS) /* the downloads are ordered on the default stream */
        s = pit_synchronize(in->ctx, in->stream);
    if (s == PIT_SUCCESS)
        s = bench_download(in->C, dt, got, cnt);
    if (s == PIT_SUCCESS)
        s = bench_download(in->D, dt, ref, cnt);
    if (s == PIT_SUCCESS)
        *err = pit_ref_rel_error(ref, got, cnt);
    free(got);
    free(ref);
    return s;
}

/* The forced choices the automatic one is held against. */
static const bench_forced decode_alternatives[] = {
    {"k16x1", {16, 1, PIT_AXIS_K}, 0},
    {"k32x1", {32, 1, PIT_AXIS_K}, 0},
    {"dense", {0, 0, PIT_AXIS_AUTO}, 1},
};

/* Whether pit's automatic choice is within 10% of the best forced one. */
static int within_10pct(const dec_result *r)
{
    return r->pit_ms <= 1.10 * r->best_ms;
}

static void free_inputs(dec_inputs *in)
{
    for (int i = 0; i < MAX_SETS; i++)
        pit_tensor_destroy(in->X[i]);
    pit_tensor_destroy(in->C);
    pit_tensor_destroy(in->D);
    pit_stream_destroy(in->stream);
}

/* One point on its own stream (a new workload with its own plans, as in the
 * select suite): checked once, then pit and the dense GEMM timed. */
static pit_status measure_point(pit_context *ctx, const bench_opts *o, pit_tensor *W, int64_t m, double sp,
                                double read_gbps, pit_rng *rng, dec_result *r)
{
    pit_tensor_desc wd;
    pit_tensor_get_desc(W, &wd);
    const pit_dtype dt = wd.dtype;
    const int64_t k = wd.shape[0], n = wd.shape[1];
    dec_inputs in = {.ctx = ctx, .W = W, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    in.opt = pit_matmul_options_default();
    *r = (dec_result){.dt = dt, .m = m, .k = k, .n = n};
    int64_t shape[2] = {m, n};
    double real_sp = sp, spread = 0;
    pit_status s = pit_stream_create(ctx, &in.stream);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(ctx, dt, 2, shape, &in.C);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(ctx, dt, 2, shape, &in.D);
    if (s == PIT_SUCCESS)
        s = make_activations(&in, dt, m, k, sp, rng, &real_sp);
    r->sparsity = real_sp;
    if (s == PIT_SUCCESS)
        s = check_against_dense(&in, dt, m, n, &r->err);
    r->checked_ok = s == PIT_SUCCESS && r->err <= pit_ref_tolerance(dt);
    bench_opts on_stream = *o;
    on_stream.stream = in.stream;
    if (s == PIT_SUCCESS && r->checked_ok)
        s = bench_time(ctx, &on_stream, run_pit, &in, &r->pit_ms, &r->pit_spread);
    snprintf(r->choice, sizeof r->choice, "%s", in.last.choice);
    r->l2_bytes = bench_l2_bytes(&in.last, m, n, k, dt);
    if (s == PIT_SUCCESS && r->checked_ok)
        s = bench_time(ctx, &on_stream, run_dense, &in, &r->dense_ms, &spread);
    r->best_ms = INFINITY;
    r->best_name = "?";
    if (s == PIT_SUCCESS && r->checked_ok)
        bench_best_forced(ctx, &on_stream, decode_alternatives,
                          (int)(sizeof decode_alternatives / sizeof decode_alternatives[0]), &in.opt, run_pit, &in,
                          &r->best_ms, &r->best_name);
    if (r->pit_ms < r->best_ms) {
        r->best_ms = r->pit_ms;
        r->best_name = "auto";
    }
    double bytes_w = (double)(k * n) * (double)pit_dtype_size(dt);
    r->floor_ms = read_gbps > 0 ? (1.0 - real_sp) * bytes_w / (read_gbps * 1e9) * 1e3 : -1;
    r->l2_floor_ms = bench_l2_floor_ms(o, r->l2_bytes);
    if (s != PIT_SUCCESS)
        snprintf(r->error, sizeof r->error, "%s", pit_last_error());
    free_inputs(&in);
    return s;
}

static void print_row(const void *result)
{
    const dec_result *r = result;
    char floor[16] = "-", l2[16] = "-", ratio[16] = "-";
    if (r->floor_ms > 0) {
        snprintf(floor, sizeof floor, "%.4f", r->floor_ms);
        snprintf(ratio, sizeof ratio, "%.2fx", r->pit_ms / r->floor_ms);
    }
    if (r->l2_floor_ms > 0)
        snprintf(l2, sizeof l2, "%.4f", r->l2_floor_ms);
    if (!r->checked_ok) {
        printf("%-4s %3lld %6lld %6lld %4.2f | [WRONG RESULT: rel. error %.3g against the dense GEMM] %s\n",
               pit_dtype_name(r->dt), (long long)r->m, (long long)r->k, (long long)r->n, r->sparsity, r->err,
               r->choice);
        return;
    }
    printf("%-4s %3lld %6lld %6lld %4.2f | %8.4f %8.4f %8s %8s | %6.2fx %7s | %-5s %8.4f %-3s | %s\n",
           pit_dtype_name(r->dt), (long long)r->m, (long long)r->k, (long long)r->n, r->sparsity, r->pit_ms,
           r->dense_ms, floor, l2, r->dense_ms / r->pit_ms, ratio, r->best_name, r->best_ms,
           within_10pct(r) ? "yes" : "NO", r->choice);
}

static void json_row(FILE *f, const void *result, int first)
{
    const dec_result *r = result;
    fprintf(f,
            "%s    {\"dtype\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"sparsity\": %.4f, "
            "\"pit_ms\": %.6f, \"pit_spread\": %.4f, \"dense_ms\": %.6f, \"floor_ms\": %.6f, "
            "\"l2_bytes\": %.0f, \"l2_floor_ms\": %.6f, \"dense_over_pit\": %.4f, \"pit_over_floor\": %.4f, "
            "\"rel_error\": %.3g, \"correct\": %s, \"best\": \"%s\", \"best_ms\": %.6f, "
            "\"within_10pct\": %s, \"choice\": \"%s\"}",
            first ? "" : ",\n", pit_dtype_name(r->dt), (long long)r->m, (long long)r->k, (long long)r->n,
            r->sparsity, r->pit_ms, r->pit_spread, r->dense_ms, r->floor_ms, r->l2_bytes, r->l2_floor_ms,
            r->pit_ms > 0 ? r->dense_ms / r->pit_ms : 0.0, r->floor_ms > 0 ? r->pit_ms / r->floor_ms : 0.0,
            r->err, r->checked_ok ? "true" : "false", r->best_name, isfinite(r->best_ms) ? r->best_ms : -1.0,
            r->checked_ok && within_10pct(r) ? "true" : "false", r->choice);
}

int bench_decode_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    const int64_t width = o->size, hidden = o->size * 7 / 2;
    const int64_t shapes[2][2] = {{width, hidden}, {hidden, width}}; /* (K, N): up and down */
    double gbps = 0; /* the read bandwidth: a copy of a 16-bit W */
    pit_status cs = bench_measure_memory(ctx, o, (size_t)(width * hidden) * 2, &gbps);
    char l2[96];
    printf("\n== decode: x[M,K] . W[K,N], memory floor (1 - s) bytes(W) at the copy bandwidth %.1f GB/s "
           "(read+write)%s, %s\n",
           gbps, cs == PIT_SUCCESS ? "" : " (unavailable)", bench_l2_phrase(o, l2, sizeof l2));
    pit_dtype dts[3];
    /* bf16 and f16, and f32 on a device that lacks either */
    const int defaults =
        (1 << PIT_BF16) | (1 << PIT_F16) | (!d.has_f16_storage || !d.has_bf16 ? 1 << PIT_F32 : 0);
    int ndt = bench_suite_dtypes(o, &d, "decode", defaults, dts, json);
    printf("%-4s %3s %6s %6s %4s | %8s %8s %8s %8s | %7s %7s | %-5s %8s %-3s | %s\n", "dt", "M", "K", "N", "s",
           "pit ms", "dense ms", "floor", "L2 floor", "dns/pit", "pit/flr", "best", "best ms", "10%", "choice");
    if (json)
        fprintf(json, "  \"decode_copy_gbps\": %.3f,\n  \"decode\": [\n", gbps);
    int total = ndt * 2 * NTOKENS * NSPARS, done = 0, good = 0, points = 0;
    bench_table tab = {"decode", json, print_row, json_row, 0, 0};
    pit_rng rng;
    pit_rng_seed(&rng, 4242);
    for (int t = 0; t < ndt; t++)
        for (int sh = 0; sh < 2; sh++) {
            pit_tensor *W = NULL;
            pit_status ws = make_weight(ctx, dts[t], shapes[sh][0], shapes[sh][1], &rng, &W);
            if (ws != PIT_SUCCESS) {
                fprintf(stderr, "pit bench decode: %s W %lldx%lld: %s: %s\n", pit_dtype_name(dts[t]),
                        (long long)shapes[sh][0], (long long)shapes[sh][1], pit_status_string(ws),
                        pit_last_error());
                pit_tensor_destroy(W);
                tab.failed = 1;
                done += NTOKENS * NSPARS;
                continue;
            }
            for (int mi = 0; mi < NTOKENS; mi++)
                for (int si = 0; si < NSPARS; si++) {
                    char what[64];
                    snprintf(what, sizeof what, "%s M=%lld K=%lld s=%.2f", pit_dtype_name(dts[t]),
                             (long long)token_counts[mi], (long long)shapes[sh][0], sparsities[si]);
                    bench_progress(what, done++, total);
                    dec_result r;
                    pit_status s = measure_point(ctx, o, W, token_counts[mi], sparsities[si], gbps, &rng, &r);
                    bench_table_add(&tab, what, s, r.error, r.checked_ok, &r);
                    points += s == PIT_SUCCESS && r.checked_ok;
                    good += s == PIT_SUCCESS && r.checked_ok && within_10pct(&r);
                }
            pit_tensor_destroy(W);
        }
    bench_progress("done", total, total);
    printf("automatic choice within 10%% of the best forced one (k16x1, k32x1, dense) at %d of %d points (%.0f%%)\n",
           good, points, points ? 100.0 * good / points : 0.0);
    if (json)
        fprintf(json, "\n  ],\n  \"decode_within_10pct\": {\"good\": %d, \"points\": %d},\n", good, points);
    return tab.failed;
}
