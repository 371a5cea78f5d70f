/*
 * tools/conf_attention.c - conformance cases of pit_attention: every option
 * against pit_ref_attention_full (core/reference), O and lse compared by
 * relative norm with the per-dtype tolerance, both poisoned with NaN first.
 * Grouped-query ratios 1, 4 and 8; causal with Lk > Lq, Lk == Lq and Lk < Lq
 * (rows that see no key); windows; element masks of every rank and
 * broadcast; block masks of odd blocks over lengths that are no multiple of
 * them; all of them mixed; head dims 32, 64, 80 and 128 (and 64/128 mixed
 * for K and V); decode (Lq of 1 and 4, block masks of Lq rows);
 * no key at all; Q, K, V and O as views of [B, L, H, D] buffers. The
 * backends of this tree (OpenCL, CUDA, HIP) take every option: a refusal
 * there fails. Another backend may refuse one (PIT_ERR_UNSUPPORTED): that
 * case is printed and counted as skipped, by name, never as passed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define CONF_TRY(expr)                    \
    do {                                  \
        pit_status conf_try_s_ = (expr);  \
        if (conf_try_s_ != PIT_SUCCESS)   \
            return conf_try_s_;           \
    } while (0)

typedef struct attn_case {
    const char *name;
    int64_t b, hq, hkv, lq, lk, d, dv;
    int causal;
    int32_t window_left, window_right; /* 0: none (case_options) */
    int mask_rank;                     /* 0: no element mask; 2, 3 or 4 */
    int mask_heads_shared;             /* rank 4: [B, 1, Lq, Lk] */
    pattern_kind mask_pattern;
    int32_t block_q, block_k; /* 0: no block mask */
    int block_rank;           /* 2, 3 or 4 */
    double block_keep;        /* fraction of blocks allowed */
    int32_t tile_rows, tile_cols; /* micro-tile hint, 0: automatic */
    int blhd;                 /* Q, K, V, O as views of [B, L, H, D] buffers */
    int lse;
    int quick;                /* in --quick */
} attn_case;

