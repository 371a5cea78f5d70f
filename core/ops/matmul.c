/*
 * core/ops/matmul.c - the dynamic-sparse matmul: validation, then
 * detect -> (read back counts) -> select -> fused SRead/dense tile/SWrite.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "choice.h"
#include "ops.h"

/* Re-select when any candidate's density moved more than this since the
 * last selection: steady workloads skip Algorithm 1 entirely. */
#define PIT_RESELECT_DENSITY_DELTA 0.02

PIT_API pit_matmul_options pit_matmul_options_default(void)
{
    pit_matmul_options o;
    memset(&o, 0, sizeof o);
    o.sparse = PIT_SPARSE_A;
    return o;
}

PIT_API pit_status pit_context_set_redetect_interval(pit_context *ctx, int calls)
{
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    if (calls < 1 || calls > PIT_REDETECT_EVERY_MAX)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_context_set_redetect_interval: %d calls is "
                         "outside 1..%d", calls, PIT_REDETECT_EVERY_MAX);
    atomic_store(&ctx->redetect_every, calls);
    return PIT_SUCCESS;
}

/* The name in the dense choice forms. */
static const char *dense_name(pit_context *ctx)
{
    const char *name = ctx->be->dense_name ? ctx->be->dense_name(ctx->bctx) : NULL;
    return name && *name ? name : PIT_DENSE_GENERIC;
}

pit_status ops_check_matmul(pit_context *ctx, const pit_tensor *A, const pit_tensor *B,
                            const pit_tensor *C, pit_problem *p)
{
    PIT_TRY(pit_tensor_check(ctx, A, "A"));
    PIT_TRY(pit_tensor_check(ctx, B, "B"));
    PIT_TRY(pit_tensor_check(ctx, C, "C"));
    PIT_TRY(pit_tensor_check_writable(C, "pit_matmul", "C"));
    const pit_tdesc *a = &A->d, *b = &B->d, *c = &C->d;
    if (a->dtype != b->dtype || a->dtype != c->dtype)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "pit_matmul: dtypes differ (A %s, B %s, C %s)",
                         pit_dtype_name(a->dtype), pit_dtype_name(b->dtype), pit_dtype_name(c->dtype));
    if (a->dtype != PIT_F32 && a->dtype != PIT_F16 && a->dtype != PIT_BF16)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "pit_matmul: %s is not a matmul dtype "
                         "(f32, f16, bf16)", pit_dtype_name(a->dtype));
    if (a->rank != b->rank || a->rank != c->rank || a->rank < 2 || a->rank > 3)
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "pit_matmul: ranks A %d, B %d, C %d; all must be 2 "
                         "or all 3", a->rank, b->rank, c->rank);
    int r = a->rank;
    int64_t m = a->shape[r - 2], k = a->shape[r - 1], n = b->shape[r - 1];
    int64_t batch = r == 3 ? a->shape[0] : 1;
    if (b->shape[r - 2] != k || c->shape[r - 2] != m || c->shape[r - 1] != n ||
        (r == 3 && (b->shape[0] != batch || c->shape[0] != batch)))
        return pit_error(PIT_ERR_SHAPE_MISMATCH, "pit_matmul: A is %s%lldx%lld, B %s%lldx%lld, C "
                         "%s%lldx%lld; need A MxK, B KxN, C MxN (same batch)",
                         r == 3 ? "batched " : "", (long long)m, (long long)k, r == 3 ? "batched " : "",
                         (long long)b->shape[r - 2], (long long)n, r == 3 ? "batched " : "",
                         (long long)c->shape[r - 2], (long long)c->shape[r - 1]);
    if (pit_tdesc_overlap(c, a) || pit_tdesc_overlap(c, b))
        return pit_error(PIT_ERR_ALIASING, "pit_matmul: C overlaps %s", pit_tdesc_overlap(c, a) ? "A" : "B");
    PIT_TRY(ops_check_on_device(ctx, a->dtype, "pit_matmul"));
    memset(p, 0, sizeof *p);
    p->op = r == 3 ? PIT_OP_BATCH_MATMUL : PIT_OP_MATMUL;
    p->dtype = a->dtype;
    p->batch = batch;
    p->m = m;
    p->n = n;
    p->k = k;
    return PIT_SUCCESS;
}

