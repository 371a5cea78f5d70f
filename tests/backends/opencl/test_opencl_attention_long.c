/*
 * test_opencl_attention_long.c - sparse attention over a sequence so long
 * that a dense L x L f32 score buffer is more than the OpenCL device may
 * allocate at once (CL_DEVICE_MAX_MEM_ALLOC_SIZE), with a handful of
 * non-zero 64 x 64 mask blocks: the call must succeed (its memory scales with
 * the non-zero blocks) and O must match the CPU reference.
 *
 * The reference runs on the blocks that matter only: every key a row may see
 * lies in a listed block, so attention over the union of the listed row and
 * column blocks gives those rows exactly, and every other row is all masked
 * (O = 0). ctest runs it with POCL_MEMORY_LIMIT=1 (PoCL: a 256 MiB largest
 * allocation, so L is about 8,200); without, L follows the device's limit,
 * and a limit that would need L above 40,000 is a skip (exit 77).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>

#include "rtest.h"

#define BLOCK 64
#define HEAD_DIM 4
#define VALUE_DIM 3
#define MAX_L 40000

/* The non-zero blocks (row block, column block) as fractions of the block
 * count, so they follow L: corners (the last block is partial), two in one
 * row block, one on the diagonal. */
static const double listed[][2] = {{0.0, 1.0}, {1.0, 1.0}, {0.5, 0.0}, {0.5, 0.25},
                                   {0.25, 0.25}, {1.0, 0.0}};
#define NLISTED (int)(sizeof listed / sizeof listed[0])

/* The largest allocation of the device behind a pit tensor's cl_mem. */
static cl_ulong largest_allocation(pit_context *ctx)
{
    pit_tensor *t = rt_tensor(ctx, PIT_F32, 2, 1, 1, 1);
    pit_tensor_desc d;
    pit_tensor_get_desc(t, &d);
    cl_context cl = NULL;
    cl_device_id dev = NULL;
    cl_ulong bytes = 0;
    if (clGetMemObjectInfo((cl_mem)d.data, CL_MEM_CONTEXT, sizeof cl, &cl, NULL) != CL_SUCCESS ||
        clGetContextInfo(cl, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof bytes, &bytes, NULL) !=
            CL_SUCCESS)
        bytes = 0;
    pit_tensor_destroy(t);
    return bytes;
}

typedef struct problem {
    int64_t l, blocks;
    int64_t rb[NLISTED], cb[NLISTED];
    unsigned char *mask; /* l x l */
    double *q, *k, *v;
} problem;

static int64_t block_len(const problem *p, int64_t b)
{
    int64_t end = (b + 1) * BLOCK < p->l ? (b + 1) * BLOCK : p->l;
    return end - b * BLOCK;
}

/* Random data; mask elements on at random (about 0.6) inside the listed
 * blocks, the first of them wholly on. */
static int make_problem(problem *p, int64_t l, pit_rng *rng)
{
    p->l = l;
    p->blocks = (l + BLOCK - 1) / BLOCK;
    p->mask = calloc((size_t)(l * l), 1);
    p->q = malloc((size_t)(l * HEAD_DIM) * sizeof(double));
    p->k = malloc((size_t)(l * HEAD_DIM) * sizeof(double));
    p->v = malloc((size_t)(l * VALUE_DIM) * sizeof(double));
    if (!p->mask || !p->q || !p->k || !p->v)
        return 0;
    pit_ref_fill_random(rng, p->q, (size_t)(l * HEAD_DIM));
    pit_ref_fill_random(rng, p->k, (size_t)(l * HEAD_DIM));
    pit_ref_fill_random(rng, p->v, (size_t)(l * VALUE_DIM));
    for (int i = 0; i < NLISTED; i++) {
        p->rb[i] = (int64_t)(listed[i][0] * (double)(p->blocks - 1));
        p->cb[i] = (int64_t)(listed[i][1] * (double)(p->blocks - 1));
        for (int64_t r = p->rb[i] * BLOCK; r < p->rb[i] * BLOCK + block_len(p, p->rb[i]); r++)
            for (int64_t c = p->cb[i] * BLOCK; c < p->cb[i] * BLOCK + block_len(p, p->cb[i]); c++)
                if (i == 0 || pit_rng_next(rng) % 10 < 6)
                    p->mask[r * l + c] = 1;
    }
    return 1;
}

static void free_problem(problem *p)
{
    free(p->mask);
    free(p->q);
    free(p->k);
    free(p->v);
}

/* The expected O: attention over the listed blocks' rows and keys (their
 * union, in block order), zeros elsewhere. */
