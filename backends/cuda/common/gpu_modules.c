/*
 * gpu_modules.c - kernels as loaded modules, for the CUDA and HIP plug-ins
 * alike: the vendor's code image of a variant (NVRTC and the disk cache in
 * cuda_jit.c; built-in code objects or hiprtc in hip_kernels.c) loaded into
 * a module, cached per context (pit_kernel_cache_get: found by the
 * variant's bytes, else by its key, kernel name + defines), and launched.
 * A binary that does not load (a built-in one the driver cannot take,
 * another kernel's under this key in the disk cache) gives way to the next
 * source, down to a fresh compile.
 */
#include <stdlib.h>

#include "cuda_internal.h"

/* Module -> function, and the dynamic shared memory it declares. */
static pit_status load_kernel(const pit_cuda_ctx *c, const pit_cuda_variant *v, const void *image,
                              pit_cuda_kernel *k)
{
    const char *name = pit_cuda_kernel_name(v->kind);
    CU_CHECK(pit_cu.ModuleLoadData(&k->module, image), PIT_CALL(ModuleLoadData));
    CU_CHECK(pit_cu.ModuleGetFunction(&k->fn, k->module, name), PIT_CALL(ModuleGetFunction));
    CUdeviceptr global = 0;
    size_t bytes = 0;
    k->smem_bytes = 0;
    if (pit_cu.ModuleGetGlobal(&global, &bytes, k->module, "pit_smem_bytes") == CUDA_SUCCESS && bytes == 4)
        CU_CHECK(pit_cu.MemcpyDtoH(&k->smem_bytes, global, 4), PIT_CALL(MemcpyDtoH) "(pit_smem_bytes)");
    if (k->smem_bytes > c->smem_optin)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED,
                                    PIT_VENDOR_NAME ": %s needs %d bytes of shared memory; the device has %d", name,
                                    k->smem_bytes, c->smem_optin);
    /* above 48 KB a kernel must ask for its shared memory (CUDA) */
    if (k->smem_bytes > 48 * 1024)
        CU_CHECK(pit_cu.FuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem_bytes),
                 PIT_CALL(FuncSetAttribute) "(max dynamic shared memory)");
    return PIT_SUCCESS;
}

/* Gets v's image and loads it into k; on failure k holds no module. */
static pit_status load_image(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *key, pit_kernel_image *image,
                             pit_cuda_kernel *k)
{
    pit_status st = pit_vendor_kernel_image(c, v, key, image);
    if (st == PIT_SUCCESS) st = load_kernel(c, v, image->data, k);
    free(image->owned);
    image->owned = NULL;
    if (st != PIT_SUCCESS && k->module) {
        pit_cu.ModuleUnload(k->module);
        k->module = NULL;
    }
    return st;
}

static const char *origin_name(pit_image_origin o)
{
    return o == PIT_IMAGE_BUILTIN ? "built-in" : o == PIT_IMAGE_DISK_CACHE ? "disk cache's" : "compiled";
}

static pit_status build_kernel(void *ctx, const pit_cuda_variant *v, const char *key, pit_kernel_link **out)
{
    pit_cuda_ctx *c = ctx;
    pit_cuda_kernel *k = calloc(1, sizeof *k);
    if (!k) return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, PIT_VENDOR_NAME ": out of host memory for a kernel");
    pit_kernel_image image = {0};
    pit_status st = load_image(c, v, key, &image, k);
    /* a device limit (UNSUPPORTED) is no fault of the binary */
    while (st != PIT_SUCCESS && st != PIT_ERR_UNSUPPORTED &&
           (image.origin == PIT_IMAGE_BUILTIN || image.origin == PIT_IMAGE_DISK_CACHE)) {
        pit_cuda_host->log_debug(PIT_VENDOR_NAME ": the %s binary of %s does not load: trying the next source",
                                 origin_name(image.origin), key);
        pit_kernel_image next = {.after = image.origin};
        image = next;
        st = load_image(c, v, key, &image, k);
    }
    if (st != PIT_SUCCESS) {
        free(k);
        return st;
    }
    *out = &k->link;
    return PIT_SUCCESS;
}

static void release_kernel(pit_kernel_link *l)
{
    pit_cuda_kernel *k = (pit_cuda_kernel *)l; /* link is the first member */
    pit_cu.ModuleUnload(k->module);
    free(k);
}

pit_status pit_cuda_get_kernel(pit_cuda_ctx *c, const pit_cuda_variant *v, pit_cuda_kernel **out)
{
    pit_kernel_link *l = NULL;
    pit_status st = pit_kernel_cache_get(pit_cuda_host, &c->lock, &c->kernels, c, v, build_kernel,
                                         release_kernel, &l);
    *out = (pit_cuda_kernel *)l;
    return st;
}

void pit_cuda_free_kernels(pit_cuda_ctx *c)
{
    pit_kernel_cache_clear(&c->kernels, release_kernel);
}

pit_status pit_cuda_launch(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                           unsigned threads, void *args, const char *what)
{
    if (gx == 0 || gy == 0 || gz == 0) return PIT_SUCCESS;
    if (gy > 65535 || gz > 65535)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "%s: grid %ux%ux%u exceeds the device's limits", what,
                                    gx, gy, gz);
    void *params[] = {args};
    CU_CHECK(pit_cu.LaunchKernel(k->fn, gx, gy, gz, threads, 1, 1, (unsigned)k->smem_bytes, s, params, NULL),
             what);
    return PIT_SUCCESS;
}
