/*
 * core/ops/attention.h - what pit_attention (attention.c, attention_run.c)
 * and pit_sparse_attention (sparse_attention.c, its wrapper and the path of
 * backends without attention_ex) share: one validated call.
 */
#ifndef PIT_CORE_ATTENTION_H
#define PIT_CORE_ATTENTION_H

#include "ops.h"

#define ATTENTION_DEFAULT_BLOCK 64

/* A validated attention call. Q [B, Hq, Lq, D], K [B, Hkv, Lk, D],
 * V [B, Hkv, Lk, Dv], O [B, Hq, Lq, Dv] (rank 4, any stride order); masks as
 * the user gave them (rank 2..4, leading dimensions of extent Hq / B or 1,
 * mergeable). */
typedef struct ops_attention {
    const char *fn;                /* the public function, for messages */
    pit_tdesc Q, K, V, O;
    const pit_tdesc *mask;         /* NULL: none */
    const pit_tdesc *block_mask;   /* NULL: none */
    const pit_tdesc *lse;          /* NULL: not wanted */
    int32_t block_q, block_k;      /* block_mask's block */
    float scale;                   /* resolved (never 0 for "automatic") */
    int causal;                    /* as asked (messages); folded into window_right */
    int64_t window_left, window_right; /* -1: no bound */
    pit_microtile tile;            /* the hint; rows 0: automatic */
} ops_attention;

/* The leading dimensions of an attention mask of rank 2 ([L, L]), 3
 * ([heads, L, L]) or 4 ([batch, heads, L, L]): their extents (1 where the
 * mask serves every batch or head) and strides (0 there). */
typedef struct ops_mask_lead {
    int64_t batch, heads;
    int64_t batch_stride, head_stride;
} ops_mask_lead;

ops_mask_lead ops_attention_lead(const pit_tdesc *m);
/* The rank-3 view [batch * heads, rows, cols] of a mask whose leading
 * dimensions merge (validation made sure). */
pit_tdesc ops_attention_mask_view3(const pit_tdesc *m);

/* Runs a validated call: the backend's attention_ex where it has one (a
 * call that reduces to attention_sparse first tries that fused kernel where
 * the backend detects inside it: attention_detect), else the calls that
 * reduce to attention_sparse (ops_attention_reduced), else
 * PIT_ERR_UNSUPPORTED naming the backend and the option. An element mask's
 * micro-tile that the backend refuses is halved down to 16. */
pit_status ops_attention_run(pit_context *ctx, void *bs, const ops_attention *a,
                             pit_report *report);

/* The backward of a validated call (a->O and a->lse are its inputs): the
 * backend's attention_backward on the forward's index, or
 * PIT_ERR_UNSUPPORTED naming the backend. NULL gradients are skipped. */
pit_status ops_attention_backward_run(pit_context *ctx, void *bs, const ops_attention *a,
                                      const pit_tdesc *dO, const pit_tdesc *dQ,
                                      const pit_tdesc *dK, const pit_tdesc *dV);

/* A backend without attention_ex (sparse_attention.c): PIT_ERR_UNSUPPORTED,
 * naming the backend and the option, unless the call reduces to
 * attention_sparse (an element mask and no other condition, Lq == Lk, Hq ==
 * Hkv, no lse, square micro-tile). */
pit_status ops_attention_reducible(const pit_context *ctx, const ops_attention *a);
/* 1 when the call reduces to attention_sparse (the same conditions). */
int ops_attention_reduces(const ops_attention *a);
/* The reduced call with block x block micro-tiles: attention_sparse (or
 * attention_detect), else with compose core composes SDDMM, softmax and
 * the sparse product (without: PIT_ERR_UNSUPPORTED); one call for every
 * batch and head where the views and the mask merge into rank 3, else one
 * a batch, else one a head. */
pit_status ops_attention_reduced(pit_context *ctx, void *bs, const ops_attention *a,
                                 int32_t block, int compose, pit_report *report);

#endif /* PIT_CORE_ATTENTION_H */
