/*
 * core/pit/select.h - PIT rules, the tile database and the online selection
 * (the paper's Algorithm 1). Backend independent, pure host C.
 */
#ifndef PIT_CORE_SELECT_H
#define PIT_CORE_SELECT_H

#include "backend.h"

#define PIT_MAX_CANDIDATES 8

/* ---- rules -------------------------------------------------------------- */
/* Operators described as tensor expressions (see rules.c). */
typedef enum pit_op_kind {
    PIT_OP_MATMUL = 0,     /* C[m,n] += A[m,k] B[k,n]                 */
    PIT_OP_BATCH_MATMUL,   /* C[b,m,n] += A[b,m,k] B[b,k,n]           */
    PIT_OP_SDDMM,          /* C[m,n] = mask[m,n] * sum_k A[m,k] B[n,k] */
    PIT_OP_SOFTMAX,        /* Y[m,n] = exp(X[m,n]) / sum_n exp(X[m,n]) */
    PIT_OP_ELEMENTWISE,    /* Y[m,n] = f(X[m,n])                      */
    PIT_OP_MOE_MATMUL,     /* Y[e,t,n] += X[tok(e,t),k] W[e,k,n]      */
    PIT_OP_COUNT
} pit_op_kind;

/* An operator written as a tensor expression, from which rules.c derives the
 * PIT rules. Each dimension of a tensor is indexed by the SUM of the axes in
 * its mask: x[i] is one bit, a sliding window x[i + r] is two. An axis is
 * permutation invariant (PI) when it is not a scan axis and every dimension it
 * indexes is indexed by it alone (see pit_expr_axis_invariant). */
#define PIT_EXPR_MAX_AXES 6
#define PIT_EXPR_MAX_TENSORS 4
#define PIT_EXPR_MAX_DIMS 4

typedef struct pit_expr_axis {
    const char *name;
    pit_axis role;   /* K, M or N in matmul-like operators, else AUTO         */
    int reduced;     /* summed over: absent from the output                   */
    int scan;        /* order matters along it (prefix sum, recurrence)       */
    int split_ok;    /* reduced: partial sums may be added later (linear); 0
                      * when a non-linear step follows (softmax's division)   */
} pit_expr_axis;

typedef struct pit_expr_tensor {
    const char *name;
    int output;
    int rank;
    uint32_t dims[PIT_EXPR_MAX_DIMS]; /* axis masks, outermost first; the
                                       * last dimension is the contiguous one */
} pit_expr_tensor;

typedef struct pit_expr {
    const char *name;
    int naxes;
    int ntensors;
    pit_expr_axis axes[PIT_EXPR_MAX_AXES];
    pit_expr_tensor tensors[PIT_EXPR_MAX_TENSORS];
} pit_expr;

/* One PIT rule: the non-zero micro-tiles of a sparse tensor may be gathered
 * along gather_axis. A micro-tile of the rule spans any extent >= 1 along the
 * gathered dimension (its granularity) and exactly the dense tile's extent
 * along the other (group) dimensions; batch-like group axes have extent 1. */
typedef struct pit_rule {
    int tensor;          /* the sparse tensor, index into expr->tensors        */
    int gather_axis;     /* index into expr->axes                              */
    int gather_dim;      /* the sparse tensor's dimension it indexes           */
    pit_axis axis;       /* gather_axis's role (K, M, N) or AUTO               */
    int accumulate;      /* a group holds part of a reduction: SWrite adds     */
    int contiguous;      /* gather_dim is the innermost one: a micro-tile
                          * narrower than PIT_TRANSACTION_BYTES along it is a
                          * strided gather (see pit_microtile_slow)            */
} pit_rule;

#define PIT_TRANSACTION_BYTES 32 /* one memory transaction (NVIDIA sector) */

/* The built-in expressions: "matmul", "batch_matmul", "sddmm", "softmax",
 * "elementwise", "moe_matmul", and the negative examples "cumsum" and
 * "conv1d" (plus "conv1d_channels"). NULL when unknown. */
const pit_expr *pit_expr_find(const char *name);
/* The expression of an operator kind; NULL for an invalid kind. */
const pit_expr *pit_expr_of_op(pit_op_kind op);
/* Index of the named axis / tensor, -1 when absent. */
int pit_expr_axis_index(const pit_expr *e, const char *name);
int pit_expr_tensor_index(const pit_expr *e, const char *name);
/* 1 when permuting axis (consistently in every tensor) leaves the result unchanged. */
int pit_expr_axis_invariant(const pit_expr *e, int axis);
/* The rules for sparse tensor `tensor` of e: at most max, returns how many
 * (0 when no axis of the tensor can be gathered). */
int pit_rules_derive(const pit_expr *e, int tensor, pit_rule *out, int max);
/* 1 when the micro-tile (on the row-major sparse operand, rows x cols) is
 * narrower than one memory transaction along the contiguous dimension. */
int pit_microtile_slow(const pit_microtile *t, pit_dtype dtype);
/* Cost multiplier of a strided gather for a dense tile: see rules.c. */
double pit_slow_penalty(const pit_microtile *t, pit_dtype dtype, const pit_tile *tile);

