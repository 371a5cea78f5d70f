/*
 * core/pit/index.h - the block index of a pattern tensor (pit/index.c): the
 * index of the operators that take a mask or route tokens, built on the device.
 */
#ifndef PIT_CORE_INDEX_H
#define PIT_CORE_INDEX_H

#include "internal.h"

/* ---- block index of a pattern --------------------------------------------- */
/* Detects the non-zero tile.rows x tile.cols blocks of mask and builds the
 * axis-K index of the [batch, rows, cols] output: group = batch * row-blocks +
 * row-block, entries = column-block indices. A rank-3 mask gets one set of
 * groups per batch; a rank-2 mask (the same for every batch) is detected once
 * and its index has one set (groups == groups_per_batch) shared by every batch.
 * Buffers come from the workspace under `key`. flag_full 1 lets the backend
 * mark the entries of all-non-zero blocks with PIT_ENTRY_FULL (backend.h):
 * only for an index that goes to nothing but backend.attention_sparse. */
pit_status pit_index_pattern(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx);
/* The first half of pit_index_pattern: the index allocated and the view of
 * the mask that detect reads, for a backend call that detects itself
 * (backend.attention_detect). */
pit_status pit_index_prepare(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx,
                             pit_tdesc *view);
/* Index buffers for groups x capacity entries (workspace under key). */
pit_status pit_index_alloc(pit_context *ctx, void *bs, const char *key, pit_microtile tile,
                           int64_t batch, int64_t groups_per_batch, int64_t capacity,
                           pit_index *idx);
/* Reads the counts back: the largest count and the sum. */
pit_status pit_index_stats(pit_context *ctx, void *bs, const pit_index *idx,
                           int32_t *max_entries, int64_t *nonzero);
/* How many batches use each group of idx: batch for an index shared by every
 * batch (groups == groups_per_batch), else 1. */
int64_t pit_index_repeat(const pit_index *idx, int64_t batch);
/* Fills the common part of a report for a block-index operator; nonzero is
 * the index's count, repeat what pit_index_repeat says (reports count the
 * micro-tiles of every batch). form: the operator's choice form of
 * choice.h, whose two %d are the micro-tile's rows and columns. */
void pit_index_report(pit_report *r, const pit_index *idx, int64_t nonzero, int64_t repeat,
                      const char *form);

#endif /* PIT_CORE_INDEX_H */
