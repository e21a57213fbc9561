/* `ibp run`: runs a command with libibp.so preloaded, on the real GPU or
 * on the simulated one; checks the configuration first; prints the
 * environment for job scripts (--print-env); turns on discovery
 * (--discover). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "config/config.h"
#include "profile/profile.h"

extern char **environ;

static const char help[] =
    "Usage: ibp run [options] -- COMMAND [ARGS...]\n"
    "       ibp run --print-env [options] [-- COMMAND [ARGS...]]\n"
    "\n"
    "Runs COMMAND with libibp.so preloaded: libibp.so is put in front of\n"
    "LD_PRELOAD, and the options set libibp's variables (docs/CONFIG.md);\n"
    "the rest of the environment, IBP_* included, is passed on as it is.\n"
    "The rules (IBP_REGIONS, IBP_CONFIG) and the other variables, the\n"
    "device cost profile (IBP_PROFILE) included, are checked first: a bad\n"
    "one is one message and exit status 2, as are an empty --regions and\n"
    "a statistics file (--stats, IBP_STATS) that cannot be written.  The\n"
    "statistics file is written before COMMAND starts, saying \"no CUDA\n"
    "activity\"; libibp replaces it at exit when COMMAND used CUDA.\n"
    "When no CUDA driver is installed (libcuda.so.1 cannot be loaded, or it\n"
    "is the simulated one), or with --sim, the directory of the simulated\n"
    "driver and runtime is put in front of LD_LIBRARY_PATH, so COMMAND runs\n"
    "on the simulated GPU.\n"
    "\n"
    "Options:\n"
    "  --regions SPEC     IBP_REGIONS=SPEC: the pinned buffers to serve\n"
    "                     compressed, e.g. 'min=64M,name=weights'\n"
    "  --stats FILE       IBP_STATS=FILE: statistics as JSON at exit\n"
    "                     (--stats 1: a table on stderr); %p in FILE is\n"
    "                     the process id, %r the rank ($RANK, else\n"
    "                     $LOCAL_RANK, else 0)\n"
    "  --disable          IBP_DISABLE=1: libibp loaded, every copy passed\n"
    "                     through (the baseline of an A/B comparison)\n"
    "  --discover         IBP_DISCOVER=1: at exit, each pinned allocation,\n"
    "                     the host-to-device copies from it, and suggested\n"
    "                     IBP_REGIONS rules, on stderr (docs/USING.md)\n"
    "  --print-env        print the environment COMMAND would get\n"
    "                     (LD_PRELOAD, LD_LIBRARY_PATH, IBP_*) as export\n"
    "                     lines for a job script, and run nothing\n"
    "  --sim              the simulated GPU even where a driver is installed\n"
    "  -h, --help         show this help\n"
    "\n"
    "libibp.so is $IBP_PRELOAD_LIB, else the one beside this ibp (a build\n"
    "tree's preload/, an installed tree's library directory), else the one\n"
    "this ibp was built with.  The simulated driver (libcuda.so.1) is\n"
    "looked for in $IBP_SIM_LIB_DIR, else in this build's sim/lib, else in\n"
    "../sim/lib beside the ibp executable.\n"
    "\n"
    "Exit status: COMMAND's; 2 when ibp run cannot start it (usage error,\n"
    "bad configuration, libibp.so or the simulated driver not found), 126\n"
    "when COMMAND cannot be executed, 127 when it is not found.\n";

static const cli_option options[] = {
    {"regions", 0, 1},   {"stats", 0, 1}, {"disable", 0, 0}, {"discover", 0, 0},
    {"print-env", 0, 0}, {"sim", 0, 0},   {"help", 'h', 0},  {NULL, 0, 0}};

typedef struct run_args {
  const char *regions, *stats;
  int disable, discover, print_env, sim;
  char **command; /* NULL-terminated, after "--"; NULL with --print-env */
} run_args;

