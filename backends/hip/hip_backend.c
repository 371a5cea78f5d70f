/*
 * hip_backend.c - what the HIP plug-in's backend table (shared with CUDA:
 * backends/cuda/common/gpu_backend.c, through hip_shim.h) asks of the
 * vendor: the device made current, its gfx architecture and what follows
 * from it, and the dense GEMM. The runtime is loaded in hip_api.c and
 * bound to the shared driver table in hip_shim.c, kernel images come from
 * hip_kernels.c, the operations from backends/cuda/ops/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

pit_status pit_hip_push(pit_hip_ctx *c)
{
    CU_CHECK(pit_hip.SetDevice(c->index), "hipSetDevice");
    return PIT_SUCCESS;
}

/* HIP has no context stack: nothing to pop */
void pit_hip_pop(void)
{
}

/* "gfx90a" from gcnArchName "gfx90a:sramecc+:xnack-". The properties
 * struct is read through a larger buffer: the runtime may fill a newer,
 * longer layout than the header this plug-in was built with. */
static pit_status device_gfx(int index, char *gfx, size_t size)
{
    union {
        hipDeviceProp_t p;
        char pad[8192];
    } *props = calloc(1, sizeof *props);
    if (!props) return pit_hip_host->error(PIT_ERR_OUT_OF_MEMORY, "hip: out of host memory");
    hipError_t r = pit_hip.GetDeviceProperties(&props->p, index);
    if (r != hipSuccess) {
        free(props);
        return pit_hip_fail(r, "hipGetDeviceProperties", __FILE__, __LINE__);
    }
    char *name = props->p.gcnArchName;
    name[sizeof props->p.gcnArchName - 1] = 0;
    size_t n = strcspn(name, ":");
    int ok = !strncmp(name, "gfx", 3) && n < size;
    if (ok) snprintf(gfx, size, "%.*s", (int)n, name);
    free(props);
    if (!ok) return pit_hip_host->error(PIT_ERR_BACKEND, "hip: device %d reports no gfx architecture name", index);
    return PIT_SUCCESS;
}

static void runtime_version(char *buf, size_t size)
{
    int v = 0;
    if (pit_hip.RuntimeGetVersion(&v) != hipSuccess) v = 0;
    /* HIP encodes major * 10000000 + minor * 100000 + patch */
    snprintf(buf, size, "HIP %d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

pit_status pit_vendor_describe(CUdevice dev, pit_device_info *info)
{
    pit_status st = device_gfx(dev, info->arch, sizeof info->arch);
    if (st != PIT_SUCCESS) return st;
    snprintf(info->vendor, sizeof info->vendor, "AMD");
    runtime_version(info->driver_version, sizeof info->driver_version);
    info->has_f16 = 1;
    info->has_bf16 = 1;
    /* CDNA (gfx9) and RDNA (gfx10, gfx11, gfx12) have a tile database each */
    snprintf(info->tiledb_family, sizeof info->tiledb_family, "%s",
             strncmp(info->arch, "gfx9", 4) == 0 ? "amd-gfx9" : strncmp(info->arch, "gfx1", 4) == 0 ? "amd-gfx11" : "");
    info->dlpack_device_type = PIT_DLPACK_ROCM;
    return PIT_SUCCESS;
}

/* The kernels' matrix step uses matrix cores on CDNA2/3 (MFMA) and RDNA3
 * (WMMA); elsewhere it is FMAs, and CUDA-core-style tiles are better. */
static int has_matrix_cores(const char *gfx)
{
    return !strcmp(gfx, "gfx90a") || !strncmp(gfx, "gfx94", 5) || !strncmp(gfx, "gfx110", 6);
}

/* The code objects assume the arch's default wavefront (64 on gfx9, 32 on
 * gfx10+); a device running another width would break every warp step. */
static pit_status check_wave(const pit_hip_ctx *c)
{
    int expected = !strncmp(c->vendor.gfx, "gfx9", 4) ? 64 : 32;
    if (c->vendor.wave != expected)
        return pit_hip_host->error(PIT_ERR_UNSUPPORTED, "hip: %s reports a wavefront of %d lanes; pit's kernels are built for %d",
                                   c->vendor.gfx, c->vendor.wave, expected);
    return PIT_SUCCESS;
}

pit_status pit_vendor_context_open(pit_hip_ctx *c)
{
    pit_status st;
    if ((st = device_gfx(c->dev, c->vendor.gfx, sizeof c->vendor.gfx)) != PIT_SUCCESS ||
        (st = pit_gpu_attribute(c->dev, hipDeviceAttributeWarpSize, &c->vendor.wave)) != PIT_SUCCESS ||
        (st = check_wave(c)) != PIT_SUCCESS)
        return st;
    c->arch = has_matrix_cores(c->vendor.gfx) ? 80 : 0;
    pit_hip_host->log_debug("hip: device %d is %s (wave%d, %d built-in code objects, hiprtc %s, dense: %s)", c->index,
                            c->vendor.gfx, c->vendor.wave, pit_hip_builtin_count(c->vendor.gfx),
                            pit_hiprtc.CreateProgram ? "yes" : "no", pit_hip_dense_name(c));
    return PIT_SUCCESS;
}

void pit_vendor_context_close(pit_hip_ctx *c)
{
    (void)c; /* the device holds nothing of the context's */
}

void pit_vendor_dense_entries(pit_backend *be)
{
    be->matmul_dense = pit_hip_matmul_dense;
    be->dense_name = pit_hip_dense_name;
}
