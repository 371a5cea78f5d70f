/*
 * pit.h - the public C API of libpit.
 *
 * pit runs dynamically sparse deep-learning operators at dense-GPU speed with
 * PIT (Permutation Invariant Transformation, SOSP'23): non-zero micro-tiles
 * found at run time are gathered into dense tiles (SRead), computed by dense
 * tile kernels, and scattered back (SWrite).
 *
 * Conventions
 *  - Every function returns a pit_status. On failure pit_last_error() gives a
 *    message with the detail (argument, shape, vendor call and its code).
 *  - Objects come out through pointer arguments and are opaque.
 *  - The library never prints (unless PIT_LOG asks), never aborts and never
 *    keeps hidden global state other than the loaded backend plug-ins (the
 *    log sink of pit_set_log_callback is set, not hidden).
 *
 * Threading
 *  - Contexts are independent of each other and may be used from different
 *    threads at once.
 *  - One context may be used from several threads at once provided each thread
 *    passes its own pit_stream to calls that take one; calls on the same
 *    stream from several threads must be serialised by the caller.
 *  - pit_last_error() is per thread.
 */
#ifndef PIT_H
#define PIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIT_VERSION_MAJOR 0
#define PIT_VERSION_MINOR 2
#define PIT_VERSION_PATCH 0
#define PIT_VERSION ((PIT_VERSION_MAJOR * 10000) + (PIT_VERSION_MINOR * 100) + PIT_VERSION_PATCH)

#if defined(_WIN32)
#define PIT_API
#else
#define PIT_API __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef enum pit_status {
    PIT_SUCCESS = 0,
    PIT_ERR_INVALID_ARGUMENT = 1,  /* null pointer, bad enum, bad option        */
    PIT_ERR_SHAPE_MISMATCH = 2,    /* shapes of operands do not agree           */
    PIT_ERR_UNSUPPORTED_DTYPE = 3, /* dtype not allowed for this operator      */
    PIT_ERR_BAD_STRIDES = 4,       /* strides not row-major compatible          */
    PIT_ERR_UNSUPPORTED = 5,       /* feature absent on this device/backend     */
    PIT_ERR_BACKEND_NOT_FOUND = 6, /* named backend unknown or cannot be loaded */
    PIT_ERR_BACKEND_INVALID = 7,   /* a file that is not a (compatible) plug-in */
    PIT_ERR_NO_DEVICE = 8,         /* backend loaded but has no device/driver   */
    PIT_ERR_DEVICE_INDEX = 9,      /* device index out of range                 */
    PIT_ERR_OUT_OF_MEMORY = 10,    /* host or device allocation failed          */
    PIT_ERR_COMPILE = 11,          /* run-time kernel compilation failed        */
    PIT_ERR_BACKEND = 12,          /* a vendor call failed                      */
    PIT_ERR_PARSE = 13,            /* malformed file (tile database, cache)     */
    PIT_ERR_IO = 14,               /* file could not be read or written         */
    PIT_ERR_CONTEXT_MISMATCH = 15, /* objects from different contexts mixed     */
    PIT_ERR_ALIASING = 16,         /* output overlaps an input                  */
    PIT_ERR_INTERNAL = 17          /* a bug in pit: please report it            */
} pit_status;

/* Name of a status code ("PIT_ERR_SHAPE_MISMATCH"); never NULL. */
PIT_API const char *pit_status_string(pit_status status);

/* The calling thread's last error message, or "" if the last call succeeded.
 * The string is owned by the library and valid until the thread's next pit call. */
PIT_API const char *pit_last_error(void);

