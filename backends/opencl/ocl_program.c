/*
 * ocl_program.c - run-time compilation of the embedded OpenCL C sources with
 * tile parameters as -D defines, an in-memory cache per (source, defines) in
 * the context, and program binaries kept in core's disk cache
 * (host->cache_load / cache_store) under the whole text that determines them:
 * device + driver + platform, build options, source.
 *
 * A binary from the disk cache that does not build, or whose program lacks a
 * kernel pit asks for (another program's binary under this key), is dropped
 * from the disk cache and the program is compiled from source once.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define CACHE_KIND "opencl"

/* The disk cache key (malloc'd): device identity, build options, then the
 * parts of the source in order. */
static char *cache_key(const ocl_ctx *c, const program_source *src, const char *options)
{
    const char *head[] = {c->identity, "\n", options, "\n"};
    size_t n = 1;
    for (size_t i = 0; i < 4; ++i)
        n += strlen(head[i]);
    for (cl_uint i = 0; i < src->count; ++i)
        n += strlen(src->parts[i]);
    char *text = malloc(n);
    if (!text)
        return NULL;
    text[0] = '\0';
    for (size_t i = 0; i < 4; ++i)
        strcat(text, head[i]);
    for (cl_uint i = 0; i < src->count; ++i)
        strcat(text, src->parts[i]);
    return text;
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

/* The program built from the disk cache's binary for key, or NULL (none, or
 * it does not build: the caller compiles and stores over it). */
static cl_program load_cached(ocl_ctx *c, const char *key, const char *name, const char *options)
{
    size_t size = 0;
    unsigned char *bin = ocl_host->cache_load ? ocl_host->cache_load(CACHE_KIND, key, &size) : NULL;
    if (!bin)
        return NULL;
    cl_program p = NULL;
    pit_status st = build_from_binary(c, bin, size, options, &p);
    free(bin);
    if (st == PIT_SUCCESS) {
        ocl_host->log_debug("opencl: %s %s loaded from the disk cache", name, options);
        return p;
    }
    ocl_host->log_debug("opencl: cached binary of %s %s rejected, recompiling", name, options);
    return NULL;
}

static void store_binary(cl_program p, const char *key)
{
    size_t size = 0;
    unsigned char *bin = ocl_host->cache_store ? program_binary(p, &size) : NULL;
    if (bin)
        ocl_host->cache_store(CACHE_KIND, key, bin, size);
    free(bin);
}

/* Builds a program: from the disk cache's binary for this device, options and
 * source when there is one (and fresh is 0), else from source, storing its
 * binary. *from_disk says which. */
static pit_status build_program(ocl_ctx *c, const char *name, const char *options, int fresh,
                                cl_program *out, int *from_disk)
{
    program_source src;
    if (!find_source(name, &src))
        return ocl_host->error(PIT_ERR_INTERNAL, "opencl: no kernel source named %s", name);
    char *key = cache_key(c, &src, options);
    if (!key)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    if (fresh && ocl_host->cache_drop)
        ocl_host->cache_drop(CACHE_KIND, key);
    *out = fresh ? NULL : load_cached(c, key, name, options);
    *from_disk = *out != NULL;
    pit_status st = PIT_SUCCESS;
    if (!*out) {
        st = build_from_source(c, name, &src, options, out);
        if (st == PIT_SUCCESS) {
            ocl_host->log_debug("opencl: compiled %s %s", name, options);
            store_binary(*out, key);
        }
    }
    free(key);
    return st;
}

/* After a kernel could not be created from `program`: when the program came
 * from the disk cache, its entry is dropped and the program built from
 * source, once (returns 1, the new program in *fresh, the build's status in
 * *st). A program already replaced so gives its successor. 0: nothing to retry. */
static int rebuild_from_source(ocl_ctx *c, cl_program program, cl_program *fresh, pit_status *st)
{
    int retry = 0;
    pthread_mutex_lock(&c->lock);
    for (ocl_program *e = c->programs; e; e = e->next) {
        if (e->replaced == program) {
            *fresh = e->program;
            *st = PIT_SUCCESS;
            retry = 1;
            break;
        }
        if (e->program != program)
            continue;
        if (e->from_disk) {
            char *options = strchr(e->key, '\n');
            *options = '\0';
            ocl_host->log_debug("opencl: the disk cache's binary of %s %s lacks a kernel: "
                                "compiling it from source", e->key, options + 1);
            cl_program p = NULL;
            int from_disk = 0;
            *st = build_program(c, e->key, options + 1, 1, &p, &from_disk);
            *options = '\n';
            if (*st == PIT_SUCCESS) {
                e->replaced = e->program;
                e->program = p;
                *fresh = p;
            }
            e->from_disk = 0;
            retry = 1;
        }
        break;
    }
    pthread_mutex_unlock(&c->lock);
    return retry;
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
        st = build_program(c, name, options, 0, &entry->program, &entry->from_disk);
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
        if (p->replaced)
            release_program_locked(p->replaced);
        free(p->key);
        free(p);
        p = next;
    }
    c->programs = NULL;
}


static cl_kernel create_kernel_locked(cl_program program, const char *kname, cl_int *err)
{
    pthread_mutex_lock(&kernel_object_lock);
    cl_kernel k = clCreateKernel(program, kname, err);
    pthread_mutex_unlock(&kernel_object_lock);
    return k;
}

pit_status ocl_kernel_new(ocl_ctx *c, cl_program program, const char *kname, cl_kernel *out)
{
    cl_int err = CL_SUCCESS;
    cl_kernel k = create_kernel_locked(program, kname, &err);
    cl_program fresh = NULL;
    pit_status st = PIT_SUCCESS;
    if (err != CL_SUCCESS && rebuild_from_source(c, program, &fresh, &st)) {
        if (st != PIT_SUCCESS)
            return st;
        k = create_kernel_locked(fresh, kname, &err);
    }
    char what[128];
    snprintf(what, sizeof what, "clCreateKernel(%s)", kname);
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
    OCL_TRY(ocl_kernel_new(c, program, kname, &k));
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
