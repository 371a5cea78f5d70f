/* examples/readme.c - C = A . B with A dynamically sparse (32x32 blocks, about
 * 1 in 20 kept), checked against a CPU loop. Exits 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <pit.h>

enum { M = 512, K = 512, N = 256, BLOCK = 32 };

static int ok(pit_status s, const char *call)
{
    if (s != PIT_SUCCESS)
        fprintf(stderr, "%s: %s: %s\n", call, pit_status_string(s), pit_last_error());
    return s == PIT_SUCCESS;
}

static float nonzero(void) /* magnitude in [0.5, 1.5], either sign */
{
    float v = 0.5f + (float)rand() / (float)RAND_MAX;
    return rand() % 2 ? v : -v;
}

static int matches_cpu(const float *a, const float *b, const float *c)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = 0, scale = 0;
            for (int k = 0; k < K; k++) {
                want += (double)a[m * K + k] * b[k * N + n];
                scale += fabs((double)a[m * K + k] * b[k * N + n]);
            }
            if (fabs(c[m * N + n] - want) > 1e-4 * scale + 1e-6) {
                fprintf(stderr, "C[%d][%d] = %g, want %g\n", m, n, c[m * N + n], want);
                return 0;
            }
        }
    return 1;
}

int main(void)
{
    static float a[M * K], b[K * N], c[M * N];
    srand(1);
    for (int bm = 0; bm < M / BLOCK; bm++)
        for (int bk = 0; bk < K / BLOCK; bk++) {
            int kept = rand() % 20 == 0;
            for (int i = 0; i < BLOCK * BLOCK; i++)
                a[(bm * BLOCK + i / BLOCK) * K + bk * BLOCK + i % BLOCK] = kept ? nonzero() : 0.0f;
        }
    for (int i = 0; i < K * N; i++)
        b[i] = nonzero();

    int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    pit_context *ctx = NULL;
    pit_tensor *A = NULL, *B = NULL, *C = NULL;
    pit_report rep;
    /* The device PIT_BACKEND names, else the best one found. Tensors in memory
     * pit allocates; pit_tensor_wrap and pit_tensor_from_dlpack take yours. */
    int good = ok(pit_context_create(NULL, -1, &ctx), "pit_context_create")
               && ok(pit_tensor_create(ctx, PIT_F32, 2, sa, &A), "pit_tensor_create A")
               && ok(pit_tensor_create(ctx, PIT_F32, 2, sb, &B), "pit_tensor_create B")
               && ok(pit_tensor_create(ctx, PIT_F32, 2, sc, &C), "pit_tensor_create C")
               && ok(pit_tensor_upload(A, NULL, a, sizeof a), "pit_tensor_upload A")
               && ok(pit_tensor_upload(B, NULL, b, sizeof b), "pit_tensor_upload B")
               && ok(pit_matmul(ctx, NULL, A, B, C, NULL, &rep), "pit_matmul")
               && ok(pit_tensor_download(C, NULL, c, sizeof c), "pit_tensor_download C");
    if (good)
        printf("pit chose %s\n", rep.choice);
    good = good && matches_cpu(a, b, c);
    pit_tensor *tensors[] = {A, B, C}; /* destroying NULL is a no-op */
    for (int i = 0; i < 3; i++)
        good = ok(pit_tensor_destroy(tensors[i]), "pit_tensor_destroy") && good;
    if (ctx && !ok(pit_context_destroy(ctx), "pit_context_destroy"))
        good = 0;
    printf("%s\n", good ? "ok" : "FAILED");
    return good ? 0 : 1;
}
