/*
 * core/tiledb/tune_stream.c - pit_tune's "stream" rows: the decode regime,
 * x[M,K] . W[K,N] with a few rows and whole columns of x zero (activation
 * sparsity), through the backend's sparse matmul along K with one-wide
 * column micro-tiles, called as a settled plan calls it (core/ops/matmul.c):
 * detection of the one candidate, skipped where the kernel finds the
 * non-zeros itself, then the kernel. Such a call is bound by the rows of W
 * it reads, at a rate that depends on the kernel behind M (CUDA: CUDA cores
 * to 4 rows, tensor cores from 5), so the selection prices it by them
 * (select.c). Timed with half and with an eighth of x's columns kept, the
 * two times fit
 *
 *   time = gathered elements of W x us_per_element + us_fixed
 *
 * stored as us_per_tile = us_per_element x bn x bk and us_per_out = us_fixed
 * less what any call of the device pays (a dense GEMM of one 64 x 64 tile
 * timed the same way: the launch, the host's part), because the selection
 * prices the dense GEMM by its work alone.
 */
#include <stdlib.h>
#include <string.h>

#include "tune.h"

#define STREAM_N_PER_K 3.5 /* W is [K, 3.5 K]: a model's up projection */
#define STREAM_KEEP_HALF 2
#define STREAM_KEEP_EIGHTH 8
#define STREAM_SMALL 64 /* the side of the dense call whose time every call pays */

typedef struct stream_problem {
    pit_context *ctx;
    void *bs;
    pit_tdesc X, W, C;
    pit_index idx;
    pit_tile tile;
    int inside; /* the kernel finds x's non-zero columns itself */
} stream_problem;

/* The column micro-tile the decode regime detects for M rows (core's
 * decode candidates): 16 rows high, 32 from 17 rows. */
static pit_microtile stream_microtile(int64_t m)
{
    return (pit_microtile){m <= 16 ? 16 : 32, 1, PIT_AXIS_K};
}

/* x's values, with every `keep`-th column (from a random start) non-zero
 * down all rows and the others zero, written into X. Returns the kept
 * columns. */
static pit_status write_x(stream_problem *p, int keep, pit_rng *rng, int64_t *kept)
{
    const int64_t m = p->X.shape[0], k = p->X.shape[1];
    const size_t n = (size_t)(m * k), es = pit_dtype_size(p->X.dtype);
    double *x = malloc(n * sizeof(double));
    void *buf = malloc(n * es);
    pit_status s = x && buf ? PIT_SUCCESS : pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tune: host memory");
    *kept = 0;
    if (s == PIT_SUCCESS) {
        const int64_t start = (int64_t)(pit_rng_next(rng) % (uint64_t)keep);
        pit_ref_fill_random(rng, x, n);
        for (int64_t c = 0; c < k; c++) {
            const int on = c % keep == start;
            *kept += on;
            for (int64_t r = 0; r < m && !on; r++)
                x[r * k + c] = 0.0;
        }
        pit_ref_from_double(p->X.dtype, x, n, buf);
        s = p->ctx->be->mem_write(p->ctx->bctx, p->bs, p->X.mem, 0, buf, n * es);
    }
    free(x);
    free(buf);
    return s;
}

/* One settled call: detection unless the kernel does its own, then the kernel. */
static pit_status stream_call(void *arg)
{
    stream_problem *p = arg;
    pit_context *ctx = p->ctx;
    if (!p->inside)
        PIT_TRY(ctx->be->detect(ctx->bctx, p->bs, &p->X, &p->idx, 1));
    return ctx->be->matmul_sparse(ctx->bctx, p->bs, &p->tile, &p->idx, p->idx.capacity, 0, &p->X, &p->W, &p->C);
}

static pit_status make_stream_problem(pit_context *ctx, const pit_tiledb_entry *e, int64_t side, pit_rng *rng,
                                      stream_problem *p)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->bs = ctx->default_stream.bs;
    const int64_t m = e->tile.bm, k = side, n = (int64_t)((double)side * STREAM_N_PER_K + 63) / 64 * 64;
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, m, k, rng, &p->X));
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, k, n, rng, &p->W));
    PIT_TRY(tune_matrix(ctx, p->bs, e->dtype, m, n, rng, &p->C));
    pit_index *x = &p->idx;
    x->tile = stream_microtile(m);
    x->groups_per_batch = x->groups = (int32_t)((m + x->tile.rows - 1) / x->tile.rows);
    x->capacity = (int32_t)k;
    PIT_TRY(tune_index(ctx, x));
    pit_problem prob = {.op = PIT_OP_MATMUL, .dtype = e->dtype, .batch = 1, .m = m, .n = n, .k = k,
                        .sparse = PIT_SPARSE_A};
    PIT_TRY(pit_select_fixed(ctx->db, &prob, &x->tile, &p->tile));
    p->inside = ctx->be->matmul_detects_inside &&
                ctx->be->matmul_detects_inside(ctx->bctx, x, &p->X, &p->W, &p->C);
    return PIT_SUCCESS;
}

