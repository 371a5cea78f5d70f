/*
 * cuda_jit.c - the CUDA plug-in's kernel images, for the device's exact
 * architecture, from the first source that has one:
 *   1. the cubins built into the plug-in (cuda_prebuilt.h: nvcc at build
 *      time, the default variants), found by the variant and the digest of
 *      its inputs (options, headers, source);
 *   2. core's disk cache (host->cache_load / cache_store) under the whole
 *      text that determines the cubin (NVRTC version and the inputs:
 *      pit_cuda_variant_key);
 *   3. NVRTC, its cubin then stored in the disk cache.
 * The context's loaded modules come before all three, and a binary that
 * does not load gives way to the next source (common/gpu_modules.c, shared
 * with the HIP plug-in with the launch).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_compile.h"
#include "cuda_internal.h"
#include "cuda_prebuilt.h"

#define CACHE_KIND "cuda"

static pit_status compile_cubin(const pit_cuda_ctx *c, const pit_cuda_variant *v, char **cubin, size_t *size)
{
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
    return PIT_SUCCESS;
}

/* 1 with image filled when the plug-in has v's cubin built in */
static int builtin_image(const pit_cuda_ctx *c, const char *key, const char *text, pit_kernel_image *image)
{
    int count = 0;
    const pit_cuda_prebuilt *table = pit_cuda_prebuilt_table(&count);
    const pit_cuda_prebuilt *e = pit_cuda_prebuilt_find(table, count, c->arch, key, pit_cuda_key_inputs(text));
    if (!e) return 0;
    pit_cuda_host->log_debug("cuda: %s built in for sm_%d (%zu bytes)", key, c->arch, (size_t)(e->end - e->data));
    image->data = e->data;
    image->origin = PIT_IMAGE_BUILTIN;
    return 1;
}

/* 1 with image filled when the disk cache has v's cubin */
static int disk_cache_image(const char *key, const char *text, pit_kernel_image *image)
{
    const pit_host *host = pit_cuda_host;
    size_t size = 0;
    char *cubin = host->cache_load ? host->cache_load(CACHE_KIND, text, &size) : NULL;
    if (!cubin) return 0;
    host->log_debug("cuda: %s from the disk cache", key);
    image->data = image->owned = cubin;
    image->origin = PIT_IMAGE_DISK_CACHE;
    return 1;
}

pit_status pit_vendor_kernel_image(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *key,
                                   pit_kernel_image *image)
{
    const pit_host *host = pit_cuda_host;
    char *text = pit_cuda_variant_key(v, c->arch);
    if (!text) return host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a kernel's key");
    if ((image->after < PIT_IMAGE_BUILTIN && builtin_image(c, key, text, image)) ||
        (image->after < PIT_IMAGE_DISK_CACHE && disk_cache_image(key, text, image))) {
        free(text);
        return PIT_SUCCESS;
    }
    /* the disk cache's cubin did not load: replace it */
    if (image->after == PIT_IMAGE_DISK_CACHE && host->cache_drop) host->cache_drop(CACHE_KIND, text);
    char *cubin = NULL;
    size_t size = 0;
    pit_status st = compile_cubin(c, v, &cubin, &size);
    if (st == PIT_SUCCESS && host->cache_store) host->cache_store(CACHE_KIND, text, cubin, size);
    free(text);
    image->data = image->owned = cubin;
    image->origin = PIT_IMAGE_COMPILED;
    return st;
}
