/*
 * test_cuda_detect.c - the CUDA plug-in's detection through its pit_backend
 * table alone (no libpit). Every index one call fills is checked against
 * the host's reading of the same element bits: counts exact, entries the
 * exact set of non-zero micro-tiles, total their sum. Both kernels run:
 * the strip kernel (the matmul candidates on 16-byte rows) and the general
 * one (a micro-tile that straddles a strip, rows that are not aligned).
 * Exit 77 (skipped) without a CUDA driver or device.
 *
 *   test_cuda_detect                      correctness
 *   test_cuda_detect --quick              a few cases (for compute-sanitizer)
 *   test_cuda_detect --bench detect [N [C]]  detection of an N x N (4096) f16
 *                                         and bf16 operand beside a copy of it;
 *                                         C: candidates in the first column
 *                                         (all 8), so a profiler's first
 *                                         launch is the set it asks for
 *
 * The bench (a lab figure, never a pass/fail) times with events on the
 * plug-in's stream: "cold" runs one call after a 256 MiB fill that evicts
 * L2 (the median of 15), "warm" 20 calls back to back (the operand may sit
 * in the 50 MB L2 of an H100). GB/s is the operand's bytes over the time;
 * the copy's GB/s counts read + write (2 x bytes), so "% copy" is
 * detection's read rate over the device's streaming rate. PIT_CUDA_PLUGIN_PATH
 * picks the plug-in, so one binary times another build's detection too.
 *
 * Built a second time with PIT_DETECT_EMULATED (test_detect_strip_emulated,
 * CI, no GPU): the same correctness cases on emu/emu_backend.c, which runs
 * the strip kernel on the CPU; the sets it does not take are skipped there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_plugin.h"
#include "../host_cache.h"

static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_no_fault,
                              host_open_cache_entry, host_cache_load, host_cache_store, host_cache_drop};

static const pit_backend *be;
static void *bctx, *stream;
static int failures;
#ifdef PIT_DETECT_EMULATED
const pit_backend *pit_emu_backend(void); /* emu/emu_backend.c */
static const int emulated = 1;
#else
static const int emulated = 0;
#endif

#define CHECK(call) TEST_CALL(call)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void)
{
    return test_urand(&rng);
}

static size_t el_bytes(pit_dtype d)
{
    return d == PIT_U8 ? 1 : d == PIT_F16 || d == PIT_BF16 ? 2 : 4;
}

static const char *dt_name(pit_dtype d)
{
    static const char *names[] = {"f32", "f16", "bf16", "i32", "u8"};
    return (unsigned)d < 5 ? names[d] : "?";
}

/* pit.h's non-zero: a float's bits but the sign, an integer's every bit */
static int bits_nonzero(pit_dtype d, uint32_t v)
{
    switch (d) {
    case PIT_F32: return (v & 0x7fffffffu) != 0;
    case PIT_F16:
    case PIT_BF16: return (v & 0x7fffu) != 0;
    default: return v != 0;
    }
}

/* a zero: +0 or -0 for floats */
static uint32_t zero_bits(pit_dtype d)
{
    int neg = urand() < 0.5;
    return d == PIT_F32 ? (neg ? 0x80000000u : 0u) : d == PIT_F16 || d == PIT_BF16 ? (neg ? 0x8000u : 0u) : 0u;
}

/* a non-zero, now and then one that only its last bit, NaN or INT_MIN makes one */
static uint32_t nonzero_bits(pit_dtype d)
{
    uint32_t r = (uint32_t)(urand() * 4294967296.0), sign = urand() < 0.5;
    int special = urand() < 0.1 ? (int)(urand() * 3) : -1;
    switch (d) {
    case PIT_F32:
        if (special >= 0) return (sign << 31) | (special == 0 ? 1u : special == 1 ? 0x7fc00000u : 0x7f800000u);
        return (sign << 31) | ((r & 0x7fffffffu) | 0x00800000u);
    case PIT_F16:
    case PIT_BF16:
        if (special >= 0) return (sign << 15) | (special == 0 ? 1u : special == 1 ? (d == PIT_F16 ? 0x7e00u : 0x7fc0u) : 0x4000u);
        return (sign << 15) | ((r & 0x7fffu) | 0x0400u);
    case PIT_I32: return special == 1 ? 0x80000000u : special == 0 ? 1u : r | 1u;
    default: return special == 1 ? 0x80u : (r & 0xffu) | 1u;
    }
}

