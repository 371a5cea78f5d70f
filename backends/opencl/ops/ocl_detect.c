/*
 * ocl_detect.c - online sparsity detection: one pass over X fills the
 * out-of-order indexes of up to 8 micro-tile candidates (kernels/pit_detect.cl).
 *
 * A work-group scans an RR x CW region whose sides are multiples of every
 * candidate's micro-tile, so each micro-tile lies in exactly one region and is
 * appended exactly once. Candidates whose micro-tiles cannot share a region of
 * reasonable size are detected in further passes; a micro-tile larger than
 * such a region (a whole row of K for pit_matmul_rows) is a pass of its own
 * whose region is the micro-tile itself, cut to the operand, which the
 * work-group scans in a loop.
 */
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"

#define MAX_CANDS 8
#define REGION_MAX_ROWS 256
#define REGION_MAX_COLS 1024
#define REGION_TARGET_COLS 256
#define REGION_TARGET_ELEMS 2048
#define MAX_FLAGS 4096

typedef struct detect_pass {
    int cand[MAX_CANDS]; /* indexes into idx[] */
    int n;
    int rr, cw, nflags;
    int foff[MAX_CANDS];
} detect_pass;

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int64_t lcm64(int64_t a, int64_t b)
{
    return a / gcd64(a, b) * b;
}

static int count_flags(const pit_index *idx, const detect_pass *p, int rr, int cw)
{
    int total = 0;
    for (int i = 0; i < p->n; ++i) {
        const pit_microtile *t = &idx[p->cand[i]].tile;
        total += (rr / t->rows) * (cw / t->cols);
    }
    return total;
}

/* The region of a lone candidate whose micro-tile is larger than a shared
 * region may be: one micro-tile, no larger than the operand (its one flag
 * then stands for the micro-tile, whatever part of it lies in the operand). */
static void whole_tile_region(const pit_microtile *t, int64_t rows, int64_t cols,
                              detect_pass *p)
{
    p->rr = (int)(t->rows < rows ? t->rows : rows);
    p->cw = (int)(t->cols < cols ? t->cols : cols);
    p->nflags = 1;
    p->foff[0] = 0;
}

/* A region the candidates of a pass share (multiples of every micro-tile
 * side, about REGION_TARGET_ELEMS elements, its flags in local memory); 0
 * when there is none of reasonable size. */
static int shared_region(const ocl_ctx *c, const pit_index *idx, detect_pass *p)
{
    int64_t rr = 1, cw = 1;
    for (int i = 0; i < p->n; ++i) {
        rr = lcm64(rr, idx[p->cand[i]].tile.rows);
        cw = lcm64(cw, idx[p->cand[i]].tile.cols);
        if (rr > REGION_MAX_ROWS || cw > REGION_MAX_COLS)
            return 0;
    }
    /* Grow by powers of two so the region stays a multiple of every side. */
    while (cw * 2 <= REGION_TARGET_COLS)
        cw *= 2;
    while (rr * cw < REGION_TARGET_ELEMS && rr * 2 <= REGION_MAX_ROWS)
        rr *= 2;
    size_t flag_limit = c->local_mem > 256 ? (c->local_mem - 128) / 4 : 0;
    if (flag_limit > MAX_FLAGS)
        flag_limit = MAX_FLAGS;
    int nflags = count_flags(idx, p, (int)rr, (int)cw);
    while ((size_t)nflags > flag_limit) {
        int64_t rr0 = 1, cw0 = 1;
        for (int i = 0; i < p->n; ++i) {
            rr0 = lcm64(rr0, idx[p->cand[i]].tile.rows);
            cw0 = lcm64(cw0, idx[p->cand[i]].tile.cols);
        }
        if (rr > rr0)
            rr /= 2;
        else if (cw > cw0)
            cw /= 2;
        else
            return 0;
        nflags = count_flags(idx, p, (int)rr, (int)cw);
    }
    p->rr = (int)rr;
    p->cw = (int)cw;
    p->nflags = nflags;
    int off = 0;
    for (int i = 0; i < p->n; ++i) {
        const pit_microtile *t = &idx[p->cand[i]].tile;
        p->foff[i] = off;
        off += (p->rr / t->rows) * (p->cw / t->cols);
    }
    return 1;
}

