/*
 * core/pit/select.c - the online selection, the paper's Algorithm 1.
 *
 * For each candidate micro-tile (with its per-group non-zero counts read back
 * from the detection pass) and each dense tile of the database that can
 * compute it, the cost of the fused SRead -> tile -> SWrite kernel is
 *
 *   tiles   = sum_g ceil(count_g * extent / divisor) * other
 *   compute = tiles * us_per_tile * strided-gather penalty (rules.c)
 *   index   = (groups + nonzero * other) * 4 bytes at fill bandwidth
 *   + for gathers that split the K reduction (axis M and N):
 *     zero C once (fill entries), and every tile's SWrite adds its bm x bn
 *     partial result with atomics (accum entries: cheap where the hardware
 *     adds floats in L2, a compare-and-swap loop on OpenCL)
 *
 *   axis  entry     tile must have  extent  divisor  other
 *   K     matmul_k  bm == Tm        Tk      bk       ceil(N / bn)
 *   M     matmul_m  bk == Tk        Tm      bm       ceil(N / bn)
 *   N     matmul_n  bk == Tk        Tn      bn       ceil(M / bm)
 *
 * When the entry was fitted by `pit tune` (us_per_out > 0), the fill, accum
 * and strided-gather terms are inside its two measured costs instead:
 *
 *   compute = tiles * us_per_tile + batch * ceil(M/bm) ceil(N/bn) * us_per_out
 *
 * Every sparse option also pays what the call costs around its kernel: the
 * detection pass over the sparse operand (its "detect" entry, per element;
 * steady calls detect only the chosen candidate) and the "call" entry (the
 * read-back of the counts that stalls the stream, the host's selection).
 * Along K a settled plan reads nothing back (core/ops/matmul.c), so K options
 * pay the call only once every redetect interval (pit_problem), as the dense
 * GEMM does.
 *
 * The dense GEMM costs batch * ceil(M/bm) ceil(N/bn) ceil(K/bk) tile-steps
 * of its best "dense" entry, plus one detection and one call per redetect
 * interval (a dense plan re-checks the pattern that often). us_per_tile is
 * the amortised full-device cost of one tile-step (select.h), so a cost is
 * simply a count times a unit cost.
 *
 * Both are bounded below by memory: the compute part of a plan is at least
 * the bytes it must move (A, B and C once; along K only the gathered rows of
 * B and the indexed micro-tiles of A) at the "read" entry's rate. Few rows
 * (decode) make every plan memory-bound, and a K plan then wins by the share
 * of B's rows it skips. "read" rows exist only where measured (`pit tune`
 * adds them; the built-in table has none): without one the bound is left out.
 *
 * A candidate of the decode regime (along K, one column wide, at most a
 * "stream" entry's bm rows of A) is priced by that entry instead, which
 * `pit tune` measures through the real call: its gathered rows of B at the
 * measured rate plus a fixed part a call. Such kernels stream at rates that
 * differ by M (CUDA: CUDA cores to 4 rows, tensor cores from 5), which
 * neither the tile model nor the read bound knows.
 *
 * The sums over groups are the only per-group work: one pass per distinct
 * divisor per candidate (a handful), shifts for powers of two, no allocation.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "choice.h"
#include "internal.h"

#define INDEX_ENTRY_BYTES 4.0
#define MAX_DIVISORS 16

/* A candidate's statistics, summarised once. */
typedef struct cand_summary {
    const pit_candidate_stats *st;
    int64_t nonzero;
    int32_t max_entries;
    int ndiv;
    int32_t div[MAX_DIVISORS];
    int64_t div_sum[MAX_DIVISORS];
} cand_summary;

/* The best way found to run one option (a candidate or dense). */
typedef struct option {
    int valid;
    const pit_tiledb_entry *entry;
    int64_t tiles;
    double us;
} option;

/* ---- which tiles fit which micro-tile ------------------------------------- */

