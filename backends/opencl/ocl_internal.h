/*
 * ocl_internal.h - what the files of the OpenCL plug-in share. Nothing
 * outside backends/opencl/ includes it.
 */
#ifndef PIT_OCL_INTERNAL_H
#define PIT_OCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
/* clEnqueueMarker is the OpenCL 1.1 fallback of event_record. */
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS

#include <CL/cl.h>
#include <pthread.h>

#include "backend.h"

/* The services core gave us at registration (never NULL after it). */
extern const pit_host *ocl_host;

/* ---- errors ---------------------------------------------------------------
 * Every OpenCL call goes through OCL_CHECK: it turns a failing cl_int into a
 * pit_status with "what failed: code NAME at file:line" recorded by core.
 * `what` names the call, e.g. "clEnqueueNDRangeKernel(pit_matmul)". */
pit_status ocl_check(cl_int err, const char *what, const char *file, int line);
#define OCL_CHECK(what, err) ocl_check((err), (what), __FILE__, __LINE__)

/* Returns early from the enclosing function when a step fails. */
#define OCL_TRY(expr)                    \
    do {                                 \
        pit_status ocl_try_s_ = (expr);  \
        if (ocl_try_s_ != PIT_SUCCESS)   \
            return ocl_try_s_;           \
    } while (0)

const char *ocl_error_name(cl_int err);

/* ---- devices (all platforms, GPUs first) ---------------------------------- */
typedef struct ocl_device {
    cl_platform_id platform;
    cl_device_id id;
    cl_device_type type;
} ocl_device;

/* ---- a compiled program, cached per (source, defines) -------------------- */
typedef struct ocl_program {
    char *key; /* source name + "\n" + build options */
    cl_program program;
    int from_disk;       /* built from a disk-cache binary, not yet found wanting */
    cl_program replaced; /* the disk-cache program this one replaced (calls may hold it) */
    struct ocl_program *next;
} ocl_program;

/* ---- the backend context ---------------------------------------------------- */
typedef struct ocl_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    int cl_version;      /* 110, 120, 200, 300: device OpenCL version */
    int has_fp16;        /* cl_khr_fp16 (logged: f16 is computed in f32 either way) */
    size_t local_mem;    /* CL_DEVICE_LOCAL_MEM_SIZE */
    size_t max_wg;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong max_alloc;  /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    int host_memory;     /* the device's memory is the host's (ocl_device_takes_host) */
    char identity[512];  /* device + driver + platform, part of the disk cache key */
    pthread_mutex_t lock; /* guards programs */
    ocl_program *programs;
    pit_scratch_allocator scratch; /* alloc NULL: clCreateBuffer */
} ocl_ctx;

/* Device memory an operator takes for itself: from the context's allocator
 * when one is set (pit_context_set_allocator), else clCreateBuffer. It
 * remembers where it came from and for which queue, to go back there. */
typedef struct ocl_block {
    cl_mem mem;
    size_t bytes;
    pit_scratch_allocator from; /* from.alloc NULL: clCreateBuffer's */
    cl_command_queue queue;
} ocl_block;

/* A block of bytes (0 taken as 4) for work on q; what names it in errors. */
pit_status ocl_block_new(ocl_ctx *c, cl_command_queue q, size_t bytes, const char *what,
                         ocl_block *b);
/* Gives the block back; the work queued on its queue may still use it (both
 * clReleaseMemObject and a stream-ordered allocator wait for it). Empties b. */
void ocl_block_release(ocl_block *b);

/* A stream: an in-order queue, and the f32 scratch buffer where axis-M f16
 * and bf16 results are accumulated (per stream, so streams never share it). */
typedef struct ocl_stream {
    cl_command_queue queue;
    ocl_block scratch;
} ocl_stream;

struct pit_event {
    cl_event event;
};

/* ---- programs (ocl_program.c) ------------------------------------------------ */
/* Returns the built program of source `name` (one of the embedded kernel
 * sources, prefixed with pit_common.cl and the shared files it needs) with
 * build options `defines`, building it on first use (memory cache, then disk
 * cache, then the compiler). */
pit_status ocl_program_get(ocl_ctx *c, const char *name, const char *defines,
                           cl_program *out);
void ocl_programs_release(ocl_ctx *c);

/* The -DDT code every kernel source uses for a storage dtype (-1: none). */
static inline int ocl_dtype_code(pit_dtype t)
{
    return t == PIT_F32 ? 0 : t == PIT_F16 ? 1 : t == PIT_BF16 ? 2 : -1;
}

/* Bytes of one stored element (f16 and bf16 are 16-bit words, a u8 mask's
 * elements bytes, f32 and i32 32-bit words). */
static inline size_t ocl_dtype_bytes(pit_dtype t)
{
    return t == PIT_U8 ? 1 : t == PIT_F16 || t == PIT_BF16 ? 2 : 4;
}

/* Kernel objects through one process-wide lock (a PoCL 3.1 race). A program
 * from the disk cache that lacks the kernel is rebuilt from source once. */
