/*
 * ocl_program.c - run-time compilation of the embedded OpenCL C sources with
 * tile parameters as -D defines, an in-memory cache per (source, defines) in
 * the context, and a disk cache of program binaries under host->cache_dir()
 * keyed by a hash of source + defines + device + driver.
 *
 * Disk file: "PITCLBIN", key hash (2 x u64), payload size (u64), payload
 * checksum (u64), payload. Written to a temporary file and renamed, so readers
 * never see half a file; a file whose key or checksum does not match is
 * ignored and rewritten.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ocl_internal.h"

/* Generated at build time from kernels/ *.cl (see CMakeLists.txt). */
#include "pit_attention_cl.h"
#include "pit_common_cl.h"
#include "pit_detect_cl.h"
#include "pit_elementwise_cl.h"
#include "pit_matmul_cl.h"
#include "pit_moe_cl.h"
#include "pit_rows_cl.h"
#include "pit_sddmm_cl.h"
#include "pit_softmax_cl.h"
#include "pit_tile_cl.h"

#define MAX_PARTS 3

/* A program's source: pit_common.cl, the shared files it needs, its family's
 * file; the parts are compiled as one text in this order. */
static const struct {
    const char *name;
    const char *parts[MAX_PARTS];
} ocl_sources[] = {
    {"pit_detect", {ocl_src_pit_common, ocl_src_pit_detect}},
    {"pit_matmul", {ocl_src_pit_common, ocl_src_pit_matmul}},
    {"pit_sddmm", {ocl_src_pit_common, ocl_src_pit_tile, ocl_src_pit_sddmm}},
    {"pit_softmax", {ocl_src_pit_common, ocl_src_pit_softmax}},
    {"pit_moe", {ocl_src_pit_common, ocl_src_pit_tile, ocl_src_pit_moe}},
    {"pit_rows", {ocl_src_pit_common, ocl_src_pit_tile, ocl_src_pit_rows}},
    {"pit_elementwise", {ocl_src_pit_common, ocl_src_pit_elementwise}},
    {"pit_attention", {ocl_src_pit_common, ocl_src_pit_attention}},
};

typedef struct program_source {
    const char *parts[MAX_PARTS];
    cl_uint count;
} program_source;

static int find_source(const char *name, program_source *out)
{
    for (size_t i = 0; i < sizeof ocl_sources / sizeof ocl_sources[0]; ++i)
        if (strcmp(ocl_sources[i].name, name) == 0) {
            out->count = 0;
            while (out->count < MAX_PARTS && ocl_sources[i].parts[out->count]) {
                out->parts[out->count] = ocl_sources[i].parts[out->count];
                out->count++;
            }
            return 1;
        }
    return 0;
}

/* The parts as one malloc'd text (the disk cache key's source). */
static char *source_text(const program_source *src)
{
    size_t n = 1;
    for (cl_uint i = 0; i < src->count; ++i)
        n += strlen(src->parts[i]);
    char *text = malloc(n);
    if (!text)
        return NULL;
    text[0] = '\0';
    for (cl_uint i = 0; i < src->count; ++i)
        strcat(text, src->parts[i]);
    return text;
}

/* ---- hashing (FNV-1a, 64 bit) ---------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_BASIS 0xcbf29ce484222325ull
#define FNV_BASIS2 0x84222325cbf29ce4ull /* second, independent-looking basis */

typedef struct cache_key {
    uint64_t h[2];
} cache_key;

static cache_key make_key(const ocl_ctx *c, const char *source, const char *options)
{
    cache_key k = {{FNV_BASIS, FNV_BASIS2}};
    const char *parts[] = {c->identity, "\n", options, "\n", source};
    for (int j = 0; j < 2; ++j)
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i)
            k.h[j] = fnv1a(k.h[j], parts[i], strlen(parts[i]));
    return k;
}

static int cache_path(const cache_key *k, char *out, size_t cap)
{
    const char *dir = ocl_host->cache_dir ? ocl_host->cache_dir() : NULL;
    if (!dir || !*dir)
        return 0;
    int n = snprintf(out, cap, "%s/opencl-%016llx%016llx.bin", dir,
                     (unsigned long long)k->h[0], (unsigned long long)k->h[1]);
    return n > 0 && (size_t)n < cap;
}

