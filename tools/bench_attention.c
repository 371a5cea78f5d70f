/*
 * tools/bench_attention.c - `pit bench --suite attention`: pit_attention on
 * the masks real models make, each mask new every call (input sets
 * rotated), timed without a report (the call a framework makes), against
 * its floor:
 *   window   a sliding window of 256 keys with 16 global tokens (they see,
 *            and are seen by, every token) at positions new every call: an
 *            element mask [L, L], u8, shared by the heads (Longformer)
 *   blocks   a random 128 x 128 block mask keeping 10% per head (block_mask)
 *   causal   causal prefill with grouped-query heads, no mask tensor
 *   decode   a few queries over a long KV cache, a block mask keeping 10% of
 *            the 64-key blocks of each KV head (its query heads share it)
 * The floor: the mask bytes the call reads at the run's copy bandwidth plus
 * 4 D FLOPs an allowed (query, key) pair at FlashAttention-3's published
 * dense rate on the H100 (497 TFLOP/s at D = 64, 648 at D = 128); for
 * decode the kept K and V bytes (and the mask's) at the copy bandwidth. No
 * published rate for another device or head dim: the floor is then the
 * bytes alone for decode, "-" for the others. PyTorch's SDPA and
 * FlexAttention at the same points: scripts/torch_anchors.py.
 * Each point's output (input set 0) is checked on sampled query rows
 * against the reference in double (pit_ref_attention_query).
 * At the window (an element mask) the same call with the mask indexed in
 * 64x64 blocks (the micro-tile hint), against the automatic choice.
 * The backward (window, blocks and causal): pit_attention_backward from a
 * random dO, set 0's O and lse and its mask, every gradient (dQ, dK, dV),
 * timed beside the forward; its results are checked by the conformance
 * suite (attention), not here.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

#define MAX_SETS 4
#define CHECK_ROWS 8
#define WINDOW_HALF 128 /* keys i - 128 .. i + 128: a window of 256 around the query */
#define GLOBAL_TOKENS 16
#define KEEP 0.1 /* blocks a block mask keeps */

typedef enum { ATT_WINDOW, ATT_BLOCKS, ATT_CAUSAL, ATT_DECODE } att_kind;
const char *const bench_attention_kinds[BENCH_ATTENTION_KINDS] = {"window", "blocks", "causal", "decode"};

int bench_attention_has_kind(const char *name)
{
    return tool_find_name(name, bench_attention_kinds, BENCH_ATTENTION_KINDS) >= 0;
}

typedef struct att_point {
    att_kind kind;
    int64_t b, hq, hkv, lq, lk, d;
    int block;  /* the block mask's key block (blocks: its query block too) */
    int target; /* 1: a point the targets name, 0: the spread around them */
} att_point;

/* Targets first, then shapes of other models around them. */
static const att_point points[] = {
    {ATT_WINDOW, 1, 16, 16, 8192, 8192, 64, 0, 1},
    {ATT_WINDOW, 1, 32, 32, 4096, 4096, 128, 0, 0},
    {ATT_BLOCKS, 1, 32, 32, 4096, 4096, 128, 128, 1},
    {ATT_BLOCKS, 1, 16, 16, 8192, 8192, 64, 128, 0},
    {ATT_BLOCKS, 1, 32, 8, 8192, 8192, 128, 128, 0},
    {ATT_CAUSAL, 1, 32, 8, 8192, 8192, 128, 0, 1},
    {ATT_CAUSAL, 2, 32, 8, 4096, 4096, 128, 0, 0},
    {ATT_CAUSAL, 4, 32, 8, 2048, 2048, 128, 0, 0},
    {ATT_CAUSAL, 1, 28, 4, 16384, 16384, 128, 0, 0},
    {ATT_CAUSAL, 1, 16, 16, 8192, 8192, 64, 0, 0},
    {ATT_DECODE, 8, 32, 8, 1, 32768, 128, 64, 1},
    {ATT_DECODE, 8, 32, 8, 4, 32768, 128, 64, 1},
    {ATT_DECODE, 32, 32, 8, 1, 8192, 128, 64, 0},
    {ATT_DECODE, 4, 64, 8, 1, 65536, 128, 64, 0},
};
#define NPOINTS ((int)(sizeof points / sizeof points[0]))

