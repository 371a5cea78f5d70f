/*
 * hip_rtccheck.c - pit-hip-rtc-check: compiles kernel variants of the
 * shared table through hiprtc, the plug-in's run-time path for variants
 * that are not built in (it sees common/port.cuh in its __HIPCC_RTC__ mode).
 * Needs the HIP runtime (Debian's libamdhip64-5 carries hiprtc) but no GPU.
 *
 *   pit-hip-rtc-check [--arch gfx90a] [--all]
 * By default one variant per kernel and compute path (tensor-core or not);
 * --all compiles every variant. Exit 77 (SKIPPED) without a runtime or hiprtc.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

static pit_status tool_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    return st;
}

static void tool_log(const char *fmt, ...)
{
    (void)fmt;
}

/* no cache folder, no disk cache: every kernel is compiled */
static const pit_host tool_host = {PIT_BACKEND_ABI_VERSION, tool_error, tool_log, NULL, NULL, NULL, NULL, NULL, NULL};

typedef struct run {
    const char *gfx;
    int all, count, failed;
    char seen[64][64]; /* "name tc" already compiled */
    int nseen;
} run;

/* 1 the first time a kernel name with this compute path comes by */
static int first_of_kind(run *r, const pit_cuda_variant *v)
{
    char what[64];
    snprintf(what, sizeof what, "%s %d", pit_cuda_kernel_name(v->kind), v->tile.tensor_core);
    for (int i = 0; i < r->nseen; ++i)
        if (!strcmp(r->seen[i], what)) return 0;
    if (r->nseen < 64) snprintf(r->seen[r->nseen++], sizeof r->seen[0], "%s", what);
    return 1;
}

static void compile_one(const pit_cuda_variant *v, void *user)
{
    run *r = user;
    if (!r->all && !first_of_kind(r, v)) return;
    char key[600], defines[512], *code = NULL;
    size_t size = 0;
    snprintf(key, sizeof key, "%s %s", pit_cuda_kernel_name(v->kind),
             pit_cuda_variant_defines(v, defines, sizeof defines));
    ++r->count;
    if (pit_hip_rtc_compile(r->gfx, v, key, &code, &size) != PIT_SUCCESS) {
        printf("FAIL %s\n", key);
        ++r->failed;
    } else {
        printf("ok %s (%zu bytes)\n", key, size);
    }
    free(code);
}

int main(int argc, char **argv)
{
    run r;
    memset(&r, 0, sizeof r);
    r.gfx = "gfx90a";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc) r.gfx = argv[++i];
        else if (!strcmp(argv[i], "--all")) r.all = 1;
        else {
            fprintf(stderr, "usage: pit-hip-rtc-check [--arch GFX] [--all]\n");
            return 2;
        }
    }
    pit_hip_host = &tool_host;
    if (pit_hip_open() != PIT_SUCCESS || !pit_hiprtc.CreateProgram) {
        printf("SKIPPED: no HIP runtime with hiprtc\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    pit_cuda_for_each_variant(80, compile_one, &r);
    printf("hiprtc %s: %d of %d variants compiled\n", r.gfx, r.count - r.failed, r.count);
    return r.failed ? 1 : 0;
}