/* ---- an operand: host bits and the device copy --------------------------- */
typedef struct operand {
    pit_dtype dt;
    int64_t batch, rows, cols, ld, offset; /* elements */
    uint32_t *bits;                        /* (b * rows + r) * cols + c */
    size_t bytes;
    pit_tdesc d;
} operand;

static operand make_operand(pit_dtype dt, int64_t batch, int64_t rows, int64_t cols, int64_t ld_pad, int64_t offset)
{
    operand o;
    memset(&o, 0, sizeof o);
    o.dt = dt;
    o.batch = batch;
    o.rows = rows;
    o.cols = cols;
    o.ld = cols + ld_pad;
    o.offset = offset;
    o.bits = calloc((size_t)(batch * rows * cols) + 1, sizeof(uint32_t));
    o.bytes = ((size_t)(offset + batch * rows * o.ld) * el_bytes(dt) + 3) / 4 * 4;
    CHECK(be->mem_alloc(bctx, o.bytes, &o.d.mem));
    o.d.dtype = dt;
    o.d.rank = 3;
    o.d.shape[0] = batch;
    o.d.shape[1] = rows;
    o.d.shape[2] = cols;
    o.d.strides[0] = rows * o.ld;
    o.d.strides[1] = o.ld;
    o.d.strides[2] = 1;
    o.d.offset = (size_t)offset * el_bytes(dt);
    return o;
}

static void free_operand(operand *o)
{
    be->mem_free(bctx, o->d.mem);
    free(o->bits);
}

static uint32_t *at(const operand *o, int64_t b, int64_t r, int64_t c)
{
    return &o->bits[(b * o->rows + r) * o->cols + c];
}

/* Device bytes: the elements, and non-zero padding (a row's tail, the
 * offset) that detection must never read as part of X. */
static void upload(const operand *o)
{
    size_t eb = el_bytes(o->dt), n = o->bytes / eb;
    unsigned char *buf = malloc(o->bytes);
    for (size_t i = 0; i < n; ++i) {
        uint32_t v = nonzero_bits(o->dt);
        memcpy(buf + i * eb, &v, eb); /* little-endian: the low bytes */
    }
    for (int64_t b = 0; b < o->batch; ++b)
        for (int64_t r = 0; r < o->rows; ++r)
            for (int64_t c = 0; c < o->cols; ++c) {
                size_t i = (size_t)(o->offset + (b * o->rows + r) * o->ld + c);
                memcpy(buf + i * eb, at(o, b, r, c), eb);
            }
    CHECK(be->mem_write(bctx, stream, o->d.mem, 0, buf, o->bytes));
    free(buf);
}

/* Patterns: each bh x bw block zero with probability s (fine: each
 * element), or all zero, or all non-zero. */
typedef enum { PAT_BLOCK, PAT_ZERO, PAT_DENSE } pattern_kind;
typedef struct pattern {
    pattern_kind kind;
    int bh, bw;
    double s;
} pattern;

static void fill(operand *o, pattern p)
{
    int bh = p.kind == PAT_BLOCK ? p.bh : 1, bw = p.kind == PAT_BLOCK ? p.bw : 1;
    for (int64_t b = 0; b < o->batch; ++b)
        for (int64_t r0 = 0; r0 < o->rows; r0 += bh)
            for (int64_t c0 = 0; c0 < o->cols; c0 += bw) {
                int zero = p.kind == PAT_ZERO || (p.kind == PAT_BLOCK && urand() < p.s);
                for (int64_t r = r0; r < r0 + bh && r < o->rows; ++r)
                    for (int64_t c = c0; c < c0 + bw && c < o->cols; ++c)
                        *at(o, b, r, c) = zero ? zero_bits(o->dt) : nonzero_bits(o->dt);
            }
}

/* ---- indexes laid out as a matmul plan lays them out: one block of every
 * index's counts, each followed by its total; entries apart ----------------- */
typedef struct index_set {
    int n;
    pit_index ix[8];
    void *block;
    size_t block_bytes;
} index_set;