/* --quick: the same kinds at sizes a CPU device runs in seconds (lengths
 * 1/32, heads 1/8, batches at most 2; the window and blocks as at full
 * size but for blocks of 32). */
static att_point scaled(const att_point *p, int quick)
{
    att_point q = *p;
    if (!quick)
        return q;
    q.b = p->b < 2 ? p->b : 2;
    q.hkv = p->hkv / 8 > 0 ? p->hkv / 8 : 1;
    q.hq = q.hkv * (p->hq / p->hkv);
    q.lk = p->lk / 32;
    q.lq = p->kind == ATT_DECODE ? p->lq : p->lq / 32;
    if (p->kind == ATT_BLOCKS)
        q.block = 32;
    return q;
}

typedef struct att_run {
    pit_context *ctx;
    pit_dtype dt;
    att_point p;
    int sets;
    pit_tensor *Q, *K, *V, *O, *mask[MAX_SETS];
    pit_tensor *lse, *dO, *dQ, *dK, *dV; /* the backward's (not decode) */
    void *hq, *hk, *hv; /* the host's copies (storage dtype), for the check */
    uint8_t *mask0;     /* set 0's mask, for the check */
    int64_t mask_elems;
    pit_attention_options opt;
    double pairs, mask_bytes, kv_bytes; /* set 0's allowed pairs; bytes a call must read */
} att_run;

typedef struct att_result {
    att_point p;
    pit_dtype dt;
    double allowed; /* allowed pairs / all pairs */
    double pit_ms, pit_spread, floor_ms, tflops, err;
    double bwd_ms, bwd_spread; /* the backward; 0: not run (decode, or no backward here) */
    double blocks_ms;          /* window: the mask in 64x64 blocks (hinted); 0: not run */
    int ok;
    char choice[96];
    char error[256];
} att_result;

/* The options of input set i: its mask as the element or block mask. */
static void use_set(att_run *r, int i)
{
    pit_tensor *m = r->mask[i % r->sets];
    if (r->p.kind == ATT_WINDOW)
        r->opt.mask = m;
    else if (r->p.kind != ATT_CAUSAL)
        r->opt.block_mask = m;
}

static pit_status run_pit(void *arg, int i)
{
    att_run *r = arg;
    use_set(r, i);
    return pit_attention(r->ctx, NULL, r->Q, r->K, r->V, r->O, &r->opt, NULL, NULL);
}

/* the backward of set 0's forward (its O and lse) */
static pit_status run_backward(void *arg, int i)
{
    att_run *r = arg;
    (void)i;
    return pit_attention_backward(r->ctx, NULL, r->Q, r->K, r->V, r->O, r->dO, r->lse, &r->opt, r->dQ, r->dK,
                                  r->dV);
}

/* A tensor of random non-zero values, made a slab at a time (a decode KV
 * cache holds hundreds of millions of elements); *host keeps its bytes. */
static pit_status random_tensor(pit_context *ctx, pit_dtype dt, const int64_t shape[4], pit_rng *rng,
                                pit_tensor **t, void **host)
{
    enum { SLAB = 1 << 16 };
    const size_t n = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]), es = pit_dtype_size(dt);
    char *buf = malloc(n * es);
    double *slab = malloc(SLAB * sizeof(double));
    pit_status s = buf && slab ? pit_tensor_create(ctx, dt, 4, shape, t) : PIT_ERR_OUT_OF_MEMORY;
    for (size_t at = 0; at < n && s == PIT_SUCCESS; at += SLAB) {
        size_t cnt = n - at < SLAB ? n - at : SLAB;
        pit_ref_fill_random(rng, slab, cnt);
        pit_ref_from_double(dt, slab, cnt, buf + at * es);
    }
    if (s == PIT_SUCCESS)
        s = pit_tensor_upload(*t, NULL, buf, n * es);
    free(slab);
    if (s != PIT_SUCCESS) {
        free(buf);
        buf = NULL;
    }
    *host = buf;
    return s;
}

