/*
 * cuda_baselines.c - what pit bench compares PIT with on CUDA: cuSPARSE,
 * with its dense->sparse conversion timed, since the sparsity is dynamic
 * (the device-to-device copy, the bandwidth floor, is shared with HIP in
 * common/gpu_backend.c).
 *
 *   vendor_sparse_matmul  dense A -> CSR (cusparseDenseToSparse: buffer size,
 *                         analysis, nnz read back, column/value arrays sized,
 *                         convert), then cusparseSpMM; f32, f16 and bf16
 *                         storage with f32 compute. Two event-timed parts.
 *   vendor_convert        block 1: dense -> CSR as above. block > 1: BSR is
 *                         PIT_ERR_UNSUPPORTED: cuSPARSE 12.6 (CUDA 13) has no
 *                         generic dense->BSR (cusparseDenseToSparse writes
 *                         CSR, CSC, COO and Blocked-ELL only), and the legacy
 *                         csr2bsr route gave a wrong block count on the H100.
 *
 * cuSPARSE is found at run time (cuda_libs.h) when a baseline first runs;
 * without it each entry answers PIT_ERR_UNSUPPORTED naming the files looked
 * for, and the name is "cuSPARSE (not found)".
 *
 * Not compiled by the HIP plug-in: its rocSPARSE baseline is
 * backends/hip/hip_sparse.c. What does not depend on the library (operands
 * and their checks, locking, scratch, event timer) both take from
 * cuda_baseline.h.
 */

#include <cusparse.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_baseline.h"

/* ---- errors ------------------------------------------------------------------------ */

static pit_status sparse_fail(cusparseStatus_t r, const char *what, const char *file, int line)
{
    pit_status st = r == CUSPARSE_STATUS_ALLOC_FAILED || r == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES
                        ? PIT_ERR_OUT_OF_MEMORY
                    : r == CUSPARSE_STATUS_NOT_SUPPORTED ? PIT_ERR_UNSUPPORTED
                                                         : PIT_ERR_BACKEND;
    const char *name = cusparseGetErrorName(r);
    return pit_cuda_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, name ? name : "?",
                                pit_cuda_basename(file), line);
}

/* Stores the first failure in st and jumps to the cleanup label. */
#define SP_CHECK_GOTO(call, what, st, label) \
    PIT_BASELINE_CHECK_GOTO(cusparseStatus_t, CUSPARSE_STATUS_SUCCESS, sparse_fail, call, what, st, label)

static const pit_baseline_lib lib_cusparse = {"cuSPARSE", {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF}};

static pit_status err(pit_status st, const char *what)
{
    return pit_baseline_error(&lib_cusparse, st, what);
}

/* ---- the handle: one per context, used under c->lock --------------------------------- */

void pit_cuda_sparse_destroy(pit_cuda_ctx *c)
{
    if (c->sparse) cusparseDestroy((cusparseHandle_t)c->sparse);
    c->sparse = NULL;
}

/* Context current and c->lock held. */
static pit_status sparse_handle(pit_cuda_ctx *c, CUstream s, cusparseHandle_t *h)
{
    pit_status st = PIT_SUCCESS;
    if (!c->sparse) {
        cusparseHandle_t n = NULL;
        SP_CHECK_GOTO(cusparseCreate(&n), "cusparseCreate", st, done);
        c->sparse = n;
    }
    *h = (cusparseHandle_t)c->sparse;
    SP_CHECK_GOTO(cusparseSetStream(*h, (cudaStream_t)s), "cusparseSetStream", st, done);
done:
    return st;
}

/* Stream-ordered scratch stays in the pool between calls (as ops/common.c does
 * for its own): timed runs do not re-map memory the pool gave back. */
static void keep_pool(pit_cuda_ctx *c)
{
    CUmemoryPool pool;
    if (pit_cu.DeviceGetDefaultMemPool(&pool, c->dev) == CUDA_SUCCESS) {
        cuuint64_t keep = UINT64_MAX;
        pit_cu.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    }
}

/* ---- dense -> CSR ------------------------------------------------------------------- */

typedef struct csr {
    cusparseSpMatDescr_t mat;
    CUdeviceptr offsets, columns, values;
    cusparseIndexType_t itype;
    int64_t nnz;
} csr;

/* Dense a -> CSR with cusparseDenseToSparse; the arrays are sized from the
 * nnz that the analysis writes into the descriptor (read back to the host). */
