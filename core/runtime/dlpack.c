/* core/runtime/dlpack.c - zero-copy exchange with frameworks through DLPack:
 * the unversioned structs of DLPack 0.x and the versioned ones of 1.x. */
#include <stdlib.h>
#include <string.h>

#include "dlpack_versioned.h"
#include "internal.h"

_Static_assert(PIT_DLPACK_CPU == kDLCPU && PIT_DLPACK_CUDA == kDLCUDA &&
                   PIT_DLPACK_OPENCL == kDLOpenCL && PIT_DLPACK_ROCM == kDLROCM,
               "backend.h's DLPack device types are DLPack's");

/* kDLBool (DLPack 0.8+, PyTorch's torch.bool): one byte an element; named by
 * its value so that older dlpack headers build too */
#define PIT_DL_BOOL 6

static pit_status dtype_from_dlpack(DLDataType t, pit_dtype *out)
{
    if (t.lanes != 1)
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "DLPack tensor has %u lanes; pit needs 1",
                         (unsigned)t.lanes);
    if (t.code == kDLFloat && t.bits == 32)
        *out = PIT_F32;
    else if (t.code == kDLFloat && t.bits == 16)
        *out = PIT_F16;
    else if (t.code == kDLBfloat && t.bits == 16)
        *out = PIT_BF16;
    else if (t.code == kDLInt && t.bits == 32)
        *out = PIT_I32;
    else if ((t.code == kDLUInt || t.code == PIT_DL_BOOL) && t.bits == 8)
        *out = PIT_U8;
    else
        return pit_error(PIT_ERR_UNSUPPORTED_DTYPE, "DLPack dtype code %u, %u bits is not "
                         "supported (f32, f16, bf16, i32, u8/bool)", (unsigned)t.code,
                         (unsigned)t.bits);
    return PIT_SUCCESS;
}

static DLDataType dtype_to_dlpack(pit_dtype d)
{
    DLDataType t = {.code = kDLFloat, .bits = 32, .lanes = 1};
    if (d == PIT_F16)
        t.bits = 16;
    else if (d == PIT_BF16) {
        t.code = kDLBfloat;
        t.bits = 16;
    } else if (d == PIT_I32)
        t.code = kDLInt;
    else if (d == PIT_U8) {
        t.code = kDLUInt;
        t.bits = 8;
    }
    return t;
}

void pit_dlpack_release(pit_tensor *t)
{
    if (!t->dl_import)
        return;
    if (t->dl_versioned) {
        DLManagedTensorVersioned *m = t->dl_import;
        if (m->deleter)
            m->deleter(m);
    } else {
        DLManagedTensor *m = t->dl_import;
        if (m->deleter)
            m->deleter(m);
    }
    t->dl_import = NULL;
}

/* The checks of both imports, then a wrap of the view (which checks it
 * against its buffer). Host memory (kDLCPU, any device id) goes to the
 * backend's host wrap, which refuses it by name where the device's memory is
 * not the host's. read_only: DLPack 1.x's flag. */
static pit_status import_view(pit_context *ctx, const DLTensor *t, int read_only, pit_tensor **out)
{
    int want = ctx->info.dlpack_device_type;
    int host = (int)t->device.device_type == PIT_DLPACK_CPU;
    if (!host && ((int)t->device.device_type != want || t->device.device_id != ctx->device_index))
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "DLPack tensor lives on device type %d id %d; "
                         "this context is %s device %d (DLPack type %d)",
                         (int)t->device.device_type, t->device.device_id, ctx->be->name,
                         ctx->device_index, want);
    pit_dtype dtype = PIT_F32; /* set by dtype_from_dlpack on success */
    PIT_TRY(dtype_from_dlpack(t->dtype, &dtype));
    if (t->ndim < 1 || t->ndim > PIT_MAX_RANK)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "DLPack tensor has %d dimensions; pit takes 1..%d",
                         t->ndim, PIT_MAX_RANK);
    if (host)
        PIT_TRY(pit_tensor_wrap_host(ctx, dtype, t->ndim, t->shape, t->strides, t->data,
                                     (size_t)t->byte_offset, read_only, out));
    else
        PIT_TRY(pit_tensor_wrap(ctx, dtype, t->ndim, t->shape, t->strides, t->data,
                                (size_t)t->byte_offset, out));
    (*out)->read_only = read_only;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_from_dlpack(pit_context *ctx, struct DLManagedTensor *m,
                                          pit_tensor **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(out != NULL, "tensor");
    *out = NULL; /* on every failure below */
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(m != NULL, "managed");
    PIT_TRY(import_view(ctx, &m->dl_tensor, 0, out));
    (*out)->dl_import = m;
    return PIT_SUCCESS;
}

