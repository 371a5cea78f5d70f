/*
 * test_cuda_ops_util.c - test_cuda_ops' device tensors, block indexes built
 * by the backend's detect, and comparisons with the CPU references.
 */
#include <math.h>
#include <string.h>

#include "test_cuda_ops.h"

const char *dt_name(pit_dtype d)
{
    return d == PIT_F32 ? "f32" : d == PIT_F16 ? "f16" : d == PIT_BF16 ? "bf16" : d == PIT_U8 ? "u8" : "i32";
}


size_t el_size(pit_dtype d)
{
    return d == PIT_F16 || d == PIT_BF16 ? 2 : d == PIT_U8 ? 1 : 4;
}

void to_bytes(pit_dtype dt, const double *x, size_t n, void *out)
{
    if (dt == PIT_I32)
        for (size_t i = 0; i < n; ++i) ((int32_t *)out)[i] = (int32_t)x[i];
    else pit_ref_from_double(dt, x, n, out);
}

/* NaN poison: all bits set */
void poison(const dten *t)
{
    CHECK(be->mem_fill32(bctx, stream, t->d.mem, 0, 0xffffffffu, (t->n * el_size(t->d.dtype) + 3) / 4 * 4));
}

/* A device tensor; data NULL: NaN poison. */
dten make(pit_dtype dt, int rank, const int64_t *shape, const double *data)
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

void download(const dten *t, double *out)
{
    void *raw = malloc(t->n * el_size(t->d.dtype) + 4);
    CHECK(be->mem_read(bctx, stream, t->d.mem, 0, raw, t->n * el_size(t->d.dtype)));
    pit_ref_to_double(t->d.dtype, raw, t->n, out);
    free(raw);
}

void drop(dten *t)
{
    be->mem_free(bctx, t->d.mem);
    free(t->h);
}

double *randoms(size_t n)
{
    double *x = malloc((n + 1) * sizeof *x);
    pit_ref_fill_random(&rng, x, n);
    return x;
}

/* 0/1 mask: whole br x bc blocks off with probability block_sparsity, then
 * single elements off with probability fine (kind: 0 random, 1 empty, 2 full) */
double *mask_values(int64_t batch, int64_t rows, int64_t cols, int br, int bc, double sparsity, int kind)
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


/* An index's counts, entries and total poisoned: detection must write
 * every one it leaves */
void poison_index(const dindex *r)
{
    const pit_index *ix = &r->ix;
    CHECK(be->mem_fill32(bctx, stream, ix->counts, 0, 0xffffffffu, (size_t)ix->groups * 4));
    CHECK(be->mem_fill32(bctx, stream, ix->entries, 0, 0xffffffffu, (size_t)ix->groups * (size_t)ix->capacity * 4));
    CHECK(be->mem_fill32(bctx, stream, ix->total, 0, 0xffffffffu, 4));
}

/* The mask as detect reads it: [batch, rows, cols], a rank-2 mask with
 * batch stride 0 (as core does) */
pit_tdesc detect_view(const dten *mask, int64_t batch)
{
    int64_t rows = mask->d.shape[mask->d.rank - 2], cols = mask->d.shape[mask->d.rank - 1];
    pit_tdesc v = mask->d;
    if (v.rank == 2 || batch == 1) {
        v.rank = 3;
        v.shape[0] = batch, v.shape[1] = rows, v.shape[2] = cols;
        v.strides[0] = mask->d.rank == 3 ? mask->d.strides[0] : 0;
        v.strides[1] = cols, v.strides[2] = 1;
    }
    return v;
}

/* marks: flag_full, as core asks for the fused attention (backend.h) */
dindex build_index_marked(const dten *mask, int64_t batch, int br, int bc, pit_axis axis, int marks)
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

dindex build_index(const dten *mask, int64_t batch, int br, int bc, pit_axis axis)
{
    return build_index_marked(mask, batch, br, bc, axis, 0);
}

/* Every entry of an axis-K index of mask (rows x cols, mb masks) against
 * the host: each non-zero block listed once, PIT_ENTRY_FULL exactly on the
 * blocks whose elements are all non-zero and that lie inside the mask (with
 * marks; never without). */
void check_marks(const dten *mask, int64_t mb, const dindex *r, int marks, const char *what)
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
                        nz += pit_ref_mask_on(mask->h[(b * rows + y) * cols + x]);
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

void drop_index(dindex *r)
{
    be->mem_free(bctx, r->ix.counts);
    be->mem_free(bctx, r->ix.entries);
    be->mem_free(bctx, r->ix.total);
}

void compare(const char *what, const dten *out, const double *ref)
{
    double *got = malloc((out->n + 1) * sizeof *got);
    download(out, got);
    double e = pit_ref_rel_error(ref, got, out->n), tol = pit_ref_tolerance(out->d.dtype);
    int ok = e <= tol;
    if (!ok) ++failures;
    printf("%s %-58s %-4s rel err %.2e\n", ok ? "ok  " : "FAIL", what, dt_name(out->d.dtype), e);
    free(got);
}

const pit_dtype test_dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
const char *const test_kind_names[] = {"random", "empty", "full", "mixed"};
