/*
 * cuda_kernels.h - the kernel variants of the CUDA backend: which kernels
 * exist, which -D defines select a variant, which tiles are valid, and the
 * one table of variants CI compiles. Shared by the plug-in and by
 * pit-nvrtc-check; needs neither a driver nor a device.
 */
#ifndef PIT_CUDA_KERNELS_H
#define PIT_CUDA_KERNELS_H

#include <pthread.h>
#include <stddef.h>

#include "backend.h"
#include "kernels/args.h" /* the kernels' argument blocks */

/* The kernels, one value each: kernels/kernels.def is the one list. */
typedef enum pit_cuda_kernel_kind {
#define PIT_KERNEL(id, entry, source) PIT_CUDA_##id,
#include "kernels/kernels.def"
#undef PIT_KERNEL
    PIT_CUDA_KERNEL_COUNT
} pit_cuda_kernel_kind;

/* Detection region of one CTA: DETECT_H rows x DETECT_TW vectors. */
#define PIT_CUDA_DETECT_H 32
#define PIT_CUDA_DETECT_TW 64
#define PIT_CUDA_DETECT_THREADS 256
#define PIT_CUDA_DETECT_MAX PIT_DETECT_MAX
/* Columns of pit_detect_strip's strip: 32 vectors of vec elements. */
#define PIT_CUDA_STRIP_W(vec) (32 * (vec))

/* Everything that selects one compiled kernel. */
typedef struct pit_cuda_variant {
    pit_cuda_kernel_kind kind;
    pit_dtype dtype;
    int vec;              /* detect: elements per load (1 or 16/elem) */
    pit_tile tile;        /* matmul: bm (== micro rows on axis K), bn, bk, threads, stages, tc */
    pit_axis axis;        /* matmul: K or M */
    int mt_rows, mt_cols; /* matmul: micro-tile */
    int a_vec, b_vec;     /* matmul: 16-byte vector loads allowed */
    int a_comp;           /* matmul axis K: A is pit_compact's dense copy */
    int c_vec;            /* matmul: C (or the f32 target) rows 16-byte aligned */
    int cluster;          /* decode: the shares of K summed in a thread-block cluster (sm_90) */
    int op_param[5];      /* operator kernels: see cuda_model.h */
} pit_cuda_variant;

/* The kernel's entry point and its embedded source (kernels.def). */
const char *pit_cuda_kernel_name(pit_cuda_kernel_kind kind);
const char *pit_cuda_kernel_source(pit_cuda_kernel_kind kind);
/* Headers the sources include, by the names they include them with, for
 * nvrtcCreateProgram (and hiprtc). */
int pit_cuda_kernel_headers(const char *const **sources, const char *const **names);

/* The -D defines of a variant as one string ("-DPIT_DTYPE=1 -DBM=32 ..."),
 * written into buf; returns buf. The JIT splits it at spaces. */
char *pit_cuda_variant_defines(const pit_cuda_variant *v, char *buf, size_t size);

/* "<entry> <defines>" ("pit_matmul -DPIT_KERNEL_MATMUL -DPIT_DTYPE=1 ..."),
 * written into buf; returns buf. The name of a variant: the per-context
 * cache's key, the built-in binaries' (cuda_prebuilt.h, HIP's code
 * objects). */
#define PIT_CUDA_LABEL_MAX 600
char *pit_cuda_variant_label(const pit_cuda_variant *v, char *buf, size_t size);

/* 1 when the kernel sources accept this matmul tile (the same rules as the
 * static_asserts and layout pickers of pit_matmul.cu); why says what fails. */
int pit_cuda_tile_valid(pit_dtype dtype, const pit_tile *t, const char **why);

/* The 16-byte alignment of a matmul's operands, which picks its vector
 * loads and stores: a, b: A's and B's rows (pointer, leading dimension,
 * batch stride and width); c: C's rows (pointer, leading dimension, batch
 * stride); n4: N a multiple of 4 (the f32 scratch of axis M, 16-bit). */
typedef struct pit_cuda_mm_align {
    int a, b, c, n4;
    int few_rows; /* A has fewer rows than a micro-tile (decode): its gather is too small to compact */
} pit_cuda_mm_align;

/* The fused matmul variant that runs tile for micro-tile mt of dtype dt on
 * sm_<arch> with operands aligned as al: along K the tile's bm becomes the
 * micro-tile's rows, 16-bit data uses tensor cores from sm_80 and 16 rows,
 * A narrower than a vector is compacted first. The one rule of the
 * plug-in's matmul (ops/matmul.c) and of the build's pre-compiled set
 * (precompile.c). Returns 0 and why when the tile cannot run. */
/* The decode kernel (pit_decode.cu) runs a sparse A along K of at most this
 * many rows, one row-block, column micro-tiles one wide (16 rows on CUDA
 * cores measured 2.4x slower than the tile kernel: docs/design/decode-split-k.md). */
