/*
 * hip_rtc.c - hiprtc: one kernel variant of the shared table compiled at
 * run time for a gfx target, from the embedded sources with the variant's
 * -D defines (exactly what the CUDA backend gives NVRTC). Used for the
 * variants not built into the plug-in, and by pit-hip-rtc-check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

#define MAX_OPTIONS 32


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

pit_status pit_hip_rtc_compile(const char *gfx, const pit_cuda_variant *v, const char *key, char **code, size_t *size)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    char defines[512], arch[64];
    const char *opts[MAX_OPTIONS];
    int n = 0;
    snprintf(arch, sizeof arch, "--offload-arch=%s", gfx);
    opts[n++] = arch;
    opts[n++] = "-std=c++17";
    opts[n++] = "-O3";
    pit_cuda_variant_defines(v, defines, sizeof defines);
    n += pit_cuda_split_options(defines, opts + n, MAX_OPTIONS - n);
    void *prog = NULL;
    int r = pit_hiprtc.CreateProgram(&prog, pit_cuda_kernel_source(v->kind), pit_cuda_kernel_name(v->kind), nh,
                                     hsrc, hname);
    if (r != 0) return rtc_error("hiprtcCreateProgram", r, NULL, gfx, key);
    pit_status st = PIT_SUCCESS;
    *code = NULL;
    *size = 0;
    if ((r = pit_hiprtc.CompileProgram(prog, n, opts)) != 0)
        st = rtc_error("hiprtcCompileProgram", r, prog, gfx, key);
    else if ((r = pit_hiprtc.GetCodeSize(prog, size)) != 0 || *size == 0)
        st = rtc_error("hiprtcGetCodeSize", r, prog, gfx, key);
    else if (!(*code = malloc(*size)))
        st = pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory for a %zu-byte code object", *size);
    else if ((r = pit_hiprtc.GetCode(prog, *code)) != 0) {
        free(*code);
        *code = NULL;
        st = rtc_error("hiprtcGetCode", r, prog, gfx, key);
    }
    pit_hiprtc.DestroyProgram(&prog);
    if (st == PIT_SUCCESS) pit_hip_host->log_debug("hip: hiprtc compiled %s for %s (%zu bytes)", key, gfx, *size);
    return st;
}

