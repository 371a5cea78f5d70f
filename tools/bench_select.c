/*
 * tools/bench_select.c - the `convert` suite (detection + index against the
 * vendor's dense->sparse conversion) and the `select` suite (host cost of
 * Algorithm 1, and whether the cost model picks the best measured choice).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const double sparsities[] = {0.5, 0.9, 0.95, 0.99};

typedef struct one_input {
    pit_context *ctx;
    pit_stream *stream;
    pit_tensor *A, *B, *C;
    pit_matmul_options opt;
    pit_report rep;
} one_input;

static pit_status run_one(void *arg, int i)
{
    (void)i;
    one_input *in = arg;
    return pit_matmul(in->ctx, in->stream, in->A, in->B, in->C, &in->opt, &in->rep);
}

static pit_status make_one(pit_context *ctx, pit_dtype dt, int64_t n, int tr, int tc, double sp,
                           uint64_t seed, one_input *in)
{
    memset(in, 0, sizeof *in);
    in->ctx = ctx;
    in->opt = pit_matmul_options_default();
    int64_t shape[2] = {n, n};
    size_t cnt = (size_t)(n * n), es = pit_dtype_size(dt);
    double *x = malloc(cnt * sizeof(double));
    void *buf = malloc(cnt * es);
    pit_status s = x && buf ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
    pit_rng rng;
    pit_rng_seed(&rng, seed);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(ctx, dt, 2, shape, &in->A);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(ctx, dt, 2, shape, &in->B);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(ctx, dt, 2, shape, &in->C);
    if (s == PIT_SUCCESS) {
        pit_ref_fill_random(&rng, x, cnt);
        pit_ref_sparsify_tiles(&rng, x, 1, n, n, tr, tc, 0, 0, sp);
        pit_ref_from_double(dt, x, cnt, buf);
        s = pit_tensor_upload(in->A, NULL, buf, cnt * es);
    }
    if (s == PIT_SUCCESS) {
        pit_ref_fill_random(&rng, x, cnt);
        pit_ref_from_double(dt, x, cnt, buf);
        s = pit_tensor_upload(in->B, NULL, buf, cnt * es);
    }
    free(x);
    free(buf);
    return s;
}

static void free_one(one_input *in)
{
    pit_tensor_destroy(in->A);
    pit_tensor_destroy(in->B);
    pit_tensor_destroy(in->C);
}

int bench_convert_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    /* f16 where the device has it, unless --dtype leaves f16 out */
    pit_dtype dt = d.has_f16_storage && (o->dtype_mask & (1 << PIT_F16)) ? PIT_F16
                   : (o->dtype_mask & (1 << PIT_F32)) || !d.has_bf16 ? PIT_F32
                                                                     : PIT_BF16;
    printf("\n== convert: pit detection + index (all candidates, one pass) against the vendor's "
           "dense->sparse conversion, %s %lldx%lld\n", pit_dtype_name(dt), (long long)o->size,
           (long long)o->size);
    printf("%5s | %10s | %10s %10s %10s | %8s %8s %8s\n", "s", "pit ms", "CSR ms", "BSR16 ms", "BSR32 ms",
           "CSR/pit", "B16/pit", "B32/pit");
    if (json)
        fprintf(json, "  \"convert\": [\n");
    int failed = 0;
    for (int si = 0; si < 4; si++) {
        one_input in;
        pit_status s = make_one(ctx, dt, o->size, 1, 1, sparsities[si], 7 + (uint64_t)si, &in);
        double det[9], pit_ms = 0, vend[3] = {-1, -1, -1};
        int np = o->repeats < 9 ? o->repeats : 9;
        in.opt.profile = 1;
        for (int i = 0; i < np && s == PIT_SUCCESS; i++) {
            s = run_one(&in, i);
            det[i] = in.rep.detect_ms;
        }
        if (s == PIT_SUCCESS)
            pit_ms = bench_median(det, np);
        const int blocks[3] = {1, 16, 32};
        for (int b = 0; b < 3 && s == PIT_SUCCESS; b++) {
            double ms[9];
            pit_status vs = PIT_SUCCESS;
            int nv = o->quick ? 2 : 5;
            for (int i = 0; i < nv && vs == PIT_SUCCESS; i++)
                vs = pit_vendor_sparse_convert(ctx, NULL, in.A, blocks[b], &ms[i]);
            if (vs == PIT_SUCCESS)
                vend[b] = bench_median(ms, nv);
            else if (si == 0) /* why the column shows "-", once */
                fprintf(stderr, "pit bench convert: vendor block %d: %s: %s\n", blocks[b],
                        pit_status_string(vs), pit_last_error());
        }
        if (s != PIT_SUCCESS) {
            fprintf(stderr, "pit bench convert: %s: %s\n", pit_status_string(s), pit_last_error());
            failed = 1;
        } else {
            printf("%5.2f | %10.4f |", sparsities[si], pit_ms);
            for (int b = 0; b < 3; b++)
                vend[b] > 0 ? printf(" %10.4f", vend[b]) : printf(" %10s", "-");
            printf(" |");
            for (int b = 0; b < 3; b++)
                vend[b] > 0 ? printf(" %7.2fx", vend[b] / pit_ms) : printf(" %8s", "-");
            printf("\n");
            if (json)
                fprintf(json, "    {\"sparsity\": %.2f, \"pit_detect_ms\": %.6f, \"csr_ms\": %.6f, "
                              "\"bsr16_ms\": %.6f, \"bsr32_ms\": %.6f}%s\n",
                        sparsities[si], pit_ms, vend[0], vend[1], vend[2], si == 3 ? "" : ",");
        }
        free_one(&in);
    }
    if (json)
        fprintf(json, "  ],\n");
    return failed;
}

