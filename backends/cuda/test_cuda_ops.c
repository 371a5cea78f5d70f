/*
 * test_cuda_ops.c - drives the operators of dynamic-sparse models of
 * libpit-cuda.so through its pit_backend table alone (no libpit): the block
 * index is built by the backend's own detect on the mask, outputs are
 * NaN-poisoned first, and every result is compared with the double-precision
 * CPU references of core/reference.c (f32 1e-4, f16/bf16 1e-2 relative norm
 * error). Exit 77 (skipped) when there is no CUDA driver or device.
 *
 *   test_cuda_ops            correctness (odd shapes, empty and full patterns)
 *   test_cuda_ops --bench [attention|moe [skewed|even|one]]
 *                            issue 5's attention and MoE points (or one of
 *                            them), timed with events (warm-up, median of
 *                            20) next to cuBLAS
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_plugin.h"
#include "reference.h"



static int host_inject(void)
{
    return 0;
}

static const pit_host host = {PIT_BACKEND_ABI_VERSION, host_error, host_log, host_cache_dir, host_inject};
static const pit_backend *be;
static void *bctx, *stream;
static int failures;
static pit_rng rng;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        pit_status st_ = (call);                                                                   \
        if (st_ != PIT_SUCCESS) {                                                                  \
            printf("FAIL %s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)st_, last_error); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char *dt_name(pit_dtype d)
{
    return d == PIT_F32 ? "f32" : d == PIT_F16 ? "f16" : d == PIT_BF16 ? "bf16" : d == PIT_U8 ? "u8" : "i32";
}

/* ---- device tensors (contiguous) ------------------------------------------ */
typedef struct dten {
    pit_tdesc d;
    size_t n;
    double *h; /* host values (as the dtype holds them) */
} dten;

static size_t el_size(pit_dtype d)
{
    return d == PIT_F16 || d == PIT_BF16 ? 2 : d == PIT_U8 ? 1 : 4;
}

static void to_bytes(pit_dtype dt, const double *x, size_t n, void *out)
{
    if (dt == PIT_I32)
        for (size_t i = 0; i < n; ++i) ((int32_t *)out)[i] = (int32_t)x[i];
    else pit_ref_from_double(dt, x, n, out);
}

/* NaN poison: all bits set */
static void poison(const dten *t)
{
    CHECK(be->mem_fill32(bctx, stream, t->d.mem, 0, 0xffffffffu, (t->n * el_size(t->d.dtype) + 3) / 4 * 4));
}

/* A device tensor; data NULL: NaN poison. */
static dten make(pit_dtype dt, int rank, const int64_t *shape, const double *data)
{
    dten t;
    memset(&t, 0, sizeof t);
    t.d.dtype = dt;
    t.d.rank = rank;
    t.n = 1;
    for (int i = rank - 1; i >= 0; --i) {
        t.d.shape[i] = shape[i];
        t.d.strides[i] = (int64_t)t.n;
        t.n *= (size_t)shape[i];
    }
    size_t bytes = (t.n * el_size(dt) + 3) / 4 * 4;
    CHECK(be->mem_alloc(bctx, bytes, &t.d.mem));
    t.h = calloc(t.n + 1, sizeof(double));
    void *raw = malloc(bytes + 4);
    if (data) {
        to_bytes(dt, data, t.n, raw);
        if (dt == PIT_I32) memcpy(t.h, data, t.n * sizeof(double));
        else pit_ref_to_double(dt, raw, t.n, t.h);
        CHECK(be->mem_write(bctx, stream, t.d.mem, 0, raw, t.n * el_size(dt)));
    }
    free(raw);
    if (!data) poison(&t);
    return t;
}

static void download(const dten *t, double *out)
{
    void *raw = malloc(t->n * el_size(t->d.dtype) + 4);
    CHECK(be->mem_read(bctx, stream, t->d.mem, 0, raw, t->n * el_size(t->d.dtype)));
    pit_ref_to_double(t->d.dtype, raw, t->n, out);
    free(raw);
}

static void drop(dten *t)
{
    be->mem_free(bctx, t->d.mem);
    free(t->h);
}

static double *randoms(size_t n)
{
    double *x = malloc((n + 1) * sizeof *x);
    pit_ref_fill_random(&rng, x, n);
    return x;
}

/* 0/1 mask: whole br x bc blocks off with probability block_sparsity, then
 * single elements off with probability fine (kind: 0 random, 1 empty, 2 full) */
static double *mask_values(int64_t batch, int64_t rows, int64_t cols, int br, int bc, double sparsity, int kind)
{
    size_t n = (size_t)(batch * rows * cols);
    double *m = malloc((n + 1) * sizeof *m);
    for (size_t i = 0; i < n; ++i) m[i] = kind == 1 ? 0.0 : 1.0;
    if (kind == 0) {
        pit_ref_sparsify_tiles(&rng, m, batch, rows, cols, br, bc, 0, 0, sparsity);
        for (size_t i = 0; i < n; ++i)
            if (pit_rng_uniform(&rng) > 0.8) m[i] = 0.0; /* exact masking inside the blocks */
    }
    return m;
}

/* ---- the index, built by the backend's detect on the mask ------------------- */
typedef struct dindex {
    pit_index ix;
    int32_t max_entries;
} dindex;

/* An index's counts, entries and total poisoned: detection must write
 * every one it leaves */
static void poison_index(const dindex *r)
{
    const pit_index *ix = &r->ix;
    CHECK(be->mem_fill32(bctx, stream, ix->counts, 0, 0xffffffffu, (size_t)ix->groups * 4));
    CHECK(be->mem_fill32(bctx, stream, ix->entries, 0, 0xffffffffu, (size_t)ix->groups * (size_t)ix->capacity * 4));
    CHECK(be->mem_fill32(bctx, stream, ix->total, 0, 0xffffffffu, 4));
}