static int tile_op_for(const pit_problem *p, pit_axis axis, pit_tile_op *op)
{
    if (p->sparse == PIT_SPARSE_A && (axis == PIT_AXIS_K || axis == PIT_AXIS_M)) {
        *op = axis == PIT_AXIS_K ? PIT_TILE_MATMUL_K : PIT_TILE_MATMUL_M;
        return 1;
    }
    if (p->sparse == PIT_SPARSE_B && axis == PIT_AXIS_N) {
        *op = PIT_TILE_MATMUL_N;
        return 1;
    }
    return 0; /* e.g. a K-axis gather of sparse B: no kernel kind for it */
}

int pit_tile_fits(const pit_microtile *t, const pit_tile *tile)
{
    switch (t->axis) {
    case PIT_AXIS_K: /* the engine steps through whole micro-tile columns */
        return tile->bm == t->rows && (tile->tensor_core != PIT_TILE_ENGINE || t->cols % tile->bk == 0);
    case PIT_AXIS_M: return tile->bk == t->cols;
    case PIT_AXIS_N: return tile->bk == t->rows;
    default: return 0;
    }
}

/* Micro-tile extent along the gathered axis, and the tile's matching size. */
static int32_t gathered_extent(const pit_microtile *t)
{
    return t->axis == PIT_AXIS_M ? t->rows : t->cols;
}

static int32_t gather_divisor(const pit_microtile *t, const pit_tile *tile)
{
    return t->axis == PIT_AXIS_K ? tile->bk : t->axis == PIT_AXIS_M ? tile->bm : tile->bn;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return b > 0 ? (a + b - 1) / b : 0;
}

/* Tiles along the axis neither gathered nor reduced. */
static int64_t other_tiles(const pit_problem *p, const pit_microtile *t, const pit_tile *tile)
{
    return t->axis == PIT_AXIS_N ? ceil_div(p->m, tile->bm) : ceil_div(p->n, tile->bn);
}

static int64_t batch_of(const pit_problem *p)
{
    return p->batch > 0 ? p->batch : 1;
}

static double redetect_every(const pit_problem *p)
{
    return p->redetect_every > 0 ? p->redetect_every : PIT_REDETECT_EVERY;
}

/* ---- per-group sums --------------------------------------------------------- */

/* sum_g ceil(counts[g] * extent / div): dense tiles after compaction. */
static int64_t sum_ceil(const int32_t *counts, int32_t groups, int32_t extent, int32_t div)
{
    int64_t sum = 0, e = extent, round = div - 1;
    if ((div & (div - 1)) == 0) {
        int shift = 0;
        while ((1 << shift) < div)
            shift++;
        for (int32_t g = 0; g < groups; g++)
            sum += ((int64_t)counts[g] * e + round) >> shift;
    } else {
        for (int32_t g = 0; g < groups; g++)
            sum += ((int64_t)counts[g] * e + round) / div;
    }
    return sum;
}

static int64_t summary_tiles(cand_summary *cs, int32_t div)
{
    for (int i = 0; i < cs->ndiv; i++)
        if (cs->div[i] == div)
            return cs->div_sum[i];
    int64_t s = sum_ceil(cs->st->counts, cs->st->groups, gathered_extent(&cs->st->tile), div);
    if (cs->ndiv < MAX_DIVISORS) {
        cs->div[cs->ndiv] = div;
        cs->div_sum[cs->ndiv++] = s;
    }
    return s;
}

static pit_status summarise(const pit_candidate_stats *st, int i, cand_summary *cs)
{
    memset(cs, 0, sizeof *cs);
    cs->st = st;
    if (st->groups < 0 || st->capacity < 0 || (st->groups > 0 && !st->counts))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_select: candidate %d has %d groups, "
                         "capacity %d, counts %p", i, st->groups, st->capacity,
                         (const void *)st->counts);
    if (st->tile.rows <= 0 || st->tile.cols <= 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_select: candidate %d micro-tile %dx%d",
                         i, st->tile.rows, st->tile.cols);
    int32_t lo = 0, hi = 0;
    int64_t sum = 0;
    for (int32_t g = 0; g < st->groups; g++) {
        int32_t c = st->counts[g];
        sum += c;
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    if (lo < 0 || hi > st->capacity)
        return pit_error(PIT_ERR_INTERNAL, "pit_select: candidate %d (%dx%d) has a group count "
                         "outside 0..%d (%d..%d): detection wrote a bad index", i,
                         st->tile.rows, st->tile.cols, st->capacity, lo, hi);
    cs->nonzero = sum;
    cs->max_entries = hi;
    return PIT_SUCCESS;
}

