/*
 * scripts/decode_host.c - a lab program for the GPU machine (not shipped):
 * where the time of one decode call goes. x[M,K] . W[K,N] in bf16 with the
 * fraction s of x's entries zero (element-wise), through pit_matmul
 * (settled plan) and pit_matmul_dense (cuBLAS), each measured three ways:
 *   event  device events around one call on an idle stream, then a
 *          synchronisation (what `pit bench` reports);
 *   host   the host's clock around the call alone (the queue empty);
 *   queued 200 calls back to back, one synchronisation: time a call when
 *          the host runs ahead of the device (a model's decode loop).
 * Medians of 50. With CALLS, instead: CALLS pit calls (a synchronisation
 * every 50, outside the clock) and the host's time a call, a loop long
 * enough for a sampling profiler (perf) to split that time by function,
 * also on a machine without a GPU through tests/fake_cuda_driver.c.
 *
 *   cc -O2 -Iinclude scripts/decode_host.c -Lbuild-gpu/lib -lpit -o decode_host
 *   ./decode_host [M K N s [CALLS]]      (default 1 4096 14336 0.75)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "lab_util.h"

#define REPS 50
#define QUEUED 200

typedef pit_status (*call_fn)(pit_context *, pit_tensor *, pit_tensor *, pit_tensor *, pit_report *);

static pit_status call_pit(pit_context *ctx, pit_tensor *X, pit_tensor *W, pit_tensor *C, pit_report *r)
{
    return pit_matmul(ctx, NULL, X, W, C, NULL, r);
}

static pit_status call_dense(pit_context *ctx, pit_tensor *X, pit_tensor *W, pit_tensor *C, pit_report *r)
{
    (void)r;
    return pit_matmul_dense(ctx, NULL, X, W, C);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

/* 20 calls of fn, so that its plan has settled */
static int warm_up(pit_context *ctx, call_fn fn, pit_tensor *X, pit_tensor *W, pit_tensor *C, pit_report *rep)
{
    for (int i = 0; i < 20; i++)
        if (!ok(fn(ctx, X, W, C, rep), "warm-up")) return 0;
    return 1;
}

/* event / host / queued microseconds of fn, after 20 warm-up calls */
static int measure(pit_context *ctx, call_fn fn, pit_tensor *X, pit_tensor *W, pit_tensor *C, double us[3],
                   pit_report *rep)
{
    double ev[REPS], host[REPS];
    if (!warm_up(ctx, fn, X, W, C, rep) || !ok(pit_synchronize(ctx, NULL), "sync")) return 0;
    for (int i = 0; i < REPS; i++) {
        pit_event *e0 = NULL, *e1 = NULL;
        double t0;
        int good = ok(pit_event_record(ctx, NULL, &e0), "event");
        t0 = now_ms();
        good = good && ok(fn(ctx, X, W, C, rep), "call");
        host[i] = (now_ms() - t0) * 1e3;
        good = good && ok(pit_event_record(ctx, NULL, &e1), "event") && ok(pit_event_elapsed_ms(e0, e1, &ev[i]), "elapsed");
        ev[i] *= 1e3;
        pit_event_destroy(e0);
        pit_event_destroy(e1);
        if (!good) return 0;
    }
    double t0 = now_ms();
    for (int i = 0; i < QUEUED; i++)
        if (!ok(fn(ctx, X, W, C, rep), "queued call")) return 0;
    if (!ok(pit_synchronize(ctx, NULL), "sync")) return 0;
    us[2] = (now_ms() - t0) * 1e3 / QUEUED;
    us[0] = median(ev, REPS);
    us[1] = median(host, REPS);
    return 1;
}

static int table(pit_context *ctx, pit_tensor *X, pit_tensor *W, pit_tensor *C, int64_t M, int64_t K, int64_t N,
                 double s)
{
    pit_report rep = {0};
    double p[3], d[3];
    if (!measure(ctx, call_pit, X, W, C, p, &rep) || !measure(ctx, call_dense, X, W, C, d, NULL)) return 0;
    printf("x[%lld,%lld] . W[%lld,%lld] bf16, %.0f%% of x zero; pit: %s\n", (long long)M, (long long)K, (long long)K,
           (long long)N, s * 100, rep.choice);
    printf("%-6s %9s %9s %9s   (us)\n", "", "event", "host", "queued");
    printf("%-6s %9.1f %9.1f %9.1f\n%-6s %9.1f %9.1f %9.1f\n", "pit", p[0], p[1], p[2], "dense", d[0], d[1], d[2]);
    return 1;
}

static int profile_loop(pit_context *ctx, pit_tensor *X, pit_tensor *W, pit_tensor *C, long calls)
{
    pit_report rep = {0};
    if (!warm_up(ctx, call_pit, X, W, C, &rep)) return 0;
    double host = 0;
    for (long i = 0; i < calls; i += 50) {
        double t0 = now_ms();
        for (int j = 0; j < 50; ++j)
            if (!ok(call_pit(ctx, X, W, C, NULL), "profiled call")) return 0;
        host += now_ms() - t0;
        if (!ok(pit_synchronize(ctx, NULL), "sync")) return 0;
    }
    printf("pit: %s; %ld calls: %.2f us of host time a call\n", rep.choice, calls, host * 1e3 / calls);
    return 1;
}

int main(int argc, char **argv)
{
    const int64_t M = argc > 1 ? atoll(argv[1]) : 1, K = argc > 2 ? atoll(argv[2]) : 4096,
                  N = argc > 3 ? atoll(argv[3]) : 14336;
    const double s = argc > 4 ? atof(argv[4]) : 0.75;
    uint16_t *x = malloc((size_t)(M * K) * 2), *w = malloc((size_t)(K * N) * 2);
    if (!x || !w) return 1;
    srand(7);
    for (int64_t i = 0; i < M * K; i++)
        x[i] = (double)rand() / RAND_MAX < s ? 0 : to16(0.5f + (float)rand() / (float)RAND_MAX, PIT_BF16);
    for (int64_t i = 0; i < K * N; i++) w[i] = to16((rand() % 2 ? 1.f : -1.f) * (0.5f + (float)rand() / (float)RAND_MAX), PIT_BF16);
    const int64_t xs[2] = {M, K}, ws[2] = {K, N}, cs[2] = {M, N};
    pit_context *ctx = NULL;
    pit_tensor *X = NULL, *W = NULL, *C = NULL;
    int good = ok(pit_context_create(NULL, -1, &ctx), "pit_context_create") &&
               ok(pit_tensor_create(ctx, PIT_BF16, 2, xs, &X), "X") && ok(pit_tensor_create(ctx, PIT_BF16, 2, ws, &W), "W") &&
               ok(pit_tensor_create(ctx, PIT_BF16, 2, cs, &C), "C") &&
               ok(pit_tensor_upload(X, NULL, x, (size_t)(M * K) * 2), "upload x") &&
               ok(pit_tensor_upload(W, NULL, w, (size_t)(K * N) * 2), "upload W");
    const long calls = argc > 5 ? atol(argv[5]) : 0;
    if (calls > 0)
        good = good && profile_loop(ctx, X, W, C, calls);
    else
        good = good && table(ctx, X, W, C, M, K, N, s);
    pit_tensor_destroy(X);
    pit_tensor_destroy(W);
    pit_tensor_destroy(C);
    if (ctx) pit_context_destroy(ctx);
    free(x);
    free(w);
    return good ? 0 : 1;
}
