/*
 * tests/dl_host.h - a DLPack 1.x import of host memory (kDLCPU), as numpy or
 * a CPU torch tensor hands one over, for the tests of that path
 * (test_views.c on a real device, test_host_memory.c with stand-in tables).
 */
#ifndef PIT_TESTS_DL_HOST_H
#define PIT_TESTS_DL_HOST_H

#include <string.h>

#include "dlpack_versioned.h"

/* A rank-2 f32 view of host floats from element `first` on. */
static inline DLManagedTensorVersioned dl_host_view(float *array, int64_t *shape, int64_t *strides,
                                                    size_t first, uint64_t flags,
                                                    void (*deleter)(DLManagedTensorVersioned *))
{
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = 1;
    m.flags = flags;
    m.deleter = deleter;
    m.dl_tensor.data = array;
    m.dl_tensor.device.device_type = kDLCPU;
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = strides;
    m.dl_tensor.byte_offset = first * sizeof(float);
    return m;
}

#endif /* PIT_TESTS_DL_HOST_H */