/* Index of the first "--" in argv, or argc. */
static int find_separator(int argc, char **argv) {
  int i = 1;
  while (i < argc && strcmp(argv[i], "--") != 0)
    i++;
  return i;
}

static void set_flag(run_args *a, const char *name, const char *value) {
  if (strcmp(name, "regions") == 0)
    a->regions = value;
  else if (strcmp(name, "stats") == 0)
    a->stats = value;
  else if (strcmp(name, "disable") == 0)
    a->disable = 1;
  else if (strcmp(name, "discover") == 0)
    a->discover = 1;
  else if (strcmp(name, "print-env") == 0)
    a->print_env = 1;
  else
    a->sim = 1;
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
    set_flag(a, name, it.value);
  }
  if (sep == argc && !a->print_env)
    return cli_syntax_error("run", "missing '--' before the command");
  if (sep + 1 == argc)
    return cli_syntax_error("run", "no command after '--'");
  a->command = sep < argc ? argv + sep + 1 : NULL;
  return -1;
}

/* ---- the environment ---------------------------------------------------- */

/* libibp's variables from the options. */
static int set_variables(const run_args *a) {
  int rc = 0;
  if (a->regions != NULL)
    rc = setenv("IBP_REGIONS", a->regions, 1);
  if (rc == 0 && a->stats != NULL)
    rc = setenv("IBP_STATS", a->stats, 1);
  if (rc == 0 && a->disable)
    rc = setenv("IBP_DISABLE", "1", 1);
  if (rc == 0 && a->discover)
    rc = setenv("IBP_DISCOVER", "1", 1);
  if (rc != 0)
    cli_error("ibp run", "cannot set the environment: %s", strerror(errno));
  return rc == 0 ? -1 : CLI_EXIT_USAGE;
}

/* libibp.so in front of LD_PRELOAD, the simulated driver's directory (or
 * NULL) in front of LD_LIBRARY_PATH. */
static int set_search_lists(const char *preload, const char *sim_dir) {
  int rc = cli_prepend_env("LD_PRELOAD", preload, ':');
  if (rc == 0 && sim_dir != NULL)
    rc = cli_prepend_env("LD_LIBRARY_PATH", sim_dir, ':');
  if (rc != 0)
    cli_error("ibp run", "cannot set the environment: %s", strerror(errno));
  return rc == 0 ? -1 : CLI_EXIT_USAGE;
}

/* The variables as libibp will read them (config/): a bad rule or value
 * stops here, with the message libibp would log, instead of a program
 * that runs without libibp.  Returns -1 to go on, else the exit code. */
static int check_config(ibp_config *cfg) {
  ibp_config_error e;
  if (ibp_config_load(cfg, NULL, &e) == 0)
    return -1;
  char where[48] = "";
  if (e.line)
    snprintf(where, sizeof where, " line %u", e.line);
  else if (e.rule)
    snprintf(where, sizeof where, " rule %u", e.rule);
  cli_error("ibp run", "%s%s, token '%s': %s", e.variable, where, e.token,
            e.message);
  return CLI_EXIT_USAGE;
}

/* --regions alone, as libibp reads IBP_REGIONS. */
static const char *regions_only_value;
static const char *regions_only(const char *name) {
  return strcmp(name, "IBP_REGIONS") == 0 ? regions_only_value : NULL;
}

/* --regions that holds no rule ('', ';', spaces) would run the program
 * with no region: refused.  Returns -1 to go on, else the exit code. */
static int check_regions_given(const char *regions) {
  ibp_config cfg;
  ibp_config_error e;
  if (regions == NULL)
    return -1;
  regions_only_value = regions;
  if (ibp_config_load(&cfg, regions_only, &e) != 0 || cfg.n_rules > 0)
    return -1; /* a bad one was reported by check_config */
  cli_error("ibp run",
            "--regions '%s': no rule (leave --regions out to run without "
            "regions; docs/CONFIG.md)",
            regions);
  return CLI_EXIT_USAGE;
}

/* The device cost profile IBP_PROFILE names, loaded as libibp will
 * (profile/): a name or file that does not load stops here. */