static const attn_case cases[] = {
    {.name = "dense, no option", .b = 2, .hq = 4, .hkv = 4, .lq = 33, .lk = 33, .d = 32, .dv = 32},
    {.name = "gqa 4, causal, Lk > Lq", .b = 1, .hq = 8, .hkv = 2, .lq = 20, .lk = 77, .d = 64,
     .dv = 64, .causal = 1, .lse = 1, .quick = 1},
    {.name = "gqa 8, causal, Lk == Lq", .b = 1, .hq = 8, .hkv = 1, .lq = 70, .lk = 70, .d = 64,
     .dv = 64, .causal = 1, .lse = 1},
    {.name = "window left 7", .b = 2, .hq = 2, .hkv = 2, .lq = 100, .lk = 100, .d = 32, .dv = 32,
     .window_left = 7},
    {.name = "causal + window left 16", .b = 1, .hq = 4, .hkv = 2, .lq = 90, .lk = 90, .d = 32,
     .dv = 32, .causal = 1, .window_left = 16, .lse = 1, .quick = 1},
    {.name = "window 5 left, 3 right", .b = 1, .hq = 2, .hkv = 1, .lq = 90, .lk = 90, .d = 32,
     .dv = 16, .window_left = 5, .window_right = 3},
    {.name = "window 10 left, 2 right, Lk > Lq", .b = 2, .hq = 2, .hkv = 2, .lq = 31, .lk = 100,
     .d = 32, .dv = 32, .window_left = 10, .window_right = 2, .lse = 1},
    {.name = "mask [Lq, Lk]", .b = 2, .hq = 4, .hkv = 4, .lq = 65, .lk = 65, .d = 32, .dv = 32,
     .mask_rank = 2, .mask_pattern = PAT_WINDOW_GLOBAL, .quick = 1},
    {.name = "Longformer mask [Lq, Lk]: window 32, 6 global tokens, gqa 2, Lq 1100", .b = 1, .hq = 4,
     .hkv = 2, .lq = 1100, .lk = 1100, .d = 64, .dv = 64, .mask_rank = 2, .mask_pattern = PAT_LONGFORMER,
     .lse = 1},
    {.name = "Longformer mask [B, Hq, Lq, Lk], causal, D 128, Lk > Lq", .b = 2, .hq = 2, .hkv = 2,
     .lq = 300, .lk = 513, .d = 128, .dv = 128, .causal = 1, .mask_rank = 4,
     .mask_pattern = PAT_LONGFORMER},
    {.name = "mask [Hq, Lq, Lk]", .b = 1, .hq = 4, .hkv = 2, .lq = 50, .lk = 70, .d = 32,
     .dv = 32, .mask_rank = 3, .mask_pattern = PAT_BLOCKS_UNALIGNED},
    {.name = "mask [B, Hq, Lq, Lk], Lq != Lk", .b = 2, .hq = 2, .hkv = 1, .lq = 40, .lk = 55,
     .d = 32, .dv = 32, .mask_rank = 4, .mask_pattern = PAT_FINE, .lse = 1},
    {.name = "mask [B, 1, Lq, Lk], masked rows", .b = 2, .hq = 4, .hkv = 4, .lq = 37, .lk = 37,
     .d = 32, .dv = 32, .mask_rank = 4, .mask_heads_shared = 1,
     .mask_pattern = PAT_MASKED_ROWS, .lse = 1, .quick = 1},
    {.name = "block mask 16x16", .b = 1, .hq = 4, .hkv = 4, .lq = 100, .lk = 130, .d = 32,
     .dv = 32, .block_q = 16, .block_k = 16, .block_rank = 2, .block_keep = 0.5},
    {.name = "block mask 7x13 [Hq]", .b = 1, .hq = 4, .hkv = 2, .lq = 50, .lk = 61, .d = 32,
     .dv = 32, .block_q = 7, .block_k = 13, .block_rank = 3, .block_keep = 0.5, .lse = 1},
    {.name = "block mask 5x9 [B, Hq] + mask + causal", .b = 2, .hq = 2, .hkv = 2, .lq = 45,
     .lk = 60, .d = 32, .dv = 32, .causal = 1, .mask_rank = 2,
     .mask_pattern = PAT_BLOCKS_UNALIGNED, .block_q = 5, .block_k = 9, .block_rank = 4,
     .block_keep = 0.7, .lse = 1, .quick = 1},
    {.name = "gqa 4, causal, window, mask, block mask, [B, L, H, D]", .b = 1, .hq = 8, .hkv = 2,
     .lq = 60, .lk = 96, .d = 64, .dv = 64, .causal = 1, .window_left = 24,
     .mask_rank = 3, .mask_pattern = PAT_FINE, .block_q = 16,
     .block_k = 8, .block_rank = 2, .block_keep = 0.6, .blhd = 1, .lse = 1, .quick = 1},
    {.name = "head dim 80", .b = 1, .hq = 2, .hkv = 2, .lq = 40, .lk = 40, .d = 80, .dv = 80},
    {.name = "head dim 128, causal", .b = 1, .hq = 2, .hkv = 1, .lq = 40, .lk = 48, .d = 128,
     .dv = 128, .causal = 1, .lse = 1},
    {.name = "Dv != D", .b = 1, .hq = 2, .hkv = 2, .lq = 33, .lk = 50, .d = 32, .dv = 20},
    {.name = "decode, gqa 8, block mask 64 [B, Hq]", .b = 2, .hq = 8, .hkv = 1, .lq = 1,
     .lk = 300, .d = 128, .dv = 128, .block_q = 64, .block_k = 64, .block_rank = 4,
     .block_keep = 0.4, .lse = 1, .quick = 1},
    {.name = "decode, Lq 4, gqa 4, block mask 4x64 [B, Hq]", .b = 2, .hq = 8, .hkv = 2, .lq = 4,
     .lk = 700, .d = 128, .dv = 128, .block_q = 4, .block_k = 64, .block_rank = 4,
     .block_keep = 0.3, .lse = 1, .quick = 1},
    {.name = "decode, Lq 3, causal, gqa 4, block mask 3x64, many key splits", .b = 2, .hq = 8,
     .hkv = 2, .lq = 3, .lk = 900, .d = 128, .dv = 128, .causal = 1, .block_q = 3, .block_k = 64,
     .block_rank = 4, .block_keep = 0.5, .lse = 1, .quick = 1},
    {.name = "decode, Lq 8, gqa 4 (32 rows), block mask 8x64", .b = 1, .hq = 4, .hkv = 1, .lq = 8,
     .lk = 333, .d = 64, .dv = 64, .block_q = 8, .block_k = 64, .block_rank = 3, .block_keep = 0.6,
     .lse = 1},
    {.name = "decode, block mask 1x128", .b = 1, .hq = 4, .hkv = 1, .lq = 1, .lk = 1000, .d = 64,
     .dv = 64, .block_q = 1, .block_k = 128, .block_rank = 3, .block_keep = 0.5},
    {.name = "head dim 128, block mask 128 [Hq], gqa 2", .b = 1, .hq = 4, .hkv = 2, .lq = 300,
     .lk = 400, .d = 128, .dv = 128, .block_q = 128, .block_k = 128, .block_rank = 3,
     .block_keep = 0.6, .lse = 1, .quick = 1},
    {.name = "element mask in 128x128 blocks, D 128, gqa 2, causal, Lk > Lq", .b = 1, .hq = 4, .hkv = 2,
     .lq = 300, .lk = 420, .d = 128, .dv = 128, .causal = 1, .mask_rank = 3, .mask_pattern = PAT_FINE,
     .block_q = 128, .block_k = 128, .block_rank = 3, .block_keep = 0.7, .lse = 1},
    {.name = "head dim 128, causal, Lq 333, Lk 400", .b = 1, .hq = 2, .hkv = 1, .lq = 333, .lk = 400,
     .d = 128, .dv = 128, .causal = 1, .lse = 1},
    {.name = "D 128, Dv 64, block mask 128", .b = 1, .hq = 2, .hkv = 1, .lq = 200, .lk = 260,
     .d = 128, .dv = 64, .block_q = 128, .block_k = 128, .block_rank = 2, .block_keep = 0.7},
    {.name = "D 64, Dv 128, causal", .b = 1, .hq = 2, .hkv = 2, .lq = 200, .lk = 200, .d = 64,
     .dv = 128, .causal = 1, .lse = 1},
    {.name = "gqa 4, causal, D 64, L 1000: more chunks than stages", .b = 1, .hq = 4, .hkv = 1, .lq = 1000,
     .lk = 1000, .d = 64, .dv = 64, .causal = 1, .lse = 1},
    {.name = "[B, L, H, D] views, gqa 4, causal, D 128, Lk > Lq", .b = 1, .hq = 8, .hkv = 2, .lq = 260,
     .lk = 390, .d = 128, .dv = 128, .causal = 1, .blhd = 1, .lse = 1},
    {.name = "decode, causal + window left 31", .b = 1, .hq = 4, .hkv = 1, .lq = 1, .lk = 257,
     .d = 64, .dv = 64, .causal = 1, .window_left = 31, .lse = 1},
    {.name = "causal, Lq > Lk: rows with no key", .b = 1, .hq = 2, .hkv = 2, .lq = 40, .lk = 25,
     .d = 32, .dv = 32, .causal = 1, .lse = 1, .quick = 1},
    {.name = "empty mask", .b = 1, .hq = 2, .hkv = 2, .lq = 20, .lk = 20, .d = 32, .dv = 32,
     .mask_rank = 2, .mask_pattern = PAT_EMPTY, .lse = 1},
    {.name = "no key (Lk = 0)", .b = 1, .hq = 2, .hkv = 1, .lq = 9, .lk = 0, .d = 32, .dv = 32,
     .lse = 1},
    {.name = "[B, L, H, D] views, gqa 2, causal", .b = 2, .hq = 4, .hkv = 2, .lq = 50, .lk = 50,
     .d = 32, .dv = 32, .causal = 1, .blhd = 1, .lse = 1},
    {.name = "micro-tile 16x1 (key columns)", .b = 1, .hq = 2, .hkv = 2, .lq = 40, .lk = 40,
     .d = 32, .dv = 32, .mask_rank = 2, .mask_pattern = PAT_FINE, .tile_rows = 16,
     .tile_cols = 1},
    {.name = "key columns: 160 global tokens (more than the heavy tiles hold), window 16, D 64",
     .b = 1, .hq = 2, .hkv = 1, .lq = 1500, .lk = 1500, .d = 64, .dv = 64, .mask_rank = 2,
     .mask_pattern = PAT_MANY_GLOBAL, .lse = 1},
    {.name = "key columns: 160 global tokens in 600 rows, D 128", .b = 1, .hq = 2, .hkv = 2, .lq = 600,
     .lk = 600, .d = 128, .dv = 128, .mask_rank = 2, .mask_pattern = PAT_MANY_GLOBAL, .lse = 1, .quick = 1},
    {.name = "key columns: Longformer [Hq, Lq, Lk], gqa 2, window left 40, D 128, Lk > Lq", .b = 1,
     .hq = 4, .hkv = 2, .lq = 700, .lk = 1001, .d = 128, .dv = 128, .window_left = 40, .mask_rank = 3,
     .mask_pattern = PAT_LONGFORMER, .lse = 1},
    {.name = "key columns hinted 64x1, mask [B, Hq, Lq, Lk], D 64", .b = 2, .hq = 2, .hkv = 2, .lq = 200,
     .lk = 333, .d = 64, .dv = 64, .mask_rank = 4, .mask_pattern = PAT_FINE, .tile_rows = 64,
     .tile_cols = 1, .quick = 1},
    {.name = "key columns: masked rows, Lq > Lk, causal, D 64", .b = 1, .hq = 2, .hkv = 2, .lq = 130,
     .lk = 90, .d = 64, .dv = 64, .causal = 1, .mask_rank = 2, .mask_pattern = PAT_MASKED_ROWS, .lse = 1},
    {.name = "key columns: all-on mask, gqa 4, D 128", .b = 1, .hq = 4, .hkv = 1, .lq = 100, .lk = 260,
     .d = 128, .dv = 128, .mask_rank = 2, .mask_pattern = PAT_DENSE, .lse = 1},
    {.name = "micro-tile 32x8", .b = 1, .hq = 2, .hkv = 2, .lq = 70, .lk = 70, .d = 32, .dv = 32,
     .mask_rank = 2, .mask_pattern = PAT_BLOCKS_ALIGNED, .tile_rows = 32, .tile_cols = 8},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* The options a case sets; a window of 0 in the table is none. */
static pit_attention_options case_options(const attn_case *c)
{
    pit_attention_options o = pit_attention_options_default();
    o.causal = c->causal;
    o.window_left = c->window_left != 0 ? c->window_left : -1;
    o.window_right = c->window_right != 0 ? c->window_right : -1;
    o.block_q = c->block_q;
    o.block_k = c->block_k;
    o.microtile = (pit_microtile){c->tile_rows, c->tile_cols, PIT_AXIS_AUTO};
    return o;
}

/* ---- tensors: a device view and its host copy (contiguous, logical order) ---- */

typedef struct abuf {
    pit_tensor *store; /* the [B, L, H, D] buffer a view lies in, or NULL */
    pit_tensor *t;
    double *h;
    size_t n;
} abuf;

static void abuf_free(abuf *x)
{
    pit_tensor_destroy(x->t);
    pit_tensor_destroy(x->store);
    free(x->h);
    memset(x, 0, sizeof *x);
}

static pit_status abuf_host(abuf *x, int rank, const int64_t *shape)
{
    x->n = 1;
    for (int i = 0; i < rank; i++)
        x->n *= (size_t)shape[i];
    x->h = calloc(x->n + 1, sizeof(double));
    return x->h ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
}

static pit_status abuf_make(pit_context *ctx, pit_dtype dt, int rank, const int64_t *shape,
                            abuf *x)
{
    memset(x, 0, sizeof *x);
    CONF_TRY(abuf_host(x, rank, shape));
    return pit_tensor_create(ctx, dt, rank, shape, &x->t);
}

/* [b, h, l, d] as a view of a [b, l, h, d] buffer when blhd, else contiguous. */
static pit_status abuf_heads(pit_context *ctx, pit_dtype dt, int64_t b, int64_t h, int64_t l,
                             int64_t d, int blhd, abuf *x)
{
    const int64_t shape[4] = {b, h, l, d};
    if (!blhd)
        return abuf_make(ctx, dt, 4, shape, x);
    memset(x, 0, sizeof *x);
    CONF_TRY(abuf_host(x, 4, shape));
    const int64_t store[4] = {b, l, h, d}, strides[4] = {l * h * d, d, h * d, 1};
    CONF_TRY(pit_tensor_create(ctx, dt, 4, store, &x->store));
    pit_tensor_desc desc;
    CONF_TRY(pit_tensor_get_desc(x->store, &desc));
    return pit_tensor_wrap(ctx, dt, 4, shape, strides, desc.data, desc.byte_offset, &x->t);
}

static pit_status abuf_random(abuf *x, pit_dtype dt, pit_rng *rng)
{
    pit_ref_fill_random(rng, x->h, x->n);
    conf_round(dt, x->h, x->n);
    return conf_upload(x->t, x->h, x->n);
}

/* ---- one case ------------------------------------------------------------------ */

typedef struct attn_bufs {
    abuf Q, K, V, O, mask, block, lse;
    pit_ref_attn ref;
    double *ref_o, *ref_lse;
} attn_bufs;

static void bufs_free(attn_bufs *a)
{
    abuf *all[] = {&a->Q, &a->K, &a->V, &a->O, &a->mask, &a->block, &a->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        abuf_free(all[i]);
    free(a->ref_o);
    free(a->ref_lse);
}

/* The shape of a mask of rank r over rows x cols: [rows, cols], [Hq, ..]
 * or [B, Hq or 1, ..]; its leading extents go to *lb, *lh. */
static int mask_shape(const attn_case *c, int rank, int heads_shared, int64_t rows,
                      int64_t cols, int64_t *shape, int64_t *lb, int64_t *lh)
{
    *lb = rank == 4 ? c->b : 1;
    *lh = rank >= 3 && !heads_shared ? c->hq : 1;
    int n = 0;
    if (rank == 4)
        shape[n++] = *lb;
    if (rank >= 3)
        shape[n++] = *lh;
    shape[n++] = rows;
    shape[n++] = cols;
    return n;
}

static pit_status make_mask(pit_context *ctx, const attn_case *c, pit_dtype mdt, pit_rng *rng,
                            attn_bufs *a)
{
    int64_t shape[4], lb, lh;
    int rank = mask_shape(c, c->mask_rank, c->mask_heads_shared, c->lq, c->lk, shape, &lb, &lh);
    CONF_TRY(abuf_make(ctx, mdt, rank, shape, &a->mask));
    conf_make_pattern(rng, c->mask_pattern, lb * lh, c->lq, c->lk, a->mask.h);
    pit_ref_encode_mask(mdt, a->mask.h, a->mask.n);
    a->ref.mask = a->mask.h;
    a->ref.mask_b = lb;
    a->ref.mask_h = lh;
    return conf_upload(a->mask.t, a->mask.h, a->mask.n);
}

static pit_status make_block_mask(pit_context *ctx, const attn_case *c, pit_rng *rng,
                                  attn_bufs *a)
{
    int64_t shape[4], lb, lh;
    const int64_t nq = (c->lq + c->block_q - 1) / c->block_q;
    const int64_t nk = (c->lk + c->block_k - 1) / c->block_k;
    int rank = mask_shape(c, c->block_rank, 0, nq, nk, shape, &lb, &lh);
    CONF_TRY(abuf_make(ctx, PIT_U8, rank, shape, &a->block));
    for (size_t i = 0; i < a->block.n; i++)
        a->block.h[i] = 1.0;
    pit_ref_sparsify_tiles(rng, a->block.h, lb * lh, nq, nk, 1, 1, 0, 0, 1.0 - c->block_keep);
    a->ref.block_mask = a->block.h;
    a->ref.block_b = lb;
    a->ref.block_h = lh;
    a->ref.block_q = c->block_q;
    a->ref.block_k = c->block_k;
    return conf_upload(a->block.t, a->block.h, a->block.n);
}

static pit_status make_case(pit_context *ctx, const attn_case *c, pit_dtype dt, pit_dtype mdt,
                            pit_rng *rng, attn_bufs *a)
{
    memset(a, 0, sizeof *a);
    const pit_attention_options o = case_options(c);
    a->ref = (pit_ref_attn){.b = c->b, .hq = c->hq, .hkv = c->hkv, .lq = c->lq, .lk = c->lk,
                            .d = c->d, .dv = c->dv, .causal = c->causal,
                            .window_left = o.window_left, .window_right = o.window_right,
                            .scale = (double)(1.0f / sqrtf((float)c->d))};
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hq, c->lq, c->d, c->blhd, &a->Q));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hkv, c->lk, c->d, c->blhd, &a->K));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hkv, c->lk, c->dv, c->blhd, &a->V));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hq, c->lq, c->dv, c->blhd, &a->O));
    CONF_TRY(abuf_random(&a->Q, dt, rng));
    CONF_TRY(abuf_random(&a->K, dt, rng));
    CONF_TRY(abuf_random(&a->V, dt, rng));
    if (c->mask_rank)
        CONF_TRY(make_mask(ctx, c, mdt, rng, a));
    if (c->block_q)
        CONF_TRY(make_block_mask(ctx, c, rng, a));
    if (c->lse) {
        const int64_t shape[3] = {c->b, c->hq, c->lq};
        CONF_TRY(abuf_make(ctx, PIT_F32, 3, shape, &a->lse));
    }
    a->ref_o = calloc(a->O.n + 1, sizeof(double));
    a->ref_lse = calloc((size_t)(c->b * c->hq * c->lq) + 1, sizeof(double));
    if (!a->ref_o || !a->ref_lse)
        return PIT_ERR_OUT_OF_MEMORY;
    pit_ref_attention_full(&a->ref, a->Q.h, a->K.h, a->V.h, a->ref_o, a->ref_lse);
    return PIT_SUCCESS;
}