/* For each grid point: the automatic choice's measured time against every
 * forced alternative; the choice is good when within 10% of the best. */
int bench_select_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    const bench_forced alts[] = {
        {"k32x1", {32, 1, PIT_AXIS_K}, 0}, {"m1x64", {1, 64, PIT_AXIS_M}, 0},
        {"k32x64", {32, 64, PIT_AXIS_K}, 0}, {"dense", {0, 0, PIT_AXIS_AUTO}, 1},
    };
    const struct { const char *name; int tr, tc; } grans[] = {{"32x1", 32, 1}, {"1x64", 1, 64}, {"32x64", 32, 64}};
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    pit_dtype dt = d.has_f16_storage ? PIT_F16 : PIT_F32;
    printf("\n== select: cost model accuracy, %s %lld^3 (auto choice vs best measured)\n",
           pit_dtype_name(dt), (long long)o->size);
    printf("%-6s %5s | %-30s %9s %9s | %-8s %9s | %s\n", "gran", "s", "auto choice", "pred ms", "meas ms",
           "best", "best ms", "within 10%");
    if (json)
        fprintf(json, "  \"select\": [\n");
    int good = 0, points = 0, failed = 0;
    double sel_us[64];
    int nsel = 0;
    bench_opts quiet = *o;
    quiet.repeats = o->quick ? 3 : 10;
    for (int g = 0; g < 3; g++)
        for (int si = 0; si < 4; si++) {
            one_input in;
            pit_status s = make_one(ctx, dt, o->size, grans[g].tr, grans[g].tc, sparsities[si],
                                    100 + (uint64_t)(g * 4 + si), &in);
            /* Each point is a new workload: its own stream, so its own plans
             * (a plan settled on the previous point would keep that point's
             * choice for up to PIT_REDETECT_EVERY calls, by design). */
            pit_stream *stream = NULL;
            if (s == PIT_SUCCESS)
                s = pit_stream_create(ctx, &stream);
            in.stream = quiet.stream = stream;
            double auto_ms = 0, spread = 0, best = INFINITY;
            const char *best_name = "?";
            if (s == PIT_SUCCESS) {
                in.opt.profile = 1;
                s = run_one(&in, 0); /* first call on a new plan: selection runs */
                in.opt.profile = 0;
                if (nsel < 64)
                    sel_us[nsel++] = in.rep.select_us;
            }
            pit_report auto_rep = in.rep;
            if (s == PIT_SUCCESS)
                s = bench_time(ctx, &quiet, run_one, &in, &auto_ms, &spread);
            if (s == PIT_SUCCESS)
                bench_best_forced(ctx, &quiet, alts, (int)(sizeof alts / sizeof alts[0]), &in.opt, run_one, &in,
                                  &best, &best_name);
            if (s != PIT_SUCCESS) {
                fprintf(stderr, "pit bench select: %s: %s\n", pit_status_string(s), pit_last_error());
                failed = 1;
                free_one(&in);
                pit_stream_destroy(stream);
                continue;
            }
            if (auto_ms < best)
                best = auto_ms;
            int ok = auto_ms <= 1.10 * best;
            good += ok;
            points++;
            printf("%-6s %5.2f | %-30.30s %9.3f %9.3f | %-8s %9.3f | %s\n", grans[g].name, sparsities[si],
                   auto_rep.choice, auto_rep.predicted_us * 1e-3, auto_ms, best_name, best, ok ? "yes" : "NO");
            if (json)
                fprintf(json, "    {\"granularity\": \"%s\", \"sparsity\": %.2f, \"choice\": \"%s\", "
                              "\"predicted_ms\": %.6f, \"measured_ms\": %.6f, \"best\": \"%s\", "
                              "\"best_ms\": %.6f, \"within_10pct\": %s},\n",
                        grans[g].name, sparsities[si], auto_rep.choice, auto_rep.predicted_us * 1e-3, auto_ms,
                        best_name, best, ok ? "true" : "false");
            free_one(&in);
            pit_stream_destroy(stream);
        }
    double med = nsel ? bench_median(sel_us, nsel) : 0;
    printf("cost model: best-or-within-10%% at %d of %d points (%.0f%%); selection host time median %.1f us\n",
           good, points, points ? 100.0 * good / points : 0.0, med);
    if (json)
        fprintf(json, "    {\"summary\": true, \"good\": %d, \"points\": %d, \"select_us_median\": %.3f}\n  ],\n",
                good, points, med);
    return failed;
}