/* The run-time library version, encoded like PIT_VERSION. */
PIT_API int pit_version(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

/* How much a log line matters: warn (something was ignored or fell back:
 * a malformed tile database line, a tile the device refused), info (what was
 * loaded and chosen: the backend, the device, the tile database), debug
 * (every detection, selection and compile). */
typedef enum pit_log_level {
    PIT_LOG_DEBUG = 0,
    PIT_LOG_INFO = 1,
    PIT_LOG_WARN = 2
} pit_log_level;

/* Receives one log line: no "pit: " prefix, no newline. */
typedef void (*pit_log_fn)(void *user, pit_log_level level, const char *message);

/* Sends the library's log lines to fn instead of stderr; fn NULL restores the
 * stderr sink. Process-wide and thread-safe: fn may be called from several
 * threads at once, and once this returns the previous fn is neither running
 * nor called again. fn must not call pit (a line logged from inside fn is
 * dropped; pit_set_log_callback from inside fn returns
 * PIT_ERR_INVALID_ARGUMENT). Which levels are produced: PIT_LOG (read once
 * per process) names the lowest, `debug` (or `1`), `info` or `warn`; `off`
 * (or `0`) produces none. PIT_LOG unset: fn receives warn lines, stderr
 * receives nothing (the library never prints unless PIT_LOG asks). */
PIT_API pit_status pit_set_log_callback(pit_log_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Data types                                                               */
/* ------------------------------------------------------------------------ */

typedef enum pit_dtype {
    PIT_F32 = 0,
    PIT_F16 = 1,
    PIT_BF16 = 2,
    PIT_I32 = 3, /* indices, expert ids */
    PIT_U8 = 4   /* pattern masks only: 0/1 bytes (PyTorch's bool, numpy's uint8) */
} pit_dtype;

/* "f32", "f16", "bf16", "i32", "u8", or "?" for an invalid value. */
PIT_API const char *pit_dtype_name(pit_dtype dtype);
/* Size in bytes of one element, 0 for an invalid value. */
PIT_API size_t pit_dtype_size(pit_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Backends, devices and contexts                                           */
/* ------------------------------------------------------------------------ */

typedef struct pit_context pit_context;
typedef struct pit_stream pit_stream;
typedef struct pit_tensor pit_tensor;

typedef struct pit_device_info {
    char backend[16];        /* "cuda", "hip", "opencl"                        */
    char vendor[64];         /* "NVIDIA Corporation", "AMD", "The pocl project" */
    char name[128];          /* device name as the driver reports it           */
    char arch[32];           /* "sm_90", "gfx90a", "opencl-gpu", "opencl-cpu"   */
    char driver_version[64]; /* driver / runtime version string                */
    uint64_t global_mem_bytes;
    int compute_units;
    int device_index;
    int has_f16;  /* native f16 arithmetic (cl_khr_fp16 on OpenCL)    */
    int has_bf16; /* bf16 storage supported                           */
    char tiledb_source[256]; /* which tile database this context uses */
    char tiledb_family[32];  /* shipped tile database of its family: "nvidia-sm90",
                                "amd-gfx9", "opencl-gpu", ...; "" if none   */
    int dlpack_device_type;  /* DLPack device type of its memory (kDLCUDA, ...) */
    int has_f16_storage;     /* f16 tensors accepted: stored as half and computed
                                in f32 where has_f16 is 0 (every OpenCL device);
                                always set where has_f16 is */
    int takes_host_memory;   /* 1: its memory is the host's (an OpenCL CPU device, or
                                CL_DEVICE_HOST_UNIFIED_MEMORY), and DLPack imports
                                of host memory (kDLCPU) are wrapped without a copy */
} pit_device_info;

/* Number of devices a backend ("cuda", "hip", "opencl") has. Loads the plug-in.
 * Errors: PIT_ERR_BACKEND_NOT_FOUND (plug-in, or a library it needs such as
 * NVRTC, missing; the message names the files looked for and where),
 * PIT_ERR_NO_DEVICE (driver missing: *count is set to 0). */
PIT_API pit_status pit_device_count(const char *backend, int *count);

/* Information on one device of a backend without creating a context. */
PIT_API pit_status pit_device_get_info(const char *backend, int device_index,
                                       pit_device_info *info);

/* Creates a context on a device. backend may be "cuda", "hip", "opencl", or
 * NULL to use PIT_BACKEND ("name" or "name:N"), and when that is unset the
 * first backend with a device in the order cuda, hip, opencl. device_index is
 * used when backend is non-NULL (or PIT_BACKEND has no ":N"); pass -1 for 0.
 * A requested backend that cannot be loaded is an error, never a fallback.
 * The caller owns *ctx and releases it with pit_context_destroy.
 * Errors: PIT_ERR_BACKEND_NOT_FOUND, PIT_ERR_BACKEND_INVALID, PIT_ERR_NO_DEVICE,
 * PIT_ERR_DEVICE_INDEX, PIT_ERR_OUT_OF_MEMORY, PIT_ERR_BACKEND. */
PIT_API pit_status pit_context_create(const char *backend, int device_index,
                                      pit_context **ctx);

/* Releases a context, its default stream, its plans and its kernel cache.
 * Its tensors, streams and events must be destroyed first: while any is
 * alive the context is kept, untouched and usable, and the call returns
 * PIT_ERR_INVALID_ARGUMENT with a message that counts them ("2 tensors and
 * 1 stream of this context are still alive ..."). NULL is a no-op. */
PIT_API pit_status pit_context_destroy(pit_context *ctx);

/* Fills *info for the context's device. */
PIT_API pit_status pit_context_get_info(const pit_context *ctx, pit_device_info *info);

/* A framework's allocator (a caching allocator such as PyTorch's) from which
 * a context takes its device memory. */
typedef struct pit_allocator {
    /* A block of at least `bytes` (> 0): a device pointer aligned to 16 bytes
     * or more (CUDA, HIP), or a cl_mem of the context's cl_context (OpenCL);
     * NULL when there is none (pit returns PIT_ERR_OUT_OF_MEMORY). stream is
     * the native stream (CUstream, hipStream_t, cl_command_queue) whose work
     * will use the block, or NULL for a block that lives across calls (a
     * tensor, a plan's index, a cached workspace) and serves any stream. */
    void *(*alloc)(void *user, size_t bytes, void *stream);
    /* Takes back a block with the stream it was allocated for. Work queued on
     * that stream may still use it: reuse it only for work ordered after
     * (what stream-ordered allocators do). A block of stream NULL is given
     * back when no pit work uses it any more: pit waits for the stream of a
     * plan or workspace first; pit_tensor_destroy gives a tensor's block back
     * at once (the caller makes sure no queued work still uses the tensor). */
    void (*free)(void *user, void *block, void *stream);
    void *user;
} pit_allocator;

/* From now on, every device allocation pit makes for ctx goes through
 * allocator (copied; user is passed back as it is): pit_tensor_create's
 * tensors, plans' indices, workspaces, and the scratch a backend takes inside
 * an operator. NULL restores the backend's own allocation. A block is always
 * given back to the allocator that gave it, so every allocator set (and its
 * user) must stay usable until the context is destroyed. Call it while no
 * other call uses the context. Not routed: memory a vendor library takes for
 * itself (cuBLAS's workspace, CLBlast's temporary buffers) and the kernels'
 * code. Errors: PIT_ERR_INVALID_ARGUMENT (ctx NULL; alloc or free NULL),
 * PIT_ERR_UNSUPPORTED (a backend that cannot route its scratch). */
PIT_API pit_status pit_context_set_allocator(pit_context *ctx, const pit_allocator *allocator);

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

/* Every call that takes a pit_stream* accepts NULL for the context's default
 * stream. Work on one stream runs in order. */

/* Creates a new stream (CUDA stream, HIP stream, OpenCL in-order queue). */
PIT_API pit_status pit_stream_create(pit_context *ctx, pit_stream **stream);

/* Wraps a native stream the caller owns (CUstream, hipStream_t,
 * cl_command_queue) so pit work is ordered with the framework's work. */
PIT_API pit_status pit_stream_wrap(pit_context *ctx, void *native_stream,
                                   pit_stream **stream);

/* Destroys a stream (the native one only if pit created it). NULL is a no-op. */
PIT_API pit_status pit_stream_destroy(pit_stream *stream);

/* Blocks until all work queued on the stream (NULL: default stream) is done. */
PIT_API pit_status pit_synchronize(pit_context *ctx, pit_stream *stream);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

#define PIT_MAX_RANK 4

typedef struct pit_tensor_desc {
    pit_dtype dtype;
    int rank;
    int64_t shape[PIT_MAX_RANK];
    int64_t strides[PIT_MAX_RANK]; /* in elements */
    void *data;                    /* device pointer or cl_mem            */
    size_t byte_offset;            /* from data to the first element      */
    int owned;                     /* 1 when pit allocated the memory     */
} pit_tensor_desc;

/* Allocates a contiguous row-major tensor in device memory. The contents are
 * undefined. Errors: PIT_ERR_INVALID_ARGUMENT (rank outside 1..4, dimension
 * < 0), PIT_ERR_UNSUPPORTED_DTYPE, PIT_ERR_OUT_OF_MEMORY. */
PIT_API pit_status pit_tensor_create(pit_context *ctx, pit_dtype dtype, int rank,
                                     const int64_t *shape, pit_tensor **tensor);

/* Describes device memory the caller owns (borrowed: pit never frees it).
 * data is a device pointer (CUDA, HIP) or a cl_mem (OpenCL); strides in
 * elements, NULL for contiguous row-major. The innermost stride must be 1 and
 * no two elements may share memory, else PIT_ERR_BAD_STRIDES: the other
 * dimensions may come in any stride order (each stride, taken in ascending
 * order, at least the span of the smaller ones), so a [B, L, H, D] buffer
 * can be seen as [B, H, L, D]. Only pit_attention takes views whose strides
 * are not in row-major order; every other operator refuses them with
 * PIT_ERR_BAD_STRIDES. byte_offset must be a multiple of the element size.
 * The view must lie inside data's buffer (a cl_mem's size, a sub-buffer's
 * own; on CUDA/HIP the allocation holding the pointer), else
 * PIT_ERR_INVALID_ARGUMENT naming both sizes; memory of another context
 * (OpenCL: another cl_context) or device (CUDA/HIP) is
 * PIT_ERR_CONTEXT_MISMATCH; host memory on CUDA/HIP is
 * PIT_ERR_INVALID_ARGUMENT. Host memory on an OpenCL CPU device comes through
 * a DLPack import (kDLCPU), whose device type says what the pointer is: here
 * data on OpenCL is always a cl_mem. docs/api.md says what each backend
 * checks. */
PIT_API pit_status pit_tensor_wrap(pit_context *ctx, pit_dtype dtype, int rank,
                                   const int64_t *shape, const int64_t *strides,
                                   void *data, size_t byte_offset,
                                   pit_tensor **tensor);

/* Releases the descriptor and, for tensors pit allocated, the memory. For a
 * DLPack import it calls the producer's deleter; for an import of host memory
 * it first makes the host memory hold the device's writes (a blocking map on
 * the context's default stream: destroy a tensor once the work that uses it
 * is synchronised). NULL is a no-op. Errors: PIT_ERR_BACKEND when that map
 * fails (the tensor is released all the same). */
PIT_API pit_status pit_tensor_destroy(pit_tensor *tensor);

/* Copies the tensor's description into *desc. */
PIT_API pit_status pit_tensor_get_desc(const pit_tensor *tensor, pit_tensor_desc *desc);

/* Copies bytes from host memory into the tensor (contiguous row-major order of
 * the logical elements) and waits for the copy. bytes must equal the tensor's
 * element count times the element size, else PIT_ERR_SHAPE_MISMATCH. */
PIT_API pit_status pit_tensor_upload(pit_tensor *tensor, pit_stream *stream,
                                     const void *host, size_t bytes);

/* Copies the tensor into host memory (contiguous row-major order) and waits. */
PIT_API pit_status pit_tensor_download(const pit_tensor *tensor, pit_stream *stream,
                                       void *host, size_t bytes);

/* Sets every element of the tensor to zero, ordered on the stream. */
PIT_API pit_status pit_tensor_zero(pit_tensor *tensor, pit_stream *stream);

struct DLManagedTensor;          /* from <dlpack/dlpack.h> */
struct DLManagedTensorVersioned; /* from <dlpack/dlpack.h> of DLPack 1.0 or later */

/* Imports a DLPack tensor without a copy. The device type must match the
 * context's backend (kDLCUDA, kDLROCM, kDLOpenCL) and the device id its
 * device, or be host memory (kDLCPU) on a device that takes it
 * (pit_device_info.takes_host_memory: an OpenCL CPU device), where the view's
 * bytes are wrapped in place as a buffer of the device (OpenCL:
 * CL_MEM_USE_HOST_PTR). Host memory must stay valid until the tensor is
 * destroyed; write inputs before the import (an implementation may take a
 * copy then). Kernels' results are in the host memory once pit_tensor_destroy
 * returns (it maps the buffer for reading), and already when the stream is
 * synchronised where the implementation uses the memory in place (PoCL).
 * On success pit owns *managed and calls its deleter when the tensor is
 * destroyed; on failure the caller keeps ownership.
 * Errors: PIT_ERR_INVALID_ARGUMENT (device mismatch, host memory on a device
 * that does not take it, lanes != 1, a view past the end of its buffer),
 * PIT_ERR_UNSUPPORTED_DTYPE, PIT_ERR_BAD_STRIDES, PIT_ERR_CONTEXT_MISMATCH
 * (memory of another context: see pit_tensor_wrap). */
PIT_API pit_status pit_tensor_from_dlpack(pit_context *ctx, struct DLManagedTensor *managed,
                                          pit_tensor **tensor);

/* The same for DLPack 1.x's versioned struct. A major version other than 1
 * is PIT_ERR_UNSUPPORTED (nothing past the version is read; the caller keeps
 * ownership and calls the deleter, as DLPack asks). A tensor flagged
 * DLPACK_FLAG_BITMASK_READ_ONLY is imported read-only: pit never writes it,
 * so an operator given it as an output, pit_tensor_upload and
 * pit_tensor_zero refuse it with PIT_ERR_INVALID_ARGUMENT; it is a valid
 * input everywhere. */
PIT_API pit_status pit_tensor_from_dlpack_versioned(pit_context *ctx,
                                                    struct DLManagedTensorVersioned *managed,
                                                    pit_tensor **tensor);

/* Exports a tensor as DLPack without a copy. The consumer owns *managed and
 * must call its deleter; the pit tensor must outlive that use. A read-only
 * tensor is PIT_ERR_INVALID_ARGUMENT here (DLPack 0.x has no flag for it):
 * export it with pit_tensor_to_dlpack_versioned. */
PIT_API pit_status pit_tensor_to_dlpack(pit_tensor *tensor, struct DLManagedTensor **managed);

/* The same as DLPack 1.0's versioned struct: version 1.0, flags
 * DLPACK_FLAG_BITMASK_READ_ONLY for a read-only tensor, else 0. */
PIT_API pit_status pit_tensor_to_dlpack_versioned(pit_tensor *tensor,
                                                  struct DLManagedTensorVersioned **managed);

/* ------------------------------------------------------------------------ */
/* Micro-tiles and call reports                                             */
/* ------------------------------------------------------------------------ */

/* The permutation-invariant axis along which non-zero micro-tiles are gathered. */
typedef enum pit_axis {
    PIT_AXIS_AUTO = 0,
    PIT_AXIS_K = 1, /* reduction axis: Tm x Tk micro-tiles, gather along K   */
    PIT_AXIS_M = 2, /* row axis: gather rows, SWrite accumulates into C      */
    PIT_AXIS_N = 3  /* column axis (sparse B / output sparsity)              */
} pit_axis;

/* A micro-tile shape on the sparse operand: rows x cols, gathered along axis.
 * {32,1,K} is the paper's 32x1, {1,64,M} its 1x64, {32,64,K} its 32x64.
 * rows == 0 means "let the selection choose". */
typedef struct pit_microtile {
    int32_t rows;
    int32_t cols;
    pit_axis axis;
} pit_microtile;

/* What a call did; optional output of every operator. Cleared first, so a
 * failed call leaves zeros and "" (docs/api.md, "Reports", has every form
 * of choice and which fields each operator fills). */
typedef struct pit_report {
    int used_dense;           /* 1 when the dense GEMM ran (chosen, kept,
                               * forced, or in place of a refused tile)      */
    int skipped_compute;      /* 1 when no non-zero micro-tile was found, so
                               * the output was only zeroed                  */
    pit_microtile microtile;  /* the micro-tile the sparse kernel ran with;
                               * when used_dense, the sparse candidate the
                               * dense GEMM was weighed against (whose counts
                               * follow); {0, 0, 0} with force_dense         */
    int32_t bm, bn, bk;       /* the kernel's tile; for the dense GEMM, the
                               * tile-database row its cost was modelled with
                               * (a vendor library picks its own)            */
    int64_t nonzero_tiles;    /* non-zero micro-tiles of `microtile` in the
                               * pattern, as last read back. Between its full
                               * looks (pit_context_set_redetect_interval) a
                               * settled dense plan does not look at the
                               * pattern and a settled sparse one along K
                               * reads no counts: both give the count of
                               * their last full look (along M the chosen
                               * micro-tile's counts are read every call).
                               * -1 when the call never reads the pattern
                               * (force_dense, fixed_plan)                   */
    int64_t total_tiles;      /* micro-tiles of `microtile` in the operand    */
    double predicted_us;      /* cost model's estimate of the choice          */
    double runner_up_us;      /* estimate of the second best option           */
    char choice[96];          /* what ran: "k32x1 tile 32x64x32 (96 tiles)",
                               * "dense CLBlast", "sddmm 32x32", ...          */
    char runner_up[96];       /* the second best option, "none", or ""      */
    int reselected;           /* 1 when this call re-ran the selection        */
    /* Filled when pit_matmul_options.profile is set (device events; the call
     * then waits for the device): */
    double detect_ms;         /* detection + index construction               */
    double select_us;         /* host time of the selection                   */
    double kernel_ms;         /* the compute kernel (sparse or dense)         */
    double total_ms;          /* the whole call, host read-back included      */
} pit_report;

/* ------------------------------------------------------------------------ */
/* Operators                                                                */
/* ------------------------------------------------------------------------ */

typedef enum pit_sparse_operand {
    PIT_SPARSE_A = 0, /* activations: C = A.B with A dynamically sparse */
    PIT_SPARSE_B = 1  /* weights: C = A.B with B dynamically sparse     */
} pit_sparse_operand;

typedef struct pit_matmul_options {
    pit_sparse_operand sparse;   /* which operand is sparse (default A)         */
    pit_microtile microtile;     /* force a micro-tile; rows == 0 = automatic  */
    int force_dense;             /* 1: skip PIT, call the dense GEMM           */
    int fixed_plan;              /* 1: read nothing back; graph-capturable     */
    int32_t tile_bm, tile_bn, tile_bk; /* force a dense tile; 0 = automatic    */
    int profile;                 /* 1: time the parts into the report (syncs)  */
} pit_matmul_options;

/* The defaults: sparse A, automatic micro-tile and tile. */
PIT_API pit_matmul_options pit_matmul_options_default(void);

/* How often a settled pit_matmul plan looks at the whole pattern again, in
 * calls (default 8). A plan is settled once it has chosen and the pattern's
 * density stays within 2 points of what it chose on. In the calls between
 * two full looks a plan that chose the dense GEMM does not look at the
 * pattern at all (a shift towards sparsity is seen up to 7 calls late, at a
 * cost in speed, never in correctness), and a sparse one detects only its
 * own micro-tile. 1: every call looks at every candidate and re-selects when
 * the density moved (reports then always describe this call's pattern, at
 * the price of a detection and a read-back each call). Applies to later calls
 * of every stream of ctx, pit_relu_ffn and pit_matmul_backward included.
 * Errors: PIT_ERR_INVALID_ARGUMENT (ctx NULL, calls outside 1..1024). */
PIT_API pit_status pit_context_set_redetect_interval(pit_context *ctx, int calls);

/* C = A . B where A (M x K) or B (K x N), as options say, is dynamically
 * sparse: its zeros are found on the device during the call (detection ->
 * out-of-order index -> selection -> SRead/dense tile/SWrite kernel).
 * Rank 2, or rank 3 for a batch (same batch size on all three).
 * All three tensors share a dtype: f32, f16 or bf16 (f32 accumulation).
 * C is overwritten; it must not overlap A or B.
 * options and report may be NULL. Errors: PIT_ERR_INVALID_ARGUMENT,
 * PIT_ERR_SHAPE_MISMATCH, PIT_ERR_UNSUPPORTED_DTYPE, PIT_ERR_BAD_STRIDES,
 * PIT_ERR_CONTEXT_MISMATCH, PIT_ERR_ALIASING, PIT_ERR_UNSUPPORTED (e.g. f16 on
 * an OpenCL device without cl_khr_fp16), PIT_ERR_COMPILE, PIT_ERR_BACKEND. */
PIT_API pit_status pit_matmul(pit_context *ctx, pit_stream *stream,
                              const pit_tensor *A, const pit_tensor *B, pit_tensor *C,
                              const pit_matmul_options *options, pit_report *report);

/* Dense C = A . B with the backend's vendor GEMM (cuBLAS, CLBlast, rocBLAS) or
 * pit's own dense tile when no vendor library is present. Same argument rules
 * as pit_matmul. Used as the fallback and as the baseline in pit bench. */
PIT_API pit_status pit_matmul_dense(pit_context *ctx, pit_stream *stream,
                                    const pit_tensor *A, const pit_tensor *B, pit_tensor *C);

/* ------------------------------------------------------------------------ */
/* Operators of dynamic-sparse models                                       */
/* ------------------------------------------------------------------------ */
/* Pattern tensors ("mask") may be f32, f16, bf16, i32 or u8: an element is in
 * the pattern when it is non-zero (NaN counts as non-zero, -0.0 as zero; every
 * non-zero i32, INT_MIN included), so either a 0/1 mask
 * or the values whose zeros define the pattern can be passed. A u8 mask (a
 * bool tensor through DLPack) is the cheapest to detect: half the bytes of a
 * 16-bit one. A mask of rank 2
 * applies to every batch; a mask of the operand's rank gives one per batch. */

/* SDDMM (output-sparse matmul): C = (A . B^T) masked by pattern, computing only
 * the non-zero block_rows x block_cols output micro-tiles (0, 0 = automatic).
 * A [b,M,K] or [M,K], B [b,N,K] or [N,K], mask [M,N] or [b,M,N], C like mask's
 * [b,M,N]. C is fully written: zero outside the pattern. f32, f16, bf16. */
PIT_API pit_status pit_sddmm(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                             const pit_tensor *B, const pit_tensor *mask, pit_tensor *C,
                             int32_t block_rows, int32_t block_cols, pit_report *report);

/* Sparse softmax along rows: Y = softmax(scale * X) over the entries where
 * mask is non-zero; masked entries and fully masked rows give 0 (never NaN).
 * Each scaled logit is rounded to f32 once, and that value serves both the
 * row's max and the exponent, so logits finite in f32 are right however large
 * (to that rounding); a -inf weighs 0, and a row of -inf alone gives 0 too.
 * X, Y [b,M,N] or [M,N], f32/f16/bf16 (f32 arithmetic). */
PIT_API pit_status pit_sparse_softmax(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                      const pit_tensor *mask, pit_tensor *Y, float scale,
                                      pit_report *report);

/* Backward of pit_sparse_softmax: dX = scale * Y * (dY - rowsum(dY * Y)) on
 * the pattern, 0 elsewhere. */
PIT_API pit_status pit_sparse_softmax_backward(pit_context *ctx, pit_stream *stream,
                                               const pit_tensor *Y, const pit_tensor *dY,
                                               const pit_tensor *mask, pit_tensor *dX, float scale);

/* Dynamic sparse attention (pit_attention with an element mask and a
 * micro-tile of block x block): O = softmax(scale * Q K^T masked) V, with one
 * block index of the mask (built on the device each call) reused by the
 * SDDMM, the softmax and the sparse x dense product. Q, K [BH,L,D], V, O
 * [BH,L,Dv], mask [L,L] or [BH,L,L]; block = micro-tile side (0: chosen
 * at run time, as pit_attention's automatic micro-tile: on CUDA key-column
 * micro-tiles of 64 query rows, elsewhere 64).
 * Rows with no allowed key give 0; large scaled scores as in
 * pit_sparse_softmax (where the steps are not fused, Q K^T is stored in
 * the data's dtype before it is scaled, so it must fit that dtype).
 * Where the backend fuses the three steps (OpenCL always; CUDA for the
 * 16-bit shapes its fused kernel takes, see docs/architecture.md), no score
 * matrix is stored: the device memory the call adds is the block index
 * alone, however long L (the composed steps store [BH,L,L] scores). A fused
 * call reads nothing back between detection and the kernel, so the call
 * does not wait for the device; with a report, it reads the count of
 * allowed blocks after queuing the kernel, and so waits for it
 * (report->nonzero_tiles; skipped_compute is 1 when no block is allowed,
 * though the kernel still ran to write the zeros). Pass NULL for no wait. */
PIT_API pit_status pit_sparse_attention(pit_context *ctx, pit_stream *stream, const pit_tensor *Q,
                                        const pit_tensor *K, const pit_tensor *V,
                                        const pit_tensor *mask, pit_tensor *O, float scale,
                                        int32_t block, pit_report *report);

/* Options of pit_attention; start from pit_attention_options_default().
 * Every condition set here combines with the others (a key is allowed for a
 * query only where all of them allow it). Query i and key j are related
 * through the diagonal aligned to the END of the keys, d = Lk - Lq (a KV
 * cache holds the earlier keys): key j is "at" query i when j = i + d. */
typedef struct pit_attention_options {
    float scale;          /* scores are scale * Q.K; 0: 1 / sqrt(D)             */
    int causal;           /* 1: query i sees keys j <= i + (Lk - Lq); 0: no bound */
    int32_t window_left;  /* -1: none; else keys j >= i + (Lk - Lq) - window_left */
    int32_t window_right; /* -1: none; else keys j <= i + (Lk - Lq) + window_right */
    /* Optional element mask, non-zero = allowed (as for every pit mask):
     * [Lq, Lk] (every batch and head), [Hq, Lq, Lk] (one per query head,
     * every batch) or [B, Hq, Lq, Lk]; a leading dimension of extent 1
     * applies to every batch or head ([1, Lq, Lk], [B, 1, Lq, Lk], ...).
     * f32, f16, bf16, i32 or u8 (bool). Row-major strides; a rank-4 mask's
     * batch and head dimensions must be mergeable (batch stride = Hq x head
     * stride, or one of the two of extent 1). */
    const pit_tensor *mask;
    /* Optional block mask: element [.., qb, kb] non-zero allows the block of
     * queries qb*block_q .. +block_q-1 and keys kb*block_k .. +block_k-1
     * (the edge blocks are cut at Lq and Lk). Shape [.., ceil(Lq / block_q),
     * ceil(Lk / block_k)] with the leading dimensions of `mask`; any mask
     * dtype (u8 is the smallest). Long contexts never need an element mask. */
    const pit_tensor *block_mask;
    int32_t block_q, block_k; /* block_mask's block: both > 0 with block_mask, else 0 */
    /* Micro-tile hint: query rows x keys of the blocks the mask is indexed
     * in and the kernel walks; rows == 0: chosen at run time (axis AUTO or K).
     * An element mask alone with the hint automatic or R x 1 goes, where the
     * backend has them, to key-column micro-tiles: each block of 64 query
     * rows attends over the keys any of its rows allows, gathered. */
    pit_microtile microtile;
} pit_attention_options;

/* The defaults: scale 1/sqrt(D), no causal bound, no window, no masks,
 * micro-tile chosen at run time. */
PIT_API pit_attention_options pit_attention_options_default(void);

/* Attention: O = softmax(scale Q K^T over the allowed keys) V, per batch b
 * and query head h, the keys and values of head h / (Hq / Hkv).
 * Q [B, Hq, Lq, D], K [B, Hkv, Lk, D], V [B, Hkv, Lk, Dv], O [B, Hq, Lq, Dv]:
 * one float dtype (f32, f16, bf16; f32 arithmetic), any strides with a unit
 * innermost stride (a [B, L, H, D] buffer passes as a view with permuted
 * strides, see pit_tensor_wrap). Hq must be a multiple of Hkv (grouped- and
 * multi-query attention). Which keys a query sees: opt (NULL: the defaults).
 * lse (may be NULL): [B, Hq, Lq] f32, the natural log of the sum of
 * exp(score) over the allowed keys (the backward needs it). A query with no
 * allowed key gets O = 0 and lse = -inf, never NaN. O and lse must not
 * overlap any input or each other. Large scaled scores as in
 * pit_sparse_softmax. No score matrix is stored: the device memory the call
 * adds is the index of the masks, none without a mask. Without a report,
 * nothing is read back (the call does not wait for the device); with one,
 * the index's count is read after the kernel is queued (report->choice
 * "attention RxC", micro-tile and counts of the index or of the blocks the
 * causal bound and window leave).
 * Where it runs: OpenCL, CUDA and HIP take every option (CUDA and HIP on
 * the fused tensor-core kernel where the call is 16-bit with head dims and
 * square blocks of 64 or 128, or a block mask of one block of rows with
 * key blocks of 64 or 128 and Lq no more than them (decode), else on
 * generic kernels: docs/api.md). A
 * backend without the full entry takes the calls pit_sparse_attention's
 * kernels can run (an element mask and no other option, Lq == Lk, Hq ==
 * Hkv, no lse, a square micro-tile; a call a batch or a head where the mask
 * or the strides ask for it) and refuses the rest with PIT_ERR_UNSUPPORTED
 * naming the backend and the option. Errors: PIT_ERR_INVALID_ARGUMENT (NULL, bad
 * option), PIT_ERR_SHAPE_MISMATCH, PIT_ERR_UNSUPPORTED_DTYPE,
 * PIT_ERR_BAD_STRIDES, PIT_ERR_ALIASING, PIT_ERR_CONTEXT_MISMATCH,
 * PIT_ERR_UNSUPPORTED, backend errors. */
PIT_API pit_status pit_attention(pit_context *ctx, pit_stream *stream, const pit_tensor *Q,
                                 const pit_tensor *K, const pit_tensor *V, pit_tensor *O,
                                 const pit_attention_options *opt, pit_tensor *lse,
                                 pit_report *report);

/* Backward of pit_attention: given dO [B, Hq, Lq, Dv] and the forward's O
 * and lse (same Q, K, V and options), dQ [B, Hq, Lq, D], dK [B, Hkv, Lk, D]
 * and dV [B, Hkv, Lk, Dv]; dK and dV sum over the query heads that share a
 * kv head. Any of the three may be NULL to skip it; each one given is
 * overwritten whole (0 where no allowed pair touches it). Same dtype and
 * stride rules as the forward (O, dO and the gradients in the data's dtype,
 * lse f32, f32 arithmetic); the probabilities are recomputed from lse, and
 * the masks are indexed as in the forward. The gradients must not overlap
 * any input or each other. Where it runs: OpenCL, CUDA and HIP; a backend
 * without the entry returns PIT_ERR_UNSUPPORTED. */
PIT_API pit_status pit_attention_backward(pit_context *ctx, pit_stream *stream,
                                          const pit_tensor *Q, const pit_tensor *K,
                                          const pit_tensor *V, const pit_tensor *O,
                                          const pit_tensor *dO, const pit_tensor *lse,
                                          const pit_attention_options *opt, pit_tensor *dQ,
                                          pit_tensor *dK, pit_tensor *dV);

/* Mixture-of-Experts expert layer without padding: token t goes to experts
 * expert_ids[t, j] (i32, [T,k]) with gate weights gates[t, j] (f32, [T,k]);
 * Y[t] = sum_j gates[t,j] * X[t] . W[expert_ids[t,j]]. X [T,H], W [E,H,N],
 * Y [T,N]. Tokens are gathered per expert on the device (SRead along M), all
 * experts run in one launch, results are scattered back with the gate (SWrite).
 * No capacity factor, no token dropped. An id outside 0..E-1 is skipped (the
 * report's nonzero_tiles counts routed token-slots). Without a report, the
 * 16-bit forward on CUDA tensor cores (sm_80 on) reads nothing back: the call
 * does not wait for the device and can be captured in a CUDA graph. With a
 * report, or on the other paths, the experts' counts are read back after
 * routing, and so the call waits for it. */
PIT_API pit_status pit_moe_forward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                   const pit_tensor *expert_ids, const pit_tensor *gates,
                                   const pit_tensor *W, pit_tensor *Y, pit_report *report);

/* Backward of pit_moe_forward given dY [T,N]: dX [T,H], dW [E,H,N], dgates
 * [T,k] (f32). Any output may be NULL to skip it. */
PIT_API pit_status pit_moe_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                    const pit_tensor *expert_ids, const pit_tensor *gates,
                                    const pit_tensor *W, const pit_tensor *dY, pit_tensor *dX,
                                    pit_tensor *dW, pit_tensor *dgates);

/* The activation of a MoE expert FFN (pit_moe_ffn), applied to h = X[t] .
 * W_gate_up[e]. The gated ones (GLU) split h into its first F columns g
 * (gate) and its last F columns u (up), so W_gate_up is [E, H, 2F]; the
 * others take h whole, W_gate_up [E, H, F]. With silu(x) = x / (1 + e^-x)
 * and gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (the tanh
 * form, PyTorch's approximate="tanh"):
 *   SWIGLU: silu(g) * u (Mixtral, Qwen-MoE, DeepSeek)
 *   GEGLU:  gelu(g) * u
 *   GELU:   gelu(h)
 *   RELU:   max(h, 0), NaN kept; its derivative is 0 where h <= 0, else 1
 *   SILU:   silu(h)
 * Arithmetic in f32 whatever the data's dtype. */
typedef enum pit_activation {
    PIT_ACT_SWIGLU = 0,
    PIT_ACT_GEGLU = 1,
    PIT_ACT_GELU = 2,
    PIT_ACT_RELU = 3,
    PIT_ACT_SILU = 4
} pit_activation;

typedef struct pit_moe_ffn_options {
    pit_activation activation; /* default PIT_ACT_SWIGLU */
    /* The intermediate rows of every token-slot: NULL, a workspace the
     * context keeps per stream (it grows to the largest call); or a
     * contiguous tensor of X's dtype (any shape) of at least T*k*W elements
     * for pit_moe_ffn and T*k*(W + F) for pit_moe_ffn_backward, W = 2F for
     * the gated activations, F otherwise. It overlaps no other argument.
     * Its contents before and after a call mean nothing. */
    pit_tensor *scratch;
    /* The first product kept for the backward (training): NULL, the
     * backward recomputes it; or a contiguous tensor of X's dtype, shape
     * [T*k, W], which pit_moe_ffn fills with h = X[t] . W_gate_up[e] of
     * every token-slot (row t*k + j; zeros for a slot with an id outside
     * 0..E-1) and pit_moe_ffn_backward then reads instead of recomputing
     * (a quarter of its FLOPs), leaving it unchanged. Keeping it costs the
     * forward its fused activation (the first product's rows are stored,
     * then the activation runs over them). It overlaps no other argument
     * nor the scratch. */
    pit_tensor *saved_h;
} pit_moe_ffn_options;

/* The defaults: SwiGLU, the context's workspace, nothing kept for the
 * backward. */
PIT_API pit_moe_ffn_options pit_moe_ffn_options_default(void);

/* A Mixture-of-Experts expert FFN in one call: each token t goes to the
 * experts expert_ids[t, j] (i32, [T,k]) with gates[t, j] (f32, [T,k]), from
 * any router, and
 *   Y[t] = sum_j gates[t,j] * act(X[t] . W_gate_up[e]) . W_down[e],
 *   e = expert_ids[t,j];
 * X [T,H], W_gate_up [E,H,2F] (gate columns first, then up; [E,H,F] for an
 * activation without a gate, pit_activation), W_down [E,F,H], Y [T,H].
 * X, both weights and Y share a dtype: f32, f16 or bf16 (f32 accumulation;
 * the activation's output is stored in the data's dtype before the second
 * product, as a framework's composed layer stores it). No padding, no
 * capacity factor, no token dropped; an id outside 0..E-1 contributes
 * nothing (a token with no valid id gets a zero row). Routing runs once, on
 * the device; then every expert's gathered tokens go through the first
 * product into the scratch rows (one per token-slot), the activation, and
 * the second product, which scatters with the gate and sums each token's k
 * results. report (may be NULL): the routing's counts (nonzero_tiles =
 * routed token-slots) and the first product's tile. The counts are read
 * back for a report, or where the backend sizes its grid by them
 * (docs/api.md says which); otherwise the call does not wait for the
 * device. options NULL: the defaults. Errors as pit_moe_forward, and
 * PIT_ERR_INVALID_ARGUMENT for an unknown activation or a scratch too small
 * or not contiguous, PIT_ERR_UNSUPPORTED_DTYPE for a scratch of another
 * dtype, PIT_ERR_ALIASING for one overlapping an argument,
 * PIT_ERR_SHAPE_MISMATCH when W_gate_up's width is not 2F (gated) or F. */
PIT_API pit_status pit_moe_ffn(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                               const pit_tensor *expert_ids, const pit_tensor *gates,
                               const pit_tensor *W_gate_up, const pit_tensor *W_down,
                               pit_tensor *Y, const pit_moe_ffn_options *options,
                               pit_report *report);

/* Backward of pit_moe_ffn given dY [T,H], with the same arguments and
 * options: dX [T,H], dW_gate_up (W_gate_up's shape), dW_down [E,F,H] and
 * dgates [T,k] (f32), each overwritten, each NULL to skip it. The routing is
 * run again from expert_ids (the same index as the forward's) and the first
 * product X[t] . W_gate_up[e] is read from options->saved_h where the
 * forward kept it, else recomputed into the scratch rows; the activation's
 * output is recomputed from it. Then
 * dA = dY[t] . W_down[e]^T per token-slot, the activation's backward (with
 * the gate, and dgates = act(h) . dA), and the three weight and input
 * products. Every gradient of a slot with a skipped id is 0 (its dgates
 * too), an expert with no token gets zero weight gradients. The counts are
 * read back (the call waits for the device). */
PIT_API pit_status pit_moe_ffn_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                        const pit_tensor *expert_ids, const pit_tensor *gates,
                                        const pit_tensor *W_gate_up, const pit_tensor *W_down,
                                        const pit_tensor *dY, pit_tensor *dX,
                                        pit_tensor *dW_gate_up, pit_tensor *dW_down,
                                        pit_tensor *dgates, const pit_moe_ffn_options *options);

