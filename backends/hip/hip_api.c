/*
 * hip_api.c - loads the HIP runtime with dlopen (and hiprtc when present),
 * and formats failed HIP calls as pit errors.
 */
#include "hip_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

pit_hip_api pit_hip;
pit_hiprtc_api pit_hiprtc;
const pit_host *pit_hip_host;

static void *runtime;
static void *rtc_lib; /* libhiprtc.so (ROCm 6); NULL when hiprtc is in the runtime */

/* The ROCm 6 name first; .so.5 is Debian 12's; the bare name is the
 * development link of whatever is installed. */
static const char *const runtime_names[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
static const char *const rtc_names[] = {"libhiprtc.so.6", "libhiprtc.so"};

const char *pit_hip_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void *pit_hip_open_first(const char *const *names, int n, char *tried, size_t size, int *which)
{
    size_t used = 0;
    tried[0] = 0;
    for (int i = 0; i < n; ++i) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            if (which) *which = i;
            return h;
        }
        /* dlerror() names the file, unless what failed is a dependency */
        const char *why = dlerror();
        int w = why && strstr(why, names[i])
                    ? snprintf(tried + used, size - used, "%s%s", used ? "; " : "", why)
                    : snprintf(tried + used, size - used, "%s%s: %s", used ? "; " : "", names[i],
                               why ? why : "not loaded");
        if (w > 0) used = used + (size_t)w < size ? used + (size_t)w : size - 1;
    }
    return NULL;
}

int pit_hip_resolve(void *lib, const char *name, void *slot)
{
    void *sym = dlsym(lib, name);
    memcpy(slot, &sym, sizeof sym); /* object -> function pointer, as POSIX allows */
    return sym != NULL;
}

#define REQUIRE(field, name)                                                                        \
    do {                                                                                            \
        if (!pit_hip_resolve(runtime, name, &pit_hip.field)) {                                      \
            missing = name;                                                                         \
            goto fail;                                                                              \
        }                                                                                           \
    } while (0)

static pit_status resolve_runtime(void)
{
    const char *missing = NULL;
    REQUIRE(Init, "hipInit");
    REQUIRE(RuntimeGetVersion, "hipRuntimeGetVersion");
    REQUIRE(DriverGetVersion, "hipDriverGetVersion");
    REQUIRE(GetDeviceCount, "hipGetDeviceCount");
    REQUIRE(SetDevice, "hipSetDevice");
    REQUIRE(DeviceGetName, "hipDeviceGetName");
    REQUIRE(DeviceTotalMem, "hipDeviceTotalMem");
    REQUIRE(DeviceGetAttribute, "hipDeviceGetAttribute");
    if (!pit_hip_resolve(runtime, "hipGetDevicePropertiesR0000", &pit_hip.GetDeviceProperties))
        REQUIRE(GetDeviceProperties, "hipGetDeviceProperties");
    REQUIRE(StreamCreateWithFlags, "hipStreamCreateWithFlags");
    REQUIRE(StreamDestroy, "hipStreamDestroy");
    REQUIRE(StreamSynchronize, "hipStreamSynchronize");
    REQUIRE(Malloc, "hipMalloc");
    REQUIRE(Free, "hipFree");
    REQUIRE(MemcpyHtoDAsync, "hipMemcpyHtoDAsync");
    REQUIRE(MemcpyDtoHAsync, "hipMemcpyDtoHAsync");
    REQUIRE(MemcpyDtoDAsync, "hipMemcpyDtoDAsync");
    REQUIRE(MemcpyDtoH, "hipMemcpyDtoH");
    REQUIRE(MemsetD32Async, "hipMemsetD32Async");
    REQUIRE(MemGetAddressRange, "hipMemGetAddressRange");
    REQUIRE(DrvPointerGetAttributes, "hipDrvPointerGetAttributes");
    REQUIRE(MemRetainAllocationHandle, "hipMemRetainAllocationHandle");
    REQUIRE(MemRelease, "hipMemRelease");
    REQUIRE(EventCreate, "hipEventCreate");
    REQUIRE(EventRecord, "hipEventRecord");
    REQUIRE(EventSynchronize, "hipEventSynchronize");
    REQUIRE(EventElapsedTime, "hipEventElapsedTime");
    REQUIRE(EventDestroy, "hipEventDestroy");
    REQUIRE(ModuleLoadData, "hipModuleLoadData");
    REQUIRE(ModuleUnload, "hipModuleUnload");
    REQUIRE(ModuleGetFunction, "hipModuleGetFunction");
    REQUIRE(ModuleGetGlobal, "hipModuleGetGlobal");
    REQUIRE(ModuleLaunchKernel, "hipModuleLaunchKernel");
    REQUIRE(GetErrorName, "hipGetErrorName");
    return PIT_SUCCESS;
fail:
    return pit_hip_host->error(PIT_ERR_NO_DEVICE, "no usable HIP runtime (the loaded libamdhip64 lacks %s)",
                               missing);
}

