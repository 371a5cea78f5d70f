/*
 * ocl_matmul.c - the fused PIT matmul (kernels/pit_matmul.cl) for a sparse A
 * gathered along K or M, and the dense GEMM (CLBlast's SGEMM for f32, or the
 * same tile kernel with the identity gather when CLBlast is absent and for
 * f16 and bf16, which it computes in f32 on every device).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"

#ifdef PIT_HAVE_CLBLAST
#include <clblast_c.h>
#endif

/* The tile pit's own dense GEMM uses (no tile database entry is passed). */
#define DENSE_BM 32
#define DENSE_BN 64
#define DENSE_BK 16

typedef struct mm_problem {
    pit_dtype dtype;
    int64_t batch, M, N, K;
    ocl_mat a, b, c;
} mm_problem;

/* A compiled configuration of pit_matmul.cl. */
typedef struct mm_config {
    int axis, dense;
    int tm, tk;
    int bm, bn, bk, rm, rn;
    size_t wg;
} mm_config;

/* Checks dtypes and shapes (core does too; a plug-in must not trust it). */
static pit_status describe_problem(const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C,
                                   mm_problem *p)
{
    if (ocl_dtype_code(A->dtype) < 0 || B->dtype != A->dtype || C->dtype != A->dtype)
        return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE,
                               "opencl matmul: dtypes %d/%d/%d (one of f32, f16, bf16 for "
                               "all three)",
                               A->dtype, B->dtype, C->dtype);
    const pit_tdesc *all[3] = {A, B, C};
    for (int i = 0; i < 3; ++i)
        if (all[i]->rank != 2 && all[i]->rank != 3)
            return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                                   "opencl matmul: operand %c has rank %d (2 or 3 allowed)",
                                   "ABC"[i], all[i]->rank);
    p->dtype = A->dtype;
    p->batch = A->rank == 3 ? A->shape[0] : 1;
    p->M = A->shape[A->rank - 2];
    p->K = A->shape[A->rank - 1];
    p->N = B->shape[B->rank - 1];
    int batch_ok = (B->rank == 2 || B->shape[0] == p->batch) &&
                   (C->rank == 3 ? C->shape[0] == p->batch : p->batch == 1);
    if (!batch_ok || B->shape[B->rank - 2] != p->K || C->shape[C->rank - 2] != p->M ||
        C->shape[C->rank - 1] != p->N)
        return ocl_host->error(PIT_ERR_SHAPE_MISMATCH,
                               "opencl matmul: A %lldx%lld, B %lldx%lld, C %lldx%lld "
                               "(batch %lld) do not agree",
                               (long long)p->M, (long long)p->K,
                               (long long)B->shape[B->rank - 2], (long long)p->N,
                               (long long)C->shape[C->rank - 2],
                               (long long)C->shape[C->rank - 1], (long long)p->batch);
    if (p->M > INT32_MAX || p->N > INT32_MAX || p->K > INT32_MAX)
        return ocl_host->error(PIT_ERR_UNSUPPORTED, "opencl matmul: a dimension exceeds 2^31");
    p->a = ocl_mat_of(A);
    p->b = ocl_mat_of(B);
    p->c = ocl_mat_of(C);
    return PIT_SUCCESS;
}

/* ---- tile configuration ------------------------------------------------------- */

static const int reg_options[] = {8, 4, 2, 1};

/* Register block (RM x RN) per work-item: honours tile->threads when some
 * block gives exactly that many work-items, else up to 4x4 (8 when the
 * work-group would be too large). */
static int pick_register_block(int bm, int bn, int threads, size_t max_wg, int *rm, int *rn)
{
    int best = -1;
    for (int i = 0; i < 4 && threads > 0 && (size_t)threads <= max_wg; ++i)
        for (int j = 0; j < 4; ++j) {
            int a = reg_options[i], b = reg_options[j];
            if (bm % a || bn % b || (bm / a) * (bn / b) != threads)
                continue;
            int balance = a > b ? a - b : b - a;
            if (best < 0 || balance < best) {
                best = balance;
                *rm = a;
                *rn = b;
            }
        }
    if (best >= 0)
        return 1;
    for (int i = 1; i < 4; ++i)
        for (int j = 1; j < 4; ++j) {
            /* prefer 4x4, then 4x2 ... 1x1; 8 only when needed below */
            int a = reg_options[i], b = reg_options[j];
            if (bm % a == 0 && bn % b == 0 && (size_t)((bm / a) * (bn / b)) <= max_wg) {
                *rm = a;
                *rn = b;
                return 1;
            }
        }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            int a = reg_options[i], b = reg_options[j];
            if (bm % a == 0 && bn % b == 0 && (size_t)((bm / a) * (bn / b)) <= max_wg) {
                *rm = a;
                *rn = b;
                return 1;
            }
        }
    return 0;
}

