/*
 * matmul.c - the fused PIT matmul on CUDA (SRead, tile product, SWrite along
 * K or M: kernels/pit_matmul.cu, with pit_util.cu's compaction and f32
 * helpers) and the dense GEMM through cuBLAS.
 */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "cuda_libs.h"

/* ---- sparse matmul ----------------------------------------------------------- */
#define AXIS_K_MIN_SPLIT_CHUNKS 4 /* chunks of a full index each share keeps, at least */
#define AXIS_K_MAX_SPLITS 64
#define DECODE_MIN_SHARE 64 /* gathered rows of a full index per decode CTA, at least */
typedef struct mm_problem {
    pit_cuda_view a, b, c;
    pit_dtype dt;
    int64_t M, N, K, batch;
} mm_problem;

/* A, B and C as views; core checked their shapes and dtypes */
static pit_status matmul_views(const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C, mm_problem *p)
{
    pit_status st;
    if ((st = pit_cuda_view_of(A, "matmul", "A", 0, &p->a)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(B, "matmul", "B", 0, &p->b)) != PIT_SUCCESS ||
        (st = pit_cuda_view_of(C, "matmul", "C", 0, &p->c)) != PIT_SUCCESS)
        return st;
    p->dt = A->dtype;
    p->M = p->a.rows;
    p->K = p->a.cols;
    p->N = p->b.cols;
    p->batch = p->a.batch;
    return PIT_SUCCESS;
}

static void fill_pit_mm_args(const mm_problem *p, const pit_index *idx, pit_mm_args *a)
{
    memset(a, 0, sizeof *a);
    a->a = p->a.ptr;
    a->b = p->b.ptr;
    a->c = p->c.ptr;
    a->lda = p->a.ld;
    a->ldb = p->b.ld;
    a->ldc = p->c.ld;
    a->sa = p->a.bs;
    a->sb = p->b.bs;
    a->sc = p->c.bs;
    a->M = (int32_t)p->M;
    a->N = (int32_t)p->N;
    a->K = (int32_t)p->K;
    a->counts = (uint64_t)(uintptr_t)idx->counts;
    a->entries = (uint64_t)(uintptr_t)idx->entries;
    a->capacity = idx->capacity;
    a->groups_per_batch = idx->groups_per_batch;
}

static pit_status launch_util(pit_cuda_ctx *c, CUstream s, pit_cuda_kernel_kind kind, pit_dtype dt, pit_util_args *u,
                              int64_t batch)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = kind;
    v.dtype = kind == PIT_CUDA_ZERO ? PIT_F32 : dt;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    unsigned gy = (unsigned)(u->rows < 4096 ? u->rows : 4096);
    return pit_cuda_launch(k, s, (unsigned)pit_cuda_cdiv(u->cols, 256), gy, (unsigned)batch, 256, u,
                           kind == PIT_CUDA_ZERO ? PIT_CALL(LaunchKernel) "(pit_zero_f32)"
                                                 : PIT_CALL(LaunchKernel) "(pit_convert_f32)");
}

/* SRead as a gather pass: A's indexed micro-tile columns copied densely
 * per row-block into scratch (ld = ldo), read by the fused kernel with
 * 16-byte cp.async. Grid from the capacity: nothing is read back. */
static pit_status compact_a(pit_cuda_ctx *c, CUstream s, const mm_problem *p, const pit_index *idx, int64_t row_blocks,
                            CUdeviceptr out, int64_t ldo)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_COMPACT;
    v.dtype = p->dt;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    pit_compact_args a;
    memset(&a, 0, sizeof a);
    a.a = p->a.ptr;
    a.out = (uint64_t)out;
    a.lda = p->a.ld;
    a.sa = p->a.bs;
    a.ldo = ldo;
    a.so = row_blocks * idx->tile.rows * ldo;
    a.M = (int32_t)p->M;
    a.K = (int32_t)p->K;
    a.tm = idx->tile.rows;
    a.tk = idx->tile.cols;
    a.counts = (uint64_t)(uintptr_t)idx->counts;
    a.entries = (uint64_t)(uintptr_t)idx->entries;
    a.capacity = idx->capacity;
    a.groups_per_batch = idx->groups_per_batch;
    int64_t cols = ldo;
    if (cols <= 0) return PIT_SUCCESS;
    return pit_cuda_launch(k, s, (unsigned)pit_cuda_cdiv(cols, 256), (unsigned)row_blocks, (unsigned)p->batch, 256, &a,
                           PIT_CALL(LaunchKernel) "(pit_compact)");
}