static pit_status check_microtile(const pit_microtile *t, pit_sparse_operand sparse)
{
    if (t->rows <= 0 || t->cols <= 0)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "micro-tile %dx%d must have positive sides",
                         t->rows, t->cols);
    int ok = sparse == PIT_SPARSE_A ? (t->axis == PIT_AXIS_K || t->axis == PIT_AXIS_M)
                                    : t->axis == PIT_AXIS_N;
    if (!ok)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "micro-tile axis %d is not permutation invariant "
                         "for sparse %s (A: K or M; B: N)", (int)t->axis,
                         sparse == PIT_SPARSE_A ? "A" : "B");
    return PIT_SUCCESS;
}

typedef struct call_timer {
    int on;
    pit_context *ctx;
    void *bs;
    pit_event *ev[4];
} call_timer;

static void timer_mark(call_timer *t, int i)
{
    if (t->on && t->ctx->be->event_record)
        t->ctx->be->event_record(t->ctx->bctx, t->bs, &t->ev[i]);
}

static double timer_ms(call_timer *t, int a, int b)
{
    double ms = 0;
    if (t->ev[a] && t->ev[b])
        t->ctx->be->event_elapsed_ms(t->ctx->bctx, t->ev[a], t->ev[b], &ms);
    return ms;
}

static void timer_release(call_timer *t)
{
    for (int i = 0; i < 4; i++)
        if (t->ev[i])
            t->ctx->be->event_destroy(t->ctx->bctx, t->ev[i]);
}

/* Reads back the counts of candidates [first, first + n). */
static pit_status read_counts(pit_context *ctx, void *bs, pit_plan *p, int first, int n,
                              pit_candidate_stats *st)
{
    if (p->counts_block && n == p->ncands) /* every candidate's counts in one transfer */
        PIT_TRY(ctx->be->mem_read(ctx->bctx, bs, p->counts_block, 0, p->host_block, p->counts_bytes));
    for (int i = first; i < first + n; i++) {
        pit_index *x = &p->idx[i];
        size_t bytes = (size_t)x->groups * sizeof(int32_t);
        if (!p->counts_block)
            PIT_TRY(ctx->be->mem_read(ctx->bctx, bs, x->counts, 0, p->host_counts[i], bytes));
        else if (n != p->ncands)
            PIT_TRY(ctx->be->mem_read(ctx->bctx, bs, p->counts_block,
                                      (size_t)((char *)x->counts - (char *)p->counts_block),
                                      p->host_counts[i], bytes));
        st[i].tile = x->tile;
        st[i].groups = x->groups;
        st[i].groups_per_batch = x->groups_per_batch;
        st[i].capacity = x->capacity;
        st[i].counts = p->host_counts[i];
    }
    return PIT_SUCCESS;
}

/* Non-zero micro-tiles in all, and in the largest group; returns the density. */
static double density_of(const pit_candidate_stats *s, int32_t *max_entries, int64_t *nonzero)
{
    int64_t sum = 0;
    int32_t mx = 0;
    for (int32_t g = 0; g < s->groups; g++) {
        sum += s->counts[g];
        if (s->counts[g] > mx)
            mx = s->counts[g];
    }
    *max_entries = mx;
    *nonzero = sum;
    double total = (double)s->groups * (double)s->capacity;
    return total > 0 ? (double)sum / total : 0.0;
}

