/* Kernels launched with a pointer into a region (serve/kernel_args.h).
 *
 * Policy: a kernel may write anything its parameters point to, through the
 * region's mapped pointer (its host address under unified addressing), and
 * those writes land by DMA, which write protection does not see.  libibp
 * cannot know what the kernel writes, so the first launch whose
 * parameters hold an address inside a region makes that region pass
 * through for good: one notice, every tensor invalidated (a region being
 * compressed starts over), the flag `kernel_args` that serve_region
 * checks before anything else.  A parameter is read as 8-byte words at
 * 8-byte offsets (where a pointer can be), its size from
 * cuFuncGetParamInfo (or cuKernelGetParamInfo for a CUkernel); a
 * CU_LAUNCH_PARAM_BUFFER_POINTER buffer is read whole.  Without the sizes
 * (a driver older than 12.4) nothing can be read safely and nothing is
 * scanned (docs/ARCHITECTURE.md). */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "serve/kernel_args.h"

#include "base/base.h"
#include "base/driver.h"
#include "base/log.h"
#include "registry/registry.h"
#include "serve/dtoh.h"
#include "serve/region.h"

#define MAX_PARAMS 4096 /* the driver's limit on parameter bytes / 1 */

static void pass_through(ibp_region_rec *r) {
  ibp_served_region *s = ibp__served(r);
  if (!s || atomic_exchange(&s->kernel_args, 1))
    return;
  ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED);
  ibp__log(IBP_LOG_WARN,
           "region '%s': a kernel was launched with a pointer into it (it "
           "may write the region unseen); copies from it pass through from "
           "now on",
           r->name);
  if (ibp__dtoh_begin((const void *)r->base, r->bytes))
    ibp__dtoh_end(NULL, 0);
}

/* Every 8-byte word of [p, p+bytes) at an 8-byte offset from p. */
static void scan_words(const void *p, size_t bytes) {
  for (size_t off = 0; p && off + sizeof(uint64_t) <= bytes;
       off += sizeof(uint64_t)) {
    uint64_t v;
    memcpy(&v, (const char *)p + off, sizeof v);
    ibp_region_rec *r = NULL;
    if (!v ||
        ibp_registry_find((const void *)(uintptr_t)v, 1, &r) == IBP_FIND_NONE)
      continue;
    pass_through(r);
    ibp_region_release(r);
  }
}

/* Size of parameter i of f; 0 past the last one or when unknown. */
static size_t param_size(const ibp_driver *d, CUfunction f, size_t i) {
  size_t off = 0, size = 0;
  if (d->cuFuncGetParamInfo &&
      d->cuFuncGetParamInfo(f, i, &off, &size) == CUDA_SUCCESS)
    return size;
  if (d->cuKernelGetParamInfo &&
      d->cuKernelGetParamInfo((CUkernel)f, i, &off, &size) == CUDA_SUCCESS)
    return size;
  return 0;
}

static void scan_extra(void **extra) {
  const void *buf = NULL;
  size_t bytes = 0;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
      memcpy(&bytes, extra[i + 1], sizeof bytes);
  }
  scan_words(buf, bytes);
}

void ibp__kernel_args_scan(CUfunction f, void **params, void **extra) {
  const ibp_driver *d = ibp__driver();
  if (!d)
    return;
  ibp__guard++;
  if (params) {
    for (size_t i = 0; i < MAX_PARAMS; i++) {
      size_t size = param_size(d, f, i);
      if (!size)
        break;
      scan_words(params[i], size);
    }
  } else if (extra) {
    scan_extra(extra);
  }
  ibp__guard--;
}
