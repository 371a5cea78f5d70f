/*
 * core/tiledb/tune.c - pit_tune: measures the dense computation tiles of the tile
 * database on this device and writes the device's own database file.
 *
 * us_per_tile is measured the way the database defines it: a kernel of T
 * tile-steps (bm x bn x bk each) that fills the device takes T * us_per_tile.
 * Sparse tiles are timed through the real fused kernels, with the narrowest
 * micro-tile of their gather (bm x 1 along K, bm x bk for the engine, 1 x bk
 * along M), on two indices
 * built on the host: a full one and a random one with 1/TUNE_SPARSE_FRACTION
 * of the micro-tiles. The two times fit
 *
 *   time = tile_steps * us_per_tile + tiles_of_C * us_per_out
 *
 * so a sparse kernel's fixed part (writing or zeroing C, pipeline fill) is
 * not spread over its tile-steps, and the gather of scattered micro-tiles is
 * in us_per_tile. "detect" is one detection pass over a random operand,
 * "call" the wall time of a small detection plus the read-back of its counts
 * (the stall a sparse call pays before its kernel can be sized). "moe" and
 * "rows" are timed on a full index by tune_gathered.c.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

#define TUNE_SPARSE_FRACTION 8
#define TUNE_DETECT_SIDE_FACTOR 2 /* detection is timed on a larger operand */

typedef struct tune_problem {
    pit_context *ctx;
    void *bs;
    pit_tdesc A, B, C;
    pit_index idx;
    int repeats;
} tune_problem;

static int entry_applies(const pit_tiledb_entry *e, const pit_device_info *d)
{
    if (strcmp(e->backend, "*") != 0 && strcmp(e->backend, d->backend) != 0)
        return 0;
    return fnmatch(e->device, d->name, 0) == 0 || fnmatch(e->device, d->arch, 0) == 0 ||
           fnmatch(e->device, d->vendor, 0) == 0;
}

static void free_problem(tune_problem *p)
{
    void *bufs[] = {p->A.mem, p->B.mem, p->C.mem, p->idx.counts, p->idx.entries, p->idx.total};
    tune_free_buffers(p->ctx, p->bs, bufs, sizeof bufs / sizeof bufs[0]);
    memset(p, 0, sizeof *p);
}

/* The micro-tile a sparse entry is timed with: one tile-step's share of A
 * along the gathered axis, one element wide along the other. */
static pit_microtile tune_microtile(const pit_tiledb_entry *e)
{
    if (e->op == PIT_TILE_MATMUL_M) return (pit_microtile){1, e->tile.bk, PIT_AXIS_M};
    /* the engine takes whole micro-tile columns: one a tile-step */
    return (pit_microtile){e->tile.bm, e->tile.tensor_core == PIT_TILE_ENGINE ? e->tile.bk : 1, PIT_AXIS_K};
}

/* A problem whose sides are multiples of the tile, and room for its index. */
static pit_status make_problem(pit_context *ctx, const pit_tiledb_entry *e, int64_t size,
                               tune_problem *p, pit_rng *rng)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->bs = ctx->default_stream.bs;
    const pit_tile *t = &e->tile;
    int64_t m = ((size + t->bm - 1) / t->bm) * t->bm, n = ((size + t->bn - 1) / t->bn) * t->bn,
            k = ((size + t->bk - 1) / t->bk) * t->bk;
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, m, k, rng, &p->A));
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, k, n, rng, &p->B));
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, m, n, rng, &p->C));
    if (e->op == PIT_TILE_DENSE)
        return PIT_SUCCESS;
    pit_index *x = &p->idx;
    x->tile = tune_microtile(e);
    x->groups_per_batch = x->groups = (int32_t)(x->tile.axis == PIT_AXIS_M ? k / t->bk : m / t->bm);
    x->capacity = (int32_t)(x->tile.axis == PIT_AXIS_M ? m : k);
    return tune_index(ctx, x);
}

/* Writes an index with `per_group` micro-tiles in every group, a random
 * ascending subset of the group's (all of them when per_group == capacity),
 * and returns the tile-steps the kernel then runs. */