/* k distinct positions of 0..n-1 (k <= n), in any order. */
static void pick_distinct(pit_rng *rng, int64_t n, int64_t k, int64_t *out)
{
    for (int64_t i = 0; i < k; i++) {
        int64_t x, seen;
        do {
            x = (int64_t)(pit_rng_next(rng) % (uint64_t)n);
            seen = 0;
            for (int64_t j = 0; j < i && !seen; j++)
                seen = out[j] == x;
        } while (seen);
        out[i] = x;
    }
}

/* The window mask with global tokens; returns its allowed pairs. */
static double window_mask(pit_rng *rng, int64_t l, uint8_t *m)
{
    int64_t g[GLOBAL_TOKENS], ng = l < GLOBAL_TOKENS ? l : GLOBAL_TOKENS;
    pick_distinct(rng, l, ng, g);
    double pairs = 0;
    for (int64_t i = 0; i < l; i++) {
        uint8_t *row = m + i * l;
        int64_t lo = i - WINDOW_HALF > 0 ? i - WINDOW_HALF : 0, hi = i + WINDOW_HALF < l ? i + WINDOW_HALF : l - 1;
        memset(row, 0, (size_t)l);
        memset(row + lo, 1, (size_t)(hi - lo + 1));
        for (int64_t k = 0; k < ng; k++)
            row[g[k]] = 1;
    }
    for (int64_t k = 0; k < ng; k++)
        memset(m + g[k] * l, 1, (size_t)l);
    for (int64_t i = 0; i < l * l; i++)
        pairs += m[i];
    return pairs;
}

/* A block mask keeping round(KEEP n) of each row's n blocks (at least
 * one), rows rows of it. Without host memory for the picks it keeps none:
 * the pairs are counted from the mask, so the point stays consistent. */
static void keep_blocks(pit_rng *rng, int64_t rows, int64_t n, uint8_t *m)
{
    int64_t keep = (int64_t)llround(KEEP * (double)n), *pick = malloc((size_t)n * sizeof *pick);
    keep = keep < 1 ? 1 : keep;
    memset(m, 0, (size_t)(rows * n));
    for (int64_t r = 0; r < rows && pick; r++) {
        pick_distinct(rng, n, keep, pick);
        for (int64_t k = 0; k < keep; k++)
            m[r * n + pick[k]] = 1;
    }
    free(pick);
}

/* Keys of block kb of a length-l axis cut into blocks of bk. */
static double block_keys(int64_t kb, int64_t bk, int64_t l)
{
    return (double)((kb + 1) * bk < l ? bk : l - kb * bk);
}

/* Set s's mask into host memory m (r->mask_elems bytes); returns the
 * allowed pairs of the call and sets the bytes a call must read. */
