/*
 * emu_backend.c - the pit_backend entries test_cuda_detect uses, for a
 * machine without a GPU (test_detect_strip_emulated): memory is host
 * memory, and detect() takes the plug-in's own decisions
 * (pit_cuda_strip_fits, pit_cuda_detect_target, cuda_kernels.c), zeroes
 * counts and totals, and runs pit_detect_strip.cu on the CPU
 * (emu_warps.cpp) on a grid of at most 3 CTAs, so the kernel's loop over
 * strips runs too. A set the strip kernel does not take is
 * PIT_ERR_UNSUPPORTED: pit_detect.cu is checked on the GPU only. Test code
 * only.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"

void pit_emu_detect_strip(int dt, const void *args, unsigned ctas); /* emu_warps.cpp */

static int device_memory; /* what a context handle points at */
static const pit_host *host;

static pit_status emu_init(const pit_host *h)
{
    host = h;
    return PIT_SUCCESS;
}

static pit_status emu_context_create(int index, const pit_switches *switches, void **bctx)
{
    (void)index;
    (void)switches;
    *bctx = &device_memory;
    return PIT_SUCCESS;
}

static void emu_context_destroy(void *bctx) { (void)bctx; }

static pit_status emu_stream_create(void *bctx, void **stream)
{
    *stream = bctx;
    return PIT_SUCCESS;
}

static void emu_stream_destroy(void *bctx, void *stream)
{
    (void)bctx;
    (void)stream;
}

static void emu_shutdown(void) {}

static pit_status emu_mem_alloc(void *bctx, size_t bytes, void **mem)
{
    (void)bctx;
    *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    return *mem ? PIT_SUCCESS : PIT_ERR_OUT_OF_MEMORY;
}

static void emu_mem_free(void *bctx, void *mem)
{
    (void)bctx;
    free(mem);
}

static pit_status emu_mem_write(void *bctx, void *stream, void *mem, size_t offset, const void *host, size_t bytes)
{
    (void)bctx;
    (void)stream;
    memcpy((char *)mem + offset, host, bytes);
    return PIT_SUCCESS;
}

static pit_status emu_mem_read(void *bctx, void *stream, const void *mem, size_t offset, void *host, size_t bytes)
{
    (void)bctx;
    (void)stream;
    memcpy(host, (const char *)mem + offset, bytes);
    return PIT_SUCCESS;
}

static pit_status emu_mem_fill32(void *bctx, void *stream, void *mem, size_t offset, uint32_t pattern, size_t bytes)
{
    (void)bctx;
    (void)stream;
    for (size_t i = 0; i < bytes / 4; ++i) memcpy((char *)mem + offset + 4 * i, &pattern, 4);
    return PIT_SUCCESS;
}

/* X as the test passes it: rank 3, rows of unit stride */
static pit_status emu_detect(void *bctx, void *stream, const pit_tdesc *X, pit_index *idx, int n)
{
    (void)bctx;
    (void)stream;
    size_t eb = X->dtype == PIT_U8 ? 1 : X->dtype == PIT_F16 || X->dtype == PIT_BF16 ? 2 : 4;
    int64_t vec = 16 / (int64_t)eb, batch = X->shape[0], rows = X->shape[1], cols = X->shape[2];
    uintptr_t x = (uintptr_t)X->mem + X->offset;
    int strip = X->rank == 3 && n >= 1 && n <= PIT_DETECT_MAX && x % 16 == 0 && X->strides[1] % vec == 0 &&
                X->strides[0] % vec == 0 && cols % vec == 0;
    for (int i = 0; i < n && strip; ++i) strip = pit_cuda_strip_fits(&idx[i], (int)vec);
    if (!strip) return host->error(PIT_ERR_UNSUPPORTED, "emulated detect: a set for pit_detect, not the strip kernel");
    pit_detect_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.ld = X->strides[1];
    a.batch_stride = X->strides[0];
    a.rows = (int32_t)rows;
    a.cols = (int32_t)cols;
    a.n = n;
    a.batch = (int32_t)batch;
    for (int i = 0; i < n; ++i) {
        memset(idx[i].counts, 0, (size_t)idx[i].groups * 4);
        memset(idx[i].total, 0, 4);
        pit_cuda_detect_target(&a.t[i], &idx[i], cols);
    }
    int64_t strips = batch * ((rows + PIT_DETECT_STRIP_H - 1) / PIT_DETECT_STRIP_H) *
                     ((cols + PIT_CUDA_STRIP_W(vec) - 1) / PIT_CUDA_STRIP_W(vec));
    /* at most 3 CTAs: each loops over strips, as on a GPU past its cap */
    if (rows > 0 && cols > 0 && batch > 0) pit_emu_detect_strip((int)X->dtype, &a, (unsigned)(strips < 3 ? strips : 3));
    return PIT_SUCCESS;
}

const pit_backend *pit_emu_backend(void)
{
    static const pit_backend be = {.abi_version = PIT_BACKEND_ABI_VERSION,
                                   .name = "cuda (emulated detection)",
                                   .init = emu_init,
                                   .shutdown = emu_shutdown,
                                   .context_create = emu_context_create,
                                   .context_destroy = emu_context_destroy,
                                   .stream_create = emu_stream_create,
                                   .stream_destroy = emu_stream_destroy,
                                   .mem_alloc = emu_mem_alloc,
                                   .mem_free = emu_mem_free,
                                   .mem_write = emu_mem_write,
                                   .mem_read = emu_mem_read,
                                   .mem_fill32 = emu_mem_fill32,
                                   .detect = emu_detect};
    return &be;
}
