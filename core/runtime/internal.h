/*
 * core/runtime/internal.h - what core's files share. Not installed, not seen by
 * backends (they get pit_host through backend.h instead).
 */
#ifndef PIT_CORE_INTERNAL_H
#define PIT_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"
#include "select.h"

/* ---- errors and logging (status.c, logging.c, log.c) ---------------------- */
#if defined(__GNUC__)
#define PIT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PIT_PRINTF(a, b)
#endif

/* Records status and a formatted message for pit_last_error(); returns status. */
pit_status pit_error(pit_status status, const char *fmt, ...) PIT_PRINTF(2, 3);
pit_status pit_verror(pit_status status, const char *fmt, va_list ap);
/* Clears the thread's message; every public entry point calls it first. */
void pit_clear_error(void);
/* The log (logging.c): a line at level goes to the sink when PIT_LOG (or,
 * unset, an installed callback) asks for that level. */
int pit_log_wants(pit_log_level level);
void pit_log(pit_log_level level, const char *fmt, ...) PIT_PRINTF(2, 3);
void pit_vlog(pit_log_level level, const char *fmt, va_list ap);
#define pit_log_debug(...) pit_log(PIT_LOG_DEBUG, __VA_ARGS__)
#define pit_log_info(...) pit_log(PIT_LOG_INFO, __VA_ARGS__)
#define pit_log_warn(...) pit_log(PIT_LOG_WARN, __VA_ARGS__)
/* $PIT_CACHE_DIR or ~/.cache/pit, created on first use; NULL if impossible. */
const char *pit_cache_dir(void);
/* PIT_FAULT_ALLOC=N: the N-th device allocation from now fails (tests). */
int pit_fault_alloc_now(void);
/* pit_host's kernel disk cache (kernel_cache.c): the size cap, LRU order. */
void *pit_kernel_cache_load(const char *kind, const char *key, size_t *size);
void pit_kernel_cache_store(const char *kind, const char *key, const void *data, size_t size);
void pit_kernel_cache_drop(const char *kind, const char *key);

/* Returns early from the enclosing function when a call fails. */
#define PIT_TRY(expr)                      \
    do {                                   \
        pit_status pit_try_s_ = (expr);    \
        if (pit_try_s_ != PIT_SUCCESS)     \
            return pit_try_s_;             \
    } while (0)