/* The region of a pass over a rows x cols operand; 0 when its candidates
 * cannot share one (a lone candidate always has one). */
static int plan_region(const ocl_ctx *c, const pit_index *idx, int64_t rows, int64_t cols,
                       detect_pass *p)
{
    if (shared_region(c, idx, p))
        return 1;
    if (p->n > 1)
        return 0;
    whole_tile_region(&idx[p->cand[0]].tile, rows, cols, p);
    return 1;
}

/* Greedy grouping of the candidates into as few passes as possible (a
 * candidate alone always has a region). */
static void plan_passes(const ocl_ctx *c, const pit_index *idx, int n, int64_t rows,
                        int64_t cols, detect_pass *passes, int *npasses)
{
    *npasses = 0;
    for (int i = 0; i < n; ++i) {
        if (*npasses > 0) {
            detect_pass trial = passes[*npasses - 1];
            trial.cand[trial.n++] = i;
            if (plan_region(c, idx, rows, cols, &trial)) {
                passes[*npasses - 1] = trial;
                continue;
            }
        }
        detect_pass *p = &passes[(*npasses)++];
        memset(p, 0, sizeof *p);
        p->cand[0] = i;
        p->n = 1;
        plan_region(c, idx, rows, cols, p);
    }
}

/* Also gives the -DMDT code of X's elements. */
static pit_status check_detect_args(const pit_tdesc *X, const pit_index *idx, int n, int *mdt)
{
    if (n < 1 || n > MAX_CANDS)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl detect: %d candidates (1..%d allowed)", n, MAX_CANDS);
    if (X->rank != 2 && X->rank != 3)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl detect: rank %d operand (2 or 3 allowed)", X->rank);
    OCL_TRY(ocl_pattern_code(X, "detect:", mdt));
    for (int i = 0; i < n; ++i) {
        const pit_microtile *t = &idx[i].tile;
        if (t->rows < 1 || t->cols < 1 || t->axis < PIT_AXIS_K || t->axis > PIT_AXIS_N)
            return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                                   "opencl detect: candidate %d has micro-tile %dx%d axis %d",
                                   i, t->rows, t->cols, (int)t->axis);
    }
    return PIT_SUCCESS;
}

/* Counts and totals must start at zero: the kernel only appends. */
static pit_status zero_counts(cl_command_queue q, const pit_index *idx, int n)
{
    for (int i = 0; i < n; ++i) {
        OCL_TRY(ocl_fill32(q, (cl_mem)idx[i].counts, 0, 0u, (size_t)idx[i].groups * 4));
        OCL_TRY(ocl_fill32(q, (cl_mem)idx[i].total, 0, 0u, 4));
    }
    return PIT_SUCCESS;
}

