/*
 * Part of test_simcuda_linked: the addresses a program built with
 * --default-stream per-thread (CUDA_API_PER_THREAD_DEFAULT_STREAM) links
 * to -- cuda.h maps the API names to the _ptds / _ptsz exports.
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>

#include <string.h>

void *ptds_address(const char *which);

void *ptds_address(const char *which) {
  static const struct {
    const char *name;
    void *fn;
  } map[] = {
      {"cuMemcpyHtoD", (void *)cuMemcpyHtoD},
      {"cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync},
      {"cuMemcpy", (void *)cuMemcpy},
      {"cuMemcpyAsync", (void *)cuMemcpyAsync},
      {"cuLaunchKernel", (void *)cuLaunchKernel},
      {"cuStreamSynchronize", (void *)cuStreamSynchronize},
      {"cuStreamGetCaptureInfo", (void *)cuStreamGetCaptureInfo},
      {"cuStreamBeginCapture", (void *)cuStreamBeginCapture},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, which) == 0)
      return map[i].fn;
  return NULL;
}