/* DLPack 1.x: a later major version may lay the struct out differently, so
 * nothing past the version is read then. */
PIT_API pit_status pit_tensor_from_dlpack_versioned(pit_context *ctx,
                                                    struct DLManagedTensorVersioned *m,
                                                    pit_tensor **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(out != NULL, "tensor");
    *out = NULL; /* on every failure below */
    PIT_CHECK_ARG(ctx != NULL, "ctx");
    PIT_CHECK_ARG(m != NULL, "managed");
    if (m->version.major != 1)
        return pit_error(PIT_ERR_UNSUPPORTED, "DLPack version %u.%u: pit reads version 1.x",
                         (unsigned)m->version.major, (unsigned)m->version.minor);
    PIT_TRY(import_view(ctx, &m->dl_tensor, (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, out));
    (*out)->dl_import = m;
    (*out)->dl_versioned = 1;
    return PIT_SUCCESS;
}

/* An export keeps shape and strides in the same allocation as the managed
 * tensor (first: the deleter frees the allocation from its address). */
typedef struct pit_dl_export {
    union {
        DLManagedTensor v0;
        DLManagedTensorVersioned v1;
    } managed;
    int64_t shape[PIT_MAX_RANK];
    int64_t strides[PIT_MAX_RANK];
} pit_dl_export;

static void delete_export(DLManagedTensor *m)
{
    free(m);
}

static void delete_export_versioned(DLManagedTensorVersioned *m)
{
    free(m);
}

/* The DLTensor of both exports: a view of the tensor's memory, no copy. */
static void describe_export(const pit_tensor *tensor, DLTensor *t, int64_t *shape, int64_t *strides)
{
    const pit_tdesc *d = &tensor->d;
    memcpy(shape, d->shape, sizeof d->shape);
    memcpy(strides, d->strides, sizeof d->strides);
    t->data = d->mem;
    t->device.device_type = (DLDeviceType)tensor->ctx->info.dlpack_device_type;
    t->device.device_id = tensor->ctx->device_index;
    t->ndim = d->rank;
    t->dtype = dtype_to_dlpack(d->dtype);
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = d->offset;
}

PIT_API pit_status pit_tensor_to_dlpack(pit_tensor *tensor, struct DLManagedTensor **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(tensor != NULL, "tensor");
    PIT_CHECK_ARG(out != NULL, "managed");
    *out = NULL;
    if (tensor->read_only)
        return pit_error(PIT_ERR_INVALID_ARGUMENT, "pit_tensor_to_dlpack: the tensor is read-only "
                         "and DLPack 0.x cannot say so: export it with "
                         "pit_tensor_to_dlpack_versioned");
    pit_dl_export *e = calloc(1, sizeof *e);
    if (!e)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tensor_to_dlpack: out of host memory");
    describe_export(tensor, &e->managed.v0.dl_tensor, e->shape, e->strides);
    e->managed.v0.manager_ctx = tensor;
    e->managed.v0.deleter = delete_export;
    *out = &e->managed.v0;
    return PIT_SUCCESS;
}

PIT_API pit_status pit_tensor_to_dlpack_versioned(pit_tensor *tensor,
                                                  struct DLManagedTensorVersioned **out)
{
    pit_clear_error();
    PIT_CHECK_ARG(tensor != NULL, "tensor");
    PIT_CHECK_ARG(out != NULL, "managed");
    *out = NULL;
    pit_dl_export *e = calloc(1, sizeof *e);
    if (!e)
        return pit_error(PIT_ERR_OUT_OF_MEMORY, "pit_tensor_to_dlpack_versioned: out of host memory");
    DLManagedTensorVersioned *m = &e->managed.v1;
    describe_export(tensor, &m->dl_tensor, e->shape, e->strides);
    m->version.major = 1;
    m->version.minor = 0;
    m->flags = tensor->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    m->manager_ctx = tensor;
    m->deleter = delete_export_versioned;
    *out = m;
    return PIT_SUCCESS;
}
