/* Hooks of the calls that end a context (hooks.def): the regions and
 * device state that live in it are forgotten before the driver frees its
 * memory (serve/context.c).  The driver's call always runs. */
#include "base/base.h"
#include "hooks/hooks.h"
#include "registry/registry.h"
#include "serve/context.h"

static void ending(CUcontext ctx, int dev) {
  if (ibp__guard || ibp_registry_empty())
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

CUresult ibp__hook_cuDevicePrimaryCtxReset(CUdevice dev) {
  ending(NULL, dev);
  return ibp__real_cuDevicePrimaryCtxReset(dev);
}

CUresult ibp__hook_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  ending(NULL, dev);
  return ibp__real_cuDevicePrimaryCtxReset_v2(dev);
}
