/*
 * cuda_compile.c - NVRTC: one variant's source + -D defines -> cubin.
 */
#include "cuda_compile.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTIONS PIT_CUDA_MAX_OPTIONS

int pit_cuda_compile_options(const pit_cuda_variant *v, int arch, char *archopt, size_t archopt_size,
                             char *defines, size_t defines_size, const char **opts, int max)
{
    /* sm_90 gets sm_90a: the Hopper-only instructions (wgmma); the JIT
     * compiles for the device's exact architecture, which runs it */
    snprintf(archopt, archopt_size, "--gpu-architecture=sm_%d%s", arch, arch == 90 ? "a" : "");
    int n = 0;
    if (max < 2) return 0;
    opts[n++] = archopt;
    opts[n++] = "--std=c++17";
    pit_cuda_variant_defines(v, defines, defines_size);
    return n + pit_cuda_split_options(defines, opts + n, max - n);
}

static char *append(char *p, const char *text)
{
    size_t n = strlen(text);
    memcpy(p, text, n);
    return p + n;
}

/* first, then the options, every header with its name, the kernel's name
 * and source (cuda_compile.h) */
static char *variant_text(const char *first, const pit_cuda_variant *v, int arch)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    const char *src = pit_cuda_kernel_source(v->kind);
    char archopt[64], defines[512];
    const char *opts[MAX_OPTIONS];
    int nopts = pit_cuda_compile_options(v, arch, archopt, sizeof archopt, defines, sizeof defines, opts,
                                         MAX_OPTIONS);
    size_t n = strlen(first) + strlen(pit_cuda_kernel_name(v->kind)) + 2 + strlen(src);
    for (int i = 0; i < nopts; ++i) n += strlen(opts[i]) + 1;
    for (int i = 0; i < nh; ++i) n += strlen(hname[i]) + 1 + strlen(hsrc[i]);
    char *key = malloc(n);
    if (!key) return NULL;
    char *p = append(key, first);
    for (int i = 0; i < nopts; ++i) p = append(append(p, opts[i]), "\n");
    for (int i = 0; i < nh; ++i) p = append(append(append(p, hname[i]), "\n"), hsrc[i]);
    p = append(append(p, pit_cuda_kernel_name(v->kind)), "\n");
    *append(p, src) = '\0';
    return key;
}

char *pit_cuda_variant_inputs(const pit_cuda_variant *v, int arch)
{
    return variant_text("", v, arch);
}

char *pit_cuda_variant_key(const pit_cuda_variant *v, int arch)
{
    char version[64];
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    snprintf(version, sizeof version, "nvrtc %d.%d\n", major, minor);
    return variant_text(version, v, arch);
}

const char *pit_cuda_key_inputs(const char *key)
{
    const char *nl = strchr(key, '\n');
    return nl ? nl + 1 : key;
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
    int n = pit_cuda_compile_options(v, arch, archopt, sizeof archopt, defines, sizeof defines, opts, MAX_OPTIONS);

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