/* The mask as detect reads it: [batch, rows, cols], a rank-2 mask with
 * batch stride 0 (as core does), i32 scanned as f32 */
static pit_tdesc detect_view(const dten *mask, int64_t batch)
{
    int64_t rows = mask->d.shape[mask->d.rank - 2], cols = mask->d.shape[mask->d.rank - 1];
    pit_tdesc v = mask->d;
    if (v.rank == 2 || batch == 1) {
        v.rank = 3;
        v.shape[0] = batch, v.shape[1] = rows, v.shape[2] = cols;
        v.strides[0] = mask->d.rank == 3 ? mask->d.strides[0] : 0;
        v.strides[1] = cols, v.strides[2] = 1;
    }
    if (v.dtype == PIT_I32) v.dtype = PIT_F32;
    return v;
}

/* marks: flag_full, as core asks for the fused attention (backend.h) */
static dindex build_index_marked(const dten *mask, int64_t batch, int br, int bc, pit_axis axis, int marks)
{
    dindex r;
    memset(&r, 0, sizeof r);
    int64_t rows = mask->d.shape[mask->d.rank - 2], cols = mask->d.shape[mask->d.rank - 1];
    pit_index *ix = &r.ix;
    ix->tile = (pit_microtile){br, bc, axis};
    ix->flag_full = marks;
    int64_t tr = (rows + br - 1) / br, tc = (cols + bc - 1) / bc;
    ix->groups_per_batch = (int32_t)(axis == PIT_AXIS_M ? tc : tr);
    ix->capacity = (int32_t)(axis == PIT_AXIS_M ? tr : tc);
    ix->groups = ix->groups_per_batch * (int32_t)batch;
    CHECK(be->mem_alloc(bctx, (size_t)ix->groups * 4 + 4, &ix->counts));
    CHECK(be->mem_alloc(bctx, (size_t)ix->groups * (size_t)ix->capacity * 4 + 4, &ix->entries));
    CHECK(be->mem_alloc(bctx, 4, &ix->total));
    pit_tdesc v = detect_view(mask, batch);
    CHECK(be->detect(bctx, stream, &v, ix, 1));
    int32_t *counts = malloc((size_t)ix->groups * 4 + 4);
    CHECK(be->mem_read(bctx, stream, ix->counts, 0, counts, (size_t)ix->groups * 4));
    for (int32_t g = 0; g < ix->groups; ++g)
        if (counts[g] > r.max_entries) r.max_entries = counts[g];
    free(counts);
    return r;
}

static dindex build_index(const dten *mask, int64_t batch, int br, int bc, pit_axis axis)
{
    return build_index_marked(mask, batch, br, bc, axis, 0);
}

/* Every entry of an axis-K index of mask (rows x cols, mb masks) against
 * the host: each non-zero block listed once, PIT_ENTRY_FULL exactly on the
 * blocks whose elements are all non-zero and that lie inside the mask (with
 * marks; never without). */
static void check_marks(const dten *mask, int64_t mb, const dindex *r, int marks, const char *what)
{
    const pit_index *ix = &r->ix;
    int64_t rows = mask->d.shape[mask->d.rank - 2], cols = mask->d.shape[mask->d.rank - 1];
    int br = ix->tile.rows, bc = ix->tile.cols;
    int64_t tr = (rows + br - 1) / br, tc = (cols + bc - 1) / bc;
    int32_t *counts = malloc((size_t)ix->groups * 4 + 4);
    int32_t *ent = malloc((size_t)ix->groups * (size_t)ix->capacity * 4 + 4);
    char *seen = calloc((size_t)(mb * tr * tc) + 1, 1);
    CHECK(be->mem_read(bctx, stream, ix->counts, 0, counts, (size_t)ix->groups * 4));
    CHECK(be->mem_read(bctx, stream, ix->entries, 0, ent, (size_t)ix->groups * (size_t)ix->capacity * 4));
    int64_t bad = 0, listed = 0, want = 0, full = 0, marked = 0;
    for (int64_t b = 0; b < mb; ++b)
        for (int64_t i = 0; i < tr; ++i)
            for (int64_t j = 0; j < tc; ++j) {
                int64_t nz = 0, n = 0;
                for (int64_t y = i * br; y < (i + 1) * br && y < rows; ++y)
                    for (int64_t x = j * bc; x < (j + 1) * bc && x < cols; ++x, ++n)
                        nz += mask->h[(b * rows + y) * cols + x] != 0.0;
                int inside = (i + 1) * br <= rows && (j + 1) * bc <= cols;
                seen[(b * tr + i) * tc + j] = nz == 0 ? 0 : nz == n && inside ? 2 : 1;
                want += nz != 0;
                full += nz == n && inside;
            }
    for (int64_t b = 0; b < mb; ++b)
        for (int64_t i = 0; i < tr; ++i) {
            int64_t g = b * ix->groups_per_batch + i;
            for (int32_t k = 0; k < counts[g] && k < ix->capacity; ++k, ++listed) {
                int32_t e = ent[g * ix->capacity + k], j = e & ~PIT_ENTRY_FULL, m = (e & PIT_ENTRY_FULL) != 0;
                char *st = j >= 0 && j < tc ? &seen[(b * tr + i) * tc + j] : NULL;
                if (!st || *st == 0 || *st == 3 || m != (marks && *st == 2)) {
                    if (bad++ < 5)
                        printf("     %s: batch %lld row-block %lld entry %#x: %s\n", what, (long long)b, (long long)i,
                               (unsigned)e, !st || *st == 0 ? "not a non-zero block" : *st == 3 ? "listed twice"
                                            : m ? "marked full, is not" : "full, not marked");
                }
                marked += m;
                if (st && *st) *st = 3;
            }
        }
    int32_t total = -1;
    CHECK(be->mem_read(bctx, stream, ix->total, 0, &total, 4));
    int ok = bad == 0 && listed == want && total == listed;
    if (!ok) ++failures;
    printf("%s %-58s %lld blocks listed (want %lld, total %d), %lld marked full (%lld full)\n", ok ? "ok  " : "FAIL",
           what, (long long)listed, (long long)want, (int)total, (long long)marked, (long long)full);
    free(counts), free(ent), free(seen);
}

