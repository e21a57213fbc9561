/* `ibp run`: runs a command with libibp.so preloaded, on the real GPU or
 * on the simulated one. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"

/* Paths of this build tree, from CMake; empty when not given. */
#ifndef IBP_DEFAULT_PRELOAD_LIB
#define IBP_DEFAULT_PRELOAD_LIB ""
#endif
#ifndef IBP_DEFAULT_SIM_LIB_DIR
#define IBP_DEFAULT_SIM_LIB_DIR ""
#endif

static const char help[] =
    "Usage: ibp run [options] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with libibp.so preloaded: libibp.so is put in front of\n"
    "LD_PRELOAD, and the options set libibp's variables (docs/CONFIG.md);\n"
    "the rest of the environment, IBP_* included, is passed on as it is.\n"
    "When no CUDA driver is installed (libcuda.so.1 cannot be loaded, or it\n"
    "is the simulated one), or with --sim, the directory of the simulated\n"
    "driver and runtime is put in front of LD_LIBRARY_PATH, so COMMAND runs\n"
    "on the simulated GPU.\n"
    "\n"
    "Options:\n"
    "  --regions SPEC     IBP_REGIONS=SPEC: the pinned buffers to serve\n"
    "                     compressed, e.g. 'min=64M,name=weights'\n"
    "  --stats FILE       IBP_STATS=FILE: statistics as JSON at exit\n"
    "                     (--stats 1: a table on stderr)\n"
    "  --disable          IBP_DISABLE=1: libibp loaded, every copy passed\n"
    "                     through (the baseline of an A/B comparison)\n"
    "  --sim              the simulated GPU even where a driver is installed\n"
    "  -h, --help         show this help\n"
    "\n"
    "libibp.so is $IBP_PRELOAD_LIB, else the one this ibp was built with,\n"
    "else ../preload/libibp.so or ../lib/libibp.so beside the ibp\n"
    "executable.  The simulated driver (libcuda.so.1) is looked for in\n"
    "$IBP_SIM_LIB_DIR, else in this build's sim/lib, else in ../sim/lib\n"
    "beside the ibp executable.\n"
    "\n"
    "Exit status: COMMAND's; 2 when ibp run cannot start it (usage error,\n"
    "libibp.so or the simulated driver not found), 126 when COMMAND cannot\n"
    "be executed, 127 when it is not found.\n";

static const cli_option options[] = {{"regions", 0, 1}, {"stats", 0, 1},
                                     {"disable", 0, 0}, {"sim", 0, 0},
                                     {"help", 'h', 0},  {NULL, 0, 0}};

typedef struct run_args {
  const char *regions, *stats;
  int disable, sim;
  char **command; /* NULL-terminated, after "--" */
} run_args;

/* Index of the first "--" in argv, or argc. */
static int find_separator(int argc, char **argv) {
  int i = 1;
  while (i < argc && strcmp(argv[i], "--") != 0)
    i++;
  return i;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, run_args *a) {
  int sep = find_separator(argc, argv);
  cli_parser ps;
  cli_item it;
  char err[256];
  memset(a, 0, sizeof *a);
  cli_parser_init(&ps, sep, argv, 1, options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    if (it.kind == CLI_ERROR)
      return cli_syntax_error("run", "%s", err);
    if (it.kind == CLI_POSITIONAL)
      return cli_syntax_error("run",
                              "unexpected argument '%s' (the command "
                              "goes after '--')",
                              it.value);
    const char *name = options[it.option].name;
    if (strcmp(name, "help") == 0) {
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(name, "regions") == 0)
      a->regions = it.value;
    else if (strcmp(name, "stats") == 0)
      a->stats = it.value;
    else if (strcmp(name, "disable") == 0)
      a->disable = 1;
    else
      a->sim = 1;
  }
  if (sep == argc)
    return cli_syntax_error("run", "missing '--' before the command");
  if (sep + 1 == argc)
    return cli_syntax_error("run", "no command after '--'");
  a->command = argv + sep + 1;
  return -1;
}

/* ---- where things are --------------------------------------------------- */

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

static int find_preload(char *out) {
  const char *env = getenv("IBP_PRELOAD_LIB");
  if (env != NULL && env[0] != '\0') {
    if (existing(env, out) != 0) {
      cli_error("ibp", "IBP_PRELOAD_LIB=%s: %s", env, strerror(errno));
      return CLI_EXIT_USAGE;
    }
  } else {
    char dir[PATH_MAX], cand[PATH_MAX + 32];
    int have_dir = exe_dir(dir, sizeof dir) == 0;
    int found = existing(IBP_DEFAULT_PRELOAD_LIB, out) == 0;
    for (int i = 0; !found && have_dir && i < 2; i++) {
      snprintf(cand, sizeof cand, "%s/../%s", dir,
               i == 0 ? "preload/libibp.so" : "lib/libibp.so");
      found = existing(cand, out) == 0;
    }
    if (!found) {
      cli_error("ibp run", "libibp.so not found (build the ibp_preload "
                           "target, or set IBP_PRELOAD_LIB)");
      return CLI_EXIT_USAGE;
    }
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

/* Whether libcuda.so.1, as the command would find it, is NVIDIA's: it
 * loads, and it is not the simulated driver (which exports the emulator's
 * simt_* functions).  The handle stays open: exec replaces the process. */
static int real_driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  return h != NULL && dlsym(h, "simt_kernel_find") == NULL;
}

/* ---- the environment ---------------------------------------------------- */

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

static int set_environment(const run_args *a, const char *preload,
                           const char *sim_dir) {
  int rc = cli_prepend_env("LD_PRELOAD", preload, ':');
  if (rc == 0 && sim_dir != NULL)
    rc = cli_prepend_env("LD_LIBRARY_PATH", sim_dir, ':');
  if (rc == 0 && a->regions != NULL)
    rc = setenv("IBP_REGIONS", a->regions, 1);
  if (rc == 0 && a->stats != NULL)
    rc = setenv("IBP_STATS", a->stats, 1);
  if (rc == 0 && a->disable)
    rc = setenv("IBP_DISABLE", "1", 1);
  if (rc != 0)
    cli_error("ibp run", "cannot set the environment: %s", strerror(errno));
  return rc == 0 ? -1 : CLI_EXIT_USAGE;
}

int cmd_run(int argc, char **argv) {
  run_args a;
  char preload[PATH_MAX], sim_dir[PATH_MAX];
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if ((rc = find_preload(preload)) >= 0)
    return rc;
  int sim = a.sim || !real_driver_present();
  if (sim && (rc = cli_find_sim_dir("ibp run", sim_dir)) >= 0)
    return rc;
  if ((rc = set_environment(&a, preload, sim ? sim_dir : NULL)) >= 0)
    return rc;
  fflush(NULL);
  execvp(a.command[0], a.command);
  int err = errno;
  cli_error("ibp", "%s: %s", a.command[0], strerror(err));
  return err == ENOENT ? 127 : 126;
}
