/*
 * test_cuda_ops.h - what the parts of test_cuda_ops share: the backend under
 * test, device tensors with their host values, the block index built by the
 * backend's own detect, and the comparison with the CPU references.
 */
#ifndef PIT_TEST_CUDA_OPS_H
#define PIT_TEST_CUDA_OPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "reference.h"

extern const pit_backend *be;
extern void *bctx, *stream;
extern int failures;
extern pit_rng rng;
extern int test_arch; /* sm_XY as XY (test_cuda_ops.c) */

/* the host's last error message (test_cuda_ops.c) */
const char *test_last_error(void);

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        pit_status st_ = (call);                                                                          \
        if (st_ != PIT_SUCCESS) {                                                                         \
            printf("FAIL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)st_, test_last_error()); \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

/* ---- device tensors (contiguous) ------------------------------------------ */
typedef struct dten {
    pit_tdesc d;
    size_t n;
    double *h; /* host values (as the dtype holds them) */
} dten;

/* ---- the index, built by the backend's detect on the mask ------------------- */
typedef struct dindex {
    pit_index ix;
    int32_t max_entries;
} dindex;

extern const pit_dtype test_dtypes[3];
extern const char *const test_kind_names[4];

const char *dt_name(pit_dtype d);
size_t el_size(pit_dtype d);
void to_bytes(pit_dtype dt, const double *x, size_t n, void *out);
void poison(const dten *t);
dten make(pit_dtype dt, int rank, const int64_t *shape, const double *data);
void download(const dten *t, double *out);
void drop(dten *t);
double *randoms(size_t n);
double *mask_values(int64_t batch, int64_t rows, int64_t cols, int br, int bc, double sparsity, int kind);
void poison_index(const dindex *r);
pit_tdesc detect_view(const dten *mask, int64_t batch);
dindex build_index_marked(const dten *mask, int64_t batch, int br, int bc, pit_axis axis, int marks);
dindex build_index(const dten *mask, int64_t batch, int br, int bc, pit_axis axis);
void check_marks(const dten *mask, int64_t mb, const dindex *r, int marks, const char *what);
void drop_index(dindex *r);
void compare(const char *what, const dten *out, const double *ref);

/* median of 20 timed runs after 3 warm-ups, device events; host_ms (may be
 * NULL): the host's queueing time a run (test_cuda_ops.c) */
double test_time_ms(void (*fn)(void *), void *user, double *host_ms);

/* the parts: correctness cases and the benches */
int test_correctness(void);
void test_bench_attention(void);
void test_bench_moe(const char *loads);

#endif /* PIT_TEST_CUDA_OPS_H */
