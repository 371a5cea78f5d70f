/*
 * cuda_compile.c - NVRTC: one variant's source + -D defines -> cubin.
 */
#include "cuda_compile.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTIONS 32

uint64_t pit_fnv1a(uint64_t h, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t pit_cuda_variant_hash(const pit_cuda_variant *v, int arch)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    const char *src = pit_cuda_kernel_source(v->kind);
    const char *name = pit_cuda_kernel_name(v->kind);
    char defines[512];
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    uint64_t h = PIT_FNV_SEED;
    h = pit_fnv1a(h, src, strlen(src));
    for (int i = 0; i < nh; ++i) h = pit_fnv1a(h, hsrc[i], strlen(hsrc[i]));
    h = pit_fnv1a(h, name, strlen(name));
    pit_cuda_variant_defines(v, defines, sizeof defines);
    h = pit_fnv1a(h, defines, strlen(defines));
    int tail[3] = {arch, major, minor};
    return pit_fnv1a(h, tail, sizeof tail);
}

/* the program's log (malloc'd), NULL when empty */
static char *program_log(nvrtcProgram prog)
{
    size_t log_size = 0;
    char *text = NULL;
    if (prog && nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
        text = malloc(log_size);
        if (text && nvrtcGetProgramLog(prog, text) != NVRTC_SUCCESS) text[0] = 0;
    }
    return text;
}

/* "what: log" into a malloc'd string */
static char *make_log(const char *what, nvrtcResult r, nvrtcProgram prog)
{
    char *text = program_log(prog);
    size_t n = strlen(what) + 64 + (text ? strlen(text) : 0);
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s: %d %s%s%s", what, (int)r, nvrtcGetErrorString(r),
                      text ? "\n" : "", text ? text : "");
    free(text);
    return out;
}


int pit_cuda_compile(const pit_cuda_variant *v, int arch, char **cubin, size_t *size, char **log)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    char defines[512], archopt[64];
    const char *opts[MAX_OPTIONS];
    nvrtcProgram prog = NULL;
    *cubin = NULL;
    *size = 0;
    if (log) *log = NULL;

    /* sm_90 gets sm_90a: the Hopper-only instructions (wgmma); the JIT
     * compiles for the device's exact architecture, which runs it */
    snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d%s", arch, arch == 90 ? "a" : "");
    int n = 0;
    opts[n++] = archopt;
    opts[n++] = "--std=c++17";
    pit_cuda_variant_defines(v, defines, sizeof defines);
    n += pit_cuda_split_options(defines, opts + n, MAX_OPTIONS - n);

    nvrtcResult r = nvrtcCreateProgram(&prog, pit_cuda_kernel_source(v->kind), pit_cuda_kernel_name(v->kind),
                                       nh, hsrc, hname);
    if (r != NVRTC_SUCCESS) {
        if (log) *log = make_log("nvrtcCreateProgram", r, NULL);
        return (int)r;
    }
    r = nvrtcCompileProgram(prog, n, opts);
    if (r != NVRTC_SUCCESS) {
        if (log) *log = make_log("nvrtcCompileProgram", r, prog);
        nvrtcDestroyProgram(&prog);
        return (int)r;
    }
    size_t bytes = 0;
    r = nvrtcGetCUBINSize(prog, &bytes);
    if (r == NVRTC_SUCCESS) {
        *cubin = malloc(bytes ? bytes : 1);
        if (!*cubin) r = NVRTC_ERROR_OUT_OF_MEMORY;
        else r = nvrtcGetCUBIN(prog, *cubin);
    }
    if (r != NVRTC_SUCCESS) {
        if (log) *log = make_log("nvrtcGetCUBIN", r, prog);
        free(*cubin);
        *cubin = NULL;
        nvrtcDestroyProgram(&prog);
        return (int)r;
    }
    *size = bytes;
    if (log) *log = program_log(prog);
    nvrtcDestroyProgram(&prog);
    return 0;
}

const char *pit_cuda_wgmma_serialised(const char *log)
{
    return log ? strstr(log, "wgmma.mma_async instructions are serialized") : NULL;
}
