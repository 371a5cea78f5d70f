/*
 * cuda_jit.c - the CUDA plug-in's kernel images: NVRTC for the device's
 * exact architecture, kept in core's disk cache (host->cache_load /
 * cache_store) under the whole text that determines the cubin (NVRTC
 * version, options, headers, source: pit_cuda_variant_key). Loading, the
 * per-context cache, the retry of a cached cubin that does not load, and the
 * launch are shared with the HIP plug-in (common/gpu_modules.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_compile.h"
#include "cuda_internal.h"

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

pit_status pit_vendor_kernel_image(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *key,
                                   pit_kernel_image *image)
{
    const pit_host *host = pit_cuda_host;
    char *text = pit_cuda_variant_key(v, c->arch);
    if (!text) return host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a kernel's key");
    char *cubin = NULL;
    size_t size = 0;
    if (image->fresh && host->cache_drop)
        host->cache_drop(CACHE_KIND, text);
    else if (!image->fresh && host->cache_load)
        cubin = host->cache_load(CACHE_KIND, text, &size);
    image->from_disk_cache = cubin != NULL;
    pit_status st = PIT_SUCCESS;
    if (cubin) {
        host->log_debug("cuda: %s from the disk cache", key);
    } else {
        st = compile_cubin(c, v, &cubin, &size);
        if (st == PIT_SUCCESS && host->cache_store) host->cache_store(CACHE_KIND, text, cubin, size);
    }
    free(text);
    image->data = image->owned = cubin;
    return st;
}