/* CTAs of kernel k one SM holds at once, from its shared memory and threads
 * (registers allowing: the tiles keep under 64 per thread at 256). */
static int64_t resident_per_sm(const pit_cuda_ctx *c, const pit_cuda_kernel *k, int threads)
{
    const int64_t smem_sm = (int64_t)c->smem_optin + 1024, per_cta = (int64_t)k->smem_bytes + 1024;
    int64_t by_smem = smem_sm / per_cta, by_threads = 2048 / (threads > 0 ? threads : 256);
    int64_t n = by_smem < by_threads ? by_smem : by_threads;
    return n < 1 ? 1 : n > 32 ? 32 : n;
}

/* Shares of K per row-block, for a grid of ctas CTAs of which an SM holds
 * per_sm: 1 when the grid fills the device; more when it does not (few
 * rows: decode), so every SM streams gathered rows of B. At most `most`
 * (each share keeps enough of a full index), and the f32 partials stay
 * under an eighth of B's bytes. */
static int k_shares(const pit_cuda_ctx *c, int64_t per_sm, int64_t ctas, int64_t most, const mm_problem *p)
{
    const int64_t wave = per_sm * c->sm_count;
    if (ctas <= 0 || ctas >= wave) return 1;
    int64_t splits = wave / ctas; /* whole waves: a few CTAs past one would double the time */
    const int64_t by_bytes = p->K * (int64_t)pit_cuda_el_bytes(p->dt) / (8 * 4 * (p->M > 0 ? p->M : 1));
    if (splits > most) splits = most;
    if (splits > by_bytes) splits = by_bytes;
    return splits < 1 ? 1 : (int)splits;
}

/* The tile kernel's shares: each keeps AXIS_K_MIN_SPLIT_CHUNKS chunks of a full index. */
static int axis_k_splits(const pit_cuda_ctx *c, const pit_cuda_kernel *k, const pit_cuda_variant *v,
                         const mm_problem *p, const pit_index *idx, int64_t row_blocks)
{
    const int64_t ctas = row_blocks * pit_cuda_cdiv(p->N, v->tile.bn) * p->batch;
    const int64_t chunks = pit_cuda_cdiv((int64_t)idx->capacity * idx->tile.cols, v->tile.bk);
    int64_t most = chunks / AXIS_K_MIN_SPLIT_CHUNKS;
    if (most > AXIS_K_MAX_SPLITS) most = AXIS_K_MAX_SPLITS;
    return k_shares(c, resident_per_sm(c, k, v->tile.threads), ctas, most, p);
}

/* The shares' f32 partials summed into C, in share order (deterministic). */
static pit_status sum_splits(pit_cuda_ctx *c, CUstream s, const mm_problem *p, CUdeviceptr ws, int64_t ldw,
                             int splits)
{
    pit_util_args u = {0};
    u.f32 = ws;
    u.ld32 = ldw;
    u.s32 = p->M * ldw;
    u.nsum = splits;
    u.out = p->c.ptr;
    u.ldo = p->c.ld;
    u.so = p->c.bs;
    u.rows = (int32_t)p->M;
    u.cols = (int32_t)p->N;
    return launch_util(c, s, PIT_CUDA_CONVERT, p->dt, &u, p->batch);
}

/* Launches kernel k over gx x gy x (batch x splits) CTAs: with several
 * shares of K, each stores an f32 partial slab. tiles 0: sum_splits adds
 * the slabs into C afterwards; else the kernel does (the decode kernels:
 * the last share to arrive at a tile of C sums them), counting arrivals in
 * `tiles` counters after the slabs, zeroed here. */
static pit_status launch_shares(pit_cuda_ctx *c, CUstream s, const mm_problem *p, const pit_cuda_kernel *k,
                                int splits, unsigned gx, unsigned gy, unsigned threads, int64_t tiles, pit_mm_args *a,
                                const char *what)
{
    CUdeviceptr ws = 0;
    const int64_t ldw = pit_cuda_cdiv(p->N, 4) * 4; /* float4 rows */
    const size_t slab_bytes = (size_t)(splits * p->batch * p->M * ldw) * 4;
    pit_status st = PIT_SUCCESS;
    if (splits > 1) {
        st = pit_cuda_scratch_alloc(c, s, slab_bytes + (size_t)tiles * 4, "split-K partials", &ws);
        a->splits = splits;
        a->acc = ws;
        a->ldacc = ldw;
        a->sacc = p->M * ldw;
        if (st == PIT_SUCCESS && tiles > 0) {
            a->arrivals = ws + slab_bytes;
            CUresult r = pit_cu.MemsetD32Async(ws + slab_bytes, 0, (size_t)tiles, s);
            if (r != CUDA_SUCCESS) st = pit_cu_fail(r, PIT_CALL(MemsetD32Async) "(split-K arrivals)", __FILE__, __LINE__);
        }
    }
    if (st == PIT_SUCCESS) st = pit_cuda_launch(k, s, gx, gy, (unsigned)(p->batch * splits), threads, a, what);
    if (st == PIT_SUCCESS && splits > 1 && tiles == 0) st = sum_splits(c, s, p, ws, ldw, splits);
    return pit_cuda_free_scratch(c, s, ws, st);
}