static double make_mask(att_run *r, pit_rng *rng, uint8_t *m)
{
    const att_point *p = &r->p;
    const int64_t es = (int64_t)pit_dtype_size(r->dt), group = p->hq / p->hkv;
    if (p->kind == ATT_WINDOW) {
        r->mask_bytes = (double)r->mask_elems;
        return window_mask(rng, p->lk, m) * (double)(p->b * p->hq);
    }
    const int64_t nk = (p->lk + p->block - 1) / p->block;
    if (p->kind == ATT_BLOCKS) {
        const int64_t nq = (p->lq + p->block - 1) / p->block;
        keep_blocks(rng, p->hq * nq, nk, m);
        double pairs = 0;
        for (int64_t h = 0; h < p->hq; h++)
            for (int64_t qb = 0; qb < nq; qb++)
                for (int64_t kb = 0; kb < nk; kb++)
                    pairs += m[(h * nq + qb) * nk + kb] ? block_keys(qb, p->block, p->lq) *
                                                              block_keys(kb, p->block, p->lk)
                                                        : 0;
        r->mask_bytes = (double)r->mask_elems;
        return pairs * (double)p->b;
    }
    /* decode: one query block; the KV heads' rows, copied to their query heads */
    double pairs = 0, kept_keys = 0;
    for (int64_t b = 0; b < p->b; b++)
        for (int64_t kh = 0; kh < p->hkv; kh++) {
            uint8_t *first = m + (b * p->hq + kh * group) * nk;
            keep_blocks(rng, 1, nk, first);
            for (int64_t g = 1; g < group; g++)
                memcpy(first + g * nk, first, (size_t)nk);
            for (int64_t kb = 0; kb < nk; kb++)
                kept_keys += first[kb] ? block_keys(kb, p->block, p->lk) : 0;
        }
    pairs = kept_keys * (double)(group * p->lq);
    r->mask_bytes = (double)r->mask_elems;
    r->kv_bytes = kept_keys * (double)(2 * p->d * es);
    return pairs;
}

static pit_status make_masks(att_run *r, pit_rng *rng, double *pairs)
{
    const att_point *p = &r->p;
    *pairs = 0;
    if (p->kind == ATT_CAUSAL) { /* key j <= i + lk - lq for query i */
        for (int64_t i = 0; i < p->lq; i++) {
            int64_t keys = i + p->lk - p->lq + 1;
            *pairs += (double)(keys < 0 ? 0 : keys > p->lk ? p->lk : keys);
        }
        *pairs *= (double)(p->b * p->hq);
        r->mask_bytes = 0;
        return PIT_SUCCESS;
    }
    int64_t shape[4];
    int rank;
    if (p->kind == ATT_WINDOW) {
        rank = 2, shape[0] = p->lq, shape[1] = p->lk;
    } else if (p->kind == ATT_BLOCKS) {
        rank = 3, shape[0] = p->hq, shape[1] = (p->lq + p->block - 1) / p->block,
        shape[2] = (p->lk + p->block - 1) / p->block;
        r->opt.block_q = r->opt.block_k = p->block;
    } else {
        rank = 4, shape[0] = p->b, shape[1] = p->hq, shape[2] = 1, shape[3] = (p->lk + p->block - 1) / p->block;
        r->opt.block_q = (int32_t)p->lq, r->opt.block_k = p->block;
    }
    r->mask_elems = 1;
    for (int i = 0; i < rank; i++)
        r->mask_elems *= shape[i];
    uint8_t *m = malloc((size_t)r->mask_elems);
    r->mask0 = malloc((size_t)r->mask_elems);
    pit_status s = m && r->mask0 ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
    for (int set = 0; set < r->sets && s == PIT_SUCCESS; set++) {
        uint8_t *h = set == 0 ? r->mask0 : m;
        double pr = make_mask(r, rng, h);
        if (set == 0)
            *pairs = pr;
        s = pit_tensor_create(r->ctx, PIT_U8, rank, shape, &r->mask[set]);
        if (s == PIT_SUCCESS)
            s = pit_tensor_upload(r->mask[set], NULL, h, (size_t)r->mask_elems);
    }
    free(m);
    return s;
}

