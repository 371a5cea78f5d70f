/*
 * hip_sparse.c - rocSPARSE, what pit bench compares PIT with on HIP (the
 * counterpart of cuSPARSE in backends/cuda/cuda_baselines.c), found at run
 * time with dlopen like rocBLAS (hip_blas.c): no ROCm header or library is
 * needed to build the plug-in, and without rocSPARSE the baseline answers
 * PIT_ERR_UNSUPPORTED naming the libraries it looked for.
 *
 *   vendor_sparse_matmul  dense A -> CSR with rocsparse_dense_to_sparse
 *                         (buffer size; analysis, which counts the non-zeros
 *                         into the descriptor, read with
 *                         rocsparse_spmat_get_size; convert), then
 *                         rocsparse_spmm (buffer size, preprocess, compute),
 *                         f32 compute. Two event-timed parts on the caller's
 *                         stream: conversion (analysis + nnz read-back +
 *                         convert), and SpMM (preprocess + compute).
 *   vendor_convert        block 1: dense -> CSR as above. block > 1 (BSR):
 *                         PIT_ERR_UNSUPPORTED (not wired up, see there).
 *
 * What does not depend on the library is written once, in
 * backends/cuda/cuda_baseline.h, with the cuSPARSE baseline, through
 * hip_shim.h: the operands and the checks made before any device work,
 * running under the context's lock, the device scratch, the event timer.
 *
 * Memory: the CSR arrays are allocated before the first event at their
 * largest size (M*K entries; the non-zero count is only known after the
 * analysis), and the work buffers also outside the timed parts, so
 * hipMalloc (the scratch's, in hip_shim.c) is never charged to rocSPARSE
 * (cuda_baselines.c gets the same effect from the stream-ordered pool).
 * The price is M*K*(index + element) bytes of device memory per call.
 *
 * Data types: rocSPARSE 2.3.3 (ROCm 5.3, Debian 12) has f32/f64 real and
 * complex only; f16 and bf16 are passed with the values of later headers,
 * and a rocSPARSE that does not know them rejects the dense descriptor
 * (rocsparse_status_invalid_value), reported as PIT_ERR_UNSUPPORTED_DTYPE.
 *
 * Built, never run on AMD hardware (no AMD GPU has been available). What
 * runs without a GPU (the library found, every symbol resolved, the
 * descriptor calls accepting these enum values) is ctest
 * hip_rocsparse_loader (test_hip_sparse.c, pit_hip_sparse_selfcheck).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hip_shim.h" /* the HIP meaning of cuda_baseline.h's CUDA names */
#include "cuda_baseline.h"

/* ---- rocSPARSE's C API, declared here -------------------------------------------------
 * Values and signatures from rocSPARSE 2.3.3, the rocSPARSE of ROCm 5.3
 * (Debian 12's librocsparse-dev 5.3.0+dfsg-2: rocsparse/rocsparse-types.h,
 * rocsparse-auxiliary.h, rocsparse-functions.h); only what this file uses.
 * The calls used have the same signatures in rocSPARSE 3 and 4 (ROCm 6, 7). */
typedef struct _rocsparse_handle *rocsparse_handle;
typedef struct _rocsparse_spmat_descr *rocsparse_spmat_descr;
typedef struct _rocsparse_dnmat_descr *rocsparse_dnmat_descr;

/* rocsparse_status_<name>, numbered from 0 in this order; status_name()
 * spells them from the same list */
#define RS_STATUSES(X)                                                                                        \
    X(success) X(invalid_handle) X(not_implemented) X(invalid_pointer) X(invalid_size) X(memory_error)         \
    X(internal_error) X(invalid_value) X(arch_mismatch) X(zero_pivot) X(not_initialized) X(type_mismatch)      \
    X(requires_sorted_storage)
#define RS_STATUS_ENUM(name) rocsparse_status_##name,
typedef enum rocsparse_status_ { RS_STATUSES(RS_STATUS_ENUM) } rocsparse_status;

