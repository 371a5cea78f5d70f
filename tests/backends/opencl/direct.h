/*
 * direct.h - what the files of test_opencl_direct share: a tiny pit_host of
 * their own, dtype conversions, deterministic data and sparsity patterns,
 * device tensors and indexes, and the checks of a result against a double
 * CPU reference.
 */
#ifndef PIT_OCL_TEST_DIRECT_H
#define PIT_OCL_TEST_DIRECT_H

#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "ocl_internal.h" /* white-box checks: program cache, native queues */

const pit_backend *pit_backend_register(const pit_host *host);

/* ---- the host (direct_support.c) ------------------------------------------------- */

extern char g_error[4096];
extern int g_verbose;
extern int g_fail_next_alloc;
extern const pit_host g_host;
const char *host_cache_dir(void);

/* ---- elements, data and patterns ---------------------------------------------------- */

/* u8 is a mask only: v is the byte (0..255). */
void store_elem(pit_dtype t, void *base, size_t i, double v);
double load_elem(pit_dtype t, const void *base, size_t i);
double hash01(uint64_t seed, int64_t a, int64_t b, int64_t c);
/* Non-zero value in [-1, 1], representable in every dtype after rounding. */
double value_at(uint64_t seed, int64_t a, int64_t b, int64_t c);

/* Sparsity patterns of A. */
enum { PAT_DENSE, PAT_ZERO, PAT_K32X1, PAT_M1X64, PAT_K32X64, PAT_FINE, PAT_COUNT };
extern const char *pat_name[PAT_COUNT];
int is_zero(int pat, uint64_t seed, int64_t b, int64_t m, int64_t k);

/* ---- test bookkeeping ----------------------------------------------------------------- */

extern int g_checks, g_failures;

#define EXPECT(cond, ...)                                  \
    do {                                                   \
        ++g_checks;                                        \
        if (!(cond)) {                                     \
            ++g_failures;                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                  \
            fprintf(stderr, "\n");                         \
        }                                                  \
    } while (0)

#define OK(call)                                                                       \
    do {                                                                               \
        pit_status st_ = (call);                                                       \
        if (st_ != PIT_SUCCESS) {                                                      \
            fprintf(stderr, "FATAL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call,  \
                    (int)st_, g_error);                                                \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

extern const pit_backend *be;
extern void *ctx, *stream;

/* ---- tensors on the device ---------------------------------------------------------- */

typedef struct dtensor {
    pit_tdesc d;
    size_t bytes;   /* whole buffer */
    void *host;     /* whole buffer image */
} dtensor;

/* A (batch x rows x cols) tensor with row padding `pad` and an element offset. */
void dtensor_make(dtensor *t, pit_dtype dt, int64_t batch, int64_t rows, int64_t cols, int pad,
                  int off, int rank3);
size_t elem_index(const dtensor *t, int64_t b, int64_t r, int64_t c);
void dtensor_free(dtensor *t);

/* ---- one case ---------------------------------------------------------------------- */

typedef struct shape {
    int64_t batch, M, K, N;
    int pad, off;
} shape;

/* The micro-tile candidates every case detects at once. */
#define NCANDS 5
extern const pit_microtile g_cands[NCANDS];

typedef struct host_index {
    pit_index idx;
    int32_t *counts, *entries, total;
} host_index;

void index_make(host_index *h, pit_microtile t, int64_t batch, int64_t M, int64_t K);
void index_free(host_index *h);
void index_read(host_index *h);
/* Every candidate micro-tile of g_cands indexed by one detect call over X. */
void detect_candidates(host_index idx[NCANDS], const pit_tdesc *X, int64_t batch, int64_t M,
                       int64_t K);
/* Checks an index against the micro-tiles of A that hold a non-zero; returns
 * the longest group's count. */
int32_t check_index(const host_index *h, const dtensor *A, int64_t batch, int64_t M, int64_t K,
                    const char *label);
/* Reads C back and compares with the reference; padding must still be NaN. */
void check_c(dtensor *C, const double *ref, int64_t batch, int64_t M, int64_t N,
             const char *label);
/* C filled with NaN, so an element never written shows. */
void poison(dtensor *C);

/* ---- the operator families' cases ------------------------------------------------------ */

/* direct_matmul.c: detection, sparse matmul (axes K and M) and dense GEMM. */
void run_case(const shape *s, int pat, pit_dtype dt);
void test_errors(void);
/* direct_masks.c: u8 masks through detection, sddmm, softmax and its backward. */
void run_mask_case(const shape *s, int pat, int shared);
void test_mask_errors(void);

#endif /* PIT_OCL_TEST_DIRECT_H */
