/*
 * tools/bench_matmul.c - the paper's sparse matmul micro-benchmark: for each
 * dtype, micro-tile granularity and sparsity, pit end to end and its parts,
 * the dense vendor GEMM, the vendor sparse library (conversion included) and
 * the floor bytes(A)/copy bandwidth + (1 - s) x dense, all in the same run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_SETS 4

typedef struct gran { const char *name; int tr, tc; } gran;
static const gran grans[] = {{"32x1", 32, 1}, {"1x64", 1, 64}, {"32x64", 32, 64}};
static const double sparsities[] = {0.5, 0.9, 0.95, 0.99};
#define NGRAN 3
#define NSPARS 4

typedef struct mm_inputs {
    pit_context *ctx;
    int sets;
    pit_tensor *A[MAX_SETS], *B[MAX_SETS], *C;
    pit_matmul_options opt;
    pit_report last;
} mm_inputs;

typedef struct mm_result {
    pit_dtype dt;
    const char *gran;
    double sparsity, real_sparsity;
    double pit_ms, pit_spread, detect_ms, select_us, kernel_ms, predicted_us;
    double dense_ms, vendor_ms, vendor_convert_ms, floor_ms, err;
    double l2_bytes, l2_floor_ms; /* the plan's bytes through L2, at the run's L2 bandwidth (-1: unknown) */
    double vendor_err; /* the vendor library's C against the same reference (-1: not run) */
    char choice[96];
    char error[256]; /* the failure's message, kept before the clean-up calls clear it */
    int checked_ok;
} mm_result;

static pit_status run_pit(void *arg, int i)
{
    mm_inputs *in = arg;
    return pit_matmul(in->ctx, NULL, in->A[i % in->sets], in->B[i % in->sets], in->C, &in->opt,
                      &in->last);
}

static pit_status run_dense(void *arg, int i)
{
    mm_inputs *in = arg;
    return pit_matmul_dense(in->ctx, NULL, in->A[i % in->sets], in->B[i % in->sets], in->C);
}

/* Checks sampled rows of C against the double reference (a full 4096^3
 * reference would take minutes on the host). */
static double check_rows(pit_tensor *C, pit_dtype dt, const double *a, const double *b, int64_t n,
                         int64_t rows)
{
    size_t es = pit_dtype_size(dt);
    void *buf = malloc((size_t)(n * n) * es);
    double *got = malloc((size_t)(16 * n) * sizeof(double)), *ref = calloc((size_t)(16 * n), sizeof(double));
    double err = INFINITY;
    if (buf && got && ref && pit_tensor_download(C, NULL, buf, (size_t)(n * n) * es) == PIT_SUCCESS) {
        int nsample = rows < 16 ? (int)rows : 16;
        for (int r = 0; r < nsample; r++) {
            int64_t row = (r * 7919) % rows;
            pit_ref_to_double(dt, (char *)buf + (size_t)(row * n) * es, (size_t)n, got + r * n);
            for (int64_t k = 0; k < n; k++) {
                double av = a[row * n + k];
                if (av != 0.0)
                    for (int64_t j = 0; j < n; j++)
                        ref[r * n + j] += av * b[k * n + j];
            }
        }
        err = pit_ref_rel_error(ref, got, (size_t)(nsample * n));
    }
    free(buf);
    free(got);
    free(ref);
    return err;
}

static void free_inputs(mm_inputs *in)
{
    for (int i = 0; i < MAX_SETS; i++) {
        pit_tensor_destroy(in->A[i]);
        pit_tensor_destroy(in->B[i]);
    }
    pit_tensor_destroy(in->C);
    memset(in->A, 0, sizeof in->A);
    memset(in->B, 0, sizeof in->B);
    in->C = NULL;
}