/* Query row i of batch b, head h allowed key j (set 0's mask). */
static int allowed(const att_run *r, const pit_ref_attn *bounds, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const att_point *p = &r->p;
    if (!pit_ref_attention_allowed(bounds, b, h, i, j))
        return 0;
    if (p->kind == ATT_WINDOW)
        return r->mask0[i * p->lk + j] != 0;
    if (p->kind == ATT_CAUSAL) /* no mask: the bound alone (no block either) */
        return 1;
    const int64_t nk = (p->lk + p->block - 1) / p->block;
    if (p->kind == ATT_BLOCKS) {
        const int64_t nq = (p->lq + p->block - 1) / p->block;
        return r->mask0[(h * nq + i / p->block) * nk + j / p->block] != 0;
    }
    return r->mask0[(b * p->hq + h) * nk + j / p->block] != 0;
}

/* Rows of the kv head's K or V (storage dtype) as doubles. */
static void head_rows(const void *host, pit_dtype dt, int64_t head, int64_t rows, int64_t cols, double *out)
{
    const size_t es = pit_dtype_size(dt);
    pit_ref_to_double(dt, (const char *)host + (size_t)(head * rows * cols) * es, (size_t)(rows * cols), out);
}

/* Relative error of CHECK_ROWS sampled query rows of O (set 0). */
static pit_status check_rows(att_run *r, double *err)
{
    const att_point *p = &r->p;
    const size_t es = pit_dtype_size(r->dt), no = (size_t)(p->b * p->hq * p->lq * p->d);
    pit_ref_attn bounds = {.b = p->b, .hq = p->hq, .hkv = p->hkv, .lq = p->lq, .lk = p->lk, .d = p->d,
                           .dv = p->d, .scale = 1.0 / sqrt((double)p->d), .causal = p->kind == ATT_CAUSAL,
                           .window_left = -1, .window_right = -1};
    char *o_host = malloc(no * es), *on = malloc((size_t)p->lk);
    double *K = malloc((size_t)(p->lk * p->d) * sizeof(double)), *V = malloc((size_t)(p->lk * p->d) * sizeof(double));
    double *scratch = malloc((size_t)(2 * p->lk) * sizeof(double)), *q = malloc((size_t)p->d * sizeof(double));
    double *ref = malloc((size_t)(CHECK_ROWS * p->d) * sizeof(double));
    double *got = malloc((size_t)(CHECK_ROWS * p->d) * sizeof(double));
    pit_status s = bench_host_ok(o_host && on && K && V && scratch && q && ref && got);
    if (s == PIT_SUCCESS)
        s = pit_tensor_download(r->O, NULL, o_host, no * es);
    for (int k = 0; k < CHECK_ROWS && s == PIT_SUCCESS; k++) {
        /* rows spread over batches, heads and positions; the last one last */
        int64_t b = k % p->b, h = (int64_t)k * 5 % p->hq;
        int64_t i = k == CHECK_ROWS - 1 ? p->lq - 1 : (int64_t)k * p->lq / CHECK_ROWS;
        int64_t qh = b * p->hq + h, kh = b * p->hkv + h / (p->hq / p->hkv);
        for (int64_t j = 0; j < p->lk; j++)
            on[j] = (char)allowed(r, &bounds, b, h, i, j);
        pit_ref_to_double(r->dt, (const char *)r->hq + (size_t)((qh * p->lq + i) * p->d) * es, (size_t)p->d, q);
        head_rows(r->hk, r->dt, kh, p->lk, p->d, K);
        head_rows(r->hv, r->dt, kh, p->lk, p->d, V);
        pit_ref_attention_query(&bounds, q, K, V, on, scratch, ref + k * p->d, NULL);
        pit_ref_to_double(r->dt, o_host + (size_t)((qh * p->lq + i) * p->d) * es, (size_t)p->d, got + k * p->d);
    }
    if (s == PIT_SUCCESS)
        *err = pit_ref_rel_error(ref, got, (size_t)(CHECK_ROWS * p->d));
    free(o_host), free(on), free(K), free(V), free(scratch), free(q), free(ref), free(got);
    return s;
}

/* FlashAttention-3's published dense rate on the H100, TFLOP/s; 0: none. */
static double published_rate(const pit_device_info *d, int64_t head_dim)
{
    if (strcmp(d->backend, "cuda") || strcmp(d->arch, "sm_90"))
        return 0;
    return head_dim == 64 ? 497 : head_dim == 128 ? 648 : 0;
}