static pit_status write_index(tune_problem *p, const pit_tiledb_entry *e, int32_t per_group,
                              pit_rng *rng, int64_t *steps)
{
    pit_index *x = &p->idx;
    size_t ng = (size_t)x->groups, cap = (size_t)x->capacity;
    int32_t *counts = malloc(ng * 4), *entries = malloc(ng * cap * 4);
    pit_status s = counts && entries ? PIT_SUCCESS : pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tune: host memory");
    for (size_t g = 0; s == PIT_SUCCESS && g < ng; g++) {
        int32_t left = per_group, n = 0;
        for (int32_t i = 0; i < x->capacity && left > 0; i++) /* selection sampling */
            if ((int64_t)(pit_rng_next(rng) % (uint64_t)(x->capacity - i)) < left) {
                entries[g * cap + (size_t)n++] = i;
                left--;
            }
        counts[g] = n;
    }
    int32_t total = (int32_t)((int64_t)per_group * x->groups);
    pit_context *ctx = p->ctx;
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_write(ctx->bctx, p->bs, x->counts, 0, counts, ng * 4);
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_write(ctx->bctx, p->bs, x->entries, 0, entries, ng * cap * 4);
    if (s == PIT_SUCCESS)
        s = ctx->be->mem_write(ctx->bctx, p->bs, x->total, 0, &total, 4);
    free(counts);
    free(entries);
    const pit_tile *t = &e->tile;
    int32_t per_step = x->tile.axis == PIT_AXIS_M ? t->bm : t->bk;
    *steps = (int64_t)x->groups * ((per_group + per_step - 1) / per_step) * (p->B.shape[1] / t->bn);
    return s;
}

static pit_status run_tile(tune_problem *p, const pit_tiledb_entry *e)
{
    pit_context *ctx = p->ctx;
    if (e->op == PIT_TILE_DENSE)
        return ctx->be->matmul_dense(ctx->bctx, p->bs, &p->A, &p->B, &p->C);
    if (e->op == PIT_TILE_DETECT)
        return ctx->be->detect(ctx->bctx, p->bs, &p->A, &p->idx, 1);
    return ctx->be->matmul_sparse(ctx->bctx, p->bs, &e->tile, &p->idx, p->idx.capacity, 0, &p->A,
                                  &p->B, &p->C);
}

typedef struct tile_run {
    tune_problem *p;
    const pit_tiledb_entry *e;
} tile_run;

static pit_status run_tile_arg(void *arg)
{
    tile_run *r = arg;
    return run_tile(r->p, r->e);
}

static pit_status time_tile(tune_problem *p, const pit_tiledb_entry *e, double *median_us)
{
    tile_run r = {p, e};
    return pit_time_median_us(p->ctx, p->bs, TUNE_REPEATS(p->repeats), run_tile_arg, &r, median_us);
}

static int tunable(const pit_tiledb_entry *e)
{
    return e->op == PIT_TILE_DENSE || e->op == PIT_TILE_MATMUL_K || e->op == PIT_TILE_MATMUL_M ||
           e->op == PIT_TILE_DETECT || e->op == PIT_TILE_CALL || e->op == PIT_TILE_MOE ||
           e->op == PIT_TILE_ROWS || e->op == PIT_TILE_READ || e->op == PIT_TILE_STREAM;
}

/* A dense entry: the tile-steps of the whole product. */
static pit_status time_dense(tune_problem *p, pit_tiledb_entry *e)
{
    double us = 0;
    PIT_TRY(time_tile(p, e, &us));
    const pit_tile *t = &e->tile;
    int64_t steps = (p->A.shape[0] / t->bm) * (p->B.shape[1] / t->bn) * (p->A.shape[1] / t->bk);
    e->us_per_tile = pit_tiledb_us_per_tile(us, steps);
    return PIT_SUCCESS;
}

