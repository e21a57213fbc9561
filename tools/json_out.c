/* Minimal pretty JSON writer (see json_out.h). */
#include "json_out.h"

#include <math.h>

void json_init(json_out *j, FILE *f) {
  j->f = f;
  j->depth = 0;
  j->count[0] = 0;
  j->inline_[0] = 0;
}

static void put_escaped(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    default:
      if (*p < 0x20)
        fprintf(f, "\\u%04x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Separator, newline, indentation and "key": for the next value. */
static void begin_value(json_out *j, const char *key) {
  if (j->inline_[j->depth]) {
    if (j->count[j->depth] > 0)
      fputs(", ", j->f);
  } else if (j->depth > 0) {
    fputs(j->count[j->depth] > 0 ? ",\n" : "\n", j->f);
    for (int i = 0; i < j->depth; i++)
      fputs("  ", j->f);
  }
  j->count[j->depth]++;
  if (key != NULL) {
    put_escaped(j->f, key);
    fputs(": ", j->f);
  }
}

static void open_level(json_out *j, const char *key, char c, int on_one_line) {
  begin_value(j, key);
  fputc(c, j->f);
  if (j->depth + 1 < JSON_MAX_DEPTH)
    j->depth++;
  j->count[j->depth] = 0;
  j->inline_[j->depth] = on_one_line;
}

static void close_level(json_out *j, char c) {
  int had_members = j->count[j->depth] > 0 && !j->inline_[j->depth];
  if (j->depth > 0)
    j->depth--;
  if (had_members) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
      fputs("  ", j->f);
  }
  fputc(c, j->f);
  if (j->depth == 0)
    fputc('\n', j->f);
}

void json_object_begin(json_out *j, const char *key) {
  open_level(j, key, '{', 0);
}

void json_object_end(json_out *j) {
  close_level(j, '}');
}

void json_array_begin(json_out *j, const char *key) {
  open_level(j, key, '[', 0);
}

void json_inline_array_begin(json_out *j, const char *key) {
  open_level(j, key, '[', 1);
}

void json_array_end(json_out *j) {
  close_level(j, ']');
}

void json_string(json_out *j, const char *key, const char *value) {
  begin_value(j, key);
  put_escaped(j->f, value);
}

void json_u64(json_out *j, const char *key, uint64_t value) {
  begin_value(j, key);
  fprintf(j->f, "%llu", (unsigned long long)value);
}

void json_double(json_out *j, const char *key, double value) {
  begin_value(j, key);
  if (isfinite(value))
    fprintf(j->f, "%.10g", value);
  else
    fputs("null", j->f);
}

void json_bool(json_out *j, const char *key, int value) {
  begin_value(j, key);
  fputs(value ? "true" : "false", j->f);
}

void json_null(json_out *j, const char *key) {
  begin_value(j, key);
  fputs("null", j->f);
}
