/*
 * tests/test_rules.c - PIT rules derived from tensor expressions, checked
 * against rules derived by hand, and the matmul micro-tile candidates.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static int failures;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* A hand-derived rule: gather along the named axis, with these properties. */
typedef struct expected_rule {
    const char *axis;
    int dim;
    pit_axis role;
    int accumulate;
    int contiguous;
} expected_rule;

static void check_rules(const char *expr, const char *tensor, const expected_rule *want, int nwant)
{
    const pit_expr *e = pit_expr_find(expr);
    CHECK(e != NULL);
    if (!e)
        return;
    int t = pit_expr_tensor_index(e, tensor);
    CHECK(t >= 0);
    pit_rule rules[PIT_EXPR_MAX_DIMS];
    int n = pit_rules_derive(e, t, rules, PIT_EXPR_MAX_DIMS);
    if (n != nwant)
        fprintf(stderr, "%s, sparse %s: %d rules, expected %d\n", expr, tensor, n, nwant);
    CHECK(n == nwant);
    for (int i = 0; i < n && i < nwant; i++) {
        const pit_rule *r = &rules[i];
        CHECK(r->tensor == t);
        CHECK(r->gather_axis == pit_expr_axis_index(e, want[i].axis));
        CHECK(r->gather_dim == want[i].dim);
        CHECK(r->axis == want[i].role);
        CHECK(r->accumulate == want[i].accumulate);
        CHECK(r->contiguous == want[i].contiguous);
    }
}

static void check_invariant(const char *expr, const char *axis, int want)
{
    const pit_expr *e = pit_expr_find(expr);
    CHECK(e != NULL);
    int a = pit_expr_axis_index(e, axis);
    CHECK(a >= 0);
    if (pit_expr_axis_invariant(e, a) != want)
        fprintf(stderr, "%s: axis %s invariant should be %d\n", expr, axis, want);
    CHECK(pit_expr_axis_invariant(e, a) == want);
}

static void test_matmul(void)
{
    check_invariant("matmul", "m", 1);
    check_invariant("matmul", "n", 1);
    check_invariant("matmul", "k", 1);
    /* Sparse A[m,k]: gather m (1 x Tk micro-tiles, groups are K slabs that
     * each hold part of the k sum: accumulate) and k (Tm x 1, contiguous). */
    const expected_rule a[] = {{"m", 0, PIT_AXIS_M, 1, 0}, {"k", 1, PIT_AXIS_K, 0, 1}};
    check_rules("matmul", "A", a, 2);
    /* Sparse B[k,n]: gather k (1 x Tn) and n (Tk x 1, accumulate, contiguous). */
    const expected_rule b[] = {{"k", 0, PIT_AXIS_K, 0, 0}, {"n", 1, PIT_AXIS_N, 1, 1}};
    check_rules("matmul", "B", b, 2);
    /* Output sparsity: C[m,n] groups never split the k sum. */
    const expected_rule c[] = {{"m", 0, PIT_AXIS_M, 0, 0}, {"n", 1, PIT_AXIS_N, 0, 1}};
    check_rules("matmul", "C", c, 2);
}

static void test_batch_matmul(void)
{
    check_invariant("batch_matmul", "b", 1);
    const expected_rule a[] = {{"b", 0, PIT_AXIS_AUTO, 1, 0},
                               {"m", 1, PIT_AXIS_M, 1, 0},
                               {"k", 2, PIT_AXIS_K, 0, 1}};
    check_rules("batch_matmul", "A", a, 3);
}

static void test_sddmm(void)
{
    /* C[m,n] = mask * A[m,:].B[n,:]: blocks of C gathered along m or n. */
    const expected_rule c[] = {{"m", 0, PIT_AXIS_M, 0, 0}, {"n", 1, PIT_AXIS_N, 0, 1}};
    check_rules("sddmm", "C", c, 2);
    check_rules("sddmm", "mask", c, 2);
}