pit_status ocl_kernel_new(ocl_ctx *c, cl_program program, const char *kname, cl_kernel *out);
void ocl_kernel_release(cl_kernel k);
/* Creates a kernel of a program and checks that its work-group size fits. */
pit_status ocl_kernel_create(ocl_ctx *c, cl_program program, const char *kname,
                             size_t wg, cl_kernel *out);

/* ---- kernel arguments ------------------------------------------------------ */
typedef struct ocl_args {
    cl_kernel kernel;
    const char *kname;
    cl_uint next;
    pit_status status; /* first failure sticks */
} ocl_args;

void ocl_args_begin(ocl_args *a, cl_kernel kernel, const char *kname);
void ocl_arg_mem(ocl_args *a, cl_mem m);
void ocl_arg_int(ocl_args *a, cl_int v);
void ocl_arg_long(ocl_args *a, cl_long v);
void ocl_arg_raw(ocl_args *a, size_t size, const void *value);
/* Enqueues an NDRange (local may be NULL) and releases the kernel. */
pit_status ocl_launch(ocl_args *a, cl_command_queue q, cl_uint dims,
                      const size_t *global, const size_t *local);

/* A read-write buffer of `bytes` (what names it in a failure). Every buffer
 * of the plug-in comes from here: a failure that means the memory is not
 * there (allocation failure, out of resources, a size above the device's
 * largest allocation) is PIT_ERR_OUT_OF_MEMORY, naming the size and the
 * driver's error. */
pit_status ocl_buffer_create(const ocl_ctx *c, size_t bytes, const char *what, cl_mem *out);

/* Fills a buffer with a 32-bit pattern on a queue (clEnqueueFillBuffer). */
pit_status ocl_fill32(cl_command_queue q, cl_mem mem, size_t offset, uint32_t pattern,
                      size_t bytes);

/* The memory entries of the plug-in's table (ocl_memory.c; core/backend.h
 * says what each does). */
pit_status ocl_mem_alloc(void *bctx, size_t bytes, void **mem);
void ocl_mem_free(void *bctx, void *mem);
pit_status ocl_set_scratch_allocator(void *bctx, const pit_scratch_allocator *a);
pit_status ocl_mem_write(void *bctx, void *stream, void *mem, size_t offset, const void *host, size_t bytes);
pit_status ocl_mem_read(void *bctx, void *stream, const void *mem, size_t offset, void *host, size_t bytes);
pit_status ocl_mem_fill32(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern, size_t bytes);
pit_status ocl_mem_copy(void *bctx, void *stream, void *dst, size_t dst_offset, const void *src,
                        size_t src_offset, size_t bytes);
pit_status ocl_mem_query(void *bctx, const void *mem, size_t need, size_t *bytes);
pit_status ocl_mem_wrap_host(void *bctx, void *host, size_t bytes, int read_only, void **mem);
pit_status ocl_mem_unwrap_host(void *bctx, void *stream, void *mem);

static inline int64_t ocl_cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* ---- tensors as kernel arguments (ocl_view.c) -------------------------------
 * A rank 2 or 3 tensor as every kernel takes it: the buffer, the element
 * offset, the row stride and the batch stride (0 for rank 2: the matrix is
 * shared by every batch). Columns are contiguous. */
typedef struct ocl_mat {
    cl_mem mem;
    cl_long off, ld, bs;
} ocl_mat;

ocl_mat ocl_mat_of(const pit_tdesc *t);
/* Buffer, offset, row stride, batch stride. */
void ocl_arg_view(ocl_args *a, const ocl_mat *v);
void ocl_arg_mat(ocl_args *a, const pit_tdesc *t);
/* Buffer, offset, row stride: a matrix without a batch. */
void ocl_arg_rows(ocl_args *a, const pit_tdesc *t);
/* The index as the mask operators take it: counts, entries, groups per
 * batch, the group stride between batches (0 for an index shared by every
 * batch) and the capacity. */
void ocl_arg_index(ocl_args *a, const pit_index *idx);

static inline int64_t ocl_rows_of(const pit_tdesc *t)
{
    return t->shape[t->rank - 2];
}

static inline int64_t ocl_cols_of(const pit_tdesc *t)
{
    return t->shape[t->rank - 1];
}

static inline int64_t ocl_batch_of(const pit_tdesc *t)
{
    return t->rank == 3 ? t->shape[0] : 1;
}

/* The -DMDT code of a pattern (a mask, or an operand detection scans): how
 * mask_on() in pit_common.cl reads one element. A dtype that cannot be a
 * pattern is refused (PIT_ERR_UNSUPPORTED_DTYPE, "opencl <what> dtype ..."
 * naming the allowed ones), so no kernel reads it wrongly. */
pit_status ocl_pattern_code(const pit_tdesc *t, const char *what, int *mdt);