/* ---- disk cache ------------------------------------------------------------------- */

#define BIN_MAGIC "PITCLBIN"
typedef struct bin_header {
    char magic[8];
    uint64_t key[2];
    uint64_t size;
    uint64_t checksum;
} bin_header;

/* Reads a verified binary; NULL when absent, foreign or corrupt. */
static unsigned char *disk_load(const char *path, const cache_key *k, size_t *size)
{
    FILE *f = ocl_host->open_cache_entry(path);
    if (!f)
        return NULL;
    bin_header h;
    unsigned char *data = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, BIN_MAGIC, 8) == 0 &&
        h.key[0] == k->h[0] && h.key[1] == k->h[1] && h.size > 0 &&
        h.size < ((uint64_t)1 << 31)) {
        data = malloc((size_t)h.size);
        if (data && (fread(data, 1, (size_t)h.size, f) != h.size ||
                     fnv1a(FNV_BASIS, data, (size_t)h.size) != h.checksum)) {
            ocl_host->log_debug("opencl: cache file %s is corrupt, recompiling", path);
            free(data);
            data = NULL;
        }
        *size = (size_t)h.size;
    }
    fclose(f);
    return data;
}

static void disk_store(const char *path, const cache_key *k, const unsigned char *data,
                       size_t size)
{
    static unsigned counter;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
             __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED));
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ocl_host->log_debug("opencl: cannot write cache file %s", tmp);
        return;
    }
    bin_header h;
    memcpy(h.magic, BIN_MAGIC, 8);
    h.key[0] = k->h[0];
    h.key[1] = k->h[1];
    h.size = size;
    h.checksum = fnv1a(FNV_BASIS, data, size);
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        ocl_host->log_debug("opencl: cannot write cache file %s", path);
    }
}

/* Fetches the device binary of a built program (malloc'd). */
static unsigned char *program_binary(cl_program p, size_t *size)
{
    size_t n = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS ||
        n == 0)
        return NULL;
    unsigned char *data = malloc(n);
    if (!data)
        return NULL;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof data, &data, NULL) != CL_SUCCESS) {
        free(data);
        return NULL;
    }
    *size = n;
    return data;
}

/* ---- building -------------------------------------------------------------------- */

/* PoCL 3.1 races on its process-wide cache of built kernel libraries when
 * threads build, create or release programs and kernels at once (an
 * assertion in pocl_release_dlhandle_cache aborted test_threads about 1 run
 * in 10, also across contexts): those calls go through one process-wide
 * lock. Enqueues do not. */
static pthread_mutex_t kernel_object_lock = PTHREAD_MUTEX_INITIALIZER;

static cl_int build_locked(cl_program p, cl_device_id dev, const char *options)
{
    pthread_mutex_lock(&kernel_object_lock);
    cl_int err = clBuildProgram(p, 1, &dev, options, NULL, NULL);
    pthread_mutex_unlock(&kernel_object_lock);
    return err;
}

static void release_program_locked(cl_program p)
{
    pthread_mutex_lock(&kernel_object_lock);
    clReleaseProgram(p);
    pthread_mutex_unlock(&kernel_object_lock);
}

/* Turns a failed clBuildProgram into PIT_ERR_COMPILE with the build log. */
static pit_status build_error(const ocl_ctx *c, cl_program p, cl_int err, const char *name,
                              const char *options)
{
    char log[1536];
    size_t got = 0;
    log[0] = '\0';
    if (clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log,
                              &got) != CL_SUCCESS) {
        /* The log is longer than our buffer: take its head. */
        size_t full = 0;
        clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &full);
        char *all = malloc(full + 1);
        if (all && clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, full, all,
                                         NULL) == CL_SUCCESS) {
            all[full] = '\0';
            snprintf(log, sizeof log, "%s", all);
        }
        free(all);
    }
    log[sizeof log - 1] = '\0';
    pit_status st = (err == CL_OUT_OF_HOST_MEMORY) ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_COMPILE;
    return ocl_host->error(st, "clBuildProgram(%s %s) failed: %d %s; build log: %s", name,
                           options, (int)err, ocl_error_name(err), log);
}