static void drop_index(dindex *r)
{
    be->mem_free(bctx, r->ix.counts);
    be->mem_free(bctx, r->ix.entries);
    be->mem_free(bctx, r->ix.total);
}

static void compare(const char *what, const dten *out, const double *ref)
{
    double *got = malloc((out->n + 1) * sizeof *got);
    download(out, got);
    double e = pit_ref_rel_error(ref, got, out->n), tol = pit_ref_tolerance(out->d.dtype);
    int ok = e <= tol;
    if (!ok) ++failures;
    printf("%s %-58s %-4s rel err %.2e\n", ok ? "ok  " : "FAIL", what, dt_name(out->d.dtype), e);
    free(got);
}

static const pit_dtype dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
static const char *kind_name[] = {"random", "empty", "full", "mixed"};

/* ---- cases ------------------------------------------------------------------------ */
static void test_sddmm(pit_dtype dt, int kind, int mask_rank, pit_dtype mdt)
{
    int64_t B = 2, M = 70, N = 90, K = 33;
    int br = 32, bc = 16;
    int64_t sa[3] = {B, M, K}, sb[3] = {B, N, K}, sc[3] = {B, M, N};
    int64_t sm[3] = {mask_rank == 3 ? B : 1, M, N};
    double *a = randoms((size_t)(B * M * K)), *b = randoms((size_t)(B * N * K));
    double *mv = mask_values(sm[0], M, N, br, bc, 0.6, kind);
    dten A = make(dt, 3, sa, a), Bt = make(dt, 3, sb, b), C = make(dt, 3, sc, NULL);
    dten Mk = make(mdt, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    dindex ix = build_index(&Mk, B, br, bc, PIT_AXIS_K);
    CHECK(be->sddmm(bctx, stream, &ix.ix, &A.d, &Bt.d, &Mk.d, &C.d));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref);
    pit_ref_sddmm(B, M, N, K, A.h, Bt.h, Mk.h, mask_rank == 3, ref);
    char what[128];
    snprintf(what, sizeof what, "sddmm 2x70x90x33 block 32x16 %s mask rank %d %s", kind_name[kind], mask_rank,
             dt_name(mdt));
    compare(what, &C, ref);
    free(a), free(b), free(mv), free(ref);
    drop(&A), drop(&Bt), drop(&C), drop(&Mk), drop_index(&ix);
}

static void test_softmax(pit_dtype dt, int kind, int br, int bc, int mask_rank)
{
    int64_t B = 2, M = 37, N = 100;
    int64_t s[3] = {B, M, N}, sm[3] = {mask_rank == 3 ? B : 1, M, N};
    double *x = randoms((size_t)(B * M * N)), *dy = randoms((size_t)(B * M * N));
    double *mv = mask_values(sm[0], M, N, 4, 8, 0.5, kind);
    dten X = make(dt, 3, s, x), dY = make(dt, 3, s, dy), Y = make(dt, 3, s, NULL), dX = make(dt, 3, s, NULL);
    dten Mk = make(PIT_F32, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    dindex ix = build_index(&Mk, B, br, bc, PIT_AXIS_K);
    float scale = 0.7f;
    CHECK(be->softmax_sparse(bctx, stream, &ix.ix, &X.d, &Mk.d, &Y.d, scale));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref), *yd = malloc((size_t)(B * M * N) * sizeof *yd);
    pit_ref_softmax(B, M, N, X.h, Mk.h, mask_rank == 3, scale, ref);
    char what[128];
    snprintf(what, sizeof what, "softmax 2x37x100 tile %dx%d %s mask rank %d", br, bc, kind_name[kind], mask_rank);
    compare(what, &Y, ref);
    download(&Y, yd); /* the backward from the device's Y */
    CHECK(be->softmax_sparse_backward(bctx, stream, &ix.ix, &Y.d, &dY.d, &Mk.d, &dX.d, scale));
    pit_ref_softmax_backward(B, M, N, yd, dY.h, Mk.h, mask_rank == 3, scale, ref);
    snprintf(what, sizeof what, "softmax backward 2x37x100 tile %dx%d %s", br, bc, kind_name[kind]);
    compare(what, &dX, ref);
    /* in place, as the composed attention runs it */
    CHECK(be->softmax_sparse(bctx, stream, &ix.ix, &X.d, &Mk.d, &X.d, scale));
    pit_ref_softmax(B, M, N, X.h, Mk.h, mask_rank == 3, scale, ref);
    snprintf(what, sizeof what, "softmax in place tile %dx%d %s", br, bc, kind_name[kind]);
    compare(what, &X, ref);
    free(x), free(dy), free(mv), free(ref), free(yd);
    drop(&X), drop(&dY), drop(&Y), drop(&dX), drop(&Mk), drop_index(&ix);
}

/* block x block blocks of an L x L mask, each (by a draw) empty, all on,
 * on but for ONE element, or with elements off at random (kind "mixed") */
static double *mixed_mask(int64_t batch, int64_t L, int block)
{
    double *m = malloc((size_t)(batch * L * L + 1) * sizeof *m);
    int64_t nb = (L + block - 1) / block;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < nb; ++i)
            for (int64_t j = 0; j < nb; ++j) {
                int how = (int)(pit_rng_next(&rng) % 4); /* 0 empty, 1 full, 2 one zero, 3 random */
                int64_t h = (i + 1) * block < L ? block : L - i * block, w = (j + 1) * block < L ? block : L - j * block;
                int64_t hole = (int64_t)(pit_rng_next(&rng) % (uint64_t)(h * w));
                for (int64_t y = 0; y < h; ++y)
                    for (int64_t x = 0; x < w; ++x) {
                        double on = how == 1 || (how == 2 && y * w + x != hole) ||
                                    (how == 3 && pit_rng_next(&rng) % 3 != 0);
                        m[(b * L + i * block + y) * L + j * block + x] = on;
                    }
            }
    return m;
}