typedef enum rocsparse_operation_ { rocsparse_operation_none = 111 } rocsparse_operation;
typedef enum rocsparse_index_base_ { rocsparse_index_base_zero = 0 } rocsparse_index_base;
typedef enum rocsparse_indextype_ { rocsparse_indextype_i32 = 2, rocsparse_indextype_i64 = 3 } rocsparse_indextype;
typedef enum rocsparse_datatype_ {
    rocsparse_datatype_f32_r = 151,
    /* not in rocSPARSE 2.3.3; the values of rocsparse-types.h from ROCm 6 on */
    rocsparse_datatype_f16_r = 150,
    rocsparse_datatype_bf16_r = 168
} rocsparse_datatype;
typedef enum rocsparse_order_ { rocsparse_order_row = 0, rocsparse_order_column = 1 } rocsparse_order;
typedef enum rocsparse_spmm_alg_ { rocsparse_spmm_alg_default = 0 } rocsparse_spmm_alg;
typedef enum rocsparse_dense_to_sparse_alg_ { rocsparse_dense_to_sparse_alg_default = 0 } rocsparse_dense_to_sparse_alg;
typedef enum rocsparse_spmm_stage_ {
    rocsparse_spmm_stage_buffer_size = 1,
    rocsparse_spmm_stage_preprocess = 2,
    rocsparse_spmm_stage_compute = 3
} rocsparse_spmm_stage;

typedef struct rocsparse_api {
    rocsparse_status (*create_handle)(rocsparse_handle *);
    rocsparse_status (*destroy_handle)(rocsparse_handle);
    rocsparse_status (*set_stream)(rocsparse_handle, hipStream_t);
    rocsparse_status (*create_dnmat_descr)(rocsparse_dnmat_descr *, int64_t rows, int64_t cols, int64_t ld,
                                           void *values, rocsparse_datatype, rocsparse_order);
    rocsparse_status (*destroy_dnmat_descr)(rocsparse_dnmat_descr);
    rocsparse_status (*create_csr_descr)(rocsparse_spmat_descr *, int64_t rows, int64_t cols, int64_t nnz,
                                         void *row_ptr, void *col_ind, void *val, rocsparse_indextype row_ptr_type,
                                         rocsparse_indextype col_ind_type, rocsparse_index_base,
                                         rocsparse_datatype);
    rocsparse_status (*destroy_spmat_descr)(rocsparse_spmat_descr);
    rocsparse_status (*spmat_get_size)(rocsparse_spmat_descr, int64_t *rows, int64_t *cols, int64_t *nnz);
    rocsparse_status (*csr_set_pointers)(rocsparse_spmat_descr, void *row_ptr, void *col_ind, void *val);
    /* temp_buffer NULL: size into *buffer_size; buffer_size NULL: analysis
     * (non-zeros per row into temp_buffer, their sum into the descriptor);
     * both given: convert */
    rocsparse_status (*dense_to_sparse)(rocsparse_handle, rocsparse_dnmat_descr, rocsparse_spmat_descr,
                                        rocsparse_dense_to_sparse_alg, size_t *buffer_size, void *temp_buffer);
    rocsparse_status (*spmm)(rocsparse_handle, rocsparse_operation trans_A, rocsparse_operation trans_B,
                             const void *alpha, rocsparse_spmat_descr A, rocsparse_dnmat_descr B, const void *beta,
                             rocsparse_dnmat_descr C, rocsparse_datatype compute_type, rocsparse_spmm_alg,
                             rocsparse_spmm_stage, size_t *buffer_size, void *temp_buffer);
    /* optional: version = major * 100000 + minor * 100 + patch */
    rocsparse_status (*get_version)(rocsparse_handle, int *);
} rocsparse_api;

/* ---- loading -------------------------------------------------------------------------- */

static const char *const rs_names[] = {"librocsparse.so.0", "librocsparse.so.1", "librocsparse.so"};

static rocsparse_api rs;
static void *rs_lib;
static const char *rs_opened;  /* which of rs_names was opened */
static int rs_loaded;          /* 1 usable, -1 absent or incomplete */
static char rs_why[1024];      /* why not, when rs_loaded is -1 */
static pthread_once_t rs_once = PTHREAD_ONCE_INIT;

/* printf at out + *used, advancing *used (at most to size) */
static void append(char *out, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *used, size - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used = *used + (size_t)w < size ? *used + (size_t)w : size;
}