/* Algorithm 1 when the sparsity moved, else the cached choice with fresh counts. */
static pit_status choose(pit_context *ctx, pit_plan *p, const pit_candidate_stats *st,
                         double *select_us, int *reselected)
{
    double dens[PIT_MAX_CANDIDATES];
    int32_t mx[PIT_MAX_CANDIDATES];
    int64_t nz[PIT_MAX_CANDIDATES];
    int moved = !p->have_sel;
    for (int i = 0; i < p->ncands; i++) {
        dens[i] = density_of(&st[i], &mx[i], &nz[i]);
        if (fabs(dens[i] - p->density[i]) > PIT_RESELECT_DENSITY_DELTA)
            moved = 1;
        pit_log_debug("detect: %dx%d axis %s: density %.4f of %d groups x %d, largest group %d",
                      st[i].tile.rows, st[i].tile.cols, st[i].tile.axis == PIT_AXIS_M ? "M" : "K",
                      dens[i], st[i].groups, st[i].capacity, mx[i]);
    }
    *reselected = moved;
    if (moved) {
        double t0 = pit_now_us();
        PIT_TRY(pit_select(ctx->db, &p->problem, st, p->ncands, &p->sel));
        *select_us = pit_now_us() - t0;
        pit_selection_name_dense(&p->sel, dense_name(ctx));
        if (p->forced.rows != 0 && p->sel.dense) {
            /* The caller forced a micro-tile: dense is not an option. */
            p->sel.dense = 0;
            p->sel.candidate = 0;
            PIT_TRY(pit_select_fixed(ctx->db, &p->problem, &p->forced, &p->sel.tile));
            snprintf(p->sel.choice, sizeof p->sel.choice, PIT_CHOICE_FORCED,
                     pit_axis_letter(p->forced.axis), p->forced.rows, p->forced.cols,
                     p->sel.tile.bm, p->sel.tile.bn, p->sel.tile.bk);
        }
        memcpy(p->density, dens, sizeof(double) * (size_t)p->ncands);
        p->have_sel = 1;
    }
    /* the chosen candidate's counts size the kernel's grid; dense keeps
     * those of the candidate it beat, for the report */
    p->sel.max_entries = mx[p->sel.candidate];
    p->sel.nonzero_tiles = nz[p->sel.candidate];
    return PIT_SUCCESS;
}

/* A settled sparse plan detected only its own candidate: its fresh counts
 * size the kernel; a density that moved makes the next call detect every
 * candidate, and so select again. */
static void settled_counts(pit_plan *p, const pit_candidate_stats *s)
{
    double d = density_of(s, &p->sel.max_entries, &p->sel.nonzero_tiles);
    if (fabs(d - p->density[p->sel.candidate]) > PIT_RESELECT_DENSITY_DELTA)
        p->recheck = 1;
    pit_log_debug("detect: %dx%d only (settled plan): density %.4f, largest group %d%s",
                  s->tile.rows, s->tile.cols, d, p->sel.max_entries,
                  p->recheck ? "; moved: every candidate next call" : "");
}

/* What ran (sel, the kernel's tile) and the pattern as the plan last saw it
 * through sel's candidate (the one it beat when dense); nonzero_tiles -1:
 * the plan never read the counts back (a fixed plan). */
static void fill_report(pit_report *r, const pit_plan *p, const pit_selection *sel, int dense)
{
    if (!r)
        return;
    r->used_dense = dense;
    r->bm = sel->tile.bm;
    r->bn = sel->tile.bn;
    r->bk = sel->tile.bk;
    r->predicted_us = sel->predicted_us;
    r->runner_up_us = sel->runner_up_us;
    snprintf(r->choice, sizeof r->choice, "%s", sel->choice);
    snprintf(r->runner_up, sizeof r->runner_up, "%s", sel->runner_up);
    const pit_index *x = &p->idx[sel->candidate];
    r->microtile = x->tile;
    r->nonzero_tiles = sel->nonzero_tiles;
    r->total_tiles = (int64_t)x->groups * x->capacity;
}

/* The options' tile_bm/bn/bk over the selection's tile: the report names
 * the tile that runs. */
static void apply_tile_options(const pit_matmul_options *o, const pit_plan *p, pit_selection *sel)
{
    if (sel->dense || (o->tile_bm <= 0 && o->tile_bn <= 0 && o->tile_bk <= 0))
        return;
    if (o->tile_bm > 0)
        sel->tile.bm = o->tile_bm;
    if (o->tile_bn > 0)
        sel->tile.bn = o->tile_bn;
    if (o->tile_bk > 0)
        sel->tile.bk = o->tile_bk;
    const pit_microtile *t = &p->idx[sel->candidate].tile;
    snprintf(sel->choice, sizeof sel->choice, o->fixed_plan ? PIT_CHOICE_FIXED : PIT_CHOICE_SPARSE_TILE_SET,
             pit_axis_letter(t->axis), t->rows, t->cols, sel->tile.bm, sel->tile.bn, sel->tile.bk);
}

pit_status ops_matmul_dense_run(pit_context *ctx, void *bs, const pit_tensor *A,
                                const pit_tensor *B, const pit_tensor *C)
{
    if (!ctx->be->matmul_dense)
        return pit_error(PIT_ERR_UNSUPPORTED, "backend %s has no dense matmul", ctx->be->name);
    return ctx->be->matmul_dense(ctx->bctx, bs, &A->d, &B->d, &C->d);
}

