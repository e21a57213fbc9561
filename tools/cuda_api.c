/* The CUDA driver's functions through its cuGetProcAddress_v2
 * (cuda_api.h). */
#include "cuda_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct api_row {
  const char *name;
  int version;
  size_t offset;
  int optional; /* CUDA_API_OPTIONAL: NULL when the driver lacks it */
} api_row;

static const api_row api_rows[] = {
#define CUDA_API(name, version, params)                                        \
  {#name, version, offsetof(cuda_api, name), 0},
#define CUDA_API_OPTIONAL(name, version, params)                               \
  {#name, version, offsetof(cuda_api, name), 1},
#include "cuda_api.def"
#undef CUDA_API_OPTIONAL
#undef CUDA_API
};

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

int cuda_api_open(cuda_api *api, char *err, size_t errlen) {
  memset(api, 0, sizeof *api);
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(err, errlen, "no CUDA driver: %s (--sim: the simulated GPU)",
             dlerror());
    return -1;
  }
  getproc_v2_fn getproc = (getproc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
  if (getproc == NULL) {
    snprintf(err, errlen,
             "libcuda.so.1 has no cuGetProcAddress_v2 (a "
             "driver older than CUDA 12)");
    return -1;
  }
  for (size_t i = 0; i < sizeof api_rows / sizeof api_rows[0]; i++) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (getproc(api_rows[i].name, &p, api_rows[i].version, 0, &st) !=
            CUDA_SUCCESS ||
        st != CU_GET_PROC_ADDRESS_SUCCESS || p == NULL) {
      if (api_rows[i].optional)
        continue;
      snprintf(err, errlen, "the driver has no %s (version %d)",
               api_rows[i].name, api_rows[i].version);
      return -1;
    }
    memcpy((char *)api + api_rows[i].offset, &p, sizeof p);
  }
  /* the simulated driver exports the emulator's functions */
  api->simulated = dlsym(h, "simt_kernel_find") != NULL;
  return 0;
}

const char *cuda_api_error(const cuda_api *api, CUresult r, char *buf,
                           size_t len) {
  const char *name = NULL;
  if (api->cuGetErrorName == NULL ||
      api->cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
    snprintf(buf, len, "CUDA error %d", (int)r);
  else
    snprintf(buf, len, "%s", name);
  return buf;
}
