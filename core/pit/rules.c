/*
 * core/pit/rules.c - PIT rules: which axes of an operator are permutation
 * invariant, and which micro-tiles of a sparse operand may therefore be
 * gathered into dense tiles.
 *
 * An operator is written as a tensor expression (pit_expr): its axes and, for
 * every tensor, the axes indexing each dimension. Permuting an axis a (the
 * same permutation in every tensor indexed by a) leaves the result unchanged
 * unless
 *   - a is a scan axis: a prefix sum y[i] = sum_{j<=i} x[j] depends on the
 *     order of i itself;
 *   - a indexes a dimension together with another axis (x[i + r], a
 *     convolution's sliding window): permuting i alone moves x[i + r] to a
 *     position that is not the permuted x at i + r, so no consistent
 *     permutation of x exists.
 * Everything else (plain reductions, which are commutative sums, and free
 * axes that every tensor shares) is invariant: SRead may visit the non-zero
 * micro-tiles along it in any order and SWrite puts results back in place.
 *
 * A rule gathers along one invariant axis g of the sparse tensor. The other
 * dimensions of the tensor form the group (one index entry list per group).
 * When a reduction axis other than g indexes a group dimension, a group only
 * holds part of that sum, so SWrite must add (accumulate) into the output:
 * allowed only when the reduction is linear up to the output (split_ok).
 *
 * Softmax, Y[m,n] = exp(X[m,n]) / sum_n exp(X[m,n]) over a sparse X whose
 * absent micro-tiles are masked out (they contribute nothing, not exp(0)):
 * m is invariant (rows are independent); n is invariant too, because exp is
 * element-wise and the row sum is commutative. But the division needs the
 * WHOLE row sum before any output is written, so a group must cover a whole
 * row block: gathering along n (group = row block, every non-zero micro-tile
 * of those rows in one list) is a rule, gathering along m (group = column
 * block, a row's sum spread over groups) is not. That is split_ok = 0 on n.
 */
#include <string.h>

#include "internal.h"

#define BIT(a) (1u << (a))

/* Axis roles are spelled once here so that expressions read like formulas. */
#define AX(nm, role_, red, scn, split) \
    { .name = nm, .role = role_, .reduced = red, .scan = scn, .split_ok = split }
#define FREE(nm, role_) AX(nm, role_, 0, 0, 0)
#define SUM(nm, role_) AX(nm, role_, 1, 0, 1)

