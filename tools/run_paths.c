/* Where `ibp run` finds libibp.so and the simulated driver, and the
 * environment lists it edits (cli.h; tools/README.md, "ibp run"). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Paths of this build tree and of the installed tree, from CMake; empty
 * when not given. */
#ifndef IBP_DEFAULT_PRELOAD_LIB
#define IBP_DEFAULT_PRELOAD_LIB ""
#endif
#ifndef IBP_DEFAULT_SIM_LIB_DIR
#define IBP_DEFAULT_SIM_LIB_DIR ""
#endif
#ifndef IBP_INSTALL_PRELOAD_REL
#define IBP_INSTALL_PRELOAD_REL "../lib/libibp.so"
#endif

/* Directory of the running ibp executable into dir; 0 on success. */
static int exe_dir(char *dir, size_t len) {
  ssize_t n = readlink("/proc/self/exe", dir, len - 1);
  if (n <= 0 || (size_t)n >= len - 1)
    return -1;
  dir[n] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    return -1;
  *slash = '\0';
  return 0;
}

/* Absolute path of an existing file into out; 0 on success. */
static int existing(const char *path, char *out) {
  return path[0] != '\0' && access(path, R_OK) == 0 &&
                 realpath(path, out) != NULL
             ? 0
             : -1;
}

/* LD_PRELOAD and LD_LIBRARY_PATH split on ':' (and LD_PRELOAD on spaces). */
static int fits_search_list(const char *path) {
  return strpbrk(path, ": \t") == NULL;
}

/* The libibp.so beside the executable (a build tree's preload/, an
 * installed tree's library directory), else this build's. */
static int find_default_preload(char *out) {
  static const char *const beside[] = {
      "preload/libibp.so", IBP_INSTALL_PRELOAD_REL, "../lib/libibp.so"};
  char dir[PATH_MAX], cand[PATH_MAX + 64];
  if (exe_dir(dir, sizeof dir) == 0) {
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
      snprintf(cand, sizeof cand, "%s/%s%s", dir, i == 0 ? "../" : "",
               beside[i]);
      if (existing(cand, out) == 0)
        return 0;
    }
  }
  return existing(IBP_DEFAULT_PRELOAD_LIB, out);
}

int cli_find_preload(char *out) {
  const char *env = getenv("IBP_PRELOAD_LIB");
  if (env != NULL && env[0] != '\0') {
    if (existing(env, out) != 0) {
      cli_error("ibp", "IBP_PRELOAD_LIB=%s: %s", env, strerror(errno));
      return CLI_EXIT_USAGE;
    }
  } else if (find_default_preload(out) != 0) {
    cli_error("ibp run", "libibp.so not found (build the ibp_preload "
                         "target, or set IBP_PRELOAD_LIB)");
    return CLI_EXIT_USAGE;
  }
  if (!fits_search_list(out)) {
    cli_error("ibp", "%s: cannot go in LD_PRELOAD (it holds ':' or a space)",
              out);
    return CLI_EXIT_USAGE;
  }
  return -1;
}

/* A directory holding libcuda.so.1, absolute, into out; 0 on success. */
static int sim_dir_at(const char *dir, char *out) {
  char lib[PATH_MAX + 64];
  snprintf(lib, sizeof lib, "%s/libcuda.so.1", dir);
  return dir[0] != '\0' && access(lib, R_OK) == 0 && realpath(dir, out) != NULL
             ? 0
             : -1;
}

int cli_find_sim_dir(const char *scope, char *out) {
  const char *env = getenv("IBP_SIM_LIB_DIR");
  if (env != NULL && env[0] != '\0') {
    if (sim_dir_at(env, out) != 0) {
      cli_error("ibp", "IBP_SIM_LIB_DIR=%s: no libcuda.so.1 there", env);
      return CLI_EXIT_USAGE;
    }
  } else {
    char dir[PATH_MAX], cand[PATH_MAX + 16];
    int found = sim_dir_at(IBP_DEFAULT_SIM_LIB_DIR, out) == 0;
    if (!found && exe_dir(dir, sizeof dir) == 0) {
      snprintf(cand, sizeof cand, "%s/../sim/lib", dir);
      found = sim_dir_at(cand, out) == 0;
    }
    if (!found) {
      cli_error(scope, "no GPU driver and no simulated one (build the "
                       "simcuda and simcudart targets, or set "
                       "IBP_SIM_LIB_DIR)");
      return CLI_EXIT_USAGE;
    }
  }
  if (!fits_search_list(out)) {
    cli_error("ibp",
              "%s: cannot go in LD_LIBRARY_PATH (it holds ':' or a "
              "space)",
              out);
    return CLI_EXIT_USAGE;
  }
  return -1;
}

/* libcuda.so.1, as the command would find it, is NVIDIA's: it loads, and
 * it is not the simulated driver (which exports the emulator's simt_*
 * functions).  The handle stays open: exec replaces the process. */
int cli_real_driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  return h != NULL && dlsym(h, "simt_kernel_find") == NULL;
}

int cli_prepend_env(const char *name, const char *front, char sep) {
  const char *old = getenv(name);
  if (old == NULL || old[0] == '\0')
    return setenv(name, front, 1);
  size_t len = strlen(front) + 1 + strlen(old) + 1;
  char *v = malloc(len);
  if (v == NULL)
    return -1;
  snprintf(v, len, "%s%c%s", front, sep, old);
  int rc = setenv(name, v, 1);
  free(v);
  return rc;
}
