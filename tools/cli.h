/*
 * The ibp command-line tool: subcommand entry points and what they share
 * (exit codes, diagnostics, number formatting).
 *
 * Diagnostics are one line on stderr:
 *   "ibp: PATH: reason"            a file cannot be used (system errors,
 *                                  empty files, bad containers)
 *   "ibp: --option ..."            a usage error (exit 2)
 *   "ibp CMD: reason"              the data does not suit the command
 * Exit codes: 0 success, 1 data or I/O error, 2 usage error.
 */
#ifndef IBP_TOOLS_CLI_H
#define IBP_TOOLS_CLI_H

#include <stdint.h>

#include "ibp/codec.h"

enum {
  CLI_EXIT_OK = 0,
  CLI_EXIT_DATA = 1,  /* bad data, I/O failure, verification failure */
  CLI_EXIT_USAGE = 2, /* bad command line */
};

/* Subcommands: argv[0] is the subcommand name. */
int cmd_analyze(int argc, char **argv);
int cmd_compress(int argc, char **argv);
int cmd_decompress(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

/* "ibp" or "ibp CMD" followed by ": " and the message, on stderr. */
void cli_error(const char *scope, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Usage error: prints like cli_error with scope "ibp" and returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Command-line syntax error of subcommand `cmd` ("analyze"): prints
 * "ibp: <message> (see 'ibp CMD --help')" and returns CLI_EXIT_USAGE. */
int cli_syntax_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "ibp: PATH: message" and returns CLI_EXIT_DATA. */
int cli_file_error(const char *path, const char *message);
/* A codec status about a container file: "ibp: PATH is not an ibp
 * container (bad magic)" or "ibp: PATH: <status message>".  Returns
 * CLI_EXIT_DATA. */
int cli_container_error(const char *path, ibp_status st);

/* libibp.so, absolute, into out (PATH_MAX bytes): $IBP_PRELOAD_LIB, else
 * ../preload/libibp.so or the installed library directory's beside the ibp
 * executable, else this build's (run_paths.c).  Returns -1 when found;
 * else prints why and returns CLI_EXIT_USAGE. */
int cli_find_preload(char *out);
/* The directory of the simulated driver's libcuda.so.1, absolute, into
 * out (PATH_MAX bytes): $IBP_SIM_LIB_DIR, else this build's sim/lib, else
 * ../sim/lib beside the ibp executable (run_paths.c).  Returns -1 when
 * found; else prints why (`scope`: "ibp run") and returns CLI_EXIT_USAGE. */
int cli_find_sim_dir(const char *scope, char *out);
/* Nonzero when libcuda.so.1, as a command would find it, is NVIDIA's (not
 * missing, not the simulated one). */
int cli_real_driver_present(void);
/* Environment variable `name` = front, followed by sep and its old value
 * when it had one (LD_LIBRARY_PATH and the like).  0, or -1 with errno. */
int cli_prepend_env(const char *name, const char *front, char sep);

/* Online CPUs (>= 1). */
unsigned cli_cpu_count(void);
/* Threads to use for a `--threads` value (0 = one per CPU). */
unsigned cli_threads(unsigned requested);

/* "1.5 KiB", "256.0 MiB", "999 B" into buf; returns buf. */
const char *cli_human_bytes(uint64_t bytes, char *buf, unsigned len);

/* Seconds from CLOCK_MONOTONIC. */
double cli_now(void);

#endif /* IBP_TOOLS_CLI_H */
