/*
 * args.h - the argument block of every CUDA (and HIP) kernel, passed by
 * value as the kernel's one parameter. One header for both sides: the host
 * C files fill these structs, the device code reads them, and a size check
 * each keeps the two layouts one. Pointers are device addresses: typed
 * pointers in device code, 64-bit integers on the host.
 *
 * C11 and C++ (NVRTC, hiprtc, clang -x hip): fixed-width fields, explicit
 * padding, nothing C++-only outside PIT_ARGS_DEVICE.
 */
#ifndef PIT_ARGS_H
#define PIT_ARGS_H

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define PIT_ARGS_DEVICE 1
#ifndef PIT_PORT_CUH
#error "include common/port.cuh before args.h"
#endif
#define PIT_PTR(type) type *
#define PIT_ALIGNAS(n) alignas(n)
#define PIT_ARGS_SIZE(type, bytes) static_assert(sizeof(type) == (bytes), #type " size")
#else
#include <stdint.h>
typedef int64_t pit_i64;
typedef uint64_t pit_u64;
typedef uint8_t pit_u8;
#define PIT_PTR(type) uint64_t
#define PIT_ALIGNAS(n) _Alignas(n)
#define PIT_ARGS_SIZE(type, bytes) _Static_assert(sizeof(type) == (bytes), #type " size")
#endif

/* ---- detection (pit_detect.cu, pit_detect_strip.cu) ------------------- */
#define PIT_DETECT_MAX 8 /* indexes one pass fills */
/* pit_detect_strip: a warp's strip is STRIP_H rows of 32 16-byte vectors,
 * read in batches of STRIP_G rows (one accumulator a batch) */
#define PIT_DETECT_STRIP_H 64
#define PIT_DETECT_STRIP_G 16
#define PIT_DETECT_STRIP_THREADS 128
/* pit_detect_cols: one thread a column of an operand of at most this many rows */
#define PIT_DETECT_COLS_MAX_ROWS 64
#define PIT_DETECT_COLS_THREADS 256

/* pit_decode_mma.cu: a CTA is THREADS threads over BN columns (its warps
 * split them); a stage is KC gathered rows (16 or 32); STAGES stages in
 * flight; the CTAs an SM holds for micro-tile rows mt (its launch bounds,
 * and the host's wave) */
#define PIT_DECODE_MMA_THREADS 256
#define PIT_DECODE_MMA_BN 256
#define PIT_DECODE_MMA_KC 32
#define PIT_DECODE_MMA_STAGES 4
#define PIT_DECODE_MMA_MIN_CTAS(mt) ((mt) == 16 ? 3 : 2)

typedef struct pit_detect_target {
    int tm, tk, axis; /* axis: 1 = K, 2 = M */
    int groups_per_batch, capacity;
    int tiles_cols; /* micro-tiles along the columns of X */
    PIT_PTR(int) counts;
    PIT_PTR(int) entries;
    PIT_PTR(int) total;
    PIT_PTR(pit_u32) dedup; /* NULL when every micro-tile is region-aligned */
    /* "full" marks (at most one target has full = 1): zero and arrive exist
     * when dedup does (bits / counters per micro-tile, as dedup's bits) */
    PIT_PTR(pit_u32) zero; /* a piece of the micro-tile has a zero element */
    PIT_PTR(int) arrive;   /* pieces (CTAs) arrived, packed with their bits */
    int full, pad;
} pit_detect_target;
PIT_ARGS_SIZE(pit_detect_target, 80);

typedef struct pit_detect_args {
    PIT_PTR(const pit_u8) x;  /* element 0 */
    pit_i64 ld, batch_stride; /* elements */
    int rows, cols, n, batch; /* batch: pit_detect_strip's (pit_detect's is the grid's z) */
    pit_detect_target t[PIT_DETECT_MAX];
} pit_detect_args;
PIT_ARGS_SIZE(pit_detect_args, 680);