/* ---- costs ---------------------------------------------------------------- */

/* Device time of one byte of C written (fill) or atomically added (accum),
 * from the cheapest entry of that op; 0 when the database has none. */
static double us_per_byte(const pit_tiledb_entry *v, int n, pit_tile_op op, pit_dtype dt)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].op != op || v[i].dtype != dt)
            continue;
        double per = v[i].us_per_tile /
                     ((double)v[i].tile.bm * v[i].tile.bn * (double)pit_dtype_size(dt));
        if (best == 0 || per < best)
            best = per;
    }
    return best;
}

/* The cheapest entry of op for dt; NULL when the database has none. */
static const pit_tiledb_entry *cheapest_entry(const pit_tiledb_entry *v, int n, pit_tile_op op,
                                              pit_dtype dt)
{
    const pit_tiledb_entry *best = NULL;
    for (int i = 0; i < n; i++)
        if (v[i].op == op && v[i].dtype == dt && (!best || v[i].us_per_tile < best->us_per_tile))
            best = &v[i];
    return best;
}

typedef struct cost_ctx {
    const pit_problem *p;
    double fill_byte;
    double accum_byte;
    double elem;
    double detect_us; /* detection of the sparse operand */
    double call_us;   /* the call's read-back stall */
    double read_byte; /* device memory, us per byte streamed; 0: not measured */
} cost_ctx;

/* Elements of the sparse operand the detection reads. */
static double sparse_elements(const pit_problem *p)
{
    double b = (double)(p->batch > 0 ? p->batch : 1);
    return p->sparse == PIT_SPARSE_B ? b * (double)p->k * (double)p->n
                                     : b * (double)p->m * (double)p->k;
}

static cost_ctx make_cost_ctx(const pit_problem *p, const pit_tiledb_entry *v, int n)
{
    cost_ctx cx = {p, us_per_byte(v, n, PIT_TILE_FILL, p->dtype),
                   us_per_byte(v, n, PIT_TILE_ACCUM, p->dtype), (double)pit_dtype_size(p->dtype), 0, 0,
                   us_per_byte(v, n, PIT_TILE_READ, p->dtype)};
    /* The built-in table always has both; guard against a bare database anyway. */
    if (cx.fill_byte <= 0)
        cx.fill_byte = 1e-5; /* 100 GB/s */
    if (cx.accum_byte <= 0)
        cx.accum_byte = 2 * cx.fill_byte;
    const pit_tiledb_entry *det = cheapest_entry(v, n, PIT_TILE_DETECT, p->dtype);
    const pit_tiledb_entry *call = cheapest_entry(v, n, PIT_TILE_CALL, p->dtype);
    if (det)
        cx.detect_us = sparse_elements(p) * det->us_per_tile /
                       ((double)det->tile.bm * (double)det->tile.bn);
    if (call)
        cx.call_us = call->us_per_tile;
    return cx;
}

/* The least time a plan spends moving its bytes through device memory (t
 * NULL: dense). Along K the gathered rows of B over all groups, at most B. */
static double memory_floor_us(const cost_ctx *cx, const pit_microtile *t, int64_t nonzero)
{
    const pit_problem *p = cx->p;
    const double b = (double)batch_of(p), m = (double)p->m, n = (double)p->n, k = (double)p->k;
    double a_el = b * m * k, b_rows = b * k;
    if (t && t->axis == PIT_AXIS_K) {
        double rows = (double)nonzero * t->cols, a = (double)nonzero * t->rows * t->cols;
        b_rows = rows < b_rows ? rows : b_rows;
        a_el = a < a_el ? a : a_el;
    }
    return (a_el + b_rows * n + b * m * n) * cx->elem * cx->read_byte;
}

static double at_least(double us, double floor_us)
{
    return us > floor_us ? us : floor_us;
}

