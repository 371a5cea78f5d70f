/* tools/conformance.h - the conformance suite: one table of operators, each
 * running its cases on a context against the CPU reference in core. */
#ifndef PIT_CONFORMANCE_H
#define PIT_CONFORMANCE_H

#include <stdio.h>

#include "pit.h"
#include "reference.h"

typedef struct conf_tally {
    int passed, failed, skipped;
    char skip_reason[160];
} conf_tally;

typedef struct conf_opts {
    int quick;
    int verbose;
    uint64_t seed;
} conf_opts;

typedef struct conf_op {
    const char *name;
    void (*run)(pit_context *ctx, const conf_opts *o, conf_tally *t);
} conf_op;

/* Every operator's cases; a new operator adds one line to the table in conformance.c. */
void conf_matmul(pit_context *ctx, const conf_opts *o, conf_tally *t);
/* The operators of dynamic-sparse models (conf_ops.c). */
void conf_sddmm(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_softmax(pit_context *ctx, const conf_opts *o, conf_tally *t);
/* pit_sparse_attention's cases (conf_ops.c), then pit_attention's (conf_attention.c). */
void conf_attention(pit_context *ctx, const conf_opts *o, conf_tally *t);
/* MoE: pit_moe_forward / _backward, and the expert FFN (conf_moe.c). */
void conf_sparse_attention(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_moe(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_moe_ffn(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_rows(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_ffn(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_backward(pit_context *ctx, const conf_opts *o, conf_tally *t);
void conf_prune(pit_context *ctx, const conf_opts *o, conf_tally *t);

/* Shared helpers for operator cases. */
/* Uploads doubles converted to the tensor's dtype. */
pit_status conf_upload(pit_tensor *t, const double *x, size_t n);
/* Downloads and converts to doubles. */
pit_status conf_download(const pit_tensor *t, double *x, size_t n);
/* Fills a tensor with NaN so an element the operator did not write fails. */
pit_status conf_poison(pit_tensor *t, size_t n);
/* Rounds values through the dtype, as the device will see them. */
void conf_round(pit_dtype dt, double *x, size_t n);
/* Records one compared case; prints a line when it fails (or verbose). */
void conf_check(conf_tally *t, const conf_opts *o, const char *what, double err, double tol);
/* Downloads t into host (n elements) and records the comparison with ref
 * (relative norm against tol); a failed download is a failed case. */
void conf_compare_tensor(conf_tally *t, const conf_opts *o, const char *what, const pit_tensor *out,
                         double *host, const double *ref, size_t n, double tol);
/* Records a case whose pit call failed. */
void conf_call_failed(conf_tally *t, const char *what, pit_status s);

/* ---- buffers of the operator suites (conf_buf.c) ---------------------------- */
/* f32, f16, bf16: the float dtypes every suite runs through */
extern const pit_dtype conf_dtypes[3];
/* A device tensor with its host copy in doubles. */
typedef struct dbuf {
    pit_tensor *t;
    double *h;
    size_t n;
} dbuf;
pit_status dbuf_make(pit_context *ctx, pit_dtype dt, int rank, const int64_t *shape, dbuf *b);
void dbuf_free(dbuf *b);
pit_dtype dbuf_dtype(const dbuf *b);
/* Random values in [-1, 1] rounded through the dtype, uploaded. */
pit_status dbuf_random(dbuf *b, pit_rng *rng);
/* The host copy rounded through the dtype, uploaded. */
pit_status dbuf_upload(dbuf *b);
/* Downloads `out` and compares it with ref (the tolerance of dt). */
void conf_compare(conf_tally *t, const conf_opts *o, const char *what, dbuf *out,
                  const double *ref, pit_dtype dt);
/* A call's status: a failure is recorded; returns 1 when it succeeded. */
int conf_call_ok(conf_tally *t, const char *what, pit_status s);
/* n doubles (zeros), NULL when out of memory. */
double *conf_ref_alloc(size_t n);
/* a when it is not PIT_ERR_UNSUPPORTED, else b: two probes' verdict. */
pit_status conf_either(pit_status a, pit_status b);
/* 0/1 patterns of masks and sparse operands (conformance.c). */
typedef enum pattern_kind {
    PAT_DENSE,
    PAT_EMPTY,
    PAT_BLOCKS_ALIGNED,   /* 32x32 blocks at 0.7 */
    PAT_BLOCKS_UNALIGNED, /* 8x8 blocks offset (3, 5) at 0.6 */
    PAT_FINE,             /* 1x1 at 0.5 */
    PAT_MASKED_ROWS,      /* 4x8 blocks at 0.5, and rows 0 and 3 fully masked */
    PAT_WINDOW_GLOBAL,    /* attention: sliding window 4 + 2 global tokens */
    PAT_LONGFORMER,       /* attention: sliding window 32 + 6 global tokens at random
                           * positions (their rows and their columns) */
    PAT_MANY_GLOBAL,      /* attention: sliding window 16 + 160 global tokens at random
                           * positions (more heavy rows than key-column tiles gather) */
    PAT_COUNT
} pattern_kind;
extern const char *const conf_pattern_names[PAT_COUNT];
/* Fills a 0/1 pattern of batch x m x n. */
void conf_make_pattern(pit_rng *rng, pattern_kind k, int64_t batch, int64_t m, int64_t n,
                       double *x);

/* Tiny tensors of one dtype for probing an operator with a dtype the device
 * lacks: m[] are [2,2] and b[] [1,2,2] of that dtype, mask [2,2] f32, ids
 * [2,1] i32 (zeros), gates [2,1] f32. Any may be NULL if its creation failed. */
typedef struct conf_probe_kit {
    pit_tensor *m[5], *b[4], *mask, *ids, *gates;
} conf_probe_kit;
/* Calls the operator(s) of a suite on the kit; returns the first status that
 * is not PIT_ERR_UNSUPPORTED, else PIT_ERR_UNSUPPORTED. */
typedef pit_status (*conf_probe_fn)(pit_context *ctx, const conf_probe_kit *kit);
/* 1 when the device has dt. Otherwise the operator must refuse dt with
 * PIT_ERR_UNSUPPORTED (probe; recorded as a pass, or a failure naming `op`),
 * and `ncases` cases are counted as skipped with the reason recorded once. */
int conf_dtype_supported(pit_context *ctx, pit_dtype dt, conf_tally *t, int ncases,
                         const char *op, conf_probe_fn probe);

#endif