static index_set make_indexes(const operand *o, const pit_microtile *tiles, int n)
{
    index_set s;
    memset(&s, 0, sizeof s);
    s.n = n;
    size_t off[8], words = 0;
    for (int i = 0; i < n; ++i) {
        pit_index *x = &s.ix[i];
        x->tile = tiles[i];
        int64_t tr = (o->rows + tiles[i].rows - 1) / tiles[i].rows, tc = (o->cols + tiles[i].cols - 1) / tiles[i].cols;
        x->groups_per_batch = (int32_t)(tiles[i].axis == PIT_AXIS_M ? tc : tr);
        x->capacity = (int32_t)(tiles[i].axis == PIT_AXIS_M ? tr : tc);
        x->groups = x->groups_per_batch * (int32_t)o->batch;
        off[i] = words;
        words += (size_t)x->groups + 1;
        CHECK(be->mem_alloc(bctx, (size_t)x->groups * (size_t)x->capacity * 4 + 4, &x->entries));
    }
    s.block_bytes = words * 4;
    CHECK(be->mem_alloc(bctx, s.block_bytes, &s.block));
    for (int i = 0; i < n; ++i) {
        s.ix[i].counts = (char *)s.block + off[i] * 4;
        s.ix[i].total = (char *)s.block + (off[i] + (size_t)s.ix[i].groups) * 4;
    }
    return s;
}

static void free_indexes(index_set *s)
{
    for (int i = 0; i < s->n; ++i) be->mem_free(bctx, s->ix[i].entries);
    be->mem_free(bctx, s->block);
}

/* garbage where detection writes: it must zero counts and total itself */
static void poison(const index_set *s)
{
    CHECK(be->mem_fill32(bctx, stream, s->block, 0, 0x55555555u, s->block_bytes));
    for (int i = 0; i < s->n; ++i)
        CHECK(be->mem_fill32(bctx, stream, s->ix[i].entries, 0, 0xaaaaaaaau,
                             (size_t)s->ix[i].groups * (size_t)s->ix[i].capacity * 4));
}

/* Compares index i with the host's micro-tiles; 0 when equal. */
static int check_index(const operand *o, const pit_index *x, const char *what)
{
    const pit_microtile t = x->tile;
    size_t cells = (size_t)x->groups * (size_t)x->capacity;
    unsigned char *want = calloc(cells + 1, 1), *seen = calloc(cells + 1, 1);
    int32_t *counts = malloc((size_t)x->groups * 4 + 4), *entries = malloc(cells * 4 + 4), total = -1;
    for (int64_t b = 0; b < o->batch; ++b)
        for (int64_t r = 0; r < o->rows; ++r)
            for (int64_t c = 0; c < o->cols; ++c)
                if (bits_nonzero(o->dt, *at(o, b, r, c))) {
                    int64_t tr = r / t.rows, tc = c / t.cols;
                    int64_t g = b * x->groups_per_batch + (t.axis == PIT_AXIS_M ? tc : tr);
                    want[g * x->capacity + (t.axis == PIT_AXIS_M ? tr : tc)] = 1;
                }
    CHECK(be->mem_read(bctx, stream, x->counts, 0, counts, (size_t)x->groups * 4));
    CHECK(be->mem_read(bctx, stream, x->entries, 0, entries, cells * 4));
    CHECK(be->mem_read(bctx, stream, x->total, 0, &total, 4));
    int64_t bad = 0, sum = 0;
    for (int64_t g = 0; g < x->groups; ++g) {
        int32_t n = counts[g], expected = 0;
        for (int64_t e = 0; e < x->capacity; ++e) expected += want[g * x->capacity + e];
        if (n != expected || n < 0 || n > x->capacity) {
            ++bad;
            continue;
        }
        sum += n;
        for (int32_t i = 0; i < n; ++i) {
            int32_t e = entries[g * x->capacity + i];
            if (e < 0 || e >= x->capacity || !want[g * x->capacity + e] || seen[g * x->capacity + e]++) ++bad;
        }
    }
    if (sum != total) ++bad;
    if (bad)
        printf("FAIL %s: index %dx%d axis %s: %lld groups wrong (total %d, counts sum %lld)\n", what, t.rows, t.cols,
               t.axis == PIT_AXIS_M ? "M" : t.axis == PIT_AXIS_N ? "N" : "K", (long long)bad, total, (long long)sum);
    free(want);
    free(seen);
    free(counts);
    free(entries);
    return bad != 0;
}

