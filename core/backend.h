/*
 * core/backend.h - the one contract every backend plug-in implements.
 *
 * A plug-in (libpit-cuda.so, libpit-hip.so, libpit-opencl.so) exports
 *     const pit_backend *pit_backend_register(const pit_host *host);
 * Core checks abi_version, then calls init(). Everything vendor-specific stays
 * behind this table; core never includes a vendor header and backends never
 * include each other. The entries core calls unguarded (PIT_REQUIRED_ENTRIES
 * in core/runtime/registry.c: init, devices, contexts, streams, memory,
 * events, detect, matmul_sparse, matmul_dense) must be set: a table missing
 * one is refused at load with PIT_ERR_BACKEND_INVALID naming it. Any other
 * NULL entry means "not supported by this backend"; core turns it into
 * PIT_ERR_UNSUPPORTED with the backend's name.
 *
 * Memory handles (void *mem) are device pointers on CUDA/HIP and cl_mem on
 * OpenCL. Offsets are in bytes. Streams (void *stream) are the backend's own
 * objects created by stream_create/stream_wrap; NULL is never passed: core
 * substitutes the context's default stream.
 */
#ifndef PIT_CORE_BACKEND_H
#define PIT_CORE_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "pit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PIT_BACKEND_ABI_VERSION 11 /* 2: pit_index.flag_full; 3: moe_plans_on_device;
                                    4: switches to context_create;
                                    5: mem_query; pit_host.cache_load / cache_store /
                                       cache_drop; set_scratch_allocator;
                                    6: moe_matmul's slot rows (PIT_MOE_SLOT_X,
                                       PIT_MOE_SLOT_Y); moe_activation; attention_ex
                                       (pit_attention_desc), attention_backward;
                                    7: pit_device_info.has_f16_storage (a longer
                                       struct for device_info to fill);
                                    8: mem_wrap_host, mem_unwrap_host;
                                       pit_device_info.takes_host_memory;
                                    9: matmul_detects_inside;
                                    10: moe_matmul's gated epilogue
                                        (PIT_MOE_GLU), moe_fuses_activation;
                                    11: attention_columns */
#define PIT_BACKEND_REGISTER_SYMBOL "pit_backend_register"

/* ---- services core offers to plug-ins --------------------------------- */
typedef struct pit_host {
    uint32_t abi_version;
    /* Records status + message for pit_last_error(); returns status. */
    pit_status (*error)(pit_status status, const char *fmt, ...);
    /* A debug-level log line: to the callback of pit_set_log_callback, or
     * to stderr with PIT_LOG=debug. */
    void (*log_debug)(const char *fmt, ...);
    /* Kernel disk cache folder ($PIT_CACHE_DIR or ~/.cache/pit), created.
     * Plug-ins keep binaries through cache_load / cache_store below. */
    const char *(*cache_dir)(void);
    /* Fault injection (PIT_FAULT_ALLOC=N): nonzero when this allocation must fail. */
    int (*inject_alloc_failure)(void);
    /* A kernel-cache entry opened for reading ("rb"), or NULL when it is
     * missing or not a regular file (a FIFO or a device would block or never
     * end). */
    FILE *(*open_cache_entry)(const char *path);
    /* The kernel disk cache, kept by core: entry files, checks, the size cap
     * (PIT_CACHE_MAX_MB), least recently used first out. `kind` names the
     * plug-in ("cuda", "opencl"); `key` is the whole text that determines the
     * binary (sources, build options, device and compiler identity): an entry
     * is returned only to the same key, compared byte for byte. A host may
     * leave these NULL: no disk cache. */
    /* The binary stored under key (malloc'd, *size its bytes), or NULL when
     * absent, damaged, stored under another key, or the cache is off. */
    void *(*cache_load)(const char *kind, const char *key, size_t *size);
    /* Stores a binary under key; best effort (a failure costs a compile later). */
    void (*cache_store)(const char *kind, const char *key, const void *data, size_t size);
    /* Removes key's entry: the binary it gave failed to load or to provide a
     * kernel; the plug-in then compiles from source once and stores the result. */
    void (*cache_drop)(const char *kind, const char *key);
} pit_host;