static pit_status build_from_binary(ocl_ctx *c, const unsigned char *bin, size_t size,
                                    const char *options, cl_program *out)
{
    cl_int err = CL_SUCCESS, bin_status = CL_SUCCESS;
    cl_program p = clCreateProgramWithBinary(c->context, 1, &c->device, &size, &bin,
                                             &bin_status, &err);
    if (err != CL_SUCCESS || bin_status != CL_SUCCESS)
        return PIT_ERR_COMPILE; /* quietly: the caller recompiles from source */
    if (build_locked(p, c->device, options) != CL_SUCCESS) {
        release_program_locked(p);
        return PIT_ERR_COMPILE;
    }
    *out = p;
    return PIT_SUCCESS;
}

static pit_status build_from_source(ocl_ctx *c, const char *name, program_source *src,
                                    const char *options, cl_program *out)
{
    cl_int err = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource(c->context, src->count, src->parts, NULL, &err);
    OCL_TRY(OCL_CHECK("clCreateProgramWithSource", err));
    err = build_locked(p, c->device, options);
    if (err != CL_SUCCESS) {
        pit_status st = build_error(c, p, err, name, options);
        release_program_locked(p);
        return st;
    }
    *out = p;
    return PIT_SUCCESS;
}

/* Builds a program: from the disk cache when a valid binary is there, else
 * from source (and then stores the binary). */
static pit_status build_program(ocl_ctx *c, const char *name, const char *options,
                                cl_program *out)
{
    program_source src;
    if (!find_source(name, &src))
        return ocl_host->error(PIT_ERR_INTERNAL, "opencl: no kernel source named %s", name);
    char *keytext = source_text(&src);
    if (!keytext)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    cache_key k = make_key(c, keytext, options);
    free(keytext);

    char path[4096];
    int have_path = cache_path(&k, path, sizeof path);
    if (have_path) {
        size_t size = 0;
        unsigned char *bin = disk_load(path, &k, &size);
        if (bin) {
            pit_status st = build_from_binary(c, bin, size, options, out);
            free(bin);
            if (st == PIT_SUCCESS) {
                ocl_host->log_debug("opencl: %s %s loaded from %s", name, options, path);
                return PIT_SUCCESS;
            }
            ocl_host->log_debug("opencl: cached binary %s rejected, recompiling", path);
        }
    }
    OCL_TRY(build_from_source(c, name, &src, options, out));
    ocl_host->log_debug("opencl: compiled %s %s", name, options);
    if (have_path) {
        size_t size = 0;
        unsigned char *bin = program_binary(*out, &size);
        if (bin) {
            disk_store(path, &k, bin, size);
            free(bin);
        }
    }
    return PIT_SUCCESS;
}