/* ---- the sm_90 engine (pit_matmul_wg.cu) ---------------------------------- */
/* A CUtensorMap of a [batch, rows, cols] operand (row stride ld, batch
 * stride bs in elements; one batch where bs is 0) in boxes of 64 columns x
 * box_rows under 128-byte swizzle: the layout the engine's wgmma's read. */
static int encode_map(pit_u8 *map, pit_dtype dt, uint64_t base, int64_t rows, int64_t cols, int64_t ld, int64_t bs,
                      int64_t batch, int box_rows)
{
#ifdef PIT_HIP_SHIM_H /* no copy engine through the HIP shim */
    (void)map, (void)dt, (void)base, (void)rows, (void)cols, (void)ld, (void)bs, (void)batch, (void)box_rows;
    return 0;
#else
    const uint64_t es = 2;
    cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, (cuuint64_t)(bs ? batch : 1)};
    cuuint64_t strides[2] = {(cuuint64_t)ld * es, (cuuint64_t)(bs ? bs : ld * rows) * es};
    cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, step[3] = {1, 1, 1};
    CUtensorMapDataType t = dt == PIT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return pit_cu.TensorMapEncodeTiled((CUtensorMap *)map, t, 3, (void *)(uintptr_t)base, dims, strides, box, step,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
#endif
}

/* The engine runs where K has few enough micro-tile columns for its
 * presence words and the driver makes tensor maps. */
static int engine_fits(const mm_problem *p, const pit_microtile *mt)
{
#ifdef PIT_HIP_SHIM_H
    (void)p, (void)mt;
    return 0;
#else
    return pit_cu.TensorMapEncodeTiled && pit_cuda_cdiv(p->K, mt->cols) <= PIT_CUDA_ENGINE_KT_MAX;
#endif
}

/* The kernel of tile for micro-tile mt; an engine tile the engine cannot
 * run here (another arch, unaligned rows, micro-tile columns not by 64)
 * runs as the mma.sync tile of the same micro-tile, 128 wide and 64 deep. */
static int matmul_variant_here(const pit_cuda_ctx *c, const mm_problem *p, const pit_tile *tile,
                               const pit_microtile *mt, const pit_cuda_mm_align *al, pit_cuda_variant *v,
                               const char **why)
{
    int ok = pit_cuda_matmul_variant(c->arch, p->dt, tile, mt, al, v, why);
    if (tile->tensor_core != PIT_TILE_ENGINE || (ok && engine_fits(p, mt))) return ok;
    const pit_tile mma = {mt->rows, 128, 64, 256, 4, 1};
    return pit_cuda_matmul_variant(c->arch, p->dt, &mma, mt, al, v, why);
}

static pit_status matmul_engine(pit_cuda_ctx *c, CUstream s, const pit_cuda_variant *v, const mm_problem *p,
                                const pit_index *idx)
{
    pit_mmwg_args w;
    memset(&w, 0, sizeof w);
    fill_pit_mm_args(p, idx, &w.mm);
    w.mt_cols = idx->tile.cols;
    if (!encode_map(w.map_a, p->dt, p->a.ptr, p->M, p->K, p->a.ld, p->a.bs, p->batch, idx->tile.rows) ||
        !encode_map(w.map_b, p->dt, p->b.ptr, p->K, p->N, p->b.ld, p->b.bs, p->batch, 64))
        return pit_cuda_host->error(PIT_ERR_BACKEND, PIT_VENDOR_NAME " matmul: the driver made no tensor map of A or B");
    return pit_cuda_launch_variant(c, s, v, pit_cuda_cdiv(p->M, PIT_CUDA_ENGINE_ROWS), pit_cuda_cdiv(p->N, v->tile.bn),
                                   p->batch, PIT_CUDA_ENGINE_THREADS, &w);
}

