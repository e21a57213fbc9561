/* Logging: one function, "[ibp]" prefix, straight to stderr with write(2). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
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
    ssize_t w = write(STDERR_FILENO, p, len);
    if (w <= 0)
      return;
    p += w;
    len -= (size_t)w;
  }
}

void ibp__log(ibp_log_level level, const char *fmt, ...) {
  if (level > current_level())
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void ibp__warn_once(int *once, const char *fmt, ...) {
  if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
    return;
  if (IBP_LOG_WARN > current_level())
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void ibp__warn_first(int *once, const char *fmt, ...) {
  ibp_log_level level = __atomic_exchange_n(once, 1, __ATOMIC_RELAXED)
                            ? IBP_LOG_INFO
                            : IBP_LOG_WARN;
  if (level > current_level())
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}
