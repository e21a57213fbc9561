/* Spans, error records, and the size and fraction value parsers.
 * strtod/strtoull are avoided on purpose: they depend on the application's
 * locale and accept signs, spaces and hex that the grammar rejects. */
#include "config_internal.h"

#include <string.h>

ibp__span ibp__span_of(const char *s) {
  ibp__span span = {s, s ? strlen(s) : 0};
  return span;
}

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

ibp__span ibp__trim(ibp__span s) {
  while (s.n > 0 && is_space(s.p[0])) {
    s.p++;
    s.n--;
  }
  while (s.n > 0 && is_space(s.p[s.n - 1]))
    s.n--;
  return s;
}

ibp__span ibp__split(ibp__span *rest, char sep) {
  ibp__span head = *rest;
  const char *at = rest->n ? memchr(rest->p, sep, rest->n) : NULL;
  if (!at) {
    rest->p = NULL;
    rest->n = 0;
    return head;
  }
  head.n = (size_t)(at - head.p);
  rest->n -= head.n + 1;
  rest->p = at + 1;
  return head;
}

static char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

int ibp__word_is(ibp__span s, const char *word) {
  size_t n = strlen(word);
  if (s.n != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (lower(s.p[i]) != word[i])
      return 0;
  return 1;
}

/* Copies s into dst[cap] as a C string, ending in "..." when cut. */
static void copy_clipped(char *dst, size_t cap, const char *s, size_t n) {
  if (n < cap) {
    memcpy(dst, s, n);
    dst[n] = '\0';
    return;
  }
  memcpy(dst, s, cap - 4);
  memcpy(dst + cap - 4, "...", 4);
}

int ibp__fail(const ibp__where *w, ibp__span token, const char *message) {
  ibp_config_error *e = w->err;
  if (!e)
    return -1;
  copy_clipped(e->variable, sizeof e->variable, w->variable,
               strlen(w->variable));
  e->rule = w->rule;
  e->line = w->line;
  copy_clipped(e->token, sizeof e->token, token.p ? token.p : "", token.n);
  copy_clipped(e->message, sizeof e->message, message, strlen(message));
  return -1;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Appends one decimal digit to *acc; returns -1 on uint64 overflow. */
static int push_digit(uint64_t *acc, char digit) {
  uint64_t d = (uint64_t)(digit - '0');
  if (*acc > (UINT64_MAX - d) / 10)
    return -1;
  *acc = *acc * 10 + d;
  return 0;
}

static int suffix_shift(char c) {
  switch (c) {
  case 'K':
  case 'k':
    return 10;
  case 'M':
  case 'm':
    return 20;
  case 'G':
  case 'g':
    return 30;
  default:
    return -1;
  }
}

int ibp__parse_size(ibp__span value, ibp__span token, const ibp__where *w,
                    uint64_t *out) {
  static const char overflow[] = "size does not fit in 64 bits";
  if (value.n == 0)
    return ibp__fail(w, token, "empty value");
  if (value.p[0] == '-')
    return ibp__fail(w, token, "size must not be negative");
  if (!is_digit(value.p[0]))
    return ibp__fail(w, token,
                     "size must be a whole number of bytes, "
                     "optionally followed by K, M or G");
  uint64_t n = 0;
  size_t i = 0;
  for (; i < value.n && is_digit(value.p[i]); i++)
    if (push_digit(&n, value.p[i]) != 0)
      return ibp__fail(w, token, overflow);
  if (i == value.n) {
    *out = n;
    return 0;
  }
  int shift = suffix_shift(value.p[i]);
  if (shift < 0 || i + 1 != value.n)
    return ibp__fail(w, token, "size suffix must be K, M or G");
  if (n > (UINT64_MAX >> shift))
    return ibp__fail(w, token, overflow);
  *out = n << shift;
  return 0;
}

int ibp__parse_billionths(ibp__span value, ibp__span token, const ibp__where *w,
                          uint64_t *out) {
  static const char bad[] = "expected a decimal number such as 0.75";
  size_t i = 0;
  uint64_t whole = 0;
  for (; i < value.n && is_digit(value.p[i]); i++)
    if (push_digit(&whole, value.p[i]) != 0 || whole > 1000)
      return ibp__fail(w, token, "number out of range");
  if (i == 0)
    return ibp__fail(w, token, value.n ? bad : "empty value");
  uint64_t frac = 0;
  unsigned decimals = 0;
  if (i < value.n && value.p[i] == '.') {
    for (i++; i < value.n && is_digit(value.p[i]); i++, decimals++)
      if (decimals == 9)
        return ibp__fail(w, token, "at most 9 decimal places");
      else
        frac = frac * 10 + (uint64_t)(value.p[i] - '0');
  }
  if (i != value.n)
    return ibp__fail(w, token, bad);
  for (; decimals < 9; decimals++)
    frac *= 10;
  *out = whole * 1000000000u + frac;
  return 0;
}