static void free_run(att_run *r)
{
    pit_tensor_destroy(r->Q), pit_tensor_destroy(r->K), pit_tensor_destroy(r->V), pit_tensor_destroy(r->O);
    for (int s = 0; s < MAX_SETS; s++)
        pit_tensor_destroy(r->mask[s]);
    pit_tensor_destroy(r->lse), pit_tensor_destroy(r->dO), pit_tensor_destroy(r->dQ), pit_tensor_destroy(r->dK);
    pit_tensor_destroy(r->dV);
    free(r->hq), free(r->hk), free(r->hv), free(r->mask0);
}

/* The backward's time (res->bwd_ms), where the backend has one: the
 * forward of set 0 with lse first. */
static pit_status measure_backward(const bench_opts *o, att_run *r, att_result *res)
{
    const att_point *p = &r->p;
    const int64_t ls[3] = {p->b, p->hq, p->lq}, qs[4] = {p->b, p->hq, p->lq, p->d},
                  ks[4] = {p->b, p->hkv, p->lk, p->d};
    void *host = NULL;
    pit_rng rng;
    pit_rng_seed(&rng, 77);
    pit_status s = pit_tensor_create(r->ctx, PIT_F32, 3, ls, &r->lse);
    if (s == PIT_SUCCESS)
        s = random_tensor(r->ctx, r->dt, qs, &rng, &r->dO, &host);
    free(host);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(r->ctx, r->dt, 4, qs, &r->dQ);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(r->ctx, r->dt, 4, ks, &r->dK);
    if (s == PIT_SUCCESS)
        s = pit_tensor_create(r->ctx, r->dt, 4, ks, &r->dV);
    use_set(r, 0);
    if (s == PIT_SUCCESS)
        s = pit_attention(r->ctx, NULL, r->Q, r->K, r->V, r->O, &r->opt, r->lse, NULL);
    if (s == PIT_SUCCESS)
        s = run_backward(r, 0);
    if (s == PIT_ERR_UNSUPPORTED) /* a backend without the backward: the column says so */
        return PIT_SUCCESS;
    if (s == PIT_SUCCESS)
        s = bench_time(r->ctx, o, run_backward, r, &res->bwd_ms, &res->bwd_spread);
    return s;
}