static double sparse_cost(const cost_ctx *cx, const pit_microtile *t, const pit_tiledb_entry *e,
                          int64_t gathered_tiles, int64_t nonzero, int64_t groups,
                          int64_t *tiles_out)
{
    const pit_problem *p = cx->p;
    const pit_tile *tile = &e->tile;
    int64_t other = other_tiles(p, t, tile);
    int64_t tiles = gathered_tiles * other;
    *tiles_out = tiles;
    double us = cx->detect_us + (t->axis == PIT_AXIS_K ? cx->call_us / redetect_every(p) : cx->call_us);
    us += ((double)groups + (double)nonzero * (double)other) * INDEX_ENTRY_BYTES * cx->fill_byte;
    const double floor_us = memory_floor_us(cx, t, nonzero);
    if (e->us_per_out > 0) { /* fitted by pit tune: see the top of this file */
        double outs = (double)batch_of(p) * (double)ceil_div(p->m, tile->bm) *
                      (double)ceil_div(p->n, tile->bn);
        return us + at_least((double)tiles * e->us_per_tile + outs * e->us_per_out, floor_us);
    }
    /* rows of A past M are never loaded (decode): they cost no sectors */
    pit_tile loaded = *tile;
    if (t->axis == PIT_AXIS_K && p->m < loaded.bm)
        loaded.bm = (int32_t)p->m;
    us += at_least((double)tiles * e->us_per_tile * pit_slow_penalty(t, p->dtype, &loaded), floor_us);
    if (t->axis == PIT_AXIS_M || t->axis == PIT_AXIS_N) {
        double c_bytes = (double)batch_of(p) * (double)p->m * (double)p->n * cx->elem;
        double tile_bytes = (double)tile->bm * tile->bn * cx->elem;
        us += c_bytes * cx->fill_byte;
        us += (double)tiles * tile_bytes * cx->accum_byte;
    }
    return us;
}

static option best_dense(const cost_ctx *cx, const pit_tiledb_entry *v, int n)
{
    const pit_problem *p = cx->p;
    option best = {0};
    for (int i = 0; i < n; i++) {
        if (v[i].op != PIT_TILE_DENSE || v[i].dtype != p->dtype)
            continue;
        const pit_tile *t = &v[i].tile;
        int64_t tiles = batch_of(p) * ceil_div(p->m, t->bm) * ceil_div(p->n, t->bn) *
                        ceil_div(p->k, t->bk);
        double us = at_least((double)tiles * v[i].us_per_tile, memory_floor_us(cx, NULL, 0)) +
                    (cx->detect_us + cx->call_us) / redetect_every(p);
        if (!best.valid || us < best.us)
            best = (option){1, &v[i], tiles, us};
    }
    return best;
}

/* ---- names ---------------------------------------------------------------- */

char pit_axis_letter(pit_axis a)
{
    return a == PIT_AXIS_K ? 'k' : a == PIT_AXIS_M ? 'm' : a == PIT_AXIS_N ? 'n' : '?';
}

static void describe(char *buf, size_t size, const pit_microtile *t, const option *o)
{
    if (!t) {
        snprintf(buf, size, PIT_CHOICE_DENSE, PIT_DENSE_GENERIC);
        return;
    }
    const pit_tile *tile = &o->entry->tile;
    snprintf(buf, size, PIT_CHOICE_SPARSE, pit_axis_letter(t->axis), t->rows, t->cols, tile->bm,
             tile->bn, tile->bk, (long long)o->tiles);
}

void pit_selection_name_dense(pit_selection *sel, const char *dense_name)
{
    if (!sel || !dense_name || !*dense_name)
        return;
    char generic[32];
    snprintf(generic, sizeof generic, PIT_CHOICE_DENSE, PIT_DENSE_GENERIC);
    char *names[2] = {sel->choice, sel->runner_up};
    for (int i = 0; i < 2; i++)
        if (strcmp(names[i], generic) == 0)
            snprintf(names[i], sizeof sel->choice, PIT_CHOICE_DENSE, dense_name);
}

/* ---- the selection -------------------------------------------------------- */

/* The "stream" entry of a decode-regime candidate (along K, one column
 * wide): the one of the dtype measured at the fewest rows of A that are no
 * fewer than the problem's; NULL when there is none (M above every row
 * measured, or a database without them). */