/* Builds the rotated input sets; keeps set 0 on the host for the check. */
static pit_status make_inputs(mm_inputs *in, pit_dtype dt, int64_t n, const gran *g, double sp,
                              pit_rng *rng, double **a0, double **b0, double *real_sp)
{
    int64_t shape[2] = {n, n};
    size_t cnt = (size_t)(n * n);
    pit_status s = pit_tensor_create(in->ctx, dt, 2, shape, &in->C);
    for (int i = 0; i < in->sets && s == PIT_SUCCESS; i++) {
        double *a = malloc(cnt * sizeof(double)), *b = malloc(cnt * sizeof(double));
        if (!a || !b) {
            free(a);
            free(b);
            return PIT_ERR_OUT_OF_MEMORY;
        }
        pit_ref_fill_random(rng, a, cnt);
        pit_ref_fill_random(rng, b, cnt);
        double z = pit_ref_sparsify_tiles(rng, a, 1, n, n, g->tr, g->tc, 0, 0, sp);
        s = pit_tensor_create(in->ctx, dt, 2, shape, &in->A[i]);
        if (s == PIT_SUCCESS)
            s = pit_tensor_create(in->ctx, dt, 2, shape, &in->B[i]);
        if (s == PIT_SUCCESS)
            s = bench_upload(in->A[i], dt, a, cnt);
        if (s == PIT_SUCCESS)
            s = bench_upload(in->B[i], dt, b, cnt);
        if (i == 0) {
            *a0 = a;
            *b0 = b;
            *real_sp = z;
        } else {
            free(a);
            free(b);
        }
    }
    return s;
}

