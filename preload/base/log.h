/*
 * Logging (base/log.c): one function, an "[ibp]" prefix, straight to stderr
 * with write(2).  Usable before the configuration is loaded (then at warn
 * level) and from any thread; never allocates.
 */
#ifndef IBP_PRELOAD_LOG_H
#define IBP_PRELOAD_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Writes "[ibp] <message>\n" to stderr when level <= IBP_LOG (default
 * warn).  Messages longer than 511 bytes are truncated. */
void ibp__log(ibp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like ibp__log at warn level, but only the first time `*once` is 0 (sets it
 * atomically).  The "one warning" of fail-open paths. */
void ibp__warn_once(int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Warn level the first time `*once` is 0, info level afterwards: for
 * failures that may repeat per region or per copy, so a persistent fault
 * costs one warning (the rest show with IBP_LOG=info). */
void ibp__warn_first(int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* b as "1.5 MiB" (or "512 B") into buf; returns buf.  For messages. */
const char *ibp__human_bytes(uint64_t b, char *buf, size_t len);

#endif /* IBP_PRELOAD_LOG_H */
