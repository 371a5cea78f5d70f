/*
 * direct_masks.c - the mask operators of test_opencl_direct.
 */
#include <math.h>
#include <string.h>

#include "direct.h"
#include "reference.h" /* core's double-precision references */

/* ---- u8 masks ------------------------------------------------------------------------ *
 * A bool mask (u8: an element is on when its byte is not 0) through detection
 * and the operators that read a mask: sddmm, softmax and its backward. The
 * mask has the output's shape, M x K of the case, and the case's N is the
 * SDDMM's inner dimension D. On bytes are random in 1..255, so any non-zero
 * byte must count, not only 1; data are random and never zero. A rank-2 mask
 * shared by every batch is tried as well as one per batch. */

#define MASK_SCALE 0.8

static int mask_on_host(const dtensor *Mk, int64_t b, int64_t r, int64_t c)
{
    return ((const uint8_t *)Mk->host)[elem_index(Mk, b, r, c)] != 0; /* rank 2: b unused */
}

static void mask_fill(dtensor *Mk, int pat, uint64_t seed, int64_t mbatch, int64_t M, int64_t K)
{
    for (int64_t b = 0; b < mbatch; ++b)
        for (int64_t r = 0; r < M; ++r)
            for (int64_t c = 0; c < K; ++c) {
                double byte = 1.0 + floor(hash01(seed + 5, b, r, c) * 255.0);
                store_elem(PIT_U8, Mk->host, elem_index(Mk, b, r, c),
                           is_zero(pat, seed, b, r, c) ? 0.0 : byte);
            }
    OK(be->mem_write(ctx, stream, Mk->d.mem, 0, Mk->host, Mk->bytes));
}

/* Never-zero values into t (written to the device) and vals (batch x rows x cols). */
static void values_fill(dtensor *t, uint64_t seed, int64_t batch, int64_t rows, int64_t cols,
                        double *vals)
{
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
                size_t i = elem_index(t, b, r, c);
                store_elem(t->d.dtype, t->host, i, value_at(seed, b, r, c));
                vals[(b * rows + r) * cols + c] = load_elem(t->d.dtype, t->host, i);
            }
    OK(be->mem_write(ctx, stream, t->d.mem, 0, t->host, t->bytes));
}

/* The CPU results of one case; every array is batch x M x K but a (M x D)
 * and bt (K x D). */
typedef struct mask_refs {
    double *a, *bt, *x, *dy, *c, *y, *dx;
} mask_refs;


/* The mask as core's references take it: 0/1, mbatch x M x K. */
static double *mask_dense(const dtensor *Mk, int64_t mbatch, int64_t M, int64_t K)
{
    double *m = calloc((size_t)(mbatch * M * K) + 1, sizeof(double));
    for (int64_t b = 0; b < mbatch; ++b)
        for (int64_t r = 0; r < M; ++r)
            for (int64_t c = 0; c < K; ++c)
                m[(b * M + r) * K + c] = mask_on_host(Mk, b, r, c);
    return m;
}

/* The operands of the mask operators, f32, with the case's padding and offset. */
typedef struct mask_operands {
    dtensor A, B, X, Y, dY, O; /* O: the output, poisoned before each operator */
} mask_operands;

static void mask_operands_make(mask_operands *o, mask_refs *r, const shape *s, uint64_t seed)
{
    const int64_t batch = s->batch, M = s->M, K = s->K, D = s->N;
    const int rank3 = batch > 1;
    dtensor_make(&o->A, PIT_F32, batch, M, D, s->pad, s->off, rank3);
    dtensor_make(&o->B, PIT_F32, batch, K, D, s->pad, s->off, rank3);
    dtensor_make(&o->X, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->Y, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->dY, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    dtensor_make(&o->O, PIT_F32, batch, M, K, s->pad, s->off, rank3);
    const size_t mk = (size_t)(batch * M * K) + 1;
    r->a = calloc((size_t)(batch * M * D) + 1, sizeof(double));
    r->bt = calloc((size_t)(batch * K * D) + 1, sizeof(double));
    r->x = calloc(mk, sizeof(double));
    r->dy = calloc(mk, sizeof(double));
    r->c = calloc(mk, sizeof(double));
    r->y = calloc(mk, sizeof(double));
    r->dx = calloc(mk, sizeof(double));
    values_fill(&o->A, seed + 11, batch, M, D, r->a);
    values_fill(&o->B, seed + 12, batch, K, D, r->bt);
    values_fill(&o->X, seed + 13, batch, M, K, r->x);
    values_fill(&o->dY, seed + 14, batch, M, K, r->dy);
}

static void mask_operands_free(mask_operands *o, mask_refs *r)
{
    dtensor *t[] = {&o->A, &o->B, &o->X, &o->Y, &o->dY, &o->O};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; ++i)
        dtensor_free(t[i]);
    double *p[] = {r->a, r->bt, r->x, r->dy, r->c, r->y, r->dx};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i)
        free(p[i]);
}