static pit_status measure_point(pit_context *ctx, const bench_opts *o, pit_dtype dt, const gran *g,
                                double sp, double copy_gbps, pit_rng *rng, mm_result *r)
{
    mm_inputs in = {.ctx = ctx, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    in.opt = pit_matmul_options_default();
    int64_t n = o->size;
    double *a0 = NULL, *b0 = NULL;
    memset(r, 0, sizeof *r);
    r->dt = dt;
    r->gran = g->name;
    r->sparsity = sp;
    pit_status s = make_inputs(&in, dt, n, g, sp, rng, &a0, &b0, &r->real_sparsity);
    if (s == PIT_SUCCESS) {
        s = run_pit(&in, 0);
        if (s == PIT_SUCCESS) {
            bench_round(dt, a0, (size_t)(n * n));
            bench_round(dt, b0, (size_t)(n * n));
            r->err = check_rows(in.C, dt, a0, b0, n, n);
            r->checked_ok = r->err <= pit_ref_tolerance(dt);
        }
    }
    r->vendor_err = -1;
    double spread = 0;
    if (s == PIT_SUCCESS)
        s = bench_time(ctx, o, run_pit, &in, &r->pit_ms, &r->pit_spread);
    snprintf(r->choice, sizeof r->choice, "%s", in.last.choice);
    r->predicted_us = in.last.predicted_us;
    r->l2_bytes = bench_l2_bytes(&in.last, n, n, n, dt); /* the plan the choice names */
    r->l2_floor_ms = bench_l2_floor_ms(o, r->l2_bytes);
    /* The parts, from profiled calls (each synchronises). */
    if (s == PIT_SUCCESS) {
        int np = o->repeats < 7 ? o->repeats : 7;
        double det[7], sel[7], ker[7];
        in.opt.profile = 1;
        for (int i = 0; i < np && s == PIT_SUCCESS; i++) {
            s = run_pit(&in, i);
            det[i] = in.last.detect_ms;
            sel[i] = in.last.select_us;
            ker[i] = in.last.kernel_ms;
        }
        in.opt.profile = 0;
        r->detect_ms = bench_median(det, np);
        r->select_us = bench_median(sel, np);
        r->kernel_ms = bench_median(ker, np);
    }
    if (s == PIT_SUCCESS)
        s = bench_time(ctx, o, run_dense, &in, &r->dense_ms, &spread);
    if (s == PIT_SUCCESS) {
        double conv = 0, comp = 0;
        const char *name = NULL;
        pit_status vs = pit_vendor_sparse_matmul(ctx, NULL, in.A[0], in.B[0], in.C, &conv, &comp, &name);
        if (vs == PIT_SUCCESS) /* the baseline must compute the same C (set 0, as pit's check) */
            r->vendor_err = check_rows(in.C, dt, a0, b0, n, n);
        if (vs == PIT_SUCCESS) {
            double tot[5];
            int nv = o->quick ? 1 : 5;
            for (int i = 0; i < nv && vs == PIT_SUCCESS; i++) {
                vs = pit_vendor_sparse_matmul(ctx, NULL, in.A[i % in.sets], in.B[i % in.sets], in.C,
                                              &conv, &comp, &name);
                tot[i] = conv + comp;
            }
            r->vendor_ms = vs == PIT_SUCCESS ? bench_median(tot, nv) : -1;
            r->vendor_convert_ms = conv;
        } else {
            r->vendor_ms = -1; /* none on this backend */
        }
    }
    double bytes_a = (double)(n * n) * (double)pit_dtype_size(dt);
    r->floor_ms = (copy_gbps > 0 ? bytes_a / (copy_gbps * 1e9) * 1e3 : 0) + (1.0 - sp) * r->dense_ms;
    if (s != PIT_SUCCESS)
        snprintf(r->error, sizeof r->error, "%s", pit_last_error());
    free(a0);
    free(b0);
    free_inputs(&in);
    return s;
}

static int vendor_wrong(const mm_result *r)
{
    return r->vendor_ms > 0 && !(r->vendor_err >= 0 && r->vendor_err <= pit_ref_tolerance(r->dt));
}

static void print_row(const mm_result *r)
{
    char vendor[32] = "-", vratio[16] = "-", l2[16] = "-";
    if (r->l2_floor_ms > 0)
        snprintf(l2, sizeof l2, "%.3f", r->l2_floor_ms);
    if (r->vendor_ms > 0) {
        snprintf(vendor, sizeof vendor, "%.3f", r->vendor_ms);
        snprintf(vratio, sizeof vratio, "%.2fx", r->vendor_ms / r->pit_ms);
    }
    printf("%-4s %-5s %4.2f | %8.3f %7.3f %6.1f %8.3f | %8.3f %9s %8.3f %8s | %6.2fx %6.2fx %7s | %s%s%s\n",
           pit_dtype_name(r->dt), r->gran, r->sparsity, r->pit_ms, r->detect_ms, r->select_us,
           r->kernel_ms, r->dense_ms, vendor, r->floor_ms, l2, r->pit_ms / r->floor_ms,
           r->dense_ms / r->pit_ms, vratio, r->choice, r->checked_ok ? "" : "  [WRONG RESULT]",
           vendor_wrong(r) ? "  [VENDOR WRONG RESULT]" : "");
}

static void json_row(FILE *f, const mm_result *r, int last)
{
    fprintf(f,
            "    {\"dtype\": \"%s\", \"granularity\": \"%s\", \"sparsity\": %.4f, \"real_sparsity\": %.4f, "
            "\"pit_ms\": %.6f, \"pit_spread\": %.4f, \"detect_ms\": %.6f, \"select_us\": %.3f, "
            "\"kernel_ms\": %.6f, \"predicted_us\": %.3f, \"dense_ms\": %.6f, \"vendor_sparse_ms\": %.6f, "
            "\"vendor_convert_ms\": %.6f, \"vendor_rel_error\": %.3g, \"floor_ms\": %.6f, "
            "\"l2_bytes\": %.0f, \"l2_floor_ms\": %.6f, "
            "\"rel_error\": %.3g, \"correct\": %s, \"choice\": \"%s\"}%s\n",
            pit_dtype_name(r->dt), r->gran, r->sparsity, r->real_sparsity, r->pit_ms, r->pit_spread,
            r->detect_ms, r->select_us, r->kernel_ms, r->predicted_us, r->dense_ms, r->vendor_ms,
            r->vendor_convert_ms, r->vendor_err, r->floor_ms, r->l2_bytes, r->l2_floor_ms, r->err,
            r->checked_ok ? "true" : "false", r->choice,
            last ? "" : ",");
}

static void plot(const bench_opts *o, const mm_result *res, int n, const char *device)
{
    char data[512];
    snprintf(data, sizeof data, "%s.dat", o->plot_path);
    FILE *f = fopen(data, "w");
    if (!f)
        return;
    /* One block per (dtype, granularity): sparsity, dense/pit, dense/vendor. */
    for (int i = 0; i < n; i++) {
        fprintf(f, "%.4f %.4f %.4f\n", res[i].sparsity, res[i].dense_ms / res[i].pit_ms,
                res[i].vendor_ms > 0 ? res[i].dense_ms / res[i].vendor_ms : NAN);
        if (i + 1 == n || res[i + 1].gran != res[i].gran || res[i + 1].dt != res[i].dt)
            fprintf(f, "\n\n");
    }
    fclose(f);
    FILE *g = popen("gnuplot 2>/dev/null", "w");
    if (!g) {
        fprintf(stderr, "pit bench: gnuplot not found; data left in %s\n", data);
        return;
    }
    fprintf(g, "set terminal pngcairo size 1000,650\nset output '%s'\n", o->plot_path);
    fprintf(g, "set title 'pit sparse matmul %lld^3 on %s: speed-up over dense'\n", (long long)o->size, device);
    fprintf(g, "set xlabel 'sparsity'\nset ylabel 'dense time / time'\nset logscale y\nset yrange [0.1:*]\nset grid\n"
               "set key left top\nset xrange [0.45:1.0]\n");
    fprintf(g, "plot 1 title 'dense' lc rgb 'black' dt 2");
    for (int i = 0, block = 0; i < n; i++) {
        if (i + 1 == n || res[i + 1].gran != res[i].gran || res[i + 1].dt != res[i].dt) {
            fprintf(g, ", '%s' index %d using 1:2 with linespoints lw 2 title 'pit %s %s'", data, block,
                    pit_dtype_name(res[i].dt), res[i].gran);
            if (res[i].vendor_ms > 0)
                fprintf(g, ", '%s' index %d using 1:3 with lines dt 3 title 'vendor sparse %s %s'", data,
                        block, pit_dtype_name(res[i].dt), res[i].gran);
            block++;
        }
    }
    fprintf(g, "\n");
    if (pclose(g) != 0)
        fprintf(stderr, "pit bench: gnuplot failed; data in %s\n", data);
    else
        printf("plot written to %s\n", o->plot_path);
}

int bench_matmul_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    double gbps = 0;
    char l2[96];
    pit_status cs = bench_measure_memory(ctx, o, (size_t)(o->size * o->size) * 4, &gbps);
    printf("\n== matmul: %lldx%lldx%lld, copy bandwidth %.1f GB/s (read+write)%s, %s\n", (long long)o->size,
           (long long)o->size, (long long)o->size, gbps, cs == PIT_SUCCESS ? "" : " (unavailable)",
           bench_l2_phrase(o, l2, sizeof l2));
    printf("%-4s %-5s %4s | %8s %7s %6s %8s | %8s %9s %8s %8s | %7s %7s %7s | %s\n", "dt", "gran", "s",
           "pit ms", "detect", "sel us", "kernel", "dense ms", "vendor ms", "floor", "L2 floor", "pit/flr",
           "dns/pit", "vnd/pit", "choice");
    mm_result res[3 * NGRAN * NSPARS];
    int n = 0, total = 0, failed = 0;
    for (int dt = 0; dt < 3; dt++)
        if (o->dtype_mask & (1 << dt))
            total += NGRAN * NSPARS;
    pit_rng rng;
    pit_rng_seed(&rng, 42);
    for (int dt = 0; dt < 3; dt++) {
        if (!(o->dtype_mask & (1 << dt)))
            continue;
        for (int g = 0; g < NGRAN; g++)
            for (int si = 0; si < NSPARS; si++) {
                char what[64];
                snprintf(what, sizeof what, "%s %s s=%.2f", pit_dtype_name((pit_dtype)dt), grans[g].name,
                         sparsities[si]);
                bench_progress(what, n, total);
                pit_status s = measure_point(ctx, o, (pit_dtype)dt, &grans[g], sparsities[si], gbps, &rng,
                                             &res[n]);
                if (s != PIT_SUCCESS) {
                    fprintf(stderr, "\npit bench: %s: %s: %s\n", what, pit_status_string(s), res[n].error);
                    failed = 1;
                    continue;
                }
                print_row(&res[n]);
                fflush(stdout);
                failed |= !res[n].checked_ok; /* a vendor inaccuracy is flagged, not fatal */
                n++;
            }
    }
    bench_progress("done", total, total);
    if (json) {
        fprintf(json, "  \"copy_gbps\": %.3f,\n  \"matmul\": [\n", gbps);
        for (int i = 0; i < n; i++)
            json_row(json, &res[i], i + 1 == n);
        fprintf(json, "  ],\n");
    }
    if (o->plot_path && n > 0)
        plot(o, res, n, d.name);
    return failed;
}
