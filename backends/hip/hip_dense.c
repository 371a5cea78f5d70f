/*
 * hip_dense.c - the dense GEMM: rocBLAS when it is found at run time,
 * otherwise pit's own dense tile, i.e. the fused kernel with an index that
 * lists every micro-tile (nothing is skipped, nothing is gathered out of
 * order), so no vendor library is needed.
 */
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

/* pit's dense tile: 64x64x32, 4 warps, matrix cores for 16-bit types; one
 * of the variants built into the plug-in (see hip_genco.c) */
#define DENSE_BM 64
#define DENSE_BN 64
#define DENSE_BK 32
#define DENSE_TK 64 /* micro-tile columns: the gather runs of the full index */

typedef struct full_index {
    pit_index idx;
    void *mem; /* counts | total | entries, one allocation */
} full_index;

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* counts[g] = capacity and entries[g][i] = i for every row-block g (K = 0
 * gives empty groups: the kernel then writes zeros). */
static pit_status full_index_create(hipStream_t s, int64_t M, int64_t K, int64_t batch, full_index *f)
{
    memset(f, 0, sizeof *f);
    int64_t gpb = ceil_div(M, DENSE_BM), cap = ceil_div(K, DENSE_TK), groups = gpb * batch;
    if (groups * cap > INT32_MAX / 4 || groups > INT32_MAX)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "hip dense: %lld x %lld (batch %lld) is too large for pit's dense tile",
                                   (long long)M, (long long)K, (long long)batch);
    size_t words = (size_t)(groups + 1 + groups * cap);
    int32_t *host = malloc(words * 4);
    if (!host) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip dense: out of host memory for the index");
    for (int64_t g = 0; g < groups; ++g) {
        host[g] = (int32_t)cap;
        for (int64_t i = 0; i < cap; ++i) host[groups + 1 + g * cap + i] = (int32_t)i;
    }
    host[groups] = (int32_t)(groups * cap);
    hipError_t r = pit_hip.Malloc(&f->mem, words * 4);
    if (r == hipSuccess) r = pit_hip.MemcpyHtoDAsync(f->mem, host, words * 4, s);
    if (r == hipSuccess) r = pit_hip.StreamSynchronize(s); /* host buffer freed next */
    free(host);
    if (r != hipSuccess) {
        if (f->mem) pit_hip.Free(f->mem);
        f->mem = NULL;
        return pit_hip_fail(r, "hip dense: full index (hipMalloc/hipMemcpyHtoDAsync)", __FILE__, __LINE__);
    }
    pit_microtile mt = {DENSE_BM, DENSE_TK, PIT_AXIS_K};
    f->idx.tile = mt;
    f->idx.groups = (int32_t)groups;
    f->idx.groups_per_batch = (int32_t)gpb;
    f->idx.capacity = (int32_t)cap;
    f->idx.counts = f->mem;
    f->idx.total = (int32_t *)f->mem + groups;
    f->idx.entries = (int32_t *)f->mem + groups + 1;
    return PIT_SUCCESS;
}

/* Frees once the kernel that reads the index is done. */
static pit_status full_index_destroy(hipStream_t s, full_index *f)
{
    if (!f->mem) return PIT_SUCCESS;
    hipError_t r = pit_hip.StreamSynchronize(s);
    pit_hip.Free(f->mem);
    f->mem = NULL;
    if (r != hipSuccess) return pit_hip_fail(r, "hipStreamSynchronize(dense tile)", __FILE__, __LINE__);
    return PIT_SUCCESS;
}

static pit_status own_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C)
{
    if (A->rank < 2 || A->rank > 3)
        return pit_hip_host->error(PIT_ERR_INVALID_ARGUMENT, "hip dense: A has rank %d; 2 or 3 expected", A->rank);
    int r = A->rank;
    int64_t M = A->shape[r - 2], K = A->shape[r - 1], batch = r == 3 ? A->shape[0] : 1;
    pit_status st = pit_hip_push(bctx);
    if (st != PIT_SUCCESS) return st;
    hipStream_t s = ((pit_hip_stream *)stream)->s;
    full_index f;
    st = full_index_create(s, M, K, batch, &f);
    if (st == PIT_SUCCESS) {
        pit_tile tile = {DENSE_BM, DENSE_BN, DENSE_BK, 128, 2, A->dtype != PIT_F32};
        st = pit_hip_matmul_sparse(bctx, stream, &tile, &f.idx, f.idx.capacity, 1, A, B, C);
        pit_status st2 = full_index_destroy(s, &f);
        if (st == PIT_SUCCESS) st = st2;
    }
    pit_hip_pop();
    return st;
}

pit_status pit_hip_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C)
{
    if (pit_hip_have_rocblas()) return pit_hip_matmul_blas(bctx, stream, A, B, C);
    return own_dense(bctx, stream, A, B, C);
}

const char *pit_hip_dense_name(void *bctx)
{
    (void)bctx;
    return pit_hip_have_rocblas() ? "rocBLAS" : "pit dense tile";
}
