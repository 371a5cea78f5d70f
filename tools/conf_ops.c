/*
 * tools/conf_ops.c - conformance cases of the operators of dynamic-sparse
 * models: SDDMM, sparse softmax (+ backward), sparse attention, row-sparse
 * matmul, ReLU FFN (+ relu), matmul backward (+ transpose), magnitude
 * pruning (MoE: conf_moe.c). Each case: seeded data, odd shapes, empty /
 * dense / aligned / unaligned patterns, outputs poisoned with NaN,
 * relative-norm comparison with the CPU reference in core/reference/reference.c (exact
 * for pruning). A dtype the device lacks must be refused (PIT_ERR_UNSUPPORTED).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

/* ---- probes (both must refuse a dtype the device lacks) -------------------------- */

static pit_status sddmm_probe(pit_context *c, const conf_probe_kit *k)
{
    return pit_sddmm(c, NULL, k->m[0], k->m[1], k->mask, k->m[2], 0, 0, NULL);
}

static pit_status softmax_probe(pit_context *c, const conf_probe_kit *k)
{
    return conf_either(pit_sparse_softmax(c, NULL, k->m[0], k->mask, k->m[1], 1.0f, NULL),
                pit_sparse_softmax_backward(c, NULL, k->m[0], k->m[1], k->mask, k->m[2], 1.0f));
}

static pit_status attention_probe(pit_context *c, const conf_probe_kit *k)
{
    return pit_sparse_attention(c, NULL, k->b[0], k->b[1], k->b[2], k->mask, k->b[3], 1.0f, 0,
                                NULL);
}

static pit_status rows_probe(pit_context *c, const conf_probe_kit *k)
{
    return pit_matmul_rows(c, NULL, k->m[0], k->m[1], k->m[2], 0, NULL);
}

static pit_status ffn_probe(pit_context *c, const conf_probe_kit *k)
{
    return conf_either(pit_relu_ffn(c, NULL, k->m[0], k->m[1], k->m[2], k->m[3], k->m[4], NULL),
                pit_relu(c, NULL, k->m[0], k->m[1]));
}

static pit_status backward_probe(pit_context *c, const conf_probe_kit *k)
{
    return conf_either(pit_matmul_backward(c, NULL, k->m[0], k->m[1], k->m[2], k->m[3], k->m[4]),
                pit_transpose(c, NULL, k->m[0], k->m[1]));
}

static pit_status prune_probe(pit_context *c, const conf_probe_kit *k)
{
    return pit_prune_magnitude(c, NULL, k->m[0], 1, 1, 0.5);
}

/* Zeroes the entries of v where the pattern is 0 (a sparse operand). */
static void apply_pattern(double *v, const double *pattern, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pattern[i] == 0.0)
            v[i] = 0.0;
}

/* ---- SDDMM ------------------------------------------------------------------------- */

typedef struct shape4 { int64_t b, m, n, k; } shape4;

static const shape4 sddmm_shapes[] = {
    {1, 1, 1, 1}, {1, 7, 5, 3}, {1, 33, 17, 65}, {2, 100, 33, 20}, {1, 64, 64, 32}};
static const int32_t sddmm_blocks[][2] = {{0, 0}, {8, 8}, {1, 32}, {16, 7}};
static const pattern_kind sddmm_patterns[] = {PAT_DENSE, PAT_EMPTY, PAT_BLOCKS_ALIGNED,
                                              PAT_BLOCKS_UNALIGNED, PAT_FINE};
#define NSDDMM_SHAPES (int)(sizeof sddmm_shapes / sizeof sddmm_shapes[0])
#define NSDDMM_BLOCKS (int)(sizeof sddmm_blocks / sizeof sddmm_blocks[0])
#define NSDDMM_PATTERNS (int)(sizeof sddmm_patterns / sizeof sddmm_patterns[0])

/* The masks sddmm is checked with: dtype, and one per batch or shared. */
typedef struct mask_mode { pit_dtype dtype; int per_batch; } mask_mode;
static const mask_mode sddmm_masks[] = {
    {PIT_F32, 0}, {PIT_I32, 0}, {PIT_F32, 1}, {PIT_U8, 0}, {PIT_U8, 1}};
#define NSDDMM_MASKS (int)(sizeof sddmm_masks / sizeof sddmm_masks[0])

