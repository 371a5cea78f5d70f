/*
 * cuda_kernels.c - kernel variants: the registry's names and embedded
 * sources (kernels/kernels.def), -D defines, the tile validity rules and
 * the one table of variants CI compiles.
 */
#include "cuda_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_model.h"
#include "pit_cuda_sources.h" /* generated from kernels/ at build time */

/* ---- the registry: kernels/kernels.def ---------------------------------- */
typedef struct kernel_entry {
    const char *id, *entry, *source;
} kernel_entry;

static const kernel_entry registry[PIT_CUDA_KERNEL_COUNT] = {
#define PIT_KERNEL(id, entry, source) {#id, entry, source},
#include "kernels/kernels.def"
#undef PIT_KERNEL
};

static const kernel_entry *entry_of(pit_cuda_kernel_kind kind)
{
    return (unsigned)kind < PIT_CUDA_KERNEL_COUNT ? &registry[kind] : NULL;
}

const char *pit_cuda_kernel_name(pit_cuda_kernel_kind kind)
{
    const kernel_entry *e = entry_of(kind);
    return e ? e->entry : "?";
}

const char *pit_cuda_kernel_source(pit_cuda_kernel_kind kind)
{
    const kernel_entry *e = entry_of(kind);
    for (int i = 0; e && i < pit_cuda_kernel_file_count; ++i)
        if (!strcmp(pit_cuda_kernel_files[i].name, e->source)) return pit_cuda_kernel_files[i].text;
    return NULL;
}

int pit_cuda_kernel_headers(const char *const **sources, const char *const **names)
{
    *sources = pit_cuda_header_texts;
    *names = pit_cuda_header_names;
    return pit_cuda_header_count;
}

