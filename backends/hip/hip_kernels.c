/*
 * hip_kernels.c - the HIP plug-in's kernel images: the code objects
 * embedded at build time for the device's arch, else (none, or one that
 * does not load) hiprtc (hip_rtc.c).
 * Loading, the per-context cache and the launch are shared with the CUDA
 * plug-in (backends/cuda/common/gpu_modules.c).
 */
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

pit_status pit_vendor_kernel_image(pit_hip_ctx *c, const pit_cuda_variant *v, const char *key,
                                   pit_kernel_image *image)
{
    const pit_hip_code_object *co = image->after < PIT_IMAGE_BUILTIN ? builtin(c->vendor.gfx, key) : NULL;
    if (co) {
        pit_hip_host->log_debug("hip: built-in code object for %s: %s", c->vendor.gfx, key);
        image->data = co->data;
        image->origin = PIT_IMAGE_BUILTIN;
        return PIT_SUCCESS;
    }
    if (!pit_hiprtc.CreateProgram)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED,
                                   "hip: kernel %s has no built-in code object for %s%s and no hiprtc was found "
                                   "to compile it", key, c->vendor.gfx,
                                   image->after >= PIT_IMAGE_BUILTIN ? " that loads," : "");
    char *code = NULL;
    size_t size = 0;
    pit_status st = pit_hip_rtc_compile(c->vendor.gfx, v, key, &code, &size);
    image->data = image->owned = code;
    image->origin = PIT_IMAGE_COMPILED;
    return st;
}