static void load_rocsparse(void)
{
    char tried[sizeof rs_why - 32];
    int which = 0;
    void *lib = pit_hip_open_first(rs_names, (int)(sizeof rs_names / sizeof rs_names[0]), tried, sizeof tried, &which);
    if (!lib) {
        snprintf(rs_why, sizeof rs_why, "no rocSPARSE (%s)", tried);
        rs_loaded = -1;
        return;
    }
    rs_opened = rs_names[which];
    rocsparse_api t;
    memset(&t, 0, sizeof t);
    const struct {
        const char *name;
        void *slot;
    } need[] = {
        {"rocsparse_create_handle", &t.create_handle},
        {"rocsparse_destroy_handle", &t.destroy_handle},
        {"rocsparse_set_stream", &t.set_stream},
        {"rocsparse_create_dnmat_descr", &t.create_dnmat_descr},
        {"rocsparse_destroy_dnmat_descr", &t.destroy_dnmat_descr},
        {"rocsparse_create_csr_descr", &t.create_csr_descr},
        {"rocsparse_destroy_spmat_descr", &t.destroy_spmat_descr},
        {"rocsparse_spmat_get_size", &t.spmat_get_size},
        {"rocsparse_csr_set_pointers", &t.csr_set_pointers},
        {"rocsparse_dense_to_sparse", &t.dense_to_sparse},
        {"rocsparse_spmm", &t.spmm},
    };
    const char *missing[sizeof need / sizeof need[0]];
    size_t n_missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; ++i)
        if (!pit_hip_resolve(lib, need[i].name, need[i].slot)) missing[n_missing++] = need[i].name;
    if (n_missing) {
        size_t used = 0;
        append(rs_why, sizeof rs_why, &used, "%s lacks ", rs_opened);
        for (size_t i = 0; i < n_missing; ++i) append(rs_why, sizeof rs_why, &used, "%s%s", i ? ", " : "", missing[i]);
        rs_loaded = -1; /* the library stays loaded: it may have registered kernels */
        return;
    }
    pit_hip_resolve(lib, "rocsparse_get_version", &t.get_version);
    rs = t;
    rs_lib = lib;
    rs_loaded = 1;
}

pit_status pit_hip_sparse_load(void)
{
    pthread_once(&rs_once, load_rocsparse);
    if (rs_loaded == 1) return PIT_SUCCESS;
    return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "hip rocSPARSE baseline: %s", rs_why);
}

const char *pit_hip_sparse_library(void)
{
    pthread_once(&rs_once, load_rocsparse);
    return rs_opened;
}

/* ---- errors -------------------------------------------------------------------------- */

static const char *status_name(rocsparse_status r)
{
#define RS_STATUS_NAME(name) "rocsparse_status_" #name,
    static const char *const names[] = {RS_STATUSES(RS_STATUS_NAME)};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown rocsparse_status";
}

static pit_status sparse_fail(rocsparse_status r, const char *what, const char *file, int line)
{
    pit_status st = r == rocsparse_status_memory_error ? PIT_ERR_OUT_OF_MEMORY
                    : r == rocsparse_status_not_implemented || r == rocsparse_status_arch_mismatch ||
                            r == rocsparse_status_type_mismatch
                        ? PIT_ERR_UNSUPPORTED
                        : PIT_ERR_BACKEND;
    return pit_hip_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, status_name(r),
                               pit_hip_basename(file), line);
}

/* Stores the first failure in st and jumps to the cleanup label. */
#define RS_CHECK_GOTO(call, what, st, label) \
    PIT_BASELINE_CHECK_GOTO(rocsparse_status, rocsparse_status_success, sparse_fail, call, what, st, label)

static const pit_baseline_lib lib_rocsparse = {
    "rocSPARSE", {rocsparse_datatype_f32_r, rocsparse_datatype_f16_r, rocsparse_datatype_bf16_r}};

static void *dev(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

/* ---- operands ------------------------------------------------------------------------ */

/* A row-major dense descriptor; a 16-bit type this rocSPARSE does not know
 * (2.3.3 has none) is PIT_ERR_UNSUPPORTED_DTYPE, said so. */
static pit_status dense_descr(const pit_baseline_dense *d, const char *operand, rocsparse_dnmat_descr *out)
{
    rocsparse_status r = rs.create_dnmat_descr(out, d->rows, d->cols, d->ld, dev(d->ptr), (rocsparse_datatype)d->type,
                                               rocsparse_order_row);
    if (r == rocsparse_status_success) return PIT_SUCCESS;
    *out = NULL;
    if (r == rocsparse_status_invalid_value && d->type != rocsparse_datatype_f32_r)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED_DTYPE,
                                   "hip rocSPARSE baseline: %s rejects %s (rocsparse_create_dnmat_descr(%s) returned "
                                   "%d rocsparse_status_invalid_value): rocSPARSE before ROCm 6 has no 16-bit "
                                   "data types (f32 is supported)",
                                   rs_opened, d->type == rocsparse_datatype_f16_r ? "f16" : "bf16", operand, (int)r);
    char call[64];
    snprintf(call, sizeof call, "rocsparse_create_dnmat_descr(%s)", operand);
    return sparse_fail(r, call, __FILE__, __LINE__);
}

