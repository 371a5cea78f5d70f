/*
 * scripts/cold_start.c - a lab program for the GPU machine (not shipped):
 * the first pit_matmul of a new process with an empty kernel cache.
 *
 *   cc -O2 -Iinclude scripts/cold_start.c -Lbuild/lib -lpit -o cold_start
 *   ./cold_start [bf16|f16] [N]
 *
 * PIT_CACHE_DIR is pointed at a new empty folder before the context is
 * made, so no kernel comes from the disk cache: each comes built in
 * (PIT_CUDA_PRECOMPILE) or from NVRTC. Prints the context's creation, the
 * first call (detection, selection, the kernels' load or compile, the
 * product; the host clock around the call and a synchronisation) and the
 * next calls, on A with 32x64 micro-tiles of which 90% are zero.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lab_util.h"

int main(int argc, char **argv)
{
    const pit_dtype dt = argc > 1 && !strcmp(argv[1], "f16") ? PIT_F16 : PIT_BF16;
    const int64_t n = argc > 2 ? atoll(argv[2]) : 4096;
    char dir[] = "/tmp/pit-cold-XXXXXX";
    if (!mkdtemp(dir) || setenv("PIT_CACHE_DIR", dir, 1)) return 1;
    uint16_t *a = malloc((size_t)(n * n) * 2), *b = malloc((size_t)(n * n) * 2);
    if (!a || !b) return 1;
    srand(1);
    for (int64_t i = 0; i < n * n; i++) {
        float v = 0.5f + (float)rand() / (float)RAND_MAX;
        b[i] = to16(rand() % 2 ? v : -v, dt);
    }
    for (int64_t r = 0; r < n / 32; r++)
        for (int64_t c = 0; c < n / 64; c++) {
            const int kept = rand() % 10 == 0;
            for (int64_t i = 0; i < 32; i++)
                for (int64_t j = 0; j < 64; j++) {
                    float v = 0.5f + (float)rand() / (float)RAND_MAX;
                    a[(r * 32 + i) * n + c * 64 + j] = kept ? to16(v, dt) : 0;
                }
        }
    const int64_t shape[2] = {n, n};
    pit_context *ctx = NULL;
    pit_tensor *A = NULL, *B = NULL, *C = NULL;
    pit_report rep;
    double t0 = now_ms();
    int good = ok(pit_context_create(NULL, -1, &ctx), "pit_context_create");
    const double t_ctx = now_ms() - t0;
    good = good && ok(pit_tensor_create(ctx, dt, 2, shape, &A), "create A") &&
           ok(pit_tensor_create(ctx, dt, 2, shape, &B), "create B") &&
           ok(pit_tensor_create(ctx, dt, 2, shape, &C), "create C") &&
           ok(pit_tensor_upload(A, NULL, a, (size_t)(n * n) * 2), "upload A") &&
           ok(pit_tensor_upload(B, NULL, b, (size_t)(n * n) * 2), "upload B") &&
           ok(pit_synchronize(ctx, NULL), "synchronize");
    printf("cache folder %s (empty), %s %lldx%lldx%lld, A 32x64 at 90%% zeros\n", dir,
           dt == PIT_BF16 ? "bf16" : "f16", (long long)n, (long long)n, (long long)n);
    printf("pit_context_create: %.1f ms\n", t_ctx);
    for (int call = 0; good && call < 4; call++) {
        t0 = now_ms();
        good = ok(pit_matmul(ctx, NULL, A, B, C, NULL, &rep), "pit_matmul") && ok(pit_synchronize(ctx, NULL), "sync");
        if (good) printf("call %d: %.2f ms  (%s)\n", call + 1, now_ms() - t0, rep.choice);
    }
    pit_tensor_destroy(A);
    pit_tensor_destroy(B);
    pit_tensor_destroy(C);
    if (ctx) pit_context_destroy(ctx);
    free(a);
    free(b);
    return good ? 0 : 1;
}