static const pit_expr builtin_exprs[] = {
    /* C[m,n] += A[m,k] B[k,n] */
    {.name = "matmul", .naxes = 3, .ntensors = 3,
     .axes = {FREE("m", PIT_AXIS_M), FREE("n", PIT_AXIS_N), SUM("k", PIT_AXIS_K)},
     .tensors = {{"A", 0, 2, {BIT(0), BIT(2)}},
                 {"B", 0, 2, {BIT(2), BIT(1)}},
                 {"C", 1, 2, {BIT(0), BIT(1)}}}},
    /* C[b,m,n] += A[b,m,k] B[b,k,n] */
    {.name = "batch_matmul", .naxes = 4, .ntensors = 3,
     .axes = {FREE("b", PIT_AXIS_AUTO), FREE("m", PIT_AXIS_M), FREE("n", PIT_AXIS_N),
              SUM("k", PIT_AXIS_K)},
     .tensors = {{"A", 0, 3, {BIT(0), BIT(1), BIT(3)}},
                 {"B", 0, 3, {BIT(0), BIT(3), BIT(2)}},
                 {"C", 1, 3, {BIT(0), BIT(1), BIT(2)}}}},
    /* C[m,n] = mask[m,n] * sum_k A[m,k] B[n,k]: the sparse tensor is C (and its mask) */
    {.name = "sddmm", .naxes = 3, .ntensors = 4,
     .axes = {FREE("m", PIT_AXIS_M), FREE("n", PIT_AXIS_N), SUM("k", PIT_AXIS_K)},
     .tensors = {{"A", 0, 2, {BIT(0), BIT(2)}},
                 {"B", 0, 2, {BIT(1), BIT(2)}},
                 {"mask", 0, 2, {BIT(0), BIT(1)}},
                 {"C", 1, 2, {BIT(0), BIT(1)}}}},
    /* Y[m,n] = exp(X[m,n]) / sum_n exp(X[m,n]): the sum along n is not splittable */
    {.name = "softmax", .naxes = 2, .ntensors = 2,
     .axes = {FREE("m", PIT_AXIS_M), AX("n", PIT_AXIS_N, 1, 0, 0)},
     .tensors = {{"X", 0, 2, {BIT(0), BIT(1)}},
                 {"Y", 1, 2, {BIT(0), BIT(1)}}}},
    /* Y[m,n] = f(X[m,n]) with f(0) = 0 (ReLU, GELU, scaling) */
    {.name = "elementwise", .naxes = 2, .ntensors = 2,
     .axes = {FREE("m", PIT_AXIS_M), FREE("n", PIT_AXIS_N)},
     .tensors = {{"X", 0, 2, {BIT(0), BIT(1)}},
                 {"Y", 1, 2, {BIT(0), BIT(1)}}}},
    /* Y[e,m,n] += X[e,m,k] W[e,k,n], X[e,m,:] = tokens[m] when routed to
     * expert e, else absent: the rows of each expert are chosen at run time. */
    {.name = "moe_matmul", .naxes = 4, .ntensors = 3,
     .axes = {FREE("e", PIT_AXIS_AUTO), FREE("m", PIT_AXIS_M), FREE("n", PIT_AXIS_N),
              SUM("k", PIT_AXIS_K)},
     .tensors = {{"X", 0, 3, {BIT(0), BIT(1), BIT(3)}},
                 {"W", 0, 3, {BIT(0), BIT(3), BIT(2)}},
                 {"Y", 1, 3, {BIT(0), BIT(1), BIT(2)}}}},
    /* Negative: Y[i] = sum_{j <= i} X[j], order matters along i. */
    {.name = "cumsum", .naxes = 1, .ntensors = 2,
     .axes = {AX("i", PIT_AXIS_AUTO, 0, 1, 0)},
     .tensors = {{"X", 0, 1, {BIT(0)}},
                 {"Y", 1, 1, {BIT(0)}}}},
    /* Negative: Y[x] += X[x + r] W[r], a sliding window. */
    {.name = "conv1d", .naxes = 2, .ntensors = 3,
     .axes = {FREE("x", PIT_AXIS_AUTO), SUM("r", PIT_AXIS_AUTO)},
     .tensors = {{"X", 0, 1, {BIT(0) | BIT(1)}},
                 {"W", 0, 1, {BIT(1)}},
                 {"Y", 1, 1, {BIT(0)}}}},
    /* Y[o,x] += X[c, x + r] W[o,c,r]: the window axes stay variant, the
     * channels are invariant (channel sparsity is a valid rule). */
    {.name = "conv1d_channels", .naxes = 4, .ntensors = 3,
     .axes = {FREE("o", PIT_AXIS_AUTO), SUM("c", PIT_AXIS_AUTO), FREE("x", PIT_AXIS_AUTO),
              SUM("r", PIT_AXIS_AUTO)},
     .tensors = {{"X", 0, 2, {BIT(1), BIT(2) | BIT(3)}},
                 {"W", 0, 3, {BIT(0), BIT(1), BIT(3)}},
                 {"Y", 1, 2, {BIT(0), BIT(2)}}}},
};

#define N_EXPRS ((int)(sizeof builtin_exprs / sizeof builtin_exprs[0]))

const pit_expr *pit_expr_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_EXPRS; i++)
        if (strcmp(builtin_exprs[i].name, name) == 0)
            return &builtin_exprs[i];
    return NULL;
}

const pit_expr *pit_expr_of_op(pit_op_kind op)
{
    static const char *const names[PIT_OP_COUNT] = {
        [PIT_OP_MATMUL] = "matmul",   [PIT_OP_BATCH_MATMUL] = "batch_matmul",
        [PIT_OP_SDDMM] = "sddmm",     [PIT_OP_SOFTMAX] = "softmax",
        [PIT_OP_ELEMENTWISE] = "elementwise", [PIT_OP_MOE_MATMUL] = "moe_matmul",
    };
    if ((int)op < 0 || op >= PIT_OP_COUNT)
        return NULL;
    return pit_expr_find(names[op]);
}

int pit_expr_axis_index(const pit_expr *e, const char *name)
{
    for (int a = 0; e && name && a < e->naxes; a++)
        if (strcmp(e->axes[a].name, name) == 0)
            return a;
    return -1;
}

