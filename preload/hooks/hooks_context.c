/* Hooks of the calls that end a context (hooks.def): the regions and
 * device state that live in it are forgotten before the driver frees its
 * memory (serve/context.c).  A primary context's retains and releases are
 * counted, so the release of the application's last reference -- which
 * destroys it -- is seen too.  The driver's call always runs. */
#include "base/base.h"
#include "hooks/hooks.h"
#include "registry/registry.h"
#include "serve/batch/batch.h"
#include "serve/context.h"
#include "serve/staged/staged.h"

static void ending(CUcontext ctx, int dev) {
  if (ibp__guard)
    return;
  ibp__batch_context_end(ctx, dev); /* NULL: dev's primary context */
  ibp__staged_context_end(ctx, dev);
  if (ibp_registry_empty())
    return;
  ibp__guard++;
  ibp__forget_context(ctx, dev);
  ibp__guard--;
}

CUresult ibp__hook_cuCtxDestroy_v2(CUcontext ctx) {
  if (ctx)
    ending(ctx, -1);
  return ibp__real_cuCtxDestroy_v2(ctx);
}

/* A primary context ends at its reset, or when the application's last
 * reference is released (cudaDeviceReset does both, in that order). */
static CUresult reset(CUdevice dev, CUresult res) {
  if (res == CUDA_SUCCESS)
    ibp__primary_released(dev, 1);
  return res;
}

CUresult ibp__hook_cuDevicePrimaryCtxReset(CUdevice dev) {
  ending(NULL, dev);
  return reset(dev, ibp__real_cuDevicePrimaryCtxReset(dev));
}

CUresult ibp__hook_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  ending(NULL, dev);
  return reset(dev, ibp__real_cuDevicePrimaryCtxReset_v2(dev));
}

CUresult ibp__hook_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult res = ibp__real_cuDevicePrimaryCtxRetain(pctx, dev);
  if (res == CUDA_SUCCESS && !ibp__guard)
    ibp__primary_retained(dev);
  return res;
}

#define RELEASE(sym)                                                           \
  CUresult ibp__hook_##sym(CUdevice dev) {                                     \
    if (!ibp__guard && ibp__primary_last(dev))                                 \
      ending(NULL, dev);                                                       \
    CUresult res = ibp__real_##sym(dev);                                       \
    if (res == CUDA_SUCCESS && !ibp__guard)                                    \
      ibp__primary_released(dev, 0);                                           \
    return res;                                                                \
  }

RELEASE(cuDevicePrimaryCtxRelease)
RELEASE(cuDevicePrimaryCtxRelease_v2)