static int forced_tile(const pit_matmul_options *o)
{
    return o->microtile.rows != 0 || o->tile_bm > 0 || o->tile_bn > 0 || o->tile_bk > 0;
}

/* Whether the backend's kernel for sparse A on candidate x finds the
 * non-zeros itself (its index is not read), so detection can be skipped. */
static int kernel_finds_nonzeros(pit_context *ctx, const pit_index *x, const pit_tensor *A,
                                 const pit_tensor *B, const pit_tensor *C, pit_sparse_operand sparse)
{
    return sparse == PIT_SPARSE_A && ctx->be->matmul_detects_inside &&
           ctx->be->matmul_detects_inside(ctx->bctx, x, &A->d, &B->d, &C->d);
}

/* The PIT path proper, with the plan held busy. */
static pit_status run_pit(pit_context *ctx, void *bs, pit_plan *p, const pit_tensor *A,
                          const pit_tensor *B, const pit_tensor *C, const pit_matmul_options *o,
                          pit_report *report, call_timer *tm)
{
    const pit_tensor *X = o->sparse == PIT_SPARSE_A ? A : B;
    /* A settled plan (select.h, PIT_REDETECT_EVERY or the context's
     * interval): dense skips detection, sparse detects only its own
     * candidate, until a periodic full look. */
    const int every = p->problem.redetect_every > 0 ? p->problem.redetect_every : PIT_REDETECT_EVERY;
    int settled = !o->fixed_plan && p->have_sel && !p->recheck && ++p->settled_calls < every;
    if (!settled)
        p->settled_calls = 0;
    p->recheck = 0;
    if (settled && p->sel.dense) {
        fill_report(report, p, &p->sel, 1);
        if (report)
            snprintf(report->choice, sizeof report->choice, PIT_CHOICE_DENSE_KEPT, dense_name(ctx));
        timer_mark(tm, 2);
        pit_status s = ops_matmul_dense_run(ctx, bs, A, B, C);
        timer_mark(tm, 3);
        return s;
    }
    int first = settled ? p->sel.candidate : 0, n = settled ? 1 : p->ncands;
    /* Along K the kernel's grid does not depend on the counts (backend.h):
     * a settled plan reads nothing back, so detection and kernel queue back
     * to back with no stall. Its density is looked at again on the periodic
     * full look, PIT_REDETECT_EVERY calls apart. */
    int no_readback = settled && p->idx[first].tile.axis == PIT_AXIS_K;
    /* and where, besides, the kernel finds the non-zeros itself (as in a
     * fixed plan), nothing is detected */
    int detect = !(no_readback || o->fixed_plan) || !kernel_finds_nonzeros(ctx, &p->idx[first], A, B, C, o->sparse);
    timer_mark(tm, 0);
    if (detect)
        PIT_TRY(ctx->be->detect(ctx->bctx, bs, &X->d, &p->idx[first], n));
    timer_mark(tm, 1);

    pit_selection sel;
    double select_us = 0;
    int reselected = 0;
    if (o->fixed_plan) {
        const pit_microtile *t = &p->idx[0].tile;
        memset(&sel, 0, sizeof sel);
        sel.nonzero_tiles = -1; /* nothing read back */
        PIT_TRY(pit_select_fixed(ctx->db, &p->problem, t, &sel.tile));
        snprintf(sel.choice, sizeof sel.choice, PIT_CHOICE_FIXED, pit_axis_letter(t->axis), t->rows,
                 t->cols, sel.tile.bm, sel.tile.bn, sel.tile.bk);
    } else if (no_readback) {
        sel = p->sel;
        pit_log_debug("detect: %dx%d only (settled plan along K): no read-back", p->idx[first].tile.rows,
                      p->idx[first].tile.cols);
    } else {
        pit_candidate_stats st[PIT_MAX_CANDIDATES];
        PIT_TRY(read_counts(ctx, bs, p, first, n, st));
        if (settled)
            settled_counts(p, &st[first]);
        else
            PIT_TRY(choose(ctx, p, st, &select_us, &reselected));
        sel = p->sel;
    }
    apply_tile_options(o, p, &sel);
    fill_report(report, p, &sel, sel.dense);
    if (report) {
        report->reselected = reselected;
        report->select_us = select_us;
    }
    timer_mark(tm, 2);
    pit_status s;
    /* an empty index skips the kernel only when its counts were read now */
    if (!o->fixed_plan && !no_readback && !sel.dense && sel.nonzero_tiles == 0) {
        if (report)
            report->skipped_compute = 1;
        pit_log_debug("no non-zero micro-tile: C set to zero, no compute launched");
        s = ops_zero(ctx, bs, &C->d);
    } else if (sel.dense) {
        s = ops_matmul_dense_run(ctx, bs, A, B, C);
    } else {
        s = ctx->be->matmul_sparse(ctx->bctx, bs, &sel.tile, &p->idx[sel.candidate], sel.max_entries,
                                   o->fixed_plan, &A->d, &B->d, &C->d);
        if (s == PIT_ERR_UNSUPPORTED && !forced_tile(o)) {
            /* The database offered a tile this device cannot launch: the
             * dense GEMM is always correct. Visible in the report. */
            pit_log_info("tile %dx%dx%d refused (%s): dense GEMM instead", sel.tile.bm, sel.tile.bn,
                         sel.tile.bk, pit_last_error());
            s = ops_matmul_dense_run(ctx, bs, A, B, C);
            if (report) {
                report->used_dense = 1;
                snprintf(report->choice, sizeof report->choice, PIT_CHOICE_DENSE_REFUSED,
                         dense_name(ctx), sel.tile.bm, sel.tile.bn, sel.tile.bk);
            }
        }
    }
    timer_mark(tm, 3);
    return s;
}