int pit_expr_tensor_index(const pit_expr *e, const char *name)
{
    for (int t = 0; e && name && t < e->ntensors; t++)
        if (strcmp(e->tensors[t].name, name) == 0)
            return t;
    return -1;
}

int pit_expr_axis_invariant(const pit_expr *e, int axis)
{
    if (!e || axis < 0 || axis >= e->naxes || e->axes[axis].scan)
        return 0;
    for (int t = 0; t < e->ntensors; t++) {
        const pit_expr_tensor *x = &e->tensors[t];
        for (int d = 0; d < x->rank; d++)
            if ((x->dims[d] & BIT(axis)) && x->dims[d] != BIT(axis))
                return 0; /* shares an index with another axis: a window */
    }
    return 1;
}

/* The axis indexing dimension d alone, or -1 for a compound index. */
static int single_axis(uint32_t mask)
{
    if (mask == 0 || (mask & (mask - 1)) != 0)
        return -1;
    int a = 0;
    while (!(mask & 1u)) {
        mask >>= 1;
        a++;
    }
    return a;
}

/* Whether gathering tensor t along dimension g splits a reduction over
 * groups (*accumulate), and whether that is allowed. */
static int group_reductions_ok(const pit_expr *e, const pit_expr_tensor *t, int g,
                               int *accumulate)
{
    *accumulate = 0;
    for (int d = 0; d < t->rank; d++) {
        if (d == g)
            continue;
        for (int a = 0; a < e->naxes; a++) {
            if (!(t->dims[d] & BIT(a)) || !e->axes[a].reduced)
                continue;
            if (!e->axes[a].split_ok)
                return 0;
            *accumulate = 1;
        }
    }
    return 1;
}

int pit_rules_derive(const pit_expr *e, int tensor, pit_rule *out, int max)
{
    if (!e || tensor < 0 || tensor >= e->ntensors || !out || max <= 0)
        return 0;
    const pit_expr_tensor *t = &e->tensors[tensor];
    int n = 0;
    for (int d = 0; d < t->rank && n < max; d++) {
        int a = single_axis(t->dims[d]);
        int accumulate;
        if (a < 0 || !pit_expr_axis_invariant(e, a) || !group_reductions_ok(e, t, d, &accumulate))
            continue;
        out[n++] = (pit_rule){.tensor = tensor, .gather_axis = a, .gather_dim = d,
                              .axis = e->axes[a].role, .accumulate = accumulate,
                              .contiguous = d == t->rank - 1};
    }
    return n;
}

int pit_microtile_slow(const pit_microtile *t, pit_dtype dtype)
{
    size_t bytes = (size_t)(t->cols > 0 ? t->cols : 1) * pit_dtype_size(dtype);
    return bytes < PIT_TRANSACTION_BYTES;
}

/*
 * The penalty of a strided gather. A micro-tile w = 32 / (cols * size) times
 * narrower than a transaction makes every element of the sparse operand cost
 * a whole 32-byte sector, so the sparse operand's share of the tile's
 * global->shared traffic grows w times while the dense operand's does not:
 *     penalty = (w * S + D) / (S + D)
 * with S, D the elements of the sparse and dense operand one tile-step loads
 * (A: bm*bk, B: bk*bn). This assumes the tile-step is bound by that traffic,
 * which holds for the small tiles PIT gathers into and makes the penalty an
 * upper bound (L1 catches neighbouring columns at high density). Examples,
 * f32 (w = 8): 32x1 on a 32x64x32 tile 3.33, on 32x128x32 2.4; f16 (w = 16)
 * on 32x128x32 4.0.
 */
double pit_slow_penalty(const pit_microtile *t, pit_dtype dtype, const pit_tile *tile)
{
    if (!pit_microtile_slow(t, dtype))
        return 1.0;
    double width = (double)(t->cols > 0 ? t->cols : 1) * (double)pit_dtype_size(dtype);
    double w = width > 0 ? PIT_TRANSACTION_BYTES / width : 1.0;
    double a = (double)tile->bm * tile->bk, b = (double)tile->bk * tile->bn;
    double s = t->axis == PIT_AXIS_N ? b : a, d = t->axis == PIT_AXIS_N ? a : b;
    return s + d > 0 ? (w * s + d) / (s + d) : 1.0;
}

