/* The hooked driver entry points, exported under their own names
 * (hooks.def, libibp.map): a program linked against libcuda.so.1 that
 * calls them directly -- no dlsym, no cuGetProcAddress -- reaches libibp's
 * hook first, as LD_PRELOAD promises.  Each binds the hooks to the loaded
 * driver (it is loaded: the program linked it) and runs the hook, which
 * calls the driver's own function. */
#include "base/base.h"
#include "hooks/hooks.h"

/* Named by asm label: cuda.h maps several of these names to others by
 * macro (cuGetProcAddress -> cuGetProcAddress_v2 ...), and # and ## take
 * the name as written. */
#define IBP_HOOK(sym, params, args)                                            \
  IBP_EXPORT CUresult ibp__export_##sym params __asm__(#sym);                  \
  CUresult ibp__export_##sym params {                                          \
    if (!ibp__hooks_bind())                                                    \
      return CUDA_ERROR_NOT_INITIALIZED;                                       \
    return ibp__hook_##sym args;                                               \
  }
#include "hooks/hooks.def"
#undef IBP_HOOK