/* ---- the fused sparse matmul (pit_matmul.cu) ----------------------------- */
typedef struct pit_mm_args {
    PIT_PTR(const pit_u8) a; /* element 0 */
    PIT_PTR(const pit_u8) b;
    PIT_PTR(pit_u8) c;     /* axis K output */
    PIT_PTR(float) acc;    /* axis M f32 target; axis K split partials */
    pit_i64 lda, ldb, ldc, ldacc;
    pit_i64 sa, sb, sc, sacc; /* batch strides (elements); axis K split: sacc per slab */
    int M, N, K;
    int splits; /* axis K: CTAs sharing one row-block's gathered K (>= 1) */
    PIT_PTR(const int) counts;
    PIT_PTR(const int) entries;
    int capacity, groups_per_batch;
    /* the decode kernels with several shares: a counter a tile of C, zeroed
     * before the launch; the share that arrives last sums the slabs into C */
    PIT_PTR(int) arrivals;
} pit_mm_args;
PIT_ARGS_SIZE(pit_mm_args, 144);

/* pit_matmul_wg.cu (sm_90): the matmul's arguments and CUtensorMaps of A
 * as [batch, M, K] (boxes of 64 x MT_ROWS) and B as [batch, K, N] (boxes
 * of 64 x 64), both under 128-byte swizzle; one batch where a stride is 0 */
typedef struct pit_mmwg_args {
    pit_mm_args mm;
    int mt_cols, pad; /* the micro-tile's columns, a multiple of 64 */
    PIT_ALIGNAS(64) pit_u8 map_a[128];
    PIT_ALIGNAS(64) pit_u8 map_b[128];
} pit_mmwg_args;
PIT_ARGS_SIZE(pit_mmwg_args, 448);

/* ---- pit_util.cu: zero / convert an f32 matrix, compact A ---------------- */
typedef struct pit_util_args {
    PIT_PTR(float) f32;     /* the f32 matrix: zeroed, or converted from */
    PIT_PTR(pit_u8) out;    /* converted into (T) */
    pit_i64 ld32, s32;      /* row and batch strides of f32 (elements) */
    pit_i64 ldo, so;        /* of out */
    int rows, cols;
    int nsum; /* convert: f32 slabs (s32 apart) summed per batch, 0 or 1: one */
    int pad;
} pit_util_args;
PIT_ARGS_SIZE(pit_util_args, 64);

typedef struct pit_compact_args {
    PIT_PTR(const pit_u8) a; /* element 0 of A */
    PIT_PTR(pit_u8) out;
    pit_i64 lda, sa, ldo, so; /* elements */
    int M, K, tm, tk;
    PIT_PTR(const int) counts;
    PIT_PTR(const int) entries;
    int capacity, groups_per_batch;
} pit_compact_args;
PIT_ARGS_SIZE(pit_compact_args, 88);

/* ---- operators of dynamic-sparse models --------------------------------- */
/* The block index as the kernels see it. batched 0: one set of groups
 * shared by every batch (a rank-2 mask indexed once). */
typedef struct pit_ix {
    PIT_PTR(const int) counts;
    PIT_PTR(const int) entries;
    int capacity, gpb, batched, pad;
} pit_ix;
PIT_ARGS_SIZE(pit_ix, 32);

/* Key-column micro-tiles of an element mask (pit_attention_cols.cu builds
 * them, pit_attention.cu with ATT_COLS attends over them). The mask, the
 * window bounds folded in, becomes bits [sets][Lq][words] (32 keys a word)
 * and each query block of ROWS rows its heavy rows (those allowing far more
 * keys than the block's others: global tokens). A tile is a query block's
 * other rows (tiles 0 .. nqb - 1), or up to ROWS heavy rows gathered in row
 * order (tiles nqb ..; heavy rows past heavy_tiles * ROWS stay in their
 * block); its key columns are every key one of its rows allows, ascending,
 * and tbits the mask bits of its chunk c (keys cols[64 c ..]), a 64-bit
 * word a tile row. A heavy tile's chunks split over segs CTAs whose
 * partials the last one to finish combines. Sets: the mask's (1 when the
 * mask is shared by every batch and head, else batch x query heads). */