static void test_softmax(void)
{
    check_invariant("softmax", "m", 1);
    check_invariant("softmax", "n", 1);
    /* Only gathering along n keeps a whole row's sum in one group. */
    const expected_rule x[] = {{"n", 1, PIT_AXIS_N, 0, 1}};
    check_rules("softmax", "X", x, 1);
}

static void test_elementwise(void)
{
    const expected_rule x[] = {{"m", 0, PIT_AXIS_M, 0, 0}, {"n", 1, PIT_AXIS_N, 0, 1}};
    check_rules("elementwise", "X", x, 2);
}

static void test_moe(void)
{
    /* Tokens of one expert: gather rows (m), a whole row is one fast micro-tile. */
    const expected_rule x[] = {{"e", 0, PIT_AXIS_AUTO, 1, 0},
                               {"m", 1, PIT_AXIS_M, 1, 0},
                               {"k", 2, PIT_AXIS_K, 0, 1}};
    check_rules("moe_matmul", "X", x, 3);
    pit_microtile row = {1, 4096, PIT_AXIS_M};
    CHECK(!pit_microtile_slow(&row, PIT_F16));
}

static void test_negative(void)
{
    check_invariant("cumsum", "i", 0);
    check_rules("cumsum", "X", NULL, 0);
    check_rules("cumsum", "Y", NULL, 0);
    check_invariant("conv1d", "x", 0);
    check_invariant("conv1d", "r", 0);
    check_rules("conv1d", "X", NULL, 0);
    check_rules("conv1d", "W", NULL, 0);
    /* With channels, the window axes stay variant and the channels are not. */
    check_invariant("conv1d_channels", "x", 0);
    check_invariant("conv1d_channels", "r", 0);
    check_invariant("conv1d_channels", "c", 1);
    check_invariant("conv1d_channels", "o", 1);
    const expected_rule x[] = {{"c", 0, PIT_AXIS_AUTO, 1, 0}};
    check_rules("conv1d_channels", "X", x, 1);
    const expected_rule w[] = {{"o", 0, PIT_AXIS_AUTO, 1, 0}, {"c", 1, PIT_AXIS_AUTO, 1, 0}};
    check_rules("conv1d_channels", "W", w, 2);
}

static void test_lookup(void)
{
    static const char *const names[PIT_OP_COUNT] = {"matmul", "batch_matmul", "sddmm", "softmax",
                                                    "elementwise", "moe_matmul"};
    for (int op = 0; op < PIT_OP_COUNT; op++) {
        const pit_expr *e = pit_expr_of_op((pit_op_kind)op);
        CHECK(e && strcmp(e->name, names[op]) == 0);
    }
    CHECK(pit_expr_of_op(PIT_OP_COUNT) == NULL);
    CHECK(pit_expr_find("nope") == NULL);
    CHECK(pit_expr_find(NULL) == NULL);
    CHECK(pit_rules_derive(NULL, 0, NULL, 0) == 0);
    CHECK(pit_expr_axis_invariant(pit_expr_find("matmul"), 7) == 0);
}

