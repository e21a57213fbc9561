/* Command-line options of the samples (see sample.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

const char *sample_prog = "sample";

void sample_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", sample_prog);
  vfprintf(stderr, fmt, ap);
  fputs(" (see --help)\n", stderr);
  va_end(ap);
  exit(SAMPLE_EXIT_USAGE);
}

/* Decimal digits, then (sizes only) one of K, M, G in either case. */
static int parse_number(const char *s, int suffix_ok, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  if (suffix_ok && *p != '\0') {
    switch (*p++) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      return -1;
    }
  }
  if (*p != '\0' || (shift && v > (UINT64_MAX >> shift)))
    return -1;
  *out = v << shift;
  return 0;
}

static void take_value(sample_opt *o, const char *v) {
  switch (o->kind) {
  case SAMPLE_OPT_FLAG:
    *(int *)o->value = 1;
    break;
  case SAMPLE_OPT_U64:
  case SAMPLE_OPT_SIZE:
    if (parse_number(v, o->kind == SAMPLE_OPT_SIZE, o->value) != 0)
      sample_usage_error(
          "--%s must be a whole number%s (got '%s')", o->name,
          o->kind == SAMPLE_OPT_SIZE ? " with optional K/M/G" : "", v);
    break;
  case SAMPLE_OPT_STR:
    *(const char **)o->value = v;
    break;
  }
  o->given = 1;
}

static void print_help(const char *synopsis, const sample_opt *opts) {
  printf("Usage: %s [options]\n\n%s\nOptions:\n", sample_prog, synopsis);
  for (const sample_opt *o = opts; o->name != NULL; o++) {
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
    printf("  %-20s %s\n", left, o->help);
  }
  printf("  %-20s %s\n", "--help", "show this help");
  printf("\nOutput: '%s: ok bytes=B copies=C checksum=0x...' (B bytes in C\n"
         "host-to-device copies; the checksum is FNV-1a of every byte that\n"
         "arrived), key=value lines, and last 'throughput_gbps=' (1e9 bytes\n"
         "per second of the timed copies).\n"
         "Exit status: 0 ok, 1 a byte on the device differs, 2 a CUDA "
         "error,\n3 a bad command line or input file.\n",
         sample_prog);
}

static sample_opt *find(sample_opt *opts, const char *name, size_t len) {
  for (sample_opt *o = opts; o->name != NULL; o++) {
    if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
      return o;
  }
  return NULL;
}

const sample_opt *sample_opt_find(const sample_opt *opts, const char *name) {
  for (const sample_opt *o = opts; o->name != NULL; o++) {
    if (strcmp(o->name, name) == 0)
      return o;
  }
  abort(); /* a sample asked for an option it does not have */
}

void sample_parse(int argc, char **argv, const char *synopsis,
                  sample_opt *opts) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      print_help(synopsis, opts);
      exit(SAMPLE_EXIT_OK);
    }
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
      sample_usage_error("unexpected argument '%s'", arg);
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    sample_opt *o = find(opts, name, len);
    if (o == NULL)
      sample_usage_error("unknown option '--%.*s'", (int)len, name);
    if (o->kind == SAMPLE_OPT_FLAG) {
      if (eq != NULL)
        sample_usage_error("option --%s takes no value", o->name);
      take_value(o, NULL);
    } else if (eq != NULL) {
      take_value(o, eq + 1);
    } else if (i + 1 < argc) {
      take_value(o, argv[++i]);
    } else {
      sample_usage_error("option --%s needs a value", o->name);
    }
  }
}

void sample_check_table_opts(const sample_opt *opts, const char *data,
                             uint64_t row_bytes) {
  int data_shape = sample_opt_find(opts, "rows")->given ||
                   sample_opt_find(opts, "dim")->given;
  if (data && data_shape)
    sample_usage_error("--data takes its rows from the file; drop --rows and "
                       "--dim");
  if (data && row_bytes == 0)
    sample_usage_error("--data needs --row-bytes");
  if (!data && sample_opt_find(opts, "row-bytes")->given)
    sample_usage_error("--row-bytes applies to --data only (use --dim)");
}