static void sddmm_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                       const shape4 *s, pattern_kind pk, mask_mode mm, pit_rng *rng)
{
    int rank = s->b > 1 ? 3 : 2, mrank = mm.per_batch ? rank : 2;
    int64_t as[3] = {s->b, s->m, s->k}, bsh[3] = {s->b, s->n, s->k}, cs[3] = {s->b, s->m, s->n};
    int off = 3 - rank, moff = 3 - mrank;
    dbuf A, B, M, C;
    pit_status st = dbuf_make(ctx, dt, rank, as + off, &A);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, bsh + off, &B);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, mm.dtype, mrank, cs + moff, &M);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, cs + off, &C);
    double *ref = conf_ref_alloc((size_t)(s->b * s->m * s->n));
    int64_t mb = mm.per_batch ? s->b : 1;
    if (st == PIT_SUCCESS && ref) {
        conf_make_pattern(rng, pk, mb, s->m, s->n, M.h);
        pit_ref_encode_mask(mm.dtype, M.h, M.n);
        st = dbuf_random(&A, rng);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&B, rng);
        if (st == PIT_SUCCESS)
            st = conf_upload(M.t, M.h, M.n);
        pit_ref_sddmm(s->b, s->m, s->n, s->k, A.h, B.h, M.h, mm.per_batch, ref);
    }
    for (int bi = 0; bi < NSDDMM_BLOCKS && st == PIT_SUCCESS && ref; bi++) {
        char what[200];
        snprintf(what, sizeof what, "sddmm %s %lldx%lldx%lldx%lld %s block %dx%d mask %s%s",
                 pit_dtype_name(dt), (long long)s->b, (long long)s->m, (long long)s->n,
                 (long long)s->k, conf_pattern_names[pk], sddmm_blocks[bi][0], sddmm_blocks[bi][1],
                 pit_dtype_name(mm.dtype), mm.per_batch ? " per-batch" : "");
        pit_report rep;
        if (conf_call_ok(t, what, conf_poison(C.t, C.n)) &&
            conf_call_ok(t, what, pit_sddmm(ctx, NULL, A.t, B.t, M.t, C.t, sddmm_blocks[bi][0],
                                       sddmm_blocks[bi][1], &rep)))
            conf_compare(t, o, what, &C, ref, dt);
    }
    if (st != PIT_SUCCESS || !ref)
        conf_call_failed(t, "sddmm setup", st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(ref);
    dbuf_free(&A);
    dbuf_free(&B);
    dbuf_free(&M);
    dbuf_free(&C);
}

void conf_sddmm(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 1);
    int nshapes = o->quick ? 3 : NSDDMM_SHAPES;
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, nshapes * NSDDMM_PATTERNS * NSDDMM_BLOCKS,
                                  "pit_sddmm", sddmm_probe))
            continue;
        for (int s = 0; s < nshapes; s++)
            for (int p = 0; p < NSDDMM_PATTERNS; p++)
                sddmm_case(ctx, o, t, conf_dtypes[d], &sddmm_shapes[s], sddmm_patterns[p],
                           sddmm_masks[(s + p) % NSDDMM_MASKS], &rng);
    }
}

/* ---- softmax ------------------------------------------------------------------------- */

static const shape4 softmax_shapes[] = {{1, 1, 1, 0}, {1, 7, 5, 0}, {2, 33, 100, 0},
                                        {1, 100, 33, 0}};
static const pattern_kind softmax_patterns[] = {PAT_DENSE, PAT_EMPTY, PAT_BLOCKS_ALIGNED,
                                                PAT_BLOCKS_UNALIGNED, PAT_FINE, PAT_MASKED_ROWS};
#define NSOFTMAX_SHAPES (int)(sizeof softmax_shapes / sizeof softmax_shapes[0])
#define NSOFTMAX_PATTERNS (int)(sizeof softmax_patterns / sizeof softmax_patterns[0])

/* The scale of the backward: its Y comes from the forward, whatever that one's scale. */
#define SOFTMAX_BACKWARD_SCALE 0.7f
/* The huge scales: scale * x reaches about 1e10 and 1e30, finite in f32 (x in [-1, 1]). */
static const float huge_scales[] = {1e10f, 1e30f};
#define NHUGE_SCALES (int)(sizeof huge_scales / sizeof huge_scales[0])

/* The first on-column of a mask row at or after column j (cyclically); -1
 * when the row is fully masked. */
static int64_t on_column_from(const double *mrow, int64_t n, int64_t j)
{
    for (int64_t d = 0; d < n; d++)
        if (pit_ref_mask_on(mrow[(j + d) % n]))
            return (j + d) % n;
    return -1;
}

/* Logits for a huge scale, the rows taking turns: random of mixed signs; one
 * value (1) far above the rest (|x| <= 1e-6); two equal maxima (1) over
 * values below 0.5; all negative. Scaled, neighbours differ by far more than
 * an f32 rounding of scale * x, so the result is (nearly) one-hot, exactly
 * what the reference gives unless a kernel's max and exp disagree. */
static void huge_logit_rows(pit_rng *rng, double *x, const double *mask, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        double *xr = x + r * n;
        int kind = (int)(r % 4);
        for (int64_t j = 0; j < n; j++) {
            double u = pit_rng_uniform(rng);
            xr[j] = kind == 1 ? u * 1e-6 : kind == 2 ? u * 0.5 : kind == 3 ? -fabs(u) : u;
        }
        if (kind != 1 && kind != 2)
            continue;
        const double *mr = mask + r * n;
        int64_t a = on_column_from(mr, n, (int64_t)(pit_rng_next(rng) % (uint64_t)n));
        if (a < 0)
            continue;
        xr[a] = 1.0;
        if (kind == 2)
            xr[on_column_from(mr, n, a + 1)] = 1.0; /* a alone in its row: a again */
    }
}

