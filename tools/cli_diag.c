/* Diagnostics and small shared helpers of the ibp tool (see cli.h). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* "SCOPE: message[ (see 'ibp CMD --help')]" as one line on stderr. */
static void vreport(const char *scope, const char *help_cmd, const char *fmt,
                    va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (help_cmd != NULL)
    fprintf(stderr, "%s: %s (see 'ibp %s --help')\n", scope, msg, help_cmd);
  else
    fprintf(stderr, "%s: %s\n", scope, msg);
}

void cli_error(const char *scope, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(scope, NULL, fmt, ap);
  va_end(ap);
}

int cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("ibp", NULL, fmt, ap);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

int cli_syntax_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("ibp", cmd, fmt, ap);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

int cli_file_error(const char *path, const char *message) {
  cli_error("ibp", "%s: %s", path, message);
  return CLI_EXIT_DATA;
}

int cli_container_error(const char *path, ibp_status st) {
  if (st == IBP_ERR_BAD_MAGIC)
    cli_error("ibp", "%s is %s", path, ibp_status_message(st));
  else
    cli_error("ibp", "%s: %s", path, ibp_status_message(st));
  return CLI_EXIT_DATA;
}

unsigned cli_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 ? (unsigned)n : 1u;
}

unsigned cli_threads(unsigned requested) {
  return requested != 0 ? requested : cli_cpu_count();
}

const char *cli_human_bytes(uint64_t bytes, char *buf, unsigned len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes / 1024.0;
  unsigned u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.1f %s", v, units[u]);
  return buf;
}

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
