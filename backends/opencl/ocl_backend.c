/*
 * ocl_backend.c - the OpenCL plug-in's table: devices, contexts, streams
 * and events (memory: ocl_memory.c). The operators live in ops/, one file per family;
 * program building and caching in ocl_program.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"

const pit_host *ocl_host;

#define OCL_MAX_DEVICES 64
static ocl_device g_devices[OCL_MAX_DEVICES];
static int g_device_count;

/* ---- errors ---------------------------------------------------------------- */

const char *ocl_error_name(cl_int err)
{
    switch (err) {
#define N(x) case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE)
    N(CL_COMPILER_NOT_AVAILABLE) N(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY) N(CL_PROFILING_INFO_NOT_AVAILABLE)
    N(CL_MEM_COPY_OVERLAP) N(CL_IMAGE_FORMAT_MISMATCH) N(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    N(CL_BUILD_PROGRAM_FAILURE) N(CL_MAP_FAILURE) N(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) N(CL_COMPILE_PROGRAM_FAILURE)
    N(CL_LINKER_NOT_AVAILABLE) N(CL_LINK_PROGRAM_FAILURE) N(CL_DEVICE_PARTITION_FAILED)
    N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) N(CL_INVALID_VALUE) N(CL_INVALID_DEVICE_TYPE)
    N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT)
    N(CL_INVALID_QUEUE_PROPERTIES) N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_HOST_PTR)
    N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) N(CL_INVALID_IMAGE_SIZE)
    N(CL_INVALID_SAMPLER) N(CL_INVALID_BINARY) N(CL_INVALID_BUILD_OPTIONS)
    N(CL_INVALID_PROGRAM) N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME)
    N(CL_INVALID_KERNEL_DEFINITION) N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX)
    N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE) N(CL_INVALID_KERNEL_ARGS)
    N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE) N(CL_INVALID_WORK_ITEM_SIZE)
    N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST) N(CL_INVALID_EVENT)
    N(CL_INVALID_OPERATION) N(CL_INVALID_GL_OBJECT) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_MIP_LEVEL) N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_INVALID_IMAGE_DESCRIPTOR) N(CL_INVALID_COMPILER_OPTIONS)
    N(CL_INVALID_LINKER_OPTIONS) N(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
    }
}

/* Copies src into out (cap bytes), truncating; intended where vendor strings
 * may be longer than pit's fixed fields. */
static void copy_truncated(char *out, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, src, n);
    out[n] = '\0';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

pit_status ocl_check(cl_int err, const char *what, const char *file, int line)
{
    if (err == CL_SUCCESS)
        return PIT_SUCCESS;
    pit_status st = PIT_ERR_BACKEND;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
        st = PIT_ERR_OUT_OF_MEMORY;
    return ocl_host->error(st, "%s failed: %d %s at %s:%d", what, (int)err,
                           ocl_error_name(err), base_name(file), line);
}

/* ---- devices ------------------------------------------------------------------ */

/* Appends the devices of one type from every platform, so GPUs come first. */
static pit_status collect_devices(const cl_platform_id *platforms, cl_uint np,
                                  cl_device_type type)
{
    for (cl_uint p = 0; p < np; ++p) {
        cl_device_id ids[OCL_MAX_DEVICES];
        cl_uint n = 0;
        cl_int err = clGetDeviceIDs(platforms[p], type, OCL_MAX_DEVICES, ids, &n);
        if (err == CL_DEVICE_NOT_FOUND)
            continue;
        OCL_TRY(OCL_CHECK("clGetDeviceIDs", err));
        for (cl_uint i = 0; i < n && g_device_count < OCL_MAX_DEVICES; ++i) {
            g_devices[g_device_count].platform = platforms[p];
            g_devices[g_device_count].id = ids[i];
            g_devices[g_device_count].type = type;
            ++g_device_count;
        }
    }
    return PIT_SUCCESS;
}

static pit_status ocl_init(const pit_host *host)
{
    (void)host; /* kept from registration */
    cl_platform_id platforms[16];
    cl_uint np = 0;
    g_device_count = 0;
    cl_int err = clGetPlatformIDs(16, platforms, &np);
    if (err != CL_SUCCESS || np == 0)
        return ocl_host->error(PIT_ERR_NO_DEVICE,
                               "no OpenCL platform found (clGetPlatformIDs returned %d %s)",
                               (int)err, ocl_error_name(err));
    if (np > 16)
        np = 16;
    OCL_TRY(collect_devices(platforms, np, CL_DEVICE_TYPE_GPU));
    OCL_TRY(collect_devices(platforms, np, CL_DEVICE_TYPE_CPU));
    OCL_TRY(collect_devices(platforms, np, CL_DEVICE_TYPE_ACCELERATOR));
    if (g_device_count == 0)
        return ocl_host->error(PIT_ERR_NO_DEVICE,
                               "no OpenCL GPU, CPU or accelerator device on %u platform(s)",
                               (unsigned)np);
    ocl_host->log_debug("opencl: %d device(s) on %u platform(s)", g_device_count, (unsigned)np);
    return PIT_SUCCESS;
}

