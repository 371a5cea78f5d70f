/*
 * hip_api.h - the HIP runtime, loaded from libamdhip64.so with dlopen so the
 * plug-in loads on machines without ROCm (CI), rocBLAS and hiprtc found the
 * same way when present, and the failure of a HIP call as a pit error with
 * its place (checked with gpu_internal.h's CU_CHECK, through hip_shim.h).
 */
#ifndef PIT_HIP_API_H
#define PIT_HIP_API_H

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h> /* types and constants only; no symbol is linked */
#include <stdint.h>

#include "backend.h"

typedef struct pit_hip_api {
    hipError_t (*Init)(unsigned int);
    hipError_t (*RuntimeGetVersion)(int *);
    hipError_t (*DriverGetVersion)(int *);
    hipError_t (*GetDeviceCount)(int *);
    hipError_t (*SetDevice)(int);
    hipError_t (*DeviceGetName)(char *, int, int);
    hipError_t (*DeviceTotalMem)(size_t *, int);
    hipError_t (*DeviceGetAttribute)(int *, hipDeviceAttribute_t, int);
    /* the pre-6.0 layout of hipDeviceProp_t, which ROCm 6 still exports
     * under hipGetDevicePropertiesR0000 (and the unversioned name) */
    hipError_t (*GetDeviceProperties)(hipDeviceProp_t *, int);
    hipError_t (*StreamCreateWithFlags)(hipStream_t *, unsigned int);
    hipError_t (*StreamDestroy)(hipStream_t);
    hipError_t (*StreamSynchronize)(hipStream_t);
    hipError_t (*Malloc)(void **, size_t);
    hipError_t (*Free)(void *);
    hipError_t (*MemcpyHtoDAsync)(hipDeviceptr_t, void *, size_t, hipStream_t);
    hipError_t (*MemcpyDtoHAsync)(void *, hipDeviceptr_t, size_t, hipStream_t);
    hipError_t (*MemcpyDtoDAsync)(hipDeviceptr_t, hipDeviceptr_t, size_t, hipStream_t);
    hipError_t (*MemcpyDtoH)(void *, hipDeviceptr_t, size_t);
    hipError_t (*MemsetD32Async)(hipDeviceptr_t, int, size_t, hipStream_t);
    hipError_t (*MemGetAddressRange)(hipDeviceptr_t *, size_t *, hipDeviceptr_t);
    hipError_t (*DrvPointerGetAttributes)(unsigned int, hipPointer_attribute *, void **, hipDeviceptr_t);
    hipError_t (*MemRetainAllocationHandle)(hipMemGenericAllocationHandle_t *, void *);
    hipError_t (*MemRelease)(hipMemGenericAllocationHandle_t);
    hipError_t (*EventCreate)(hipEvent_t *);
    hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
    hipError_t (*EventSynchronize)(hipEvent_t);
    hipError_t (*EventElapsedTime)(float *, hipEvent_t, hipEvent_t);
    hipError_t (*EventDestroy)(hipEvent_t);
    hipError_t (*ModuleLoadData)(hipModule_t *, const void *);
    hipError_t (*ModuleUnload)(hipModule_t);
    hipError_t (*ModuleGetFunction)(hipFunction_t *, hipModule_t, const char *);
    hipError_t (*ModuleGetGlobal)(hipDeviceptr_t *, size_t *, hipModule_t, const char *);
    hipError_t (*ModuleLaunchKernel)(hipFunction_t, unsigned int, unsigned int, unsigned int, unsigned int,
                                     unsigned int, unsigned int, unsigned int, hipStream_t, void **, void **);
    const char *(*GetErrorName)(hipError_t);
} pit_hip_api;

/* hiprtc: in libamdhip64 up to ROCm 5, in libhiprtc.so from ROCm 6. The
 * result codes are ints (hiprtcResult, 0 = success). */
typedef struct pit_hiprtc_api {
    int (*CreateProgram)(void **, const char *, const char *, int, const char *const *, const char *const *);
    int (*CompileProgram)(void *, int, const char **);
    int (*GetProgramLogSize)(void *, size_t *);
    int (*GetProgramLog)(void *, char *);
    int (*GetCodeSize)(void *, size_t *);
    int (*GetCode)(void *, char *);
    int (*DestroyProgram)(void **);
} pit_hiprtc_api;

extern pit_hip_api pit_hip;
extern pit_hiprtc_api pit_hiprtc; /* CreateProgram NULL: no hiprtc */
extern const pit_host *pit_hip_host;

/* dlopen the runtime and resolve the table: PIT_ERR_NO_DEVICE "no HIP
 * runtime (...)" when absent, "no AMD GPU (...)" when it has no device. */
pit_status pit_hip_load(void);
/* The same without asking for a GPU (tools that only compile). */
pit_status pit_hip_open(void);
void pit_hip_unload(void);

/* "what failed: 100 hipErrorNoDevice at hip_backend.c:123" as a pit error;
 * hipErrorOutOfMemory maps to PIT_ERR_OUT_OF_MEMORY. */
pit_status pit_hip_fail(hipError_t r, const char *what, const char *file, int line);

/* file name without its folders, for messages */
const char *pit_hip_basename(const char *path);

/* Opens the first of names[0..n) that loads (RTLD_NOW | RTLD_LOCAL), its
 * index into *which (when not NULL); NULL when none does, with why for each
 * ("a; b") in tried. For the ROCm libraries found at run time. */
void *pit_hip_open_first(const char *const *names, int n, char *tried, size_t size, int *which);
/* Resolves name into *slot (a function pointer); 0 when it is missing. */
int pit_hip_resolve(void *lib, const char *name, void *slot);

#endif /* PIT_HIP_API_H */