/* hiprtc is optional: without it only the built-in code objects run. */
static void resolve_hiprtc(void)
{
    void *lib = runtime;
    if (!dlsym(runtime, "hiprtcCreateProgram")) {
        char tried[512];
        rtc_lib = pit_hip_open_first(rtc_names, 2, tried, sizeof tried, NULL);
        if (!rtc_lib) {
            pit_hip_host->log_debug("hip: no hiprtc (%s): built-in code objects only", tried);
            return;
        }
        lib = rtc_lib;
    }
    pit_hiprtc_api t;
    int ok = pit_hip_resolve(lib, "hiprtcCreateProgram", &t.CreateProgram) &&
             pit_hip_resolve(lib, "hiprtcCompileProgram", &t.CompileProgram) &&
             pit_hip_resolve(lib, "hiprtcGetProgramLogSize", &t.GetProgramLogSize) &&
             pit_hip_resolve(lib, "hiprtcGetProgramLog", &t.GetProgramLog) &&
             pit_hip_resolve(lib, "hiprtcGetCodeSize", &t.GetCodeSize) &&
             pit_hip_resolve(lib, "hiprtcGetCode", &t.GetCode) &&
             pit_hip_resolve(lib, "hiprtcDestroyProgram", &t.DestroyProgram);
    if (ok) pit_hiprtc = t;
}

/* A runtime without a GPU answers the device count with an error or 0. */
static pit_status require_gpu(void)
{
    int count = 0;
    hipError_t r = pit_hip.GetDeviceCount(&count);
    if (r != hipSuccess)
        return pit_hip_host->error(PIT_ERR_NO_DEVICE, "no AMD GPU (hipGetDeviceCount returned %d %s)", (int)r,
                                   pit_hip.GetErrorName(r));
    if (count <= 0)
        return pit_hip_host->error(PIT_ERR_NO_DEVICE, "no AMD GPU (hipGetDeviceCount returned 0 devices)");
    return PIT_SUCCESS;
}

pit_status pit_hip_open(void)
{
    char tried[1024];
    if (!runtime) runtime = pit_hip_open_first(runtime_names, 3, tried, sizeof tried, NULL);
    if (!runtime) return pit_hip_host->error(PIT_ERR_NO_DEVICE, "no HIP runtime (%s)", tried);
    pit_status st = resolve_runtime();
    if (st == PIT_SUCCESS) resolve_hiprtc();
    return st;
}

pit_status pit_hip_load(void)
{
    pit_status st = pit_hip_open();
    if (st == PIT_SUCCESS) st = require_gpu();
    if (st != PIT_SUCCESS) {
        /* the library stays loaded: it may have started threads that outlive dlclose */
        memset(&pit_hip, 0, sizeof pit_hip);
        memset(&pit_hiprtc, 0, sizeof pit_hiprtc);
    }
    return st;
}

void pit_hip_unload(void)
{
    memset(&pit_hip, 0, sizeof pit_hip);
    memset(&pit_hiprtc, 0, sizeof pit_hiprtc);
    /* the runtime and hiprtc stay loaded: unloading ROCm at exit is unsafe */
}

pit_status pit_hip_fail(hipError_t r, const char *what, const char *file, int line)
{
    pit_status st = r == hipErrorOutOfMemory ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND;
    const char *name = pit_hip.GetErrorName ? pit_hip.GetErrorName(r) : "?";
    return pit_hip_host->error(st, "%s failed: %d %s at %s:%d", what, (int)r, name ? name : "?",
                               pit_hip_basename(file), line);
}
