/*
 * core/pit/plan.c - plans: per (problem, stream, forced micro-tile) the candidate
 * micro-tiles, their device indices and the last selection, cached in the
 * context so steady workloads allocate and select nothing.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int32_t ceil_div(int64_t a, int64_t b)
{
    return (int32_t)((a + b - 1) / b);
}

/* Group/capacity layout of one candidate on a rows x cols operand (backend.h). */
static void index_shape(const pit_microtile *t, int64_t rows, int64_t cols, int32_t *groups,
                        int32_t *capacity)
{
    int32_t row_blocks = ceil_div(rows, t->rows), col_blocks = ceil_div(cols, t->cols);
    if (t->axis == PIT_AXIS_M) {
        *groups = col_blocks;
        *capacity = row_blocks;
    } else {
        *groups = row_blocks;
        *capacity = col_blocks;
    }
}

/* Zeroes a plan except its busy flag: busy is only ever written under
 * ctx->lock (by pit_plan_acquire and pit_plan_release), so that other threads
 * scanning the cache never see a plan being rebuilt as free. */
static void clear_plan(pit_plan *p)
{
    size_t at = offsetof(pit_plan, busy), after = at + sizeof p->busy;
    memset(p, 0, at);
    memset((char *)p + after, 0, sizeof *p - after);
}

static void free_plan(pit_context *ctx, pit_plan *p)
{
    const pit_mem_source *from = p->mem_source;
    if (p->counts_block || (p->ncands > 0 && p->idx[0].entries))
        pit_mem_wait(ctx, from, p->stream);
    for (int i = 0; i < p->ncands; i++) {
        pit_index *x = &p->idx[i];
        if (!p->counts_block) {
            pit_mem_free(ctx, from, x->counts);
            pit_mem_free(ctx, from, x->total);
        }
        pit_mem_free(ctx, from, x->entries);
    }
    pit_mem_free(ctx, from, p->counts_block);
    free(p->host_block);
    clear_plan(p);
}

void pit_plans_release(pit_context *ctx)
{
    for (int i = 0; i < PIT_PLAN_CACHE; i++)
        if (ctx->plans[i].used)
            free_plan(ctx, &ctx->plans[i]);
}

/* Frees the plans of a stream being destroyed: a later stream may get the
 * same backend handle (address reuse) and must not inherit them, and their
 * device memory should not wait for eviction. Busy plans are left alone (a
 * call on a stream being destroyed is the caller's bug). */
void pit_plans_release_stream(pit_context *ctx, void *stream)
{
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < PIT_PLAN_CACHE; i++) {
        pit_plan *p = &ctx->plans[i];
        if (p->used && !p->busy && p->stream == stream)
            free_plan(ctx, p);
    }
    pthread_mutex_unlock(&ctx->lock);
}

static pit_status alloc_index(pit_context *ctx, pit_plan *p, int i)
{
    pit_index *x = &p->idx[i];
    x->tile = p->cands[i];
    int32_t gpb, cap;
    index_shape(&x->tile, p->a_rows, p->a_cols, &gpb, &cap);
    if ((int64_t)gpb * p->problem.batch * cap > INT32_MAX)
        return pit_error(PIT_ERR_UNSUPPORTED, "micro-tile %dx%d on a %lldx%lld operand (batch %lld) "
                         "needs more than 2^31 index entries", x->tile.rows, x->tile.cols,
                         (long long)p->a_rows, (long long)p->a_cols, (long long)p->problem.batch);
    x->groups_per_batch = gpb;
    x->groups = (int32_t)(gpb * p->problem.batch);
    x->capacity = cap;
    size_t groups = (size_t)(x->groups > 0 ? x->groups : 1);
    if (!p->counts_block) {
        PIT_TRY(pit_mem_alloc(ctx, p->mem_source, groups * 4, &x->counts));
        PIT_TRY(pit_mem_alloc(ctx, p->mem_source, 4, &x->total));
    }
    return pit_mem_alloc(ctx, p->mem_source, groups * (size_t)(cap > 0 ? cap : 1) * 4, &x->entries);
}

static size_t groups_of(const pit_plan *p, int i)
{
    int32_t gpb, cap;
    index_shape(&p->cands[i], p->a_rows, p->a_cols, &gpb, &cap);
    int64_t g = (int64_t)gpb * p->problem.batch;
    return (size_t)(g > 0 ? g : 1);
}

/* One host block (and, for pointer backends, one device block) for the
 * counts of every candidate, so selection reads them back in one transfer.
 * Each candidate's total follows its counts: detection zeroes one
 * candidate's, or every candidate's, counts and totals with one memset. */
