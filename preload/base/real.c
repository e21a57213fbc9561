/* The real dlsym and the C library's functions behind our hooks.
 *
 * libibp exports `dlsym`, so the public name would find our own hook; the
 * real one is found once with dlvsym, which is not hooked.  glibc >= 2.34
 * versions it GLIBC_2.34, older ones GLIBC_2.2.5 (x86-64) / GLIBC_2.17
 * (aarch64). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "base/libc.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym_fn;
static pthread_once_t real_dlsym_once = PTHREAD_ONCE_INIT;

IBP_NO_SANITIZE static void find_real_dlsym(void) {
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5",
                                         "GLIBC_2.17"};
  for (unsigned i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    void *f = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (f) {
      real_dlsym_fn = (dlsym_fn)f;
      return;
    }
  }
}

IBP_NO_SANITIZE void *ibp__real_dlsym_fn(void) {
  pthread_once(&real_dlsym_once, find_real_dlsym);
  return (void *)real_dlsym_fn;
}

IBP_NO_SANITIZE void *ibp__real_dlsym(void *handle, const char *name) {
  pthread_once(&real_dlsym_once, find_real_dlsym);
  return real_dlsym_fn ? real_dlsym_fn(handle, name) : NULL;
}

void *ibp__libc(const char *name) {
  return ibp__real_dlsym(RTLD_NEXT, name);
}

void *ibp__libc_once(void *_Atomic *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (f)
    return f;
  int saved = errno; /* the first lookup must not show in errno */
  f = ibp__libc(name);
  atomic_store_explicit(slot, f, memory_order_release);
  errno = f ? saved : ENOSYS;
  return f;
}
