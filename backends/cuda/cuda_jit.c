/*
 * cuda_jit.c - run-time kernels: NVRTC for the device's exact architecture,
 * cached in memory per context (key: kernel name + defines) and on disk
 * under host->cache_dir() (key: hash of sources + defines + arch + NVRTC
 * version). Disk entries carry a checksum; a corrupt one is recompiled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_compile.h"
#include "cuda_internal.h"

#define CACHE_MAGIC "PITCUBN1"

typedef struct cache_header {
    char magic[8];
    uint64_t size;
    uint64_t checksum;
} cache_header;

static void cache_path(const pit_cuda_variant *v, int arch, char *path, size_t size)
{
    const char *dir = pit_cuda_host->cache_dir ? pit_cuda_host->cache_dir() : NULL;
    if (!dir) {
        path[0] = 0;
        return;
    }
    snprintf(path, size, "%s/cuda-sm%d-%016llx.cubin", dir, arch,
             (unsigned long long)pit_cuda_variant_hash(v, arch));
}

/* The cubin stored at path, or NULL when missing or corrupt. */
static char *cache_read(const char *path, size_t *size)
{
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    cache_header h;
    char *data = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, CACHE_MAGIC, 8) && h.size > 0 &&
        h.size < (1u << 30)) {
        data = malloc(h.size);
        if (data && (fread(data, 1, h.size, f) != h.size || fgetc(f) != EOF ||
                     pit_fnv1a(PIT_FNV_SEED, data, h.size) != h.checksum)) {
            pit_cuda_host->log_debug("cuda: kernel cache entry %s is corrupt: recompiling", path);
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    if (data) *size = h.size;
    return data;
}

/* Written to a temporary file and renamed, so readers never see half. */
static void cache_write(const char *path, const char *data, size_t size)
{
    if (!path[0]) return;
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    cache_header h;
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.size = size;
    h.checksum = pit_fnv1a(PIT_FNV_SEED, data, size);
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static pit_status cubin_for(pit_cuda_ctx *c, const pit_cuda_variant *v, char **cubin, size_t *size)
{
    char path[1024];
    cache_path(v, c->arch, path, sizeof path);
    *cubin = cache_read(path, size);
    if (*cubin) {
        pit_cuda_host->log_debug("cuda: kernel from disk cache %s", path);
        return PIT_SUCCESS;
    }
    char *log = NULL;
    char defines[512];
    pit_cuda_variant_defines(v, defines, sizeof defines);
    int r = pit_cuda_compile(v, c->arch, cubin, size, &log);
    if (r != 0) {
        pit_status st = pit_cuda_host->error(PIT_ERR_COMPILE, "NVRTC could not compile %s (%s) for sm_%d: %s",
                                             pit_cuda_kernel_name(v->kind), defines, c->arch,
                                             log ? log : "no log");
        free(log);
        return st;
    }
    if (pit_cuda_wgmma_serialised(log))
        pit_cuda_host->log_debug("cuda: %s (%s): ptxas serialised its wgmma's (slow): %s", pit_cuda_kernel_name(v->kind),
                                 defines, log);
    free(log);
    pit_cuda_host->log_debug("cuda: compiled %s %s for sm_%d (%zu bytes)", pit_cuda_kernel_name(v->kind),
                             defines, c->arch, *size);
    cache_write(path, *cubin, *size);
    return PIT_SUCCESS;
}

/* Module -> function, and the dynamic shared memory it declares. */
static pit_status load_kernel(pit_cuda_ctx *c, const pit_cuda_variant *v, const char *cubin, pit_cuda_kernel *k)
{
    const char *name = pit_cuda_kernel_name(v->kind);
    CU_CHECK(pit_cu.ModuleLoadData(&k->module, cubin), "cuModuleLoadData");
    CU_CHECK(pit_cu.ModuleGetFunction(&k->fn, k->module, name), "cuModuleGetFunction");
    CUdeviceptr global = 0;
    size_t bytes = 0;
    k->smem_bytes = 0;
    if (pit_cu.ModuleGetGlobal(&global, &bytes, k->module, "pit_smem_bytes") == CUDA_SUCCESS && bytes == 4)
        CU_CHECK(pit_cu.MemcpyDtoH(&k->smem_bytes, global, 4), "cuMemcpyDtoH(pit_smem_bytes)");
    if (k->smem_bytes > c->smem_optin)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "%s needs %d bytes of shared memory; the device has %d",
                                    name, k->smem_bytes, c->smem_optin);
    if (k->smem_bytes > 48 * 1024)
        CU_CHECK(pit_cu.FuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem_bytes),
                 "cuFuncSetAttribute(max dynamic shared memory)");
    return PIT_SUCCESS;
}