/* Row-sparse matmul: C = A . B computing only the rows of A that have a
 * non-zero (padding of variable-length batches, masked tokens). Skipped rows
 * of C are set to zero, or left untouched when keep_skipped_rows is 1. */
PIT_API pit_status pit_matmul_rows(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                   const pit_tensor *B, pit_tensor *C, int keep_skipped_rows,
                                   pit_report *report);

/* Y = max(X, 0) elementwise; Y may be X. */
PIT_API pit_status pit_relu(pit_context *ctx, pit_stream *stream, const pit_tensor *X, pit_tensor *Y);

/* ReLU-activation-sparse FFN (OPT): H = relu(X . W1) (dense), Y = H . W2 with
 * PIT on the K axis of H, whose zeros are found after the ReLU. X [T,D], W1
 * [D,F], W2 [F,D2], Y [T,D2]; H [T,F] is the caller's scratch (also useful
 * for the backward). report describes the second, sparse product. */
PIT_API pit_status pit_relu_ffn(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                const pit_tensor *W1, const pit_tensor *W2, pit_tensor *H,
                                pit_tensor *Y, pit_report *report);

/* Backward of C = A . B with A dynamically sparse: dA = (dC . B^T) restricted
 * to A's pattern (an SDDMM on A's non-zero micro-tiles) and dB = A^T . dC (PIT
 * on A's M axis). dA or dB may be NULL to skip it. */