/* ---- the handle: one per context, used under c->lock --------------------------------- */

/* librocsparse brings its own libamdhip64: when that is not the runtime
 * this plug-in loaded (e.g. ROCm 6's .so.6 here, Debian's rocSPARSE 5.3 on
 * .so.5), two HIP runtimes would share the process. */
static pit_status same_runtime(void)
{
    void *theirs = dlsym(rs_lib, "hipMalloc"), *ours = NULL;
    memcpy(&ours, &pit_hip.Malloc, sizeof ours);
    if (theirs && ours && theirs != ours)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED,
                                   "hip rocSPARSE baseline: %s is linked with another HIP runtime (libamdhip64) than "
                                   "the one this plug-in loaded; install the rocSPARSE of the same ROCm",
                                   rs_opened);
    return PIT_SUCCESS;
}

void pit_hip_sparse_destroy(pit_hip_ctx *c)
{
    if (c->sparse && rs_loaded == 1) rs.destroy_handle((rocsparse_handle)c->sparse);
    c->sparse = NULL;
}

/* Device current and c->lock held. */
static pit_status make_handle(pit_hip_ctx *c)
{
    if (c->sparse) return PIT_SUCCESS;
    pit_status st = same_runtime();
    if (st != PIT_SUCCESS) return st;
    rocsparse_handle h = NULL;
    RS_CHECK_GOTO(rs.create_handle(&h), "rocsparse_create_handle", st, done);
    c->sparse = h;
    int v = 0;
    if (rs.get_version && rs.get_version(h, &v) == rocsparse_status_success && v > 0)
        snprintf(c->vendor.sparse_name, sizeof c->vendor.sparse_name, "rocSPARSE %d.%d.%d CSR", v / 100000,
                 v / 100 % 1000, v % 100);
    else
        snprintf(c->vendor.sparse_name, sizeof c->vendor.sparse_name, "rocSPARSE CSR");
done:
    return st;
}

static pit_status sparse_handle(pit_hip_ctx *c, hipStream_t s, rocsparse_handle *h)
{
    pit_status st = make_handle(c);
    if (st != PIT_SUCCESS) return st;
    *h = (rocsparse_handle)c->sparse;
    RS_CHECK_GOTO(rs.set_stream(*h, s), "rocsparse_set_stream", st, done);
done:
    return st;
}

/* ---- dense -> CSR -------------------------------------------------------------------- */

typedef struct csr {
    rocsparse_dnmat_descr dense; /* A as rocSPARSE sees it */
    rocsparse_spmat_descr mat;
    CUdeviceptr offsets, columns, values, buffer;
    int64_t nnz;
} csr;

static void csr_destroy(csr *A)
{
    if (A->dense) rs.destroy_dnmat_descr(A->dense);
    if (A->mat) rs.destroy_spmat_descr(A->mat);
    A->dense = NULL;
    A->mat = NULL;
}

/* Untimed: the descriptors, the conversion's work buffer, and the CSR
 * arrays at their largest (every element non-zero). */
