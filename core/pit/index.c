/*
 * core/pit/index.c - the block index of a pattern tensor, built on the device
 * by the backend's detection, and what the operators read back from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* ---- block index ------------------------------------------------------------------- */

static int32_t blocks_of(int64_t n, int32_t side)
{
    return (int32_t)((n + side - 1) / side);
}

pit_status pit_index_alloc(pit_context *ctx, void *bs, const char *key, pit_microtile tile,
                           int64_t batch, int64_t groups_per_batch, int64_t capacity,
                           pit_index *idx)
{
    if (batch * groups_per_batch * (capacity > 0 ? capacity : 1) > INT32_MAX)
        return pit_error(PIT_ERR_UNSUPPORTED, "micro-tile %dx%d: index of %lld x %lld groups and "
                         "%lld entries each exceeds 2^31", tile.rows, tile.cols, (long long)batch,
                         (long long)groups_per_batch, (long long)capacity);
    memset(idx, 0, sizeof *idx);
    idx->tile = tile;
    idx->groups_per_batch = (int32_t)groups_per_batch;
    idx->groups = (int32_t)(batch * groups_per_batch);
    idx->capacity = (int32_t)capacity;
    size_t groups = (size_t)(idx->groups > 0 ? idx->groups : 1);
    size_t cap = (size_t)(capacity > 0 ? capacity : 1);
    char k[64];
    snprintf(k, sizeof k, "%s.entries", key);
    PIT_TRY(pit_workspace_get(ctx, bs, k, groups * cap * 4, &idx->entries));
    snprintf(k, sizeof k, "%s.counts", key);
    if (ctx->be->mem_is_pointer) {
        /* total right after the counts: detection zeroes both with one memset */
        PIT_TRY(pit_workspace_get(ctx, bs, k, groups * 4 + 4, &idx->counts));
        idx->total = (char *)idx->counts + groups * 4;
        return PIT_SUCCESS;
    }
    PIT_TRY(pit_workspace_get(ctx, bs, k, groups * 4, &idx->counts));
    snprintf(k, sizeof k, "%s.total", key);
    return pit_workspace_get(ctx, bs, k, 4, &idx->total);
}

pit_status pit_index_prepare(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx,
                             pit_tdesc *view)
{
    if (!ctx->be->detect)
        return ops_unsupported(ctx, "detect");
    int64_t rows = ops_rows(mask), cols = ops_cols(mask);
    /* A rank-2 mask is the same for every batch: it is indexed once, and the
     * index (groups == groups_per_batch) is shared by all batches, which every
     * operator entry of the backend contract accepts. A rank-3 mask gets one
     * set of groups per batch. */
    int64_t ibatch = mask->rank == 3 ? batch : 1;
    PIT_TRY(pit_index_alloc(ctx, bs, key, tile, ibatch, blocks_of(rows, tile.rows),
                            blocks_of(cols, tile.cols), idx));
    idx->flag_full = flag_full ? 1 : 0;
    *view = ops_view3(mask, ibatch);
    return PIT_SUCCESS;
}

pit_status pit_index_pattern(pit_context *ctx, void *bs, const char *key, const pit_tdesc *mask,
                             int64_t batch, pit_microtile tile, int flag_full, pit_index *idx)
{
    pit_tdesc view;
    PIT_TRY(pit_index_prepare(ctx, bs, key, mask, batch, tile, flag_full, idx, &view));
    return ctx->be->detect(ctx->bctx, bs, &view, idx, 1);
}

pit_status pit_index_stats(pit_context *ctx, void *bs, const pit_index *idx,
                           int32_t *max_entries, int64_t *nonzero)
{
    *max_entries = 0;
    *nonzero = 0;
    if (idx->groups <= 0)
        return PIT_SUCCESS;
    int32_t *counts = malloc((size_t)idx->groups * sizeof(int32_t));
    if (!counts)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "index statistics: out of host memory");
    pit_status s = ctx->be->mem_read(ctx->bctx, bs, idx->counts, 0, counts,
                                     (size_t)idx->groups * sizeof(int32_t));
    for (int32_t g = 0; s == PIT_SUCCESS && g < idx->groups; g++) {
        int32_t c = counts[g] < idx->capacity ? counts[g] : idx->capacity;
        *nonzero += c;
        if (c > *max_entries)
            *max_entries = c;
    }
    free(counts);
    return s;
}

int64_t pit_index_repeat(const pit_index *idx, int64_t batch)
{
    return batch > 1 && idx->groups == idx->groups_per_batch ? batch : 1;
}

void pit_index_report(pit_report *r, const pit_index *idx, int64_t nonzero, int64_t repeat,
                      const char *form)
{
    if (!r)
        return;
    r->microtile = idx->tile;
    r->nonzero_tiles = nonzero * repeat;
    r->total_tiles = (int64_t)idx->groups * idx->capacity * repeat;
    r->skipped_compute = nonzero == 0;
    snprintf(r->choice, sizeof r->choice, form, idx->tile.rows, idx->tile.cols);
}
