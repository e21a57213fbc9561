/*
 * The driver entry points libibp substitutes (hooks.def) and the library's
 * lifetime (init.c).  The top of preload/: these files may include every
 * other directory's headers.
 */
#ifndef IBP_PRELOAD_HOOKS_H
#define IBP_PRELOAD_HOOKS_H

#include <cuda.h>

/* For every row of hooks.def: the driver's function (set by resolve.c
 * before the hook can be handed out) and our hook. */
#define IBP_HOOK(sym, params, args)                                            \
  extern CUresult(*ibp__real_##sym) params;                                    \
  CUresult ibp__hook_##sym params;
#include "hooks/hooks.def"
#undef IBP_HOOK

/* ---- resolve.c ----------------------------------------------------------- */

/* Records the driver's address of every hooked variant (the hooks'
 * ibp__real_<sym>), once the application has loaded libcuda.so.1.
 * Returns nonzero once done. */
int ibp__hooks_bind(void);

/* Child after fork: re-initialises the lock guarding the hooks' binding. */
void ibp__resolve_after_fork_child(void);

/* ---- init.c -------------------------------------------------------------- */

/* Nonzero when interception is on (base/base.h's ibp__config_load); the
 * first call also sets up the library's lifetime: the registry's release
 * hook, the fork handler and the exit report. */
int ibp__active(void);

#endif /* IBP_PRELOAD_HOOKS_H */