static pit_status make_config(const ocl_ctx *c, int axis, int dense, int tm, int tk, int bm,
                              int bn, int bk, int threads, mm_config *cfg)
{
    if (bm < 1 || bn < 1 || bk < 1 || bm > 256 || bn > 256 || bk > 256)
        return ocl_host->error(PIT_ERR_UNSUPPORTED, "opencl matmul: tile %dx%dx%d out of range",
                               bm, bn, bk);
    size_t local_bytes = ((size_t)bm * bk + (size_t)bk * bn + (size_t)bk + (size_t)bm) * 4;
    if (local_bytes > c->local_mem)
        return ocl_host->error(PIT_ERR_UNSUPPORTED,
                               "opencl matmul: tile %dx%dx%d needs %zu B of local memory, "
                               "the device has %zu B",
                               bm, bn, bk, local_bytes, c->local_mem);
    cfg->axis = axis;
    cfg->dense = dense;
    cfg->tm = tm;
    cfg->tk = tk;
    cfg->bm = bm;
    cfg->bn = bn;
    cfg->bk = bk;
    if (!pick_register_block(bm, bn, threads, c->max_wg, &cfg->rm, &cfg->rn))
        return ocl_host->error(PIT_ERR_UNSUPPORTED,
                               "opencl matmul: tile %dx%d needs more than %zu work-items", bm,
                               bn, c->max_wg);
    cfg->wg = (size_t)(bm / cfg->rm) * (size_t)(bn / cfg->rn);
    return PIT_SUCCESS;
}

static pit_status get_matmul_program(ocl_ctx *c, pit_dtype dtype, const mm_config *cfg,
                                     cl_program *prog)
{
    char defines[256];
    snprintf(defines, sizeof defines,
             "-DDT=%d -DAXIS=%d -DDENSE=%d -DTM=%d -DTK=%d -DBM=%d -DBN=%d -DBK=%d -DRM=%d "
             "-DRN=%d",
             ocl_dtype_code(dtype), cfg->axis, cfg->dense, cfg->tm, cfg->tk, cfg->bm, cfg->bn,
             cfg->bk, cfg->rm, cfg->rn);
    return ocl_program_get(c, "pit_matmul", defines, prog);
}

/* ---- launches ------------------------------------------------------------------- */

/* Launches pit_matmul with grid (n-tiles, dim1, batch). */
static pit_status launch_matmul(ocl_ctx *c, cl_command_queue q, cl_program prog,
                                const mm_config *cfg, const mm_problem *p, const ocl_mat *acc,
                                const pit_index *idx, size_t dim1, int nchunks)
{
    cl_kernel k;
    OCL_TRY(ocl_kernel_create(c, prog, "pit_matmul", cfg->wg, &k));
    ocl_args a;
    ocl_args_begin(&a, k, "pit_matmul");
    ocl_arg_view(&a, &p->a);
    ocl_arg_view(&a, &p->b);
    ocl_arg_view(&a, &p->c);
    ocl_arg_view(&a, acc ? acc : &p->c);
    ocl_arg_int(&a, (cl_int)p->M);
    ocl_arg_int(&a, (cl_int)p->N);
    ocl_arg_int(&a, (cl_int)p->K);
    /* The dense form reads no index: any buffer fills the slots. */
    ocl_arg_mem(&a, idx ? (cl_mem)idx->counts : p->a.mem);
    ocl_arg_mem(&a, idx ? (cl_mem)idx->entries : p->a.mem);
    ocl_arg_int(&a, idx ? idx->groups_per_batch : 0);
    ocl_arg_int(&a, idx ? idx->capacity : 0);
    ocl_arg_int(&a, nchunks);
    size_t global[3] = {(size_t)ocl_cdiv(p->N, cfg->bn) * cfg->wg, dim1, (size_t)p->batch};
    size_t local[3] = {cfg->wg, 1, 1};
    return ocl_launch(&a, q, 3, global, local);
}

/* Element-wise helper kernels of the matmul program (zero / store the f32
 * accumulation target of axis M), over an M x N x batch grid. */
static pit_status launch_elementwise(ocl_ctx *c, cl_program prog, cl_command_queue q,
                                     const char *kname, const ocl_mat *first,
                                     const ocl_mat *second, const mm_problem *p)
{
    cl_kernel k;
    OCL_TRY(ocl_kernel_new(c, prog, kname, &k));
    ocl_args a;
    ocl_args_begin(&a, k, kname);
    ocl_arg_view(&a, first);
    if (second)
        ocl_arg_view(&a, second);
    ocl_arg_int(&a, (cl_int)p->M);
    ocl_arg_int(&a, (cl_int)p->N);
    size_t global[3] = {(size_t)p->N, (size_t)p->M, (size_t)p->batch};
    return ocl_launch(&a, q, 3, global, NULL);
}