/* Random logits where every 5th row is all -inf and every 7th element
 * elsewhere is -inf: -inf weighs 0, and a row of -inf alone gives 0. */
static void neg_inf_logits(pit_rng *rng, double *x, int64_t rows, int64_t n)
{
    pit_ref_fill_random(rng, x, (size_t)(rows * n));
    for (int64_t i = 0; i < rows * n; i++)
        if ((i / n) % 5 == 1 || i % 7 == 3)
            x[i] = -INFINITY;
}

/* The logits of a softmax case. */
typedef enum logit_kind { LOGITS_RANDOM, LOGITS_NEG_INF, LOGITS_HUGE } logit_kind;
static const char *const logit_names[] = {"", " -inf logits", " huge logits"};

static pit_status softmax_logits(pit_rng *rng, logit_kind lk, dbuf *X, const double *mask,
                                 int64_t rows, int64_t n)
{
    if (lk == LOGITS_RANDOM)
        return dbuf_random(X, rng);
    if (lk == LOGITS_NEG_INF)
        neg_inf_logits(rng, X->h, rows, n);
    else
        huge_logit_rows(rng, X->h, mask, rows, n);
    return dbuf_upload(X);
}

/* Forward (out of place, then in place) and backward of one pattern. */
static void softmax_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                         const shape4 *s, pattern_kind pk, pit_dtype mask_dt, float scale,
                         logit_kind lk, pit_rng *rng)
{
    int rank = s->b > 1 ? 3 : 2;
    int64_t sh[3] = {s->b, s->m, s->n};
    const int64_t *shape = sh + 3 - rank;
    dbuf X, M, Y, dY, dX;
    pit_status st = dbuf_make(ctx, dt, rank, shape, &X);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, mask_dt, rank, shape, &M);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, shape, &Y);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, shape, &dY);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, shape, &dX);
    size_t n = (size_t)(s->b * s->m * s->n);
    double *ref = conf_ref_alloc(n), *dref = conf_ref_alloc(n);
    char what[200];
    snprintf(what, sizeof what, "softmax %s %lldx%lldx%lld %s mask %s scale %g%s",
             pit_dtype_name(dt), (long long)s->b, (long long)s->m, (long long)s->n,
             conf_pattern_names[pk], pit_dtype_name(mask_dt), (double)scale, logit_names[lk]);
    if (st == PIT_SUCCESS && ref && dref) {
        conf_make_pattern(rng, pk, s->b, s->m, s->n, M.h);
        pit_ref_encode_mask(mask_dt, M.h, M.n);
        st = conf_upload(M.t, M.h, M.n);
        if (st == PIT_SUCCESS)
            st = softmax_logits(rng, lk, &X, M.h, s->b * s->m, s->n);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&dY, rng);
    }
    if (st == PIT_SUCCESS && ref && dref) {
        const float bscale = SOFTMAX_BACKWARD_SCALE;
        pit_ref_softmax(s->b, s->m, s->n, X.h, M.h, 1, scale, ref);
        if (conf_call_ok(t, what, conf_poison(Y.t, Y.n)) &&
            conf_call_ok(t, what, pit_sparse_softmax(ctx, NULL, X.t, M.t, Y.t, scale, NULL)))
            conf_compare(t, o, what, &Y, ref, dt);
        /* The backward from the device's Y, as training would use it. */
        pit_ref_softmax_backward(s->b, s->m, s->n, Y.h, dY.h, M.h, 1, bscale, dref);
        char w2[220];
        snprintf(w2, sizeof w2, "%s backward", what);
        if (conf_call_ok(t, w2, conf_poison(dX.t, dX.n)) &&
            conf_call_ok(t, w2, pit_sparse_softmax_backward(ctx, NULL, Y.t, dY.t, M.t, dX.t, bscale)))
            conf_compare(t, o, w2, &dX, dref, dt);
        snprintf(w2, sizeof w2, "%s in place", what);
        if (conf_call_ok(t, w2, pit_sparse_softmax(ctx, NULL, X.t, M.t, X.t, scale, NULL)))
            conf_compare(t, o, w2, &X, ref, dt);
    }
    if (st != PIT_SUCCESS || !ref || !dref)
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(ref);
    free(dref);
    dbuf_free(&X);
    dbuf_free(&M);
    dbuf_free(&Y);
    dbuf_free(&dY);
    dbuf_free(&dX);
}

/* f32, u8 (a bool mask) and i32 in turn */
static pit_dtype mask_dtype_of(int i)
{
    return i % 3 == 0 ? PIT_F32 : i % 3 == 1 ? PIT_U8 : PIT_I32;
}

/* the patterns of the huge-scale cases: some rows fully masked, or half the elements */
static const pattern_kind huge_patterns[] = {PAT_MASKED_ROWS, PAT_FINE};
#define NHUGE_PATTERNS (int)(sizeof huge_patterns / sizeof huge_patterns[0])