pit_status ocl_program_get(ocl_ctx *c, const char *name, const char *defines,
                           cl_program *out)
{
    char options[1024];
    snprintf(options, sizeof options, "-cl-std=%s %s", c->cl_version >= 120 ? "CL1.2" : "CL1.1",
             defines);
    size_t keylen = strlen(name) + 1 + strlen(options) + 1;
    pthread_mutex_lock(&c->lock);
    for (ocl_program *p = c->programs; p; p = p->next) {
        if (strncmp(p->key, name, strlen(name)) == 0 && p->key[strlen(name)] == '\n' &&
            strcmp(p->key + strlen(name) + 1, options) == 0) {
            *out = p->program;
            pthread_mutex_unlock(&c->lock);
            return PIT_SUCCESS;
        }
    }
    ocl_program *entry = calloc(1, sizeof *entry);
    char *key = malloc(keylen);
    pit_status st = PIT_SUCCESS;
    if (!entry || !key)
        st = ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    if (st == PIT_SUCCESS)
        st = build_program(c, name, options, &entry->program);
    if (st != PIT_SUCCESS) {
        free(entry);
        free(key);
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    snprintf(key, keylen, "%s\n%s", name, options);
    entry->key = key;
    entry->next = c->programs;
    c->programs = entry;
    *out = entry->program;
    pthread_mutex_unlock(&c->lock);
    return PIT_SUCCESS;
}

void ocl_programs_release(ocl_ctx *c)
{
    ocl_program *p = c->programs;
    while (p) {
        ocl_program *next = p->next;
        release_program_locked(p->program);
        free(p->key);
        free(p);
        p = next;
    }
    c->programs = NULL;
}


pit_status ocl_kernel_new(cl_program program, const char *kname, cl_kernel *out)
{
    cl_int err = CL_SUCCESS;
    char what[128];
    snprintf(what, sizeof what, "clCreateKernel(%s)", kname);
    pthread_mutex_lock(&kernel_object_lock);
    cl_kernel k = clCreateKernel(program, kname, &err);
    pthread_mutex_unlock(&kernel_object_lock);
    OCL_TRY(OCL_CHECK(what, err));
    *out = k;
    return PIT_SUCCESS;
}

void ocl_kernel_release(cl_kernel k)
{
    pthread_mutex_lock(&kernel_object_lock);
    clReleaseKernel(k);
    pthread_mutex_unlock(&kernel_object_lock);
}

pit_status ocl_kernel_create(ocl_ctx *c, cl_program program, const char *kname, size_t wg,
                             cl_kernel *out)
{
    char what[128];
    cl_kernel k;
    OCL_TRY(ocl_kernel_new(program, kname, &k));
    size_t max = 0;
    snprintf(what, sizeof what, "clGetKernelWorkGroupInfo(%s)", kname);
    pit_status st = OCL_CHECK(what, clGetKernelWorkGroupInfo(k, c->device,
                                                             CL_KERNEL_WORK_GROUP_SIZE,
                                                             sizeof max, &max, NULL));
    if (st == PIT_SUCCESS && wg > max)
        st = ocl_host->error(PIT_ERR_UNSUPPORTED,
                             "opencl: %s needs %zu work-items per group, the device "
                             "allows %zu for this kernel",
                             kname, wg, max);
    if (st != PIT_SUCCESS) {
        ocl_kernel_release(k);
        return st;
    }
    *out = k;
    return PIT_SUCCESS;
}

/* ---- kernel arguments and launches ------------------------------------------------- */

void ocl_args_begin(ocl_args *a, cl_kernel kernel, const char *kname)
{
    a->kernel = kernel;
    a->kname = kname;
    a->next = 0;
    a->status = PIT_SUCCESS;
}

void ocl_arg_raw(ocl_args *a, size_t size, const void *value)
{
    if (a->status == PIT_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "clSetKernelArg(%s, %u)", a->kname, (unsigned)a->next);
        a->status = OCL_CHECK(what, clSetKernelArg(a->kernel, a->next, size, value));
    }
    a->next++;
}

void ocl_arg_mem(ocl_args *a, cl_mem m)
{
    ocl_arg_raw(a, sizeof m, &m);
}

void ocl_arg_int(ocl_args *a, cl_int v)
{
    ocl_arg_raw(a, sizeof v, &v);
}

void ocl_arg_long(ocl_args *a, cl_long v)
{
    ocl_arg_raw(a, sizeof v, &v);
}

pit_status ocl_launch(ocl_args *a, cl_command_queue q, cl_uint dims, const size_t *global,
                      const size_t *local)
{
    pit_status st = a->status;
    for (cl_uint d = 0; d < dims && st == PIT_SUCCESS; ++d)
        if (global[d] == 0)
            goto out; /* nothing to do */
    if (st == PIT_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", a->kname);
        st = OCL_CHECK(what, clEnqueueNDRangeKernel(q, a->kernel, dims, NULL, global, local,
                                                    0, NULL, NULL));
    }
out:
    /* The queue keeps what it needs of an enqueued kernel. */
    ocl_kernel_release(a->kernel);
    a->kernel = NULL;
    return st;
}