PIT_API pit_status pit_matmul_backward(pit_context *ctx, pit_stream *stream, const pit_tensor *A,
                                       const pit_tensor *B, const pit_tensor *dC, pit_tensor *dA,
                                       pit_tensor *dB);

/* Y = X^T for the last two dimensions (a device copy). */
PIT_API pit_status pit_transpose(pit_context *ctx, pit_stream *stream, const pit_tensor *X,
                                 pit_tensor *Y);

/* Magnitude pruning, for sparse training: zeroes the block_rows x block_cols
 * blocks of W (rank 2) with the smallest L1 norm so that a fraction
 * `sparsity` of the blocks is zero. In place; the pattern may change every
 * step. Computed on the host from a device copy (pruning is not on the
 * critical path of a step). A block's norm is the sum of |w| (edge blocks are
 * smaller); blocks are ordered by norm ascending, NaN norms last, equal norms
 * by row-major block index, and the first round(sparsity x blocks) are zeroed. */
PIT_API pit_status pit_prune_magnitude(pit_context *ctx, pit_stream *stream, pit_tensor *W,
                                       int32_t block_rows, int32_t block_cols, double sparsity);

/* ------------------------------------------------------------------------ */
/* Tuning                                                                   */
/* ------------------------------------------------------------------------ */