static void ocl_shutdown(void)
{
    g_device_count = 0;
}

static pit_status ocl_device_count(int *count)
{
    *count = g_device_count;
    return g_device_count ? PIT_SUCCESS
                          : ocl_host->error(PIT_ERR_NO_DEVICE, "no OpenCL device");
}

static pit_status check_index(int index)
{
    if (index < 0 || index >= g_device_count)
        return ocl_host->error(PIT_ERR_DEVICE_INDEX,
                               "OpenCL device index %d out of range (%d device(s))", index,
                               g_device_count);
    return PIT_SUCCESS;
}

/* Reads a string property into a fixed buffer, truncating. */
static pit_status device_string(cl_device_id d, cl_device_info what, const char *label,
                                char *out, size_t cap)
{
    char buf[1024];
    size_t got = 0;
    OCL_TRY(OCL_CHECK(label, clGetDeviceInfo(d, what, sizeof buf - 1, buf, &got)));
    buf[got < sizeof buf ? got : sizeof buf - 1] = '\0';
    copy_truncated(out, cap, buf);
    return PIT_SUCCESS;
}

static int device_has_extension(cl_device_id d, const char *ext)
{
    size_t size = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || size == 0)
        return 0;
    char *list = malloc(size + 1);
    if (!list)
        return 0;
    int found = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, size, list, NULL) == CL_SUCCESS) {
        list[size] = '\0';
        size_t n = strlen(ext);
        for (const char *p = strstr(list, ext); p && !found; p = strstr(p + 1, ext))
            found = (p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0');
    }
    free(list);
    return found;
}

/* Whether the device's global memory is the host's: a CPU device, or one that
 * says so (CL_DEVICE_HOST_UNIFIED_MEMORY, deprecated by OpenCL 2.0 but still
 * answered). Host memory is wrapped in place there (ocl_mem_wrap_host). */
static int ocl_device_takes_host(cl_device_id d, cl_device_type type)
{
    cl_bool unified = CL_FALSE;
    if (type == CL_DEVICE_TYPE_CPU)
        return 1;
    return clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL) ==
               CL_SUCCESS && unified == CL_TRUE;
}

static pit_status ocl_device_info(int index, pit_device_info *info)
{
    OCL_TRY(check_index(index));
    cl_device_id d = g_devices[index].id;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "opencl");
    OCL_TRY(device_string(d, CL_DEVICE_VENDOR, "clGetDeviceInfo(CL_DEVICE_VENDOR)",
                          info->vendor, sizeof info->vendor));
    OCL_TRY(device_string(d, CL_DEVICE_NAME, "clGetDeviceInfo(CL_DEVICE_NAME)", info->name,
                          sizeof info->name));
    OCL_TRY(device_string(d, CL_DRIVER_VERSION, "clGetDeviceInfo(CL_DRIVER_VERSION)",
                          info->driver_version, sizeof info->driver_version));
    cl_device_type type = g_devices[index].type;
    snprintf(info->arch, sizeof info->arch, "%s",
             type == CL_DEVICE_TYPE_GPU   ? "opencl-gpu"
             : type == CL_DEVICE_TYPE_CPU ? "opencl-cpu"
                                          : "opencl-accelerator");
    snprintf(info->tiledb_family, sizeof info->tiledb_family, "%s",
             type == CL_DEVICE_TYPE_CPU ? "opencl-cpu" : "opencl-gpu");
    info->dlpack_device_type = PIT_DLPACK_OPENCL;
    cl_ulong mem = 0;
    cl_uint units = 0;
    OCL_TRY(OCL_CHECK("clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_SIZE)",
                      clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL)));
    OCL_TRY(OCL_CHECK("clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)",
                      clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                                      NULL)));
    info->global_mem_bytes = mem;
    info->compute_units = (int)units;
    info->device_index = index;
    info->has_f16 = device_has_extension(d, "cl_khr_fp16");
    /* vload_half / vstore_half are core OpenCL: f16 is stored as half and
     * computed in f32 whether or not the device has cl_khr_fp16 */
    info->has_f16_storage = 1;
    info->has_bf16 = 1; /* stored as ushort, converted in-kernel */
    info->takes_host_memory = ocl_device_takes_host(d, type);
    return PIT_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------- */