static pit_status matmul_axis_k(pit_cuda_ctx *c, CUstream s, pit_cuda_variant *v, const mm_problem *p,
                                const pit_index *idx)
{
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    pit_mm_args a;
    fill_pit_mm_args(p, idx, &a);
    int64_t row_blocks = pit_cuda_cdiv(p->M, idx->tile.rows);
    CUdeviceptr scratch = 0;
    if (v->a_comp) {
        int64_t ldo = pit_cuda_cdiv((int64_t)idx->capacity * idx->tile.cols, 8) * 8; /* pit_compact pads to 8 */
        size_t bytes = (size_t)(row_blocks * idx->tile.rows * ldo * p->batch) * pit_cuda_el_bytes(p->dt);
        st = pit_cuda_scratch_alloc(c, s, bytes, "axis K compact", &scratch);
        if (st != PIT_SUCCESS) return st;
        st = compact_a(c, s, p, idx, row_blocks, scratch, ldo);
        a.a = (uint64_t)scratch;
        a.lda = ldo;
        a.sa = row_blocks * idx->tile.rows * ldo;
    }
    /* every row-block gets a CTA (empty ones write zeros): the grid does
     * not depend on the counts, so nothing is read back */
    if (st == PIT_SUCCESS)
        st = launch_shares(c, s, p, k, axis_k_splits(c, k, v, p, idx, row_blocks), (unsigned)row_blocks,
                           (unsigned)pit_cuda_cdiv(p->N, v->tile.bn), (unsigned)v->tile.threads, 0, &a,
                           PIT_CALL(LaunchKernel) "(pit_matmul axis K)");
    return pit_cuda_free_scratch(c, s, scratch, st);
}

/* The decode regime: a few rows of A (one row-block), column micro-tiles
 * one wide: pit_decode.cu finds the non-zero columns of its share of K
 * itself and streams the weight rows they name; the shares fill the device
 * and the last to arrive at an n-tile sums them (on sm_90, where 8 shares
 * an n-tile fill most of a wave, a cluster's CTAs sum through their shared
 * memory instead: no slabs, no counters). The index is not read. */
static int decode_fits(const mm_problem *p, const pit_index *idx)
{
    return idx->tile.axis == PIT_AXIS_K && idx->tile.cols == 1 && p->M <= idx->tile.rows &&
           pit_cuda_decode_rows(p->M) > 0;
}

#ifndef PIT_HIP_SHIM_H
/* Whether the decode kernel's shares can sum in a cluster here. */
static int decode_cluster_here(const pit_cuda_ctx *c)
{
    return c->arch == 90 && pit_cu.LaunchKernelEx != NULL;
}
#endif

static pit_status matmul_decode(pit_cuda_ctx *c, CUstream s, const mm_problem *p, const pit_index *idx, int b_vec)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_DECODE;
    v.dtype = p->dt;
    v.mt_rows = pit_cuda_decode_rows(p->M);
    v.b_vec = b_vec;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    const int64_t ntiles = pit_cuda_cdiv(p->N, 32 * (int64_t)(16 / pit_cuda_el_bytes(p->dt)));
    int64_t per_sm = resident_per_sm(c, k, PIT_CUDA_DECODE_THREADS);
    if (per_sm > pit_cuda_decode_min_ctas(v.mt_rows)) per_sm = pit_cuda_decode_min_ctas(v.mt_rows);
    const int64_t most = p->K / DECODE_MIN_SHARE; /* each share at least DECODE_MIN_SHARE columns of K */
    pit_mm_args a;
    fill_pit_mm_args(p, idx, &a);
#ifndef PIT_HIP_SHIM_H
    const int64_t wave = per_sm * c->sm_count, clustered = ntiles * p->batch * PIT_CUDA_DECODE_CLUSTER;
    if (decode_cluster_here(c) && most >= PIT_CUDA_DECODE_CLUSTER && clustered <= wave && clustered * 5 >= wave * 4) {
        v.cluster = 1;
        if ((st = pit_cuda_get_kernel(c, &v, &k)) != PIT_SUCCESS) return st;
        a.splits = PIT_CUDA_DECODE_CLUSTER;
        return pit_cuda_launch_cluster(k, s, (unsigned)ntiles, 1, (unsigned)clustered / (unsigned)ntiles,
                                       PIT_CUDA_DECODE_THREADS, PIT_CUDA_DECODE_CLUSTER, &a,
                                       PIT_CALL(LaunchKernelEx) "(pit_decode)");
    }