/* The two-index fit of a sparse entry (see the top of this file). */
static pit_status time_sparse(tune_problem *p, pit_tiledb_entry *e, pit_rng *rng)
{
    int64_t full_steps, sparse_steps;
    double full_us, sparse_us;
    int32_t cap = p->idx.capacity, few = cap / TUNE_SPARSE_FRACTION > 0 ? cap / TUNE_SPARSE_FRACTION : 1;
    PIT_TRY(write_index(p, e, cap, rng, &full_steps));
    PIT_TRY(time_tile(p, e, &full_us));
    PIT_TRY(write_index(p, e, few, rng, &sparse_steps));
    PIT_TRY(time_tile(p, e, &sparse_us));
    const pit_tile *t = &e->tile;
    double outs = (double)(p->A.shape[0] / t->bm) * (double)(p->B.shape[1] / t->bn);
    double per_step = full_steps > sparse_steps
                          ? (full_us - sparse_us) / (double)(full_steps - sparse_steps) : 0.0;
    double per_out = (sparse_us - per_step * (double)sparse_steps) / outs;
    if (!(per_step > 0) || !(per_out > 0)) {
        /* Noise beyond the fit: everything per tile-step, and a token fixed
         * part so that selection still treats the entry as fitted. */
        per_step = pit_tiledb_us_per_tile(full_us, full_steps);
        per_out = 1e-6;
    }
    e->us_per_tile = per_step;
    e->us_per_out = per_out;
    return PIT_SUCCESS;
}

/* One detection pass (one candidate) over a random operand, per bm x bn elements. */
static pit_status time_detect(pit_context *ctx, pit_tiledb_entry *e, int64_t side, int repeats,
                              pit_rng *rng)
{
    tune_problem p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.bs = ctx->default_stream.bs;
    p.repeats = repeats;
    pit_index *x = &p.idx;
    x->tile = (pit_microtile){32, 64, PIT_AXIS_K};
    x->groups_per_batch = x->groups = (int32_t)((side + 31) / 32);
    x->capacity = (int32_t)((side + 63) / 64);
    double us = 0;
    pit_status s = tune_matrix(ctx, p.bs, e->dtype, side, side, rng, &p.A);
    if (s == PIT_SUCCESS)
        s = tune_index(ctx, x);
    if (s == PIT_SUCCESS)
        s = time_tile(&p, e, &us);
    if (s == PIT_SUCCESS)
        e->us_per_tile = us * (double)e->tile.bm * (double)e->tile.bn / ((double)side * (double)side);
    free_problem(&p);
    return s;
}

/* Wall time of a small detection and the read-back of its counts. */
static pit_status time_call(pit_context *ctx, pit_tiledb_entry *e, int repeats, pit_rng *rng)
{
    tune_problem p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.bs = ctx->default_stream.bs;
    pit_index *x = &p.idx;
    x->tile = (pit_microtile){32, 64, PIT_AXIS_K};
    x->groups_per_batch = x->groups = 2;
    x->capacity = 1;
    int32_t counts[2];
    double us[32];
    int n = repeats < 32 ? repeats : 32;
    pit_status s = tune_matrix(ctx, p.bs, e->dtype, 64, 64, rng, &p.A);
    if (s == PIT_SUCCESS)
        s = tune_index(ctx, x);
    for (int i = -1; i < n && s == PIT_SUCCESS; i++) { /* i = -1: warm-up */
        double t0 = pit_now_us();
        s = ctx->be->detect(ctx->bctx, p.bs, &p.A, x, 1);
        if (s == PIT_SUCCESS)
            s = ctx->be->mem_read(ctx->bctx, p.bs, x->counts, 0, counts, sizeof counts);
        if (i >= 0)
            us[i] = pit_now_us() - t0;
    }
    if (s == PIT_SUCCESS) {
        e->us_per_tile = pit_median(us, n);
    }
    free_problem(&p);
    return s;
}

/* Streaming reads, from a device copy of side^2 x 8 bytes (larger than any
 * L2 at the tuning side) that reads and writes each byte once. */
