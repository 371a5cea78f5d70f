/*
 * ocl_view.c - tensor descriptors and indexes as kernel arguments, in the one
 * form every OpenCL kernel of pit takes them (element offsets, row and batch
 * strides), and the one check of a pattern's dtype.
 */
#include "ocl_internal.h"

#define OCL_PATTERN_DTYPES "f32, f16, bf16, i32 or u8"

ocl_mat ocl_mat_of(const pit_tdesc *t)
{
    ocl_mat v = {(cl_mem)t->mem, (cl_long)(t->offset / ocl_dtype_bytes(t->dtype)),
                 (cl_long)t->strides[t->rank - 2], t->rank == 3 ? (cl_long)t->strides[0] : 0};
    return v;
}

void ocl_arg_view(ocl_args *a, const ocl_mat *v)
{
    ocl_arg_mem(a, v->mem);
    ocl_arg_long(a, v->off);
    ocl_arg_long(a, v->ld);
    ocl_arg_long(a, v->bs);
}

void ocl_arg_mat(ocl_args *a, const pit_tdesc *t)
{
    ocl_mat v = ocl_mat_of(t);
    ocl_arg_view(a, &v);
}

void ocl_arg_rows(ocl_args *a, const pit_tdesc *t)
{
    ocl_mat v = ocl_mat_of(t);
    ocl_arg_mem(a, v.mem);
    ocl_arg_long(a, v.off);
    ocl_arg_long(a, v.ld);
}

void ocl_arg_index(ocl_args *a, const pit_index *idx)
{
    ocl_arg_mem(a, (cl_mem)idx->counts);
    ocl_arg_mem(a, (cl_mem)idx->entries);
    ocl_arg_int(a, idx->groups_per_batch);
    /* a rank-2 mask indexed once: groups == groups_per_batch */
    ocl_arg_int(a, idx->groups == idx->groups_per_batch ? 0 : idx->groups_per_batch);
    ocl_arg_int(a, idx->capacity);
}

pit_status ocl_pattern_code(const pit_tdesc *t, const char *what, int *mdt)
{
    switch (t->dtype) {
    case PIT_F32:
    case PIT_F16:
    case PIT_I32:
    case PIT_U8: *mdt = (int)t->dtype; return PIT_SUCCESS;
    case PIT_BF16: *mdt = (int)PIT_F16; return PIT_SUCCESS; /* f16's test: any bit but the sign */
    }
    return ocl_host->error(PIT_ERR_UNSUPPORTED_DTYPE, "opencl %s dtype %d (" OCL_PATTERN_DTYPES ")",
                           what, (int)t->dtype);
}