/* "-DPIT_KERNEL_<id> ": the kernel a source holding several compiles */
static size_t kernel_define(pit_cuda_kernel_kind kind, char *buf, size_t size)
{
    const kernel_entry *e = entry_of(kind);
    int n = snprintf(buf, size, "-DPIT_KERNEL_%s ", e ? e->id : "UNKNOWN");
    return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

char *pit_cuda_variant_defines(const pit_cuda_variant *v, char *buf, size_t size)
{
    int dt = (int)v->dtype;
    size_t at = kernel_define(v->kind, buf, size);
    char *p = buf + at;
    size -= at;
    switch (v->kind) {
    case PIT_CUDA_DETECT:
        snprintf(p, size, "-DPIT_DTYPE=%d -DVEC=%d -DDETECT_H=%d -DDETECT_TW=%d", dt, v->vec, PIT_CUDA_DETECT_H,
                 PIT_CUDA_DETECT_TW);
        break;
    case PIT_CUDA_DETECT_STRIP:
        snprintf(p, size, "-DPIT_DTYPE=%d -DVEC=%d", dt, v->vec);
        break;
    case PIT_CUDA_DETECT_COLS:
        snprintf(p, size, "-DPIT_DTYPE=%d", dt);
        break;
    case PIT_CUDA_MATMUL:
        snprintf(p, size,
                 "-DPIT_DTYPE=%d -DBM=%d -DBN=%d -DBK=%d -DTHREADS=%d -DSTAGES=%d -DTC=%d "
                 "-DAXIS=%d -DMT_ROWS=%d -DMT_COLS=%d -DA_VEC=%d -DB_VEC=%d -DA_COMP=%d -DC_VEC=%d",
                 dt, v->tile.bm, v->tile.bn, v->tile.bk, v->tile.threads, v->tile.stages,
                 v->tile.tensor_core ? 1 : 0, (int)v->axis, v->mt_rows, v->mt_cols, v->a_vec,
                 v->b_vec, v->a_comp, v->c_vec);
        break;
    case PIT_CUDA_MATMUL_WG:
        snprintf(p, size, "-DPIT_DTYPE=%d -DMT_ROWS=%d -DBN=%d -DSTAGES=%d -DC_VEC=%d -DKT_MAX=%d -DCTA_ROWS=%d", dt,
                 v->mt_rows, v->tile.bn, v->tile.stages, v->c_vec, PIT_CUDA_ENGINE_KT_MAX, PIT_CUDA_ENGINE_ROWS);
        break;
    case PIT_CUDA_DECODE:
        snprintf(p, size, "-DPIT_DTYPE=%d -DMROWS=%d -DB_VEC=%d -DTHREADS=%d -DMIN_CTAS=%d -DCLUSTER=%d", dt, v->mt_rows,
                 v->b_vec, PIT_CUDA_DECODE_THREADS, pit_cuda_decode_min_ctas(v->mt_rows), v->cluster);
        break;
    case PIT_CUDA_DECODE_MMA:
        snprintf(p, size, "-DPIT_DTYPE=%d -DMT=%d", dt, v->mt_rows);
        break;
    case PIT_CUDA_ZERO:
    case PIT_CUDA_CONVERT:
    case PIT_CUDA_COMPACT:
        snprintf(p, size, "-DPIT_DTYPE=%d", dt);
        break;
    default:
        pit_cuda_model_defines(v, p, size);
        break;
    }
    return buf;
}

char *pit_cuda_variant_label(const pit_cuda_variant *v, char *buf, size_t size)
{
    char defines[512];
    snprintf(buf, size, "%s %s", pit_cuda_kernel_name(v->kind), pit_cuda_variant_defines(v, defines, sizeof defines));
    return buf;
}

/* ---- detection --------------------------------------------------------- */
int pit_cuda_detect_marks(const pit_index *ix)
{
    return ix->flag_full && ix->capacity < PIT_ENTRY_FULL;
}

/* A 1-row micro-tile is read off the rows' ballots (its columns whole
 * vectors), a taller one off the 16-row accumulators; along M one lane
 * holds a column's group (whole vectors again). */
int pit_cuda_strip_fits(const pit_index *ix, int vec)
{
    const pit_microtile *t = &ix->tile;
    int rows_ok = t->rows == 1 || (t->rows % PIT_DETECT_STRIP_G == 0 && PIT_DETECT_STRIP_H % t->rows == 0);
    int whole_vectors = t->cols > 0 && t->cols % vec == 0;
    return rows_ok && t->cols > 0 && PIT_CUDA_STRIP_W(vec) % t->cols == 0 &&
           (whole_vectors || (t->rows > 1 && t->axis != PIT_AXIS_M)) && !pit_cuda_detect_marks(ix);
}

void pit_cuda_detect_target(pit_detect_target *t, const pit_index *ix, int64_t cols)
{
    memset(t, 0, sizeof *t);
    t->tm = ix->tile.rows;
    t->tk = ix->tile.cols;
    t->axis = ix->tile.axis == PIT_AXIS_M ? 2 : 1;
    t->groups_per_batch = ix->groups_per_batch;
    t->capacity = ix->capacity;
    t->tiles_cols = (int32_t)((cols + t->tk - 1) / t->tk);
    t->counts = (uint64_t)(uintptr_t)ix->counts;
    t->entries = (uint64_t)(uintptr_t)ix->entries;
    t->total = (uint64_t)(uintptr_t)ix->total;
}

/* ---- tile rules: mirror the constexpr pickers of pit_matmul.cu ---------- */
static int cuda_core_layout_exists(int bm, int bn, int threads)
{
    if ((bm * bn) % threads) return 0;
    int out = bm * bn / threads;
    for (int tm = 1; tm <= 16; tm *= 2) {
        if (bm % tm || out % tm) continue;
        int tn = out / tm;
        if (tn >= 1 && bn % tn == 0 && (bm / tm) * (bn / tn) == threads) return 1;
    }
    return 0;
}

static int tensor_core_layout_exists(int bm, int bn, int threads)
{
    int warps = threads / 32;
    for (int wm = 1; wm <= warps; ++wm) {
        if (warps % wm || bm % wm) continue;
        int wn = warps / wm;
        if (bn % wn) continue;
        if ((bm / wm) % 16 == 0 && (bn / wn) % 16 == 0) return 1;
    }
    return 0;
}

/* The engine (pit_matmul_wg.cu): a CTA's rows of A and bn of B a 64-deep
 * stage, its barriers, the presence words and the swizzle's alignment. */
static int engine_smem_bytes(const pit_tile *t)
{
    return t->stages * (PIT_CUDA_ENGINE_ROWS + t->bn) * 64 * 2 + 16 * t->stages + PIT_CUDA_ENGINE_KT_MAX * 4 + 1024;
}

static int engine_tile_valid(pit_dtype dtype, const pit_tile *t, const char **why)
{
    if (dtype == PIT_F32) {
        *why = "the tensor-core engine takes f16/bf16";
        return 0;
    }
    if ((t->bm != 16 && t->bm != 32 && t->bm != 64) || (t->bn != 128 && t->bn != 256) || t->bk != 64 ||
        t->threads != PIT_CUDA_ENGINE_THREADS || t->stages < 2) {
        *why = "engine tiles are 16, 32 or 64 rows x 128 or 256 x 64, 384 threads, 2 stages or more";
        return 0;
    }
    if (engine_smem_bytes(t) > 227 * 1024) {
        *why = "shared memory above 227 KB";
        return 0;
    }
    return 1;
}

static int tile_smem_bytes(pit_dtype dtype, const pit_tile *t)
{
    int stages = t->stages < 2 ? 2 : t->stages;
    if (t->tensor_core) return stages * (t->bm * (t->bk + 8) + t->bk * (t->bn + 8)) * 2;
    (void)dtype;
    return stages * (t->bk * (t->bm + 4) + t->bk * (t->bn + 4)) * 4;
}

int pit_cuda_tile_valid(pit_dtype dtype, const pit_tile *t, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    if (t->tensor_core == PIT_TILE_ENGINE) return engine_tile_valid(dtype, t, why);
    if (t->bm < 1 || t->bn < 1 || t->bk < 1 || t->bm > 256 || t->bn > 256 || t->bk > 128) {
        *why = "tile sizes outside 1..256 (bk 1..128)";
        return 0;
    }
    if (t->threads < 32 || t->threads > 1024 || t->threads % 32) {
        *why = "threads must be a multiple of 32 in 32..1024";
        return 0;
    }
    if (t->stages > 8) {
        *why = "at most 8 pipeline stages";
        return 0;
    }
    if (t->tensor_core) {
        if (dtype == PIT_F32) {
            *why = "tensor-core tiles take f16/bf16";
            return 0;
        }
        if (t->bk % 16 || t->bn % 16 || !tensor_core_layout_exists(t->bm, t->bn, t->threads)) {
            *why = "no warp layout: warp tiles must be multiples of 16x16";
            return 0;
        }
        int acc = (t->bm * t->bn) / t->threads;
        if (acc > 128) {
            *why = "more than 128 accumulators per thread";
            return 0;
        }
    } else {
        if (!cuda_core_layout_exists(t->bm, t->bn, t->threads)) {
            *why = "no thread layout: bm*bn/threads must split into a TMxTN block";
            return 0;
        }
        if ((t->bm * t->bn) / t->threads > 128) {
            *why = "more than 128 accumulators per thread";
            return 0;
        }
    }
    if (tile_smem_bytes(dtype, t) > 227 * 1024) {
        *why = "shared memory above 227 KB";
        return 0;
    }
    return 1;
}

/* The engine runs on sm_90 (wgmma) along K, whole 64-wide steps of
 * micro-tile columns, A and B read by the copy engine (16-byte rows). */
static int engine_variant(int arch, pit_dtype dt, const pit_microtile *mt, const pit_cuda_mm_align *al,
                          pit_cuda_variant *v, const char **why)
{
    v->kind = PIT_CUDA_MATMUL_WG;
    v->tile.bm = mt->rows;
    if (!pit_cuda_tile_valid(dt, &v->tile, why)) return 0;
    if (arch != 90) *why = "the tensor-core engine needs sm_90 (wgmma)";
    else if (mt->axis != PIT_AXIS_K || mt->cols % 64) *why = "the engine gathers along K, micro-tile columns by 64";
    else if (!al->a || !al->b) *why = "the engine needs A's and B's rows 16-byte aligned";
    else {
        v->a_vec = v->b_vec = 1;
        v->c_vec = al->c;
        return 1;
    }
    return 0;
}

int pit_cuda_matmul_variant(int arch, pit_dtype dt, const pit_tile *tile, const pit_microtile *mt,
                            const pit_cuda_mm_align *al, pit_cuda_variant *v, const char **why)
{
    const char *dummy;
    if (!why) why = &dummy;
    memset(v, 0, sizeof *v);
    v->kind = PIT_CUDA_MATMUL;
    v->dtype = dt;
    v->axis = mt->axis;
    v->mt_rows = mt->rows;
    v->mt_cols = mt->cols;
    pit_tile *t = &v->tile;
    *t = *tile;
    if (t->stages < 2) t->stages = 2;
    if (t->tensor_core == PIT_TILE_ENGINE) return engine_variant(arch, dt, mt, al, v, why);
    if (mt->axis == PIT_AXIS_K) t->bm = mt->rows;
    t->tensor_core = t->tensor_core && dt != PIT_F32 && arch >= 80 && t->bm >= 16;
    /* a tile made short by a 1-row micro-tile has fewer outputs than the
     * tile's threads: halve them until each thread owns one */
    while (!t->tensor_core && t->threads > 32 && t->bm * t->bn < t->threads) t->threads /= 2;
    if (!pit_cuda_tile_valid(dt, t, why)) return 0;
    int vec = dt == PIT_F32 ? 4 : 8;
    v->a_vec = al->a && mt->cols % vec == 0 && t->bk % vec == 0;
    v->b_vec = al->b && t->bn % vec == 0;
    /* axis K with micro-tiles narrower than a 16-byte vector (32x1): gather
     * A densely first (pit_compact), then read it with 16-byte copies */
    if (mt->axis == PIT_AXIS_K && !v->a_vec && !al->few_rows && t->bk % vec == 0) {
        v->a_comp = 1;
        v->a_vec = 1;
    }
    /* SWrite vectors: C's rows (axis K, and axis M for f32, which reduces
     * into C) or the f32 scratch (axis M, 16-bit: ld = N) 16-byte aligned */
    v->c_vec = mt->axis == PIT_AXIS_K || dt == PIT_F32 ? al->c : al->n4;
    return 1;
}

const char *pit_cuda_tiledb_family(int arch)
{
    return arch >= 90 ? "nvidia-sm90" : arch >= 80 ? "nvidia-sm80" : "nvidia-sm70";
}

/* ---- the one table of variants CI compiles ------------------------------ */
/* Dense tiles the backend supports, per compute path. threads follow the
 * tile area (4 warps up to 64x64, 8 above). */
static const int menu_bm[] = {32, 64, 128};
static const int menu_bn[] = {64, 128};
static const int menu_bk_cc[] = {8, 16, 32};
static const int menu_bk_tc[] = {32, 64};
/* 3 stages runs the same code as 2 and 4 (a loop bound), so CI checks 2 and 4 */
static const int menu_stages_tc[] = {2, 4};
/* extra row-chunk heights for axis M (gathered rows) */
static const int menu_bm_axis_m[] = {1, 16};

static int menu_threads(int bm, int bn)
{
    if (bm * bn >= 8192) return 256;
    if (bm * bn <= 128) return 64;
    return 128;
}

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { V_A = 1, V_B = 2, V_COMP = 4, V_C = 8, V_ALIGNED = V_A | V_B | V_C };

static int emit_matmul(pit_dtype dt, const pit_tile *t, pit_axis axis, int mt_rows, int mt_cols, int flags,
                       pit_cuda_variant_fn fn, void *user)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_MATMUL;
    v.dtype = dt;
    v.tile = *t;
    v.axis = axis;
    v.mt_rows = mt_rows;
    v.mt_cols = mt_cols;
    v.a_vec = !!(flags & V_A);
    v.b_vec = !!(flags & V_B);
    v.a_comp = !!(flags & V_COMP);
    v.c_vec = !!(flags & V_C);
    if (!pit_cuda_tile_valid(dt, t, NULL)) return 0;
    fn(&v, user);
    return 1;
}