/* Called after each measured tile: done of total, and what was measured. */
typedef void (*pit_progress_fn)(void *user, int done, int total, const char *what);

typedef struct pit_tune_options {
    int quick;                /* small problems, few repeats (CI, CPUs)          */
    int repeats;              /* timed runs per tile, median kept (0: default)   */
    const char *output_path;  /* NULL: this device's file under $PIT_CACHE_DIR   */
    pit_progress_fn progress; /* may be NULL */
    void *user;
} pit_tune_options;

/* Measures every candidate dense tile of the context's tile database for this
 * device (each operator and dtype the device supports: warm-up, median of
 * repeats, random non-zero data), its read bandwidth (the "read" rows that
 * bound memory-bound calls) and, on a GPU, the decode regime's sparse matmul
 * at 1, 4, 16 and 64 rows of A (the "stream" rows that price it), and writes
 * the device's tile database, which later contexts on this device load
 * before the shipped defaults. The path written goes to written_path (may be
 * NULL). Errors: PIT_ERR_IO (cannot write), backend errors. */
PIT_API pit_status pit_tune(pit_context *ctx, const pit_tune_options *options,
                            char *written_path, size_t written_path_size);

/* ------------------------------------------------------------------------ */
/* Kernel disk cache                                                        */
/* ------------------------------------------------------------------------ */