/* ---- correctness ----------------------------------------------------------- */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* the matmul candidates of sparse A (core/pit/rules.c) and of sparse B */
static const pit_microtile sparse_a[] = {{32, 1, PIT_AXIS_K},  {1, 64, PIT_AXIS_M}, {32, 64, PIT_AXIS_K},
                                         {64, 64, PIT_AXIS_K}, {16, 1, PIT_AXIS_K}, {1, 32, PIT_AXIS_M},
                                         {16, 32, PIT_AXIS_K}, {64, 1, PIT_AXIS_K}};
static const pit_microtile sparse_b[] = {
    {32, 1, PIT_AXIS_N}, {32, 64, PIT_AXIS_N}, {64, 64, PIT_AXIS_N}, {64, 1, PIT_AXIS_N}, {32, 32, PIT_AXIS_N}};

/* The other shapes a strip holds, by the dtype's 16-byte vector (vec
 * elements) and strip width (32 vectors): a 1-row micro-tile grouped by
 * row, a column one vector or the whole strip wide, columns of 2 and 4
 * elements, and axis M over 16- to 64-row micro-tiles. */
static int strip_shapes(int vec, pit_microtile *out)
{
    int w = 32 * vec, n = 0;
    out[n++] = (pit_microtile){1, vec, PIT_AXIS_K};
    out[n++] = (pit_microtile){1, w, PIT_AXIS_M};
    out[n++] = (pit_microtile){32, 2, PIT_AXIS_K};
    out[n++] = (pit_microtile){16, 4, PIT_AXIS_N};
    out[n++] = (pit_microtile){64, vec, PIT_AXIS_M};
    out[n++] = (pit_microtile){16, w, PIT_AXIS_M};
    out[n++] = (pit_microtile){1, 2 * vec, PIT_AXIS_K};
    out[n++] = (pit_microtile){64, w, PIT_AXIS_K};
    return n;
}

/* shapes the strip kernel does not take: the general kernel fills them */
static const pit_microtile general[] = {{1, 3, PIT_AXIS_M}, {48, 1, PIT_AXIS_K}, {8, 8, PIT_AXIS_K},
                                        {128, 128, PIT_AXIS_K}, {1, 1, PIT_AXIS_M}};

typedef struct shape_case {
    int64_t batch, rows, cols, ld_pad, offset;
} shape_case;

static void run_set(const operand *o, const pit_microtile *tiles, int n, const char *what)
{
    index_set s = make_indexes(o, tiles, n);
    poison(&s);
    pit_status st = be->detect(bctx, stream, &o->d, s.ix, n);
    if (st == PIT_SUCCESS) {
        for (int i = 0; i < n; ++i) failures += check_index(o, &s.ix[i], what);
    } else if (!(emulated && st == PIT_ERR_UNSUPPORTED)) { /* the emulation runs the strip kernel alone */
        printf("FAIL %s: detect of %d indexes -> %d: %s\n", what, n, (int)st, last_error);
        ++failures;
    }
    free_indexes(&s);
}

static void run_case(pit_dtype dt, const shape_case *sc, pattern p)
{
    operand o = make_operand(dt, sc->batch, sc->rows, sc->cols, sc->ld_pad, sc->offset);
    fill(&o, p);
    upload(&o);
    char what[160];
    snprintf(what, sizeof what, "%s b%lld %lldx%lld ld+%lld off%lld pattern %d %dx%d s=%.2f", dt_name(dt),
             (long long)sc->batch, (long long)sc->rows, (long long)sc->cols, (long long)sc->ld_pad,
             (long long)sc->offset, (int)p.kind, p.bh, p.bw, p.s);
    int vec = 16 / (int)el_bytes(dt);
    pit_microtile strip[8];
    int ns = strip_shapes(vec, strip);
    run_set(&o, sparse_a, COUNT(sparse_a), what);
    run_set(&o, sparse_b, COUNT(sparse_b), what);
    run_set(&o, strip, ns, what);
    /* one shape the strips do not hold sends the whole set to the general kernel */
    pit_microtile mixed[8];
    memcpy(mixed, sparse_a, 5 * sizeof mixed[0]);
    memcpy(mixed + 5, general, 3 * sizeof mixed[0]);
    run_set(&o, mixed, 8, what);
    run_set(&o, general + 3, 2, what);
    printf("ok? %s: failures so far %d\n", what, failures);
    fflush(stdout);
    free_operand(&o);
}