/* The three micro-tiles of the paper for one tile: k32x64-like (16-byte
 * gather of A), k32x1-like (A compacted by pit_compact first), m1x64. */
static int emit_tile(pit_dtype dt, const pit_tile *t, pit_cuda_variant_fn fn, void *user)
{
    int n = 0;
    n += emit_matmul(dt, t, PIT_AXIS_K, t->bm, 64, V_ALIGNED, fn, user);
    n += emit_matmul(dt, t, PIT_AXIS_K, t->bm, 1, V_ALIGNED | V_COMP, fn, user);
    n += emit_matmul(dt, t, PIT_AXIS_M, 1, 64, V_ALIGNED, fn, user);
    return n;
}

/* wide tiles for the axis-K row-blocks of 32 (BM is the micro-tile's rows,
 * so the width carries the arithmetic per load); 32x64 on 64 threads gives
 * each thread a 4x8 block: half the shared-memory reads per FFMA of the
 * menu's 128 threads (4x4), the bound of the f32 kernels (32 deep it needs
 * 128 registers and lost to 8 and 16 deep) */
static const pit_tile wide_cc[] = {
    {32, 256, 16, 128, 2, 0}, {32, 256, 32, 128, 2, 0}, {32, 64, 8, 64, 2, 0}, {32, 64, 16, 64, 2, 0}};