/* The per-stream f32 buffer where f16/bf16 axis-M results accumulate. */
static pit_status ensure_scratch(ocl_ctx *c, ocl_stream *s, size_t bytes)
{
    if (s->scratch.mem && s->scratch.bytes >= bytes)
        return PIT_SUCCESS;
    ocl_block_release(&s->scratch); /* the queued kernels using it finish first */
    return ocl_block_new(c, s->queue, bytes, "axis-M scratch", &s->scratch);
}

/* ---- sparse A --------------------------------------------------------------------- */

static pit_status matmul_axis_k(ocl_ctx *c, ocl_stream *s, const pit_tile *tile,
                                const pit_index *idx, const mm_problem *p)
{
    const int tm = idx->tile.rows, tk = idx->tile.cols;
    if (tm % tile->bm != 0)
        return ocl_host->error(PIT_ERR_UNSUPPORTED,
                               "opencl matmul (axis K): tile bm %d must divide the "
                               "micro-tile's %d rows",
                               tile->bm, tm);
    if (idx->groups_per_batch < ocl_cdiv(p->M, tm))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl matmul (axis K): index has %d groups per batch, "
                               "%lld row blocks needed",
                               idx->groups_per_batch, (long long)ocl_cdiv(p->M, tm));
    mm_config cfg;
    cl_program prog;
    OCL_TRY(make_config(c, 1, 0, tm, tk, tile->bm, tile->bn, tile->bk, tile->threads, &cfg));
    OCL_TRY(get_matmul_program(c, p->dtype, &cfg, &prog));
    /* Every row block is launched: empty ones store zeros into C. */
    return launch_matmul(c, s->queue, prog, &cfg, p, NULL, idx,
                         (size_t)ocl_cdiv(p->M, cfg.bm), 1);
}

static pit_status matmul_axis_m(ocl_ctx *c, ocl_stream *s, const pit_tile *tile,
                                const pit_index *idx, int32_t max_entries, int worst_case,
                                const mm_problem *p)
{
    const int tm = idx->tile.rows, tk = idx->tile.cols;
    if (idx->groups_per_batch < ocl_cdiv(p->K, tk))
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl matmul (axis M): index has %d groups per batch, "
                               "%lld k-slabs needed",
                               idx->groups_per_batch, (long long)ocl_cdiv(p->K, tk));
    mm_config cfg;
    cl_program prog;
    OCL_TRY(make_config(c, 2, 0, tm, tk, tile->bm, tile->bn, tile->bk, tile->threads, &cfg));
    OCL_TRY(get_matmul_program(c, p->dtype, &cfg, &prog));

    /* SWrite accumulates: the target starts at zero. f32 accumulates into C
     * itself, f16/bf16 into an f32 scratch converted afterwards. */
    ocl_mat acc = p->c;
    if (p->dtype == PIT_F32) {
        OCL_TRY(launch_elementwise(c, prog, s->queue, "pit_zero_f32", &acc, NULL, p));
    } else {
        size_t bytes = (size_t)(p->batch * p->M * p->N) * 4;
        OCL_TRY(ensure_scratch(c, s, bytes));
        acc.mem = s->scratch.mem;
        acc.off = 0;
        acc.ld = p->N;
        acc.bs = p->M * p->N;
        OCL_TRY(ocl_fill32(s->queue, s->scratch.mem, 0, 0u, bytes));
    }
    int64_t entries = worst_case ? idx->capacity : max_entries;
    if (entries > idx->capacity)
        entries = idx->capacity;
    int64_t nchunks = ocl_cdiv(entries * tm, cfg.bm);
    if (nchunks > 0) {
        size_t dim1 = (size_t)idx->groups_per_batch * (size_t)nchunks;
        OCL_TRY(launch_matmul(c, s->queue, prog, &cfg, p, &acc, idx, dim1, (int)nchunks));
    }
    if (p->dtype != PIT_F32)
        OCL_TRY(launch_elementwise(c, prog, s->queue, "pit_store_acc", &acc, &p->c, p));
    return PIT_SUCCESS;
}