static pit_status measure_point(pit_context *ctx, const bench_opts *o, const pit_device_info *d, pit_dtype dt,
                                const att_point *p, double gbps, pit_rng *rng, att_result *res)
{
    att_run r = {.ctx = ctx, .dt = dt, .p = *p, .sets = o->sets < MAX_SETS ? o->sets : MAX_SETS};
    memset(res, 0, sizeof *res);
    res->p = *p, res->dt = dt;
    r.opt = pit_attention_options_default();
    r.opt.causal = p->kind == ATT_CAUSAL;
    pit_status st = PIT_SUCCESS;
    const int64_t qs[4] = {p->b, p->hq, p->lq, p->d}, ks[4] = {p->b, p->hkv, p->lk, p->d};
    double pairs = 0;
#define TRY(call) BENCH_TRY(res->error, call)
    TRY(random_tensor(ctx, dt, qs, rng, &r.Q, &r.hq));
    TRY(random_tensor(ctx, dt, ks, rng, &r.K, &r.hk));
    TRY(random_tensor(ctx, dt, ks, rng, &r.V, &r.hv));
    TRY(pit_tensor_create(ctx, dt, 4, qs, &r.O));
    TRY(make_masks(&r, rng, &pairs));
    res->allowed = pairs / ((double)(p->b * p->hq) * (double)p->lq * (double)p->lk);

    /* once with a report (its choice), then the check on set 0 */
    pit_report rep;
    use_set(&r, 0);
    TRY(pit_attention(ctx, NULL, r.Q, r.K, r.V, r.O, &r.opt, NULL, &rep));
    snprintf(res->choice, sizeof res->choice, "%s", rep.choice);
    TRY(check_rows(&r, &res->err));
    res->ok = res->err <= pit_ref_tolerance(dt);
    TRY(bench_time(ctx, o, run_pit, &r, &res->pit_ms, &res->pit_spread));
    if (p->kind == ATT_WINDOW) { /* the element mask in square blocks, beside the automatic choice */
        double spread;
        const pit_microtile automatic = r.opt.microtile;
        r.opt.microtile = (pit_microtile){64, 64, PIT_AXIS_K};
        TRY(bench_time(ctx, o, run_pit, &r, &res->blocks_ms, &spread));
        r.opt.microtile = automatic;
    }
    if (p->kind != ATT_DECODE)
        TRY(measure_backward(o, &r, res));

    const double flops = 4.0 * (double)p->d * pairs, rate = published_rate(d, p->d);
    const double bytes = r.mask_bytes + r.kv_bytes, byte_ms = gbps > 0 ? bytes / (gbps * 1e9) * 1e3 : -1;
    if (p->kind == ATT_DECODE)
        res->floor_ms = byte_ms;
    else
        res->floor_ms = rate > 0 && byte_ms >= 0 ? byte_ms + flops / (rate * 1e12) * 1e3 : -1;
    res->tflops = res->pit_ms > 0 ? flops / (res->pit_ms * 1e-3) / 1e12 : 0;
#undef TRY
done:
    free_run(&r);
    return st;
}

static void print_row(const void *result)
{
    const att_result *r = result;
    char floor[16] = "-", ratio[16] = "-";
    if (r->floor_ms > 0) {
        snprintf(floor, sizeof floor, "%.4f", r->floor_ms);
        snprintf(ratio, sizeof ratio, "%.2fx", r->pit_ms / r->floor_ms);
    }
    char bwd[16] = "-", bwd_ratio[16] = "-", blocks[16] = "-";
    if (r->blocks_ms > 0)
        snprintf(blocks, sizeof blocks, "%.4f", r->blocks_ms);
    if (r->bwd_ms > 0) {
        snprintf(bwd, sizeof bwd, "%.4f", r->bwd_ms);
        snprintf(bwd_ratio, sizeof bwd_ratio, "%.2fx", r->pit_ms > 0 ? r->bwd_ms / r->pit_ms : 0.0);
    }
    const att_point *p = &r->p;
    printf("%-6s %-4s %2lld %3lld/%-3lld %6lld %6lld %4lld %6.3f | %8.4f %8s %7s %7.1f | %8s | %8s %7s | %.1e %s | %s%s\n",
           bench_attention_kinds[p->kind], pit_dtype_name(r->dt), (long long)p->b, (long long)p->hq, (long long)p->hkv,
           (long long)p->lq, (long long)p->lk, (long long)p->d, r->allowed, r->pit_ms, floor, ratio, r->tflops, blocks,
           bwd, bwd_ratio, r->err, r->ok ? "ok" : "OFF", r->choice, p->target ? " (target)" : "");
}

