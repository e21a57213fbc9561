/*
 * What every file of libibp.so (preload/) relies on: visibility macros, the
 * thread-local recursion guard and the configuration.  Internal: nothing
 * here is exported (the library's exports are listed in libibp.map).
 *
 * preload/ is split by concern (docs/ARCHITECTURE.md, "preload/ layout"):
 * base/ (this header, logging, the C library and the driver entry table),
 * track/ (write tracking), stats/ (figures and the exit report), serve/
 * (regions: compression, devices, substitution) and hooks/ (the exported
 * entry points and the library's lifetime).  A directory includes only
 * headers of directories before it in that list.
 *
 * Rules every file follows:
 *   - fail open: an error returns to the caller's real function; it is
 *     logged once (ibp__warn_once) and never aborts;
 *   - no CUDA call before the application's own first driver call, none in
 *     constructors or in the exit path;
 *   - every hook runs its body under the thread-local recursion guard, so
 *     driver calls libibp makes itself are never intercepted again.
 */
#ifndef IBP_PRELOAD_BASE_H
#define IBP_PRELOAD_BASE_H

#include "config/config.h"
#include "profile/profile.h"

#define IBP_HIDDEN __attribute__((visibility("hidden")))
#define IBP_EXPORT __attribute__((visibility("default")))
/* For code an ASan runtime may call before it is initialised (it resolves
 * its interceptors through our dlsym hook): no sanitizer instrumentation. */
#define IBP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* ---- config.c: configuration --------------------------------------------- */

/* The configuration, loaded once by ibp__config_load.  Read-only
 * afterwards. */
extern ibp_config ibp__cfg;

/* Loads the configuration once (idempotent, thread-safe, no CUDA call); a
 * bad configuration is reported once on stderr and leaves libibp passing
 * everything through.  Returns nonzero when interception is on:
 * configuration loaded, not disabled, at least one rule. */
int ibp__config_load(void);

/* Nonzero once the configuration is loaded (ibp__cfg valid). */
int ibp__loaded(void);

/* Nonzero when IBP_WAIT_READY=1 (config/): the first copy from a region
 * waits until the worker made it ready (tests, benchmarks). */
int ibp__wait_ready(void);

/* How warnings name rule `index` (1-based): "rule 2", or for a rule the
 * user wrote as `auto`, "auto" (the only rule) or "auto, rule 2". */
const char *ibp__rule_label(unsigned index, char *buf, size_t cap);

/* What to write instead of rule `index` to get tensors of `tensor` bytes:
 * "tensor=256 in rule 2", or for `auto` "'min=64M,tensor=256' in place
 * of auto". */
const char *ibp__rule_tensor_fix(unsigned index, uint64_t tensor, char *buf,
                                 size_t cap);

/* ---- profile.c: IBP_PROFILE ---------------------------------------------- */

/* Loads the profile IBP_PROFILE names (config.c, once, after the
 * configuration).  Returns 0 (also when it is unset), or -1 after one
 * message in the configuration errors' form. */
int ibp__profile_load_override(void);

/* That profile, or NULL when IBP_PROFILE is unset (or failed). */
const ibp_profile *ibp__profile_override(void);

/* Thread-local recursion guard: nonzero while this thread runs libibp code
 * that may call the driver or the C library. */
extern __thread int ibp__guard __attribute__((tls_model("initial-exec")));

/* Greatest common divisor (0 with v gives v). */
static inline uint64_t ibp__gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

#endif /* IBP_PRELOAD_BASE_H */