static pit_status run_pass(ocl_ctx *c, cl_command_queue q, const pit_tdesc *X, int mdt,
                           const pit_index *idx, const detect_pass *p)
{
    const int64_t rows = ocl_rows_of(X), cols = ocl_cols_of(X);
    const int64_t batch = ocl_batch_of(X);
    const int dwg = (int)(c->max_wg < 256 ? c->max_wg : 256);

    /* Detection only tests elements for zero: the program depends on how
     * (MDT), not on the storage dtype, so f16 and bf16 share one and DT is a
     * fixed placeholder that pit_common.cl requires. */
    char defines[1024];
    int len = snprintf(defines, sizeof defines,
                       "-DDT=0 -DMDT=%d -DNCAND=%d -DRR=%d -DCW=%d -DNFLAGS=%d -DDWG=%d",
                       mdt, p->n, p->rr, p->cw, p->nflags, dwg);
    for (int i = 0; i < MAX_CANDS; ++i) {
        const pit_microtile *t = &idx[p->cand[i < p->n ? i : 0]].tile;
        len += snprintf(defines + len, sizeof defines - (size_t)len,
                        " -DTM_%d=%d -DTK_%d=%d -DAX_%d=%d -DFOFF_%d=%d", i, t->rows, i,
                        t->cols, i, (int)t->axis, i, i < p->n ? p->foff[i] : 0);
    }
    cl_program prog;
    cl_kernel k;
    OCL_TRY(ocl_program_get(c, "pit_detect", defines, &prog));
    OCL_TRY(ocl_kernel_create(c, prog, "pit_detect", (size_t)dwg, &k));

    cl_int8 gpb, cap, ngroups;
    memset(&gpb, 0, sizeof gpb);
    memset(&cap, 0, sizeof cap);
    memset(&ngroups, 0, sizeof ngroups);
    for (int i = 0; i < p->n; ++i) {
        gpb.s[i] = idx[p->cand[i]].groups_per_batch;
        cap.s[i] = idx[p->cand[i]].capacity;
        ngroups.s[i] = idx[p->cand[i]].groups;
    }
    ocl_args a;
    ocl_args_begin(&a, k, "pit_detect");
    ocl_arg_mat(&a, X);
    ocl_arg_int(&a, (cl_int)rows);
    ocl_arg_int(&a, (cl_int)cols);
    ocl_arg_raw(&a, sizeof gpb, &gpb);
    ocl_arg_raw(&a, sizeof cap, &cap);
    ocl_arg_raw(&a, sizeof ngroups, &ngroups);
    for (int i = 0; i < MAX_CANDS; ++i) {
        /* Unused slots repeat candidate 0's buffers; the kernel never touches them. */
        const pit_index *x = &idx[p->cand[i < p->n ? i : 0]];
        ocl_arg_mem(&a, (cl_mem)x->counts);
        ocl_arg_mem(&a, (cl_mem)x->entries);
        ocl_arg_mem(&a, (cl_mem)x->total);
    }
    size_t global[3] = {(size_t)ocl_cdiv(cols, p->cw) * (size_t)dwg,
                        (size_t)ocl_cdiv(rows, p->rr), (size_t)batch};
    size_t local[3] = {(size_t)dwg, 1, 1};
    return ocl_launch(&a, q, 3, global, local);
}

pit_status ocl_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    int mdt = 0;
    OCL_TRY(check_detect_args(X, idx, n, &mdt));
    OCL_TRY(zero_counts(s->queue, idx, n));
    const int r = X->rank;
    if (X->shape[r - 2] == 0 || X->shape[r - 1] == 0 || (r == 3 && X->shape[0] == 0))
        return PIT_SUCCESS;
    for (int i = 0; i < n; ++i) {
        const pit_microtile *t = &idx[i].tile;
        int64_t needed = (r == 3 ? X->shape[0] : 1) *
                         (t->axis == PIT_AXIS_M ? ocl_cdiv(X->shape[r - 1], t->cols)
                                                : ocl_cdiv(X->shape[r - 2], t->rows));
        if (needed > idx[i].groups)
            ocl_host->log_debug("opencl detect: index %d (%dx%d) has %d groups, the %lldx%lld "
                                "operand has %lld; micro-tiles beyond are not recorded",
                                i, t->rows, t->cols, idx[i].groups,
                                (long long)X->shape[r - 2], (long long)X->shape[r - 1],
                                (long long)needed);
    }
    detect_pass passes[MAX_CANDS];
    int npasses = 0;
    plan_passes(c, idx, n, X->shape[r - 2], X->shape[r - 1], passes, &npasses);
    for (int i = 0; i < npasses; ++i)
        OCL_TRY(run_pass(c, s->queue, X, mdt, idx, &passes[i]));
    return PIT_SUCCESS;
}