static const pit_tile wide_tc[] = {{32, 256, 32, 128, 4, 1}, {32, 256, 32, 256, 4, 1}, {32, 256, 64, 128, 3, 1}};

static int emit_dtype(pit_dtype dt, int arch, pit_cuda_variant_fn fn, void *user)
{
    int tc = dt != PIT_F32 && arch >= 80;
    int n = 0;
    for (int i = 0; i < COUNT(menu_bm); ++i) {
        for (int j = 0; j < COUNT(menu_bn); ++j) {
            pit_tile t = {menu_bm[i], menu_bn[j], 0, menu_threads(menu_bm[i], menu_bn[j]), 2, tc};
            if (!tc) {
                for (int k = 0; k < COUNT(menu_bk_cc); ++k) {
                    t.bk = menu_bk_cc[k];
                    n += emit_tile(dt, &t, fn, user);
                }
                continue;
            }
            for (int k = 0; k < COUNT(menu_bk_tc); ++k) {
                for (int s = 0; s < COUNT(menu_stages_tc); ++s) {
                    t.bk = menu_bk_tc[k];
                    t.stages = menu_stages_tc[s];
                    n += emit_tile(dt, &t, fn, user);
                }
            }
        }
    }
    const pit_tile *wide = tc ? wide_tc : wide_cc;
    int nwide = tc ? COUNT(wide_tc) : COUNT(wide_cc);
    for (int i = 0; i < nwide; ++i) {
        pit_tile t = wide[i];
        t.tensor_core = tc;
        n += emit_tile(dt, &t, fn, user);
    }
    /* axis M row chunks below the menu, and one unaligned (scalar) variant */
    for (int i = 0; i < COUNT(menu_bm_axis_m); ++i) {
        for (int j = 0; j < COUNT(menu_bn); ++j) {
            int bm = menu_bm_axis_m[i], bn = menu_bn[j];
            pit_tile t = {bm, bn, 32, menu_threads(bm, bn), 2, tc && bm >= 16};
            n += emit_matmul(dt, &t, PIT_AXIS_M, 1, 64, V_ALIGNED, fn, user);
        }
    }
    pit_tile t = {32, 64, 32, 128, 2, tc};
    n += emit_matmul(dt, &t, PIT_AXIS_K, 32, 1, 0, fn, user);
    n += emit_matmul(dt, &t, PIT_AXIS_M, 1, 64, 0, fn, user);
    return n;
}