PIT_API pit_status pit_matmul(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                              const pit_tensor *B, pit_tensor *C, const pit_matmul_options *options,
                              pit_report *report)
{
    /* Cleared before any check can fail: a caller that prints the report
     * after a failed call reads zeros, not stack garbage. */
    if (report)
        memset(report, 0, sizeof *report);
    pit_clear_error();
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    if (stream && stream->ctx != ctx)
        return pit_error(PIT_ERR_CONTEXT_MISMATCH, "pit_matmul: stream belongs to another context");
    pit_matmul_options o = options ? *options : pit_matmul_options_default();
    if (o.sparse != PIT_SPARSE_A && o.sparse != PIT_SPARSE_B)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_matmul: options->sparse = %d is not a "
                         "pit_sparse_operand", (int)o.sparse);
    pit_problem prob;
    PIT_TRY(ops_check_matmul(ctx, A, B, C, &prob));
    prob.sparse = o.sparse;
    prob.redetect_every = atomic_load(&ctx->redetect_every);
    const pit_microtile *forced = o.microtile.rows != 0 ? &o.microtile : NULL;
    if (forced)
        PIT_TRY(check_microtile(forced, o.sparse));
    void *bs = pit_stream_or_default(ctx, stream)->bs;
    if (prob.m == 0 || prob.n == 0 || prob.batch == 0)
        return PIT_SUCCESS;
    if (prob.k == 0) {
        if (report)
            report->skipped_compute = 1;
        return ops_zero(ctx, bs, &C->d);
    }

    call_timer tm = {.on = o.profile, .ctx = ctx, .bs = bs};
    double t0 = pit_now_us();
    pit_status s;
    if (o.force_dense) {
        timer_mark(&tm, 2);
        s = ops_matmul_dense_run(ctx, bs, A, B, C);
        timer_mark(&tm, 3);
        if (report) {
            report->used_dense = 1;
            report->nonzero_tiles = -1; /* the pattern is not looked at */
            snprintf(report->choice, sizeof report->choice, PIT_CHOICE_DENSE_FORCED, dense_name(ctx));
        }
    } else {
        const pit_tdesc *x = o.sparse == PIT_SPARSE_A ? &A->d : &B->d;
        pit_plan *p;
        s = pit_plan_acquire(ctx, &prob, bs, x->shape[x->rank - 2], x->shape[x->rank - 1], forced, &p);
        if (s == PIT_SUCCESS) {
            s = run_pit(ctx, bs, p, A, B, C, &o, report, &tm);
            pit_plan_release(ctx, p);
        }
    }
    if (s == PIT_SUCCESS && tm.on) {
        s = ctx->be->stream_synchronize(ctx->bctx, bs);
        if (report) {
            report->detect_ms = timer_ms(&tm, 0, 1);
            report->kernel_ms = timer_ms(&tm, 2, 3);
            report->total_ms = (pit_now_us() - t0) * 1e-3;
        }
    }
    timer_release(&tm);
    return s;
}