/* kind: 0 random, 1 empty, 2 full (mask_values), 3 mixed (mixed_mask);
 * marks: build the index with flag_full, as core does for the fused kernel,
 * and check the marks themselves as well */
static void test_attention(pit_dtype dt, int64_t BH, int64_t L, int64_t D, int block, int kind, int mask_rank,
                           pit_dtype mdt, int marks)
{
    int64_t sq[3] = {BH, L, D}, sm[3] = {mask_rank == 3 ? BH : 1, L, L};
    double *q = randoms((size_t)(BH * L * D)), *k = randoms((size_t)(BH * L * D)), *v = randoms((size_t)(BH * L * D));
    double *mv = kind == 3 ? mixed_mask(sm[0], L, block) : mask_values(sm[0], L, L, block, block, 0.6, kind);
    dten Q = make(dt, 3, sq, q), K = make(dt, 3, sq, k), V = make(dt, 3, sq, v), O = make(dt, 3, sq, NULL);
    dten Mk = make(mdt, mask_rank, mask_rank == 3 ? sm : sm + 1, mv);
    /* a rank-2 mask is indexed once and shared by every head */
    dindex ix = build_index_marked(&Mk, mask_rank == 3 ? BH : 1, block, block, PIT_AXIS_K, marks);
    char what[128];
    snprintf(what, sizeof what, "attention %lldx%lldx%lld block %d %s mask rank %d %s%s", (long long)BH, (long long)L,
             (long long)D, block, kind_name[kind], mask_rank, dt_name(mdt), marks ? " marked" : "");
    if (marks) check_marks(&Mk, sm[0], &ix, 1, what);
    float scale = 1.0f / sqrtf((float)D);
    CHECK(be->attention_sparse(bctx, stream, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale));
    double *ref = malloc((size_t)(BH * L * D) * sizeof *ref);
    pit_ref_attention(BH, L, D, D, Q.h, K.h, V.h, Mk.h, mask_rank == 3, scale, ref);
    compare(what, &O, ref);
    /* detection in the call: as a kernel of its own, then inside the fused
     * kernel where it can be (whole blocks, aligned mask rows); the index it
     * leaves is checked too */
    for (int inside = 0; marks && inside < 2; ++inside) {
        pit_tdesc dv = detect_view(&Mk, mask_rank == 3 ? BH : 1);
        poison(&O);
        poison_index(&ix);
        setenv("PIT_CUDA_ATTENTION_DETECT", inside ? "inside" : "apart", 1);
        CHECK(be->attention_detect(bctx, stream, &dv, &ix.ix, &Q.d, &K.d, &V.d, &Mk.d, &O.d, scale));
        unsetenv("PIT_CUDA_ATTENTION_DETECT");
        char with[160];
        snprintf(with, sizeof with, "%s, detection in the call%s", what, inside ? " (inside)" : "");
        compare(with, &O, ref);
        check_marks(&Mk, sm[0], &ix, 1, with);
    }
    free(q), free(k), free(v), free(mv), free(ref);
    drop(&Q), drop(&K), drop(&V), drop(&O), drop(&Mk), drop_index(&ix);
}