#endif
    const int splits = k_shares(c, per_sm, ntiles * p->batch, most, p);
    return launch_shares(c, s, p, k, splits, (unsigned)ntiles, 1, PIT_CUDA_DECODE_THREADS, ntiles * p->batch, &a,
                         PIT_CALL(LaunchKernel) "(pit_decode)");
}

/* The decode regime on tensor cores (pit_decode_mma.cu): 16-bit, sm_80+,
 * row-blocks of 16 or 32 rows (a few), column micro-tiles one wide, B's
 * rows in 16-byte vectors and A's in 4-byte pairs. */
static int decode_mma_fits(const pit_cuda_ctx *c, const mm_problem *p, const pit_index *idx)
{
    const pit_microtile *mt = &idx->tile;
    return c->arch >= 80 && (p->dt == PIT_F16 || p->dt == PIT_BF16) && mt->axis == PIT_AXIS_K && mt->cols == 1 &&
           (mt->rows == 16 || mt->rows == 32) &&
           pit_cuda_cdiv(p->M, mt->rows) <= PIT_CUDA_DECODE_MMA_MAX_ROW_BLOCKS &&
           pit_cuda_rows_aligned(&p->b, p->N, 16) && pit_cuda_rows_aligned(&p->a, p->K, 4);
}

static pit_status matmul_decode_mma(pit_cuda_ctx *c, CUstream s, const mm_problem *p, const pit_index *idx)
{
    pit_cuda_variant v;
    memset(&v, 0, sizeof v);
    v.kind = PIT_CUDA_DECODE_MMA;
    v.dtype = p->dt;
    v.mt_rows = idx->tile.rows;
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, &v, &k);
    if (st != PIT_SUCCESS) return st;
    const int bn = PIT_DECODE_MMA_BN;
    const int64_t row_blocks = pit_cuda_cdiv(p->M, idx->tile.rows), ntiles = pit_cuda_cdiv(p->N, bn);
    int64_t per_sm = resident_per_sm(c, k, PIT_DECODE_MMA_THREADS);
    if (per_sm > PIT_DECODE_MMA_MIN_CTAS(idx->tile.rows)) per_sm = PIT_DECODE_MMA_MIN_CTAS(idx->tile.rows);
    const int splits = k_shares(c, per_sm, row_blocks * ntiles * p->batch, idx->capacity / DECODE_MIN_SHARE, p);
    pit_mm_args a;
    fill_pit_mm_args(p, idx, &a);
    /* the last share to arrive at a tile of C sums the slabs: no convert pass */
    return launch_shares(c, s, p, k, splits, (unsigned)row_blocks, (unsigned)ntiles, PIT_DECODE_MMA_THREADS,
                         row_blocks * ntiles * p->batch, &a, PIT_CALL(LaunchKernel) "(pit_decode_mma)");
}

static pit_status matmul_axis_m(pit_cuda_ctx *c, CUstream s, pit_cuda_variant *v, const mm_problem *p,
                                const pit_index *idx, int32_t max_entries, int worst_case_grid)
{
    pit_cuda_kernel *k;
    pit_status st = pit_cuda_get_kernel(c, v, &k);
    if (st != PIT_SUCCESS) return st;
    pit_mm_args a;
    fill_pit_mm_args(p, idx, &a);
    /* SWrite accumulates in f32: into C for f32, else into scratch that is
     * converted into C afterwards */
    CUdeviceptr scratch = 0;
    pit_util_args u = {0};
    u.rows = (int32_t)p->M;
    u.cols = (int32_t)p->N;
    if (p->dt == PIT_F32) {
        a.acc = p->c.ptr;
        a.ldacc = p->c.ld;
        a.sacc = p->c.bs;
        u.f32 = p->c.ptr;
        u.ld32 = p->c.ld;
        u.s32 = p->c.bs;
        st = launch_util(c, s, PIT_CUDA_ZERO, p->dt, &u, p->batch);
    } else {
        size_t words = (size_t)(p->M * p->N * p->batch);
        st = pit_cuda_scratch_fill(c, s, words, 0, "axis M scratch", &scratch);
        if (st != PIT_SUCCESS) return st;
        a.acc = scratch;
        a.ldacc = p->N;
        a.sacc = p->M * p->N;
    }
    int64_t rows = worst_case_grid ? pit_cuda_cdiv(p->M, idx->tile.rows) * idx->tile.rows
                                   : (int64_t)(max_entries > 0 ? max_entries : 0) * idx->tile.rows;
    int64_t chunks = pit_cuda_cdiv(rows, v->tile.bm);
    if (st == PIT_SUCCESS && chunks > 0)
        st = pit_cuda_launch(k, s, (unsigned)pit_cuda_cdiv(p->N, v->tile.bn), (unsigned)chunks, (unsigned)idx->groups,
                             (unsigned)v->tile.threads, &a, PIT_CALL(LaunchKernel) "(pit_matmul axis M)");
    if (scratch) {
        if (st == PIT_SUCCESS) {
            u.f32 = scratch;
            u.ld32 = p->N;
            u.s32 = p->M * p->N;
            u.out = p->c.ptr;
            u.ldo = p->c.ld;
            u.so = p->c.bs;
            st = launch_util(c, s, PIT_CUDA_CONVERT, p->dt, &u, p->batch);
        }
    }
    return pit_cuda_free_scratch(c, s, scratch, st);
}

