/*
 * prebuilt_defaults.c - the default variants of an architecture
 * (prebuilt_defaults.h).
 */
#include "prebuilt_defaults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select.h"

typedef struct variant_set {
    pit_cuda_variant *v;
    int count, cap, failed;
} variant_set;

static int same_variant(const pit_cuda_variant *a, const pit_cuda_variant *b)
{
    char la[PIT_CUDA_LABEL_MAX], lb[PIT_CUDA_LABEL_MAX];
    return !strcmp(pit_cuda_variant_label(a, la, sizeof la), pit_cuda_variant_label(b, lb, sizeof lb));
}

/* adds v once */
static void add_variant(variant_set *s, const pit_cuda_variant *v)
{
    for (int i = 0; i < s->count; ++i)
        if (same_variant(&s->v[i], v)) return;
    if (s->count == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        pit_cuda_variant *grown = realloc(s->v, (size_t)cap * sizeof *grown);
        if (!grown) {
            s->failed = 1;
            return;
        }
        s->v = grown;
        s->cap = cap;
    }
    s->v[s->count++] = *v;
}

static void add_unless_matmul(const pit_cuda_variant *v, void *user)
{
    if (v->kind != PIT_CUDA_MATMUL) add_variant(user, v);
}

/* The tile database a device of sm_<arch> with no tuned file loads: only
 * the shipped folder, no $PIT_TILEDB, no cache folder. */
static pit_status open_shipped_tiledb(int arch, const char *tiledb_dir, pit_tiledb **db)
{
    if (setenv("PIT_TILEDB_DIR", tiledb_dir, 1) != 0) return PIT_ERR_OUT_OF_MEMORY;
    unsetenv("PIT_TILEDB");
    unsetenv("PIT_CACHE_DIR");
    unsetenv("HOME");
    pit_device_info dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.backend, sizeof dev.backend, "cuda");
    snprintf(dev.vendor, sizeof dev.vendor, "NVIDIA Corporation");
    snprintf(dev.arch, sizeof dev.arch, "sm_%d", arch);
    snprintf(dev.tiledb_family, sizeof dev.tiledb_family, "%s", pit_cuda_tiledb_family(arch));
    return pit_tiledb_open(&dev, db);
}

static int is_gathered_matmul(const pit_tiledb_entry *e, const pit_microtile *mt)
{
    return (e->op == PIT_TILE_MATMUL_K && mt->axis == PIT_AXIS_K) ||
           (e->op == PIT_TILE_MATMUL_M && mt->axis == PIT_AXIS_M);
}

static void add_matmul_variants(variant_set *s, int arch, const pit_tiledb *db)
{
    static const pit_cuda_mm_align aligned = {1, 1, 1, 1};
    int n = 0;
    const pit_tiledb_entry *e = pit_tiledb_entries(db, &n);
    for (int i = 0; i < n; ++i) {
        pit_microtile mts[PIT_MAX_CANDIDATES];
        int nmt = pit_matmul_candidates(PIT_SPARSE_A, e[i].dtype, 4096, 4096, mts, PIT_MAX_CANDIDATES);
        for (int j = 0; j < nmt; ++j) {
            pit_cuda_variant v;
            if (is_gathered_matmul(&e[i], &mts[j]) && pit_tile_fits(&mts[j], &e[i].tile) &&
                pit_cuda_matmul_variant(arch, e[i].dtype, &e[i].tile, &mts[j], &aligned, &v, NULL))
                add_variant(s, &v);
        }
    }
}

pit_cuda_variant *pit_cuda_default_variants(int arch, const char *tiledb_dir, int *count)
{
    variant_set s;
    memset(&s, 0, sizeof s);
    *count = 0;
    pit_cuda_for_each_variant(arch, add_unless_matmul, &s);
    pit_tiledb *db = NULL;
    if (open_shipped_tiledb(arch, tiledb_dir, &db) != PIT_SUCCESS) {
        fprintf(stderr, "the tile database of sm_%d: %s\n", arch, pit_last_error());
        free(s.v);
        return NULL;
    }
    /* a malformed shipped file would quietly shrink the set */
    const char *warnings = pit_tiledb_warnings(db);
    if (warnings[0]) {
        fprintf(stderr, "the tile database of sm_%d: %s\n", arch, warnings);
        s.failed = 1;
    }
    add_matmul_variants(&s, arch, db);
    pit_tiledb_close(db);
    if (s.failed) {
        free(s.v);
        return NULL;
    }
    *count = s.count;
    return s.v;
}