static pit_status build_kernel(void *ctx, const pit_cuda_variant *v, const char *key, pit_kernel_link **out)
{
    (void)key;
    pit_cuda_ctx *c = ctx;
    char *cubin = NULL;
    size_t size = 0;
    pit_status st = cubin_for(c, v, &cubin, &size);
    if (st != PIT_SUCCESS) return st;
    pit_cuda_kernel *k = calloc(1, sizeof *k);
    if (!k) {
        free(cubin);
        return pit_cuda_host->error(PIT_ERR_OUT_OF_MEMORY, "cuda: out of host memory for a kernel");
    }
    st = load_kernel(c, v, cubin, k);
    free(cubin);
    if (st != PIT_SUCCESS) {
        if (k->module) pit_cu.ModuleUnload(k->module);
        free(k);
        return st;
    }
    *out = &k->link;
    return PIT_SUCCESS;
}

static void release_kernel(pit_kernel_link *l)
{
    pit_cuda_kernel *k = (pit_cuda_kernel *)l; /* link is the first member */
    pit_cu.ModuleUnload(k->module);
    free(k);
}

pit_status pit_cuda_get_kernel(pit_cuda_ctx *c, const pit_cuda_variant *v, pit_cuda_kernel **out)
{
    pit_kernel_link *l = NULL;
    pit_status st = pit_kernel_cache_get(pit_cuda_host, &c->lock, &c->kernels, c, v, build_kernel,
                                         release_kernel, &l);
    *out = (pit_cuda_kernel *)l;
    return st;
}

void pit_cuda_free_kernels(pit_cuda_ctx *c)
{
    pit_kernel_cache_clear(&c->kernels, release_kernel);
}

pit_status pit_cuda_launch(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                           unsigned threads, void *args, const char *what)
{
    if (gx == 0 || gy == 0 || gz == 0) return PIT_SUCCESS;
    if (gy > 65535 || gz > 65535)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "%s: grid %ux%ux%u exceeds the device's limits", what,
                                    gx, gy, gz);
    void *params[] = {args};
    CU_CHECK(pit_cu.LaunchKernel(k->fn, gx, gy, gz, threads, 1, 1, (unsigned)k->smem_bytes, s, params, NULL),
             what);
    return PIT_SUCCESS;
}

/* gx CTAs in clusters of `size` along x; attr is the one attribute */
static CUlaunchConfig cluster_config(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned size,
                                     unsigned threads, CUlaunchAttribute *attr)
{
    memset(attr, 0, sizeof *attr);
    attr->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr->value.clusterDim.x = size;
    attr->value.clusterDim.y = 1;
    attr->value.clusterDim.z = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = gx;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = threads;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = (unsigned)k->smem_bytes;
    cfg.hStream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

int pit_cuda_pair_capacity(pit_cuda_kernel *k, unsigned threads)
{
    if (k->pairs_held == 0) { /* asked once a kernel, not every launch */
        int n = 0;
        if (pit_cu.LaunchKernelEx && pit_cu.OccupancyMaxActiveClusters) {
            CUlaunchAttribute attr;
            CUlaunchConfig cfg = cluster_config(k, NULL, 2, 2, threads, &attr);
            if (pit_cu.OccupancyMaxActiveClusters(&n, k->fn, &cfg) != CUDA_SUCCESS) n = 0;
        }
        k->pairs_held = n > 0 ? n : -1;
    }
    return k->pairs_held > 0 ? k->pairs_held : 0;
}

pit_status pit_cuda_launch_clusters(const pit_cuda_kernel *k, CUstream s, unsigned gx, unsigned size,
                                    unsigned threads, void *args, const char *what)
{
    if (gx == 0) return PIT_SUCCESS;
    if (!pit_cu.LaunchKernelEx || size == 0 || gx % size)
        return pit_cuda_host->error(PIT_ERR_UNSUPPORTED, "%s: no launch of %u CTAs in clusters of %u", what, gx,
                                    size);
    CUlaunchAttribute attr;
    CUlaunchConfig cfg = cluster_config(k, s, gx, size, threads, &attr);
    void *params[] = {args};
    CU_CHECK(pit_cu.LaunchKernelEx(&cfg, k->fn, params, NULL), what);
    return PIT_SUCCESS;
}