/* MoE: every mode against the reference; ids include skipped -1 and E. */
static void test_moe(pit_dtype dt, int64_t T, int64_t H, int64_t N, int64_t E, int64_t k)
{
    int64_t sx[2] = {T, H}, sw[3] = {E, H, N}, sy[2] = {T, N}, sg[2] = {T, k};
    double *x = randoms((size_t)(T * H)), *w = randoms((size_t)(E * H * N)), *g = randoms((size_t)(T * k));
    double *dy = randoms((size_t)(T * N));
    double *idv = malloc((size_t)(T * k) * sizeof *idv);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
    for (int64_t i = 0; i < T * k; ++i) {
        uint64_t r = pit_rng_next(&rng) % (uint64_t)(E + 2);
        ids[i] = r == (uint64_t)E + 1 ? -1 : (int32_t)r; /* E and -1 are skipped */
        idv[i] = ids[i];
    }
    dten X = make(dt, 2, sx, x), W = make(dt, 3, sw, w), G = make(PIT_F32, 2, sg, g), DY = make(dt, 2, sy, dy);
    dten I = make(PIT_I32, 2, sg, idv), Y = make(dt, 2, sy, NULL), DX = make(dt, 2, sx, NULL);
    dten DW = make(dt, 3, sw, NULL), DG = make(PIT_F32, 2, sg, NULL);
    pit_index ix;
    memset(&ix, 0, sizeof ix);
    ix.tile = (pit_microtile){1, (int32_t)H, PIT_AXIS_M};
    ix.groups = ix.groups_per_batch = (int32_t)E;
    ix.capacity = (int32_t)(T * k);
    CHECK(be->mem_alloc(bctx, (size_t)E * 4, &ix.counts));
    CHECK(be->mem_alloc(bctx, (size_t)(E * T * k) * 4, &ix.entries));
    CHECK(be->mem_alloc(bctx, 4, &ix.total));
    CHECK(be->moe_route(bctx, stream, &I.d, &ix));
    int32_t *counts = malloc((size_t)E * 4), maxc = 0, total = 0, want = 0;
    CHECK(be->mem_read(bctx, stream, ix.counts, 0, counts, (size_t)E * 4));
    CHECK(be->mem_read(bctx, stream, ix.total, 0, &total, 4));
    for (int64_t e = 0; e < E; ++e) maxc = counts[e] > maxc ? counts[e] : maxc;
    for (int64_t i = 0; i < T * k; ++i) want += ids[i] >= 0 && ids[i] < E;
    char what[128];
    snprintf(what, sizeof what, "moe_route T %lld k %lld E %lld: %d routed", (long long)T, (long long)k, (long long)E,
             total);
    if (total != want) ++failures;
    printf("%s %s (expected %d)\n", total == want ? "ok  " : "FAIL", what, want);

    size_t nx = (size_t)(T * H), nw = (size_t)(E * H * N), ny = (size_t)(T * N), ng = (size_t)(T * k);
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8), *rdw = malloc(nw * 8), *rdg = malloc(ng * 8);
    pit_ref_moe_forward(T, H, N, E, k, X.h, ids, G.h, W.h, ry);
    pit_ref_moe_backward(T, H, N, E, k, X.h, ids, G.h, W.h, DY.h, rdx, rdw, rdg);
    pit_tile tile = {32, 64, 16, 128, 1, 0};
    CHECK(be->moe_matmul(bctx, stream, 0, &tile, &ix, maxc, &X.d, &W.d, &G.d, &Y.d));
    snprintf(what, sizeof what, "moe forward T %lld H %lld N %lld E %lld k %lld", (long long)T, (long long)H,
             (long long)N, (long long)E, (long long)k);
    compare(what, &Y, ry);
    CHECK(be->moe_matmul(bctx, stream, 1, &tile, &ix, maxc, &DY.d, &W.d, &G.d, &DX.d));
    snprintf(what, sizeof what, "moe dX T %lld H %lld N %lld E %lld k %lld", (long long)T, (long long)H,
             (long long)N, (long long)E, (long long)k);
    compare(what, &DX, rdx);
    CHECK(be->moe_matmul(bctx, stream, 2, &tile, &ix, maxc, &X.d, &DW.d, &G.d, &DY.d));
    snprintf(what, sizeof what, "moe dW (every expert written)");
    compare(what, &DW, rdw);
    CHECK(be->moe_matmul(bctx, stream, 3, &tile, &ix, maxc, &X.d, &W.d, &DG.d, &DY.d));
    snprintf(what, sizeof what, "moe dgates (0 for skipped ids)");
    compare(what, &DG, rdg);
    free(x), free(w), free(g), free(dy), free(idv), free(ids), free(counts);
    free(ry), free(rdx), free(rdw), free(rdg);
    drop(&X), drop(&W), drop(&G), drop(&DY), drop(&I), drop(&Y), drop(&DX), drop(&DW), drop(&DG);
    be->mem_free(bctx, ix.counts), be->mem_free(bctx, ix.entries), be->mem_free(bctx, ix.total);
}

static void test_rows(pit_dtype dt, int64_t B, int64_t M, int64_t K, int64_t N, int keep, int b_batched)
{
    int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, sc[3] = {B, M, N};
    double *a = randoms((size_t)(B * M * K)), *b = randoms((size_t)(B * K * N)), *c = randoms((size_t)(B * M * N));
    for (int64_t r = 0; r < B * M; ++r)
        if (pit_rng_uniform(&rng) > 0.3) memset(a + r * K, 0, (size_t)K * sizeof *a); /* padding rows */
    dten A = make(dt, 3, sa, a), Bm = make(dt, b_batched ? 3 : 2, b_batched ? sb : sb + 1, b), C = make(dt, 3, sc, c);
    pit_index ix;
    memset(&ix, 0, sizeof ix);
    dindex r = build_index(&A, B, 1, (int)K, PIT_AXIS_M);
    ix = r.ix;
    CHECK(be->matmul_rows(bctx, stream, NULL, &ix, r.max_entries, &A.d, &Bm.d, &C.d, keep));
    double *ref = malloc((size_t)(B * M * N) * sizeof *ref);
    memcpy(ref, C.h, (size_t)(B * M * N) * sizeof *ref);
    pit_ref_matmul_rows(B, M, N, K, A.h, Bm.h, b_batched, keep, ref);
    char what[128];
    snprintf(what, sizeof what, "matmul_rows %lldx%lldx%lldx%lld keep %d B batched %d", (long long)B, (long long)M,
             (long long)K, (long long)N, keep, b_batched);
    compare(what, &C, ref);
    free(a), free(b), free(c), free(ref);
    drop(&A), drop(&Bm), drop(&C), drop_index(&r);
}

static void test_elementwise(pit_dtype dt)
{
    int64_t s[3] = {3, 45, 77}, st[3] = {3, 77, 45};
    size_t n = 3 * 45 * 77;
    double *x = randoms(n), *ref = malloc(n * sizeof *ref);
    dten X = make(dt, 3, s, x), Y = make(dt, 3, s, NULL), T = make(dt, 3, st, NULL);
    CHECK(be->relu(bctx, stream, &X.d, &Y.d));
    pit_ref_relu(n, X.h, ref);
    compare("relu 3x45x77", &Y, ref);
    CHECK(be->transpose(bctx, stream, &X.d, &T.d));
    pit_ref_transpose(3, 45, 77, X.h, ref);
    compare("transpose 3x45x77", &T, ref);
    CHECK(be->relu(bctx, stream, &X.d, &X.d));
    pit_ref_relu(n, X.h, ref);
    compare("relu in place", &X, ref);
    free(x), free(ref);
    drop(&X), drop(&Y), drop(&T);
}