/* "OpenCL 1.2 ..." -> 120. */
static int parse_cl_version(const char *s)
{
    int major = 1, minor = 1;
    if (sscanf(s, "OpenCL %d.%d", &major, &minor) != 2)
        return 110;
    return major * 100 + minor * 10;
}

static pit_status query_context_limits(ocl_ctx *c)
{
    char version[128], name[256], driver[128], platform[256];
    OCL_TRY(device_string(c->device, CL_DEVICE_VERSION, "clGetDeviceInfo(CL_DEVICE_VERSION)",
                          version, sizeof version));
    OCL_TRY(device_string(c->device, CL_DEVICE_NAME, "clGetDeviceInfo(CL_DEVICE_NAME)", name,
                          sizeof name));
    OCL_TRY(device_string(c->device, CL_DRIVER_VERSION,
                          "clGetDeviceInfo(CL_DRIVER_VERSION)", driver, sizeof driver));
    size_t got = 0;
    OCL_TRY(OCL_CHECK("clGetPlatformInfo(CL_PLATFORM_VERSION)",
                      clGetPlatformInfo(c->platform, CL_PLATFORM_VERSION, sizeof platform - 1,
                                        platform, &got)));
    platform[got < sizeof platform ? got : sizeof platform - 1] = '\0';
    /* The disk cache key: a new driver or device never reuses old binaries. */
    const char *parts[] = {name, "|", driver, "|", version, "|", platform};
    c->identity[0] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i) {
        size_t used = strlen(c->identity);
        copy_truncated(c->identity + used, sizeof c->identity - used, parts[i]);
    }
    c->cl_version = parse_cl_version(version);
    c->has_fp16 = device_has_extension(c->device, "cl_khr_fp16");
    cl_ulong local = 0;
    OCL_TRY(OCL_CHECK("clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)",
                      clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local,
                                      &local, NULL)));
    c->local_mem = (size_t)local;
    OCL_TRY(OCL_CHECK("clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                      clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                      sizeof c->max_alloc, &c->max_alloc, NULL)));
    OCL_TRY(OCL_CHECK("clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)",
                      clGetDeviceInfo(c->device, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                                      sizeof c->max_wg, &c->max_wg, NULL)));
    return PIT_SUCCESS;
}

static void ocl_context_destroy(void *bctx)
{
    ocl_ctx *c = bctx;
    if (!c)
        return;
    ocl_dense_release(c);
    ocl_programs_release(c);
    if (c->context)
        clReleaseContext(c->context);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static pit_status ocl_context_create(int index, const pit_switches *switches, void **bctx)
{
    (void)switches; /* none of the switches concerns OpenCL */
    OCL_TRY(check_index(index));
    ocl_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return ocl_host->error(PIT_ERR_INTERNAL, "opencl: pthread_mutex_init failed");
    }
    c->platform = g_devices[index].platform;
    c->device = g_devices[index].id;
    c->host_memory = ocl_device_takes_host(c->device, g_devices[index].type);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform,
                                     0};
    cl_int err = CL_SUCCESS;
    c->context = clCreateContext(props, 1, &c->device, NULL, NULL, &err);
    pit_status st = OCL_CHECK("clCreateContext", err);
    if (st == PIT_SUCCESS)
        st = query_context_limits(c);
    if (st != PIT_SUCCESS) {
        ocl_context_destroy(c);
        return st;
    }
    ocl_host->log_debug("opencl: context on %s (OpenCL %d, fp16 %d, local %zu B)",
                        c->identity, c->cl_version, c->has_fp16, c->local_mem);
    *bctx = c;
    return PIT_SUCCESS;
}

/* ---- streams ---------------------------------------------------------------------- */

static pit_status ocl_stream_create(void *bctx, void **stream)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    cl_int err = CL_SUCCESS;
    s->queue = clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, &err);
    pit_status st = OCL_CHECK("clCreateCommandQueue", err);
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    *stream = s;
    return PIT_SUCCESS;
}

static pit_status ocl_stream_wrap(void *bctx, void *native, void **stream)
{
    ocl_ctx *c = bctx;
    cl_command_queue q = native;
    cl_context qctx = NULL;
    OCL_TRY(OCL_CHECK("clGetCommandQueueInfo(CL_QUEUE_CONTEXT)",
                      clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL)));
    if (qctx != c->context)
        return ocl_host->error(PIT_ERR_CONTEXT_MISMATCH,
                               "stream_wrap: the cl_command_queue belongs to another "
                               "cl_context than the pit context's");
    ocl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    pit_status st = OCL_CHECK("clRetainCommandQueue", clRetainCommandQueue(q));
    if (st != PIT_SUCCESS) {
        free(s);
        return st;
    }
    s->queue = q;
    *stream = s;
    return PIT_SUCCESS;
}