#define PIT_CUDA_DECODE_MAX_ROWS 4
/* Its register height for m rows (1 or 4), 0 above the maximum. */
int pit_cuda_decode_rows(int64_t m);
/* Its threads, and the CTAs an SM holds at least for a register height (its
 * launch bounds: the host sizes one wave of shares by them). */
#define PIT_CUDA_DECODE_THREADS 256
int pit_cuda_decode_min_ctas(int mrows);
/* On sm_90, where this many shares of K an n-tile make one wave of CTAs
 * (at least 4/5 of it), the shares of an n-tile form a thread-block
 * cluster and sum through shared memory: no slabs, no counters to zero
 * (docs/design/decode-detection-inside.md). 8: the portable cluster size;
 * other sizes measured slower. */
#define PIT_CUDA_DECODE_CLUSTER 8
/* The decode kernel on tensor cores (pit_decode_mma.cu, 16-bit, sm_80+),
 * from 5 rows: row-blocks of 16 or 32 rows, at most this many (the tokens
 * of a decode step), column micro-tiles one wide. */
#define PIT_CUDA_DECODE_MMA_MAX_ROW_BLOCKS 4

/* The sm_90 tensor-core engine of the matmul along K (pit_matmul_wg.cu,
 * tiles marked PIT_TILE_ENGINE): its threads (a copying warpgroup and two
 * multiplying ones) and the micro-tile columns its shared presence words
 * hold (K of at most this many micro-tile columns). */
#define PIT_CUDA_ENGINE_THREADS 384
#define PIT_CUDA_ENGINE_KT_MAX 2048
/* Rows of C a CTA of the engine takes (the row-blocks it merges). */
#define PIT_CUDA_ENGINE_ROWS 128
int pit_cuda_matmul_variant(int arch, pit_dtype dt, const pit_tile *tile, const pit_microtile *mt,
                            const pit_cuda_mm_align *al, pit_cuda_variant *v, const char **why);

/* ---- detection (ops/detect.c) ------------------------------------------ */
/* 1 when index ix asks for "full" marks the entries can carry. */
int pit_cuda_detect_marks(const pit_index *ix);
/* 1 when pit_detect_strip fills ix over rows of 16-byte vectors of vec
 * elements: micro-tiles of 1 row (whole vectors wide) or of 16, 32 or 64
 * rows, whose columns tile the strip's 32 vectors (whole vectors along M),
 * no marks. Any other index goes to pit_detect. */
int pit_cuda_strip_fits(const pit_index *ix, int vec);
/* The kernels' target of index ix over an operand of cols columns (no dedup
 * or marks: pit_detect's launch adds those). */
void pit_cuda_detect_target(pit_detect_target *t, const pit_index *ix, int64_t cols);

/* The shipped tile database of sm_<arch> ("nvidia-sm90", ...). */
const char *pit_cuda_tiledb_family(int arch);

/* Every variant CI compiles for arch (sm_XY as XY). Calls fn for each;
 * returns how many. Tensor-core variants only for arch >= 80. */
typedef void (*pit_cuda_variant_fn)(const pit_cuda_variant *v, void *user);
int pit_cuda_for_each_variant(int arch, pit_cuda_variant_fn fn, void *user);
/* The same variants as one array (the caller frees it); NULL when out of
 * memory. For the build tools that compile them (pit-nvrtc-check,
 * pit-hip-genco). */
pit_cuda_variant *pit_cuda_variant_list(int arch, int *count);

/* Splits a variant's defines string at spaces into compiler options, in
 * place (no strtok: the checker compiles from several threads). Shared by
 * NVRTC (CUDA) and hiprtc (HIP). Returns the number of options. */
int pit_cuda_split_options(char *defines, const char **opts, int max);

/* The per-context list of loaded kernels, keyed by kernel name + defines,
 * shared by the CUDA and HIP plug-ins: each vendor's kernel struct starts
 * with a pit_kernel_link. */
typedef struct pit_kernel_link {
    char *key;
    pit_cuda_variant variant; /* the variant it was built for, compared as bytes first */
    struct pit_kernel_link *next;
} pit_kernel_link;

/* Builds (compiles or loads) the kernel of v named key; the cache fills in
 * the link. */
typedef pit_status (*pit_kernel_build_fn)(void *ctx, const pit_cuda_variant *v, const char *key,
                                          pit_kernel_link **out);
/* Releases a vendor kernel (module and struct); the cache frees the key. */
typedef void (*pit_kernel_release_fn)(pit_kernel_link *k);

/* The cached kernel of v, built under the lock on first use so two threads
 * never build the same kernel. */
pit_status pit_kernel_cache_get(const pit_host *host, pthread_mutex_t *lock,
                                pit_kernel_link **head, void *ctx, const pit_cuda_variant *v,
                                pit_kernel_build_fn build, pit_kernel_release_fn release,
                                pit_kernel_link **out);
void pit_kernel_cache_clear(pit_kernel_link **head, pit_kernel_release_fn release);

#endif /* PIT_CUDA_KERNELS_H */
