/*
 * cuda_backend.c - what the CUDA plug-in's backend table (shared with HIP:
 * common/gpu_backend.c) asks of the vendor: the primary context made
 * current, the device's compute capability and what follows from it, and
 * cuBLAS as the dense GEMM. The driver is loaded in cuda_driver.c, kernel
 * images come from cuda_jit.c, the operations from ops/.
 */
#include <stdio.h>

#include "cuda_internal.h"
#include "cuda_prebuilt.h"

pit_status pit_cuda_push(pit_cuda_ctx *c)
{
    CU_CHECK(pit_cu.CtxPushCurrent(c->vendor.ctx), "cuCtxPushCurrent");
    return PIT_SUCCESS;
}

void pit_cuda_pop(void)
{
    CUcontext dummy;
    pit_cu.CtxPopCurrent(&dummy);
}

/* 90 for sm_90 */
static pit_status device_arch(CUdevice dev, int *arch)
{
    int major = 0, minor = 0;
    pit_status st = pit_gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major);
    if (st == PIT_SUCCESS) st = pit_gpu_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor);
    *arch = major * 10 + minor;
    return st;
}

pit_status pit_vendor_describe(CUdevice dev, pit_device_info *info)
{
    int arch = 0, version = 0;
    pit_status st = device_arch(dev, &arch);
    if (st != PIT_SUCCESS) return st;
    CU_CHECK(pit_cu.DriverGetVersion(&version), "cuDriverGetVersion");
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA Corporation");
    snprintf(info->arch, sizeof info->arch, "sm_%d", arch);
    snprintf(info->driver_version, sizeof info->driver_version, "CUDA %d.%d", version / 1000,
             (version % 1000) / 10);
    info->has_f16 = arch >= 53;
    info->has_bf16 = arch >= 70; /* below sm_80 through f32 arithmetic */
    snprintf(info->tiledb_family, sizeof info->tiledb_family, "%s", pit_cuda_tiledb_family(arch));
    info->dlpack_device_type = PIT_DLPACK_CUDA;
    return PIT_SUCCESS;
}

/* the kernels built into the plug-in for arch (cuda_prebuilt.h) */
static int builtin_kernels(int arch)
{
    int count = 0, n = 0;
    const pit_cuda_prebuilt *table = pit_cuda_prebuilt_table(&count);
    for (int i = 0; i < count; ++i) n += table[i].arch == arch;
    return n;
}

pit_status pit_vendor_context_open(pit_cuda_ctx *c)
{
    pit_status st = device_arch(c->dev, &c->arch);
    if (st != PIT_SUCCESS) return st;
    pit_cuda_host->log_debug("cuda: %d kernels built in for sm_%d; others compiled by NVRTC", builtin_kernels(c->arch),
                             c->arch);
    CU_CHECK(pit_cu.DevicePrimaryCtxRetain(&c->vendor.ctx, c->dev), "cuDevicePrimaryCtxRetain");
    /* Once, here: a pool attribute set inside a call would invalidate a
     * CUDA-graph capture of that call. */
    pit_cuda_keep_pool_memory(c);
    return PIT_SUCCESS;
}

void pit_vendor_context_close(pit_cuda_ctx *c)
{
    pit_cu.DevicePrimaryCtxRelease(c->dev);
}

static const char *cuda_dense_name(void *bctx)
{
    (void)bctx;
    return "cuBLAS";
}

void pit_vendor_dense_entries(pit_backend *be)
{
    be->matmul_dense = pit_cuda_matmul_dense;
    be->dense_name = cuda_dense_name;
}