void conf_softmax(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 2);
    const int ncases = NSOFTMAX_SHAPES * (NSOFTMAX_PATTERNS + 1 + NHUGE_SCALES * NHUGE_PATTERNS);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, ncases * 3, "pit_sparse_softmax",
                                  softmax_probe))
            continue;
        for (int s = 0; s < NSOFTMAX_SHAPES; s++) {
            for (int p = 0; p < NSOFTMAX_PATTERNS; p++)
                softmax_case(ctx, o, t, conf_dtypes[d], &softmax_shapes[s], softmax_patterns[p],
                             mask_dtype_of(s + p), 0.7f, LOGITS_RANDOM, &rng);
            softmax_case(ctx, o, t, conf_dtypes[d], &softmax_shapes[s], PAT_BLOCKS_UNALIGNED,
                         mask_dtype_of(s), 0.7f, LOGITS_NEG_INF, &rng);
            for (int h = 0; h < NHUGE_SCALES; h++)
                for (int p = 0; p < NHUGE_PATTERNS; p++)
                    softmax_case(ctx, o, t, conf_dtypes[d], &softmax_shapes[s], huge_patterns[p],
                                 mask_dtype_of(s + h + p), huge_scales[h], LOGITS_HUGE, &rng);
        }
    }
}

/* ---- attention -------------------------------------------------------------------------- */

typedef struct attn_shape { int64_t bh, l, d, dv; } attn_shape;
/* the last two shapes, head dims 64 and 128 with blocks 64 (0) and 128, are
 * the fused tensor-core kernel's (CUDA: wgmma on sm_90a; at 128 with blocks
 * of 128 its warp-specialised build, the element mask read in its chunks) */
static const attn_shape attn_shapes[] = {{1, 7, 5, 3}, {2, 33, 16, 8}, {2, 100, 32, 20}, {2, 300, 64, 64},
                                         {2, 260, 128, 128}};
static const pattern_kind attn_patterns[] = {PAT_WINDOW_GLOBAL, PAT_BLOCKS_UNALIGNED,
                                             PAT_MASKED_ROWS, PAT_DENSE, PAT_EMPTY};
static const int32_t attn_blocks[] = {0, 16, 32, 128};
#define NATTN_SHAPES (int)(sizeof attn_shapes / sizeof attn_shapes[0])
#define NATTN_PATTERNS (int)(sizeof attn_patterns / sizeof attn_patterns[0])
#define NATTN_BLOCKS (int)(sizeof attn_blocks / sizeof attn_blocks[0])

/* Entries of -1 and 1 at random: with these Q and K the scores are small
 * integers, exact in every dtype, so a huge scale keeps ties tied and puts
 * others far apart, on the device as in the reference. */
static pit_status dbuf_random_signs(dbuf *b, pit_rng *rng)
{
    for (size_t i = 0; i < b->n; i++)
        b->h[i] = pit_rng_uniform(rng) < 0.0 ? -1.0 : 1.0;
    return dbuf_upload(b);
}

/* scale 0: 1 / sqrt(d) on random Q and K; otherwise that (huge) scale on
 * Q and K of dbuf_random_signs */
static void attention_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                           const attn_shape *s, pattern_kind pk, int per_head, pit_dtype mask_dt,
                           float huge_scale, pit_rng *rng)
{
    const float scale = huge_scale != 0.0f ? huge_scale : 1.0f / sqrtf((float)s->d);
    int64_t qs[3] = {s->bh, s->l, s->d}, vs[3] = {s->bh, s->l, s->dv}, ms[3] = {s->bh, s->l, s->l};
    dbuf Q, K, V, M, O;
    pit_status st = dbuf_make(ctx, dt, 3, qs, &Q);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 3, qs, &K);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 3, vs, &V);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 3, vs, &O);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, mask_dt, per_head ? 3 : 2, per_head ? ms : ms + 1, &M);
    double *ref = conf_ref_alloc((size_t)(s->bh * s->l * s->dv));
    pit_status (*fill_qk)(dbuf *, pit_rng *) = huge_scale != 0.0f ? dbuf_random_signs : dbuf_random;
    if (st == PIT_SUCCESS && ref) {
        conf_make_pattern(rng, pk, per_head ? s->bh : 1, s->l, s->l, M.h);
        pit_ref_encode_mask(mask_dt, M.h, M.n);
        st = conf_upload(M.t, M.h, M.n);
        if (st == PIT_SUCCESS)
            st = fill_qk(&Q, rng);
        if (st == PIT_SUCCESS)
            st = fill_qk(&K, rng);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&V, rng);
        pit_ref_attention(s->bh, s->l, s->d, s->dv, Q.h, K.h, V.h, M.h, per_head, scale, ref);
    }
    for (int b = 0; b < NATTN_BLOCKS && st == PIT_SUCCESS && ref; b++) {
        char what[200];
        snprintf(what, sizeof what,
                 "attention %s %lldx%lldx%lldx%lld %s%s mask %s block %d scale %g",
                 pit_dtype_name(dt), (long long)s->bh, (long long)s->l, (long long)s->d,
                 (long long)s->dv, conf_pattern_names[pk], per_head ? " per-head" : "",
                 pit_dtype_name(mask_dt), attn_blocks[b], (double)scale);
        if (conf_call_ok(t, what, conf_poison(O.t, O.n)) &&
            conf_call_ok(t, what, pit_sparse_attention(ctx, NULL, Q.t, K.t, V.t, M.t, O.t, scale,
                                                  attn_blocks[b], NULL)))
            conf_compare(t, o, what, &O, ref, dt);
    }
    if (st != PIT_SUCCESS || !ref)
        conf_call_failed(t, "attention setup", st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(ref);
    dbuf_free(&Q);
    dbuf_free(&K);
    dbuf_free(&V);
    dbuf_free(&M);
    dbuf_free(&O);
}