/* ---- experimental switches (switches.def), read once per context --------- */
typedef enum pit_switch_id {
#define PIT_SWITCH(id, variable, min, max, what) PIT_SWITCH_##id,
#include "runtime/switches.def"
#undef PIT_SWITCH
    PIT_SWITCH_COUNT
} pit_switch_id;

/* DLPack device types a backend names in pit_device_info.dlpack_device_type
 * (the values of DLPack's DLDeviceType; core/runtime/dlpack.c checks them) */
#define PIT_DLPACK_CPU 1
#define PIT_DLPACK_CUDA 2
#define PIT_DLPACK_OPENCL 4
#define PIT_DLPACK_ROCM 10

typedef struct pit_switches {
    int32_t value[PIT_SWITCH_COUNT]; /* 0: unset, the backend's default */
} pit_switches;

/* ---- what a backend sees of a tensor ------------------------------------ *
 * Core checks every view before an operator entry sees it, so a backend only
 * asserts: dtype is a pit_dtype and the one the operator's contract names
 * (inputs and outputs of one float dtype the device supports,
 * has_f16_storage / has_bf16); rank and shapes agree with the operator (batch dimensions are
 * passed as they are, never folded; attention_sparse's operands and a
 * pattern's detection view come as rank 3); every dimension of extent > 1
 * has a stride at least the span of the dimensions inside it, the innermost
 * one stride 1 (a dimension of extent 1 may carry any stride; attention_ex's
 * operands are the one exception: pit_attention_desc); offset is a
 * multiple of the element size; outputs overlap no input (except where an
 * entry says in place). Core skips calls whose output is empty, but an empty
 * reduction can still arrive (attention's head dimension, the MoE backward's
 * H or N). Nothing is promised about alignment beyond the element size. */
typedef struct pit_tdesc {
    pit_dtype dtype;
    int rank;
    int64_t shape[PIT_MAX_RANK];
    int64_t strides[PIT_MAX_RANK]; /* elements; innermost 1 when its extent > 1 */
    void *mem;                     /* device pointer or cl_mem */
    size_t offset;                 /* bytes from mem to element 0 */
} pit_tdesc;

/* ---- the out-of-order index of non-zero micro-tiles -------------------- *
 * The sparse operand (rows x cols, row-major) is cut into micro-tiles of
 * tile.rows x tile.cols. Micro-tiles are grouped along the axis that is NOT
 * gathered, and each group lists its non-zero micro-tiles in any order:
 *   axis K (sparse A, M x K): group = row-block (M / Tm of them),
 *           entries = micro-tile column index along K (0 .. K/Tk-1)
 *   axis M (sparse A, M x K): group = column-block (K / Tk of them),
 *           entries = micro-tile row index along M (0 .. M/Tm-1)
 *   axis N (sparse B, K x N): group = row-block of B along K (K / Tk),
 *           entries = micro-tile column index along N
 * counts[g] is the number of entries of group g (the per-group statistics the
 * selection reads back); entries[g * capacity + i], i < counts[g], are the
 * entries. For a batch, groups of batch b start at b * groups_per_batch.
 * Detection zeroes counts itself and appends with atomics: no sort.
 *
 * flag_full (set by whoever builds the index, before detect): a request that
 * detection also mark a micro-tile whose EVERY element is non-zero by writing
 * its entry as `entry | PIT_ENTRY_FULL`. A micro-tile that sticks out of the
 * operand (right or bottom edge) is never marked. A backend may honour the
 * request partly or not at all (OpenCL never marks): "not marked" only means
 * "check the elements". Consumers of a flag_full index must strip the bit
 * (entry & ~PIT_ENTRY_FULL); every consumer of an index with flag_full == 0
 * sees plain entries. Only the fused attention asks for it (core/ops/sparse_attention.c);
 * a backend whose attention_sparse hands the index to other kernels must give
 * them an index without marks (the CUDA backend re-detects, flag off). */