/* ---- the operator kernels (ocl_op_kernel.c) ----------------------------------
 * The kernels of sddmm, softmax, attention, moe, rows and elementwise share
 * one set of -D defines: storage dtype, mask code, dense tile (pit_tile.cl;
 * attention reads BM, BN, BK as its own chunk sizes) and work-group size.
 * One program of a family's source per set. */
typedef struct ocl_op_config {
    pit_dtype dtype;
    int mask_code; /* how a mask element is read (-DMDT, ocl_pattern_code) */
    int bm, bn, bk;
    size_t wg;
} ocl_op_config;

#define OCL_OP_BK 16 /* the k-slab of the mask operators' tile */

/* The configuration of the element-wise kernels (no tile). */
ocl_op_config ocl_op_elementwise(pit_dtype dtype);
/* The tile core asked for, kept inside what the kernels and device allow. */
ocl_op_config ocl_op_tile(const ocl_ctx *c, pit_dtype dtype, const pit_tile *tile);
/* The tile k runs, into *tile (the in/out tile of moe_matmul and matmul_rows; NULL: nothing). */
void ocl_op_tile_ran(const ocl_op_config *k, pit_tile *tile);
/* wg halved until the device allows it. */
size_t ocl_op_fit_wg(const ocl_ctx *c, size_t wg);
/* Chunks of bm entries that cover the longest group (max_entries, at most
 * the capacity). */
cl_int ocl_op_chunks(int32_t max_entries, const pit_index *idx, int bm);
/* Kernel kname of family source `source` built with k, checked to fit the
 * device with wg work-items per group. */
pit_status ocl_op_kernel(ocl_ctx *c, const char *source, const ocl_op_config *k,
                         const char *kname, size_t wg, cl_kernel *out);

/* ---- operator families (ops/ocl_<family>.c): the table's entries ------------ */
/* detection */
pit_status ocl_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n);
/* sparse matmul along K and M, and the dense GEMM */
pit_status ocl_matmul_sparse(void *bctx, void *stream, const pit_tile *tile,
                             const pit_index *idx, int32_t max_entries, int worst_case_grid,
                             const pit_tdesc *A, const pit_tdesc *B, const pit_tdesc *C);
pit_status ocl_matmul_dense(void *bctx, void *stream, const pit_tdesc *A,
                            const pit_tdesc *B, const pit_tdesc *C);
const char *ocl_dense_name(void *bctx);
/* Called from context_destroy: drops what the dense GEMM library cached. */
void ocl_dense_release(ocl_ctx *c);
/* SDDMM */
pit_status ocl_sddmm(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A,
                     const pit_tdesc *B, const pit_tdesc *mask, const pit_tdesc *C);
/* sparse softmax and its backward */
pit_status ocl_softmax_sparse(void *bctx, void *stream, const pit_index *idx,
                              const pit_tdesc *X, const pit_tdesc *mask, const pit_tdesc *Y,
                              float scale);
pit_status ocl_softmax_sparse_backward(void *bctx, void *stream, const pit_index *idx,
                                       const pit_tdesc *Y, const pit_tdesc *dY,
                                       const pit_tdesc *mask, const pit_tdesc *dX,
                                       float scale);
/* fused attention: an online softmax over the listed key blocks (attention_sparse), or
 * over the keys each query may see with every option of pit_attention (attention_ex) */
pit_status ocl_attention(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *Q,
                         const pit_tdesc *K, const pit_tdesc *V, const pit_tdesc *mask,
                         const pit_tdesc *O, float scale);
pit_status ocl_attention_ex(void *bctx, void *stream, const pit_attention_desc *d);
pit_status ocl_attention_backward(void *bctx, void *stream, const pit_attention_desc *d,
                                  const pit_tdesc *dO, const pit_tdesc *dQ, const pit_tdesc *dK,
                                  const pit_tdesc *dV);
/* Mixture of Experts: routing and the grouped expert products */
pit_status ocl_moe_route(void *bctx, void *stream, const pit_tdesc *ids, const pit_index *idx);
pit_status ocl_moe_matmul(void *bctx, void *stream, int mode, pit_tile *tile,
                          const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                          const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y);
pit_status ocl_moe_activation(void *bctx, void *stream, int act, const pit_tdesc *U,
                              const pit_tdesc *dA, const pit_tdesc *gates, const pit_tdesc *A,
                              const pit_tdesc *dU, const pit_tdesc *dgates);
/* row-sparse matmul */
pit_status ocl_matmul_rows(void *bctx, void *stream, pit_tile *tile,
                           const pit_index *idx, int32_t max_entries, const pit_tdesc *A,
                           const pit_tdesc *B, const pit_tdesc *C, int keep_skipped);
/* element-wise: relu, transpose, and the zero pass the operators start with */
pit_status ocl_relu(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y);
pit_status ocl_transpose(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y);
/* Every element of t set to zero (strided views keep their gaps). */
pit_status ocl_zero_tensor(ocl_ctx *c, cl_command_queue q, const pit_tdesc *t);

#endif /* PIT_OCL_INTERNAL_H */