/* f32, u8 (a bool mask), the data's own dtype and i32 in turn */
static pit_dtype attn_mask_dtype(pit_dtype dt, int i)
{
    return i % 4 == 0 ? PIT_F32 : i % 4 == 1 ? PIT_U8 : i % 4 == 2 ? dt : PIT_I32;
}

void conf_sparse_attention(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 3);
    const int ncases = NATTN_SHAPES * (NATTN_PATTERNS + NHUGE_SCALES) * NATTN_BLOCKS;
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, ncases, "pit_sparse_attention",
                                  attention_probe))
            continue;
        for (int s = 0; s < NATTN_SHAPES; s++) {
            for (int p = 0; p < NATTN_PATTERNS; p++)
                attention_case(ctx, o, t, conf_dtypes[d], &attn_shapes[s], attn_patterns[p],
                               p == 1, attn_mask_dtype(conf_dtypes[d], s + p), 0.0f, &rng);
            /* huge scales: rows fully masked, or a window and global tokens */
            for (int h = 0; h < NHUGE_SCALES; h++)
                attention_case(ctx, o, t, conf_dtypes[d], &attn_shapes[s],
                               h ? PAT_WINDOW_GLOBAL : PAT_MASKED_ROWS, 0,
                               attn_mask_dtype(conf_dtypes[d], s + h + 1), huge_scales[h], &rng);
        }
    }
}

/* ---- row-sparse matmul ----------------------------------------------------------------- */

/* K above 1024 (the widest row one detection work-group used to scan) is
 * scanned in passes: 1025, 3001 and 4096 wide rows. */
static const shape4 rows_shapes[] = {{1, 1, 1, 1},     {1, 7, 5, 3},      {2, 33, 17, 65},
                                     {1, 100, 33, 70}, {1, 9, 5, 1025},   {2, 7, 3, 3001},
                                     {1, 16, 8, 4096}};
#define NROWS_SHAPES (int)(sizeof rows_shapes / sizeof rows_shapes[0])
typedef enum rows_kind {
    ROWS_DENSE,
    ROWS_EMPTY,
    ROWS_PADDED,
    ROWS_RANDOM,
    ROWS_LAST_BLOCK, /* random rows, non-zero only in their last 32 columns */
    ROWS_COUNT
} rows_kind;
static const char *const rows_names[ROWS_COUNT] = {"dense", "empty", "padded-tail", "random-rows",
                                                   "last-column-block"};
#define ROWS_LAST_BLOCK_COLS 32

/* Zeroes whole rows of A: none, all, a padded tail per batch, or at random;
 * or, for the last kind, all but the last column block of every row. */
static void zero_rows(pit_rng *rng, rows_kind k, const shape4 *s, double *a)
{
    int64_t head = s->k > ROWS_LAST_BLOCK_COLS ? s->k - ROWS_LAST_BLOCK_COLS : 0;
    for (int64_t b = 0; b < s->b; b++) {
        int64_t len = s->m - (s->m * (b + 1)) / (2 * s->b + 1); /* variable length */
        for (int64_t i = 0; i < s->m; i++) {
            double *row = a + (b * s->m + i) * s->k;
            int zero = k == ROWS_EMPTY || (k == ROWS_PADDED && i >= len) ||
                       ((k == ROWS_RANDOM || k == ROWS_LAST_BLOCK) && (pit_rng_next(rng) & 1));
            if (zero)
                memset(row, 0, (size_t)s->k * sizeof(double));
            else if (k == ROWS_LAST_BLOCK)
                memset(row, 0, (size_t)head * sizeof(double));
        }
    }
}

