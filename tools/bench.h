/* tools/bench.h - shared pieces of the pit bench suites. */
#ifndef PIT_BENCH_H
#define PIT_BENCH_H

#include <stdio.h>

#include "pit.h"
#include "reference.h"

typedef struct bench_opts {
    int quick;
    int64_t size;       /* M = N = K */
    int repeats;
    int warmup;
    int sets;           /* input sets rotated */
    int explain;
    int dtype_mask;     /* 1 << pit_dtype */
    int dtype_given;    /* --dtype named the dtypes */
    const char *json_path;
    const char *plot_path;
    const char *suite;
    const char *only;   /* --only: an attention kind (window, blocks, causal, decode) or a MoE model; NULL: all */
    pit_stream *stream; /* where bench_time records its events; NULL: default */
    double l2_gbps;     /* L2 bandwidth of the run (0: not measured) */
    size_t l2_bytes;    /* the buffer it was measured with */
} bench_opts;

/* A JSON writer kept deliberately tiny: objects of numbers and strings. */
typedef struct bench_json {
    FILE *f;
    int first;
} bench_json;

void bench_progress(const char *what, int done, int total);
double bench_median(double *v, int n);
double bench_spread(double *v, int n); /* (p90 - p10) / median */

/* Times `fn(arg, i)` with device events: warm-up, then `repeats` runs, input
 * set i % sets. Returns the median in ms, fills spread. */
typedef pit_status (*bench_fn)(void *arg, int i);
pit_status bench_time(pit_context *ctx, const bench_opts *o, bench_fn fn, void *arg, double *median_ms,
                      double *spread);

/* A forced alternative of pit_matmul: a micro-tile, or the dense GEMM. */
typedef struct bench_forced {
    const char *name;
    pit_microtile t;
    int dense;
} bench_forced;
/* Times fn with *opt set to each of alts[0..n) in turn (an alternative that
 * fails is left out) and restores the defaults. best_ms: the fastest
 * (INFINITY when none ran), best_name its name ("?" then). */
void bench_best_forced(pit_context *ctx, const bench_opts *o, const bench_forced *alts, int n,
                       pit_matmul_options *opt, bench_fn fn, void *arg, double *best_ms, const char **best_name);

/* Host <-> device copies of data kept as doubles on the host, stored as dt. */
pit_status bench_upload(pit_tensor *t, pit_dtype dt, const double *x, size_t n);
pit_status bench_download(const pit_tensor *t, pit_dtype dt, double *x, size_t n);
/* Rounds x through dt in place, so a reference sees what the device sees. */
void bench_round(pit_dtype dt, double *x, size_t n);

/* The message of a failed call (`call` its text), kept in buf before the
 * clean-up calls clear pit_last_error(). Returns s. */
pit_status bench_note_failure(char *buf, size_t size, const char *call, pit_status s);
/* Runs a pit call; on failure keeps its message in errbuf (an array), sets
 * the caller's `st` and jumps to its `done` label. */
#define BENCH_TRY(errbuf, call)                                                                        \
    do {                                                                                               \
        pit_status s_ = (call);                                                                        \
        if (s_ != PIT_SUCCESS) {                                                                       \
            st = bench_note_failure(errbuf, sizeof(errbuf), #call, s_);                                \
            goto done;                                                                                 \
        }                                                                                              \
    } while (0)
/* For BENCH_TRY after host allocations: PIT_ERR_OUT_OF_MEMORY unless all succeeded. */
pit_status bench_host_ok(int all_allocated);

/* The rows of an output checked against the reference: all of them with
 * --quick (or when there are fewer than `full`), else `full` rows spread
 * over the output; bench_sample_row gives the i-th. */
int64_t bench_sample_count(const bench_opts *o, int64_t rows, int64_t full);
int64_t bench_sample_row(const bench_opts *o, int64_t rows, int64_t full, int64_t i);

/* The dtypes a suite runs, bf16 then f16 then f32: those --dtype named,
 * else the mask `defaults` (1 << pit_dtype). One the device cannot run is
 * skipped by name, on stdout and in the JSON's "<suite>_skipped" list.
 * Returns how many are in out[0..3). */
int bench_suite_dtypes(const bench_opts *o, const pit_device_info *d, const char *suite, int defaults,
                       pit_dtype *out, FILE *json);

/* The memory bandwidth: copies of `bytes` (1 MB at least; make them larger
 * than any cache), read + write counted, GB/s. */
pit_status bench_measure_memory(pit_context *ctx, const bench_opts *o, size_t bytes, double *gbps);
/* The run's L2 bandwidth: queued copies of a buffer that stays in L2;
 * *bytes says which size (bench_floors.c). */
pit_status bench_measure_l2(pit_context *ctx, const bench_opts *o, double *gbps, size_t *bytes);
/* Bytes the plan of a report moves through L2 for C[m,n] = A[m,k] . B[k,n],
 * A sparse; -1 when the report does not say enough. The model and its
 * assumptions: bench_floors.c. */
double bench_l2_bytes(const pit_report *r, int64_t m, int64_t n, int64_t k, pit_dtype dt);
/* Those bytes at the run's L2 bandwidth, in ms; -1 when either is unknown. */
double bench_l2_floor_ms(const bench_opts *o, double l2_bytes);
/* "L2 floor at X GB/s (copies of N KB in L2)" for a table's heading. */
const char *bench_l2_phrase(const bench_opts *o, char *buf, size_t size);

/* The rows of a suite's table and of its JSON list, and whether the suite
 * failed. print and json_row take the suite's result. */
typedef struct bench_table {
    const char *suite;
    FILE *json;
    void (*print)(const void *result);
    void (*json_row)(FILE *f, const void *result, int first);
    int written, failed;
} bench_table;
/* A point's outcome: on failure (s) its message on stderr, else its row
 * printed and written to the JSON; the suite fails on either or when ok is
 * 0 (its result off the reference). */
void bench_table_add(bench_table *t, const char *what, pit_status s, const char *error, int ok,
                     const void *result);

int bench_matmul_suite(pit_context *ctx, const bench_opts *o, FILE *json);
int bench_convert_suite(pit_context *ctx, const bench_opts *o, FILE *json);
int bench_select_suite(pit_context *ctx, const bench_opts *o, FILE *json);
int bench_layers_suite(pit_context *ctx, const bench_opts *o, FILE *json);
int bench_decode_suite(pit_context *ctx, const bench_opts *o, FILE *json);
int bench_moe_suite(pit_context *ctx, const bench_opts *o, FILE *json);
/* the attention suite's kinds of points (--only takes one) */
#define BENCH_ATTENTION_KINDS 4
extern const char *const bench_attention_kinds[BENCH_ATTENTION_KINDS];
/* 1 when name is a kind of the attention suite's points (--only takes one) */
int bench_attention_has_kind(const char *name);
/* 1 when name is a model of the moe suite (--only takes one) */
int bench_moe_has_model(const char *name);
/* the moe suite's models, comma-separated, for messages */
const char *bench_moe_model_list(void);
int bench_attention_suite(pit_context *ctx, const bench_opts *o, FILE *json);

#endif