static pit_status csr_prepare(rocsparse_handle h, hipStream_t s, const pit_baseline_dense *a,
                              pit_baseline_scratch *sc, csr *out)
{
    pit_status st = PIT_SUCCESS;
    memset(out, 0, sizeof *out);
    /* 32-bit indices where every count fits */
    int wide = a->rows * a->cols > INT32_MAX;
    rocsparse_indextype itype = wide ? rocsparse_indextype_i64 : rocsparse_indextype_i32;
    size_t ib = wide ? 8 : 4, bytes = 0;
    size_t most = (size_t)a->rows * (size_t)a->cols;
    if ((st = pit_baseline_scratch_alloc(sc, s, (size_t)(a->rows + 1) * ib, "CSR row offsets", &out->offsets)) !=
            PIT_SUCCESS ||
        (st = pit_baseline_scratch_alloc(sc, s, most * ib, "CSR columns", &out->columns)) != PIT_SUCCESS ||
        (st = pit_baseline_scratch_alloc(sc, s, most * a->el, "CSR values", &out->values)) != PIT_SUCCESS)
        goto done;
    if ((st = dense_descr(a, "A", &out->dense)) != PIT_SUCCESS) goto done;
    RS_CHECK_GOTO(rs.create_csr_descr(&out->mat, a->rows, a->cols, 0, dev(out->offsets), NULL, NULL, itype, itype,
                                      rocsparse_index_base_zero, (rocsparse_datatype)a->type),
                  "rocsparse_create_csr_descr", st, done);
    RS_CHECK_GOTO(rs.dense_to_sparse(h, out->dense, out->mat, rocsparse_dense_to_sparse_alg_default, &bytes, NULL),
                  "rocsparse_dense_to_sparse(buffer size)", st, done);
    st = pit_baseline_scratch_alloc(sc, s, bytes, "rocsparse_dense_to_sparse buffer", &out->buffer);
done:
    if (st != PIT_SUCCESS) csr_destroy(out);
    return st;
}

/* Timed: the analysis counts the non-zeros (rocSPARSE writes the sum into
 * the descriptor, on the host, after its stream has caught up), then the
 * arrays are attached and filled. */
static pit_status csr_convert(rocsparse_handle h, const pit_baseline_dense *a, csr *A)
{
    pit_status st = PIT_SUCCESS;
    int64_t r = 0, c = 0;
    size_t bytes = 0; /* not read: a non-NULL size with a buffer means "convert" */
    RS_CHECK_GOTO(rs.dense_to_sparse(h, A->dense, A->mat, rocsparse_dense_to_sparse_alg_default, NULL, dev(A->buffer)),
                  "rocsparse_dense_to_sparse(analysis)", st, done);
    RS_CHECK_GOTO(rs.spmat_get_size(A->mat, &r, &c, &A->nnz), "rocsparse_spmat_get_size", st, done);
    if (r != a->rows || c != a->cols || A->nnz < 0 || A->nnz > a->rows * a->cols) {
        st = pit_hip_host->error(PIT_ERR_BACKEND,
                                 "hip rocSPARSE baseline: after the analysis rocsparse_spmat_get_size reported "
                                 "%lld x %lld with %lld non-zeros for a %lld x %lld matrix",
                                 (long long)r, (long long)c, (long long)A->nnz, (long long)a->rows,
                                 (long long)a->cols);
        goto done;
    }
    RS_CHECK_GOTO(rs.csr_set_pointers(A->mat, dev(A->offsets), dev(A->columns), dev(A->values)),
                  "rocsparse_csr_set_pointers", st, done);
    RS_CHECK_GOTO(
        rs.dense_to_sparse(h, A->dense, A->mat, rocsparse_dense_to_sparse_alg_default, &bytes, dev(A->buffer)),
        "rocsparse_dense_to_sparse(convert)", st, done);
done:
    return st;
}

/* ---- C = A . B through CSR SpMM ------------------------------------------------------ */

/* One stage of rocsparse_spmm: f32 compute, host pointer mode (the handle's default). */
static rocsparse_status spmm_stage(rocsparse_handle h, const csr *A, rocsparse_dnmat_descr B,
                                   rocsparse_dnmat_descr C, rocsparse_spmm_stage stage, size_t *bytes, void *buffer)
{
    const float alpha = 1.f, beta = 0.f;
    return rs.spmm(h, rocsparse_operation_none, rocsparse_operation_none, &alpha, A->mat, B, &beta, C,
                   rocsparse_datatype_f32_r, rocsparse_spmm_alg_default, stage, bytes, buffer);
}

/* The buffer, which depends on the CSR just made, is allocated before
 * event 2; preprocess and compute are timed (events 2-3). */