static int check_profile(const ibp_config *cfg) {
  ibp_profile prof;
  char err[512];
  if (!cfg->profile[0] ||
      ibp_profile_load(cfg->profile, &prof, err, sizeof err) == 0)
    return -1;
  cli_error("ibp run", "IBP_PROFILE, token '%s': %s", cfg->profile, err);
  return CLI_EXIT_USAGE;
}

/* %p (this process: the command keeps it across exec), %r ($RANK, else
 * $LOCAL_RANK, of 1 to 9 digits, else 0) and %% expanded as libibp
 * expands them (docs/CONFIG.md).  Returns -1 when it does not fit. */
static int expand_report_path(const char *in, char *out, size_t cap) {
  char pid[24], rank[16] = "0";
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  static const char *const vars[] = {"RANK", "LOCAL_RANK"};
  for (size_t i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    size_t n = v ? strlen(v) : 0;
    if (n >= 1 && n <= 9 && strspn(v, "0123456789") == n) {
      snprintf(rank, sizeof rank, "%s", v);
      break;
    }
  }
  size_t o = 0;
  for (const char *p = in; *p; p++) {
    char one[2] = {*p, '\0'};
    const char *piece = one;
    if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == '%')) {
      piece = p[1] == 'p' ? pid : p[1] == 'r' ? rank : "%";
      p++;
    }
    size_t n = strlen(piece);
    if (o + n >= cap)
      return -1;
    memcpy(out + o, piece, n);
    o += n;
  }
  out[o] = '\0';
  return 0;
}

static const char no_activity[] =
    "{\"version\": 1, \"no_cuda_activity\": true, \"note\": \"no CUDA "
    "activity: written by ibp run before the program started; libibp "
    "replaces it at exit when the program makes a CUDA call\", "
    "\"regions\": [], \"totals\": {\"regions\": 0}}\n";

/* Writes `text` to `path` through a temporary file beside it and rename,
 * as libibp writes its report (so the directory must take new files).
 * Returns 0 or an errno, with `what` saying which step failed. */
static int write_beside(const char *path, const char *text, const char **what) {
  char tmp[PATH_MAX + 16];
  if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
    return *what = "cannot open", ENAMETOOLONG;
  int fd = mkstemp(tmp);
  if (fd < 0)
    return *what = "cannot create a file in its directory", errno;
  mode_t mask = umask(0);
  umask(mask);
  (void)fchmod(fd, 0666 & ~mask); /* as a file fopen creates */
  size_t n = strlen(text);
  int err = write(fd, text, n) == (ssize_t)n ? 0 : errno ? errno : EIO;
  if (close(fd) != 0 && err == 0)
    err = errno;
  *what = "cannot write";
  if (err == 0 && rename(tmp, path) != 0)
    err = errno, *what = "cannot replace it";
  if (err != 0)
    unlink(tmp);
  return err;
}

/* 0 when the existing `path` opens for writing (nothing written), else
 * the errno. */
static int opens_for_writing(const char *path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  close(fd);
  return 0;
}

/* The statistics file: written now, saying "no CUDA activity" (libibp
 * writes it at exit only when the program made a CUDA call), so that an
 * unwritable path stops here.  A path that is not a regular file (e.g.
 * /dev/stderr) is only opened.  Returns -1 to go on, else the exit code. */
static int prepare_stats_file(const ibp_config *cfg) {
  char path[PATH_MAX];
  struct stat st;
  const char *what = "cannot open";
  int err = 0;
  if (cfg->disabled || cfg->stats != IBP_STATS_JSON)
    return -1;
  if (expand_report_path(cfg->stats_path, path, sizeof path) != 0) {
    err = ENAMETOOLONG;
  } else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    err = opens_for_writing(path);
  } else {
    err = write_beside(path, no_activity, &what);
  }
  if (err == 0)
    return -1;
  cli_error("ibp run", "IBP_STATS, path '%s': %s: %s", cfg->stats_path, what,
            strerror(err));
  return CLI_EXIT_USAGE;
}