static pit_status time_read(pit_context *ctx, pit_tiledb_entry *e, int64_t side, int repeats)
{
    double gbps = 0;
    PIT_TRY(pit_measure_copy_bandwidth(ctx, (size_t)(side * side * 8), repeats, &gbps));
    if (!(gbps > 0))
        return pit_error(PIT_ERR_BACKEND, "pit_tune: a device copy measured %g GB/s", gbps);
    e->us_per_tile = (double)e->tile.bm * e->tile.bn * (double)pit_dtype_size(e->dtype) / (gbps * 1e3);
    return PIT_SUCCESS;
}

/* Measures one entry in place; an entry the backend refuses keeps its shipped
 * cost (and is reported at debug level) rather than failing the whole tune. */
static pit_status tune_entry(pit_context *ctx, pit_tiledb_entry *e, int64_t size, int repeats,
                             pit_rng *rng)
{
    if (e->op == PIT_TILE_DETECT)
        return time_detect(ctx, e, size * TUNE_DETECT_SIDE_FACTOR, repeats, rng);
    if (e->op == PIT_TILE_CALL)
        return time_call(ctx, e, repeats, rng);
    if (e->op == PIT_TILE_READ)
        return time_read(ctx, e, size, repeats);
    if (e->op == PIT_TILE_STREAM)
        return tune_stream(ctx, e, size, repeats, rng);
    pit_status s;
    if (e->op == PIT_TILE_MOE || e->op == PIT_TILE_ROWS) {
        s = tune_gathered(ctx, e, size, repeats, rng);
    } else {
        tune_problem p;
        s = make_problem(ctx, e, size, &p, rng);
        p.repeats = repeats;
        if (s == PIT_SUCCESS)
            s = e->op == PIT_TILE_DENSE ? time_dense(&p, e) : time_sparse(&p, e, rng);
        free_problem(&p);
    }
    if (s == PIT_SUCCESS)
        e->gflops = pit_tiledb_gflops(&e->tile, e->us_per_tile);
    if (s == PIT_ERR_UNSUPPORTED || s == PIT_ERR_COMPILE) {
        /* A tile this device cannot run (shared memory, work-group size) is
         * left out of the tuned file so selection never picks it. */
        pit_log_debug("tune: %s %s %dx%dx%d dropped: %s", pit_tile_op_name(e->op),
                      pit_dtype_name(e->dtype), e->tile.bm, e->tile.bn, e->tile.bk, pit_last_error());
        e->us_per_tile = -1.0;
        return PIT_SUCCESS;
    }
    return s;
}

#define TUNE_DTYPES 3
#define TUNE_STREAM_ROWS 4
static const pit_dtype tune_dtypes[TUNE_DTYPES] = {PIT_F32, PIT_F16, PIT_BF16};
/* the rows of x the "stream" entries are measured at */
static const int32_t stream_rows[TUNE_STREAM_ROWS] = {1, 4, 16, 64};

/* A row of op, dtype and tile for the device unless it has one of op and
 * dtype already (stream rows: of the tile's bm, one a row count); returns 1
 * when added. */
static int add_row(const pit_context *ctx, pit_tiledb_entry *mine, int *n, pit_tile_op op, pit_dtype dt,
                   pit_tile tile)
{
    if (!pit_device_stores(&ctx->info, dt))
        return 0;
    for (int i = 0; i < *n; i++)
        if (mine[i].op == op && mine[i].dtype == dt && (op != PIT_TILE_STREAM || mine[i].tile.bm == tile.bm))
            return 0;
    pit_tiledb_entry *e = &mine[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->device, sizeof e->device, "%s", ctx->info.arch);
    snprintf(e->backend, sizeof e->backend, "%s", ctx->info.backend);
    e->op = op;
    e->dtype = dt;
    e->tile = tile;
    return 1;
}

/* The rows the built-in table has none of (they are optional): "read" for
 * each dtype of the device and, on a GPU, "stream" at each of stream_rows.
 * On a CPU (PoCL) a decode call's time is mostly its fixed part at the
 * tuning side, and the two-point fit priced one row at 1.7x its time: the
 * decode suite found the automatic choice within 10% at 7 of 32 points with
 * them, 16 without (docs/design/decode-stream-rows.md). Returns how many
 * were added; mine has room for TUNE_DTYPES x (1 + TUNE_STREAM_ROWS). */
