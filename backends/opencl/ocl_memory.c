/*
 * ocl_memory.c - the OpenCL plug-in's memory entries: buffers, pooled
 * scratch blocks, copies and fills, what a wrapped cl_mem holds, and host
 * memory used in place on a device whose memory is the host's.
 */
#include <string.h>

#include "ocl_internal.h"

/* ---- memory ------------------------------------------------------------------------ */

/* The errors of clCreateBuffer that say the memory is not there: a size
 * above CL_DEVICE_MAX_MEM_ALLOC_SIZE is one too. */
static int allocation_error(cl_int err)
{
    return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
           err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE;
}

pit_status ocl_buffer_create(const ocl_ctx *c, size_t bytes, const char *what, cl_mem *out)
{
    cl_int err = CL_SUCCESS;
    /* OpenCL refuses empty buffers; an empty tensor still needs a handle. */
    *out = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err == CL_SUCCESS)
        return PIT_SUCCESS;
    *out = NULL;
    return ocl_host->error(allocation_error(err) ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND,
                           "clCreateBuffer(%s, %zu bytes) failed: %d %s (the device's largest "
                           "allocation is %llu bytes)", what, bytes, (int)err,
                           ocl_error_name(err), (unsigned long long)c->max_alloc);
}

pit_status ocl_mem_alloc(void *bctx, size_t bytes, void **mem)
{
    ocl_ctx *c = bctx;
    if (ocl_host->inject_alloc_failure && ocl_host->inject_alloc_failure())
        return ocl_host->error(PIT_ERR_OUT_OF_MEMORY,
                               "clCreateBuffer(%zu bytes) failed: injected allocation "
                               "failure (PIT_FAULT_ALLOC)",
                               bytes);
    cl_mem m;
    OCL_TRY(ocl_buffer_create(c, bytes, "buffer", &m));
    *mem = m;
    return PIT_SUCCESS;
}

void ocl_mem_free(void *bctx, void *mem)
{
    (void)bctx;
    if (mem)
        clReleaseMemObject((cl_mem)mem);
}

pit_status ocl_block_new(ocl_ctx *c, cl_command_queue q, size_t bytes, const char *what,
                         ocl_block *b)
{
    memset(b, 0, sizeof *b);
    bytes = bytes ? bytes : 4; /* OpenCL refuses empty buffers */
    if (c->scratch.alloc) {
        void *mem = NULL;
        OCL_TRY(c->scratch.alloc(c->scratch.owner, bytes, q, &mem));
        b->mem = mem;
    } else {
        OCL_TRY(ocl_buffer_create(c, bytes, what, &b->mem));
    }
    b->bytes = bytes;
    b->from = c->scratch;
    b->queue = q;
    return PIT_SUCCESS;
}

void ocl_block_release(ocl_block *b)
{
    if (b->mem && b->from.free)
        b->from.free(b->from.owner, b->mem, b->queue);
    else if (b->mem)
        clReleaseMemObject(b->mem);
    memset(b, 0, sizeof *b);
}

pit_status ocl_set_scratch_allocator(void *bctx, const pit_scratch_allocator *a)
{
    ocl_ctx *c = bctx;
    static const pit_scratch_allocator own;
    c->scratch = a ? *a : own;
    return PIT_SUCCESS;
}

pit_status ocl_mem_write(void *bctx, void *stream, void *mem, size_t offset,
                         const void *host, size_t bytes)
{
    (void)bctx;
    ocl_stream *s = stream;
    if (bytes == 0)
        return PIT_SUCCESS;
    return OCL_CHECK("clEnqueueWriteBuffer", clEnqueueWriteBuffer(s->queue, (cl_mem)mem,
                                                                  CL_TRUE, offset, bytes,
                                                                  host, 0, NULL, NULL));
}

pit_status ocl_mem_read(void *bctx, void *stream, const void *mem, size_t offset,
                        void *host, size_t bytes)
{
    (void)bctx;
    ocl_stream *s = stream;
    if (bytes == 0)
        return PIT_SUCCESS;
    return OCL_CHECK("clEnqueueReadBuffer", clEnqueueReadBuffer(s->queue, (cl_mem)mem,
                                                                CL_TRUE, offset, bytes, host,
                                                                0, NULL, NULL));
}

pit_status ocl_fill32(cl_command_queue q, cl_mem mem, size_t offset, uint32_t pattern,
                      size_t bytes)
{
    if (bytes == 0)
        return PIT_SUCCESS;
    if (bytes % 4 != 0 || offset % 4 != 0)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT,
                               "mem_fill32: offset %zu and size %zu must be multiples of 4",
                               offset, bytes);
    cl_uint p = pattern;
    return OCL_CHECK("clEnqueueFillBuffer",
                     clEnqueueFillBuffer(q, mem, &p, sizeof p, offset, bytes, 0, NULL, NULL));
}

pit_status ocl_mem_fill32(void *bctx, void *stream, void *mem, size_t offset,
                          uint32_t pattern, size_t bytes)
{
    (void)bctx;
    ocl_stream *s = stream;
    return ocl_fill32(s->queue, (cl_mem)mem, offset, pattern, bytes);
}

