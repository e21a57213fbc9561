/* The route to the real driver: the table of base/driver.def, filled from
 * the driver's own cuGetProcAddress_v2 once the application has loaded
 * libcuda.so.1 (base/driver.h). */
#include "base/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "base/libc.h"

typedef struct driver_row {
  const char *name;
  int version;
  size_t offset;
} driver_row;

static const driver_row driver_rows[] = {
#define IBP_DRIVER(name, version, params)                                      \
  {#name, version, offsetof(ibp_driver, name)},
#include "base/driver.def"
#undef IBP_DRIVER
};

static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int bound; /* 1 once the table is filled */
static ibp_driver driver;
static void *library;

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static void fill_driver(getproc_v2_fn getproc) {
  for (size_t i = 0; i < sizeof driver_rows / sizeof driver_rows[0]; i++) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    if (getproc(driver_rows[i].name, &p, driver_rows[i].version, 0, &st) !=
            CUDA_SUCCESS ||
        st != CU_GET_PROC_ADDRESS_SUCCESS)
      p = NULL;
    memcpy((char *)&driver + driver_rows[i].offset, &p, sizeof p);
  }
}

static int bind_driver(void) {
  if (atomic_load_explicit(&bound, memory_order_acquire))
    return 1;
  pthread_mutex_lock(&bind_lock);
  if (!atomic_load_explicit(&bound, memory_order_relaxed)) {
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    void *getproc = h ? ibp__real_dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (getproc) {
      fill_driver((getproc_v2_fn)getproc);
      library = h;
      atomic_store_explicit(&bound, 1, memory_order_release);
    }
    /* the handle stays open: the driver is never unloaded under us */
  }
  pthread_mutex_unlock(&bind_lock);
  return atomic_load_explicit(&bound, memory_order_acquire);
}

const ibp_driver *ibp__driver(void) {
  return bind_driver() ? &driver : NULL;
}

void *ibp__driver_library(void) {
  return bind_driver() ? library : NULL;
}

void ibp__driver_after_fork_child(void) {
  pthread_mutex_init(&bind_lock, NULL);
}
