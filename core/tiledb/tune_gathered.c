/*
 * core/tiledb/tune_gathered.c - pit_tune for the gathered GEMMs whose rows an
 * index lists: "moe" (moe_matmul's forward) and "rows" (matmul_rows). Each is
 * timed through the backend's real kernel on a full index, the way the sparse
 * rows are timed on theirs: every token-slot routed (k experts a token, the
 * same number of token-slots for every expert), every row of A non-zero. The
 * cost is spread over the tile-steps the kernel runs:
 *
 *   moe:  sum over experts of ceil(slots / bm) * ceil(N / bn) * ceil(H / bk)
 *   rows: ceil(M / bm) * ceil(N / bn) * ceil(K / bk)
 */
#include <stdlib.h>
#include <string.h>

#include "tune.h"

#define TUNE_MOE_EXPERTS 8
#define TUNE_MOE_TOP_K 2

typedef struct gathered_problem {
    pit_context *ctx;
    void *bs;
    const pit_tiledb_entry *e;
    pit_tdesc X, W, Y, gates, ids; /* moe: X [T,H], W [E,H,N], Y [T,N]; rows: A, B, C */
    pit_index idx;
    int32_t max_entries;
} gathered_problem;

static int64_t round_up(int64_t n, int32_t m)
{
    return (n + m - 1) / m * m;
}

static int64_t cdiv(int64_t n, int32_t m)
{
    return (n + m - 1) / m;
}

static void free_gathered(gathered_problem *p)
{
    void *bufs[] = {p->X.mem, p->W.mem, p->Y.mem, p->gates.mem, p->ids.mem,
                    p->idx.counts, p->idx.entries, p->idx.total};
    tune_free_buffers(p->ctx, p->bs, bufs, sizeof bufs / sizeof bufs[0]);
}

static pit_status alloc_index(gathered_problem *p, pit_microtile tile, int32_t groups,
                              int32_t capacity)
{
    pit_index *x = &p->idx;
    x->tile = tile;
    x->groups = x->groups_per_batch = groups;
    x->capacity = capacity;
    return tune_index(p->ctx, x);
}

/* Token t goes to experts t % E, (t + 1) % E, ...: T * k / E slots each. */
static pit_status route_all(gathered_problem *p, int64_t t, int32_t k)
{
    pit_context *ctx = p->ctx;
    const int64_t shape[2] = {t, k};
    memset(&p->ids, 0, sizeof p->ids);
    p->ids.dtype = PIT_I32;
    p->ids.rank = 2;
    p->ids.shape[0] = shape[0];
    p->ids.shape[1] = shape[1];
    p->ids.strides[0] = k;
    p->ids.strides[1] = 1;
    size_t bytes = (size_t)(t * k) * 4;
    PIT_TRY(pit_mem_alloc(ctx, pit_mem_source_of(ctx), bytes, &p->ids.mem));
    int32_t *ids = malloc(bytes);
    if (!ids)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tune: host memory");
    for (int64_t i = 0; i < t * k; i++)
        ids[i] = (int32_t)((i / k + i % k) % TUNE_MOE_EXPERTS);
    pit_status s = ctx->be->mem_write(ctx->bctx, p->bs, p->ids.mem, 0, ids, bytes);
    free(ids);
    if (s == PIT_SUCCESS)
        s = ctx->be->moe_route(ctx->bctx, p->bs, &p->ids, &p->idx);
    p->max_entries = (int32_t)(t * k / TUNE_MOE_EXPERTS);
    return s;
}

