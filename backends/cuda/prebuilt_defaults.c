/*
 * prebuilt_defaults.c - the default variants of an architecture
 * (prebuilt_defaults.h).
 */
#include "prebuilt_defaults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select.h"

static int same_variant(const pit_cuda_variant *a, const pit_cuda_variant *b)
{
    char la[PIT_CUDA_LABEL_MAX], lb[PIT_CUDA_LABEL_MAX];
    return !strcmp(pit_cuda_variant_label(a, la, sizeof la), pit_cuda_variant_label(b, lb, sizeof lb));
}

/* appends add to v[*count] unless it is there (the room is the caller's) */
static void add_once(pit_cuda_variant *v, int *count, const pit_cuda_variant *add)
{
    for (int i = 0; i < *count; ++i)
        if (same_variant(&v[i], add)) return;
    v[(*count)++] = *add;
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

/* Appends the fused matmul's default variants from db to v[*count], which
 * has room for entries x PIT_MAX_CANDIDATES more. */
static void add_matmul_variants(pit_cuda_variant *v, int *count, int arch, const pit_tiledb *db)
{
    static const pit_cuda_mm_align aligned[] = {{1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}}; /* few_rows: decode */
    int n = 0;
    const pit_tiledb_entry *e = pit_tiledb_entries(db, &n);
    for (int i = 0; i < n; ++i) {
        pit_microtile mts[PIT_MAX_CANDIDATES];
        int nmt = pit_matmul_candidates(PIT_SPARSE_A, e[i].dtype, 4096, 4096, mts, PIT_MAX_CANDIDATES);
        for (int j = 0; j < nmt; ++j) {
            for (int a = 0; a < 2; ++a) {
                pit_cuda_variant m;
                if (is_gathered_matmul(&e[i], &mts[j]) && pit_tile_fits(&mts[j], &e[i].tile) &&
                    pit_cuda_matmul_variant(arch, e[i].dtype, &e[i].tile, &mts[j], &aligned[a], &m, NULL))
                    add_once(v, count, &m);
            }
        }
    }
}

pit_cuda_variant *pit_cuda_default_variants(int arch, const char *tiledb_dir, int *count)
{
    *count = 0;
    pit_tiledb *db = NULL;
    if (open_shipped_tiledb(arch, tiledb_dir, &db) != PIT_SUCCESS) {
        fprintf(stderr, "the tile database of sm_%d: %s\n", arch, pit_last_error());
        return NULL;
    }
    /* a malformed shipped file would quietly shrink the set */
    const char *warnings = pit_tiledb_warnings(db);
    int ntable = 0, nentries = 0;
    pit_cuda_variant *table = warnings[0] ? NULL : pit_cuda_variant_list(arch, &ntable);
    pit_tiledb_entries(db, &nentries);
    pit_cuda_variant *v = table ? malloc(((size_t)ntable + (size_t)nentries * PIT_MAX_CANDIDATES) * sizeof *v) : NULL;
    if (warnings[0]) fprintf(stderr, "the tile database of sm_%d: %s\n", arch, warnings);
    else if (!v) fprintf(stderr, "default variants of sm_%d: out of memory\n", arch);
    for (int i = 0; v && i < ntable; ++i)
        if (table[i].kind != PIT_CUDA_MATMUL) add_once(v, count, &table[i]);
    if (v) add_matmul_variants(v, count, arch, db);
    free(table);
    pit_tiledb_close(db);
    return v;
}