/* Device time of a settled call with every keep-th column of x kept, and
 * the elements of W's rows it gathers (each row-block reads its rows). */
static pit_status time_kept(stream_problem *p, int keep, int repeats, pit_rng *rng, double *us, double *gathered)
{
    int64_t kept = 0;
    PIT_TRY(write_x(p, keep, rng, &kept));
    PIT_TRY(stream_call(p)); /* the index of the new pattern, before a kernel may skip detection */
    *gathered = (double)kept * (double)p->idx.groups * (double)p->W.shape[1];
    return pit_time_median_us(p->ctx, p->bs, TUNE_REPEATS(repeats), stream_call, p, us);
}

static pit_status small_dense_call(void *arg)
{
    stream_problem *p = arg;
    return p->ctx->be->matmul_dense(p->ctx->bctx, p->bs, &p->X, &p->W, &p->C);
}

/* Device time of a dense GEMM of one small tile, [1, 64] . [64, 64]. */
static pit_status time_small_dense(pit_context *ctx, pit_dtype dt, int repeats, pit_rng *rng, double *us)
{
    stream_problem p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.bs = ctx->default_stream.bs;
    pit_status s = tune_matrix(ctx, p.bs, dt, 1, STREAM_SMALL, rng, &p.X);
    if (s == PIT_SUCCESS)
        s = tune_matrix(ctx, p.bs, dt, STREAM_SMALL, STREAM_SMALL, rng, &p.W);
    if (s == PIT_SUCCESS)
        s = tune_matrix(ctx, p.bs, dt, 1, STREAM_SMALL, rng, &p.C);
    if (s == PIT_SUCCESS)
        s = pit_time_median_us(ctx, p.bs, TUNE_REPEATS(repeats), small_dense_call, &p, us);
    void *bufs[] = {p.X.mem, p.W.mem, p.C.mem};
    tune_free_buffers(ctx, p.bs, bufs, sizeof bufs / sizeof bufs[0]);
    return s;
}

pit_status tune_stream(pit_context *ctx, pit_tiledb_entry *e, int64_t side, int repeats, pit_rng *rng)
{
    stream_problem p;
    double half_us = 0, eighth_us = 0, half_el = 0, eighth_el = 0, any_us = 0;
    pit_status s = time_small_dense(ctx, e->dtype, repeats, rng, &any_us);
    if (s == PIT_SUCCESS)
        s = make_stream_problem(ctx, e, side, rng, &p);
    else
        memset(&p, 0, sizeof p);
    if (s == PIT_SUCCESS)
        s = time_kept(&p, STREAM_KEEP_HALF, repeats, rng, &half_us, &half_el);
    if (s == PIT_SUCCESS)
        s = time_kept(&p, STREAM_KEEP_EIGHTH, repeats, rng, &eighth_us, &eighth_el);
    if (s == PIT_SUCCESS) {
        const double per_el = half_el > eighth_el ? (half_us - eighth_us) / (half_el - eighth_el) : 0.0;
        const double fixed = half_us - per_el * half_el - any_us;
        const double tile_el = (double)e->tile.bn * (double)e->tile.bk;
        if (per_el > 0) {
            e->us_per_tile = per_el * tile_el;
            e->us_per_out = fixed > 1e-6 ? fixed : 1e-6; /* > 0: a fitted entry */
        } else { /* noise beyond the fit: all of it per element */
            e->us_per_tile = half_us / half_el * tile_el;
            e->us_per_out = 1e-6;
        }
        e->gflops = 0;
    }
    void *bufs[] = {p.X.mem, p.W.mem, p.C.mem, p.idx.counts, p.idx.entries, p.idx.total};
    tune_free_buffers(ctx, p.bs, bufs, sizeof bufs / sizeof bufs[0]);
    return s;
}
