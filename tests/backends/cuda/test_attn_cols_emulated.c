/*
 * test_attn_cols_emulated.c - the key-column tiles of an attention element
 * mask (kernels/pit_attention_cols.cu: the scan and the tiles) run on the
 * CPU (emu/emu_warps.cpp) and compared, word for word, with a host model of
 * the same rules (args.h, pit_cols_ix): the bits of every row (window
 * bounds folded in), each query block's heavy rows, the tiles' rows, their
 * key lists and the chunk bits. Masks of every dtype, lengths no multiple
 * of 32 or 64, one mask set and several, rows 16-byte aligned and not,
 * windows, global tokens enough to fill more than the heavy tiles hold,
 * empty, full and random masks. CI runs it (no GPU); the attention over the
 * tiles is the conformance suite's (pit conformance --op attention).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/args.h"

void pit_emu_run(void (*fn)(const void *), const void *args, unsigned gx, unsigned gy, unsigned threads);
void emu_cols_scan_f32(const void *);
void emu_cols_scan_f16(const void *);
void emu_cols_scan_bf16(const void *);
void emu_cols_scan_i32(const void *);
void emu_cols_scan_u8(const void *);
void emu_cols_tiles(const void *);

enum { ROWS = PIT_ATTN_COLS_ROWS, HEAVY_TILES = 2, SLACK = 128 };
enum { PAT_RANDOM, PAT_GLOBAL, PAT_FULL, PAT_EMPTY };

typedef struct cols_case {
    const char *name;
    int lq, lk, sets, pattern, globals, window, pad; /* pad: extra elements a mask row (misaligned rows) */
    int64_t wl, wr;
} cols_case;