/* lse is f32 whatever the data: scores in f32 from the rounded inputs. */
static double lse_tolerance(pit_dtype dt)
{
    return pit_ref_tolerance(dt) / 10.0;
}


/* A refusal by a backend that has attention_ex and attention_backward
 * (every one of this tree) fails; by another it is a skip, printed with
 * the case's name. */
static int takes_every_option(const char *backend)
{
    return !strcmp(backend, "opencl") || !strcmp(backend, "cuda") || !strcmp(backend, "hip");
}

static void refused(conf_tally *t, const char *backend, const char *what, pit_status s)
{
    if (s != PIT_ERR_UNSUPPORTED || takes_every_option(backend)) {
        conf_call_failed(t, what, s);
        return;
    }
    t->skipped++;
    printf("    skip %s: %s\n", what, pit_last_error());
    const char *reason = "pit_attention options the backend refuses (each printed)";
    if (!strstr(t->skip_reason, reason)) {
        size_t len = strlen(t->skip_reason);
        snprintf(t->skip_reason + len, sizeof t->skip_reason - len, "%s%s", len ? "; " : "",
                 reason);
    }
}

/* ---- the backward, on the forward's O and lse ------------------------------------ */

typedef struct grad_bufs {
    abuf dO, dQ, dK, dV;
    double *ref[3];
} grad_bufs;