int pit_cuda_decode_rows(int64_t m)
{
    return m <= 1 ? 1 : m <= PIT_CUDA_DECODE_MAX_ROWS ? PIT_CUDA_DECODE_MAX_ROWS : 0;
}

/* 8 warps a CTA; 1 row at 64 registers (4 CTAs an SM), 4 rows at 85 (3). */
int pit_cuda_decode_min_ctas(int mrows)
{
    return mrows > 1 ? 3 : 4;
}

/* The decode kernel for every register height and B alignment, on sm_90
 * also with its shares in clusters. */
static int emit_decode(pit_dtype dt, int arch, pit_cuda_variant_fn fn, void *user)
{
    static const int heights[] = {1, PIT_CUDA_DECODE_MAX_ROWS};
    int n = 0;
    for (int h = 0; h < COUNT(heights); ++h)
        for (int form = 0; form < (arch == 90 ? 4 : 2); ++form) {
            pit_cuda_variant v;
            memset(&v, 0, sizeof v);
            v.kind = PIT_CUDA_DECODE;
            v.dtype = dt;
            v.mt_rows = heights[h];
            v.b_vec = form & 1;
            v.cluster = form >> 1;
            fn(&v, user);
            n++;
        }
    return n;
}

/* The tensor-core decode kernel (sm_80+, 16-bit) for both row-block heights. */
static int emit_decode_mma(pit_dtype dt, pit_cuda_variant_fn fn, void *user)
{
    static const int heights[] = {16, 32};
    for (int h = 0; h < COUNT(heights); ++h) {
        pit_cuda_variant v;
        memset(&v, 0, sizeof v);
        v.kind = PIT_CUDA_DECODE_MMA;
        v.dtype = dt;
        v.mt_rows = heights[h];
        fn(&v, user);
    }
    return COUNT(heights);
}