#define PIT_ATTN_COLS_ROWS 64
#define PIT_ATTN_COLS_THREADS 256
#define PIT_ATTN_COLS_SCAN_THREADS 1024
#define PIT_ATTN_COLS_MAX_WORDS 4096 /* keys up to 131072, query blocks up to 8192 */
typedef struct pit_cols_ix {
    PIT_PTR(pit_u32) bits;   /* [sets][Lq][words] */
    PIT_PTR(pit_u32) heavy;  /* [sets][nqb][2] a block's heavy rows, bit r of word r / 32 */
    PIT_PTR(int) rows;       /* [sets][tiles][ROWS] a tile's query rows, -1 past its last */
    PIT_PTR(int) cols;       /* [sets][tiles][cap] its key columns, -1 past its last */
    PIT_PTR(int) ncols;      /* [sets][tiles] */
    PIT_PTR(pit_u64) tbits;  /* [sets][tiles][cap / 64][ROWS] */
    int words, nqb, heavy_tiles, tiles; /* tiles = nqb + heavy_tiles */
    int cap, segs, pad[2];              /* cap: Lk rounded up to 64 */
} pit_cols_ix;
PIT_ARGS_SIZE(pit_cols_ix, 80);

/* pit_op_attn_cols_scan (a CTA a query block of a set) and
 * pit_op_attn_cols_tiles (a CTA a tile of a set) */
typedef struct pit_attn_cols_args {
    PIT_PTR(const pit_u8) mask;
    pit_i64 mld, ms;            /* row stride, set stride (elements) */
    pit_i64 wl, wr;             /* window bounds (-1: none; causal is wr 0) */
    int Lq, Lk, mask_vec, pad;  /* mask_vec: rows 16-byte aligned */
    pit_cols_ix cx;
} pit_attn_cols_args;
PIT_ARGS_SIZE(pit_attn_cols_args, 136);

/* pit_attention.cu */
typedef struct pit_attention_args {
    /* CUtensorMaps of Q, K and V as [sets, rows, head dim] for the
     * warp-specialised kernel (ATT_WS): boxes of 64 columns x 128 (Q) or 64
     * rows (K, V) under 128-byte swizzle; 128 opaque bytes each */
    PIT_ALIGNAS(64) pit_u8 map_q[128];
    PIT_ALIGNAS(64) pit_u8 map_k[128];
    PIT_ALIGNAS(64) pit_u8 map_v[128];
    PIT_PTR(const pit_u8) q;
    PIT_PTR(const pit_u8) k;
    PIT_PTR(const pit_u8) v;
    PIT_PTR(const pit_u8) mask;
    PIT_PTR(pit_u8) o;
    pit_i64 ldq, ldk, ldv, ldo, mld;
    pit_i64 sq, sk, sv, so, ms; /* batch strides (elements); ms 0: one mask */
    pit_ix ix;
    PIT_PTR(const int) order; /* NULL, or the groups by falling count (pit_op_plan mode 1) */
    int L, mask_pair;         /* mask_pair: two mask elements load as one word */
    float scale_log2;
    int pad0;
    /* Detection inside the kernel (det != NULL; L a multiple of BLOCK, mask
     * rows 16-byte aligned): det[0] hands out work items in order, det[1 +
     * g] counts the finished detection parts of group g. */
    PIT_PTR(int) det;
    PIT_PTR(int) total;
    int groups, parts, heads, ahead; /* groups; detection parts and attention items a group; lookahead */
    int part_blocks, pad;            /* key blocks a detection part */
    /* pit_attention's options (attention_ex.c; pit_sparse_attention's
     * calls: Lk = L, group 1, no window, no lse, PIT_ATT_MASK): Lk keys,
     * aligned to the end of the query rows (key i + Lk - L is "at" row i);
     * heads_q query heads a batch, group of them reading one K/V head
     * (query head h reads h / group); window bounds wl, wr from that
     * diagonal (-1: none; causal is wr 0); lse (0: not written) f32 with
     * batch and head strides. */
    int Lk, heads_q, group, flags;
    pit_i64 wl, wr;
    PIT_PTR(float) lse;
    pit_i64 lse_sb, lse_sh;
    /* ATT_COLS: the tiles; a heavy tile's partials [query sets][heavy
     * tiles][segs][ROWS] (part_o: HDV values a row, part_ml: max and sum,
     * base 2) and its finished segments done[query sets][heavy tiles]
     * (zero before the launch; the last segment sets it back to 0) */
    pit_cols_ix cx;
    PIT_PTR(float) part_o;
    PIT_PTR(float) part_ml;
    PIT_PTR(int) done;
} pit_attention_args;
PIT_ARGS_SIZE(pit_attention_args, 768);
/* pit_attention_args.flags */
#define PIT_ATT_MASK 1     /* an element mask (else every element of a listed block counts) */
#define PIT_ATT_NO_INDEX 2 /* no index: every key block inside the window bounds */
#define PIT_ATT_REVERSE 4  /* the last query block first (causal: the longest first) */