static void rows_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                      const shape4 *s, rows_kind rk, pit_rng *rng)
{
    int rank = s->b > 1 ? 3 : 2;
    int64_t as[3] = {s->b, s->m, s->k}, bs[2] = {s->k, s->n}, cs[3] = {s->b, s->m, s->n};
    dbuf A, B, C;
    pit_status st = dbuf_make(ctx, dt, rank, as + 3 - rank, &A);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, bs, &B);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, cs + 3 - rank, &C);
    double *ref = conf_ref_alloc(C.n);
    if (st == PIT_SUCCESS && ref) {
        pit_ref_fill_random(rng, A.h, A.n);
        zero_rows(rng, rk, s, A.h);
        st = dbuf_upload(&A);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&B, rng);
    }
    for (int keep = 0; keep < 2 && st == PIT_SUCCESS && ref; keep++) {
        char what[200];
        snprintf(what, sizeof what, "rows %s %lldx%lldx%lldx%lld %s%s", pit_dtype_name(dt),
                 (long long)s->b, (long long)s->m, (long long)s->n, (long long)s->k,
                 rows_names[rk], keep ? " keep-skipped" : "");
        /* keep: C holds earlier values that skipped rows must keep; else NaN. */
        pit_status cs2 = keep ? dbuf_random(&C, rng) : conf_poison(C.t, C.n);
        memcpy(ref, C.h, C.n * sizeof(double));
        pit_ref_matmul_rows(s->b, s->m, s->n, s->k, A.h, B.h, 0, keep, ref);
        pit_report rep;
        if (conf_call_ok(t, what, cs2) &&
            conf_call_ok(t, what, pit_matmul_rows(ctx, NULL, A.t, B.t, C.t, keep, &rep)))
            conf_compare(t, o, what, &C, ref, dt);
    }
    if (st != PIT_SUCCESS || !ref)
        conf_call_failed(t, "rows setup", st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(ref);
    dbuf_free(&A);
    dbuf_free(&B);
    dbuf_free(&C);
}

void conf_rows(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 5);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, NROWS_SHAPES * ROWS_COUNT * 2,
                                  "pit_matmul_rows", rows_probe))
            continue;
        for (int s = 0; s < NROWS_SHAPES; s++)
            for (int k = 0; k < ROWS_COUNT; k++)
                rows_case(ctx, o, t, conf_dtypes[d], &rows_shapes[s], (rows_kind)k, &rng);
    }
}

/* ---- ReLU FFN (and relu) ---------------------------------------------------------------- */

typedef struct ffn_shape { int64_t t, d, f, d2; double bias; } ffn_shape;
/* bias shifts W1 so that H is about half zero (0) or mostly zero (-0.6). */
static const ffn_shape ffn_shapes[] = {
    {1, 1, 1, 1, 0.0}, {7, 5, 33, 3, 0.0}, {33, 16, 100, 20, 0.0}, {33, 16, 100, 20, -0.6},
    {64, 32, 70, 17, -0.3}};
#define NFFN_SHAPES (int)(sizeof ffn_shapes / sizeof ffn_shapes[0])

static void ffn_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                     const ffn_shape *s, pit_rng *rng)
{
    int64_t xs[2] = {s->t, s->d}, w1s[2] = {s->d, s->f}, w2s[2] = {s->f, s->d2},
            hs[2] = {s->t, s->f}, ys[2] = {s->t, s->d2};
    dbuf X, W1, W2, H, Y;
    pit_status st = dbuf_make(ctx, dt, 2, xs, &X);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, w1s, &W1);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, w2s, &W2);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, hs, &H);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, 2, ys, &Y);
    double *href = conf_ref_alloc(H.n), *yref = conf_ref_alloc(Y.n), *relu_ref = conf_ref_alloc(W1.n);
    char what[200];
    snprintf(what, sizeof what, "ffn %s T%lld D%lld F%lld D2%lld bias %.1f", pit_dtype_name(dt),
             (long long)s->t, (long long)s->d, (long long)s->f, (long long)s->d2, s->bias);
    if (st == PIT_SUCCESS && href && yref && relu_ref) {
        pit_ref_fill_random(rng, X.h, X.n);
        for (size_t i = 0; i < X.n; i++)
            X.h[i] = fabs(X.h[i]); /* X >= 0 so the bias of W1 decides H's sign */
        pit_ref_fill_random(rng, W1.h, W1.n);
        for (size_t i = 0; i < W1.n; i++)
            W1.h[i] += s->bias;
        st = dbuf_upload(&X);
        if (st == PIT_SUCCESS)
            st = dbuf_upload(&W1);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&W2, rng);
        pit_ref_relu_ffn(s->t, s->d, s->f, s->d2, X.h, W1.h, W2.h, href, yref);
    }
    if (st == PIT_SUCCESS && href && yref && relu_ref) {
        pit_report rep;
        if (conf_call_ok(t, what, conf_poison(Y.t, Y.n)) &&
            conf_call_ok(t, what, pit_relu_ffn(ctx, NULL, X.t, W1.t, W2.t, H.t, Y.t, &rep))) {
            char w2[320];
            snprintf(w2, sizeof w2, "%s H", what);
            conf_compare(t, o, w2, &H, href, dt);
            snprintf(w2, sizeof w2, "%s Y (%s)", what, rep.choice);
            conf_compare(t, o, w2, &Y, yref, dt);
        }
        /* relu alone, in place on a copy of W1 (values of both signs). */
        pit_ref_relu(W1.n, W1.h, relu_ref);
        snprintf(what, sizeof what, "relu %s %lldx%lld in place", pit_dtype_name(dt),
                 (long long)s->d, (long long)s->f);
        if (conf_call_ok(t, what, pit_relu(ctx, NULL, W1.t, W1.t)))
            conf_compare(t, o, what, &W1, relu_ref, dt);
    }
    if (st != PIT_SUCCESS || !href || !yref || !relu_ref)
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(href);
    free(yref);
    free(relu_ref);
    dbuf_free(&X);
    dbuf_free(&W1);
    dbuf_free(&W2);
    dbuf_free(&H);
    dbuf_free(&Y);
}

