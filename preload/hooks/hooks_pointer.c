/* Hooks of what the driver says about pinned memory (hooks.def): for the
 * memory of a compact region (serve/compact.h), which the driver does not
 * know, the answers it gives for its own pinned memory -- a host
 * allocation of the context it was made in, mapped, its flags, its
 * address as the device's (unified addressing).  What only pinned memory
 * can give (cuMemHostGetDevicePointer's mapping, a buffer id, ...) makes
 * libibp pin the region first (ibp__compact_pin), after which the driver
 * answers itself.  Any other memory: the driver's answer, after one
 * relaxed load. */

#include "base/base.h"
#include "hooks/hooks.h"
#include "serve/compact.h"

/* Writes what the driver says of attribute a for compact memory m at p;
 * 0 when it is not one answered here. */
static int answer(CUpointer_attribute a, const ibp_compact_memory *m,
                  uintptr_t p, void *data) {
  switch (a) {
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    *(CUcontext *)data = m->ctx;
    return 1;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *(unsigned *)data = CU_MEMORYTYPE_HOST;
    return 1;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    *(void **)data = (void *)p;
    return 1;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    /* unified addressing: pinned memory's device address is its host
     * address.  Using it pins the region first: a kernel given it
     * (kernel_args.c), a device pointer asked for explicitly (below) */
    *(CUdeviceptr *)data = (CUdeviceptr)p;
    return 1;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
  case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    *(int *)data = 0;
    return 1;
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *(int *)data = 1;
    return 1;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *(int *)data = m->dev;
    return 1;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    *(CUdeviceptr *)data = (CUdeviceptr)m->base;
    return 1;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    *(size_t *)data = m->bytes;
    return 1;
  case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    *(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
    return 1;
  default:
    return 0;
  }
}

static int answerable(CUpointer_attribute a) {
  union {
    CUcontext ctx;
    void *ptr;
    CUdeviceptr dptr;
    size_t size;
    unsigned u;
  } scratch;
  static const ibp_compact_memory none = {0, 0, 0, NULL, 0};
  return answer(a, &none, 0, &scratch);
}

/* The compact memory p lies in, when no libibp call is underway
 * (`pinned_too`: also once pinned). */
static int compact_memory(CUdeviceptr p, int pinned_too,
                          ibp_compact_memory *m) {
  return !ibp__guard &&
         ibp__compact_memory_of((const void *)(uintptr_t)p, pinned_too, m);
}

static void pin(CUdeviceptr p, const char *why) {
  ibp__compact_pin_range((const void *)(uintptr_t)p, 1, why);
}

CUresult ibp__hook_cuPointerGetAttribute(void *data, CUpointer_attribute attr,
                                         CUdeviceptr p) {
  ibp_compact_memory m;
  if (data && compact_memory(p, 0, &m)) {
    if (answer(attr, &m, (uintptr_t)p, data))
      return CUDA_SUCCESS;
    pin(p, "the driver is asked what only pinned memory has");
  }
  return ibp__real_cuPointerGetAttribute(data, attr, p);
}

CUresult ibp__hook_cuPointerGetAttributes(unsigned n,
                                          CUpointer_attribute *attrs,
                                          void **data, CUdeviceptr p) {
  ibp_compact_memory m;
  if (attrs && data && compact_memory(p, 0, &m)) {
    int all = 1;
    for (unsigned i = 0; i < n && all; i++)
      all = answerable(attrs[i]);
    if (all) {
      for (unsigned i = 0; i < n; i++)
        if (data[i]) /* a NULL slot is skipped, as the driver does */
          answer(attrs[i], &m, (uintptr_t)p, data[i]);
      return CUDA_SUCCESS;
    }
    pin(p, "the driver is asked what only pinned memory has");
  }
  return ibp__real_cuPointerGetAttributes(n, attrs, data, p);
}

CUresult ibp__hook_cuMemHostGetFlags(unsigned *flags, void *p) {
  ibp_compact_memory m;
  /* also once pinned: the driver knows registered memory then, whose
   * flags it does not answer for (those of the allocation the program
   * made are ours to give) */
  if (flags && compact_memory((CUdeviceptr)(uintptr_t)p, 1, &m)) {
    *flags = m.flags;
    return CUDA_SUCCESS;
  }
  return ibp__real_cuMemHostGetFlags(flags, p);
}

CUresult ibp__hook_cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p,
                                                unsigned flags) {
  ibp_compact_memory m;
  if (compact_memory((CUdeviceptr)(uintptr_t)p, 0, &m))
    pin((CUdeviceptr)(uintptr_t)p, "a device pointer into it is asked for");
  return ibp__real_cuMemHostGetDevicePointer_v2(dptr, p, flags);
}