static pit_status alloc_counts(pit_context *ctx, pit_plan *p)
{
    size_t off[PIT_MAX_CANDIDATES], total = 0;
    for (int i = 0; i < p->ncands; i++) {
        off[i] = total;
        total += (groups_of(p, i) + 1) * sizeof(int32_t);
    }
    p->counts_bytes = total;
    p->host_block = malloc(total);
    if (!p->host_block)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "plan: out of host memory");
    if (ctx->be->mem_is_pointer)
        PIT_TRY(pit_mem_alloc(ctx, p->mem_source, total, &p->counts_block));
    for (int i = 0; i < p->ncands; i++) {
        p->host_counts[i] = p->host_block + off[i] / sizeof(int32_t);
        if (p->counts_block) {
            p->idx[i].counts = (char *)p->counts_block + off[i];
            p->idx[i].total = (char *)p->idx[i].counts + groups_of(p, i) * sizeof(int32_t);
        }
    }
    return PIT_SUCCESS;
}

static int same_key(const pit_plan *p, const pit_problem *prob, void *stream,
                    const pit_microtile *forced, void *const *key_stream)
{
    (void)stream;
    if (memcmp(&p->problem, prob, sizeof *prob) != 0 || *key_stream != stream)
        return 0;
    if (!forced)
        return p->ncands > 1 || p->forced.rows == 0;
    return p->forced.rows == forced->rows && p->forced.cols == forced->cols &&
           p->forced.axis == forced->axis;
}

static pit_plan *find_slot(pit_context *ctx, const pit_problem *prob, void *stream,
                           const pit_microtile *forced, int *found)
{
    pit_plan *victim = NULL;
    for (int i = 0; i < PIT_PLAN_CACHE; i++) {
        pit_plan *p = &ctx->plans[i];
        /* A busy plan belongs to the call using it (it may be half built):
         * look at nothing else of it. */
        if (p->busy)
            continue;
        if (p->used && same_key(p, prob, stream, forced, &p->stream)) {
            *found = 1;
            return p;
        }
        if (!victim || !p->used || (victim->used && p->last_use < victim->last_use))
            victim = p;
    }
    *found = 0;
    return victim;
}

/* Candidates one detection pass computes: the four most useful of the rules'
 * list (32x1, 1x64, 32x64, 64x64 for sparse A). Each extra candidate costs
 * read-back and selection time on every full look, and detection time: on
 * the H100 8 candidates made the region kernel 3-5x slower than one; the
 * strip kernel's cost of 4 and of 8 is what scripts/detect_speed.sh
 * measures (docs/design/detect-read-speed.md). */
#define PIT_DETECT_CANDIDATES 4

static pit_status build_plan(pit_context *ctx, pit_plan *p, const pit_problem *prob,
                             void *stream, int64_t rows, int64_t cols,
                             const pit_microtile *forced)
{
    p->used = 1;
    p->problem = *prob;
    p->stream = stream;
    p->mem_source = pit_mem_source_of(ctx);
    p->a_rows = rows;
    p->a_cols = cols;
    if (forced) {
        p->forced = *forced;
        p->cands[0] = *forced;
        p->ncands = 1;
    } else {
        p->ncands = pit_matmul_candidates(prob->sparse, prob->dtype, rows, cols, p->cands,
                                          PIT_DETECT_CANDIDATES);
    }
    if (p->ncands <= 0)
        return pit_error(PIT_ERR_INTERNAL, "no micro-tile candidate for a %lldx%lld operand",
                         (long long)rows, (long long)cols);
    PIT_TRY(alloc_counts(ctx, p));
    for (int i = 0; i < p->ncands; i++)
        PIT_TRY(alloc_index(ctx, p, i));
    return PIT_SUCCESS;
}

pit_status pit_plan_acquire(pit_context *ctx, const pit_problem *prob, void *stream,
                            int64_t rows, int64_t cols, const pit_microtile *forced,
                            pit_plan **out)
{
    *out = NULL;
    pthread_mutex_lock(&ctx->lock);
    int found = 0;
    pit_plan *p = find_slot(ctx, prob, stream, forced, &found);
    if (!p) {
        pthread_mutex_unlock(&ctx->lock);
        return pit_error(PIT_ERR_UNSUPPORTED, "more than %d pit calls in flight on one context",
                         PIT_PLAN_CACHE);
    }
    p->busy = 1;
    p->last_use = ++ctx->clock;
    pthread_mutex_unlock(&ctx->lock);
    if (found) {
        *out = p;
        return PIT_SUCCESS;
    }
    uint64_t stamp = p->last_use; /* only this call touches a busy plan */
    if (p->used)
        free_plan(ctx, p);
    pit_status s = build_plan(ctx, p, prob, stream, rows, cols, forced);
    if (s != PIT_SUCCESS) {
        free_plan(ctx, p);
        pit_plan_release(ctx, p);
        return s;
    }
    p->last_use = stamp;
    *out = p;
    return PIT_SUCCESS;
}

void pit_plan_release(pit_context *ctx, pit_plan *p)
{
    pthread_mutex_lock(&ctx->lock);
    p->busy = 0;
    pthread_mutex_unlock(&ctx->lock);
}
