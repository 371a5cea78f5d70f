/*
 * backends/cuda/test_plugin.h - what the CUDA plug-in's direct tests share:
 * the host services a plug-in expects, and loading the plug-in up to its
 * first device. Test code only; included by one .c each.
 */
#ifndef PIT_CUDA_TEST_PLUGIN_H
#define PIT_CUDA_TEST_PLUGIN_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"

#define SKIP 77

static char last_error[4096];
static int debug_log; /* PIT_LOG=debug */

static pit_status host_error(pit_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

static void host_log(const char *fmt, ...)
{
    if (!debug_log) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[pit debug] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static const char *host_cache_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PIT_CACHE_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : "/tmp/pit-cache-test");
    mkdir(dir, 0755);
    return dir;
}

/* Loads the plug-in ($PIT_CUDA_PLUGIN_PATH or the build's), registers it
 * with host and initialises it. Returns 0 with *be and device 0's info,
 * SKIP (printed) without a driver or device, 1 (printed) on failure. */
static int load_cuda_plugin(const pit_host *host, const pit_backend **be, pit_device_info *info)
{
    const char *plugin = getenv("PIT_CUDA_PLUGIN_PATH");
    if (!plugin || !*plugin) plugin = PIT_CUDA_PLUGIN;
    debug_log = getenv("PIT_LOG") && !strcmp(getenv("PIT_LOG"), "debug");
    void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL cannot load %s: %s\n", plugin, dlerror());
        return 1;
    }
    pit_backend_register_fn reg = (pit_backend_register_fn)(uintptr_t)dlsym(lib, PIT_BACKEND_REGISTER_SYMBOL);
    if (!reg || !(*be = reg(host)) || (*be)->abi_version != PIT_BACKEND_ABI_VERSION) {
        printf("FAIL %s has no compatible %s\n", plugin, PIT_BACKEND_REGISTER_SYMBOL);
        return 1;
    }
    pit_status st = (*be)->init(host);
    if (st == PIT_ERR_NO_DEVICE) {
        printf("SKIPPED: %s\n", last_error);
        return SKIP;
    }
    int count = 0;
    if (st == PIT_SUCCESS) st = (*be)->device_count(&count);
    if (st == PIT_SUCCESS && count < 1) {
        printf("SKIPPED: no CUDA device\n");
        return SKIP;
    }
    if (st == PIT_SUCCESS) st = (*be)->device_info(0, info);
    if (st != PIT_SUCCESS) {
        printf("FAIL loading the CUDA plug-in: status %d: %s\n", (int)st, last_error);
        return 1;
    }
    return 0;
}

#endif