/* Device-to-device copy, asynchronous on the stream. */
pit_status ocl_mem_copy(void *bctx, void *stream, void *dst, size_t dst_offset,
                        const void *src, size_t src_offset, size_t bytes)
{
    (void)bctx;
    ocl_stream *s = stream;
    if (bytes == 0)
        return PIT_SUCCESS;
    return OCL_CHECK("clEnqueueCopyBuffer",
                     clEnqueueCopyBuffer(s->queue, (cl_mem)src, (cl_mem)dst, src_offset,
                                         dst_offset, bytes, 0, NULL, NULL));
}

/* A cl_mem the caller wraps: a buffer (not an image) of this pit context's
 * cl_context, as stream_wrap asks of a queue; its size is the buffer's own
 * (a sub-buffer's, not its parent's), counted from the handle's origin. */
pit_status ocl_mem_query(void *bctx, const void *mem, size_t need, size_t *bytes)
{
    ocl_ctx *c = bctx;
    (void)need;
    cl_mem m = (cl_mem)(uintptr_t)mem;
    cl_context mctx = NULL;
    cl_mem_object_type type = 0;
    cl_int err = clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL);
    if (err == CL_INVALID_MEM_OBJECT)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl: data %p is not a cl_mem", mem);
    OCL_TRY(OCL_CHECK("clGetMemObjectInfo(CL_MEM_CONTEXT)", err));
    if (mctx != c->context)
        return ocl_host->error(PIT_ERR_CONTEXT_MISMATCH, "opencl: the cl_mem belongs to another "
                               "cl_context than the pit context's");
    OCL_TRY(OCL_CHECK("clGetMemObjectInfo(CL_MEM_TYPE)",
                      clGetMemObjectInfo(m, CL_MEM_TYPE, sizeof type, &type, NULL)));
    if (type != CL_MEM_OBJECT_BUFFER)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl: the cl_mem is an image "
                               "(type 0x%x), not a buffer", (unsigned)type);
    return OCL_CHECK("clGetMemObjectInfo(CL_MEM_SIZE)",
                     clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof *bytes, bytes, NULL));
}

/* Host memory used in place as a buffer of the device: over exactly the
 * view's bytes, so the buffer's size (mem_query) is the view's extent. Only
 * where the device's memory is the host's: elsewhere USE_HOST_PTR would be
 * a hidden copy each way. */
pit_status ocl_mem_wrap_host(void *bctx, void *host, size_t bytes, int read_only,
                             void **mem)
{
    ocl_ctx *c = bctx;
    if (!c->host_memory)
        return ocl_host->error(PIT_ERR_INVALID_ARGUMENT, "opencl: host memory (DLPack kDLCPU) on "
                               "%s, whose memory is not the host's (a CPU device or one with "
                               "CL_DEVICE_HOST_UNIFIED_MEMORY takes it); copy it in with "
                               "pit_tensor_upload", c->identity);
    cl_mem_flags flags = CL_MEM_USE_HOST_PTR | (read_only ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE);
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(c->context, flags, bytes, host, &err);
    if (err != CL_SUCCESS)
        return ocl_host->error(allocation_error(err) ? PIT_ERR_OUT_OF_MEMORY : PIT_ERR_BACKEND,
                               "clCreateBuffer(CL_MEM_USE_HOST_PTR, %p, %zu bytes) failed: %d %s",
                               host, bytes, (int)err, ocl_error_name(err));
    *mem = m;
    return PIT_SUCCESS;
}

/* OpenCL guarantees the host memory of a USE_HOST_PTR buffer holds the
 * device's writes only once a map of it completes, so a buffer the device may
 * have written is mapped for reading and unmapped, waiting for both (the
 * caller may free the memory next), before it is released. */
static pit_status host_readback(cl_command_queue q, cl_mem m)
{
    cl_mem_flags flags = 0;
    size_t size = 0;
    OCL_TRY(OCL_CHECK("clGetMemObjectInfo(CL_MEM_FLAGS)",
                      clGetMemObjectInfo(m, CL_MEM_FLAGS, sizeof flags, &flags, NULL)));
    if (flags & CL_MEM_READ_ONLY)
        return PIT_SUCCESS;
    OCL_TRY(OCL_CHECK("clGetMemObjectInfo(CL_MEM_SIZE)",
                      clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL)));
    cl_int err = CL_SUCCESS;
    void *p = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ, 0, size, 0, NULL, NULL, &err);
    OCL_TRY(OCL_CHECK("clEnqueueMapBuffer(CL_MAP_READ)", err));
    cl_event done = NULL;
    OCL_TRY(OCL_CHECK("clEnqueueUnmapMemObject", clEnqueueUnmapMemObject(q, m, p, 0, NULL, &done)));
    pit_status st = OCL_CHECK("clWaitForEvents(unmap)", clWaitForEvents(1, &done));
    clReleaseEvent(done);
    return st;
}

pit_status ocl_mem_unwrap_host(void *bctx, void *stream, void *mem)
{
    (void)bctx;
    ocl_stream *s = stream;
    pit_status st = host_readback(s->queue, (cl_mem)mem);
    clReleaseMemObject((cl_mem)mem);
    return st;
}