/* pit_attention_decode.cu: decode with a block mask, a GQA group's query
 * heads in one CTA (ROWS = group x Lq rows at most), the union of their
 * key blocks (nkb blocks of the keys at most MAX_BLOCKS) split over
 * gridDim.y CTAs; splits > 1 write f32 partials [splits][bkv][ROWS]
 * (part_o: HD values a row, part_ml: max and sum, base 2) that
 * pit_op_attn_combine merges. Q and O are [B * heads_q, Lq, HD] sets, K and
 * V [B * hkv, Lk, HD]; lse (0: none) [B, heads_q, Lq] with batch and head
 * strides; wl, wr the window bounds (-1: none; causal is wr 0). */
#define PIT_ATTN_DECODE_ROWS 16
#define PIT_ATTN_DECODE_MAX_BLOCKS 2048
#define PIT_ATTN_DECODE_MAX_GROUP 16
typedef struct pit_attn_decode_args {
    PIT_PTR(const pit_u8) q;
    PIT_PTR(const pit_u8) k;
    PIT_PTR(const pit_u8) v;
    PIT_PTR(pit_u8) o;
    PIT_PTR(float) lse;
    PIT_PTR(float) part_o;
    PIT_PTR(float) part_ml;
    pit_i64 ldq, ldk, ldv, ldo;
    pit_i64 sq, sk, sv, so; /* set strides (elements) */
    pit_i64 lse_sb, lse_sh, wl, wr;
    pit_ix ix;
    int Lq, Lk, heads_q, hkv, group, nkb, splits, bkv; /* bkv: B * hkv, the CTAs of a split */
    float scale_log2;
    int pad;
} pit_attn_decode_args;
PIT_ARGS_SIZE(pit_attn_decode_args, 224);

/* pit_attention_ex.cu: attention with every option (core/backend.h,
 * pit_attention_desc) and its backward. A CTA of THREADS threads owns ROWS
 * query rows (forward, dQ) or keys (dK, dV), 4 a warp, and walks the other
 * side CHUNK at a time (one a lane); dot products stage DC columns at once;
 * a pass writes COLS output columns (8 a lane), wider outputs take more. */
/* pit_attention_bwd.cu (the tensor-core backward): threads and rows a CTA */
#define PIT_ATTN_BWD_THREADS 128
#define PIT_ATTN_BWD_ROWS 64
#define PIT_ATTN_EX_THREADS 128
#define PIT_ATTN_EX_ROWS 16
#define PIT_ATTN_EX_CHUNK 32
#define PIT_ATTN_EX_DC 32
#define PIT_ATTN_EX_COLS 256
/* flags */
#define PIT_ATTN_EX_MASK 1  /* an element mask */
#define PIT_ATTN_EX_LSE 2   /* the forward writes the log-sum-exp */
#define PIT_ATTN_EX_INDEX 4 /* walk the listed key blocks only */
#define PIT_ATTN_EX_DK 8    /* the dK/dV kernel writes dK */
#define PIT_ATTN_EX_DV 16   /* and dV */