static int correctness(void)
{
    for (int d = 0; d < 3; ++d) {
        pit_dtype dt = dtypes[d];
        for (int kind = 0; kind < 3; ++kind) test_sddmm(dt, kind, kind == 0 ? 3 : 2, PIT_F32);
        test_sddmm(dt, 0, 2, PIT_I32);
        test_sddmm(dt, 0, 2, PIT_BF16);
        test_sddmm(dt, 0, 3, PIT_U8);
        for (int kind = 0; kind < 3; ++kind) test_softmax(dt, kind, 1, 32, 2);
        test_softmax(dt, 0, 4, 16, 3);
        test_softmax(dt, 0, 16, 8, 2);
        /* fused for 16-bit (blocks 64/128, head dims 64/128), composed otherwise */
        test_attention(dt, 3, 200, 64, 64, 0, 2, PIT_F32, 0);
        test_attention(dt, 2, 300, 128, 128, 0, 3, PIT_BF16, 0);
        test_attention(dt, 2, 256, 64, 128, 0, 2, PIT_F16, 0);
        test_attention(dt, 2, 130, 64, 64, 2, 2, PIT_I32, 0);
        test_attention(dt, 2, 100, 64, 64, 1, 2, PIT_F32, 0);
        test_attention(dt, 2, 70, 24, 32, 0, 3, PIT_F32, 0);
        /* "full" marks (flag_full, as core builds the index): the fused
         * kernel skips the mask of marked blocks; f32 and block 32 go the
         * composed way, which re-detects without marks */
        test_attention(dt, 2, 256, 64, 128, 2, 2, PIT_BF16, 1);  /* every block all on */
        test_attention(dt, 2, 512, 64, 128, 3, 2, PIT_BF16, 1);  /* full, partial, one-zero, empty */
        test_attention(dt, 3, 512, 64, 64, 3, 3, PIT_F16, 1);    /* per head */
        test_attention(dt, 2, 300, 64, 128, 3, 2, PIT_F32, 1);   /* L odd to the block: edges never marked */
        test_attention(dt, 2, 200, 128, 64, 2, 2, PIT_BF16, 1);  /* all on, L odd to the block */
        test_attention(dt, 2, 259, 64, 64, 3, 3, PIT_I32, 1);    /* odd L, 1-element loads */
        test_attention(dt, 2, 256, 64, 32, 3, 2, PIT_F32, 1);    /* blocks inside one detection region */
        test_attention(dt, 2, 100, 64, 64, 1, 2, PIT_BF16, 1);   /* every key masked: O = 0 */
        test_attention(dt, 2, 256, 64, 64, 1, 2, PIT_BF16, 1);   /* the same, detection inside the kernel */
        test_attention(dt, 3, 384, 64, 64, 3, 2, PIT_F32, 1);    /* f32 mask, detection inside */
        test_attention(dt, 2, 256, 128, 128, 3, 3, PIT_I32, 1);  /* i32 per-head mask, detection inside */
        test_attention(dt, 5, 1024, 64, 128, 0, 2, PIT_BF16, 1); /* more items than run at once */
        /* u8 (bool) masks: 8-byte detection loads, pair loads of 2 bytes */
        test_attention(dt, 2, 512, 64, 128, 3, 2, PIT_U8, 1);    /* full, partial, one-zero, empty */
        test_attention(dt, 3, 259, 64, 64, 3, 3, PIT_U8, 1);     /* odd L, per head, 1-byte loads */
        test_attention(dt, 2, 256, 64, 64, 0, 2, PIT_U8, 0);     /* unmarked */
        test_moe(dt, 77, 40, 72, 5, 1);
        test_moe(dt, 150, 64, 48, 7, 2);
        test_moe(dt, 33, 20, 30, 3, 1);
        test_rows(dt, 2, 50, 40, 24, 0, 0);
        test_rows(dt, 2, 50, 40, 24, 1, 1);
        test_rows(dt, 1, 77, 33, 19, 0, 0);
        test_elementwise(dt);
    }
    return failures;
}

/* ---- bench --------------------------------------------------------------------------- */
typedef void (*bench_fn)(void *user);

/* median of 20 timed runs after 3 warm-ups, device events */
static double time_ms(bench_fn fn, void *user)
{
    double ms;
    CHECK(test_median_ms(be, bctx, stream, fn, user, &ms, NULL));
    return ms;
}

/* the same, with the host's queueing time per run */
static double time_ms_host(bench_fn fn, void *user, double *host_ms)
{
    double ms;
    CHECK(test_median_ms(be, bctx, stream, fn, user, &ms, host_ms));
    return ms;
}

typedef struct attn_bench {
    dten Q, K, V, O, M, S, KT;
    dindex ix, full;
    pit_tdesc dv;
} attn_bench;