void conf_ffn(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 6);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, NFFN_SHAPES * 3,
                                  "pit_relu_ffn", ffn_probe))
            continue;
        for (int s = 0; s < NFFN_SHAPES; s++)
            ffn_case(ctx, o, t, conf_dtypes[d], &ffn_shapes[s], &rng);
    }
}

/* ---- matmul backward (and transpose) ------------------------------------------------------- */

static const shape4 bwd_shapes[] = {{1, 7, 5, 3}, {1, 33, 17, 65}, {2, 40, 24, 96}, {1, 100, 33, 70}};
static const pattern_kind bwd_patterns[] = {PAT_DENSE, PAT_EMPTY, PAT_BLOCKS_ALIGNED,
                                            PAT_BLOCKS_UNALIGNED, PAT_FINE};
#define NBWD_SHAPES (int)(sizeof bwd_shapes / sizeof bwd_shapes[0])
#define NBWD_PATTERNS (int)(sizeof bwd_patterns / sizeof bwd_patterns[0])

static void backward_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                          const shape4 *s, pattern_kind pk, pit_rng *rng)
{
    int rank = s->b > 1 ? 3 : 2, off = 3 - rank;
    int64_t as[3] = {s->b, s->m, s->k}, bs[3] = {s->b, s->k, s->n}, cs[3] = {s->b, s->m, s->n},
            ts[3] = {s->b, s->k, s->m};
    dbuf A, B, dC, dA, dB, At;
    pit_status st = dbuf_make(ctx, dt, rank, as + off, &A);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, bs + off, &B);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, cs + off, &dC);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, as + off, &dA);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, bs + off, &dB);
    if (st == PIT_SUCCESS)
        st = dbuf_make(ctx, dt, rank, ts + off, &At);
    double *daref = conf_ref_alloc(dA.n), *dbref = conf_ref_alloc(dB.n), *tref = conf_ref_alloc(At.n),
           *pattern = conf_ref_alloc(A.n);
    char what[200];
    snprintf(what, sizeof what, "backward %s %lldx%lldx%lldx%lld A %s", pit_dtype_name(dt),
             (long long)s->b, (long long)s->m, (long long)s->n, (long long)s->k,
             conf_pattern_names[pk]);
    int ready = st == PIT_SUCCESS && daref && dbref && tref && pattern;
    if (ready) {
        conf_make_pattern(rng, pk, s->b, s->m, s->k, pattern);
        pit_ref_fill_random(rng, A.h, A.n);
        apply_pattern(A.h, pattern, A.n);
        st = dbuf_upload(&A);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&B, rng);
        if (st == PIT_SUCCESS)
            st = dbuf_random(&dC, rng);
        pit_ref_matmul_backward(s->b, s->m, s->n, s->k, A.h, B.h, dC.h, daref, dbref);
        pit_ref_transpose(s->b, s->m, s->k, A.h, tref);
        ready = st == PIT_SUCCESS;
    }
    if (ready && conf_call_ok(t, what, conf_poison(dA.t, dA.n)) &&
        conf_call_ok(t, what, conf_poison(dB.t, dB.n)) &&
        conf_call_ok(t, what, pit_matmul_backward(ctx, NULL, A.t, B.t, dC.t, dA.t, dB.t))) {
        char w2[220];
        snprintf(w2, sizeof w2, "%s dA", what);
        conf_compare(t, o, w2, &dA, daref, dt);
        snprintf(w2, sizeof w2, "%s dB", what);
        conf_compare(t, o, w2, &dB, dbref, dt);
    }
    if (ready) {
        char w2[220];
        snprintf(w2, sizeof w2, "transpose %s %lldx%lldx%lld", pit_dtype_name(dt), (long long)s->b,
                 (long long)s->m, (long long)s->k);
        if (conf_call_ok(t, w2, conf_poison(At.t, At.n)) &&
            conf_call_ok(t, w2, pit_transpose(ctx, NULL, A.t, At.t)))
            conf_compare(t, o, w2, &At, tref, dt);
    }
    if (!ready)
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(daref);
    free(dbref);
    free(tref);
    free(pattern);
    dbuf *all[6] = {&A, &B, &dC, &dA, &dB, &At};
    for (int i = 0; i < 6; i++)
        dbuf_free(all[i]);
}

void conf_backward(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 7);
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t, NBWD_SHAPES * NBWD_PATTERNS * 3,
                                  "pit_matmul_backward", backward_probe))
            continue;
        for (int s = 0; s < NBWD_SHAPES; s++)
            for (int p = 0; p < NBWD_PATTERNS; p++)
                backward_case(ctx, o, t, conf_dtypes[d], &bwd_shapes[s], bwd_patterns[p], &rng);
    }
}