static void json_row(FILE *json, const void *result, int first)
{
    const att_result *r = result;
    const att_point *p = &r->p;
    fprintf(json,
            "%s    {\"kind\": \"%s\", \"dtype\": \"%s\", \"batch\": %lld, \"hq\": %lld, \"hkv\": %lld, "
            "\"lq\": %lld, \"lk\": %lld, \"head_dim\": %lld, \"allowed\": %.6f, \"pit_ms\": %.6f, "
            "\"pit_spread\": %.4f, \"floor_ms\": %.6f, \"pit_over_floor\": %.4f, \"tflops\": %.3f, "
            "\"blocks_64_ms\": %.6f, \"backward_ms\": %.6f, \"backward_over_forward\": %.4f, "
            "\"rel_error\": %.3e, \"ok\": %d, \"target\": %d, \"choice\": \"%s\"}",
            first ? "" : ",\n", bench_attention_kinds[p->kind], pit_dtype_name(r->dt), (long long)p->b,
            (long long)p->hq, (long long)p->hkv, (long long)p->lq, (long long)p->lk, (long long)p->d, r->allowed,
            r->pit_ms, r->pit_spread, r->floor_ms, r->floor_ms > 0 ? r->pit_ms / r->floor_ms : 0.0, r->tflops,
            r->blocks_ms, r->bwd_ms, r->bwd_ms > 0 && r->pit_ms > 0 ? r->bwd_ms / r->pit_ms : 0.0, r->err, r->ok,
            p->target,
            r->choice);
}

/* Whether --only (a kind, or nothing of this suite's) runs point p. */
static int selected(const bench_opts *o, const att_point *p)
{
    return !o->only || !bench_attention_has_kind(o->only) || !strcmp(o->only, bench_attention_kinds[p->kind]);
}

int bench_attention_suite(pit_context *ctx, const bench_opts *o, FILE *json)
{
    pit_device_info d;
    pit_context_get_info(ctx, &d);
    double gbps = 0; /* the read bandwidth: copies larger than any cache */
    pit_status cs = bench_measure_memory(ctx, o, o->quick ? (size_t)8 << 20 : (size_t)256 << 20, &gbps);
    printf("\n== attention: masks new every call; floor = mask bytes at the copy bandwidth %.1f GB/s "
           "(read+write)%s + 4 D FLOPs an allowed pair at FlashAttention-3's H100 rate (497 TFLOP/s at D=64, "
           "648 at D=128); decode: kept K/V and mask bytes at that bandwidth\n",
           gbps, cs == PIT_SUCCESS ? "" : " (unavailable)");
    pit_dtype dts[3];
    const int defaults = d.has_bf16 ? 1 << PIT_BF16 : 1 << PIT_F32;
    int ndt = bench_suite_dtypes(o, &d, "attention", defaults, dts, json);
    printf("%-6s %-4s %2s %7s %6s %6s %4s %6s | %8s %8s %7s %7s | %8s | %8s %7s | %-10s | %s\n", "kind", "dt", "B",
           "Hq/Hkv", "Lq", "Lk", "D", "allow", "pit ms", "floor", "pit/flr", "TFLOP/s", "64x64 ms", "bwd ms", "bwd/fwd",
           "rel. error", "choice");
    if (json)
        fprintf(json, "  \"attention_copy_gbps\": %.3f,\n  \"attention\": [\n", gbps);
    int npoints = 0;
    for (int i = 0; i < NPOINTS; i++)
        npoints += selected(o, &points[i]);
    int total = ndt * npoints, done = 0;
    bench_table tab = {"attention", json, print_row, json_row, 0, 0};
    pit_rng rng;
    pit_rng_seed(&rng, 2024);
    for (int t = 0; t < ndt; t++)
        for (int i = 0; i < NPOINTS; i++) {
            if (!selected(o, &points[i]))
                continue;
            att_point p = scaled(&points[i], o->quick);
            char what[96];
            snprintf(what, sizeof what, "%s %s B%lld H%lld/%lld L%lld/%lld D%lld", bench_attention_kinds[p.kind],
                     pit_dtype_name(dts[t]), (long long)p.b, (long long)p.hq, (long long)p.hkv, (long long)p.lq,
                     (long long)p.lk, (long long)p.d);
            bench_progress(what, done++, total);
            att_result r;
            pit_status s = measure_point(ctx, o, &d, dts[t], &p, gbps, &rng, &r);
            bench_table_add(&tab, what, s, r.error, r.ok, &r);
        }
    bench_progress("done", total, total);
    if (json)
        fprintf(json, "\n  ],\n");
    return tab.failed;
}
