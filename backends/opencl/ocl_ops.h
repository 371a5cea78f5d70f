/*
 * ocl_ops.h - the operators of dynamic-sparse models on OpenCL (ocl_ops.c).
 */
#ifndef PIT_OCL_OPS_H
#define PIT_OCL_OPS_H

#include "backend.h"

/* Fills the table's entries of the operators of dynamic-sparse models
 * (sddmm, softmax, MoE, row-sparse matmul, relu, transpose). */
void pit_ocl_register_ops(pit_backend *be);

#endif /* PIT_OCL_OPS_H */