static pit_status dense_to_csr(cusparseHandle_t h, CUstream s, const pit_baseline_dense *a,
                               pit_baseline_scratch *sc, csr *out)
{
    pit_status st = PIT_SUCCESS;
    cusparseDnMatDescr_t dn = NULL;
    memset(out, 0, sizeof *out);
    /* 32-bit indices where every count fits (the legacy BSR path needs them) */
    int wide = a->rows * a->cols > INT32_MAX;
    out->itype = wide ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I;
    size_t ib = wide ? 8 : 4;
    CUdeviceptr buffer = 0;
    size_t bytes = 0;
    int64_t r = 0, cc = 0;
    if ((st = pit_baseline_scratch_alloc(sc, s, (size_t)(a->rows + 1) * ib, "CSR row offsets", &out->offsets)) !=
        PIT_SUCCESS)
        goto done;
    SP_CHECK_GOTO(cusparseCreateDnMat(&dn, a->rows, a->cols, a->ld, (void *)(uintptr_t)a->ptr,
                                      (cudaDataType)a->type, CUSPARSE_ORDER_ROW),
                  "cusparseCreateDnMat(A)", st, done);
    SP_CHECK_GOTO(cusparseCreateCsr(&out->mat, a->rows, a->cols, 0, (void *)(uintptr_t)out->offsets, NULL, NULL,
                                    out->itype, out->itype, CUSPARSE_INDEX_BASE_ZERO, (cudaDataType)a->type),
                  "cusparseCreateCsr", st, done);
    SP_CHECK_GOTO(cusparseDenseToSparse_bufferSize(h, dn, out->mat, CUSPARSE_DENSETOSPARSE_ALG_DEFAULT, &bytes),
                  "cusparseDenseToSparse_bufferSize", st, done);
    if ((st = pit_baseline_scratch_alloc(sc, s, bytes, "cusparseDenseToSparse buffer", &buffer)) != PIT_SUCCESS)
        goto done;
    SP_CHECK_GOTO(cusparseDenseToSparse_analysis(h, dn, out->mat, CUSPARSE_DENSETOSPARSE_ALG_DEFAULT,
                                                 (void *)(uintptr_t)buffer),
                  "cusparseDenseToSparse_analysis", st, done);
    SP_CHECK_GOTO(cusparseSpMatGetSize(out->mat, &r, &cc, &out->nnz), "cusparseSpMatGetSize", st, done);
    if (out->nnz < 0 || out->nnz > a->rows * a->cols) {
        st = err(PIT_ERR_BACKEND, "cusparseDenseToSparse_analysis reported an impossible nnz");
        goto done;
    }
    if ((st = pit_baseline_scratch_alloc(sc, s, (size_t)out->nnz * ib, "CSR columns", &out->columns)) !=
            PIT_SUCCESS ||
        (st = pit_baseline_scratch_alloc(sc, s, (size_t)out->nnz * a->el, "CSR values", &out->values)) !=
            PIT_SUCCESS)
        goto done;
    SP_CHECK_GOTO(cusparseCsrSetPointers(out->mat, (void *)(uintptr_t)out->offsets, (void *)(uintptr_t)out->columns,
                                         (void *)(uintptr_t)out->values),
                  "cusparseCsrSetPointers", st, done);
    SP_CHECK_GOTO(cusparseDenseToSparse_convert(h, dn, out->mat, CUSPARSE_DENSETOSPARSE_ALG_DEFAULT,
                                                (void *)(uintptr_t)buffer),
                  "cusparseDenseToSparse_convert", st, done);
done:
    if (dn) cusparseDestroyDnMat(dn);
    if (st != PIT_SUCCESS && out->mat) {
        cusparseDestroySpMat(out->mat);
        out->mat = NULL;
    }
    return st;
}

/* ---- C = A . B through CSR SpMM --------------------------------------------------------- */

/* A matmul job (cuda_baseline.h, which reads the times and frees sc): the
 * conversion (events 0-1), then the SpMM with its descriptors and buffer
 * (events 1-2). */
