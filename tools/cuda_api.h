/*
 * The CUDA driver, reached as libibp reaches it (`ibp calibrate`): the
 * library loaded with dlopen("libcuda.so.1") -- NVIDIA's, or the simulated
 * one when it comes first in LD_LIBRARY_PATH -- and the functions of
 * cuda_api.def looked up through its own cuGetProcAddress_v2.  No CUDA
 * runtime is involved.
 *
 * Nothing here prints.  The library stays loaded for the life of the
 * process (its threads may still run its code).
 */
#ifndef IBP_TOOLS_CUDA_API_H
#define IBP_TOOLS_CUDA_API_H

#include <stddef.h>

#include <cuda.h>

typedef struct cuda_api {
#define CUDA_API(name, version, params) CUresult(*name) params;
#define CUDA_API_OPTIONAL(name, version, params) CUDA_API(name, version, params)
#include "cuda_api.def"
#undef CUDA_API_OPTIONAL
#undef CUDA_API
  int simulated; /* the library is the simulated driver (tests/sim) */
} cuda_api;

/* Loads the driver and fills *api (a CUDA_API_OPTIONAL function the
 * driver lacks: NULL).  Returns 0, or -1 with a one-line reason in err (no
 * libcuda.so.1, no cuGetProcAddress_v2, or the name of a CUDA_API function
 * the driver lacks). */
int cuda_api_open(cuda_api *api, char *err, size_t errlen);

/* "CUDA_ERROR_OUT_OF_MEMORY" for r (its number when the driver has no
 * name for it) into buf; returns buf. */
const char *cuda_api_error(const cuda_api *api, CUresult r, char *buf,
                           size_t len);

#endif /* IBP_TOOLS_CUDA_API_H */
