/* Option iterator and strict number parsers (see cli_args.h). */
#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_parser_init(cli_parser *ps, int argc, char **argv, int first,
                     const cli_option *options) {
  ps->argc = argc;
  ps->argv = argv;
  ps->next = first;
  ps->options = options;
  ps->positional_only = 0;
}

static int find_long(const cli_option *opts, const char *name, size_t len) {
  for (int i = 0; opts[i].name != NULL; i++) {
    if (strlen(opts[i].name) == len && memcmp(opts[i].name, name, len) == 0)
      return i;
  }
  return -1;
}

static int find_short(const cli_option *opts, char c) {
  for (int i = 0; opts[i].name != NULL; i++) {
    if (opts[i].short_name != 0 && opts[i].short_name == c)
      return i;
  }
  return -1;
}

/* Fills the option's value from "=VALUE" or the next argv element. */
static cli_kind take_value(cli_parser *ps, cli_item *item, const char *inline_v,
                           const char *shown, char *err, size_t err_len) {
  const cli_option *o = &ps->options[item->option];
  if (!o->takes_value) {
    if (inline_v != NULL) {
      snprintf(err, err_len, "option %s takes no value", shown);
      return item->kind = CLI_ERROR;
    }
    item->value = NULL;
    return item->kind = CLI_OPTION;
  }
  if (inline_v != NULL) {
    item->value = inline_v;
  } else if (ps->next < ps->argc) {
    item->value = ps->argv[ps->next++];
  } else {
    snprintf(err, err_len, "option %s needs a value", shown);
    return item->kind = CLI_ERROR;
  }
  return item->kind = CLI_OPTION;
}

static cli_kind parse_long(cli_parser *ps, const char *arg, cli_item *item,
                           char *err, size_t err_len) {
  const char *name = arg + 2;
  const char *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  item->option = find_long(ps->options, name, len);
  if (item->option < 0) {
    snprintf(err, err_len, "unknown option '--%.*s'", (int)len, name);
    return item->kind = CLI_ERROR;
  }
  char shown[64];
  snprintf(shown, sizeof shown, "--%s", ps->options[item->option].name);
  return take_value(ps, item, eq ? eq + 1 : NULL, shown, err, err_len);
}

static cli_kind parse_short(cli_parser *ps, const char *arg, cli_item *item,
                            char *err, size_t err_len) {
  item->option = arg[2] == '\0' ? find_short(ps->options, arg[1]) : -1;
  if (item->option < 0) {
    snprintf(err, err_len, "unknown option '%s'", arg);
    return item->kind = CLI_ERROR;
  }
  return take_value(ps, item, NULL, arg, err, err_len);
}

cli_kind cli_next(cli_parser *ps, cli_item *item, char *err, size_t err_len) {
  item->option = -1;
  item->value = NULL;
  if (ps->next >= ps->argc)
    return item->kind = CLI_END;
  const char *arg = ps->argv[ps->next++];
  if (!ps->positional_only && strcmp(arg, "--") == 0) {
    ps->positional_only = 1;
    return cli_next(ps, item, err, err_len);
  }
  if (ps->positional_only || arg[0] != '-' || arg[1] == '\0') {
    item->value = arg;
    return item->kind = CLI_POSITIONAL;
  }
  if (arg[1] == '-')
    return parse_long(ps, arg, item, err, err_len);
  return parse_short(ps, arg, item, err, err_len);
}

/* ---- strict numbers ----------------------------------------------------- */

/* Parses the leading digits of s; *end points past them. */
static cli_num parse_digits(const char *s, uint64_t *out, const char **end) {
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return CLI_NUM_SYNTAX;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return CLI_NUM_OVERFLOW;
    v = v * 10 + d;
  }
  *out = v;
  *end = p;
  return CLI_NUM_OK;
}

cli_num cli_parse_u64(const char *s, uint64_t *out) {
  const char *end;
  uint64_t v;
  cli_num r = parse_digits(s, &v, &end);
  if (r != CLI_NUM_OK)
    return r;
  if (*end != '\0')
    return CLI_NUM_SYNTAX;
  *out = v;
  return CLI_NUM_OK;
}

static unsigned suffix_shift(char c) {
  switch (c) {
  case 'k':
  case 'K':
    return 10;
  case 'm':
  case 'M':
    return 20;
  case 'g':
  case 'G':
    return 30;
  default:
    return 0;
  }
}

cli_num cli_parse_size(const char *s, uint64_t *out) {
  const char *end;
  uint64_t v;
  cli_num r = parse_digits(s, &v, &end);
  if (r != CLI_NUM_OK)
    return r;
  unsigned shift = 0;
  if (*end != '\0') {
    shift = suffix_shift(*end);
    if (shift == 0)
      return CLI_NUM_SYNTAX;
    end++;
    if (strcmp(end, "iB") == 0)
      end += 2;
    if (*end != '\0')
      return CLI_NUM_SYNTAX;
  }
  if (shift != 0 && v > (UINT64_MAX >> shift))
    return CLI_NUM_OVERFLOW;
  *out = v << shift;
  return CLI_NUM_OK;
}

cli_num cli_parse_double(const char *s, double *out) {
  const char *p = s[0] == '-' ? s + 1 : s;
  /* strtod would accept spaces, '+', hex, "inf" and "nan": require a digit
   * or a '.' followed by a digit, and only decimal characters. */
  if (!((p[0] >= '0' && p[0] <= '9') ||
        (p[0] == '.' && p[1] >= '0' && p[1] <= '9')))
    return CLI_NUM_SYNTAX;
  if (strspn(p, "0123456789.eE+-") != strlen(p))
    return CLI_NUM_SYNTAX;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0')
    return CLI_NUM_SYNTAX;
  if (errno == ERANGE || !isfinite(v))
    return CLI_NUM_OVERFLOW;
  *out = v;
  return CLI_NUM_OK;
}