static const cols_case cases[] = {
    {"random 0.3, 100 x 77", 100, 77, 1, PAT_RANDOM, 0, 0, 0, -1, -1},
    {"window 16 + 5 global, 300 x 1000, 2 sets", 300, 1000, 2, PAT_GLOBAL, 5, 16, 0, -1, -1},
    {"window 16 + 200 global (more than the heavy tiles), 1400 x 1400", 1400, 1400, 1, PAT_GLOBAL, 200, 16, 0, -1, -1},
    {"full, causal, 130 x 90 (rows without a key)", 130, 90, 1, PAT_FULL, 0, 0, 0, -1, 0},
    {"random, window 40 left, 3 right, rows misaligned, 3 sets", 190, 257, 3, PAT_RANDOM, 0, 0, 3, 40, 3},
    {"empty, 64 x 64", 64, 64, 1, PAT_EMPTY, 0, 0, 0, -1, -1},
    {"one row, 1 x 5", 1, 5, 1, PAT_RANDOM, 0, 0, 0, -1, -1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* the allowed pattern of set s, row i, key j */
static int pattern_on(const cols_case *c, const int *glob, int i, int j)
{
    switch (c->pattern) {
    case PAT_FULL: return 1;
    case PAT_EMPTY: return 0;
    case PAT_GLOBAL: return glob[i] || glob[j] || (j >= i - c->window && j <= i + c->window);
    default: return rnd() % 10 < 3;
    }
}

/* a mask element of dtype dt (pit_dtype codes: 0 f32, 1 f16, 2 bf16, 3
 * i32, 4 u8) for on / off; off is sometimes -0.0 (zero, as detection) */
static void put_element(int dt, void *at, int on)
{
    const uint32_t neg0 = rnd() & 1;
    switch (dt) {
    case 0: *(uint32_t *)at = on ? 0x3f800000u + (rnd() & 0xffff) : neg0 << 31; break;
    case 1: *(uint16_t *)at = on ? (uint16_t)(0x3c00u + (rnd() & 0x3ff)) : (uint16_t)(neg0 << 15); break;
    case 2: *(uint16_t *)at = on ? (uint16_t)(0x3f80u + (rnd() & 0x7f)) : (uint16_t)(neg0 << 15); break;
    case 3: *(int32_t *)at = on ? (int32_t)(rnd() | 1u) : 0; break;
    default: *(uint8_t *)at = on ? (uint8_t)(1 + rnd() % 255) : 0; break;
    }
}

/* ---- the host model of the tiles ----------------------------------------- */
typedef struct model {
    uint32_t *bits;   /* [sets][lq][words] */
    uint32_t *heavy;  /* [sets][nqb][2] */
    int *rows, *cols, *ncols;
    uint64_t *tbits;
} model;

static int in_bounds(const cols_case *c, int i, int j)
{
    const int64_t at = (int64_t)i + c->lk - c->lq;
    return (c->wl < 0 || j >= at - c->wl) && (c->wr < 0 || j <= at + c->wr);
}

static void model_tiles(const cols_case *c, const uint8_t *on, const pit_cols_ix *x, model *m)
{
    const int words = x->words, nqb = x->nqb, tiles = x->tiles;
    for (int s = 0; s < c->sets; ++s) {
        int *count = calloc((size_t)c->lq, sizeof *count), *heavy_rows = malloc((size_t)c->lq * sizeof(int));
        for (int i = 0; i < c->lq; ++i)
            for (int j = 0; j < c->lk; ++j)
                if (on[((size_t)s * c->lq + i) * c->lk + j] && in_bounds(c, i, j)) {
                    m->bits[((size_t)s * c->lq + i) * words + j / 32] |= 1u << (j % 32);
                    count[i]++;
                }
        int nheavy = 0;
        for (int qb = 0; qb < nqb; ++qb) {
            const int r0 = qb * ROWS, n = c->lq - r0 < ROWS ? c->lq - r0 : ROWS;
            int q = 0x7fffffff;
            for (int r = 0; r < n; ++r) {
                int le = 0;
                for (int k = 0; k < n; ++k) le += count[r0 + k] <= count[r0 + r];
                if (4 * le >= 3 * n && count[r0 + r] < q) q = count[r0 + r];
            }
            for (int r = 0; r < n; ++r)
                if ((int64_t)count[r0 + r] > 2 * (int64_t)q + SLACK) {
                    m->heavy[((size_t)s * nqb + qb) * 2 + r / 32] |= 1u << (r % 32);
                    heavy_rows[nheavy++] = r0 + r;
                }
        }
        const int moved = nheavy < x->heavy_tiles * ROWS ? nheavy : x->heavy_tiles * ROWS;
        char *is_moved = calloc((size_t)c->lq, 1);
        for (int k = 0; k < moved; ++k) is_moved[heavy_rows[k]] = 1;
        for (int t = 0; t < tiles; ++t) {
            int *rows = m->rows + ((size_t)s * tiles + t) * ROWS, n = 0;
            for (int r = 0; r < ROWS; ++r) rows[r] = -1;
            if (t < nqb) {
                for (int i = t * ROWS; i < c->lq && i < (t + 1) * ROWS; ++i)
                    if (!is_moved[i]) rows[n++] = i;
            } else {
                for (int k = (t - nqb) * ROWS; k < moved && k < (t - nqb + 1) * ROWS; ++k) rows[n++] = heavy_rows[k];
            }
            int *list = m->cols + ((size_t)s * tiles + t) * x->cap, nc = 0;
            for (int j = 0; j < c->lk; ++j) {
                int any = 0;
                for (int r = 0; r < n && !any; ++r) any = (m->bits[((size_t)s * c->lq + rows[r]) * words + j / 32] >> (j % 32)) & 1u;
                if (any) list[nc++] = j;
            }
            m->ncols[(size_t)s * tiles + t] = nc;
            for (int k = nc; k < (nc + 63) / 64 * 64; ++k) list[k] = -1;
            uint64_t *tb = m->tbits + ((size_t)s * tiles + t) * (size_t)(x->cap / 64) * ROWS;
            for (int k = 0; k < nc; ++k)
                for (int r = 0; r < n; ++r)
                    if ((m->bits[((size_t)s * c->lq + rows[r]) * words + list[k] / 32] >> (list[k] % 32)) & 1u)
                        tb[(k / 64) * ROWS + r] |= 1ull << (k % 64);
        }
        free(count), free(heavy_rows), free(is_moved);
    }
}

/* ---- one case ---------------------------------------------------------------- */
static int same(const char *what, const cols_case *c, int dt, const void *got, const void *want, size_t bytes)
{
    if (!memcmp(got, want, bytes)) return 1;
    fprintf(stderr, "FAIL %s, mask dtype %d: the %s differ\n", c->name, dt, what);
    return 0;
}

static int run_case(const cols_case *c, int dt)
{
    static void (*const scans[5])(const void *) = {emu_cols_scan_f32, emu_cols_scan_f16, emu_cols_scan_bf16,
                                                   emu_cols_scan_i32, emu_cols_scan_u8};
    const size_t es = dt == 0 || dt == 3 ? 4 : dt == 4 ? 1 : 2;
    const int ld = c->lk + c->pad, nqb = (c->lq + ROWS - 1) / ROWS;
    pit_cols_ix x;
    memset(&x, 0, sizeof x);
    x.words = (c->lk + 31) / 32, x.nqb = nqb;
    x.heavy_tiles = (nqb + 3) / 4 < HEAVY_TILES ? (nqb + 3) / 4 : HEAVY_TILES;
    x.tiles = nqb + x.heavy_tiles, x.cap = (c->lk + 63) / 64 * 64, x.segs = 1;
    const size_t nbits = (size_t)c->sets * c->lq * x.words, nheavy = (size_t)c->sets * nqb * 2;
    const size_t ntiles = (size_t)c->sets * x.tiles, ntb = ntiles * (size_t)(x.cap / 64) * ROWS;
    uint8_t *on = malloc((size_t)c->sets * c->lq * c->lk);
    char *mask = malloc((size_t)c->sets * c->lq * ld * es + 16);
    int *glob = calloc((size_t)(c->lq > c->lk ? c->lq : c->lk) + 1, sizeof *glob);
    for (int g = 0; g < c->globals; ++g) glob[rnd() % (uint32_t)c->lq] = 1;
    for (int s = 0; s < c->sets; ++s)
        for (int i = 0; i < c->lq; ++i)
            for (int j = 0; j < ld; ++j) {
                const int v = j < c->lk ? pattern_on(c, glob, i, j) : (int)(rnd() & 1); /* padding: noise */
                if (j < c->lk) on[((size_t)s * c->lq + i) * c->lk + j] = (uint8_t)v;
                put_element(dt, mask + (((size_t)s * c->lq + i) * ld + j) * es, v);
            }
    model got = {calloc(nbits, 4), calloc(nheavy, 4), calloc(ntiles * ROWS, sizeof(int)),
                 calloc(ntiles * x.cap, sizeof(int)), calloc(ntiles, sizeof(int)), calloc(ntb, 8)};
    model want = {calloc(nbits, 4), calloc(nheavy, 4), calloc(ntiles * ROWS, sizeof(int)),
                  calloc(ntiles * x.cap, sizeof(int)), calloc(ntiles, sizeof(int)), calloc(ntb, 8)};
    pit_attn_cols_args a;
    memset(&a, 0, sizeof a);
    a.mask = (uint64_t)(uintptr_t)mask;
    a.mld = ld, a.ms = c->sets > 1 ? (int64_t)c->lq * ld : 0;
    a.wl = c->wl, a.wr = c->wr, a.Lq = c->lq, a.Lk = c->lk;
    a.mask_vec = (uintptr_t)mask % 16 == 0 && ((size_t)ld * es) % 16 == 0;
    a.cx = x;
    a.cx.bits = (uint64_t)(uintptr_t)got.bits, a.cx.heavy = (uint64_t)(uintptr_t)got.heavy;
    a.cx.rows = (uint64_t)(uintptr_t)got.rows, a.cx.cols = (uint64_t)(uintptr_t)got.cols;
    a.cx.ncols = (uint64_t)(uintptr_t)got.ncols, a.cx.tbits = (uint64_t)(uintptr_t)got.tbits;
    pit_emu_run(scans[dt], &a, (unsigned)nqb, (unsigned)c->sets, PIT_ATTN_COLS_SCAN_THREADS);
    pit_emu_run(emu_cols_tiles, &a, (unsigned)x.tiles, (unsigned)c->sets, PIT_ATTN_COLS_THREADS);
    model_tiles(c, on, &x, &want);
    int ok = same("bits", c, dt, got.bits, want.bits, nbits * 4) &&
             same("heavy rows", c, dt, got.heavy, want.heavy, nheavy * 4) &&
             same("tile rows", c, dt, got.rows, want.rows, ntiles * ROWS * sizeof(int)) &&
             same("key counts", c, dt, got.ncols, want.ncols, ntiles * sizeof(int));
    for (size_t t = 0; ok && t < ntiles; ++t) { /* the lists and chunk bits as far as each tile's are written */
        const size_t n = (size_t)(want.ncols[t] + 63) / 64 * 64;
        ok = same("key lists", c, dt, got.cols + t * x.cap, want.cols + t * x.cap, n * sizeof(int)) &&
             same("chunk bits", c, dt, got.tbits + t * (x.cap / 64) * ROWS, want.tbits + t * (x.cap / 64) * ROWS,
                  n / 64 * ROWS * 8);
    }
    int heavy = 0;
    for (size_t i = 0; i < nheavy; ++i) heavy += __builtin_popcount(want.heavy[i]);
    if (ok) printf("ok %s, mask dtype %d (%d heavy rows)\n", c->name, dt, heavy);
    model *all[2] = {&got, &want};
    for (int k = 0; k < 2; ++k)
        free(all[k]->bits), free(all[k]->heavy), free(all[k]->rows), free(all[k]->cols), free(all[k]->ncols),
            free(all[k]->tbits);
    free(on), free(mask), free(glob);
    return ok;
}

int main(void)
{
    int failed = 0, n = 0;
    for (int i = 0; i < NCASES; ++i)
        for (int dt = 0; dt < 5; ++dt, ++n) failed += !run_case(&cases[i], dt);
    printf("attention key-column tiles, emulated: %d of %d cases passed\n", n - failed, n);
    return failed ? 1 : 0;
}