static void grads_free(grad_bufs *g)
{
    abuf *all[] = {&g->dO, &g->dQ, &g->dK, &g->dV};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        abuf_free(all[i]);
    for (int i = 0; i < 3; i++)
        free(g->ref[i]);
}

/* dO random, dQ, dK, dV poisoned, laid out as the case's Q, K, V. */
static pit_status make_grads(pit_context *ctx, const attn_case *c, pit_dtype dt, pit_rng *rng,
                             grad_bufs *g)
{
    memset(g, 0, sizeof *g);
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hq, c->lq, c->dv, c->blhd, &g->dO));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hq, c->lq, c->d, c->blhd, &g->dQ));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hkv, c->lk, c->d, c->blhd, &g->dK));
    CONF_TRY(abuf_heads(ctx, dt, c->b, c->hkv, c->lk, c->dv, c->blhd, &g->dV));
    CONF_TRY(abuf_random(&g->dO, dt, rng));
    abuf *out[3] = {&g->dQ, &g->dK, &g->dV};
    for (int i = 0; i < 3; i++) {
        g->ref[i] = calloc(out[i]->n + 1, sizeof(double));
        if (!g->ref[i])
            return PIT_ERR_OUT_OF_MEMORY;
        CONF_TRY(conf_poison(out[i]->t, out[i]->n));
    }
    return PIT_SUCCESS;
}