/* sddmm, softmax and softmax backward on one index of the mask. */
static void mask_ops_check(mask_operands *o, const mask_refs *r, const dtensor *Mk,
                           const pit_index *idx, const shape *s, const char *what)
{
    char label[192]; /* what is at most 160 characters */
    snprintf(label, sizeof label, "%.160s sddmm", what);
    poison(&o->O);
    pit_status st = be->sddmm(ctx, stream, idx, &o->A.d, &o->B.d, &Mk->d, &o->O.d);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->c, s->batch, s->M, s->K, label);

    snprintf(label, sizeof label, "%.160s softmax", what);
    poison(&o->O);
    st = be->softmax_sparse(ctx, stream, idx, &o->X.d, &Mk->d, &o->O.d, (float)MASK_SCALE);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->y, s->batch, s->M, s->K, label);

    snprintf(label, sizeof label, "%.160s softmax backward", what);
    poison(&o->O);
    st = be->softmax_sparse_backward(ctx, stream, idx, &o->Y.d, &o->dY.d, &Mk->d, &o->O.d,
                                     (float)MASK_SCALE);
    EXPECT(st == PIT_SUCCESS, "%s -> %d %s", label, (int)st, g_error);
    if (st == PIT_SUCCESS)
        check_c(&o->O, r->dx, s->batch, s->M, s->K, label);
}

/* The backward's input Y: the reference forward result, rounded to f32. */
static void mask_forward_upload(mask_operands *o, mask_refs *r, const shape *s)
{
    for (int64_t b = 0; b < s->batch; ++b)
        for (int64_t m = 0; m < s->M; ++m)
            for (int64_t n = 0; n < s->K; ++n) {
                size_t i = elem_index(&o->Y, b, m, n);
                double *y = &r->y[(b * s->M + m) * s->K + n];
                store_elem(PIT_F32, o->Y.host, i, *y);
                *y = load_elem(PIT_F32, o->Y.host, i);
            }
    OK(be->mem_write(ctx, stream, o->Y.d.mem, 0, o->Y.host, o->Y.bytes));
}

void run_mask_case(const shape *s, int pat, int shared)
{
    const int64_t batch = s->batch, M = s->M, K = s->K;
    const int64_t mbatch = shared ? 1 : batch;
    const uint64_t seed = (uint64_t)(M * 7919 + K * 104729 + s->N + pat * 13 + batch + shared);
    dtensor Mk;
    dtensor_make(&Mk, PIT_U8, mbatch, M, K, s->pad, s->off, mbatch > 1);
    mask_fill(&Mk, pat, seed, mbatch, M, K);

    mask_operands o;
    mask_refs r;
    mask_operands_make(&o, &r, s, seed);
    /* core's double-precision references; the backward from y as the
     * device reads it (rounded to f32) */
    double *md = mask_dense(&Mk, mbatch, M, K);
    pit_ref_sddmm(batch, M, K, s->N, r.a, r.bt, md, mbatch > 1, r.c);
    pit_ref_softmax(batch, M, K, r.x, md, mbatch > 1, MASK_SCALE, r.y);
    mask_forward_upload(&o, &r, s);
    pit_ref_softmax_backward(batch, M, K, r.y, r.dy, md, mbatch > 1, MASK_SCALE, r.dx);
    free(md);

    host_index idx[NCANDS];
    detect_candidates(idx, &Mk.d, mbatch, M, K);
    char what[160];
    for (int i = 0; i < NCANDS; ++i) {
        index_read(&idx[i]);
        snprintf(what, sizeof what, "u8 mask%s %lldx%lldx%lld (D %lld) %s %dx%d/%c",
                 shared ? " (shared)" : "", (long long)batch, (long long)M, (long long)K,
                 (long long)s->N, pat_name[pat], g_cands[i].rows, g_cands[i].cols,
                 g_cands[i].axis == PIT_AXIS_M ? 'M' : 'K');
        char label[192];
        snprintf(label, sizeof label, "%s detect", what);
        check_index(&idx[i], &Mk, mbatch, M, K, label);
        /* The operators group by row-block and list column blocks (axis K). */
        if (g_cands[i].axis == PIT_AXIS_K)
            mask_ops_check(&o, &r, &Mk, &idx[i].idx, s, what);
    }
    for (int i = 0; i < NCANDS; ++i)
        index_free(&idx[i]);
    mask_operands_free(&o, &r);
    dtensor_free(&Mk);
}

/* A dtype that cannot be a mask is refused with a message naming u8 among
 * the allowed ones. */
void test_mask_errors(void)
{
    dtensor X, Mk;
    dtensor_make(&X, PIT_F32, 1, 8, 8, 0, 0, 0);
    dtensor_make(&Mk, PIT_U8, 1, 8, 8, 0, 0, 0);
    host_index h;
    index_make(&h, (pit_microtile){8, 8, PIT_AXIS_K}, 1, 8, 8);
    Mk.d.dtype = (pit_dtype)9;
    pit_status st = be->detect(ctx, stream, &Mk.d, &h.idx, 1);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"), "detect of dtype 9 -> %d (%s)",
           (int)st, g_error);
    st = be->softmax_sparse(ctx, stream, &h.idx, &X.d, &Mk.d, &X.d, 1.0f);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"),
           "softmax with a dtype 9 mask -> %d (%s)", (int)st, g_error);
    st = be->sddmm(ctx, stream, &h.idx, &X.d, &X.d, &Mk.d, &X.d);
    EXPECT(st == PIT_ERR_UNSUPPORTED_DTYPE && strstr(g_error, "u8"),
           "sddmm with a dtype 9 mask -> %d (%s)", (int)st, g_error);
    Mk.d.dtype = PIT_U8;
    index_free(&h);
    dtensor_free(&X);
    dtensor_free(&Mk);
}

