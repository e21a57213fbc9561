/* Logging: one function, "[ibp]" prefix, straight to stderr with the
 * write(2) system call. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"

static ibp_log_level current_level(void) {
  /* Before the configuration is loaded: warnings show. */
  return ibp__loaded() ? ibp__cfg.log_level : IBP_LOG_WARN;
}

static void vlog(const char *fmt, va_list ap) {
  char buf[512];
  int n = snprintf(buf, sizeof buf - 1, "[ibp] ");
  int m = vsnprintf(buf + n, sizeof buf - 1 - (size_t)n, fmt, ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof buf - 2)
    len = sizeof buf - 2;
  buf[len++] = '\n';
  const char *p = buf;
  while (len > 0) {
    /* the system call: libibp's write hook (track/hooks_libc.c) may wait
     * for the compact tracker's lock, which a message can be written under */
    ssize_t w = syscall(SYS_write, STDERR_FILENO, p, len);
    if (w <= 0)
      return;
    p += w;
    len -= (size_t)w;
  }
}

static void vlog_at(ibp_log_level level, const char *fmt, va_list ap) {
  if (level <= current_level())
    vlog(fmt, ap);
}

/* The variadic entry points below: their arguments logged at `level`. */
#define LOG_ARGS_AT(level)                                                     \
  do {                                                                         \
    va_list ap;                                                                \
    va_start(ap, fmt);                                                         \
    vlog_at(level, fmt, ap);                                                   \
    va_end(ap);                                                                \
  } while (0)

void ibp__log(ibp_log_level level, const char *fmt, ...) {
  LOG_ARGS_AT(level);
}

void ibp__warn_once(int *once, const char *fmt, ...) {
  if (!__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
    LOG_ARGS_AT(IBP_LOG_WARN);
}

void ibp__warn_first(int *once, const char *fmt, ...) {
  LOG_ARGS_AT(__atomic_exchange_n(once, 1, __ATOMIC_RELAXED) ? IBP_LOG_INFO
                                                             : IBP_LOG_WARN);
}

const char *ibp__human_bytes(uint64_t b, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  unsigned u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}
