/*
 * cuda_jit.c - the CUDA plug-in's kernel images: NVRTC for the device's
 * exact architecture, kept on disk under host->cache_dir() (key: hash of
 * sources + defines + arch + NVRTC version). Disk entries carry a
 * checksum; a corrupt one is recompiled. Loading, the per-context cache and
 * the launch are shared with the HIP plug-in (common/gpu_modules.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_compile.h"
#include "cuda_internal.h"

#define CACHE_MAGIC "PITCUBN1"

typedef struct cache_header {
    char magic[8];
    uint64_t size;
    uint64_t checksum;
} cache_header;

static void cache_path(const pit_cuda_variant *v, int arch, char *path, size_t size)
{
    const char *dir = pit_cuda_host->cache_dir ? pit_cuda_host->cache_dir() : NULL;
    if (!dir) {
        path[0] = 0;
        return;
    }
    snprintf(path, size, "%s/cuda-sm%d-%016llx.cubin", dir, arch,
             (unsigned long long)pit_cuda_variant_hash(v, arch));
}

/* The cubin stored at path, or NULL when missing or corrupt. */
static char *cache_read(const char *path, size_t *size)
{
    FILE *f = path[0] ? pit_cuda_host->open_cache_entry(path) : NULL;
    if (!f) return NULL;
    cache_header h;
    char *data = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, CACHE_MAGIC, 8) && h.size > 0 &&
        h.size < (1u << 30)) {
        data = malloc(h.size);
        if (data && (fread(data, 1, h.size, f) != h.size || fgetc(f) != EOF ||
                     pit_fnv1a(PIT_FNV_SEED, data, h.size) != h.checksum)) {
            pit_cuda_host->log_debug("cuda: kernel cache entry %s is corrupt: recompiling", path);
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    if (data) *size = h.size;
    return data;
}

/* Written to a temporary file and renamed, so readers never see half. */
static void cache_write(const char *path, const char *data, size_t size)
{
    if (!path[0]) return;
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    cache_header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.size = size;
    h.checksum = pit_fnv1a(PIT_FNV_SEED, data, size);
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static pit_status cubin_for(const pit_cuda_ctx *c, const pit_cuda_variant *v, char **cubin, size_t *size)
{
    char path[1024];
    cache_path(v, c->arch, path, sizeof path);
    *cubin = cache_read(path, size);
    if (*cubin) {
        pit_cuda_host->log_debug("cuda: kernel from disk cache %s", path);
        return PIT_SUCCESS;
    }
    char *log = NULL;
    char defines[512];
    pit_cuda_variant_defines(v, defines, sizeof defines);
    int r = pit_cuda_compile(v, c->arch, cubin, size, &log);
    if (r != 0) {
        pit_status st = pit_cuda_host->error(PIT_ERR_COMPILE, "NVRTC could not compile %s (%s) for sm_%d: %s",
                                             pit_cuda_kernel_name(v->kind), defines, c->arch,
                                             log ? log : "no log");
        free(log);
        return st;
    }
    if (pit_cuda_wgmma_serialised(log))
        pit_cuda_host->log_debug("cuda: %s (%s): ptxas serialised its wgmma's (slow): %s", pit_cuda_kernel_name(v->kind),
                                 defines, log);
    free(log);
    pit_cuda_host->log_debug("cuda: compiled %s %s for sm_%d (%zu bytes)", pit_cuda_kernel_name(v->kind),
                             defines, c->arch, *size);
    cache_write(path, *cubin, *size);
    return PIT_SUCCESS;
}

pit_status pit_vendor_kernel_image(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *key,
                                   pit_kernel_image *image)
{
    (void)key;
    char *cubin = NULL;
    size_t size = 0;
    pit_status st = cubin_for(c, v, &cubin, &size);
    image->data = image->owned = cubin;
    return st;
}