static void run_attention(void *u)
{
    attn_bench *b = u;
    CHECK(be->detect(bctx, stream, &b->M.d, &b->ix.ix, 1));
    CHECK(be->attention_sparse(bctx, stream, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

/* as core's pit_sparse_attention: detection handed over with the kernel */
static void run_attention_detect(void *u)
{
    attn_bench *b = u;
    CHECK(be->attention_detect(bctx, stream, &b->dv, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

static void run_attention_only(void *u)
{
    attn_bench *b = u;
    CHECK(be->attention_sparse(bctx, stream, &b->ix.ix, &b->Q.d, &b->K.d, &b->V.d, &b->M.d, &b->O.d, 0.125f));
}

static void run_detect(void *u)
{
    attn_bench *b = u;
    CHECK(be->detect(bctx, stream, &b->M.d, &b->ix.ix, 1));
}

static void run_dense_gemms(void *u)
{
    attn_bench *b = u;
    CHECK(be->matmul_dense(bctx, stream, &b->Q.d, &b->KT.d, &b->S.d));
    CHECK(be->matmul_dense(bctx, stream, &b->S.d, &b->V.d, &b->O.d));
}

static void run_dense_softmax(void *u)
{
    attn_bench *b = u;
    CHECK(be->softmax_sparse(bctx, stream, &b->full.ix, &b->S.d, &b->M.d, &b->S.d, 0.125f));
}

/* mask -> index -> output with b's mask (the index built on it, marked) */
static void bench_attention_mask(attn_bench *b, int64_t blk, int64_t D, int64_t BH)
{
    double host_all, t_all = time_ms_host(run_attention_detect, b, &host_all);
    setenv("PIT_CUDA_ATTENTION_DETECT", "apart", 1);
    double host_ap, t_ap = time_ms_host(run_attention_detect, b, &host_ap);
    unsetenv("PIT_CUDA_ATTENTION_DETECT");
    double t_seq = time_ms(run_attention, b);
    double t_det = time_ms(run_detect, b), t_att = time_ms(run_attention_only, b);
    double flops = 0;
    int32_t *counts = malloc((size_t)b->ix.ix.groups * 4);
    CHECK(be->mem_read(bctx, stream, b->ix.ix.counts, 0, counts, (size_t)b->ix.ix.groups * 4));
    for (int g = 0; g < b->ix.ix.groups; ++g) flops += 4.0 * blk * blk * D * counts[g] * BH;
    free(counts);
    printf("attention 1x16x8192x64 bf16, 128x128 block mask 0.9, %s mask: mask->index->output %.3f ms "
           "(detection inside the kernel, the default; host queueing %.3f ms a call; detect %.3f, fused kernel %.3f ms, "
           "%.0f TFLOP/s; detect then kernel, apart %.3f ms (PIT_CUDA_ATTENTION_DETECT=apart %.3f ms, host queueing "
           "%.3f ms))\n",
           dt_name(b->M.d.dtype), t_all, host_all, t_det, t_att, flops / t_att * 1e-9, t_seq, t_ap, host_ap);
}

static void bench_attention(void)
{
    const int64_t BH = 16, L = 8192, D = 64, blk = 128;
    attn_bench b;
    memset(&b, 0, sizeof b);
    int64_t sq[3] = {BH, L, D}, sm[2] = {L, L}, skt[3] = {BH, D, L}, ss[3] = {BH, L, L};
    size_t n = (size_t)(BH * L * D);
    double *x = randoms(n);
    b.Q = make(PIT_BF16, 3, sq, x), b.K = make(PIT_BF16, 3, sq, x), b.V = make(PIT_BF16, 3, sq, x);
    b.O = make(PIT_BF16, 3, sq, NULL);
    free(x);
    /* random 128x128 block mask at sparsity 0.9, shared by the heads: as
     * bf16 (the data's dtype) and as u8 (a bool mask), the same pattern */
    double *mv = mask_values(1, L, L, (int)blk, (int)blk, 0.9, 2);
    pit_ref_sparsify_tiles(&rng, mv, 1, L, L, (int)blk, (int)blk, 0, 0, 0.9);
    static const pit_dtype mask_dts[] = {PIT_BF16, PIT_U8};
    for (int i = 0; i < 2; ++i) {
        if (i) drop(&b.M), drop_index(&b.ix);
        b.M = make(mask_dts[i], 2, sm, mv);
        /* marked as core builds it for the fused kernel: every indexed block is all on */
        b.ix = build_index_marked(&b.M, 1, (int)blk, (int)blk, PIT_AXIS_K, 1);
        check_marks(&b.M, 1, &b.ix, 1, "bench mask: index marks");
        b.dv = detect_view(&b.M, 1);
        bench_attention_mask(&b, blk, D, BH);
    }
    free(mv);
    /* rough dense reference: Q.K^T and S.V with cuBLAS, softmax over all blocks */
    b.KT = make(PIT_BF16, 3, skt, NULL);
    CHECK(be->transpose(bctx, stream, &b.K.d, &b.KT.d));
    b.S = make(PIT_BF16, 3, ss, NULL);
    double *ones = malloc((size_t)(L * L) * sizeof *ones);
    for (int64_t i = 0; i < L * L; ++i) ones[i] = 1.0;
    drop(&b.M);
    b.M = make(PIT_BF16, 2, sm, ones);
    free(ones);
    b.full = build_index(&b.M, BH, 1, 8192, PIT_AXIS_K);
    double t_gemm = time_ms(run_dense_gemms, &b), t_sm = time_ms(run_dense_softmax, &b);
    printf("dense attention (cuBLAS Q.K^T + S.V %.3f ms, softmax %.3f ms): %.3f ms\n", t_gemm, t_sm, t_gemm + t_sm);
    drop(&b.Q), drop(&b.K), drop(&b.V), drop(&b.O), drop(&b.M), drop(&b.S), drop(&b.KT);
    drop_index(&b.ix), drop_index(&b.full);
}

typedef struct moe_bench {
    dten X, W, W0, G, I, Y;
    pit_index ix;
    int32_t T;
} moe_bench;

static void run_moe(void *u)
{
    moe_bench *b = u;
    pit_tile tile = {128, 128, 32, 256, 4, 1};
    CHECK(be->moe_route(bctx, stream, &b->I.d, &b->ix));
    /* max_entries = T: the tensor-core path plans on the device, no read-back */
    CHECK(be->moe_matmul(bctx, stream, 0, &tile, &b->ix, b->T, &b->X.d, &b->W.d, &b->G.d, &b->Y.d));
}

static void run_moe_dense(void *u)
{
    moe_bench *b = u;
    CHECK(be->matmul_dense(bctx, stream, &b->X.d, &b->W0.d, &b->Y.d));
}

/* a device-to-device copy of Y's bytes (from the weights): the copy
 * bandwidth of the memory floor */
static void run_moe_copy(void *u)
{
    moe_bench *b = u;
    CHECK(be->mem_copy(bctx, stream, b->Y.d.mem, b->Y.d.offset, b->W.d.mem, b->W.d.offset, b->Y.n * 2));
}

/* 64 expert loads from 4 to 1130 tokens summing to T (a power-law ramp) */
static void skewed_counts(int64_t T, int E, int32_t *c)
{
    int64_t sum = 0;
    for (int e = 0; e < E; ++e) {
        c[e] = 4 + (int32_t)(1126.0 * pow((double)e / (E - 1), 3.46));
        sum += c[e];
    }
    for (int e = E / 2; sum != T; e = e + 1 < E - 1 ? e + 1 : E / 2) {
        int32_t d = sum < T ? 1 : -1;
        if (c[e] + d >= 4 && c[e] + d <= 1130) c[e] += d, sum += d;
    }
}

/* expert loads of the MoE bench: "skewed" (the issue's), "even" (T / E
 * each) or "one" (every token to expert 0: one gathered dense GEMM); returns
 * the load's name for the bench line */
static const char *moe_loads(const char *kind, int64_t T, int E, int32_t *c)
{
    const int even = !strcmp(kind, "even"), one = !strcmp(kind, "one");
    for (int e = 0; e < E; ++e) c[e] = even ? (int32_t)(T / E) : one && e == 0 ? (int32_t)T : 0;
    if (even || one) return kind;
    skewed_counts(T, E, c);
    return "skewed (4..1130)";
}

static void bench_moe(const char *loads)
{
    const int64_t T = 16384, H = 1024, N = 4096, E = 64;
    moe_bench b;
    memset(&b, 0, sizeof b);
    b.T = (int32_t)T;
    int64_t sx[2] = {T, H}, sw[3] = {E, H, N}, sw0[2] = {H, N}, sy[2] = {T, N}, sg[2] = {T, 1};
    double *x = randoms((size_t)(E * H * N));
    b.X = make(PIT_BF16, 2, sx, x), b.W = make(PIT_BF16, 3, sw, x), b.W0 = make(PIT_BF16, 2, sw0, x);
    b.G = make(PIT_F32, 2, sg, x);
    free(x);
    int32_t counts[64];
    const char *load = moe_loads(loads, T, (int)E, counts);
    double *ids = malloc((size_t)T * sizeof *ids);
    int64_t at = 0;
    for (int e = 0; e < E; ++e)
        for (int i = 0; i < counts[e]; ++i) ids[at++] = e;
    for (int64_t i = T - 1; i > 0; --i) { /* tokens in random order */
        int64_t j = (int64_t)(pit_rng_next(&rng) % (uint64_t)(i + 1));
        double t = ids[i];
        ids[i] = ids[j], ids[j] = t;
    }
    b.I = make(PIT_I32, 2, sg, ids);
    free(ids);
    b.Y = make(PIT_BF16, 2, sy, NULL);
    b.ix.tile = (pit_microtile){1, (int32_t)H, PIT_AXIS_M};
    b.ix.groups = b.ix.groups_per_batch = (int32_t)E;
    b.ix.capacity = (int32_t)T;
    CHECK(be->mem_alloc(bctx, (size_t)E * 4, &b.ix.counts));
    CHECK(be->mem_alloc(bctx, (size_t)(E * T) * 4, &b.ix.entries));
    CHECK(be->mem_alloc(bctx, 4, &b.ix.total));
    double host_moe, t_moe = time_ms_host(run_moe, &b, &host_moe), t_dense = time_ms(run_moe_dense, &b);
    double flops = 2.0 * T * H * N;
    /* the memory floor: what the layer moves at least (the routed experts'
     * weights and X read once, Y written) at the copy bandwidth of this run;
     * with 64 experts' 512 MB of weights it lies above the dense GEMM */
    int used = 0;
    for (int e = 0; e < E; ++e) used += counts[e] > 0;
    const double bytes = 2.0 * ((double)used * H * N + (double)T * H + (double)T * N) + 8.0 * T;
    const double t_copy = time_ms(run_moe_copy, &b), bw = 2.0 * (double)b.Y.n * 2 / t_copy * 1e-9; /* TB/s */
    const double t_mem = bytes / bw * 1e-9, t_floor = t_mem > t_dense ? t_mem : t_dense;
    printf("moe 16384 tokens 1024->4096, 64 experts top-1 %s, bf16: routing->output %.3f ms "
           "(%.0f TFLOP/s, host queueing %.3f ms a call); dense GEMM of all tokens (cuBLAS) %.3f ms (%.0f TFLOP/s); "
           "ratio %.2f; memory floor %.3f ms (%.0f MB: the weights of the %d routed experts, X and Y, "
           "at the copy bandwidth %.2f TB/s); floor max(dense, memory) %.3f ms, pit/floor %.2f\n",
           load, t_moe, flops / t_moe * 1e-9, host_moe, t_dense, flops / t_dense * 1e-9, t_moe / t_dense, t_mem, bytes * 1e-6, used, bw, t_floor,
           t_moe / t_floor);
    drop(&b.X), drop(&b.W), drop(&b.W0), drop(&b.G), drop(&b.I), drop(&b.Y);
    be->mem_free(bctx, b.ix.counts), be->mem_free(bctx, b.ix.entries), be->mem_free(bctx, b.ix.total);
}

int main(int argc, char **argv)
{
    pit_device_info info;
    int loaded = load_cuda_plugin(&host, &be, &info);
    if (loaded != 0) return loaded;
    printf("device: %s %s, %s\n", info.name, info.arch, info.driver_version);
    CHECK(be->context_create(0, &(pit_switches){{0}}, &bctx));
    CHECK(be->stream_create(bctx, &stream));
    pit_rng_seed(&rng, 5);
    int rc = 0;
    if (argc > 1 && !strcmp(argv[1], "--bench")) {
        const char *only = argc > 2 ? argv[2] : "";
        if (strcmp(only, "moe")) bench_attention();
        if (strcmp(only, "attention")) bench_moe(argc > 3 ? argv[3] : "skewed");
    } else {
        rc = correctness();
    }
    be->stream_destroy(bctx, stream);
    be->context_destroy(bctx);
    be->shutdown();
    printf(rc ? "FAILED: %d failures\n" : "PASSED\n", rc);
    return rc ? 1 : 0;
}