static pit_status spmm(rocsparse_handle h, hipStream_t s, const pit_baseline_job *j, const csr *A,
                       pit_baseline_scratch *sc, pit_baseline_timer *t)
{
    rocsparse_dnmat_descr B = NULL, C = NULL;
    CUdeviceptr buffer = 0;
    size_t bytes = 0;
    pit_status st;
    if ((st = dense_descr(&j->b, "B", &B)) != PIT_SUCCESS || (st = dense_descr(&j->c, "C", &C)) != PIT_SUCCESS)
        goto done;
    RS_CHECK_GOTO(spmm_stage(h, A, B, C, rocsparse_spmm_stage_buffer_size, &bytes, NULL),
                  "rocsparse_spmm(buffer size)", st, done);
    if ((st = pit_baseline_scratch_alloc(sc, s, bytes, "rocsparse_spmm buffer", &buffer)) != PIT_SUCCESS ||
        (st = pit_baseline_mark(t, s)) != PIT_SUCCESS)
        goto done;
    RS_CHECK_GOTO(spmm_stage(h, A, B, C, rocsparse_spmm_stage_preprocess, &bytes, dev(buffer)),
                  "rocsparse_spmm(preprocess)", st, done);
    RS_CHECK_GOTO(spmm_stage(h, A, B, C, rocsparse_spmm_stage_compute, &bytes, dev(buffer)),
                  "rocsparse_spmm(compute)", st, done);
    st = pit_baseline_mark(t, s);
done:
    if (B) rs.destroy_dnmat_descr(B);
    if (C) rs.destroy_dnmat_descr(C);
    return st;
}

/* A job (cuda_baseline.h, which reads the times and frees sc): dense A ->
 * CSR timed (events 0-1), then for a matmul the SpMM (events 2-3). */
static pit_status run(pit_hip_ctx *c, hipStream_t s, const pit_baseline_job *j, pit_baseline_scratch *sc,
                      pit_baseline_timer *t)
{
    rocsparse_handle h = NULL;
    pit_status st = sparse_handle(c, s, &h);
    if (st != PIT_SUCCESS) return st;
    csr A;
    memset(&A, 0, sizeof A);
    if ((st = csr_prepare(h, s, &j->a, sc, &A)) == PIT_SUCCESS && (st = pit_baseline_mark(t, s)) == PIT_SUCCESS &&
        (st = csr_convert(h, &j->a, &A)) == PIT_SUCCESS && (st = pit_baseline_mark(t, s)) == PIT_SUCCESS &&
        j->matmul)
        st = spmm(h, s, j, &A, sc, t);
    csr_destroy(&A);
    return st;
}

/* ---- the plug-in entries -------------------------------------------------------------- */

pit_status pit_hip_vendor_sparse_matmul(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                        const pit_tdesc *C, double *convert_ms, double *compute_ms)
{
    pit_baseline_job j;
    pit_status st = pit_baseline_matmul_job(&lib_rocsparse, A, B, C, convert_ms, compute_ms, &j);
    if (st == PIT_SUCCESS) st = pit_hip_sparse_load();
    return st == PIT_SUCCESS ? pit_baseline_run(bctx, stream, run, &j) : st;
}

pit_status pit_hip_vendor_convert(void *bctx, void *stream, const pit_tdesc *A, int block, double *ms)
{
    pit_baseline_job j;
    pit_status st = pit_baseline_convert_job(&lib_rocsparse, A, block, ms, &j);
    if (st == PIT_SUCCESS) st = pit_hip_sparse_load();
    if (st != PIT_SUCCESS) return st;
    /* rocsparse_dense_to_sparse writes CSR, CSC and COO only; BSR would be
     * dense -> CSR -> rocsparse_csr2bsr_nnz + rocsparse_<t>csr2bsr (f32/f64
     * and complex in 2.3.3), the route that gave a wrong block count with
     * cuSPARSE on the H100 (cuda_baselines.c). Not wired up here. */
    if (block > 1)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED,
                                   "hip rocSPARSE baseline: dense -> BSR (%dx%d blocks) is not implemented: "
                                   "rocsparse_dense_to_sparse writes CSR, CSC and COO only, and pit does not run "
                                   "the dense -> CSR -> rocsparse_csr2bsr route",
                                   block, block);
    return pit_baseline_run(bctx, stream, run, &j);
}

/* "rocSPARSE 2.3.3 CSR" (the library's own version: 2.3 is ROCm 5.3's);
 * asked before the first call, so the handle is made here when it can be. */