/* The engine's variants (sm_90): every row-block height, width and C
 * alignment at 3 and 4 stages, made by the run time's rule. */
static int emit_engine(pit_dtype dt, pit_cuda_variant_fn fn, void *user)
{
    static const int rows[] = {16, 32, 64}, widths[] = {128, 256}, stages[] = {3, 4};
    int n = 0;
    for (int r = 0; r < COUNT(rows); ++r)
        for (int w = 0; w < COUNT(widths); ++w)
            for (int s = 0; s < COUNT(stages); ++s)
                for (int c = 0; c < 2; ++c) {
                    const pit_tile t = {rows[r], widths[w], 64, PIT_CUDA_ENGINE_THREADS, stages[s], PIT_TILE_ENGINE};
                    const pit_microtile mt = {rows[r], 64, PIT_AXIS_K};
                    const pit_cuda_mm_align al = {1, 1, c, 1, 0};
                    pit_cuda_variant v;
                    if (!pit_cuda_matmul_variant(90, dt, &t, &mt, &al, &v, NULL)) continue;
                    fn(&v, user);
                    n++;
                }
    return n;
}

int pit_cuda_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user)
{
    static const pit_dtype dtypes[] = {PIT_F32, PIT_F16, PIT_BF16};
    int n = 0;
    for (int d = 0; d < COUNT(dtypes); ++d) {
        pit_cuda_variant v;
        memset(&v, 0, sizeof v);
        v.dtype = dtypes[d];
        v.kind = PIT_CUDA_DETECT;
        v.vec = 1;
        fn(&v, user);
        v.vec = 16 / (int)(dtypes[d] == PIT_F32 ? 4 : 2);
        fn(&v, user);
        v.kind = PIT_CUDA_DETECT_STRIP;
        fn(&v, user);
        v.kind = PIT_CUDA_DETECT_COLS;
        v.vec = 0;
        fn(&v, user);
        v.kind = PIT_CUDA_CONVERT;
        v.vec = 0;
        fn(&v, user);
        v.kind = PIT_CUDA_COMPACT;
        fn(&v, user);
        n += emit_decode(dtypes[d], arch, fn, user);
        n += 6;
        n += emit_dtype(dtypes[d], arch, fn, user);
        if (arch >= 80 && dtypes[d] != PIT_F32) n += emit_decode_mma(dtypes[d], fn, user);
        if (arch == 90 && dtypes[d] != PIT_F32) n += emit_engine(dtypes[d], fn, user);
    }
    /* detection of the masks that are no operand dtype: u8 (bool) with
     * 8-byte and 1-byte loads, i32 with 16-byte and 4-byte loads; the
     * strips' 16-byte loads of both */
    static const struct { pit_cuda_kernel_kind kind; pit_dtype dtype; int vec; } masks[] = {
        {PIT_CUDA_DETECT, PIT_U8, 1},        {PIT_CUDA_DETECT, PIT_U8, 8},       {PIT_CUDA_DETECT, PIT_I32, 1},
        {PIT_CUDA_DETECT, PIT_I32, 4},       {PIT_CUDA_DETECT_STRIP, PIT_U8, 16}, {PIT_CUDA_DETECT_STRIP, PIT_I32, 4},
        {PIT_CUDA_DETECT_COLS, PIT_U8, 0},   {PIT_CUDA_DETECT_COLS, PIT_I32, 0}};
    for (int i = 0; i < COUNT(masks); ++i, ++n) {
        pit_cuda_variant u;
        memset(&u, 0, sizeof u);
        u.kind = masks[i].kind;
        u.dtype = masks[i].dtype;
        u.vec = masks[i].vec;
        fn(&u, user);
    }
    pit_cuda_variant z;
    memset(&z, 0, sizeof z);
    z.kind = PIT_CUDA_ZERO;
    z.dtype = PIT_F32;
    fn(&z, user);
    return n + 1 + pit_cuda_model_for_each_variant(arch, fn, user);
}