/* A rank-4 operand as the kernels read it: element 0 of batch 0, head 0,
 * and the batch, head and row strides (elements; columns contiguous). */
typedef struct pit_attn_view {
    PIT_PTR(pit_u8) ptr;
    pit_i64 sb, sh, ld;
} pit_attn_view;
PIT_ARGS_SIZE(pit_attn_view, 32);

typedef struct pit_attn_ex_args {
    pit_attn_view q, k, v, mask, o, dout, dq, dk, dv; /* dout: dO; unused ones zero */
    PIT_PTR(float) lse;       /* [B, Hq, Lq]: written by the forward, read by the backward */
    pit_i64 lse_sb, lse_sh;
    PIT_PTR(const int) counts; /* the index (flags & INDEX) */
    PIT_PTR(const int) entries;
    pit_i64 idx_sb, idx_sh;   /* group of (b, h, query block qb): b * idx_sb + h * idx_sh + qb */
    pit_i64 wl, wr;           /* window bounds, -1: none (causal: wr 0) */
    int Lq, Lk, D, Dv;
    int heads, group;         /* heads of the grid (Hq; Hkv for dK/dV); query heads a kv head */
    int br, bc;               /* query rows x keys of a block */
    int blocks, parts;        /* blocks along the grid's side; CTAs a block (ceil(block / ROWS)) */
    int cap, flags;
    float scale, scale_log2;  /* scale, and scale * log2(e) */
} pit_attn_ex_args;
PIT_ARGS_SIZE(pit_attn_ex_args, 416);

/* pit_sddmm.cu */
typedef struct pit_sddmm_args {
    PIT_PTR(const pit_u8) a;
    PIT_PTR(const pit_u8) b;
    PIT_PTR(const pit_u8) mask;
    PIT_PTR(pit_u8) c;
    pit_i64 lda, ldb, ldc, mld;
    pit_i64 sa, sb, sc, ms;
    pit_ix ix;
    int M, N, K, br, bc, parts_c; /* parts_c: 32-wide parts across a block */
} pit_sddmm_args;
PIT_ARGS_SIZE(pit_sddmm_args, 152);

/* pit_softmax.cu */
typedef struct pit_softmax_args {
    PIT_PTR(const pit_u8) x; /* fwd: x = X; bwd: x = Y, y = dY */
    PIT_PTR(const pit_u8) y;
    PIT_PTR(const pit_u8) mask;
    PIT_PTR(pit_u8) out;
    pit_i64 ldx, ldy, mld, ldo;
    pit_i64 sx, sy, ms, so;
    pit_ix ix;
    int M, N, br, bc;
    float scale;
    int pad;
} pit_softmax_args;
PIT_ARGS_SIZE(pit_softmax_args, 152);
#define PIT_SOFTMAX_MAX_BLOCKS 65536 /* column blocks of the kernel's shared bitmap */

/* pit_moe_route.cu: routing */
typedef struct pit_route_args {
    PIT_PTR(const int) ids;
    PIT_PTR(int) counts;
    PIT_PTR(int) entries;
    PIT_PTR(int) total;
    pit_i64 ld;
    int T, k, E, capacity;
} pit_route_args;
PIT_ARGS_SIZE(pit_route_args, 56);

/* pit_moe_route.cu: work lists and orders */
typedef struct pit_plan_args {
    PIT_PTR(const int) counts;
    PIT_PTR(int) list; /* mode 0: [0] = n, then triples; mode 1: the order */
    int groups, bm, capacity, mode;
} pit_plan_args;
PIT_ARGS_SIZE(pit_plan_args, 32);