#define PIT_CHECK_ARG(cond, name)                                                   \
    do {                                                                            \
        if (!(cond))                                                                \
            return pit_error(PIT_ERR_INVALID_ARGUMENT, "%s: argument '%s' is invalid" \
                             " (%s)", __func__, name, #cond);                       \
    } while (0)

/* ---- experimental switches (switches.c, switches.def) --------------------- */
void pit_switches_read(pit_switches *sw);

/* ---- registry (registry.c) ------------------------------------------------ */
/* Loads (once) and returns the plug-in for "cuda", "hip" or "opencl". */
pit_status pit_backend_get(const char *name, const pit_backend **out);
/* A backend's device count and device description, checked (registry.c). */
pit_status pit_backend_device_count(const pit_backend *be, int *count);
pit_status pit_backend_device_info(const pit_backend *be, int index, pit_device_info *info);
/* 1 when the device's operators take tensors of dtype dt: f16 with
 * has_f16_storage, bf16 with has_bf16, every other dtype always. */
int pit_device_stores(const pit_device_info *info, pit_dtype dt);
/* The folder plug-ins are loaded from (next to libpit.so). */
const char *pit_plugin_dir(void);
extern const pit_host pit_host_api;

/* ---- objects ----------------------------------------------------------- */
#define PIT_PLAN_CACHE 32

typedef struct pit_plan {
    int used;
    int busy;                  /* a call is using it: not evicted */
    void *stream;              /* backend stream: plans are per stream */
    pit_microtile forced;      /* rows == 0: automatic */
    pit_problem problem;
    int64_t a_rows, a_cols;    /* sparse operand shape */
    pit_microtile cands[PIT_MAX_CANDIDATES];
    int ncands;
    pit_index idx[PIT_MAX_CANDIDATES];
    int32_t *host_counts[PIT_MAX_CANDIDATES]; /* point into host_block */
    int32_t *host_block;       /* every candidate's counts, host copy */
    void *counts_block;        /* same on the device when mem_is_pointer */
    size_t counts_bytes;       /* bytes of all candidates' counts, each followed by its total */
    pit_selection sel;
    int have_sel;
    int settled_calls;         /* calls since every candidate was last detected */
    int recheck;               /* the chosen candidate's density moved: detect all next */
    double density[PIT_MAX_CANDIDATES]; /* at the last selection */
    uint64_t last_use;
    const struct pit_mem_source *mem_source; /* of its device blocks */
} pit_plan;

struct pit_stream {
    pit_context *ctx;
    void *bs;
    int owned;
};

/* What a context hands out and its caller destroys: pit_context_destroy
 * refuses while any is alive (it names how many of each). */
typedef enum pit_live_kind {
    PIT_LIVE_TENSOR = 0,
    PIT_LIVE_STREAM,
    PIT_LIVE_EVENT,
    PIT_LIVE_KINDS
} pit_live_kind;

struct pit_context {
    const pit_backend *be;
    void *bctx;
    int device_index;
    pit_device_info info;
    pit_switches switches; /* read once, when the context is created */
    pit_stream default_stream;
    pit_tiledb *db;
    pthread_mutex_t lock; /* guards plans */
    pit_plan plans[PIT_PLAN_CACHE];
    uint64_t clock;
    struct pit_workspace *workspaces; /* op_util.c; guarded by lock */
    atomic_int live[PIT_LIVE_KINDS];  /* tensors, streams, events alive */
    atomic_int redetect_every;        /* pit_context_set_redetect_interval; 0: default */
    struct pit_mem_source *mem_sources; /* memory.c; guarded by lock */
    _Atomic(const struct pit_mem_source *) mem_source; /* NULL: the backend's */
};

static inline void pit_live_count(pit_context *ctx, pit_live_kind kind, int delta)
{
    atomic_fetch_add(&ctx->live[kind], delta);
}

struct DLManagedTensor;
struct pit_tensor {
    pit_context *ctx;
    pit_tdesc d;
    int owned;
    size_t alloc_bytes;
    const struct pit_mem_source *mem_source; /* where an owned tensor's memory came from */
    void *dl_import;  /* the producer's managed tensor, deleted on destroy */
    int dl_versioned; /* dl_import is a DLManagedTensorVersioned (DLPack 1.0) */
    int read_only;    /* imported with DLPack's read-only flag: pit never writes it */
    int host_wrapped; /* d.mem: the backend's handle over the caller's host memory
                         (mem_wrap_host), given back by mem_unwrap_host */
};

/* ---- device memory (memory.c) -------------------------------------------- *
 * A block comes from a source: the allocator of pit_context_set_allocator in
 * force when it was taken, or NULL for the backend's mem_alloc. Whoever keeps
 * a block across calls keeps its source too, and frees it with that one. */
typedef struct pit_mem_source pit_mem_source;
/* The source in force now. */
const pit_mem_source *pit_mem_source_of(pit_context *ctx);
/* bytes (0 taken as 4: every handle is valid) from `from`. */
pit_status pit_mem_alloc(pit_context *ctx, const pit_mem_source *from, size_t bytes, void **mem);
void pit_mem_free(pit_context *ctx, const pit_mem_source *from, void *mem);
/* Before blocks of a framework's allocator used on backend stream bs go back:
 * waits for bs (nothing to do for the backend's own blocks). */
void pit_mem_wait(pit_context *ctx, const pit_mem_source *from, void *bs);
/* Frees the records of every allocator set (context destruction). */
void pit_mem_sources_release(pit_context *ctx);

/* The stream to use for a public call's stream argument. */
pit_stream *pit_stream_or_default(pit_context *ctx, pit_stream *s);
int64_t pit_tensor_numel(const pit_tdesc *d);
/* Bytes from the first to one past the last element, honouring strides. */
size_t pit_tensor_extent_bytes(const pit_tdesc *d);
/* Whether two views share bytes of one allocation (output aliasing checks). */
int pit_tdesc_overlap(const pit_tdesc *a, const pit_tdesc *b);
/* Whether the view is dense row-major (dimensions of extent 1 aside). */
int pit_tdesc_contiguous(const pit_tdesc *d);
/* 1 when the dimensions of extent > 1, innermost first, each have a stride
 * at least the span of those inside them (row-major order). pit_tensor_wrap
 * and the DLPack imports also take views in other stride orders. */
int pit_tdesc_row_major(const pit_tdesc *d);
/* PIT_ERR_BAD_STRIDES, naming fn (may be NULL) and the argument, when t is
 * not row-major (every operator but pit_attention checks it). */
pit_status pit_tensor_check_row_major(const pit_tensor *t, const char *fn, const char *name);
/* Validates tensor handle and context, and that it is row-major; names the
 * argument on failure. */
pit_status pit_tensor_check(const pit_context *ctx, const pit_tensor *t, const char *name);
/* PIT_ERR_INVALID_ARGUMENT when fn would write t and t is read-only. */
pit_status pit_tensor_check_writable(const pit_tensor *t, const char *fn, const char *name);
/* pit_tensor_wrap of host memory (a DLPack kDLCPU import) on a backend that
 * takes it: the view's bytes become one buffer of the device
 * (mem_wrap_host), PIT_ERR_INVALID_ARGUMENT naming the backend elsewhere. */
pit_status pit_tensor_wrap_host(pit_context *ctx, pit_dtype dtype, int rank, const int64_t *shape,
                                const int64_t *strides, void *data, size_t byte_offset,
                                int read_only, pit_tensor **out);
/* Calls the deleter of a DLPack import (dlpack.c); nothing for other tensors. */
void pit_dlpack_release(pit_tensor *t);

/* ---- plans (plan.c) ------------------------------------------------------- */
/* Finds or creates the plan for a problem on a stream and marks it busy; its
 * indices are allocated. rows x cols is the sparse operand's shape. */
pit_status pit_plan_acquire(pit_context *ctx, const pit_problem *p, void *stream,
                            int64_t rows, int64_t cols, const pit_microtile *forced,
                            pit_plan **out);
void pit_plan_release(pit_context *ctx, pit_plan *p);
void pit_plans_release(pit_context *ctx);
/* Releases the plans of one stream (before the stream is destroyed). */
void pit_plans_release_stream(pit_context *ctx, void *stream);
/* Frees the operators' cached device buffers (op_util.c): all of them, or
 * those of one stream (before the stream is destroyed: a later stream may
 * get the same backend handle). */
void pit_workspaces_release(pit_context *ctx);
void pit_workspaces_release_stream(pit_context *ctx, void *stream);

/* Host wall clock, for the report's selection time and pit tune (log.c). */
double pit_now_us(void);

/* ---- device timing (baseline.c) ------------------------------------------- */
typedef pit_status (*pit_device_work)(void *arg);
/* Median device time (events on bs) of work(arg) over `repeats` calls after
 * one warm-up call, in microseconds. */
pit_status pit_time_median_us(pit_context *ctx, void *bs, int repeats, pit_device_work work,
                              void *arg, double *median_us);
/* Sorts v[0..n-1] and returns its median. */
double pit_median(double *v, int n);

/* ---- CPU references (reference.c), double accumulation ------------------- */
#include "reference.h"

#endif /* PIT_CORE_INTERNAL_H */