static void ocl_stream_destroy(void *bctx, void *stream)
{
    (void)bctx;
    ocl_stream *s = stream;
    if (!s)
        return;
    ocl_block_release(&s->scratch);
    clReleaseCommandQueue(s->queue);
    free(s);
}

static pit_status ocl_stream_synchronize(void *bctx, void *stream)
{
    (void)bctx;
    ocl_stream *s = stream;
    return OCL_CHECK("clFinish", clFinish(s->queue));
}

/* ---- events -------------------------------------------------------------------------- */

static pit_status ocl_event_record(void *bctx, void *stream, pit_event **event)
{
    ocl_ctx *c = bctx;
    ocl_stream *s = stream;
    pit_event *e = calloc(1, sizeof *e);
    if (!e)
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    pit_status st;
    if (c->cl_version >= 120)
        st = OCL_CHECK("clEnqueueMarkerWithWaitList",
                       clEnqueueMarkerWithWaitList(s->queue, 0, NULL, &e->event));
    else
        st = OCL_CHECK("clEnqueueMarker", clEnqueueMarker(s->queue, &e->event));
    if (st != PIT_SUCCESS) {
        free(e);
        return st;
    }
    *event = e;
    return PIT_SUCCESS;
}

static pit_status event_end_ns(pit_event *e, cl_ulong *ns)
{
    OCL_TRY(OCL_CHECK("clWaitForEvents", clWaitForEvents(1, &e->event)));
    return OCL_CHECK("clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)",
                     clGetEventProfilingInfo(e->event, CL_PROFILING_COMMAND_END, sizeof *ns,
                                             ns, NULL));
}

static pit_status ocl_event_elapsed_ms(void *bctx, pit_event *start, pit_event *end,
                                       double *ms)
{
    (void)bctx;
    cl_ulong t0 = 0, t1 = 0;
    OCL_TRY(event_end_ns(start, &t0));
    OCL_TRY(event_end_ns(end, &t1));
    *ms = ((double)t1 - (double)t0) * 1e-6;
    return PIT_SUCCESS;
}

static void ocl_event_destroy(void *bctx, pit_event *event)
{
    (void)bctx;
    if (!event)
        return;
    if (event->event)
        clReleaseEvent(event->event);
    free(event);
}

/* ---- registration --------------------------------------------------------------------- */

static const pit_backend ocl_backend = {
    .abi_version = PIT_BACKEND_ABI_VERSION,
    .name = "opencl",
    .init = ocl_init,
    .shutdown = ocl_shutdown,
    .device_count = ocl_device_count,
    .device_info = ocl_device_info,
    .context_create = ocl_context_create,
    .context_destroy = ocl_context_destroy,
    .stream_create = ocl_stream_create,
    .stream_wrap = ocl_stream_wrap,
    .stream_destroy = ocl_stream_destroy,
    .stream_synchronize = ocl_stream_synchronize,
    .mem_alloc = ocl_mem_alloc,
    .mem_free = ocl_mem_free,
    .mem_write = ocl_mem_write,
    .mem_read = ocl_mem_read,
    .mem_fill32 = ocl_mem_fill32,
    .event_record = ocl_event_record,
    .event_elapsed_ms = ocl_event_elapsed_ms,
    .event_destroy = ocl_event_destroy,
    .detect = ocl_detect,
    .matmul_sparse = ocl_matmul_sparse,
    .matmul_dense = ocl_matmul_dense,
    .dense_name = ocl_dense_name,
    .mem_copy = ocl_mem_copy,
    .sddmm = ocl_sddmm,
    .softmax_sparse = ocl_softmax_sparse,
    .softmax_sparse_backward = ocl_softmax_sparse_backward,
    .attention_sparse = ocl_attention,
    .moe_route = ocl_moe_route,
    .moe_matmul = ocl_moe_matmul,
    .matmul_rows = ocl_matmul_rows,
    .relu = ocl_relu,
    .transpose = ocl_transpose,
    .mem_query = ocl_mem_query,
    .set_scratch_allocator = ocl_set_scratch_allocator,
    .moe_activation = ocl_moe_activation,
    .attention_ex = ocl_attention_ex,
    .attention_backward = ocl_attention_backward,
    .mem_wrap_host = ocl_mem_wrap_host,
    .mem_unwrap_host = ocl_mem_unwrap_host,
};

__attribute__((visibility("default"))) const pit_backend *
pit_backend_register(const pit_host *host)
{
    if (!host || host->abi_version != PIT_BACKEND_ABI_VERSION)
        return NULL;
    ocl_host = host;
    return &ocl_backend;
}