/* The backward of a forward case that wrote O and lse: dQ, dK and dV against
 * the reference (recomputed in double from Q, K, V and dO). */
static void backward_case(pit_context *ctx, const conf_opts *o, conf_tally *t,
                          const char *backend, const attn_case *c, pit_dtype dt,
                          const attn_bufs *a, const pit_attention_options *opt,
                          const char *what, pit_rng *rng)
{
    char bw[280];
    snprintf(bw, sizeof bw, "%s backward", what);
    grad_bufs g;
    pit_status s = make_grads(ctx, c, dt, rng, &g);
    if (s == PIT_SUCCESS)
        s = pit_attention_backward(ctx, NULL, a->Q.t, a->K.t, a->V.t, a->O.t, g.dO.t, a->lse.t,
                                   opt, g.dQ.t, g.dK.t, g.dV.t);
    if (s == PIT_SUCCESS) {
        pit_ref_attention_backward(&a->ref, a->Q.h, a->K.h, a->V.h, g.dO.h, g.ref[0], g.ref[1],
                                   g.ref[2]);
        abuf *out[3] = {&g.dQ, &g.dK, &g.dV};
        const char *names[3] = {"dQ", "dK", "dV"};
        for (int i = 0; i < 3; i++) {
            char gw[300];
            snprintf(gw, sizeof gw, "%s %s", bw, names[i]);
            conf_compare_tensor(t, o, gw, out[i]->t, out[i]->h, g.ref[i], out[i]->n,
                         pit_ref_tolerance(dt));
        }
    } else if (g.ref[2]) {
        refused(t, backend, bw, s);
    } else {
        conf_call_failed(t, bw, s);
    }
    grads_free(&g);
}