const char *pit_hip_vendor_sparse_name(void *bctx)
{
    pit_hip_ctx *c = bctx;
    pthread_once(&rs_once, load_rocsparse);
    if (rs_loaded != 1) return "rocSPARSE (not found)";
    if (!c) return "rocSPARSE CSR";
    pthread_mutex_lock(&c->lock);
    /* a failure here is raised again, with its message, by the call that follows */
    if (!c->sparse && pit_hip_push(c) == PIT_SUCCESS) (void)make_handle(c);
    const char *name = c->vendor.sparse_name[0] ? c->vendor.sparse_name : "rocSPARSE CSR";
    pthread_mutex_unlock(&c->lock);
    return name;
}

/* ---- the check that runs without a GPU ------------------------------------------------- */

/* The descriptor calls are host-only in rocSPARSE (no handle, no device
 * memory touched: the pointers are only stored), so they run without a GPU
 * and check this file's enum values and argument order against the
 * library: what is created is read back. */
pit_status pit_hip_sparse_selfcheck(char *report, size_t size)
{
    size_t used = 0;
    pit_status st = pit_hip_sparse_load();
    if (report && size) report[0] = 0;
    if (st != PIT_SUCCESS) return st;
    static float host[64]; /* stands in for device arrays: never dereferenced */
    rocsparse_dnmat_descr d = NULL;
    rocsparse_spmat_descr m = NULL;
    int64_t r = -1, c = -1, nnz = -1;
    append(report, size, &used, "%s: every symbol resolved (rocsparse_get_version %s)\n", rs_opened,
           rs.get_version ? "present" : "absent");
    RS_CHECK_GOTO(rs.create_dnmat_descr(&d, 4, 8, 8, host, rocsparse_datatype_f32_r, rocsparse_order_row),
                  "rocsparse_create_dnmat_descr(f32, row order)", st, done);
    rocsparse_status gone = rs.destroy_dnmat_descr(d);
    d = NULL;
    RS_CHECK_GOTO(gone, "rocsparse_destroy_dnmat_descr", st, done);
    append(report, size, &used, "ok dense descriptor: f32 (%d), row order (%d)\n", (int)rocsparse_datatype_f32_r,
           (int)rocsparse_order_row);
    const rocsparse_indextype itypes[2] = {rocsparse_indextype_i32, rocsparse_indextype_i64};
    for (int i = 0; i < 2; ++i) {
        RS_CHECK_GOTO(rs.create_csr_descr(&m, 5, 7, 0, host, NULL, NULL, itypes[i], itypes[i],
                                          rocsparse_index_base_zero, rocsparse_datatype_f32_r),
                      "rocsparse_create_csr_descr", st, done);
        RS_CHECK_GOTO(rs.spmat_get_size(m, &r, &c, &nnz), "rocsparse_spmat_get_size", st, done);
        if (r != 5 || c != 7 || nnz != 0) {
            st = pit_hip_host->error(PIT_ERR_BACKEND,
                                     "rocsparse_spmat_get_size gave %lld x %lld, %lld non-zeros for a CSR "
                                     "descriptor created 5 x 7 with 0",
                                     (long long)r, (long long)c, (long long)nnz);
            goto done;
        }
        RS_CHECK_GOTO(rs.csr_set_pointers(m, host, host + 8, host + 16), "rocsparse_csr_set_pointers", st, done);
        gone = rs.destroy_spmat_descr(m);
        m = NULL;
        RS_CHECK_GOTO(gone, "rocsparse_destroy_spmat_descr", st, done);
        append(report, size, &used, "ok CSR descriptor: %s indices (%d), base zero, 5 x 7 read back\n",
               i ? "i64" : "i32", (int)itypes[i]);
    }
    /* information only: which 16-bit types this rocSPARSE knows */
    const rocsparse_datatype half[2] = {rocsparse_datatype_f16_r, rocsparse_datatype_bf16_r};
    for (int i = 0; i < 2; ++i) {
        rocsparse_status hr = rs.create_dnmat_descr(&d, 4, 8, 8, host, half[i], rocsparse_order_row);
        if (hr == rocsparse_status_success) rs.destroy_dnmat_descr(d);
        d = NULL;
        append(report, size, &used, "info %s (%d): %s\n", i ? "bf16" : "f16", (int)half[i],
               hr == rocsparse_status_success ? "accepted" : "not known to this rocSPARSE (baseline: f32 only)");
    }
    append(report, size, &used, "not checked without a GPU: the handle, rocsparse_dense_to_sparse, rocsparse_spmm\n");
done:
    if (d) rs.destroy_dnmat_descr(d);
    if (m) rs.destroy_spmat_descr(m);
    return st;
}