static int correctness(int quick)
{
    /* 16-byte rows (the strip kernel, but where a shape is general), rows and
     * columns that end inside a strip, a batch with padded rows, an offset
     * that breaks the alignment (the general kernel throughout) */
    const shape_case shapes[] = {{1, 256, 512, 0, 0}, {1, 1, 64, 0, 0},   {1, 65, 1040, 0, 0}, {3, 130, 272, 16, 0},
                                 {2, 200, 64, 0, 16}, {1, 100, 200, 0, 1}, {1, 1000, 2048, 0, 0}};
    const pattern pats[] = {{PAT_BLOCK, 32, 1, 0.6}, {PAT_BLOCK, 1, 64, 0.6}, {PAT_BLOCK, 32, 64, 0.5},
                            {PAT_BLOCK, 1, 1, 0.97}, {PAT_ZERO, 0, 0, 0},      {PAT_DENSE, 0, 0, 0},
                            {PAT_BLOCK, 16, 8, 0.8}};
    const pit_dtype dts[] = {PIT_BF16, PIT_F16, PIT_F32, PIT_I32, PIT_U8};
    for (int d = 0; d < COUNT(dts); ++d)
        for (int i = 0; i < COUNT(shapes); ++i) {
            if (quick && i != 2 && i != 3) continue;
            if (emulated && shapes[i].rows * shapes[i].cols > (1 << 20)) continue; /* seconds of CPU a case */
            /* bool masks: columns must fill 16 bytes for the strips */
            shape_case sc = shapes[i];
            if (dts[d] == PIT_U8 && sc.offset == 0 && sc.cols % 16) sc.cols += 16 - sc.cols % 16;
            for (int p = 0; p < COUNT(pats); ++p) {
                if (quick && p != 3 && p != 4) continue;
                run_case(dts[d], &sc, pats[p]);
            }
        }
    return failures;
}

/* ---- bench -------------------------------------------------------------------- */
typedef struct timed {
    const operand *o;
    index_set *s;
    int n;
    void *dst;
} timed;

static void op_detect(void *u)
{
    timed *t = u;
    CHECK(be->detect(bctx, stream, &t->o->d, t->s->ix, t->n));
}

static void op_copy(void *u)
{
    timed *t = u;
    CHECK(be->mem_copy(bctx, stream, t->dst, 0, t->o->d.mem, 0, t->o->bytes));
}

/* The median of 15 single runs of fn, each after a fill of flush (L2
 * evicted), in ms. */
static double cold_ms(void (*fn)(void *), void *user, void *flush, size_t flush_bytes)
{
    enum { RUNS = 15 };
    double t[RUNS];
    fn(user);
    for (int i = 0; i < RUNS; ++i) {
        pit_event *e0, *e1;
        CHECK(be->mem_fill32(bctx, stream, flush, 0, (uint32_t)i, flush_bytes));
        CHECK(be->event_record(bctx, stream, &e0));
        fn(user);
        CHECK(be->event_record(bctx, stream, &e1));
        CHECK(be->event_elapsed_ms(bctx, e0, e1, &t[i]));
        be->event_destroy(bctx, e0);
        be->event_destroy(bctx, e1);
    }
    qsort(t, RUNS, sizeof t[0], test_cmp_double);
    return t[RUNS / 2];
}

static double warm_ms(void (*fn)(void *), void *user)
{
    double ms;
    CHECK(test_median_ms(be, bctx, stream, fn, user, &ms, NULL));
    return ms;
}

