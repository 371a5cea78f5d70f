/*
 * tests/test_select.c - Algorithm 1 on synthetic statistics whose right
 * answer is known, on every shipped tile database and the built-in table.
 *
 * Statistics are computed from a sparsity pattern on a coarse grid (cells of
 * ch x cw elements, each cell all-zero or not), the way the detection pass
 * would count non-zero micro-tiles of every candidate.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setenv */
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int failures;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* ---- synthetic patterns ----------------------------------------------------- */

typedef struct grid {
    int ch, cw;       /* cell size in elements */
    int rows, cols;   /* cells */
    int32_t *prefix;  /* (rows + 1) x (cols + 1) 2-D prefix sums of non-zero cells */
} grid;

static uint32_t lcg_state = 12345;
static uint32_t lcg(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

/* A rows x cols operand whose ch x cw cells are non-zero with probability p. */
static grid grid_make(int64_t rows, int64_t cols, int ch, int cw, double p)
{
    grid g = {ch, cw, (int)((rows + ch - 1) / ch), (int)((cols + cw - 1) / cw), NULL};
    size_t w = (size_t)g.cols + 1;
    g.prefix = calloc(((size_t)g.rows + 1) * w, sizeof *g.prefix);
    for (int r = 0; g.prefix && r < g.rows; r++)
        for (int c = 0; c < g.cols; c++) {
            int on = p >= 1.0 || (p > 0 && (lcg() % 1000000) < (uint32_t)(p * 1e6));
            g.prefix[(r + 1) * w + c + 1] = on + g.prefix[r * w + c + 1] +
                                            g.prefix[(r + 1) * w + c] - g.prefix[r * w + c];
        }
    return g;
}

/* Whether the element rectangle [r0, r1) x [c0, c1) holds a non-zero. */
static int grid_any(const grid *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    size_t w = (size_t)g->cols + 1;
    int64_t a = r0 / g->ch, b = (r1 - 1) / g->ch + 1, c = c0 / g->cw, d = (c1 - 1) / g->cw + 1;
    if (b > g->rows)
        b = g->rows;
    if (d > g->cols)
        d = g->cols;
    int32_t s = g->prefix[b * w + d] - g->prefix[a * w + d] - g->prefix[b * w + c] +
                g->prefix[a * w + c];
    return s > 0;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The statistics detection produces for micro-tile t on an m x k operand. */
static pit_candidate_stats stats_for(const grid *g, int64_t m, int64_t k, pit_microtile t)
{
    int k_axis = t.axis == PIT_AXIS_K;
    int64_t groups = k_axis ? (m + t.rows - 1) / t.rows : (k + t.cols - 1) / t.cols;
    int64_t cap = k_axis ? (k + t.cols - 1) / t.cols : (m + t.rows - 1) / t.rows;
    int32_t *counts = calloc((size_t)groups, sizeof *counts);
    for (int64_t gi = 0; counts && gi < groups; gi++)
        for (int64_t e = 0; e < cap; e++) {
            int64_t r = k_axis ? gi : e, c = k_axis ? e : gi;
            counts[gi] += grid_any(g, r * t.rows, min64(m, (r + 1) * t.rows), c * t.cols,
                                   min64(k, (c + 1) * t.cols));
        }
    return (pit_candidate_stats){t, (int32_t)groups, (int32_t)groups, (int32_t)cap, counts};
}

static void free_stats(pit_candidate_stats *s, int n)
{
    for (int i = 0; i < n; i++)
        free((void *)s[i].counts);
}

/* ---- databases ---------------------------------------------------------------- */

typedef struct db_case {
    const char *backend, *name, *arch, *family; /* family: as the backend names it */
} db_case;

static const db_case db_cases[] = {
    {"cuda", "Tesla V100-SXM2-16GB", "sm_70", "nvidia-sm70"},
    {"cuda", "NVIDIA A100-SXM4-80GB", "sm_80", "nvidia-sm80"},
    {"cuda", "NVIDIA H100 80GB HBM3", "sm_90", "nvidia-sm90"},
    {"hip", "AMD Instinct MI250X", "gfx90a", "amd-gfx9"},
    {"hip", "Radeon RX 7900 XTX", "gfx1100", "amd-gfx11"},
    {"opencl", "NVIDIA H100 80GB HBM3", "opencl-gpu", "opencl-gpu"},
    {"opencl", "cpu-haswell-AMD EPYC", "opencl-cpu", "opencl-cpu"},
    {"none", "no family: built-in", "x", ""},
};

#define N_DBS ((int)(sizeof db_cases / sizeof db_cases[0]))

static pit_tiledb *open_case(const db_case *c)
{
    pit_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "%s", c->backend);
    snprintf(d.name, sizeof d.name, "%s", c->name);
    snprintf(d.arch, sizeof d.arch, "%s", c->arch);
    snprintf(d.tiledb_family, sizeof d.tiledb_family, "%s", c->family);
    pit_tiledb *db = NULL;
    CHECK(pit_tiledb_open(&d, &db) == PIT_SUCCESS);
    return db;
}

static pit_problem problem(pit_dtype dt, int64_t m, int64_t n, int64_t k)
{
    pit_problem p;
    memset(&p, 0, sizeof p);
    p.op = PIT_OP_MATMUL;
    p.dtype = dt;
    p.batch = 1;
    p.m = m;
    p.n = n;
    p.k = k;
    p.sparse = PIT_SPARSE_A;
    return p;
}

/* Statistics of one pattern for every candidate, computed once for all databases. */
typedef struct scenario {
    int64_t m, n, k;
    int ncand;
    pit_candidate_stats st[PIT_MAX_CANDIDATES];
} scenario;

static scenario scenario_make(int64_t m, int64_t n, int64_t k, int ch, int cw, double p,
                              const pit_microtile *only, int nonly)
{
    scenario sc = {m, n, k, 0, {{{0, 0, PIT_AXIS_AUTO}, 0, 0, 0, NULL}}};
    pit_microtile c[PIT_MAX_CANDIDATES];
    if (only) {
        memcpy(c, only, sizeof *c * (size_t)nonly);
        sc.ncand = nonly;
    } else {
        sc.ncand = pit_matmul_candidates(PIT_SPARSE_A, PIT_F32, m, k, c, PIT_MAX_CANDIDATES);
    }
    grid g = grid_make(m, k, ch, cw, p);
    for (int i = 0; i < sc.ncand; i++)
        sc.st[i] = stats_for(&g, m, k, c[i]);
    free(g.prefix);
    return sc;
}

static pit_selection select_on(const pit_tiledb *db, const scenario *sc, pit_dtype dt)
{
    pit_problem p = problem(dt, sc->m, sc->n, sc->k);
    pit_selection sel;
    memset(&sel, 0, sizeof sel);
    CHECK(pit_select(db, &p, sc->st, sc->ncand, &sel) == PIT_SUCCESS);
    return sel;
}

static int64_t total(const pit_candidate_stats *s)
{
    int64_t t = 0;
    for (int32_t g = 0; g < s->groups; g++)
        t += s->counts[g];
    return t;
}

static void report(const char *what, const db_case *c, pit_dtype dt, const pit_selection *s)
{
    fprintf(stderr, "%s on %s %s %s: chose %s (%.2f us), runner-up %s (%.2f us)\n", what,
            c->backend, c->arch, pit_dtype_name(dt), s->choice, s->predicted_us, s->runner_up,
            s->runner_up_us);
}

/* ---- the scenarios ----------------------------------------------------------- */

static scenario columns, columns3, blocks, full, zero;

static void make_scenarios(void)
{
    /* Every 32-row block keeps 10% of its columns: 32x1 micro-tiles see 10%,
     * the 1x64 and 32x64 ones see almost everything. */
    columns = scenario_make(4096, 4096, 4096, 32, 1, 0.10, NULL, 0);
    const pit_microtile three[] = {{32, 1, PIT_AXIS_K}, {1, 64, PIT_AXIS_M}, {32, 64, PIT_AXIS_K}};
    columns3 = scenario_make(4096, 4096, 4096, 32, 1, 0.10, three, 3);
    /* Aligned 64x64 blocks, 10% of them. */
    blocks = scenario_make(4096, 4096, 4096, 64, 64, 0.10, NULL, 0);
    full = scenario_make(2048, 1024, 4096, 64, 64, 1.0, NULL, 0);
    zero = scenario_make(1024, 4096, 1024, 64, 64, 0.0, NULL, 0);
}

static void free_scenarios(void)
{
    free_stats(columns.st, columns.ncand);
    free_stats(columns3.st, columns3.ncand);
    free_stats(blocks.st, blocks.ncand);
    free_stats(full.st, full.ncand);
    free_stats(zero.st, zero.ncand);
}

static void test_column_pattern(const pit_tiledb *db, const db_case *c)
{
    pit_selection s = select_on(db, &columns, PIT_F32);
    const pit_candidate_stats *st = columns.st;
    int ok = !s.dense && st[s.candidate].tile.axis == PIT_AXIS_K && st[s.candidate].tile.cols == 1;
    if (!ok)
        report("32x1 pattern", c, PIT_F32, &s);
    CHECK(ok);
    CHECK(s.nonzero_tiles == total(&st[s.candidate]));
    CHECK(s.max_entries > 0 && s.max_entries <= st[s.candidate].capacity);
    CHECK(s.tile.bm == st[s.candidate].tile.rows);
    CHECK(s.runner_up_us >= s.predicted_us);

    /* The paper's three candidates: exactly 32x1. */
    s = select_on(db, &columns3, PIT_F32);
    if (s.dense || s.candidate != 0)
        report("32x1 pattern, 3 candidates", c, PIT_F32, &s);
    CHECK(!s.dense && s.candidate == 0);
    CHECK(strncmp(s.choice, "k32x1 tile 32x", 14) == 0);
    CHECK(columns3.st[1].counts[0] > columns3.st[1].capacity * 9 / 10); /* 1x64 sees ~100% */
    CHECK(columns3.st[2].counts[0] > columns3.st[2].capacity * 9 / 10); /* 32x64 too */
}

static void test_block_pattern(const pit_tiledb *db, const db_case *c, pit_dtype dt)
{
    pit_selection s = select_on(db, &blocks, dt);
    const pit_microtile *t = &blocks.st[s.candidate].tile;
    int ok = !s.dense && t->axis == PIT_AXIS_K && t->cols >= 32;
    if (!ok)
        report("64x64 blocks", c, dt, &s);
    CHECK(ok);
}

static void test_full_density(const pit_tiledb *db, const db_case *c, pit_dtype dt)
{
    pit_selection s = select_on(db, &full, dt);
    if (!s.dense)
        report("density 1", c, dt, &s);
    CHECK(s.dense);
    CHECK(strcmp(s.choice, "dense GEMM") == 0);
    CHECK(s.runner_up[0] != '\0' && s.runner_up_us >= s.predicted_us);
    CHECK(s.predicted_us > 0);
    pit_selection_name_dense(&s, "cuBLAS");
    CHECK(strcmp(s.choice, "dense cuBLAS") == 0);
}

static void test_all_zero(const pit_tiledb *db, const db_case *c, pit_dtype dt)
{
    pit_selection s = select_on(db, &zero, dt);
    if (s.dense || s.nonzero_tiles != 0)
        report("all zero", c, dt, &s);
    CHECK(!s.dense);
    CHECK(s.nonzero_tiles == 0);
    CHECK(s.max_entries == 0);
}

/* Selection over counts arrays of 4096 groups (a tall operand). */
static void test_many_groups(const pit_tiledb *db)
{
    pit_problem p = problem(PIT_F16, 4096 * 32, 4096, 4096);
    pit_microtile c[PIT_MAX_CANDIDATES];
    int n = pit_matmul_candidates(PIT_SPARSE_A, p.dtype, p.m, p.k, c, PIT_MAX_CANDIDATES);
    CHECK(n == PIT_MAX_CANDIDATES);
    pit_candidate_stats st[PIT_MAX_CANDIDATES];
    for (int i = 0; i < n; i++) {
        int k_axis = c[i].axis == PIT_AXIS_K;
        int32_t groups = (int32_t)(k_axis ? p.m / c[i].rows : p.k / c[i].cols);
        int32_t cap = (int32_t)(k_axis ? p.k / c[i].cols : p.m / c[i].rows);
        int32_t *counts = malloc(sizeof *counts * (size_t)groups);
        for (int32_t g = 0; counts && g < groups; g++)
            counts[g] = (int32_t)(lcg() % (uint32_t)(cap + 1));
        st[i] = (pit_candidate_stats){c[i], groups, groups, cap, counts};
    }
    CHECK(st[0].groups == 4096);
    pit_selection s;
    CHECK(pit_select(db, &p, st, n, &s) == PIT_SUCCESS);
    CHECK(s.predicted_us > 0 && (s.dense || (s.candidate >= 0 && s.candidate < n)));
    free_stats(st, n);
}

static void test_fixed(const pit_tiledb *db)
{
    pit_problem p = problem(PIT_F32, 4096, 4096, 4096);
    pit_tile t;
    pit_microtile k32x1 = {32, 1, PIT_AXIS_K}, m1x64 = {1, 64, PIT_AXIS_M};
    CHECK(pit_select_fixed(db, &p, &k32x1, &t) == PIT_SUCCESS && t.bm == 32);
    CHECK(pit_select_fixed(db, &p, &m1x64, &t) == PIT_SUCCESS && t.bk == 64);
    pit_microtile odd = {8, 1, PIT_AXIS_K}; /* no database has bm 8: synthesised */
    CHECK(pit_select_fixed(db, &p, &odd, &t) == PIT_SUCCESS && t.bm == 8 && t.bn > 0 && t.bk > 0);
    pit_microtile n32x1 = {32, 1, PIT_AXIS_N};
    CHECK(pit_select_fixed(db, &p, &n32x1, &t) == PIT_ERR_UNSUPPORTED); /* sparse A */
    p.sparse = PIT_SPARSE_B;
    CHECK(pit_select_fixed(db, &p, &n32x1, &t) == PIT_SUCCESS && t.bk == 32);
}

static void test_errors(const pit_tiledb *db)
{
    pit_problem p = problem(PIT_F32, 256, 256, 256);
    pit_selection s;
    int32_t counts[8] = {0, 1, 2, 3, 4, 5, 6, 99};
    pit_candidate_stats st = {{32, 1, PIT_AXIS_K}, 8, 8, 8, counts};
    CHECK(pit_select(db, &p, &st, 1, &s) == PIT_ERR_INTERNAL); /* 99 > capacity 8 */
    counts[7] = -1;
    CHECK(pit_select(db, &p, &st, 1, &s) == PIT_ERR_INTERNAL);
    counts[7] = 7;
    CHECK(pit_select(db, &p, &st, 1, &s) == PIT_SUCCESS);
    CHECK(pit_select(NULL, &p, &st, 1, &s) == PIT_ERR_INVALID_ARGUMENT);
    CHECK(pit_select(db, &p, NULL, 1, &s) == PIT_ERR_INVALID_ARGUMENT);
    CHECK(pit_select(db, &p, &st, PIT_MAX_CANDIDATES + 1, &s) == PIT_ERR_INVALID_ARGUMENT);
    st.counts = NULL;
    CHECK(pit_select(db, &p, &st, 1, &s) == PIT_ERR_INVALID_ARGUMENT);
    /* No statistics: the dense GEMM. */
    CHECK(pit_select(db, &p, NULL, 0, &s) == PIT_SUCCESS && s.dense && s.nonzero_tiles == -1);
    CHECK(strcmp(s.runner_up, "none") == 0);
    p.dtype = PIT_I32;
    CHECK(pit_select(db, &p, NULL, 0, &s) == PIT_ERR_UNSUPPORTED_DTYPE);
    p = problem(PIT_F32, 0, 256, 256);
    CHECK(pit_select(db, &p, NULL, 0, &s) == PIT_ERR_INVALID_ARGUMENT);
    p = problem(PIT_F32, 256, 256, 256);
    p.op = PIT_OP_SOFTMAX;
    CHECK(pit_select(db, &p, NULL, 0, &s) == PIT_ERR_UNSUPPORTED);
}

/* The H100's database with a PIT_TILEDB file of entries v in front. */
static pit_tiledb *open_written(const pit_tiledb_entry *v, int n, const char *what)
{
    char path[128], comment[64];
    snprintf(path, sizeof path, "/tmp/pit-test-select-%s-%d.tiledb", what, (int)getpid());
    snprintf(comment, sizeof comment, "test_select: %s", what);
    CHECK(pit_tiledb_write(path, v, n, comment) == PIT_SUCCESS);
    setenv("PIT_TILEDB", path, 1);
    /* an H100 without its family's file: the rows written and the built-in table only */
    static const db_case alone = {"cuda", "NVIDIA H100 80GB HBM3", "sm_90", ""};
    pit_tiledb *db = open_case(&alone);
    unsetenv("PIT_TILEDB");
    remove(path);
    return db;
}

/* A row of a hand-written sm_90 database. */
typedef struct test_row { pit_tile_op op; int bm, bn, bk; double us, out; } test_row;

static void fill_rows(pit_tiledb_entry *v, const test_row *rows, int n, pit_dtype dt)
{
    memset(v, 0, sizeof *v * (size_t)n);
    for (int i = 0; i < n; i++) {
        snprintf(v[i].device, sizeof v[i].device, "sm_90");
        snprintf(v[i].backend, sizeof v[i].backend, "cuda");
        v[i].op = rows[i].op;
        v[i].dtype = dt;
        v[i].tile = (pit_tile){rows[i].bm, rows[i].bn, rows[i].bk, 256, 2, 1};
        v[i].us_per_tile = rows[i].us;
        v[i].us_per_out = rows[i].out;
    }
}

/* A database of one dense tile, one fitted matmul_k tile, and the costs
 * around a sparse kernel (detect, call), written for PIT_TILEDB. */
static pit_tiledb *around_db(double call_us, double detect_us)
{
    static const test_row rows[] = {
        {PIT_TILE_DENSE, 128, 128, 32, 0.004, 0},   {PIT_TILE_MATMUL_K, 64, 128, 32, 0.005, 0.002},
        {PIT_TILE_FILL, 64, 64, 1, 0.003, 0},       {PIT_TILE_ACCUM, 64, 64, 1, 0.006, 0},
        {PIT_TILE_DETECT, 1024, 1024, 1, 0, 0},     {PIT_TILE_CALL, 1, 1, 1, 0, 0},
    };
    pit_tiledb_entry v[6];
    fill_rows(v, rows, 6, PIT_F16);
    for (int i = 0; i < 6; i++)
        v[i].us_per_tile = rows[i].op == PIT_TILE_CALL     ? call_us
                           : rows[i].op == PIT_TILE_DETECT ? detect_us
                                                           : v[i].us_per_tile;
    return open_written(v, 6, "around");
}

/* The detection pass is part of every sparse option, the call's read-back
 * of the axis-M ones; along K a settled plan reads nothing back, so K
 * options pay 1/PIT_REDETECT_EVERY of the call, as the dense GEMM pays of
 * both. Cheap: 10% of 64x64 blocks goes sparse; a dear call changes nothing
 * for that K candidate; a dear detection sends the same pattern dense. A
 * fitted entry costs tiles * us_per_tile + tiles of C * us_per_out on top. */
static void test_around_costs(void)
{
    pit_tiledb *cheap = around_db(1.0, 0.01), *dear_call = around_db(5000.0, 0.01),
               *dear_detect = around_db(1.0, 300.0);
    if (!cheap || !dear_call || !dear_detect)
        return;
    pit_selection s = select_on(cheap, &blocks, PIT_F16);
    CHECK(!s.dense && blocks.st[s.candidate].tile.rows == 64 && blocks.st[s.candidate].tile.axis == PIT_AXIS_K);
    int64_t outs = (4096 / 64) * (4096 / 128);
    double kernel = 0.005 * (double)(s.nonzero_tiles * 2 * (4096 / 128)) + 0.002 * (double)outs;
    CHECK(s.predicted_us > kernel + 0.1 && s.predicted_us < kernel * 1.2 + 2.0); /* + index, detection */
    pit_selection c = select_on(dear_call, &blocks, PIT_F16);
    CHECK(!c.dense && blocks.st[c.candidate].tile.axis == PIT_AXIS_K);
    CHECK(c.predicted_us > kernel + 5000.0 / PIT_REDETECT_EVERY - 1e-6 &&
          c.predicted_us < kernel * 1.2 + 5000.0 / PIT_REDETECT_EVERY + 2.0);
    pit_selection d = select_on(dear_detect, &blocks, PIT_F16);
    CHECK(d.dense);
    double dense_kernel = 0.004 * (double)(32 * 32 * 128), detect = 300.0 * 16;
    CHECK(d.predicted_us > dense_kernel + detect / PIT_REDETECT_EVERY - 1e-6);
    CHECK(d.runner_up_us > detect);
    pit_tiledb_close(cheap);
    pit_tiledb_close(dear_call);
    pit_tiledb_close(dear_detect);
}

/* Decode, x[1,4096] . W[4096,14336] with half of x zero: every plan is
 * bound by memory. With a measured "read" row the K plan (16x1 or 32x1)
 * wins by the weight rows it skips, each plan's cost is at least its bytes
 * at that rate, and dense pays the whole of W. */
/* A bf16 decode database: a read row, then two stream rows (at 1 and 16 rows of A). */
static const test_row decode_rows[] = {
    {PIT_TILE_DENSE, 128, 128, 32, 0.0014, 0},  {PIT_TILE_MATMUL_K, 16, 64, 32, 0.00115, 0},
    {PIT_TILE_MATMUL_K, 32, 64, 32, 0.0016, 0}, {PIT_TILE_FILL, 64, 64, 1, 0.0027, 0},
    {PIT_TILE_ACCUM, 64, 64, 1, 0.006, 0},      {PIT_TILE_DETECT, 1024, 1024, 1, 1.0, 0},
    {PIT_TILE_CALL, 1, 1, 1, 20.0, 0},          {PIT_TILE_READ, 64, 64, 1, 0.00273, 0},
    {PIT_TILE_STREAM, 1, 64, 64, 0.0017, 6.0},  {PIT_TILE_STREAM, 16, 64, 64, 0.006, 10.0},
};
#define DECODE_ROWS ((int)(sizeof decode_rows / sizeof decode_rows[0]))
#define DECODE_STREAM_ROWS 2

static void test_memory_bound(void)
{
    pit_tiledb_entry v[DECODE_ROWS];
    fill_rows(v, decode_rows, DECODE_ROWS, PIT_BF16);
    pit_tiledb *db = open_written(v, DECODE_ROWS - DECODE_STREAM_ROWS, "memory");
    if (!db)
        return;
    scenario decode = scenario_make(1, 14336, 4096, 1, 1, 0.5, NULL, 0);
    CHECK(decode.ncand >= 2 && decode.st[0].tile.rows == 16 && decode.st[0].tile.axis == PIT_AXIS_K);
    pit_selection s = select_on(db, &decode, PIT_BF16);
    const double us_per_byte = 0.00273 / (64.0 * 64 * 2), w_bytes = 4096.0 * 14336 * 2;
    report("decode", &db_cases[2], PIT_BF16, &s);
    CHECK(!s.dense && decode.st[s.candidate].tile.axis == PIT_AXIS_K && decode.st[s.candidate].tile.cols == 1);
    const double kept = (double)total(&decode.st[s.candidate]) / 4096.0;
    CHECK(kept > 0.4 && kept < 0.6);
    CHECK(s.predicted_us >= kept * w_bytes * us_per_byte);
    pit_problem only_dense = problem(PIT_BF16, 1, 14336, 4096);
    pit_selection d;
    CHECK(pit_select(db, &only_dense, NULL, 0, &d) == PIT_SUCCESS && d.dense);
    CHECK(d.predicted_us >= w_bytes * us_per_byte); /* dense reads all of W */
    free_stats(decode.st, decode.ncand);
    pit_tiledb_close(db);
}

/* "stream" rows price the decode regime as pit tune measured it: x[1,4096]
 * at half zeros streams fast enough to beat dense; 4 rows, priced by the
 * row measured at 16 (the next one up), stream so slowly that dense wins,
 * where the read bound alone took the K plan; above every measured row the
 * other terms apply. */
static void test_stream_rows(void)
{
    pit_tiledb_entry v[DECODE_ROWS];
    fill_rows(v, decode_rows, DECODE_ROWS, PIT_BF16);
    pit_tiledb *with = open_written(v, DECODE_ROWS, "stream"),
               *without = open_written(v, DECODE_ROWS - DECODE_STREAM_ROWS, "no-stream");
    if (!with || !without) {
        pit_tiledb_close(with);
        pit_tiledb_close(without);
        return;
    }
    scenario one = scenario_make(1, 14336, 4096, 1, 1, 0.5, NULL, 0);
    pit_selection s = select_on(with, &one, PIT_BF16);
    report("stream, 1 row", &db_cases[2], PIT_BF16, &s);
    CHECK(!s.dense && one.st[s.candidate].tile.cols == 1);
    const double streamed = (double)total(&one.st[s.candidate]) * 14336.0;
    CHECK(fabs(s.predicted_us - (streamed * 0.0017 / 4096.0 + 6.0 + 20.0 / PIT_REDETECT_EVERY)) < 1e-6);
    scenario four = scenario_make(4, 14336, 4096, 4, 1, 0.5, NULL, 0);
    s = select_on(without, &four, PIT_BF16);
    report("read bound, 4 rows", &db_cases[2], PIT_BF16, &s);
    CHECK(!s.dense); /* the bytes alone say the K plan */
    s = select_on(with, &four, PIT_BF16);
    report("stream, 4 rows", &db_cases[2], PIT_BF16, &s);
    CHECK(s.dense); /* at 0.006 us a 64 x 64 block: slower than reading all of W */
    scenario many = scenario_make(64, 14336, 4096, 64, 1, 0.5, NULL, 0);
    pit_selection a = select_on(with, &many, PIT_BF16), b = select_on(without, &many, PIT_BF16);
    CHECK(a.dense == b.dense && fabs(a.predicted_us - b.predicted_us) < 1e-9); /* no row at 64 */
    free_stats(one.st, one.ncand);
    free_stats(four.st, four.ncand);
    free_stats(many.st, many.ncand);
    pit_tiledb_close(with);
    pit_tiledb_close(without);
}

/* The gathered GEMMs (moe, rows) take the one tile of their dtype: the
 * shipped rows on every family; without one a tile of zeros (the built-in
 * table has no gathered row: each backend runs its own). */
static void test_gathered(const pit_tiledb *db, const db_case *c)
{
    pit_tile t;
    const int hopper = strcmp(c->family, "nvidia-sm90") == 0;
    const int builtin = c->family[0] == '\0', opencl = strcmp(c->backend, "opencl") == 0;
    for (int dt = PIT_F32; dt <= PIT_BF16; dt++)
        for (int op = PIT_TILE_MOE; op <= PIT_TILE_ROWS; op++) {
            CHECK(pit_select_gathered(db, (pit_tile_op)op, (pit_dtype)dt, &t) == PIT_SUCCESS);
            if (builtin) {
                CHECK(t.bm == 0 && t.bn == 0 && t.bk == 0 && t.threads == 0);
                continue;
            }
            CHECK(t.bm > 0 && t.bn > 0 && t.bk > 0 && t.threads > 0 && t.stages > 0);
            if (opencl)
                CHECK(t.bm == 32 && t.bn == 64 && t.bk == 16 && t.threads == 128 &&
                      t.stages == 1 && t.tensor_core == 0);
            if (hopper && dt != PIT_F32)
                CHECK(t.bm == 128 && t.bn == 256 && t.bk == 64 && t.threads == 384 &&
                      t.stages == 3 && t.tensor_core == 1);
            if (hopper && dt == PIT_F32)
                CHECK(t.bm == 64 && t.bn == 64 && t.bk == 16 && t.tensor_core == 0);
        }
    CHECK(pit_select_gathered(db, PIT_TILE_DENSE, PIT_F32, &t) == PIT_ERR_INVALID_ARGUMENT);
    CHECK(pit_select_gathered(NULL, PIT_TILE_MOE, PIT_F32, &t) == PIT_ERR_INVALID_ARGUMENT);
}

/* Of two moe rows, the one cheaper per flop wins whatever its size. */
static void test_gathered_cheapest(void)
{
    pit_tiledb_entry v[2];
    memset(v, 0, sizeof v);
    for (int i = 0; i < 2; i++) {
        snprintf(v[i].device, sizeof v[i].device, "sm_90");
        snprintf(v[i].backend, sizeof v[i].backend, "cuda");
        v[i].op = PIT_TILE_MOE;
        v[i].dtype = PIT_F16;
    }
    v[0].tile = (pit_tile){64, 64, 16, 128, 1, 0};
    v[0].us_per_tile = 0.001; /* 131 TFLOP/s */
    v[1].tile = (pit_tile){128, 256, 64, 384, 3, 1};
    v[1].us_per_tile = 0.008; /* 524 TFLOP/s */
    pit_tiledb *db = open_written(v, 2, "moe");
    pit_tile t;
    CHECK(db && pit_select_gathered(db, PIT_TILE_MOE, PIT_F16, &t) == PIT_SUCCESS && t.bm == 128);
    pit_tiledb_close(db);
}

/* Which tiles a micro-tile may run on: along K bm is the micro-tile's
 * rows; the engine (PIT_TILE_ENGINE) also takes its columns in whole
 * bk-deep steps, so 32x1 never goes to it, 32x64 and 32x128 do. */
static void test_tile_fits(void)
{
    const pit_tile engine = {32, 256, 64, 384, 4, PIT_TILE_ENGINE}, mma = {32, 256, 64, 256, 4, 1};
    const pit_microtile k32x64 = {32, 64, PIT_AXIS_K}, k32x128 = {32, 128, PIT_AXIS_K}, k32x1 = {32, 1, PIT_AXIS_K},
                        k32x32 = {32, 32, PIT_AXIS_K}, k64x64 = {64, 64, PIT_AXIS_K};
    CHECK(pit_tile_fits(&k32x64, &engine) && pit_tile_fits(&k32x128, &engine));
    CHECK(!pit_tile_fits(&k32x1, &engine) && !pit_tile_fits(&k32x32, &engine));
    CHECK(!pit_tile_fits(&k64x64, &engine));
    CHECK(pit_tile_fits(&k32x1, &mma) && pit_tile_fits(&k32x32, &mma) && pit_tile_fits(&k32x64, &mma));
}

int main(void)
{
    unsetenv("PIT_TILEDB");
    setenv("PIT_TILEDB_DIR", PIT_TEST_TILEDB_DIR, 1);
    setenv("PIT_CACHE_DIR", "/nonexistent/pit-test-select/cache", 1); /* no tuned files */
    make_scenarios();
    for (int i = 0; i < N_DBS; i++) {
        pit_tiledb *db = open_case(&db_cases[i]);
        if (!db)
            continue;
        test_column_pattern(db, &db_cases[i]);
        for (int dt = PIT_F32; dt <= PIT_BF16; dt++) {
            test_block_pattern(db, &db_cases[i], (pit_dtype)dt);
            test_full_density(db, &db_cases[i], (pit_dtype)dt);
            test_all_zero(db, &db_cases[i], (pit_dtype)dt);
        }
        test_many_groups(db);
        test_fixed(db);
        test_gathered(db, &db_cases[i]);
        test_errors(db);
        pit_tiledb_close(db);
    }
    test_tile_fits();
    test_around_costs();
    test_memory_bound();
    test_stream_rows();
    test_gathered_cheapest();
    free_scenarios();
    if (failures)
        fprintf(stderr, "test_select: %d failure(s)\n", failures);
    else
        printf("test_select: all passed\n");
    return failures ? 1 : 0;
}