pit_status ocl_matmul_sparse(void *bctx, void *stream, const pit_tile *tile,
                             const pit_index *idx, int32_t max_entries, int worst_case_grid,
                             const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    mm_problem p;
    OCL_TRY(describe_problem(A, B, C, &p));
    if (idx->tile.rows < 1 || idx->tile.cols < 1)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "opencl matmul: micro-tile %dx%d", idx->tile.rows,
                               idx->tile.cols);
    if (p.M == 0 || p.N == 0 || p.batch == 0)
        return PIT_SUCCESS;
    switch (idx->tile.axis) {
    case PIT_AXIS_K:
        return matmul_axis_k(c, s, tile, idx, &p);
    case PIT_AXIS_M:
        return matmul_axis_m(c, s, tile, idx, max_entries, worst_case_grid, &p);
    default:
        return ocl_host->error(PIT_ERR_UNSUPPORTED,
                               "opencl backend: sparse matmul along axis %d (sparse B) is "
                               "not implemented; only axes K and M of a sparse A",
                               (int)idx->tile.axis);
    }
}

/* ---- dense ------------------------------------------------------------------------- */

/* pit's own dense GEMM: the fused kernel with the identity gather. */
static pit_status dense_tile(ocl_ctx *c, ocl_stream *s, const mm_problem *p)
{
    mm_config cfg;
    cl_program prog;
    OCL_TRY(make_config(c, 1, 1, 1, 1, DENSE_BM, DENSE_BN, DENSE_BK, 0, &cfg));
    OCL_TRY(get_matmul_program(c, p->dtype, &cfg, &prog));
    return launch_matmul(c, s->queue, prog, &cfg, p, NULL, NULL,
                         (size_t)ocl_cdiv(p->M, cfg.bm), 1);
}

#ifdef PIT_HAVE_CLBLAST
static pit_status clblast_status(CLBlastStatusCode code, const char *what, const char *file,
                                 int line)
{
    if (code == CLBlastSuccess)
        return PIT_SUCCESS;
    if (code > -1000) /* shared with OpenCL's codes */
        return ocl_check((cl_int)code, what, file, line);
    return ocl_host->error(PIT_ERR_BACKEND, "%s failed: CLBlast status %d at %s:%d", what,
                           (int)code, file, line);
}

/* CLBlast's kernel and database caches are process-wide and not safe for
 * concurrent first use (ASan saw a use-after-free in its database init with
 * two threads): every CLBlast call in the process goes through this lock.
 * The calls only enqueue work, so the lock is held briefly once warm. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

/* One f32 GEMM of the batch through CLBlast (row-major, offsets in elements). */
static pit_status clblast_sgemm(ocl_stream *s, const mm_problem *p, int64_t b)
{
    cl_event ev = NULL;
    pthread_mutex_lock(&clblast_lock);
    const size_t ao = (size_t)(p->a.off + b * p->a.bs), bo = (size_t)(p->b.off + b * p->b.bs),
                 co = (size_t)(p->c.off + b * p->c.bs);
    CLBlastStatusCode code =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, (size_t)p->M,
                     (size_t)p->N, (size_t)p->K, 1.0f, p->a.mem, ao, (size_t)p->a.ld, p->b.mem, bo,
                     (size_t)p->b.ld, 0.0f, p->c.mem, co, (size_t)p->c.ld, &s->queue, &ev);
    pthread_mutex_unlock(&clblast_lock);
    if (ev)
        clReleaseEvent(ev);
    return clblast_status(code, "CLBlastSgemm", __FILE__, __LINE__);
}
#endif

pit_status ocl_matmul_dense(void *bctx, void *stream, const pit_tdesc *A, const pit_tdesc *B,
                            const pit_tdesc *C)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    mm_problem p;
    OCL_TRY(describe_problem(A, B, C, &p));
    if (p.M == 0 || p.N == 0 || p.batch == 0)
        return PIT_SUCCESS;
#ifdef PIT_HAVE_CLBLAST
    /* CLBlast has no bf16 and no K == 0, and its f16 GEMM needs cl_khr_fp16
     * and accumulates in half: f16 stays with the tile kernel, which loads
     * half words and accumulates in f32 like every other f16 kernel here. */
    if (p.K > 0 && p.dtype == PIT_F32) {
        for (int64_t b = 0; b < p.batch; ++b)
            OCL_TRY(clblast_sgemm(s, &p, b));
        return PIT_SUCCESS;
    }
#endif
    return dense_tile(c, s, &p);
}

const char *ocl_dense_name(void *bctx)
{
    (void)bctx;
#ifdef PIT_HAVE_CLBLAST
    return "CLBlast";
#else
    return "pit dense tile";
#endif
}

void ocl_dense_release(ocl_ctx *c)
{
    (void)c;
#ifdef PIT_HAVE_CLBLAST
    /* CLBlast's program cache retains our cl_context; without clearing it the
     * context could never be freed. This drops other contexts' entries too,
     * which only costs them a recompilation. */
    pthread_mutex_lock(&clblast_lock);
    CLBlastClearCache();
    pthread_mutex_unlock(&clblast_lock);
#endif
}