static const pit_tiledb_entry *stream_entry(const cost_ctx *cx, const pit_microtile *t, const pit_tiledb_entry *v,
                                            int n)
{
    const pit_problem *p = cx->p;
    if (t->axis != PIT_AXIS_K || t->cols != 1 || p->sparse != PIT_SPARSE_A)
        return NULL;
    const pit_tiledb_entry *best = NULL;
    for (int i = 0; i < n; i++)
        if (v[i].op == PIT_TILE_STREAM && v[i].dtype == p->dtype && v[i].tile.bm >= p->m &&
            (!best || v[i].tile.bm < best->tile.bm))
            best = &v[i];
    return best;
}

/* A decode-regime call as its stream entry measured it: the gathered rows
 * of B (each group reads its own) at the entry's rate, its fixed part, and
 * the periodic full look at the pattern. Detection is inside the measured
 * time (a settled call's: the chosen candidate alone, or none where the
 * kernel finds the non-zeros itself). */
static double stream_cost(const cost_ctx *cx, const pit_tiledb_entry *e, int64_t nonzero)
{
    const pit_problem *p = cx->p;
    double elements = (double)nonzero * (double)p->n * (double)batch_of(p);
    double per_element = e->us_per_tile / ((double)e->tile.bn * (double)e->tile.bk);
    return elements * per_element + e->us_per_out + cx->call_us / redetect_every(p);
}

static option best_for_candidate(const cost_ctx *cx, cand_summary *cs, const pit_tiledb_entry *v,
                                 int n)
{
    option best = {0};
    const pit_microtile *t = &cs->st->tile;
    pit_tile_op op;
    if (!tile_op_for(cx->p, t->axis, &op))
        return best;
    for (int i = 0; i < n; i++) {
        if (v[i].op != op || v[i].dtype != cx->p->dtype || !pit_tile_fits(t, &v[i].tile))
            continue;
        int64_t gathered = summary_tiles(cs, gather_divisor(t, &v[i].tile)), tiles;
        double us = sparse_cost(cx, t, &v[i], gathered, cs->nonzero, cs->st->groups, &tiles);
        if (pit_log_wants(PIT_LOG_DEBUG))
            pit_log_debug("select: %c%dx%d tile %dx%dx%d: %lld tiles, %.2f us%s",
                          pit_axis_letter(t->axis), t->rows, t->cols, v[i].tile.bm, v[i].tile.bn,
                          v[i].tile.bk, (long long)tiles, us,
                          pit_microtile_slow(t, cx->p->dtype) ? " (strided gather)" : "");
        if (!best.valid || us < best.us)
            best = (option){1, &v[i], tiles, us};
    }
    /* the tile stays the tile model's choice (the kernel behind it where
     * the backend has no decode kernel); the time is the measured one */
    const pit_tiledb_entry *stream = best.valid ? stream_entry(cx, t, v, n) : NULL;
    if (stream) {
        best.us = stream_cost(cx, stream, cs->nonzero);
        pit_log_debug("select: %c%dx%d priced by its stream row (%d rows): %.2f us", pit_axis_letter(t->axis),
                      t->rows, t->cols, stream->tile.bm, best.us);
    }
    return best;
}

static pit_status check_problem(const pit_tiledb *db, const pit_problem *p, const char *fn)
{
    if (!db || !p)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: null database or problem", fn);
    if (p->op != PIT_OP_MATMUL && p->op != PIT_OP_BATCH_MATMUL && p->op != PIT_OP_MOE_MATMUL)
        return pit_error(PIT_ERR_UNSUPPORTED, "%s: operator %d has no cost model yet", fn,
                         (int)p->op);
    if (p->dtype != PIT_F32 && p->dtype != PIT_F16 && p->dtype != PIT_BF16)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "%s: dtype %s is not a matmul dtype", fn,
                         pit_dtype_name(p->dtype));
    if (p->m <= 0 || p->n <= 0 || p->k <= 0 || p->batch < 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: problem %lldx%lldx%lld batch %lld", fn,
                         (long long)p->m, (long long)p->n, (long long)p->k, (long long)p->batch);
    return PIT_SUCCESS;
}