static void test_transactions(void)
{
    pit_microtile k32x1 = {32, 1, PIT_AXIS_K}, m1x64 = {1, 64, PIT_AXIS_M};
    pit_microtile m1x8 = {1, 8, PIT_AXIS_M}, k32x64 = {32, 64, PIT_AXIS_K};
    CHECK(pit_microtile_slow(&k32x1, PIT_F32));
    CHECK(pit_microtile_slow(&k32x1, PIT_F16));
    CHECK(!pit_microtile_slow(&m1x64, PIT_F32));
    CHECK(!pit_microtile_slow(&k32x64, PIT_F16));
    CHECK(!pit_microtile_slow(&m1x8, PIT_F32)); /* exactly 32 bytes */
    CHECK(pit_microtile_slow(&m1x8, PIT_F16));  /* 16 bytes */
    /* (w S + D) / (S + D): f32 w = 8, S = bm bk, D = bk bn. */
    pit_tile t32x64 = {32, 64, 32, 128, 1, 0}, t32x128 = {32, 128, 32, 256, 1, 0};
    CHECK(fabs(pit_slow_penalty(&k32x1, PIT_F32, &t32x64) - 10.0 / 3.0) < 1e-9);
    CHECK(fabs(pit_slow_penalty(&k32x1, PIT_F32, &t32x128) - 2.4) < 1e-9);
    CHECK(fabs(pit_slow_penalty(&k32x1, PIT_F16, &t32x128) - 4.0) < 1e-9);
    CHECK(pit_slow_penalty(&m1x64, PIT_F32, &t32x64) == 1.0);
    /* Sparse B, Tk x 1 along N: S = bk bn (B's share), D = bm bk. */
    pit_microtile n32x1 = {32, 1, PIT_AXIS_N};
    pit_tile t64x64 = {64, 64, 32, 256, 1, 0};
    CHECK(fabs(pit_slow_penalty(&n32x1, PIT_F32, &t64x64) - 4.5) < 1e-9);
}

static int same(pit_microtile a, int rows, int cols, pit_axis axis)
{
    return a.rows == rows && a.cols == cols && a.axis == axis;
}

static void test_candidates(void)
{
    pit_microtile c[PIT_MAX_CANDIDATES];
    int n = pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, 4096, 4096, c, PIT_MAX_CANDIDATES);
    CHECK(n == 8);
    CHECK(same(c[0], 32, 1, PIT_AXIS_K));
    CHECK(same(c[1], 1, 64, PIT_AXIS_M));
    CHECK(same(c[2], 32, 64, PIT_AXIS_K));
    CHECK(same(c[3], 64, 64, PIT_AXIS_K));
    CHECK(same(c[4], 16, 1, PIT_AXIS_K));
    CHECK(same(c[5], 1, 32, PIT_AXIS_M));
    CHECK(same(c[6], 16, 32, PIT_AXIS_K));
    CHECK(same(c[7], 64, 1, PIT_AXIS_K));

    /* 16 rows: nothing taller than the operand. */
    n = pit_matmul_candidates(PIT_SPARSE_A, PIT_F16, 16, 4096, c, PIT_MAX_CANDIDATES);
    CHECK(n == 4);
    for (int i = 0; i < n; i++)
        CHECK(c[i].rows <= 16 && (c[i].axis == PIT_AXIS_K || c[i].axis == PIT_AXIS_M));

    /* Fewer than 16 rows: the decode candidates first, never none. */
    n = pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, 8, 8, c, PIT_MAX_CANDIDATES);
    CHECK(n == 2 && same(c[0], 16, 1, PIT_AXIS_K) && same(c[1], 32, 1, PIT_AXIS_K));

    /* Sparse B: the N-axis ones only. */
    n = pit_matmul_candidates(PIT_SPARSE_B, PIT_F32, 4096, 4096, c, PIT_MAX_CANDIDATES);
    CHECK(n == 5);
    for (int i = 0; i < n; i++)
        CHECK(c[i].axis == PIT_AXIS_N);
    CHECK(same(c[0], 32, 1, PIT_AXIS_N));

    CHECK(pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, 4096, 4096, c, 3) == 3);
    CHECK(pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, 0, 4096, c, 8) == 0);
    CHECK(pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, 64, 64, NULL, 8) == 0);
    CHECK(pit_matmul_candidates((pit_sparse_operand)7, PIT_F32, 64, 64, c, 8) == 0);
}

int main(void)
{
    test_matmul();
    test_batch_matmul();
    test_sddmm();
    test_softmax();
    test_elementwise();
    test_moe();
    test_negative();
    test_lookup();
    test_transactions();
    test_candidates();
    if (failures)
        fprintf(stderr, "test_rules: %d failure(s)\n", failures);
    else
        printf("test_rules: all passed\n");
    return failures ? 1 : 0;
}