/* Compiled kernels are kept in a folder ($PIT_CACHE_DIR, default
 * ~/.cache/pit) so that later processes skip the compiler. The folder is
 * trusted like code: its binaries run on the device as they are; give it the
 * permissions of the program's own files. PIT_CACHE_MAX_MB caps the kernels'
 * bytes (default 256, 0: no disk cache): a store that takes the folder over
 * the cap removes the least recently used entries (by last read or write)
 * down to three quarters of it. Only pit's own entry files are ever counted
 * or removed: the tuned tile databases (tiledb/) and any other file stay. */
typedef struct pit_cache_info {
    const char *folder; /* NULL: no folder ($PIT_CACHE_DIR and $HOME unset, or
                           it cannot be created); valid until the process ends */
    int64_t entries;    /* pit's kernel entries in it */
    int64_t bytes;      /* their size */
    int64_t max_bytes;  /* the cap (PIT_CACHE_MAX_MB); 0: the disk cache is off */
} pit_cache_info;

/* Fills *info. Errors: PIT_ERR_INVALID_ARGUMENT (NULL), PIT_ERR_IO (the folder
 * cannot be listed). */
PIT_API pit_status pit_cache_get_info(pit_cache_info *info);

/* Removes every kernel entry of the folder, and nothing else. Contexts keep
 * the kernels they have loaded. Safe while other threads or processes use the
 * cache (they compile again). Errors: PIT_ERR_IO (an entry could not be
 * removed: the message names it; the others are removed). */
