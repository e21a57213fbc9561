/*
 * Command-line parsing helpers for the ibp tool: an option iterator over
 * argv driven by a per-command table, and strict number parsers.
 *
 * Nothing here prints: every failure is returned (with a message written
 * into a caller buffer where there is one) and the command reports it.
 */
#ifndef IBP_TOOLS_CLI_ARGS_H
#define IBP_TOOLS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* One accepted option: "--name" (and "-c" when short_name is nonzero).
 * A table ends with an entry whose name is NULL. */
typedef struct cli_option {
  const char *name; /* without the leading "--" */
  char short_name;  /* 0 = none */
  int takes_value;  /* "--name VALUE" or "--name=VALUE" */
} cli_option;

typedef enum cli_kind {
  CLI_END = 0,    /* argv exhausted */
  CLI_POSITIONAL, /* item.value is the argument */
  CLI_OPTION,     /* item.option indexes the table; item.value or NULL */
  CLI_ERROR,      /* unknown option, missing or unexpected value */
} cli_kind;

typedef struct cli_item {
  cli_kind kind;
  int option;        /* index into the table for CLI_OPTION */
  const char *value; /* option value or positional argument */
} cli_item;

typedef struct cli_parser {
  int argc;
  char **argv;
  int next; /* index of the next argv element to read */
  const cli_option *options;
  int positional_only; /* set after "--" */
} cli_parser;

/* Starts at argv[first]. */
void cli_parser_init(cli_parser *ps, int argc, char **argv, int first,
                     const cli_option *options);

/* Reads the next item.  On CLI_ERROR a one-line message (without program
 * prefix) is written to err.  "-" alone is positional (stdin-like names). */
cli_kind cli_next(cli_parser *ps, cli_item *item, char *err, size_t err_len);

/* ---- strict numbers ----------------------------------------------------- */

typedef enum cli_num {
  CLI_NUM_OK = 0,
  CLI_NUM_SYNTAX,   /* empty, sign, spaces, junk after the number */
  CLI_NUM_OVERFLOW, /* does not fit in 64 bits */
} cli_num;

/* Decimal digits only ("0" .. "18446744073709551615"). */
cli_num cli_parse_u64(const char *s, uint64_t *out);

/* Decimal digits with an optional binary suffix: K, M, G (either case),
 * optionally followed by "iB" ("4K", "4KiB", "1M").  No sign, no spaces. */
cli_num cli_parse_size(const char *s, uint64_t *out);

/* A finite decimal number ("0.85", "1", "5e-2"); no sign "+", no spaces,
 * no hex, no "inf"/"nan".  A leading '-' is accepted so that callers can
 * report "must be positive (got -1)". */
cli_num cli_parse_double(const char *s, double *out);

#endif /* IBP_TOOLS_CLI_ARGS_H */
