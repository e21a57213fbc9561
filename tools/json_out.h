/*
 * Minimal JSON writer for the tool's --json output: objects, arrays,
 * strings (escaped), integers, doubles (non-finite ones as null), one
 * member per line with two-space indentation.
 *
 * `key` is the member name inside an object and must be NULL inside an
 * array.  Nesting is limited to JSON_MAX_DEPTH levels.
 */
#ifndef IBP_TOOLS_JSON_OUT_H
#define IBP_TOOLS_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 8

typedef struct json_out {
  FILE *f;
  int depth;
  int count[JSON_MAX_DEPTH];   /* members written at each level */
  int inline_[JSON_MAX_DEPTH]; /* level written on one line */
} json_out;

void json_init(json_out *j, FILE *f);

void json_object_begin(json_out *j, const char *key);
void json_object_end(json_out *j);
void json_array_begin(json_out *j, const char *key);
void json_array_end(json_out *j);
/* An array of scalars written on one line: [0.5, 0.6, 0.7]. */
void json_inline_array_begin(json_out *j, const char *key);

void json_string(json_out *j, const char *key, const char *value);
void json_u64(json_out *j, const char *key, uint64_t value);
void json_double(json_out *j, const char *key, double value);
void json_bool(json_out *j, const char *key, int value);
void json_null(json_out *j, const char *key);

#endif /* IBP_TOOLS_JSON_OUT_H */