#define PIT_ENTRY_FULL 0x40000000
typedef struct pit_index {
    pit_microtile tile;
    int32_t groups;            /* total, all batches */
    int32_t groups_per_batch;
    int32_t capacity;          /* max entries per group */
    void *counts;              /* int32[groups]              (device) */
    void *entries;             /* int32[groups * capacity]   (device) */
    void *total;               /* int32[1]: sum of counts    (device) */
    int32_t flag_full;         /* 1: mark all-non-zero micro-tiles (above); 0 otherwise */
} pit_index;

/* ---- a dense computation tile (one line of the tile database) ---------- */
#define PIT_TILE_ENGINE 2
typedef struct pit_tile {
    int32_t bm, bn, bk;
    int32_t threads;     /* work-group / block size */
    int32_t stages;      /* shared-memory pipeline depth */
    int32_t tensor_core; /* 1: mma / matrix cores; PIT_TILE_ENGINE (2): the
                          * warp-specialised tensor-core engine, which along K
                          * takes micro-tile columns in whole bk-deep steps
                          * (Tk a multiple of bk) */
} pit_tile;

/* ---- device memory from the caller's allocator --------------------------- *
 * What core hands a backend when the user sets an allocator
 * (pit_context_set_allocator): core wraps the user's callbacks (fault
 * injection, the error message, the alignment check). */
typedef struct pit_scratch_allocator {
    /* bytes (> 0) for work queued on native_stream (the backend's CUstream,
     * hipStream_t or cl_command_queue); PIT_ERR_OUT_OF_MEMORY, message set,
     * when there is none. */
    pit_status (*alloc)(void *owner, size_t bytes, void *native_stream, void **mem);
    /* Gives mem back with the stream it was allocated for: work queued on it
     * before may still use mem. */
    void (*free)(void *owner, void *mem, void *native_stream);
    void *owner;
} pit_scratch_allocator;

/* ---- attention with every option (pit_attention) ------------------------- *
 * Q [B, Hq, Lq, D], K [B, Hkv, Lk, D], V [B, Hkv, Lk, Dv], O [B, Hq, Lq, Dv]
 * (rank 4, one float dtype; Hkv > 0 divides Hq: query head h reads kv head
 * h / (Hq / Hkv)). Unlike every other entry, their dimensions may come in any
 * stride order (a [B, L, H, D] buffer): the innermost stride is 1 where its
 * extent is above 1, and no two elements share memory.
 * Key j is allowed for query i when every condition holds:
 *   - window_left >= 0:  j >= i + (Lk - Lq) - window_left
 *   - window_right >= 0: j <= i + (Lk - Lq) + window_right (causal is
 *     window_right 0; core folds it in)
 *   - mask (may be NULL): mask[b, h, i, j] non-zero, read as detect reads a
 *     pattern; rank 4 [B, Hq, Lq, Lk] row-major in its last two dimensions,
 *     batch or head stride 0 where one mask serves every batch or head
 *   - idx (may be NULL): block (i / tile.rows, j / tile.cols) is listed in
 *     group b * idx_batch_stride + h * idx_head_stride + i / tile.rows
 *     (entries are key-block indices; strides 0 where the index is shared;
 *     PIT_ENTRY_FULL marks, when idx->flag_full, to be stripped). Without idx
 *     every key block is visited, so the backend may block the keys as it
 *     likes; with one, tile is idx->tile and capacity its key blocks.
 * Core reads no counts back before the call: any group may be empty. Rows of
 * O with no allowed key are 0 and their lse -inf. lse (may be NULL): rank 3
 * [B, Hq, Lq] f32, log of the sum of exp(scale * Q.K) over the allowed keys.
 * PIT_ERR_UNSUPPORTED, before anything is queued, for what the backend
 * cannot run (core then says so to the user). */
typedef struct pit_attention_desc {
    pit_tdesc Q, K, V, O;
    const pit_tdesc *mask;      /* NULL: no element mask */
    const pit_tdesc *lse;       /* NULL: not wanted */
    const pit_index *idx;       /* NULL: every key block */
    int64_t idx_batch_stride, idx_head_stride;
    pit_microtile tile;         /* query rows x keys of a block */
    float scale;
    int64_t window_left, window_right; /* -1: no bound */
} pit_attention_desc;