/* ---- magnitude pruning ---------------------------------------------------------------------- */

typedef struct prune_shape { int64_t rows, cols; } prune_shape;
static const prune_shape prune_shapes[] = {{1, 1}, {7, 5}, {33, 17}, {100, 130}, {64, 128}};
static const int32_t prune_blocks[][2] = {{32, 64}, {32, 1}, {7, 5}};
static const double prune_sparsities[] = {0.0, 0.5, 0.9, 1.0};
#define NPRUNE_SHAPES (int)(sizeof prune_shapes / sizeof prune_shapes[0])
#define NPRUNE_BLOCKS (int)(sizeof prune_blocks / sizeof prune_blocks[0])
#define NPRUNE_SPARSITIES (int)(sizeof prune_sparsities / sizeof prune_sparsities[0])

/* Values: random non-zero, or +-0.25 / +-0.5 only so that many blocks have
 * equal norms and the tie rule decides. */
static void prune_fill(pit_rng *rng, int ties, double *w, size_t n)
{
    pit_ref_fill_random(rng, w, n);
    for (size_t i = 0; ties && i < n; i++)
        w[i] = (w[i] < 0 ? -0.25 : 0.25) * (double)(1 + (pit_rng_next(rng) & 1));
}

/* Prunes W on the device and its host copy with the reference, then compares
 * exactly (the fraction of differing elements must be 0). */
static void prune_step(conf_tally *t, const conf_opts *o, pit_context *ctx, dbuf *W, int64_t rows,
                       int64_t cols, int32_t br, int32_t bc, double sparsity, const char *what,
                       double *got)
{
    if (!conf_call_ok(t, what, pit_prune_magnitude(ctx, NULL, W->t, br, bc, sparsity)))
        return;
    pit_ref_prune_magnitude(rows, cols, br, bc, sparsity, W->h);
    pit_status s = conf_download(W->t, got, W->n);
    if (!conf_call_ok(t, what, s))
        return;
    size_t differ = 0;
    for (size_t i = 0; i < W->n; i++)
        differ += got[i] != W->h[i];
    conf_check(t, o, what, (double)differ / (double)W->n, 0.0);
}

static void prune_case(pit_context *ctx, const conf_opts *o, conf_tally *t, pit_dtype dt,
                       const prune_shape *s, int ties, pit_rng *rng)
{
    int64_t shape[2] = {s->rows, s->cols};
    dbuf W;
    pit_status st = dbuf_make(ctx, dt, 2, shape, &W);
    double *got = conf_ref_alloc(W.n);
    char what[200];
    for (int b = 0; b < NPRUNE_BLOCKS && st == PIT_SUCCESS && got; b++)
        for (int p = 0; p < NPRUNE_SPARSITIES && st == PIT_SUCCESS; p++) {
            snprintf(what, sizeof what, "prune %s %lldx%lld %s block %dx%d sparsity %.1f (exact)",
                     pit_dtype_name(dt), (long long)s->rows, (long long)s->cols,
                     ties ? "ties" : "random", prune_blocks[b][0], prune_blocks[b][1],
                     prune_sparsities[p]);
            prune_fill(rng, ties, W.h, W.n);
            st = dbuf_upload(&W);
            if (st == PIT_SUCCESS)
                prune_step(t, o, ctx, &W, s->rows, s->cols, prune_blocks[b][0],
                           prune_blocks[b][1], prune_sparsities[p], what, got);
        }
    /* Sparse training's schedule: 32x64 blocks, then 32x1 on what is left. */
    snprintf(what, sizeof what, "prune %s %lldx%lld %s 32x64@0.5 then 32x1@0.8 (exact)",
             pit_dtype_name(dt), (long long)s->rows, (long long)s->cols, ties ? "ties" : "random");
    if (st == PIT_SUCCESS && got) {
        prune_fill(rng, ties, W.h, W.n);
        st = dbuf_upload(&W);
        if (st == PIT_SUCCESS)
            prune_step(t, o, ctx, &W, s->rows, s->cols, 32, 64, 0.5, what, got);
        if (st == PIT_SUCCESS)
            prune_step(t, o, ctx, &W, s->rows, s->cols, 32, 1, 0.8, what, got);
    }
    if (st != PIT_SUCCESS || !got)
        conf_call_failed(t, what, st != PIT_SUCCESS ? st : PIT_ERR_OUT_OF_MEMORY);
    free(got);
    dbuf_free(&W);
}

void conf_prune(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 8);
    int nshapes = o->quick ? 3 : NPRUNE_SHAPES;
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, conf_dtypes[d], t,
                                  nshapes * 2 * (NPRUNE_BLOCKS * NPRUNE_SPARSITIES + 2),
                                  "pit_prune_magnitude", prune_probe))
            continue;
        for (int s = 0; s < nshapes; s++)
            for (int ties = 0; ties < 2; ties++)
                prune_case(ctx, o, t, conf_dtypes[d], &prune_shapes[s + (o->quick ? 1 : 0)], ties,
                           &rng);
    }
}