static void run_case(pit_context *ctx, const conf_opts *o, conf_tally *t, const char *backend,
                     const attn_case *c, pit_dtype dt, pit_dtype mdt, pit_rng *rng)
{
    char what[240];
    snprintf(what, sizeof what, "pit_attention %s %s B%lld Hq%lld Hkv%lld Lq%lld Lk%lld D%lld "
             "Dv%lld%s%s", pit_dtype_name(dt), c->name, (long long)c->b, (long long)c->hq,
             (long long)c->hkv, (long long)c->lq, (long long)c->lk, (long long)c->d,
             (long long)c->dv, c->mask_rank ? " mask " : "",
             c->mask_rank ? pit_dtype_name(mdt) : "");
    attn_bufs a;
    pit_status s = make_case(ctx, c, dt, mdt, rng, &a);
    if (s == PIT_SUCCESS)
        s = conf_poison(a.O.t, a.O.n);
    if (s == PIT_SUCCESS && c->lse)
        s = conf_poison(a.lse.t, a.lse.n);
    if (s != PIT_SUCCESS) {
        conf_call_failed(t, what, s);
        bufs_free(&a);
        return;
    }
    pit_attention_options opt = case_options(c);
    opt.mask = a.mask.t;
    opt.block_mask = a.block.t;
    s = pit_attention(ctx, NULL, a.Q.t, a.K.t, a.V.t, a.O.t, &opt, c->lse ? a.lse.t : NULL, NULL);
    if (s != PIT_SUCCESS) {
        refused(t, backend, what, s);
    } else {
        conf_compare_tensor(t, o, what, a.O.t, a.O.h, a.ref_o, a.O.n, pit_ref_tolerance(dt));
        if (c->lse) {
            char lw[260];
            snprintf(lw, sizeof lw, "%s lse", what);
            conf_compare_tensor(t, o, lw, a.lse.t, a.lse.h, a.ref_lse, a.lse.n, lse_tolerance(dt));
            backward_case(ctx, o, t, backend, c, dt, &a, &opt, what, rng);
        }
    }
    bufs_free(&a);
}