/* IBP_DISCOVER as a path (not unset, empty, 0 or 1): libibp opens it at
 * exit (O_TRUNC), so an existing file must open for writing, else its
 * directory must take a new one.  Returns -1 to go on, else the exit
 * code. */
static int check_discover_path(const ibp_config *cfg) {
  const char *v = getenv("IBP_DISCOVER");
  char path[PATH_MAX];
  int err = 0;
  if (cfg->disabled || !v || !v[0] || strcmp(v, "0") == 0 ||
      strcmp(v, "1") == 0)
    return -1;
  if (expand_report_path(v, path, sizeof path) != 0) {
    err = ENAMETOOLONG;
  } else if (access(path, F_OK) == 0) {
    err = opens_for_writing(path);
  } else {
    char *slash = strrchr(path, '/');
    if (slash == path)
      slash[1] = '\0';
    else if (slash)
      *slash = '\0';
    else
      snprintf(path, sizeof path, ".");
    if (access(path, W_OK | X_OK) != 0)
      err = errno;
  }
  if (err == 0)
    return -1;
  cli_error("ibp run", "IBP_DISCOVER, path '%s': cannot open it: %s", v,
            strerror(err));
  return CLI_EXIT_USAGE;
}

/* Everything libibp will read, before anything else is looked for.
 * Returns -1 to go on, else the exit code. */
static int check_everything(const run_args *a, int write_stats) {
  ibp_config cfg;
  int rc = check_config(&cfg);
  if (rc < 0 && !cfg.disabled)
    rc = check_regions_given(a->regions);
  if (rc < 0 && !cfg.disabled)
    rc = check_profile(&cfg);
  if (rc < 0 && write_stats)
    rc = prepare_stats_file(&cfg);
  if (rc < 0)
    rc = check_discover_path(&cfg);
  return rc;
}

/* value single-quoted for a POSIX shell. */
static void print_quoted(const char *value) {
  putchar('\'');
  for (const char *p = value; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", stdout);
    else
      putchar(*p);
  }
  putchar('\'');
}

static int wanted_in_print(const char *entry) {
  static const char *const fixed[] = {"LD_PRELOAD=", "LD_LIBRARY_PATH="};
  for (size_t i = 0; i < 2; i++)
    if (strncmp(entry, fixed[i], strlen(fixed[i])) == 0)
      return 1;
  /* ibp's own lookup variables are not libibp's */
  return strncmp(entry, "IBP_", 4) == 0 &&
         strncmp(entry, "IBP_PRELOAD_LIB=", 16) != 0 &&
         strncmp(entry, "IBP_SIM_LIB_DIR=", 16) != 0;
}

/* `export NAME='value'` lines: paste them into a job script before
 * torchrun or srun (docs/USING.md). */
static int print_environment(void) {
  for (char **e = environ; *e != NULL; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || !wanted_in_print(*e))
      continue;
    printf("export %.*s=", (int)(eq - *e), *e);
    print_quoted(eq + 1);
    putchar('\n');
  }
  return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_DATA;
}

int cmd_run(int argc, char **argv) {
  run_args a;
  char preload[PATH_MAX], sim_dir[PATH_MAX];
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if ((rc = set_variables(&a)) >= 0 ||
      (rc = check_everything(&a, !a.print_env)) >= 0)
    return rc;
  if ((rc = cli_find_preload(preload)) >= 0)
    return rc;
  int sim = a.sim || !cli_real_driver_present();
  if (sim && (rc = cli_find_sim_dir("ibp run", sim_dir)) >= 0)
    return rc;
  if ((rc = set_search_lists(preload, sim ? sim_dir : NULL)) >= 0)
    return rc;
  if (a.print_env)
    return print_environment();
  fflush(NULL);
  execvp(a.command[0], a.command);
  int err = errno;
  cli_error("ibp", "%s: %s", a.command[0], strerror(err));
  return err == ENOENT ? 127 : 126;
}