/* Index of the cheapest option other than skip (-1: dense), or -2 if none. */
static int cheapest(const option *opts, int n, const option *dense, int skip, double *us)
{
    int best = -2;
    *us = 0;
    if (dense->valid && skip != -1) {
        best = -1;
        *us = dense->us;
    }
    for (int i = 0; i < n; i++)
        if (opts[i].valid && i != skip && (best == -2 || opts[i].us < *us)) {
            best = i;
            *us = opts[i].us;
        }
    return best;
}

static void fill_selection(pit_selection *out, const cand_summary *cs, const option *opts,
                           int n, const option *dense, int chosen)
{
    memset(out, 0, sizeof *out);
    out->dense = chosen < 0;
    const option *o = chosen < 0 ? dense : &opts[chosen];
    out->tile = o->entry->tile;
    out->predicted_us = o->us;
    describe(out->choice, sizeof out->choice, chosen < 0 ? NULL : &cs[chosen].st->tile, o);
    double ru_us;
    int ru = cheapest(opts, n, dense, chosen, &ru_us);
    /* dense: the sparse candidate it beat (the runner-up) says how the
     * pattern looked */
    out->candidate = chosen >= 0 ? chosen : ru >= 0 ? ru : 0;
    const cand_summary *c = n > 0 ? &cs[out->candidate] : NULL;
    out->max_entries = c ? c->max_entries : 0;
    out->nonzero_tiles = c ? c->nonzero : -1;
    if (ru == -2) {
        snprintf(out->runner_up, sizeof out->runner_up, PIT_CHOICE_NONE);
        return;
    }
    out->runner_up_us = ru_us;
    describe(out->runner_up, sizeof out->runner_up, ru < 0 ? NULL : &cs[ru].st->tile,
             ru < 0 ? dense : &opts[ru]);
}

pit_status pit_select(const pit_tiledb *db, const pit_problem *problem,
                      const pit_candidate_stats *stats, int n, pit_selection *out)
{
    PIT_TRY(check_problem(db, problem, "pit_select"));
    if (!out || n < 0 || n > PIT_MAX_CANDIDATES || (n > 0 && !stats))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_select: %d candidates (max %d), stats %p",
                         n, PIT_MAX_CANDIDATES, (const void *)stats);
    int nentries;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &nentries);
    cost_ctx cx = make_cost_ctx(problem, v, nentries);
    cand_summary cs[PIT_MAX_CANDIDATES];
    option opts[PIT_MAX_CANDIDATES];
    int all_zero = n > 0;
    for (int i = 0; i < n; i++) {
        PIT_TRY(summarise(&stats[i], i, &cs[i]));
        opts[i] = best_for_candidate(&cx, &cs[i], v, nentries);
        all_zero &= cs[i].nonzero == 0;
    }
    option dense = best_dense(&cx, v, nentries);
    if (dense.valid)
        pit_log_debug("select: dense GEMM tile %dx%dx%d: %lld tiles, %.2f us", dense.entry->tile.bm,
                      dense.entry->tile.bn, dense.entry->tile.bk, (long long)dense.tiles, dense.us);
    double best_us;
    /* No non-zero anywhere: any sparse plan skips the compute, never dense. */
    int chosen = cheapest(opts, n, all_zero ? &(option){0} : &dense, n, &best_us);
    /* cheapest() keeps dense on a tie: the dense GEMM needs no index to trust. */
    if (chosen == -2 && dense.valid)
        chosen = -1;
    if (chosen == -2)
        return pit_error(PIT_ERR_INTERNAL, "pit_select: no tile for %s in %s", pit_dtype_name(
                         problem->dtype), pit_tiledb_source(db));
    fill_selection(out, cs, opts, n, &dense, chosen);
    pit_log_debug("select: chose %s, %.2f us (runner-up %s, %.2f us)", out->choice,
                  out->predicted_us, out->runner_up, out->runner_up_us);
    return PIT_SUCCESS;
}

/* ---- fixed plans ---------------------------------------------------------- */

/* Groups and capacity the detection of t produces on this problem. */
static void full_index_shape(const pit_problem *p, const pit_microtile *t, int64_t *groups,
                             int64_t *capacity)
{
    int64_t b = batch_of(p);
    switch (t->axis) {
    case PIT_AXIS_K:
        *groups = b * ceil_div(p->m, t->rows);
        *capacity = ceil_div(p->k, t->cols);
        break;
    case PIT_AXIS_M:
        *groups = b * ceil_div(p->k, t->cols);
        *capacity = ceil_div(p->m, t->rows);
        break;
    default: /* N */
        *groups = b * ceil_div(p->k, t->rows);
        *capacity = ceil_div(p->n, t->cols);
        break;
    }
}

