/*
 * hip_kernels.c - kernels of the HIP backend: the code objects embedded at
 * build time for the device's arch, else hiprtc (hip_rtc.c), cached in
 * memory per context; and the launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_code_objects.h"
#include "hip_internal.h"

int pit_hip_builtin_count(const char *gfx)
{
    int n = 0;
    for (int i = 0; i < pit_hip_code_object_count; ++i) n += !strcmp(pit_hip_code_objects[i].arch, gfx);
    return n;
}

static const pit_hip_code_object *builtin(const char *gfx, const char *key)
{
    for (int i = 0; i < pit_hip_code_object_count; ++i)
        if (!strcmp(pit_hip_code_objects[i].arch, gfx) && !strcmp(pit_hip_code_objects[i].key, key))
            return &pit_hip_code_objects[i];
    return NULL;
}

/* Module -> function, and the dynamic shared memory it declares. */
static pit_status load_kernel(const pit_hip_ctx *c, const pit_cuda_variant *v, const void *image, pit_hip_kernel *k)
{
    const char *name = pit_cuda_kernel_name(v->kind);
    HIP_CHECK(pit_hip.ModuleLoadData(&k->module, image), "hipModuleLoadData");
    HIP_CHECK(pit_hip.ModuleGetFunction(&k->fn, k->module, name), "hipModuleGetFunction");
    hipDeviceptr_t global = NULL;
    size_t bytes = 0;
    k->smem_bytes = 0;
    if (pit_hip.ModuleGetGlobal(&global, &bytes, k->module, "pit_smem_bytes") == hipSuccess && bytes == 4)
        HIP_CHECK(pit_hip.MemcpyDtoH(&k->smem_bytes, global, 4), "hipMemcpyDtoH(pit_smem_bytes)");
    if (k->smem_bytes > c->smem_max)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "hip: %s needs %d bytes of shared memory (LDS); the device has %d",
                                   name, k->smem_bytes, c->smem_max);
    return PIT_SUCCESS;
}

static pit_status build_kernel(void *ctx, const pit_cuda_variant *v, const char *key, pit_kernel_link **out)
{
    pit_hip_ctx *c = ctx;
    const pit_hip_code_object *co = builtin(c->gfx, key);
    char *code = NULL;
    if (co) {
        pit_hip_host->log_debug("hip: built-in code object for %s: %s", c->gfx, key);
    } else if (!pit_hiprtc.CreateProgram) {
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED,
                                   "hip: kernel %s has no built-in code object for %s and no hiprtc was found to "
                                   "compile it", key, c->gfx);
    } else {
        size_t size = 0;
        pit_status st = pit_hip_rtc_compile(c->gfx, v, key, &code, &size);
        if (st != PIT_SUCCESS) return st;
    }
    pit_hip_kernel *k = calloc(1, sizeof *k);
    pit_status st = PIT_SUCCESS;
    if (!k)
        st = pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a kernel");
    else
        st = load_kernel(c, v, co ? (const void *)co->data : (const void *)code, k);
    free(code);
    if (st != PIT_SUCCESS) {
        if (k && k->module) pit_hip.ModuleUnload(k->module);
        free(k);
        return st;
    }
    *out = &k->link;
    return PIT_SUCCESS;
}

static void release_kernel(pit_kernel_link *l)
{
    pit_hip_kernel *k = (pit_hip_kernel *)l; /* link is the first member */
    pit_hip.ModuleUnload(k->module);
    free(k);
}

pit_status pit_hip_get_kernel(pit_hip_ctx *c, const pit_cuda_variant *v, pit_hip_kernel **out)
{
    pit_kernel_link *l = NULL;
    pit_status st = pit_kernel_cache_get(pit_hip_host, &c->lock, &c->kernels, c, v, build_kernel,
                                         release_kernel, &l);
    *out = (pit_hip_kernel *)l;
    return st;
}

void pit_hip_free_kernels(pit_hip_ctx *c)
{
    pit_kernel_cache_clear(&c->kernels, release_kernel);
}

pit_status pit_hip_launch(const pit_hip_kernel *k, hipStream_t s, unsigned gx, unsigned gy, unsigned gz,
                          unsigned threads, void *args, const char *what)
{
    char name[256];
    what = pit_hip_call_name(what, name, sizeof name);
    if (gx == 0 || gy == 0 || gz == 0) return PIT_SUCCESS;
    if (gy > 65535 || gz > 65535)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "%s: grid %ux%ux%u exceeds the device's limits", what, gx,
                                   gy, gz);
    void *params[] = {args};
    HIP_CHECK(pit_hip.ModuleLaunchKernel(k->fn, gx, gy, gz, threads, 1, 1, (unsigned)k->smem_bytes, s, params, NULL),
              what);
    return PIT_SUCCESS;
}
