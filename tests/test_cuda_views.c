/*
 * tests/test_cuda_views.c - CUDA memory that frameworks hand pit, wrapped as
 * views: memory mapped piece by piece through the virtual memory API
 * (cuMemCreate + cuMemMap, as PyTorch's expandable segments do) is one
 * buffer across pieces mapped back to back, and a view past the mapped range
 * is refused; managed memory is bounded by its allocation. Opens the driver
 * with dlopen: without one (CI) the test reports itself skipped (exit 77).
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_symbols.h"
#include "pit.h"

#define SKIP 77

typedef struct driver {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*mem_free)(CUdeviceptr);
} driver;

static int load_driver(driver *d)
{
    const dl_symbol syms[] = {
        {(void **)&d->init, "cuInit"},
        {(void **)&d->device_get, "cuDeviceGet"},
        {(void **)&d->primary_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&d->ctx_set, "cuCtxSetCurrent"},
        {(void **)&d->granularity, "cuMemGetAllocationGranularity"},
        {(void **)&d->create, "cuMemCreate"},
        {(void **)&d->reserve, "cuMemAddressReserve"},
        {(void **)&d->map, "cuMemMap"},
        {(void **)&d->set_access, "cuMemSetAccess"},
        {(void **)&d->unmap, "cuMemUnmap"},
        {(void **)&d->release, "cuMemRelease"},
        {(void **)&d->address_free, "cuMemAddressFree"},
        {(void **)&d->alloc_managed, "cuMemAllocManaged"},
        {(void **)&d->mem_free, "cuMemFree_v2"},
    };
    return dl_load_symbols("libcuda.so.1", syms, sizeof syms / sizeof syms[0]);
}

static int passed, failed;

static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s [last error: %s]\n", what, pit_last_error());
    }
}

static pit_status wrap_floats(pit_context *ctx, CUdeviceptr p, int64_t n, pit_tensor **t)
{
    *t = NULL;
    return pit_tensor_wrap(ctx, PIT_F32, 1, &n, NULL, (void *)(uintptr_t)p, 0, t);
}

/* Random values through a view, read back through it. */
static void check_round_trip(pit_tensor *t, int64_t n, const char *what)
{
    float *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
    if (!in || !out)
        exit(1);
    uint32_t x = 12345u;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        in[i] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    int ok = pit_tensor_upload(t, NULL, in, (size_t)n * sizeof *in) == PIT_SUCCESS &&
             pit_tensor_download(t, NULL, out, (size_t)n * sizeof *out) == PIT_SUCCESS &&
             memcmp(in, out, (size_t)n * sizeof *in) == 0;
    check(ok, what);
    free(in);
    free(out);
}

/* Two physical pieces mapped back to back in one reserved range. */
static int test_mapped_pieces(const driver *d, pit_context *ctx)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2];
    if (d->granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        d->reserve(&va, 2 * gran, 0, 0, 0) != CUDA_SUCCESS)
        return printf("FAIL reserving two pieces of virtual memory\n"), 1;
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (d->create(&h[0], gran, &prop, 0) != CUDA_SUCCESS || d->create(&h[1], gran, &prop, 0) != CUDA_SUCCESS ||
        d->map(va, gran, 0, h[0], 0) != CUDA_SUCCESS || d->map(va + gran, gran, 0, h[1], 0) != CUDA_SUCCESS ||
        d->set_access(va, 2 * gran, &access, 1) != CUDA_SUCCESS)
        return printf("FAIL mapping two pieces of %zu bytes\n", gran), 1;
    int64_t n = (int64_t)(2 * gran / 4);
    pit_tensor *t = NULL;
    check(wrap_floats(ctx, va, n, &t) == PIT_SUCCESS, "a view over two pieces mapped back to back");
    if (t)
        check_round_trip(t, n, "the view over two pieces holds what was written");
    pit_tensor_destroy(t);
    check(wrap_floats(ctx, va + gran - 16, 8, &t) == PIT_SUCCESS, "a view across the pieces' seam");
    pit_tensor_destroy(t);
    check(wrap_floats(ctx, va, n + 1, &t) == PIT_ERR_INVALID_ARGUMENT && !t,
          "a view one element past the mapped range");
    check(wrap_floats(ctx, va + gran, (int64_t)(gran / 4) + 1, &t) == PIT_ERR_INVALID_ARGUMENT && !t,
          "a view from the second piece past the mapped range");
    d->unmap(va, 2 * gran);
    d->release(h[0]);
    d->release(h[1]);
    d->address_free(va, 2 * gran);
    return 0;
}

/* Managed memory: bounded by its allocation, whatever device holds it now. */
static int test_managed(const driver *d, pit_context *ctx)
{
    CUdeviceptr p = 0;
    if (d->alloc_managed(&p, 4096, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        return printf("FAIL cuMemAllocManaged(4096)\n"), 1;
    pit_tensor *t = NULL;
    check(wrap_floats(ctx, p, 1024, &t) == PIT_SUCCESS, "a view over managed memory");
    if (t)
        check_round_trip(t, 1024, "the managed view holds what was written");
    pit_tensor_destroy(t);
    check(wrap_floats(ctx, p, 1025, &t) == PIT_ERR_INVALID_ARGUMENT && !t,
          "a view one element past a managed allocation");
    d->mem_free(p);
    return 0;
}

int main(void)
{
    driver d;
    CUdevice dev;
    CUcontext primary;
    if (!load_driver(&d) || d.init(0) != CUDA_SUCCESS || d.device_get(&dev, 0) != CUDA_SUCCESS) {
        printf("test_cuda_views: SKIPPED: no CUDA driver or device\n");
        return SKIP;
    }
    pit_context *ctx = NULL;
    if (pit_context_create("cuda", 0, &ctx) != PIT_SUCCESS) {
        printf("test_cuda_views: SKIPPED: %s\n", pit_last_error());
        return SKIP;
    }
    if (d.primary_retain(&primary, dev) != CUDA_SUCCESS || d.ctx_set(primary) != CUDA_SUCCESS) {
        printf("FAIL making the primary context current\n");
        return 1;
    }
    int broken = test_mapped_pieces(&d, ctx) | test_managed(&d, ctx);
    pit_context_destroy(ctx);
    printf("test_cuda_views: %d passed, %d failed\n", passed, failed);
    return broken || failed ? 1 : 0;
}