/* A tile that computes t when the database has none: plain CUDA-core sizes. */
static pit_tile synthesised_tile(const pit_microtile *t)
{
    pit_tile tile = {64, 64, 32, 256, 1, 0};
    if (t->axis == PIT_AXIS_K)
        tile.bm = t->rows;
    else
        tile.bk = t->axis == PIT_AXIS_M ? t->cols : t->rows;
    return tile;
}

pit_status pit_select_fixed(const pit_tiledb *db, const pit_problem *problem,
                            const pit_microtile *tile, pit_tile *out)
{
    PIT_TRY(check_problem(db, problem, "pit_select_fixed"));
    if (!tile || !out || tile->rows <= 0 || tile->cols <= 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_select_fixed: invalid micro-tile or output");
    pit_tile_op op;
    if (!tile_op_for(problem, tile->axis, &op))
        return pit_error(PIT_ERR_UNSUPPORTED, "pit_select_fixed: no kernel gathers sparse %s "
                         "along axis %d", problem->sparse == PIT_SPARSE_A ? "A" : "B",
                         (int)tile->axis);
    int n;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n);
    cost_ctx cx = make_cost_ctx(problem, v, n);
    int64_t groups, capacity;
    full_index_shape(problem, tile, &groups, &capacity);
    /* No statistics: the grid is sized for a full index, so cost it full. */
    option best = {0};
    for (int i = 0; i < n; i++) {
        if (v[i].op != op || v[i].dtype != problem->dtype || !pit_tile_fits(tile, &v[i].tile))
            continue;
        int64_t per_group = ceil_div(capacity * gathered_extent(tile),
                                     gather_divisor(tile, &v[i].tile)), tiles;
        double us = sparse_cost(&cx, tile, &v[i], groups * per_group, groups * capacity, groups,
                                &tiles);
        if (!best.valid || us < best.us)
            best = (option){1, &v[i], tiles, us};
    }
    if (best.valid) {
        *out = best.entry->tile;
        return PIT_SUCCESS;
    }
    *out = synthesised_tile(tile);
    pit_log_debug("select: no %s %s tile for %c%dx%d in %s: using %dx%dx%d", pit_tile_op_name(op),
                  pit_dtype_name(problem->dtype), pit_axis_letter(tile->axis), tile->rows, tile->cols,
                  pit_tiledb_source(db), out->bm, out->bn, out->bk);
    return PIT_SUCCESS;
}

/* us of one flop of a tile-step: comparable across tile sizes. */
static double us_per_flop(const pit_tiledb_entry *e)
{
    const pit_tile *t = &e->tile;
    return e->us_per_tile / (2.0 * t->bm * t->bn * t->bk);
}

pit_status pit_select_gathered(const pit_tiledb *db, pit_tile_op op, pit_dtype dtype,
                               pit_tile *out)
{
    if (!db || !out || (op != PIT_TILE_MOE && op != PIT_TILE_ROWS))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_select_gathered: invalid argument");
    int n;
    const pit_tiledb_entry *v = pit_tiledb_entries(db, &n), *best = NULL;
    for (int i = 0; i < n; i++) {
        if (v[i].op != op || v[i].dtype != dtype)
            continue;
        if (!best || us_per_flop(&v[i]) < us_per_flop(best))
            best = &v[i];
    }
    if (!best) { /* the backend's own tile */
        memset(out, 0, sizeof *out);
        pit_log_debug("select: no %s %s tile in %s: the backend's own", pit_tile_op_name(op),
                      pit_dtype_name(dtype), pit_tiledb_source(db));
        return PIT_SUCCESS;
    }
    *out = best->tile;
    pit_log_debug("select: %s %s tile %dx%dx%d from %s", pit_tile_op_name(op),
                  pit_dtype_name(dtype), out->bm, out->bn, out->bk, pit_tiledb_source(db));
    return PIT_SUCCESS;
}