/* pit_attention with the dtype the device lacks (the kit's) must be refused. */
static pit_status attention_probe(pit_context *c, const conf_probe_kit *k)
{
    pit_tensor_desc kd;
    pit_status s = pit_tensor_get_desc(k->m[0], &kd);
    pit_tensor *x = NULL;
    const int64_t shape[4] = {1, 1, 2, 2};
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(c, kd.dtype, 4, shape, &x);
    if (s == PIT_SUCCESS)
        s = pit_attention(c, NULL, x, x, x, x, NULL, NULL, NULL);
    pit_tensor_destroy(x);
    return s;
}

/* f32, u8 (a bool mask), the data's own dtype and i32 in turn */
static pit_dtype mask_dtype(pit_dtype dt, int i)
{
    return i % 4 == 0 ? PIT_F32 : i % 4 == 1 ? PIT_U8 : i % 4 == 2 ? dt : PIT_I32;
}

void conf_attention(pit_context *ctx, const conf_opts *o, conf_tally *t)
{
    conf_sparse_attention(ctx, o, t);
    static const pit_dtype dtypes[3] = {PIT_F32, PIT_F16, PIT_BF16};
    pit_device_info info;
    pit_context_get_info(ctx, &info);
    pit_rng rng;
    pit_rng_seed(&rng, o->seed + 11);
    int ncases = 0;
    for (int i = 0; i < NCASES; i++)
        ncases += !o->quick || cases[i].quick;
    for (int d = 0; d < 3; d++) {
        if (!conf_dtype_supported(ctx, dtypes[d], t, ncases, "pit_attention",
                                  attention_probe))
            continue;
        for (int i = 0; i < NCASES; i++)
            if (!o->quick || cases[i].quick)
                run_case(ctx, o, t, info.backend, &cases[i], dtypes[d], mask_dtype(dtypes[d], i),
                         &rng);
    }
}
