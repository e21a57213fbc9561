/*
 * The route to the real driver (base/driver.c): the table of driver
 * functions libibp calls itself (base/driver.def).
 *
 * The driver is found with dlopen("libcuda.so.1", RTLD_NOLOAD) -- whatever
 * the application loaded, never RTLD_NEXT (the driver is linked -Bsymbolic
 * and cudart opens it RTLD_LOCAL, so it is not in the global scope) -- and
 * its functions through its own cuGetProcAddress_v2.
 */
#ifndef IBP_PRELOAD_DRIVER_H
#define IBP_PRELOAD_DRIVER_H

#include <cuda.h>

typedef struct ibp_driver {
#define IBP_DRIVER(name, version, params) CUresult(*name) params;
#include "base/driver.def"
#undef IBP_DRIVER
} ibp_driver;

/* The table, filled once the application has loaded the driver; NULL
 * before (callers then pass through).  Entries the driver lacks are NULL.
 * Thread-safe. */
const ibp_driver *ibp__driver(void);

/* The handle of the loaded driver (dlopen, kept open), once ibp__driver()
 * returned non-NULL; else NULL. */
void *ibp__driver_library(void);

/* Child after fork: re-initialises the lock guarding the lookup. */
void ibp__driver_after_fork_child(void);

#endif /* IBP_PRELOAD_DRIVER_H */