typedef struct variant_array {
    pit_cuda_variant *v;
    int count, cap, failed;
} variant_array;

static void append_variant(const pit_cuda_variant *v, void *user)
{
    variant_array *a = user;
    if (a->failed) return;
    if (a->count == a->cap) {
        int cap = a->cap ? 2 * a->cap : 256;
        pit_cuda_variant *grown = realloc(a->v, (size_t)cap * sizeof *grown);
        if (!grown) {
            a->failed = 1;
            return;
        }
        a->v = grown;
        a->cap = cap;
    }
    a->v[a->count++] = *v;
}

pit_cuda_variant *pit_cuda_variant_list(int arch, int *count)
{
    variant_array a = {0};
    pit_cuda_for_each_variant(arch, append_variant, &a);
    if (a.failed) {
        free(a.v);
        a.v = NULL, a.count = 0;
    }
    *count = a.count;
    return a.v;
}

int pit_cuda_split_options(char *defines, const char **opts, int max)
{
    int n = 0;
    char *p = defines;
    while (*p && n < max) {
        while (*p == ' ') *p++ = 0;
        if (!*p) break;
        opts[n++] = p;
        while (*p && *p != ' ') ++p;
    }
    return n;
}

pit_status pit_kernel_cache_get(const pit_host *host, pthread_mutex_t *lock,
                                pit_kernel_link **head, void *ctx, const pit_cuda_variant *v,
                                pit_kernel_build_fn build, pit_kernel_release_fn release,
                                pit_kernel_link **out)
{
    /* A call asks for the variant it asked for before: found by its bytes,
     * without formatting its label (which was more than half of a settled
     * call's own host work). A variant that differs only in bytes its label
     * ignores is found by the label. */
    pthread_mutex_lock(lock);
    for (pit_kernel_link *k = *head; k; k = k->next) {
        if (!memcmp(&k->variant, v, sizeof *v)) {
            pthread_mutex_unlock(lock);
            *out = k;
            return PIT_SUCCESS;
        }
    }
    char key[PIT_CUDA_LABEL_MAX];
    pit_cuda_variant_label(v, key, sizeof key);
    for (pit_kernel_link *k = *head; k; k = k->next) {
        if (!strcmp(k->key, key)) {
            pthread_mutex_unlock(lock);
            *out = k;
            return PIT_SUCCESS;
        }
    }
    pit_kernel_link *k = NULL;
    pit_status st = build(ctx, v, key, &k);
    if (st == PIT_SUCCESS && !(k->key = strdup(key))) {
        release(k);
        st = host->error(PIT_ERR_OUT_OF_MEMORY, "out of host memory for kernel %s", key);
    }
    if (st == PIT_SUCCESS) {
        k->variant = *v;
        k->next = *head;
        *head = k;
        *out = k;
    }
    pthread_mutex_unlock(lock);
    return st;
}

void pit_kernel_cache_clear(pit_kernel_link **head, pit_kernel_release_fn release)
{
    pit_kernel_link *k = *head;
    while (k) {
        pit_kernel_link *next = k->next;
        free(k->key);
        release(k);
        k = next;
    }
    *head = NULL;
}