static pit_status spmm_run(pit_cuda_ctx *c, CUstream s, const pit_baseline_job *j, pit_baseline_scratch *sc,
                           pit_baseline_timer *t)
{
    cusparseHandle_t h = NULL;
    pit_status st = sparse_handle(c, s, &h);
    if (st != PIT_SUCCESS) return st;
    keep_pool(c);
    csr A;
    memset(&A, 0, sizeof A);
    cusparseDnMatDescr_t B = NULL, C = NULL;
    CUdeviceptr buffer = 0;
    size_t bytes = 0;
    const float alpha = 1.f, beta = 0.f;
    const pit_baseline_dense *b = &j->b, *cm = &j->c;
    if ((st = pit_baseline_mark(t, s)) != PIT_SUCCESS) goto done;
    if ((st = dense_to_csr(h, s, &j->a, sc, &A)) != PIT_SUCCESS) goto done;
    if ((st = pit_baseline_mark(t, s)) != PIT_SUCCESS) goto done;
    SP_CHECK_GOTO(cusparseCreateDnMat(&B, b->rows, b->cols, b->ld, (void *)(uintptr_t)b->ptr, (cudaDataType)b->type,
                                      CUSPARSE_ORDER_ROW),
                  "cusparseCreateDnMat(B)", st, done);
    SP_CHECK_GOTO(cusparseCreateDnMat(&C, cm->rows, cm->cols, cm->ld, (void *)(uintptr_t)cm->ptr,
                                      (cudaDataType)cm->type, CUSPARSE_ORDER_ROW),
                  "cusparseCreateDnMat(C)", st, done);
    SP_CHECK_GOTO(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                          &alpha, A.mat, B, &beta, C, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes),
                  "cusparseSpMM_bufferSize", st, done);
    if ((st = pit_baseline_scratch_alloc(sc, s, bytes, "cusparseSpMM buffer", &buffer)) != PIT_SUCCESS) goto done;
    SP_CHECK_GOTO(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A.mat,
                               B, &beta, C, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, (void *)(uintptr_t)buffer),
                  "cusparseSpMM", st, done);
    st = pit_baseline_mark(t, s);
done:
    if (B) cusparseDestroyDnMat(B);
    if (C) cusparseDestroyDnMat(C);
    if (A.mat) cusparseDestroySpMat(A.mat);
    return st;
}

/* cuSPARSE is loaded when a baseline first runs: the plug-in works without it. */
static pit_status require_cusparse(void)
{
    return pit_cuda_require(PIT_CUDA_CUSPARSE, PIT_ERR_UNSUPPORTED, "cuda cuSPARSE baseline: no cuSPARSE");
}

pit_status pit_cuda_vendor_sparse_matmul(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                         const pit_tdesc *C, double *convert_ms, double *compute_ms)
{
    pit_baseline_job j;
    pit_status st = pit_baseline_matmul_job(&lib_cusparse, A, B, C, convert_ms, compute_ms, &j);
    if (st == PIT_SUCCESS) st = require_cusparse();
    return st == PIT_SUCCESS ? pit_baseline_run(bctx, stream, spmm_run, &j) : st;
}

/* ---- conversion alone ------------------------------------------------------------------- */

/* A conversion job: dense -> CSR, timed (events 0-1). */
static pit_status convert_run(pit_cuda_ctx *c, CUstream s, const pit_baseline_job *j, pit_baseline_scratch *sc,
                              pit_baseline_timer *t)
{
    cusparseHandle_t h = NULL;
    pit_status st = sparse_handle(c, s, &h);
    if (st != PIT_SUCCESS) return st;
    keep_pool(c);
    csr A;
    memset(&A, 0, sizeof A);
    if ((st = pit_baseline_mark(t, s)) == PIT_SUCCESS && (st = dense_to_csr(h, s, &j->a, sc, &A)) == PIT_SUCCESS)
        st = pit_baseline_mark(t, s);
    if (A.mat) cusparseDestroySpMat(A.mat);
    return st;
}

pit_status pit_cuda_vendor_convert(void *bctx, void *stream, const pit_tdesc *A, int block, double *ms)
{
    pit_baseline_job j;
    pit_status st = pit_baseline_convert_job(&lib_cusparse, A, block, ms, &j);
    if (st == PIT_SUCCESS) st = require_cusparse();
    if (st != PIT_SUCCESS) return st;
    /* cuSPARSE has no generic dense -> BSR conversion, and its legacy
     * csr2bsr counted wrong blocks on the CSR the generic API wrote (the
     * next conversion hung): blocks are not offered */
    if (block > 1)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED,
                                    "cuda cuSPARSE baseline: dense -> BSR: cuSPARSE %d.%d has no generic dense->BSR "
                                    "conversion", CUSPARSE_VER_MAJOR, CUSPARSE_VER_MINOR);
    return pit_baseline_run(bctx, stream, convert_run, &j);
}

const char *pit_cuda_vendor_sparse_name(void *bctx)
{
    (void)bctx;
    return pit_cuda_lib_missing(PIT_CUDA_CUSPARSE) ? "cuSPARSE (not found)" : "cuSPARSE CSR";
}