/* Micro-tile candidates the detection computes for a matmul whose sparse
 * operand is `sparse`, for dtype and the operand's shape (rows x cols).
 * Writes at most max candidates, returns how many: at least one whenever
 * max >= 1 and the shape is valid (a tiny operand gets the canonical {32,1,K},
 * or {32,1,N} for sparse B, with partial edge tiles; a sparse A of fewer than
 * 16 rows, as in decode, always gets {16,1,K} and {32,1,K} first). Every candidate
 * respects the rule's permutation-invariant axis. Sparse B gets only N-axis
 * candidates (the backend contract names B sparse only through axis N). */
int pit_matmul_candidates(pit_sparse_operand sparse, pit_dtype dtype,
                          int64_t rows, int64_t cols,
                          pit_microtile *out, int max);

/* 1 when a database tile can compute micro-tile t (select.c's table:
 * matmul_k bm == Tm, matmul_m bk == Tk, matmul_n bk == Tk). */
int pit_tile_fits(const pit_microtile *t, const pit_tile *tile);

/* ---- tile database -------------------------------------------------------- */
typedef struct pit_tiledb pit_tiledb;

/* What a line of the database describes (one kernel kind each). */
typedef enum pit_tile_op {
    PIT_TILE_DENSE = 0,    /* "dense":    the dense GEMM (vendor or pit's own) */
    PIT_TILE_MATMUL_K,     /* "matmul_k": sparse A gathered along K; bm == Tm  */
    PIT_TILE_MATMUL_M,     /* "matmul_m": sparse A gathered along M; bk == Tk  */
    PIT_TILE_MATMUL_N,     /* "matmul_n": sparse B gathered along N; bk == Tk  */
    PIT_TILE_FILL,         /* "fill":     writing a bm x bn tile of C (zeroing C
                            *             before an accumulating kernel)        */
    PIT_TILE_ACCUM,        /* "accum":    adding a bm x bn partial tile into C
                            *             with atomics (axis M and N SWrite)    */
    PIT_TILE_DETECT,       /* "detect":   the detection pass over bm x bn
                            *             elements of the sparse operand (one
                            *             candidate; bk is 1)                   */
    PIT_TILE_CALL,         /* "call":     what a sparse call costs on top of
                            *             its kernels: the count read-back that
                            *             stalls the stream, the host-side
                            *             selection, the extra launches (bm =
                            *             bn = bk = 1)                          */
    PIT_TILE_MOE,          /* "moe":      the grouped GEMM of the MoE expert
                            *             layer (moe_matmul): bm token-slots of
                            *             one expert x bn outputs x bk of H     */
    PIT_TILE_ROWS,         /* "rows":     the row-sparse matmul (matmul_rows):
                            *             bm listed rows x bn columns x bk of K */
    PIT_TILE_READ,         /* "read":     streaming bm x bn elements from device
                            *             memory once: what bounds a call that
                            *             moves more bytes than it computes  */
    PIT_TILE_STREAM,       /* "stream":   a settled sparse matmul along K with
                            *             one-wide column micro-tiles and at
                            *             most bm rows of A (decode): bn x bk
                            *             gathered elements of B's rows, plus
                            *             us_per_out once a call            */
    PIT_TILE_OP_COUNT
} pit_tile_op;

/* One line: `device backend op dtype bm bn bk threads stages tensor_core
 * us_per_tile gflops [us_per_out]`. us_per_tile is the device time of ONE
 * tile-step (one bm x bn x bk slab: 2*bm*bn*bk flops) amortised over a full
 * device: a kernel of T tile-steps, T large enough to fill the device, takes
 * T * us_per_tile. us_per_out (optional, 0 when absent) is the part of a
 * sparse kernel that does not shrink with the sparsity, per bm x bn tile of C
 * (writing C, zeroing it, the pipeline's fill and drain); `pit tune` fits both
 * from a full and a sparse index, and then us_per_tile already holds the
 * gather's cost (measured with the narrowest micro-tile). gflops = 2*bm*bn*bk
 * / us_per_tile / 1e3 (informational; 0 for fill, accum, detect and call,
 * whose costs are per bm x bn tile of C, per bm x bn elements of the sparse
 * operand and per call). */
typedef struct pit_tiledb_entry {
    char device[64];   /* fnmatch glob on the device name, arch or vendor */
    char backend[16];  /* "cuda", "hip", "opencl" or "*"                   */
    pit_tile_op op;
    pit_dtype dtype;
    pit_tile tile;
    double us_per_tile;
    double gflops;
    double us_per_out;
} pit_tiledb_entry;

/* "dense", "matmul_k", "matmul_m", "matmul_n", "fill", "accum", "detect", "call",
 * "moe", "rows"; "?" if invalid. */
const char *pit_tile_op_name(pit_tile_op op);
/* The one definition of the cost unit, for `pit tune`: a kernel that ran
 * tile_steps tile-steps (filling the device) in kernel_us. */
double pit_tiledb_us_per_tile(double kernel_us, int64_t tile_steps);
double pit_tiledb_gflops(const pit_tile *tile, double us_per_tile);