static pit_status make_moe(gathered_problem *p, int64_t size, pit_rng *rng, int64_t *steps)
{
    pit_context *ctx = p->ctx;
    const pit_tile *tl = &p->e->tile;
    const int32_t k = TUNE_MOE_TOP_K;
    int64_t t = size, h = round_up(size, tl->bk), n = round_up(size, tl->bn);
    const int64_t w_shape[3] = {TUNE_MOE_EXPERTS, h, n}, g_shape[2] = {t, k};
    if (!ctx->be->moe_route || !ctx->be->moe_matmul)
        return pit_error(PIT_ERR_UNSUPPORTED, "pit_tune: backend %s has no MoE kernels",
                         ctx->be->name);
    PIT_TRY(tune_matrix(ctx, p->bs, p->e->dtype, t, h, rng, &p->X));
    PIT_TRY(tune_tensor(ctx, p->bs, p->e->dtype, 3, w_shape, rng, &p->W));
    PIT_TRY(tune_matrix(ctx, p->bs, p->e->dtype, t, n, rng, &p->Y));
    PIT_TRY(tune_tensor(ctx, p->bs, PIT_F32, 2, g_shape, rng, &p->gates));
    PIT_TRY(alloc_index(p, (pit_microtile){1, (int32_t)h, PIT_AXIS_M}, TUNE_MOE_EXPERTS,
                        (int32_t)(t * k)));
    PIT_TRY(route_all(p, t, k));
    *steps = TUNE_MOE_EXPERTS * cdiv(p->max_entries, tl->bm) * cdiv(n, tl->bn) * cdiv(h, tl->bk);
    return PIT_SUCCESS;
}

static pit_status make_rows(gathered_problem *p, int64_t size, pit_rng *rng, int64_t *steps)
{
    pit_context *ctx = p->ctx;
    const pit_tile *tl = &p->e->tile;
    int64_t m = round_up(size, tl->bm), kk = round_up(size, tl->bk), n = round_up(size, tl->bn);
    if (!ctx->be->matmul_rows || !ctx->be->detect)
        return pit_error(PIT_ERR_UNSUPPORTED, "pit_tune: backend %s has no row-sparse matmul",
                         ctx->be->name);
    PIT_TRY(tune_matrix(ctx, p->bs, p->e->dtype, m, kk, rng, &p->X));
    PIT_TRY(tune_matrix(ctx, p->bs, p->e->dtype, kk, n, rng, &p->W));
    PIT_TRY(tune_matrix(ctx, p->bs, p->e->dtype, m, n, rng, &p->Y));
    PIT_TRY(alloc_index(p, (pit_microtile){1, (int32_t)kk, PIT_AXIS_M}, 1, (int32_t)m));
    PIT_TRY(ctx->be->detect(ctx->bctx, p->bs, &p->X, &p->idx, 1)); /* lists every row */
    p->max_entries = (int32_t)m;
    *steps = cdiv(m, tl->bm) * cdiv(n, tl->bn) * cdiv(kk, tl->bk);
    return PIT_SUCCESS;
}

static pit_status run_gathered(void *arg)
{
    gathered_problem *p = arg;
    pit_context *ctx = p->ctx;
    pit_tile tile = p->e->tile; /* the backend says which tile ran: not kept, the row is what is timed */
    if (p->e->op == PIT_TILE_MOE)
        return ctx->be->moe_matmul(ctx->bctx, p->bs, 0, &tile, &p->idx, p->max_entries,
                                   &p->X, &p->W, &p->gates, &p->Y);
    return ctx->be->matmul_rows(ctx->bctx, p->bs, &tile, &p->idx, p->max_entries, &p->X,
                                &p->W, &p->Y, 0);
}

pit_status tune_gathered(pit_context *ctx, pit_tiledb_entry *e, int64_t size, int repeats,
                         pit_rng *rng)
{
    gathered_problem p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.bs = ctx->default_stream.bs;
    p.e = e;
    int64_t steps = 0;
    double us = 0;
    pit_status s = e->op == PIT_TILE_MOE ? make_moe(&p, size, rng, &steps)
                                         : make_rows(&p, size, rng, &steps);
    if (s == PIT_SUCCESS)
        s = pit_time_median_us(ctx, p.bs, TUNE_REPEATS(repeats), run_gathered, &p, &us);
    if (s == PIT_SUCCESS) {
        e->us_per_tile = pit_tiledb_us_per_tile(us, steps);
        e->us_per_out = 0; /* not fitted: selection compares these rows per flop */
    }
    free_gathered(&p);
    return s;
}
