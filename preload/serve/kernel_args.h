/*
 * Kernels the application launches with a pointer into a region among
 * their parameters (kernel_args.c; docs/ARCHITECTURE.md "No stale byte"):
 * such a kernel may write the region through its mapped pointer, which no
 * page protection sees, so the region passes through from then on.
 */
#ifndef IBP_PRELOAD_KERNEL_ARGS_H
#define IBP_PRELOAD_KERNEL_ARGS_H

#include <cuda.h>

/* Before a launch of f (cuLaunchKernel's kernelParams or extra): every
 * parameter word, when the parameters' sizes are known
 * (cuFuncGetParamInfo), or the whole CU_LAUNCH_PARAM_BUFFER_POINTER
 * buffer, that holds an address inside a region makes that region pass
 * through, with one notice.  Nothing is scanned when the sizes
 * cannot be learned. */
void ibp__kernel_args_scan(CUfunction f, void **params, void **extra);

#endif /* IBP_PRELOAD_KERNEL_ARGS_H */