/* pit_gmm_tc.cu, pit_gmm_cc.cu: gathered GEMMs */
typedef struct pit_gmm_args {
    /* a CUtensorMap of B as [groups, K, N] (or [1, K, N] when sb = 0) for
     * the warp-specialised kernel: 128 opaque bytes, 64-byte aligned */
    PIT_ALIGNAS(64) pit_u8 map_b[128];
    PIT_PTR(const pit_u8) a;
    PIT_PTR(const pit_u8) b;
    PIT_PTR(const pit_u8) d; /* MoE mode 2/3 second operand dY */
    PIT_PTR(pit_u8) c;
    PIT_PTR(float) acc;
    PIT_PTR(const float) gates; /* [T,k] f32, row stride ldg; NULL: 1 */
    PIT_PTR(const int) counts;
    PIT_PTR(const int) entries;
    PIT_PTR(const int) list;
    pit_i64 lda, ldb, ldc, ldd, ldacc, ldg;
    pit_i64 sa, sb, sc, sacc; /* per-group strides (elements) */
    int M, N, K, kdiv, capacity, ntn; /* M: rows of dW (H) in MoE mode 2 */
    /* The rows of slot s: A's at s / adiv, the output's (MoE modes 0, 1)
     * or D's (2, 3) at s / cdiv; kdiv (token-slots a token) or 1 (the MoE
     * FFN's slot rows), in both kernels. kdiv alone places a slot's gate. */
    int adiv, cdiv;
    /* Work items a band: the tiles of a band run item-fastest, so a wave
     * of CTAs shares the band's gathered rows and a few column tiles of B
     * through L2 (docs/design/moe-grouped-gemm.md); 1: column-fastest. */
    int band, pad_;
} pit_gmm_args;
PIT_ARGS_SIZE(pit_gmm_args, 320);

/* pit_elementwise.cu: [batch, rows, cols] strided views */
typedef struct pit_ew_args {
    PIT_PTR(const pit_u8) x;
    PIT_PTR(pit_u8) y;
    PIT_PTR(const int) ids; /* zero: when set, only rows r whose ids[b * sid + r * ldid] is outside 0..E-1 */
    pit_i64 ldx, sx, ldy, sy, ldid, sid;
    int rows, cols, E, pad;
} pit_ew_args;
PIT_ARGS_SIZE(pit_ew_args, 88);

/* pit_elementwise.cu: the activation of the MoE expert FFN over token-slot
 * rows (pit_op_moe_act; core/backend.h's moe_activation) */
typedef struct pit_act_args {
    PIT_PTR(const pit_u8) u;     /* [rows, 2F] gated, [rows, F] otherwise */
    PIT_PTR(const pit_u8) da;    /* [rows, F]; NULL: the forward */
    PIT_PTR(const float) gates;  /* [rows / k, k]; NULL: 1 */
    PIT_PTR(pit_u8) a;           /* [rows, F]; NULL: not written */
    PIT_PTR(pit_u8) du;          /* like u; backward */
    PIT_PTR(float) dgates;       /* like gates; NULL: not written */
    pit_i64 ldu, ldda, ldg, lda, lddu, lddg;
    int rows, F, k, act;         /* act: a pit_activation */
} pit_act_args;
PIT_ARGS_SIZE(pit_act_args, 112);

/* pit_elementwise.cu: the listed rows of every expert gathered in expert
 * order (pit_op_moe_gather; the MoE weight gradient's operands) */
typedef struct pit_gather_args {
    PIT_PTR(const pit_u8) x;     /* source rows: slot s reads row s / div */
    PIT_PTR(pit_u8) y;           /* [sum of counts, cols] */
    PIT_PTR(const int) counts;   /* [E] */
    PIT_PTR(const int) entries;  /* [E, capacity] slots */
    PIT_PTR(const float) gates;  /* [slots / kdiv, kdiv], row stride ldg; NULL: 1 */
    pit_i64 ldx, ldy, ldg;
    int cols, capacity, div, kdiv, E, pad_;
} pit_gather_args;
PIT_ARGS_SIZE(pit_gather_args, 88);

/* pit_gmm_cc.cu: rows a storing GEMM writes */
typedef struct pit_mark_args {
    PIT_PTR(const int) counts;
    PIT_PTR(const int) entries;
    PIT_PTR(int) mark;
    pit_i64 stride;
    int capacity, kdiv;
} pit_mark_args;
PIT_ARGS_SIZE(pit_mark_args, 40);

#endif /* PIT_ARGS_H */
