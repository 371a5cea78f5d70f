/*
 * cuda_internal.h - what the CUDA plug-in's host files include: CUDA's
 * names (cuda_driver.h), then the host code it shares with the HIP plug-in
 * (common/gpu_internal.h: the driver table, context, stream and kernel
 * types, the shared and per-vendor functions). The HIP plug-in compiles
 * the shared files with backends/hip/hip_shim.h in front, which stands in
 * for this header.
 */
#ifndef PIT_CUDA_INTERNAL_H
#define PIT_CUDA_INTERNAL_H

#include "cuda_driver.h"
#include "common/gpu_internal.h"

#endif /* PIT_CUDA_INTERNAL_H */
