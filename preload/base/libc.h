/*
 * The real dlsym and the C library's functions behind libibp's hooks
 * (base/real.c).  libibp exports `dlsym`, so the public name would find our
 * own hook: the real one is found once with dlvsym, which is not hooked.
 */
#ifndef IBP_PRELOAD_LIBC_H
#define IBP_PRELOAD_LIBC_H

/* The C library's dlsym (found with dlvsym; never the public one). */
void *ibp__real_dlsym(void *handle, const char *name);

/* The real dlsym itself (for the RTLD_NEXT tail jump in hooks/resolve.c). */
void *ibp__real_dlsym_fn(void);

/* A C library function of the next object (RTLD_NEXT through the real
 * dlsym); NULL when absent.  For libc entry points only, never the driver.
 * Leaves errno as the lookup left it: hooks use ibp__libc_once. */
void *ibp__libc(const char *name);

/* The real C library function `name` behind a hook, resolved once into
 * *slot (acquire load; a lookup stored with release; two threads racing
 * both look it up and store the same pointer).  A function not found is
 * looked up again on the next call.
 *
 * The one errno policy of every libc hook: found -- errno untouched, the
 * first lookup included (dlsym may set it), so the hook returns the real
 * function's result and errno as they are; not found -- NULL with errno =
 * ENOSYS, and the hook returns its failure value (-1, 0, SIG_ERR) without
 * touching errno again.  Not async-signal-safe on the first call: resolve
 * before a signal handler can need the function. */
void *ibp__libc_once(void *_Atomic *slot, const char *name);

#endif /* IBP_PRELOAD_LIBC_H */