int pit_cuda_matmul_detects_inside(void *bctx, const pit_index *idx, const pit_tdesc *A, const pit_tdesc *B,
                                   const pit_tdesc *C)
{
    (void)bctx;
    mm_problem p;
    if (matmul_views(A, B, C, &p) != PIT_SUCCESS) return 0;
    return decode_fits(&p, idx);
}

pit_status pit_cuda_matmul_sparse(void *bctx, void *stream, const pit_tile *tile, const pit_index *idx,
                                  int32_t max_entries, int worst_case_grid, const pit_tdesc *A, const pit_tdesc *B,
                                  const pit_tdesc *C)
{
    pit_cuda_ctx *c = bctx;
    mm_problem p;
    pit_status st = matmul_views(A, B, C, &p);
    if (st != PIT_SUCCESS) return st;
    const pit_microtile *mt = &idx->tile;
    if (mt->axis == PIT_AXIS_N)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " matmul: sparse B (axis N) is not implemented "
                                                                          "by the " PIT_VENDOR_NAME " backend");
    if (mt->axis != PIT_AXIS_K && mt->axis != PIT_AXIS_M)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " matmul: index axis %d", (int)mt->axis);
    if (mt->rows < 1 || mt->cols < 1)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT, PIT_VENDOR_NAME " matmul: micro-tile %dx%d", mt->rows,
                                    mt->cols);
    if (mt->axis == PIT_AXIS_K && (int64_t)idx->groups_per_batch * mt->rows < p.M)
        return pit_cuda_host->error(PIT_ERR_INVALID_ARGUMENT,
                                    PIT_VENDOR_NAME " matmul: the index has %d row-blocks of %d for %lld rows",
                                    idx->groups_per_batch, mt->rows, (long long)p.M);
    int vec = (int)(16 / pit_cuda_el_bytes(p.dt));
    pit_cuda_mm_align al = {pit_cuda_rows_aligned(&p.a, p.K, 16), pit_cuda_rows_aligned(&p.b, p.N, 16),
                            p.c.ptr % 16 == 0 && p.c.ld % vec == 0 && p.c.bs % vec == 0, p.N % 4 == 0,
                            mt->axis == PIT_AXIS_K && p.M < mt->rows};
    /* up to 4 rows the CUDA-core kernel streams faster (no shares to sum in
     * place, no tensor-core staging); from 5 rows tensor cores */
    const int cores = decode_fits(&p, idx), mma = !cores && decode_mma_fits(c, &p, idx);
    if (cores || mma) {
        if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
        CUstream s = pit_cuda_stream_of(stream);
        if (p.M > 0 && p.N > 0 && p.batch > 0)
            st = mma ? matmul_decode_mma(c, s, &p, idx) : matmul_decode(c, s, &p, idx, al.b);
        pit_cuda_pop();
        return st;
    }
    pit_cuda_variant v;
    const char *why = "";
    if (!matmul_variant_here(c, &p, tile, mt, &al, &v, &why))
        return pit_cuda_host->error(
            PIT_ERR_UNSUPPORTED, PIT_VENDOR_NAME " matmul: tile %dx%dx%d (%d threads, %s) for micro-tile %dx%d: %s",
            v.tile.bm, v.tile.bn, v.tile.bk, v.tile.threads, v.tile.tensor_core ? "tensor cores" : "CUDA cores",
            mt->rows, mt->cols, why);
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    CUstream s = pit_cuda_stream_of(stream);
    if (p.M > 0 && p.N > 0 && p.batch > 0) {
        if (v.kind == PIT_CUDA_MATMUL_WG) st = matmul_engine(c, s, &v, &p, idx);
        else if (mt->axis == PIT_AXIS_K) st = matmul_axis_k(c, s, &v, &p, idx);
        else st = matmul_axis_m(c, s, &v, &p, idx, max_entries, worst_case_grid);
    }
    pit_cuda_pop();
    return st;
}