/* Loads, in order: $PIT_TILEDB, the tuned file of this exact device under the
 * cache folder, the shipped family defaults (searched next to the library and
 * in the source tree). Never fails for a malformed file: it records the
 * problem (file:line: what) for PIT_LOG=debug and goes on with the next source.
 * *db is never NULL on PIT_SUCCESS. */
pit_status pit_tiledb_open(const pit_device_info *dev, pit_tiledb **db);
void pit_tiledb_close(pit_tiledb *db);
/* Which file the entries came from (for pit info and the debug log). */
const char *pit_tiledb_source(const pit_tiledb *db);
/* Every problem met while loading, one "file:line: what" a line; "" if none. */
const char *pit_tiledb_warnings(const pit_tiledb *db);
/* The entries in use (after the per op/dtype fallback), for pit info/tune. */
const pit_tiledb_entry *pit_tiledb_entries(const pit_tiledb *db, int *count);
/* The shipped family of a device ("nvidia-sm90", "amd-gfx9", "opencl-cpu"),
 * NULL when there is none. */
const char *pit_tiledb_family(const pit_device_info *dev);
/* Where `pit tune` writes this device's file: <cache>/tiledb/<name>.tiledb.
 * PIT_ERR_IO when there is no cache folder. */
pit_status pit_tiledb_tuned_path(const pit_device_info *dev, char *buf, size_t size);
/* Writes entries as a database file atomically (temp file + rename). The
 * header comment (may be NULL, may hold several lines) is written as # lines.
 * Invalid entries are refused (PIT_ERR_INVALID_ARGUMENT): what is written
 * always loads. */
pit_status pit_tiledb_write(const char *path, const pit_tiledb_entry *entries, int n,
                            const char *header_comment);

/* ---- selection ------------------------------------------------------------ */
/* How often a settled plan looks at every candidate again, by default (a
 * context may set another interval: pit_context_set_redetect_interval).
 * While the choice is the dense GEMM, detection runs only every this many
 * calls (dense is exact whatever the pattern, so skipping detection can cost
 * speed, never a wrong result); while it is a sparse kernel, the calls in
 * between detect only the chosen candidate (its index is all the kernel
 * needs). Selection costs both. */
#define PIT_REDETECT_EVERY 8
#define PIT_REDETECT_EVERY_MAX 1024

typedef struct pit_candidate_stats {
    pit_microtile tile;
    int32_t groups;           /* all batches */
    int32_t groups_per_batch;
    int32_t capacity;         /* micro-tiles along the gathered axis per group */
    const int32_t *counts;    /* host copy of counts[groups] */
} pit_candidate_stats;

typedef struct pit_problem {
    pit_op_kind op;
    pit_dtype dtype;
    int64_t batch, m, n, k;
    pit_sparse_operand sparse;
    int32_t redetect_every; /* calls between full looks; 0: PIT_REDETECT_EVERY */
} pit_problem;

typedef struct pit_selection {
    int dense;                 /* 1: call the dense GEMM */
    int candidate;             /* index into the stats array: the chosen
                                * candidate, or when dense the one it beat */
    pit_tile tile;             /* dense computation tile */
    int32_t max_entries;       /* largest counts[g] of the chosen candidate */
    int64_t nonzero_tiles;
    double predicted_us;
    double runner_up_us;
    char choice[96];
    char runner_up[96];
} pit_selection;

/* nonzero_tiles and max_entries describe stats[candidate] (-1/0 when n ==
 * 0); when dense, candidate is the cheapest sparse one (the runner-up), or 0
 * when none can run. The dense option is named "dense GEMM"
 * (PIT_CHOICE_DENSE); pit_selection_name_dense puts the backend's name in
 * ("dense cuBLAS"). */
void pit_selection_name_dense(pit_selection *sel, const char *dense_name);
/* 'k', 'm', 'n' for a gathered axis (the choice strings), '?' otherwise. */
char pit_axis_letter(pit_axis a);

/* Algorithm 1: for each (candidate micro-tile, dense tile of the database)
 * pair, cost = dense tiles needed after compaction x tile cost + index cost;
 * the dense GEMM is always a candidate. Logs all candidates at debug level. */
pit_status pit_select(const pit_tiledb *db, const pit_problem *problem,
                      const pit_candidate_stats *stats, int n,
                      pit_selection *out);

/* The tile a fixed plan uses for a candidate without statistics. */
pit_status pit_select_fixed(const pit_tiledb *db, const pit_problem *problem,
                            const pit_microtile *tile, pit_tile *out);

/* The tile of a gathered GEMM whose rows are listed by an index built on the
 * device (op PIT_TILE_MOE or PIT_TILE_ROWS): the entry of op and dtype with
 * the lowest cost per flop, the first listed on a tie; a tile of zeros
 * where no layer has a row of the device (the built-in table has none: the
 * backend runs its own, core/backend.h). */
pit_status pit_select_gathered(const pit_tiledb *db, pit_tile_op op, pit_dtype dtype,
                               pit_tile *out);

#endif /* PIT_CORE_SELECT_H */
