/* Error codes: names, messages, CUresult mapping, the per-thread last error.
 *
 * Runtime semantics implemented here (CUDA Runtime API, "Error Handling"):
 *  - every failing call records its code as the calling thread's last error;
 *    a successful call leaves it alone;
 *  - cudaGetLastError returns it and resets it to cudaSuccess,
 *    cudaPeekAtLastError returns it and leaves it;
 *  - cudaErrorNotReady (from the query calls) is a status, not recorded;
 *  - a sticky error (cudart_errors.def) corrupts the device: every later call
 *    on that device returns it, and cudaGetLastError keeps returning it; only
 *    cudaDeviceReset clears it (device.c). */
#include "cudart_internal.h"

static _Thread_local cudaError_t last_error = cudaSuccess;

cudaError_t cudartsim__from_cu(CUresult r) {
  switch (r) {
#define X(cu, rt)                                                              \
  case cu:                                                                     \
    return rt;
#include "curesult_map.def"
#undef X
  default:
    return cudaErrorUnknown;
  }
}

int cudartsim__is_sticky(cudaError_t e) {
  switch (e) {
#define X(name, sticky, message)                                               \
  case name:                                                                   \
    return sticky;
#include "cudart_errors.def"
#undef X
  default:
    return 0;
  }
}

cudaError_t cudartsim__ret(cudaError_t e) {
  if (e == cudaSuccess || e == cudaErrorNotReady)
    return e;
  last_error = e;
  if (cudartsim__is_sticky(e))
    cudartsim__set_sticky(cudartsim__current_device(), e);
  return e;
}

CUDARTSIM_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  cudaError_t sticky = cudartsim__sticky(cudartsim__current_device());
  return sticky != cudaSuccess ? sticky : e;
}

CUDARTSIM_API cudaError_t cudaPeekAtLastError(void) {
  cudaError_t sticky = cudartsim__sticky(cudartsim__current_device());
  return sticky != cudaSuccess ? sticky : last_error;
}

CUDARTSIM_API const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define X(name, sticky, message)                                               \
  case name:                                                                   \
    return #name;
#include "cudart_errors.def"
#undef X
  default:
    return "unrecognized error code";
  }
}

CUDARTSIM_API const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
#define X(name, sticky, message)                                               \
  case name:                                                                   \
    return message;
#include "cudart_errors.def"
#undef X
  default:
    return "unrecognized error code";
  }
}