/* ---- dense: cuBLAS ---------------------------------------------------------- */
static pit_status cublas_fail(cublasStatus_t r, const char *what, const char *file, int line)
{
    pit_status st = r == CUBLAS_STATUS_ALLOC_FAILED ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND;
    return pit_cuda_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, cublasGetStatusName(r),
                                pit_cuda_basename(file), line);
}

#define CUBLAS_CHECK(call, what)                                                          \
    do {                                                                                  \
        cublasStatus_t cb_r_ = (call);                                                    \
        if (cb_r_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(cb_r_, what, __FILE__, __LINE__); \
    } while (0)

void pit_cuda_blas_destroy(pit_cuda_ctx *c)
{
    if (c->blas) cublasDestroy((cublasHandle_t)c->blas);
    c->blas = NULL;
}

static cudaDataType_t blas_type(pit_dtype d)
{
    return d == PIT_F32 ? CUDA_R_32F : d == PIT_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static pit_status blas_gemm_locked(cublasHandle_t h, CUstream s, const pit_cuda_blas_gemm *g)
{
    const float alpha = 1.f, beta = 0.f;
    cudaDataType_t t = blas_type(g->dt);
    CUBLAS_CHECK(cublasSetStream(h, (cudaStream_t)s), "cublasSetStream");
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            (int)g->m, (int)g->n, (int)g->k, &alpha, (const void *)(uintptr_t)g->a, t,
                                            (int)g->lda, g->sa, (const void *)(uintptr_t)g->b, t, (int)g->ldb, g->sb,
                                            &beta, (void *)(uintptr_t)g->c, t, (int)g->ldc, g->sc, (int)g->batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
    return PIT_SUCCESS;
}

#if PIT_CUBLAS_GROUPED
/* g[0..n-1] (one dtype, batch 1 each) as one grouped call of n groups of
 * one: the operands' pointers in device memory (ptrs, 3n of them), the rest
 * from host arrays */
typedef struct blas_group {
    cublasOperation_t *ta, *tb;
    int *m, *n, *k, *lda, *ldb, *ldc, *size;
    float *alpha, *beta;
    void **ptr; /* A's, B's, C's */
} blas_group;

static int blas_groupable(const pit_cuda_blas_gemm *g, int n)
{
    if (n < 2 || !pit_cuda_blas_has_grouped()) return 0;
    for (int i = 0; i < n; i++)
        if (g[i].batch != 1 || g[i].dt != g[0].dt || g[i].m > INT32_MAX || g[i].n > INT32_MAX || g[i].k > INT32_MAX)
            return 0;
    return 1;
}

static void blas_group_free(blas_group *b)
{
    free(b->ta), free(b->tb), free(b->m), free(b->n), free(b->k), free(b->lda), free(b->ldb), free(b->ldc);
    free(b->size), free(b->alpha), free(b->beta), free(b->ptr);
}

/* The host arrays, and the pointers uploaded into *ptrs (scratch on s) */
static pit_status blas_group_make(pit_cuda_ctx *c, CUstream s, const pit_cuda_blas_gemm *g, int n, blas_group *b,
                                  CUdeviceptr *ptrs)
{
    const size_t u = (size_t)n;
    b->ta = malloc(u * sizeof *b->ta), b->tb = malloc(u * sizeof *b->tb);
    b->m = malloc(u * sizeof(int)), b->n = malloc(u * sizeof(int)), b->k = malloc(u * sizeof(int));
    b->lda = malloc(u * sizeof(int)), b->ldb = malloc(u * sizeof(int)), b->ldc = malloc(u * sizeof(int));
    b->size = malloc(u * sizeof(int)), b->alpha = malloc(u * sizeof(float)), b->beta = malloc(u * sizeof(float));
    b->ptr = malloc(3 * u * sizeof(void *));
    if (!b->ta || !b->tb || !b->m || !b->n || !b->k || !b->lda || !b->ldb || !b->ldc || !b->size || !b->alpha ||
        !b->beta || !b->ptr)
        return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME " cuBLAS: host arrays of %d GEMMs", n);
    for (int i = 0; i < n; i++) {
        b->ta[i] = g[i].ta ? CUBLAS_OP_T : CUBLAS_OP_N, b->tb[i] = g[i].tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        b->m[i] = (int)g[i].m, b->n[i] = (int)g[i].n, b->k[i] = (int)g[i].k;
        b->lda[i] = (int)g[i].lda, b->ldb[i] = (int)g[i].ldb, b->ldc[i] = (int)g[i].ldc;
        b->size[i] = 1, b->alpha[i] = 1.f, b->beta[i] = 0.f;
        b->ptr[i] = (void *)(uintptr_t)g[i].a, b->ptr[u + i] = (void *)(uintptr_t)g[i].b;
        b->ptr[2 * u + i] = (void *)(uintptr_t)g[i].c;
    }
    pit_status st = pit_cuda_scratch_alloc(c, s, 3 * u * sizeof(void *), "cuBLAS grouped pointers", ptrs);
    if (st != PIT_SUCCESS) return st;
    /* from pageable memory: the host array is copied before this returns */
    CUresult r = pit_cu.MemcpyHtoDAsync(*ptrs, b->ptr, 3 * u * sizeof(void *), s);
    return r == CUDA_SUCCESS ? PIT_SUCCESS : pit_cu_fail(r, PIT_CALL(MemcpyHtoDAsync), __FILE__, __LINE__);
}

static pit_status blas_grouped_locked(cublasHandle_t h, CUstream s, const blas_group *b, CUdeviceptr ptrs, int n,
                                      pit_dtype dt)
{
    cudaDataType_t t = blas_type(dt);
    const void *const *A = (const void *const *)(uintptr_t)ptrs;
    CUBLAS_CHECK(cublasSetStream(h, (cudaStream_t)s), "cublasSetStream");
    CUBLAS_CHECK(cublasGemmGroupedBatchedEx(h, b->ta, b->tb, b->m, b->n, b->k, b->alpha, A, t, b->lda, A + n, t,
                                            b->ldb, b->beta, (void *const *)(A + 2 * n), t, b->ldc, n, b->size,
                                            CUBLAS_COMPUTE_32F),
                 "cublasGemmGroupedBatchedEx");
    return PIT_SUCCESS;
}
#endif

pit_status pit_cuda_blas_gemms(pit_cuda_ctx *c, CUstream s, const pit_cuda_blas_gemm *g, int n)
{
    pit_status st = PIT_SUCCESS;
    CUdeviceptr ptrs = 0;
#if PIT_CUBLAS_GROUPED
    /* many GEMMs (an expert each): one launch instead of n */
    blas_group grp;
    memset(&grp, 0, sizeof grp);
    const int grouped = blas_groupable(g, n);
    if (grouped) st = blas_group_make(c, s, g, n, &grp, &ptrs);
#endif
    /* one handle per context; the lock keeps SetStream + Gemm together */
    pthread_mutex_lock(&c->lock);
    if (!c->blas && st == PIT_SUCCESS) {
        cublasHandle_t h = NULL;
        cublasStatus_t r = cublasCreate(&h);
        if (r != CUBLAS_STATUS_SUCCESS) st = cublas_fail(r, "cublasCreate", __FILE__, __LINE__);
        else c->blas = h;
    }
#if PIT_CUBLAS_GROUPED
    if (grouped && st == PIT_SUCCESS) {
        st = blas_grouped_locked((cublasHandle_t)c->blas, s, &grp, ptrs, n, g[0].dt);
        n = 0;
    }
#endif
    for (int i = 0; i < n && st == PIT_SUCCESS; i++) st = blas_gemm_locked((cublasHandle_t)c->blas, s, &g[i]);
    pthread_mutex_unlock(&c->lock);
#if PIT_CUBLAS_GROUPED
    blas_group_free(&grp);
#endif
    return ptrs ? pit_cuda_free_scratch(c, s, ptrs, st) : st;
}

pit_status pit_cuda_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                                 const pit_tdesc *C)
{
    pit_cuda_ctx *c = bctx;
    mm_problem p;
    pit_status st = matmul_views(A, B, C, &p);
    if (st != PIT_SUCCESS) return st;
    if (p.M == 0 || p.N == 0 || p.batch == 0) return PIT_SUCCESS;
    if ((st = pit_cuda_push(c)) != PIT_SUCCESS) return st;
    /* row-major C = A.B is column-major C^T = B^T.A^T: the operands swapped */
    const pit_cuda_blas_gemm g = {p.dt, 0, 0, p.N, p.M, p.K, p.b.ptr, p.b.ld, p.b.bs, p.a.ptr, p.a.ld, p.a.bs,
                                  p.c.ptr, p.c.ld, p.c.bs, p.batch};
    st = pit_cuda_blas_gemms(c, pit_cuda_stream_of(stream), &g, 1);
    pit_cuda_pop();
    return st;
}
