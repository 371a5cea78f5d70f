/*
 * hip_kernels.c - kernels of the HIP backend: the code objects embedded at
 * build time for the device's arch, else hiprtc on the embedded sources
 * (the same sources and -D defines as the CUDA backend's NVRTC path),
 * cached in memory per context; and the launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_code_objects.h"
#include "hip_internal.h"

#define MAX_OPTIONS 32

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

/* Splits the defines string at spaces into options, in place. */
static int split_options(char *defines, const char **opts, int max)
{
    int n = 0;
    char *p = defines;
    while (*p && n < max) {
        while (*p == ' ') *p++ = 0;
        if (!*p) break;
        opts[n++] = p;
        while (*p && *p != ' ') ++p;
    }
    return n;
}

static pit_status rtc_error(const char *what, int r, void *prog, const char *gfx, const char *key)
{
    size_t size = 0;
    char *log = NULL;
    if (prog && pit_hiprtc.GetProgramLogSize(prog, &size) == 0 && size > 1 && (log = malloc(size)) != NULL &&
        pit_hiprtc.GetProgramLog(prog, log) != 0)
        log[0] = 0;
    pit_status st = pit_hip_host->error(PIT_ERR_COMPILE, "hiprtc could not compile %s for %s: %s returned %d%s%s",
                                        key, gfx, what, r, log ? ": " : "", log ? log : "");
    free(log);
    return st;
}

/* hiprtc: one variant for the device's arch, into *code (malloc'd). */
static pit_status rtc_compile(const pit_hip_ctx *c, const pit_cuda_variant *v, const char *key, char **code)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    char defines[512], arch[64];
    const char *opts[MAX_OPTIONS];
    int n = 0;
    snprintf(arch, sizeof arch, "--offload-arch=%s", c->gfx);
    opts[n++] = arch;
    opts[n++] = "-std=c++17";
    opts[n++] = "-O3";
    pit_cuda_variant_defines(v, defines, sizeof defines);
    n += split_options(defines, opts + n, MAX_OPTIONS - n);
    void *prog = NULL;
    int r = pit_hiprtc.CreateProgram(&prog, pit_cuda_kernel_source(v->kind), pit_cuda_kernel_name(v->kind), nh,
                                     hsrc, hname);
    if (r != 0) return rtc_error("hiprtcCreateProgram", r, NULL, c->gfx, key);
    pit_status st = PIT_SUCCESS;
    size_t size = 0;
    if ((r = pit_hiprtc.CompileProgram(prog, n, opts)) != 0)
        st = rtc_error("hiprtcCompileProgram", r, prog, c->gfx, key);
    else if ((r = pit_hiprtc.GetCodeSize(prog, &size)) != 0 || size == 0)
        st = rtc_error("hiprtcGetCodeSize", r, prog, c->gfx, key);
    else if (!(*code = malloc(size)))
        st = pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a %zu-byte code object", size);
    else if ((r = pit_hiprtc.GetCode(prog, *code)) != 0) {
        free(*code);
        *code = NULL;
        st = rtc_error("hiprtcGetCode", r, prog, c->gfx, key);
    }
    pit_hiprtc.DestroyProgram(&prog);
    if (st == PIT_SUCCESS) pit_hip_host->log_debug("hip: hiprtc compiled %s for %s (%zu bytes)", key, c->gfx, size);
    return st;
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

static pit_status build_kernel(pit_hip_ctx *c, const pit_cuda_variant *v, const char *key, pit_hip_kernel **out)
{
    const pit_hip_code_object *co = builtin(c->gfx, key);
    char *code = NULL;
    if (co) {
        pit_hip_host->log_debug("hip: built-in code object for %s: %s", c->gfx, key);
    } else if (!pit_hiprtc.CreateProgram) {
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED,
                                   "hip: kernel %s has no built-in code object for %s and no hiprtc was found to "
                                   "compile it", key, c->gfx);
    } else {
        pit_status st = rtc_compile(c, v, key, &code);
        if (st != PIT_SUCCESS) return st;
    }
    pit_hip_kernel *k = calloc(1, sizeof *k);
    char *key_copy = strdup(key);
    pit_status st = PIT_SUCCESS;
    if (!k || !key_copy)
        st = pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a kernel");
    else
        st = load_kernel(c, v, co ? (const void *)co->data : (const void *)code, k);
    free(code);
    if (st != PIT_SUCCESS) {
        if (k && k->module) pit_hip.ModuleUnload(k->module);
        free(k);
        free(key_copy);
        return st;
    }
    k->key = key_copy;
    *out = k;
    return PIT_SUCCESS;
}

pit_status pit_hip_get_kernel(pit_hip_ctx *c, const pit_cuda_variant *v, pit_hip_kernel **out)
{
    char key[600], defines[512];
    snprintf(key, sizeof key, "%s %s", pit_cuda_kernel_name(v->kind),
             pit_cuda_variant_defines(v, defines, sizeof defines));
    pthread_mutex_lock(&c->lock);
    for (pit_hip_kernel *k = c->kernels; k; k = k->next) {
        if (!strcmp(k->key, key)) {
            pthread_mutex_unlock(&c->lock);
            *out = k;
            return PIT_SUCCESS;
        }
    }
    /* built under the lock: two threads never build the same kernel */
    pit_hip_kernel *k = NULL;
    pit_status st = build_kernel(c, v, key, &k);
    if (st == PIT_SUCCESS) {
        k->next = c->kernels;
        c->kernels = k;
        *out = k;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void pit_hip_free_kernels(pit_hip_ctx *c)
{
    pit_hip_kernel *k = c->kernels;
    while (k) {
        pit_hip_kernel *next = k->next;
        pit_hip.ModuleUnload(k->module);
        free(k->key);
        free(k);
        k = next;
    }
    c->kernels = NULL;
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