static int add_measured_rows(const pit_context *ctx, int cpu, pit_tiledb_entry *mine, int *n)
{
    int added = 0;
    for (int d = 0; d < TUNE_DTYPES; d++) {
        added += add_row(ctx, mine, n, PIT_TILE_READ, tune_dtypes[d], (pit_tile){64, 64, 1, 256, 1, 0});
        for (int r = 0; r < TUNE_STREAM_ROWS && !cpu; r++)
            added += add_row(ctx, mine, n, PIT_TILE_STREAM, tune_dtypes[d],
                             (pit_tile){stream_rows[r], 64, 64, 256, 1, 0});
    }
    return added;
}

PIT_API pit_status pit_tune(pit_context *ctx, const pit_tune_options *options, char *written_path,
                            size_t written_path_size)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    pit_tune_options o = options ? *options : (pit_tune_options){0};
    int cpu = strstr(ctx->info.arch, "cpu") != NULL;
    /* GPUs: the paper's side, so the device is as full as in the large
     * products the database mostly chooses for (at 2048 a dense tile costs
     * ~1.7x more on the H100: the grid is a fraction of a wave). */
    int64_t size = o.quick ? 128 : cpu ? 256 : 4096;
    int repeats = o.repeats > 0 ? o.repeats : o.quick ? 3 : 10;
    int count = 0;
    const pit_tiledb_entry *all = pit_tiledb_entries(ctx->db, &count);
    pit_tiledb_entry *mine = calloc((size_t)count + TUNE_DTYPES * (1 + TUNE_STREAM_ROWS), sizeof *mine);
    if (!mine)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tune: host memory");
    int n = 0, todo = 0;
    for (int i = 0; i < count; i++)
        if (entry_applies(&all[i], &ctx->info) && pit_device_stores(&ctx->info, all[i].dtype)) {
            mine[n] = all[i];
            /* The tuned file names this device exactly. */
            snprintf(mine[n].device, sizeof mine[n].device, "%s", ctx->info.arch);
            snprintf(mine[n].backend, sizeof mine[n].backend, "%s", ctx->info.backend);
            todo += tunable(&mine[n]);
            n++;
        }
    todo += add_measured_rows(ctx, cpu, mine, &n);
    pit_rng rng;
    pit_rng_seed(&rng, 2024);
    pit_status s = PIT_SUCCESS;
    for (int i = 0, done = 0; i < n && s == PIT_SUCCESS; i++) {
        if (!tunable(&mine[i]))
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s %s %dx%dx%d", pit_tile_op_name(mine[i].op),
                 pit_dtype_name(mine[i].dtype), mine[i].tile.bm, mine[i].tile.bn, mine[i].tile.bk);
        s = tune_entry(ctx, &mine[i], size, repeats, &rng);
        if (o.progress)
            o.progress(o.user, ++done, todo, what);
    }
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (mine[i].us_per_tile >= 0)
            mine[kept++] = mine[i];
    n = kept;
    char path[1024];
    if (s == PIT_SUCCESS) {
        if (o.output_path)
            snprintf(path, sizeof path, "%s", o.output_path);
        else
            s = pit_tiledb_tuned_path(&ctx->info, path, sizeof path);
    }
    if (s == PIT_SUCCESS) {
        char header[512];
        snprintf(header, sizeof header, "measured by pit tune%s on \"%s\" (%s, %s, driver %s), "
                 "problem side %lld, median of %d", o.quick ? " --quick" : "", ctx->info.name,
                 ctx->info.backend, ctx->info.arch, ctx->info.driver_version, (long long)size, repeats);
        s = pit_tiledb_write(path, mine, n, header);
    }
    if (s == PIT_SUCCESS && written_path && written_path_size)
        snprintf(written_path, written_path_size, "%s", path);
    free(mine);
    return s;
}
