/* The per-thread-default-stream exports (_ptds / _ptsz).
 *
 * A program compiled with --default-stream per-thread (nvcc) or
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM gets cuda_runtime_api.h's macros that
 * rename e.g. cudaMemcpy -> cudaMemcpy_ptds and cudaMemcpyAsync ->
 * cudaMemcpyAsync_ptsz.  This file is compiled with that same definition, so
 * each function below is written under its API name and the header turns it
 * into the _ptds/_ptsz symbol -- and checks it against the header's own
 * prototype.  Each one runs the shared implementation with the driver
 * variants resolved with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, so
 * stream 0 means the calling thread's default stream. */
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "ptds.c must be compiled with -DCUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

#include "cudart_internal.h"

#define PT CUDARTSIM_PTDS

CUDARTSIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                     enum cudaMemcpyKind kind) {
  return cudartsim__ret(cudartsim__memcpy(dst, src, count, kind, 0, 0, PT));
}

CUDARTSIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src,
                                          size_t count,
                                          enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return cudartsim__ret(
      cudartsim__memcpy(dst, src, count, kind, stream, 1, PT));
}

CUDARTSIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch,
                                       const void *src, size_t spitch,
                                       size_t width, size_t height,
                                       enum cudaMemcpyKind kind) {
  return cudartsim__ret(cudartsim__memcpy_2d(dst, dpitch, src, spitch, width,
                                             height, kind, 0, 0, PT));
}

CUDARTSIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch,
                                            const void *src, size_t spitch,
                                            size_t width, size_t height,
                                            enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  return cudartsim__ret(cudartsim__memcpy_2d(dst, dpitch, src, spitch, width,
                                             height, kind, stream, 1, PT));
}

CUDARTSIM_API cudaError_t cudaMemcpyBatchAsync(
    void *const *dsts, const void *const *srcs, const size_t *sizes,
    size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
    size_t numAttrs, cudaStream_t stream) {
  return cudartsim__ret(cudartsim__memcpy_batch(
      dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, PT));
}

CUDARTSIM_API cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  return cudartsim__ret(cudartsim__memset(devPtr, value, count, 0, 0, PT));
}

CUDARTSIM_API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                                          cudaStream_t stream) {
  return cudartsim__ret(cudartsim__memset(devPtr, value, count, stream, 1, PT));
}

CUDARTSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return cudartsim__ret(cudartsim__stream_synchronize(stream, PT));
}

CUDARTSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudartsim__ret(cudartsim__stream_query(stream, PT));
}

CUDARTSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream,
                                              cudaEvent_t event,
                                              unsigned int flags) {
  return cudartsim__ret(cudartsim__stream_wait_event(stream, event, flags, PT));
}

CUDARTSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream,
                                             unsigned int *flags) {
  return cudartsim__ret(cudartsim__stream_get_flags(hStream, flags, PT));
}

CUDARTSIM_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream,
                                                int *priority) {
  return cudartsim__ret(cudartsim__stream_get_priority(hStream, priority, PT));
}

CUDARTSIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream,
                                             cudaHostFn_t fn, void *userData) {
  return cudartsim__ret(cudartsim__launch_host_func(stream, fn, userData, PT));
}

CUDARTSIM_API cudaError_t cudaEventRecord(cudaEvent_t event,
                                          cudaStream_t stream) {
  return cudartsim__ret(cudartsim__event_record(event, stream, 0, 0, PT));
}

CUDARTSIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event,
                                                   cudaStream_t stream,
                                                   unsigned int flags) {
  return cudartsim__ret(cudartsim__event_record(event, stream, flags, 1, PT));
}

CUDARTSIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim,
                                           dim3 blockDim, void **args,
                                           size_t sharedMem,
                                           cudaStream_t stream) {
  (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return cudartsim__launch_stub(func); /* no stream is reached */
}