static double *expected_output(const problem *p, double scale)
{
    char *used = calloc((size_t)p->blocks, 1);
    int64_t *at = malloc((size_t)p->blocks * sizeof(int64_t)); /* block -> first sub row */
    double *o = calloc((size_t)(p->l * VALUE_DIM), sizeof(double));
    if (!used || !at || !o) {
        free(used);
        free(at);
        free(o);
        return NULL;
    }
    for (int i = 0; i < NLISTED; i++)
        used[p->rb[i]] = used[p->cb[i]] = 1;
    int64_t n = 0;
    for (int64_t b = 0; b < p->blocks; b++)
        if (used[b]) {
            at[b] = n;
            n += block_len(p, b);
        }
    double *q = malloc((size_t)(n * HEAD_DIM) * sizeof(double));
    double *k = malloc((size_t)(n * HEAD_DIM) * sizeof(double));
    double *v = malloc((size_t)(n * VALUE_DIM) * sizeof(double));
    double *m = calloc((size_t)(n * n), sizeof(double));
    double *so = malloc((size_t)(n * VALUE_DIM) * sizeof(double));
    int64_t *row_of = malloc((size_t)n * sizeof(int64_t)); /* sub row -> row */
    if (q && k && v && m && so && row_of) {
        for (int64_t b = 0; b < p->blocks; b++)
            for (int64_t i = 0; used[b] && i < block_len(p, b); i++)
                row_of[at[b] + i] = b * BLOCK + i;
        for (int64_t i = 0; i < n; i++) {
            memcpy(q + i * HEAD_DIM, p->q + row_of[i] * HEAD_DIM, HEAD_DIM * sizeof(double));
            memcpy(k + i * HEAD_DIM, p->k + row_of[i] * HEAD_DIM, HEAD_DIM * sizeof(double));
            memcpy(v + i * VALUE_DIM, p->v + row_of[i] * VALUE_DIM, VALUE_DIM * sizeof(double));
            for (int64_t j = 0; j < n; j++)
                m[i * n + j] = p->mask[row_of[i] * p->l + row_of[j]];
        }
        pit_ref_attention(1, n, HEAD_DIM, VALUE_DIM, q, k, v, m, 0, scale, so);
        for (int64_t i = 0; i < n; i++)
            memcpy(o + row_of[i] * VALUE_DIM, so + i * VALUE_DIM, VALUE_DIM * sizeof(double));
    } else {
        free(o);
        o = NULL;
    }
    free(q);
    free(k);
    free(v);
    free(m);
    free(so);
    free(row_of);
    free(used);
    free(at);
    return o;
}

static void run(pit_context *ctx, int64_t l)
{
    problem p;
    memset(&p, 0, sizeof p);
    pit_rng rng;
    pit_rng_seed(&rng, 27);
    if (!make_problem(&p, l, &rng)) {
        RT_CHECK(0, "host memory for L = %lld", (long long)l);
        free_problem(&p);
        return;
    }
    pit_tensor *Q = rt_tensor(ctx, PIT_F32, 3, 1, l, HEAD_DIM);
    pit_tensor *K = rt_tensor(ctx, PIT_F32, 3, 1, l, HEAD_DIM);
    pit_tensor *V = rt_tensor(ctx, PIT_F32, 3, 1, l, VALUE_DIM);
    pit_tensor *O = rt_tensor(ctx, PIT_F32, 3, 1, l, VALUE_DIM);
    pit_tensor *M = rt_tensor(ctx, PIT_U8, 2, 1, l, l);
    RT_CHECK(rt_upload(Q, NULL, p.q, (size_t)(l * HEAD_DIM)) == PIT_SUCCESS &&
                 rt_upload(K, NULL, p.k, (size_t)(l * HEAD_DIM)) == PIT_SUCCESS &&
                 rt_upload(V, NULL, p.v, (size_t)(l * VALUE_DIM)) == PIT_SUCCESS &&
                 pit_tensor_upload(M, NULL, p.mask, (size_t)(l * l)) == PIT_SUCCESS,
             "uploads");
    const float scale = 0.5f;
    pit_report rep;
    pit_status st = pit_sparse_attention(ctx, NULL, Q, K, V, M, O, scale, BLOCK, &rep);
    RT_CHECK(st == PIT_SUCCESS, "attention L = %lld with %d of %lld x %lld blocks: %s",
             (long long)l, NLISTED, (long long)p.blocks, (long long)p.blocks,
             pit_status_string(st));
    if (st == PIT_SUCCESS) {
        RT_CHECK(rep.nonzero_tiles == NLISTED, "report: %lld non-zero blocks, %d listed",
                 (long long)rep.nonzero_tiles, NLISTED);
        double *want = expected_output(&p, scale);
        double *got = malloc((size_t)(l * VALUE_DIM) * sizeof(double));
        RT_CHECK(want && got && rt_download(O, NULL, got, (size_t)(l * VALUE_DIM)) == PIT_SUCCESS,
                 "reference and download");
        if (want && got) {
            double err = pit_ref_rel_error(want, got, (size_t)(l * VALUE_DIM));
            RT_CHECK(err <= pit_ref_tolerance(PIT_F32), "O: relative error %g (tolerance %g)",
                     err, pit_ref_tolerance(PIT_F32));
        }
        free(want);
        free(got);
    }
    pit_tensor_destroy(Q);
    pit_tensor_destroy(K);
    pit_tensor_destroy(V);
    pit_tensor_destroy(O);
    pit_tensor_destroy(M);
    free_problem(&p);
}

int main(void)
{
    pit_context *ctx = rt_context_or_skip("test_opencl_attention_long");
    cl_ulong largest = largest_allocation(ctx);
    /* the smallest L whose f32 L x L scores pass the largest allocation,
     * off the block grid so the last block is partial */
    int64_t l = (int64_t)sqrt((double)largest / 4.0) + BLOCK / 2 + 5;
    if (largest == 0 || l > MAX_L) {
        printf("test_opencl_attention_long: SKIPPED: largest allocation %llu bytes needs L = %lld "
               "(at most %d here; PoCL: set POCL_MEMORY_LIMIT=1)\n",
               (unsigned long long)largest, (long long)l, MAX_L);
        pit_context_destroy(ctx);
        return 77;
    }
    printf("largest allocation %llu bytes: L = %lld (dense f32 scores: %llu bytes)\n",
           (unsigned long long)largest, (long long)l, (unsigned long long)(l * l * 4));
    run(ctx, l);
    pit_context_destroy(ctx);
    return rt_finish("test_opencl_attention_long");
}
