/*
 * core/runtime/dlpack_versioned.h - <dlpack/dlpack.h>, with DLPack 1.0's
 * versioned managed tensor where the installed header predates it (Debian 12
 * ships DLPack 0.6): the struct, the version pair and the read-only flag, laid
 * out as DLPack 1.0 defines its ABI. A header of DLPack 1.0 or later is used
 * as it is. Not installed: users include their own <dlpack/dlpack.h>.
 */
#ifndef PIT_DLPACK_VERSIONED_H
#define PIT_DLPACK_VERSIONED_H

#include <dlpack/dlpack.h>
#include <stdint.h>

#ifndef DLPACK_MAJOR_VERSION
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#endif

#endif /* PIT_DLPACK_VERSIONED_H */