/* ---- matmul candidates ---------------------------------------------------- */

/* The concrete micro-tiles the detection pass computes, most useful first.
 * A: 32x1 and 16x1 (ReLU / pruning at column granularity, the paper's 32x1),
 * 1x64 and 1x32 (row sparsity: padding, MoE tokens, the paper's 1x64), blocks
 * 32x64 and 64x64 (block pruning, the paper's 32x64), 16x32 (attention-mask
 * granularity) and 64x1 (a bigger tile for dense-ish columns).
 * B: the N-axis mirror images (Tk x Tn on B, grouped by K row blocks). */
typedef struct candidate_shape {
    pit_sparse_operand operand;
    pit_microtile tile;
} candidate_shape;

static const candidate_shape candidate_shapes[] = {
    {PIT_SPARSE_A, {32, 1, PIT_AXIS_K}},  {PIT_SPARSE_A, {1, 64, PIT_AXIS_M}},
    {PIT_SPARSE_A, {32, 64, PIT_AXIS_K}}, {PIT_SPARSE_A, {64, 64, PIT_AXIS_K}},
    {PIT_SPARSE_A, {16, 1, PIT_AXIS_K}},  {PIT_SPARSE_A, {1, 32, PIT_AXIS_M}},
    {PIT_SPARSE_A, {16, 32, PIT_AXIS_K}}, {PIT_SPARSE_A, {64, 1, PIT_AXIS_K}},
    {PIT_SPARSE_B, {32, 1, PIT_AXIS_N}},  {PIT_SPARSE_B, {32, 64, PIT_AXIS_N}},
    {PIT_SPARSE_B, {64, 64, PIT_AXIS_N}}, {PIT_SPARSE_B, {64, 1, PIT_AXIS_N}},
    {PIT_SPARSE_B, {32, 32, PIT_AXIS_N}},
};

#define N_SHAPES ((int)(sizeof candidate_shapes / sizeof candidate_shapes[0]))

/* Whether matmul has a rule gathering the operand along axis. The backend
 * contract reaches sparse B only through axis N, so B's K rule is not offered. */
static int matmul_rule_exists(pit_sparse_operand operand, pit_axis axis)
{
    const pit_expr *e = pit_expr_find("matmul");
    pit_rule rules[PIT_EXPR_MAX_DIMS];
    int t = pit_expr_tensor_index(e, operand == PIT_SPARSE_A ? "A" : "B");
    int n = pit_rules_derive(e, t, rules, PIT_EXPR_MAX_DIMS);
    for (int i = 0; i < n; i++)
        if (rules[i].axis == axis)
            return 1;
    return 0;
}

int pit_matmul_candidates(pit_sparse_operand sparse, pit_dtype dtype, int64_t rows, int64_t cols,
                          pit_microtile *out, int max)
{
    (void)dtype; /* the same shapes serve every dtype; slowness is costed in select.c */
    if (!out || max <= 0 || rows <= 0 || cols <= 0 ||
        (sparse != PIT_SPARSE_A && sparse != PIT_SPARSE_B))
        return 0;
    if (max > PIT_MAX_CANDIDATES)
        max = PIT_MAX_CANDIDATES;
    int n = 0;
    if (sparse == PIT_SPARSE_A && rows < 16) {
        /* a few rows (decode): column micro-tiles of the smallest heights
         * with partial edge tiles; the kernel splits K to fill the device */
        out[n++] = (pit_microtile){16, 1, PIT_AXIS_K};
        if (n < max)
            out[n++] = (pit_microtile){32, 1, PIT_AXIS_K};
    }
    for (int i = 0; i < N_SHAPES && n < max; i++) {
        const candidate_shape *c = &candidate_shapes[i];
        if (c->operand != sparse || c->tile.rows > rows || c->tile.cols > cols ||
            !matmul_rule_exists(sparse, c->tile.axis))
            continue;
        out[n++] = c->tile;
    }
    if (n == 0) /* tiny operand: one canonical candidate, partial edge tiles */
        out[n++] = sparse == PIT_SPARSE_A ? (pit_microtile){32, 1, PIT_AXIS_K}
                                          : (pit_microtile){32, 1, PIT_AXIS_N};
    return n;
}