PIT_API pit_status pit_cache_clear(void);

/* ------------------------------------------------------------------------ */
/* Device timing and baselines (used by pit bench; useful to users too)     */
/* ------------------------------------------------------------------------ */

typedef struct pit_event pit_event;

/* Records an event on the stream (CUDA/HIP event, OpenCL marker). The caller
 * destroys it with pit_event_destroy. */
PIT_API pit_status pit_event_record(pit_context *ctx, pit_stream *stream, pit_event **event);

/* Milliseconds between two recorded events; waits for the second one. */
PIT_API pit_status pit_event_elapsed_ms(pit_event *start, pit_event *end, double *ms);

/* Releases an event. NULL is a no-op. */
PIT_API pit_status pit_event_destroy(pit_event *event);

/* Measures device-to-device copy bandwidth with `bytes` per copy (read + write
 * bytes counted), median of `repeats` copies, in GB/s. PIT_ERR_UNSUPPORTED
 * when the backend cannot copy device to device. */
PIT_API pit_status pit_measure_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats,
                                              double *gbps);

/* The same for copies too short to time one at a time, such as buffers that
 * stay in the device's L2 cache (two of `bytes` each): 16 copies back and
 * forth between two buffers, timed between one pair of events and queued
 * behind a fill of a larger buffer, so the time is the device's alone and
 * holds no launch latency of an idle stream. Median of `repeats` rounds, read
 * + write bytes counted, in GB/s. Errors as pit_measure_copy_bandwidth. */
PIT_API pit_status pit_measure_queued_copy_bandwidth(pit_context *ctx, size_t bytes, int repeats,
                                                     double *gbps);

/* Runs the vendor's sparse library on C = A.B (A sparse), with the
 * dense->sparse conversion included, and reports both parts in milliseconds
 * and the library's name (static string). PIT_ERR_UNSUPPORTED when the
 * backend has none (OpenCL). */
PIT_API pit_status pit_vendor_sparse_matmul(pit_context *ctx, pit_stream *stream,
                                            const pit_tensor *A, const pit_tensor *B,
                                            pit_tensor *C, double *convert_ms,
                                            double *compute_ms, const char **name);

/* Times the vendor's dense->sparse conversion of A alone: block 1 = CSR,
 * otherwise BSR with block x block blocks. */
PIT_API pit_status pit_vendor_sparse_convert(pit_context *ctx, pit_stream *stream,
                                             const pit_tensor *A, int block, double *ms);

#ifdef __cplusplus
}
#endif
#endif /* PIT_H */