static int bench_detect(int64_t n, int cands)
{
    const size_t flush_bytes = (size_t)256 << 20;
    void *flush, *dst;
    CHECK(be->mem_alloc(bctx, flush_bytes, &flush));
    CHECK(be->mem_alloc(bctx, (size_t)(n * n) * 4 + 16, &dst));
    const pit_dtype dts[] = {PIT_BF16, PIT_F16};
    const pattern pats[] = {{PAT_BLOCK, 32, 1, 0}, {PAT_BLOCK, 32, 64, 0}, {PAT_BLOCK, 1, 64, 0}};
    const double sps[] = {0.5, 0.9, 0.99};
    if (cands < 1 || cands > COUNT(sparse_a)) cands = COUNT(sparse_a);
    printf("detection of a %lldx%lld operand, the first %d sparse-A candidates in one pass (det4: the first 4, what "
           "a matmul plan detects; det1: the first, what a settled plan detects); copy: a device copy of the same "
           "bytes, GB/s of read + write\n",
           (long long)n, (long long)n, cands);
    printf("%-5s %-6s %5s | %8s %7s %6s | %8s %8s | %8s | %8s %8s | %8s %8s\n", "dtype", "micro", "s", "det_us",
           "GB/s", "%copy", "det4_us", "%copy", "det1_us", "warm_us", "%copy", "copy_us", "GB/s");
    for (int d = 0; d < COUNT(dts); ++d) {
        operand o = make_operand(dts[d], 1, n, n, 0, 0);
        for (int p = 0; p < COUNT(pats); ++p)
            for (int si = 0; si < COUNT(sps); ++si) {
                pattern pat = pats[p];
                pat.s = sps[si];
                fill(&o, pat);
                upload(&o);
                index_set s = make_indexes(&o, sparse_a, COUNT(sparse_a));
                CHECK(be->detect(bctx, stream, &o.d, s.ix, cands));
                for (int i = 0; i < cands; ++i) failures += check_index(&o, &s.ix[i], "bench");
                timed t = {&o, &s, cands, dst};
                double det = cold_ms(op_detect, &t, flush, flush_bytes), det_warm = warm_ms(op_detect, &t);
                t.n = 4;
                double det4 = cold_ms(op_detect, &t, flush, flush_bytes);
                t.n = 1;
                double det1 = cold_ms(op_detect, &t, flush, flush_bytes);
                double copy = cold_ms(op_copy, &t, flush, flush_bytes), copy_warm = warm_ms(op_copy, &t);
                double bytes = (double)(n * n) * (double)el_bytes(dts[d]);
                double rate = bytes / (det * 1e-3), copy_rate = 2 * bytes / (copy * 1e-3);
                double warm_rate = bytes / (det_warm * 1e-3), copy_warm_rate = 2 * bytes / (copy_warm * 1e-3);
                printf("%-5s %2dx%-3d %5.2f | %8.1f %7.0f %5.0f%% | %8.1f %7.0f%% | %8.1f | %8.1f %7.0f%% | %8.1f "
                       "%8.0f\n",
                       dt_name(dts[d]), pat.bh, pat.bw, pat.s, det * 1e3, rate / 1e9, 100 * rate / copy_rate,
                       det4 * 1e3, 100 * (bytes / (det4 * 1e-3)) / copy_rate, det1 * 1e3, det_warm * 1e3,
                       100 * warm_rate / copy_warm_rate, copy * 1e3, copy_rate / 1e9);
                fflush(stdout);
                free_indexes(&s);
            }
        free_operand(&o);
    }
    be->mem_free(bctx, flush);
    be->mem_free(bctx, dst);
    return failures;
}

int main(int argc, char **argv)
{
#ifdef PIT_DETECT_EMULATED
    be = pit_emu_backend();
    CHECK(be->init(&host));
    printf("device: %s\n", be->name);
#else
    pit_device_info info;
    int loaded = load_cuda_plugin(&host, &be, &info);
    if (loaded != 0) return loaded;
    printf("device: %s %s, %s, %d SMs\n", info.name, info.arch, info.driver_version, info.compute_units);
#endif
    CHECK(be->context_create(0, &(pit_switches){{0}}, &bctx));
    CHECK(be->stream_create(bctx, &stream));
    int rc;
    if (argc > 2 && !strcmp(argv[1], "--bench") && !strcmp(argv[2], "detect"))
        rc = emulated ? printf("no bench on the emulation\n") > 0
                      : bench_detect(argc > 3 ? atoll(argv[3]) : 4096, argc > 4 ? atoi(argv[4]) : 0);
    else
        rc = correctness(argc > 1 && !strcmp(argv[1], "--quick"));
    be->stream_destroy(bctx, stream);
    be->context_destroy(bctx);
    be->shutdown();
    printf(rc ? "FAILED: %d failures\n" : "PASSED\n", rc);
    return rc ? 1 : 0;
}