/* ---- device timers (events) ---------------------------------------------- */
typedef struct pit_event pit_event;

typedef struct pit_backend {
    uint32_t abi_version; /* PIT_BACKEND_ABI_VERSION */
    const char *name;     /* "cuda", "hip", "opencl" */

    /* Loads the vendor runtime. PIT_ERR_NO_DEVICE with a message such as
     * "no CUDA driver (libcuda.so.1: ...)" when it is absent. Called once. */
    pit_status (*init)(const pit_host *host);
    void (*shutdown)(void);

    pit_status (*device_count)(int *count);
    pit_status (*device_info)(int index, pit_device_info *info);

    /* device_info fills every field of pit_device_info but device_index and
     * tiledb_source (core's): tiledb_family names the shipped tile database
     * (tiledb/FAMILY.tiledb), dlpack_device_type the DLPack device type of
     * its memory. has_f16 is native f16 arithmetic; has_f16_storage says the
     * operators take f16 tensors (core sets it wherever has_f16 is set);
     * takes_host_memory that the device's memory is the host's (core keeps
     * it only where mem_wrap_host and mem_unwrap_host are set). */

    /* switches: the context's experimental switches (the backend copies
     * what it uses). */
    pit_status (*context_create)(int index, const pit_switches *switches, void **bctx);
    void (*context_destroy)(void *bctx);

    pit_status (*stream_create)(void *bctx, void **stream);
    pit_status (*stream_wrap)(void *bctx, void *native, void **stream);
    void (*stream_destroy)(void *bctx, void *stream);
    pit_status (*stream_synchronize)(void *bctx, void *stream);

    pit_status (*mem_alloc)(void *bctx, size_t bytes, void **mem);
    void (*mem_free)(void *bctx, void *mem);
    /* Blocking copies ordered after earlier work on stream. */
    pit_status (*mem_write)(void *bctx, void *stream, void *mem, size_t offset,
                            const void *host, size_t bytes);
    pit_status (*mem_read)(void *bctx, void *stream, const void *mem, size_t offset,
                           void *host, size_t bytes);
    /* Asynchronous fill with a repeated 32-bit pattern; bytes % 4 == 0. */
    pit_status (*mem_fill32)(void *bctx, void *stream, void *mem, size_t offset,
                             uint32_t pattern, size_t bytes);

    pit_status (*event_record)(void *bctx, void *stream, pit_event **event);
    pit_status (*event_elapsed_ms)(void *bctx, pit_event *start, pit_event *end,
                                   double *ms);
    void (*event_destroy)(void *bctx, pit_event *event);

    /* ---- PIT ------------------------------------------------------------ */
    /* One pass over the sparse operand X (rank 2 or 3) that fills every index
     * of idx[0..n-1] (different micro-tile candidates) at once. X is an
     * operand (f32, f16, bf16) or a mask as the user passed it (also i32 or
     * u8); an element is non-zero as pit.h says: a float's bits but the
     * sign, an integer's every bit (an i32 INT_MIN is non-zero). */
    pit_status (*detect)(void *bctx, void *stream, const pit_tdesc *X,
                         pit_index *idx, int n);

    /* C = A.B through the fused SRead -> dense tile -> SWrite kernel. The
     * sparse operand is A when idx->tile.axis is K or M, B when it is N.
     * worst_case_grid: size the grid for a full index (fixed-plan mode, no
     * host read-back); otherwise grid from max_entries (largest counts[g]).
     * Along K the grid must not depend on max_entries at all (one CTA per
     * row-block and n-tile, the counts read on the device): core then skips
     * the read-back on settled calls (core/ops/matmul.c). */
    pit_status (*matmul_sparse)(void *bctx, void *stream, const pit_tile *tile,
                                const pit_index *idx, int32_t max_entries,
                                int worst_case_grid, const pit_tdesc *A,
                                const pit_tdesc *B, const pit_tdesc *C);

    /* Optional (ABI 9): 1 when matmul_sparse with this index and operands does not
     * read the index at all (its kernel finds A's non-zero micro-tiles
     * itself: CUDA's decode kernel). Core then skips detection on a settled
     * call that reads nothing back; idx still says which micro-tile the
     * plan chose. NULL: every call detects. */
    int (*matmul_detects_inside)(void *bctx, const pit_index *idx, const pit_tdesc *A, const pit_tdesc *B,
                                 const pit_tdesc *C);

    /* Dense C = A.B: the vendor GEMM if present, else pit's own dense tile. */
    pit_status (*matmul_dense)(void *bctx, void *stream, const pit_tdesc *A,
                               const pit_tdesc *B, const pit_tdesc *C);
    /* Name of what matmul_dense uses ("cuBLAS", "CLBlast", "pit dense tile"). */
    const char *(*dense_name)(void *bctx);

    /* ---- baselines and utilities for pit bench (may be NULL) -------------- */
    /* Device-to-device copy, asynchronous on stream. */
    pit_status (*mem_copy)(void *bctx, void *stream, void *dst, size_t dst_offset,
                           const void *src, size_t src_offset, size_t bytes);
    /* The vendor's sparse library on the same problem, the dense->sparse
     * conversion included (the sparsity is dynamic): cuSPARSE CSR SpMM,
     * rocSPARSE. Times with device events; C is written. */
    pit_status (*vendor_sparse_matmul)(void *bctx, void *stream, const pit_tdesc *A,
                                       const pit_tdesc *B, const pit_tdesc *C,
                                       double *convert_ms, double *compute_ms);
    /* The vendor's dense->sparse conversion alone: block 1 = CSR, else BSR
     * with block x block blocks. */
    pit_status (*vendor_convert)(void *bctx, void *stream, const pit_tdesc *A, int block,
                                 double *ms);
    const char *(*vendor_sparse_name)(void *bctx);

    /* ---- operators of dynamic-sparse models (NULL: PIT_ERR_UNSUPPORTED) ---- *
     * idx below is an index built by detect() on the pattern tensor with
     * axis K and tile = the output micro-tile: group = row-block of the
     * [M,N] pattern, entries = column-block indices. The pattern tensor itself
     * is passed as `mask` for exact element masking inside a block.
     * A rank-2 mask (the same for every batch) is detected once: its index has
     * groups == groups_per_batch and every batch b uses groups 0..groups-1 (no
     * b * groups_per_batch offset). sddmm, softmax_sparse(_backward) and
     * attention_sparse accept such a shared index as well as a per-batch one;
     * matmul_sparse does not (core then calls it one batch at a time). */

    /* C = (A . B^T) masked, only the indexed blocks; every element of C is
     * written (zeros outside the indexed blocks and where mask is 0). */
    pit_status (*sddmm)(void *bctx, void *stream, const pit_index *idx, const pit_tdesc *A,
                        const pit_tdesc *B, const pit_tdesc *mask, const pit_tdesc *C);
    /* Row softmax of scale*X over the indexed blocks where mask != 0; every
     * element of Y written (0 outside; fully masked rows all 0). */
    pit_status (*softmax_sparse)(void *bctx, void *stream, const pit_index *idx,
                                 const pit_tdesc *X, const pit_tdesc *mask,
                                 const pit_tdesc *Y, float scale);
    /* dX = scale * Y * (dY - rowsum(dY*Y)) where mask != 0, 0 elsewhere. */
    pit_status (*softmax_sparse_backward)(void *bctx, void *stream, const pit_index *idx,
                                          const pit_tdesc *Y, const pit_tdesc *dY,
                                          const pit_tdesc *mask, const pit_tdesc *dX,
                                          float scale);
    /* Fused attention over the block index (optional). When NULL, or when it
     * returns PIT_ERR_UNSUPPORTED for a shape it cannot fuse, core runs
     * sddmm -> softmax_sparse -> matmul_sparse over an index without marks
     * (core/ops/sparse_attention.c is the one place attention is composed).
     * Core builds idx with flag_full = 1 for it and reads no counts back
     * first: the backend must accept PIT_ENTRY_FULL marks and groups with no
     * entry (their rows of O are 0; every group may be empty). */
    pit_status (*attention_sparse)(void *bctx, void *stream, const pit_index *idx,
                                   const pit_tdesc *Q, const pit_tdesc *K, const pit_tdesc *V,
                                   const pit_tdesc *mask, const pit_tdesc *O, float scale);
    /* Optional: detect(stream, detect_view, idx, 1) then attention_sparse
     * over idx, in one call, so the backend can overlap the two (CUDA:
     * query-row chunks, detection on a side stream). NULL, or
     * PIT_ERR_UNSUPPORTED before anything is queued: core makes the two
     * calls. */
    pit_status (*attention_detect)(void *bctx, void *stream, const pit_tdesc *detect_view,
                                   pit_index *idx, const pit_tdesc *Q, const pit_tdesc *K,
                                   const pit_tdesc *V, const pit_tdesc *mask, const pit_tdesc *O,
                                   float scale);

    /* MoE routing: fills idx (groups = experts, capacity = T*k, entries =
     * token-slot t*k+j) from expert_ids [T,k] with atomics. Ids outside
     * 0..groups-1 are skipped. Zeroes counts first. */
    pit_status (*moe_route)(void *bctx, void *stream, const pit_tdesc *expert_ids,
                            const pit_index *idx);
    /* For each expert e and each listed token-slot s = t*k+j:
     *   mode 0 (forward):  Y[t] (+)= gates[s] * X[t] . W[e]        X [T,H], W [E,H,N], Y [T,N]
     *   mode 1 (dX):       Y[t] (+)= gates[s] * X[t] . W[e]^T      X = dY [T,N], Y = dX [T,H]
     *   mode 2 (dW):       W[e] = sum_s gates[s] * X[t]^T . D[t]   X [T,H], D = Y arg [T,N], W = dW
     *   mode 3 (dgates):   gates[s] = sum_n (X[t] . W[e])[n] * D[t][n]   D = Y arg; gates = dgates
     * In modes 0 and 1, Y is zeroed by the backend then accumulated (k > 1)
     * or stored (k == 1). In mode 2 every expert's dW is written (zeros for an
     * expert with no token); in mode 3 every dgates slot (0 for skipped ids).
     * gates may be NULL in modes 0-2 (all 1). max_entries: the largest
     * counts[e], or -1 where moe_plans_on_device said it is not needed.
     *
     * Slot rows (ABI 6; core's expert FFN, core/ops/moe_ffn.c): modes 0-2 may
     * carry one of these flags (or'ed into mode; never both, never mode 3),
     * which give an operand one row per token-slot s instead of one per token:
     *   PIT_MOE_SLOT_X: X is [T*k, .] and read at row s (not t).
     *   PIT_MOE_SLOT_Y: modes 0/1: Y is [T*k, N] and Y[s] = gates[s] * ... is
     *                   stored, not summed over k; every row of a slot whose
     *                   id was skipped is zeroed. Mode 2: D is [T*k, N], read
     *                   at row s.
     * T (and k = capacity / T) is then the row count of the operand that is
     * still per token; gates stay [T,k].
     *
     * tile: in, the tile-database row core chose (NULL, or bm 0 where the
     * database has no row for the device: the backend's own);
     * out (when not NULL), the tile that ran: a backend whose kernel for
     * this mode or these tensors takes another tile says so here, so the
     * report names what ran. */
    pit_status (*moe_matmul)(void *bctx, void *stream, int mode, pit_tile *tile,
                             const pit_index *idx, int32_t max_entries, const pit_tdesc *X,
                             const pit_tdesc *W, const pit_tdesc *gates, const pit_tdesc *Y);
    /* 1 where moe_matmul's mode on these tensors plans its work on the device
     * and so needs no max_entries: core then reads no counts back between
     * routing and the GEMM (the forward without a report is one asynchronous
     * call, which a CUDA graph can capture). May be NULL (never). */
    int (*moe_plans_on_device)(void *bctx, int mode, const pit_tdesc *X, const pit_tdesc *W,
                               const pit_tdesc *Y);
    /* C rows listed by idx (axis M, tile 1 x K: one group per batch, entries =
     * row indices) = A rows . B; other rows zeroed unless keep_skipped.
     * tile: in and out, as moe_matmul's. */
    pit_status (*matmul_rows)(void *bctx, void *stream, pit_tile *tile, const pit_index *idx,
                              int32_t max_entries, const pit_tdesc *A, const pit_tdesc *B,
                              const pit_tdesc *C, int keep_skipped);
    /* Elementwise and layout helpers. */
    pit_status (*relu)(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y);
    pit_status (*transpose)(void *bctx, void *stream, const pit_tdesc *X, const pit_tdesc *Y);

    /* 1 when mem handles are device addresses (CUDA, HIP): core may then
     * place several small buffers in one allocation at byte offsets (the
     * per-candidate counts of a plan), read back with a single transfer. */
    int mem_is_pointer;

    /* ---- memory the caller wraps (may be NULL: nothing is checked) -------- *
     * What the backend knows of a memory handle pit did not allocate (a
     * pit_tensor_wrap or a DLPack import); core refuses a view that does not
     * fit. *bytes: how many bytes from mem on belong to its buffer (OpenCL:
     * the cl_mem's size, a sub-buffer's own; CUDA/HIP: to the end of the
     * allocation holding mem, or of the pieces mapped back to back after it,
     * counted no further than need). Errors: PIT_ERR_CONTEXT_MISMATCH when
     * mem belongs to another context (OpenCL) or device (CUDA/HIP);
     * PIT_ERR_INVALID_ARGUMENT when it is no memory of this backend's. */
    pit_status (*mem_query)(void *bctx, const void *mem, size_t need, size_t *bytes);

    /* Optional (ABI 5): from now on, the scratch the entries take for
     * themselves (per call, or cached per stream) comes from a; NULL: from
     * the backend's own allocation again. Each block goes back to the
     * allocator that gave it (a cached one remembers which). Core calls it
     * while no call runs on the context. NULL entry: pit_context_set_allocator
     * is refused with PIT_ERR_UNSUPPORTED. */
    pit_status (*set_scratch_allocator)(void *bctx, const pit_scratch_allocator *a);

    /* Optional (ABI 6): the activation of the MoE expert FFN, element-wise
     * over R = T*k token-slot rows (core/ops/moe_ffn.c composes the FFN from
     * moe_route, moe_matmul with slot rows, and this). act is a
     * pit_activation. U holds the first GEMM's rows: [R, 2F] for SwiGLU and
     * GeGLU (g = U[r, f], u = U[r, F + f]), [R, F] for the others (h =
     * U[r, f]); F is A's (forward) or dA's (backward) column count, and all
     * row tensors share one float dtype.
     *   Forward (dA NULL): A [R, F] = act(U). A may be U's first F columns
     *     (in place); gates, dU and dgates are NULL.
     *   Backward (dA [R, F], the gradient reaching act(U) before the gate):
     *     dU [R, W] = d act(U) / dU * (gate[r] * dA[r]), gate[r] =
     *     gates[r / k, r % k] with gates f32 [T, k] (NULL: 1); dU may be U
     *     (in place). A (NULL: not written) = act(U), and may be dA (in
     *     place). dgates (NULL: not written), f32 [T, k]: dgates[r / k, r % k]
     *     = sum_f act(U)[r, f] * dA[r, f].
     * The formulas are pit.h's (pit_activation), in f32 arithmetic. Core
     * passes a non-empty R and F only. */
    pit_status (*moe_activation)(void *bctx, void *stream, int act, const pit_tdesc *U,
                                 const pit_tdesc *dA, const pit_tdesc *gates, const pit_tdesc *A,
                                 const pit_tdesc *dU, const pit_tdesc *dgates);
    /* Optional (ABI 6): attention with every option of pit_attention, as
     * pit_attention_desc above says. NULL: core runs the calls that reduce
     * to attention_sparse there (an element mask alone, Lq == Lk, Hq == Hkv,
     * no lse) and refuses the others with PIT_ERR_UNSUPPORTED. */
    pit_status (*attention_ex)(void *bctx, void *stream, const pit_attention_desc *a);
    /* Optional (ABI 6): the backward of attention_ex on the same descriptor
     * (a->O and a->lse are the forward's, inputs here; lse is never NULL):
     * dQ = sum_j dS_ij K_j, dK_j = sum over i and the group's query heads
     * of dS_ij Q_i, dV_j = sum P_ij dO_i, with P_ij = exp(scale Q_i.K_j -
     * lse_i) on the allowed pairs (0 elsewhere), dS_ij = scale P_ij (dO_i.V_j
     * - dO_i.O_i). dQ [B, Hq, Lq, D], dK, dV like K and V; any may be NULL
     * (not wanted); each one given is written whole. */
    pit_status (*attention_backward)(void *bctx, void *stream, const pit_attention_desc *a,
                                     const pit_tdesc *dO, const pit_tdesc *dQ,
                                     const pit_tdesc *dK, const pit_tdesc *dV);

    /* ---- host memory as the device's (optional, ABI 8; set both or none) --
     * For a DLPack import of host memory (kDLCPU) on a device whose memory
     * is the host's (device_info's takes_host_memory). mem_wrap_host makes
     * *mem, a handle over `bytes` bytes at host used in place (OpenCL:
     * clCreateBuffer with CL_MEM_USE_HOST_PTR); bytes > 0; read_only: the
     * device never writes it. PIT_ERR_INVALID_ARGUMENT on a device that does
     * not take host memory. mem_unwrap_host makes the host bytes hold every
     * write the device made (a blocking map for reading on stream: OpenCL
     * guarantees a USE_HOST_PTR buffer's host memory only after a map), then
     * releases mem; the host memory stays the caller's. NULL entries: host
     * memory is refused, naming the backend. */
    pit_status (*mem_wrap_host)(void *bctx, void *host, size_t bytes, int read_only, void **mem);
    pit_status (*mem_unwrap_host)(void *bctx, void *stream, void *mem);

    /* Optional (ABI 10): 1 where moe_matmul(0 | PIT_MOE_SLOT_Y |
     * PIT_MOE_GLU(act), tile, idx, max_entries, X, W, NULL, A) runs here
     * with this tile (as moe_matmul takes it) on these tensors: the expert
     * FFN's first product with the gated activation act (SwiGLU or GeGLU)
     * in its epilogue, A [T*k, F] = act(X.W[:, :F]) * X.W[:, F:] for W [E, H,
     * 2F], the product in f32 and rounded once. Core then runs no
     * moe_activation and keeps no [T*k, 2F] intermediate. NULL: never. */
    int (*moe_fuses_activation)(void *bctx, int act, const pit_tile *tile, const pit_tdesc *X,
                                const pit_tdesc *W, const pit_tdesc *A);
    /* Optional (ABI 11): attention_ex's call with an element mask (a->mask
     * set, a->idx NULL) over key-column micro-tiles of a->tile.rows query
     * rows: the backend finds, for each tile of query rows, every key one
     * of its rows allows (its own detection, reading the mask once, the
     * window bounds folded in), gathers those keys' rows of K and V and
     * applies the mask inside: PIT along the key axis. Rows that allow far
     * more keys than the other rows of their block (global tokens) may be
     * gathered into tiles of their own. listed (NULL: not wanted) receives
     * the (query tile, key) pairs it listed, read back. PIT_ERR_UNSUPPORTED
     * before anything is queued where it cannot: core then indexes the
     * mask in blocks. */
    pit_status (*attention_columns)(void *bctx, void *stream, const pit_attention_desc *a,
                                    int64_t *listed);
} pit_backend;

/* moe_matmul's slot-row flags (ABI 6), or'ed into its mode */
#define PIT_MOE_SLOT_X 0x10
#define PIT_MOE_SLOT_Y 0x20
#define PIT_MOE_MODE_MASK 0x0f
/* moe_matmul's gated epilogue (ABI 10, where moe_fuses_activation says so),
 * or'ed into mode 0 with PIT_MOE_SLOT_Y: act a pit_activation, SwiGLU or
 * GeGLU */
#define PIT_MOE_GLU(act) (((act) + 1) << 8)
#define PIT_MOE_GLU_MASK 0xf00

typedef const pit_backend *(*pit_backend_register_fn)(const pit_host *host);

#ifdef __cplusplus
}
#endif
#endif /* PIT_CORE_BACKEND_H */
