/* Helpers shared by the config/ source files; not part of the public API. */
#ifndef IBP_CONFIG_INTERNAL_H
#define IBP_CONFIG_INTERNAL_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

/* A slice of the input: no copies, no NUL needed. */
typedef struct ibp__span {
  const char *p;
  size_t n;
} ibp__span;

/* Where an error is reported: the variable, the rule and line numbers so far,
 * and the caller's error record (may be NULL). */
typedef struct ibp__where {
  const char *variable;
  unsigned rule;
  unsigned line;
  ibp_config_error *err;
} ibp__where;

ibp__span ibp__span_of(const char *s);
ibp__span ibp__trim(ibp__span s);
/* Splits s at the first sep: returns the part before it and advances *rest
 * past it (rest->p == NULL once no separator is left). */
ibp__span ibp__split(ibp__span *rest, char sep);
int ibp__word_is(ibp__span s, const char *word); /* ASCII case-insensitive */

/* Fills w->err (when not NULL) and returns -1. */
int ibp__fail(const ibp__where *w, ibp__span token, const char *message);

/* Value parsers: return 0 and store the value, or -1 with the error filled.
 * token is the whole "key=value" text, for the error message. */
int ibp__parse_size(ibp__span value, ibp__span token, const ibp__where *w,
                    uint64_t *out);
/* A decimal fraction "d[.ddddddddd]" in billionths (at most 9 decimals). */
int ibp__parse_billionths(ibp__span value, ibp__span token, const ibp__where *w,
                          uint64_t *out);

/* Parses the rules of text (';'-separated, each a ','-separated key=value
 * list or the word auto) and appends them to out; w->rule counts rules. */
int ibp__parse_rule_list(ibp__span text, ibp_config *out, ibp__where *w);

#endif /* IBP_CONFIG_INTERNAL_H */
