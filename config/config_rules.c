/* IBP_REGIONS rules: the key=value grammar, rule validation and matching. */
#include "config_internal.h"

#include <stdio.h>
#include <string.h>

#include "ibp/chunk_widths.h"

/* One key of the grammar: its name and the parser that stores its value. */
typedef int (*key_parser)(ibp__span value, ibp__span token, const ibp__where *w,
                          ibp_rule *rule);

typedef struct key_entry {
  const char *key;
  key_parser parse;
} key_entry;

static int parse_size_key(ibp__span value, ibp__span token, const ibp__where *w,
                          ibp_rule *rule) {
  if (ibp__parse_size(value, token, w, &rule->size) != 0)
    return -1;
  if (rule->size == 0)
    return ibp__fail(w, token, "size must be at least 1 byte");
  rule->selectors |= IBP_SELECT_SIZE;
  return 0;
}

static int parse_min_key(ibp__span value, ibp__span token, const ibp__where *w,
                         ibp_rule *rule) {
  if (ibp__parse_size(value, token, w, &rule->min) != 0)
    return -1;
  rule->selectors |= IBP_SELECT_MIN;
  return 0;
}

static int parse_nth_key(ibp__span value, ibp__span token, const ibp__where *w,
                         ibp_rule *rule) {
  for (size_t i = 0; i < value.n; i++)
    if (value.p[i] < '0' || value.p[i] > '9')
      return ibp__fail(w, token, "nth must be a whole number (1 = first)");
  if (ibp__parse_size(value, token, w, &rule->nth) != 0)
    return -1;
  if (rule->nth == 0)
    return ibp__fail(w, token, "nth counts from 1");
  rule->selectors |= IBP_SELECT_NTH;
  return 0;
}

static int is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static int parse_name_key(ibp__span value, ibp__span token, const ibp__where *w,
                          ibp_rule *rule) {
  static const char bad[] = "name must be 1 to 63 characters from "
                            "A-Z a-z 0-9 _ . -";
  if (value.n == 0 || value.n >= IBP_CONFIG_NAME_MAX)
    return ibp__fail(w, token, bad);
  for (size_t i = 0; i < value.n; i++)
    if (!is_name_char(value.p[i]))
      return ibp__fail(w, token, bad);
  memcpy(rule->name, value.p, value.n);
  rule->name[value.n] = '\0';
  return 0;
}

static int parse_tensor_key(ibp__span value, ibp__span token,
                            const ibp__where *w, ibp_rule *rule) {
  uint64_t bytes;
  if (ibp__parse_size(value, token, w, &bytes) != 0)
    return -1;
  if (bytes < 1 || bytes > IBP_CONFIG_MAX_TENSOR)
    return ibp__fail(w, token, "tensor must be 1 byte to 1M");
  rule->tensor_bytes = (uint32_t)bytes;
  return 0;
}

#define CHUNK_WIDTH_WORD(c) #c,

static int parse_chunk_key(ibp__span value, ibp__span token,
                           const ibp__where *w, ibp_rule *rule) {
  static const char *const widths[] = {IBP_CHUNK_WIDTHS(CHUNK_WIDTH_WORD)};
  if (ibp__word_is(value, "auto")) {
    rule->chunk = 0;
    return 0;
  }
  for (unsigned i = 0; i < IBP_CHUNK_WIDTH_COUNT; i++)
    if (ibp__word_is(value, widths[i])) {
      rule->chunk = ibp_chunk_width(i);
      return 0;
    }
  return ibp__fail(w, token,
                   "chunk must be " IBP_CHUNK_WIDTHS_COMMAS " or auto");
}

#undef CHUNK_WIDTH_WORD

static int parse_threshold_key(ibp__span value, ibp__span token,
                               const ibp__where *w, ibp_rule *rule) {
  static const char range[] = "threshold must be auto or from 0.5 to 1.0";
  uint64_t b;
  if (ibp__word_is(value, "auto")) {
    rule->threshold = 0.0;
    return 0;
  }
  if (ibp__parse_billionths(value, token, w, &b) != 0)
    return -1;
  if (b < 500000000u || b > 1000000000u)
    return ibp__fail(w, token, range);
  rule->threshold = (double)b / 1e9;
  return 0;
}

static int parse_sample_key(ibp__span value, ibp__span token,
                            const ibp__where *w, ibp_rule *rule) {
  uint64_t b;
  if (ibp__parse_billionths(value, token, w, &b) != 0)
    return -1;
  if (b == 0 || b > 1000000000u)
    return ibp__fail(w, token, "sample must be a fraction in (0, 1]");
  rule->sample = (double)b / 1e9;
  return 0;
}

static int parse_mode_key(ibp__span value, ibp__span token, const ibp__where *w,
                          ibp_rule *rule) {
  if (ibp__word_is(value, "shadow"))
    rule->mode = IBP_MODE_SHADOW;
  else if (ibp__word_is(value, "compact"))
    rule->mode = IBP_MODE_COMPACT;
  else if (ibp__word_is(value, "inplace"))
    rule->mode = IBP_MODE_INPLACE;
  else
    return ibp__fail(w, token, "mode must be shadow, compact or inplace");
  return 0;
}

static int parse_track_key(ibp__span value, ibp__span token,
                           const ibp__where *w, ibp_rule *rule) {
  if (ibp__word_is(value, "protect"))
    rule->track = IBP_TRACK_PROTECT;
  else if (ibp__word_is(value, "trust"))
    rule->track = IBP_TRACK_TRUST;
  else
    return ibp__fail(w, token, "track must be protect or trust");
  return 0;
}

static int parse_wc_key(ibp__span value, ibp__span token, const ibp__where *w,
                        ibp_rule *rule) {
  if (ibp__word_is(value, "yes"))
    rule->wc = 1;
  else if (ibp__word_is(value, "no"))
    rule->wc = 0;
  else
    return ibp__fail(w, token, "wc must be yes or no");
  return 0;
}

static int parse_clusters_key(ibp__span value, ibp__span token,
                              const ibp__where *w, ibp_rule *rule) {
  static const char range[] = "clusters must be auto or a whole number "
                              "from 1 to 256";
  uint64_t k;
  if (ibp__word_is(value, "auto")) {
    rule->clusters = 0;
    return 0;
  }
  for (size_t i = 0; i < value.n; i++)
    if (value.p[i] < '0' || value.p[i] > '9')
      return ibp__fail(w, token, range);
  if (ibp__parse_size(value, token, w, &k) != 0)
    return -1;
  if (k < 1 || k > IBP_CONFIG_MAX_CLUSTERS)
    return ibp__fail(w, token, range);
  rule->clusters = (unsigned)k;
  return 0;
}

static const key_entry keys[] = {
    {"size", parse_size_key},
    {"min", parse_min_key},
    {"nth", parse_nth_key},
    {"name", parse_name_key},
    {"tensor", parse_tensor_key},
    {"chunk", parse_chunk_key},
    {"threshold", parse_threshold_key},
    {"sample", parse_sample_key},
    {"clusters", parse_clusters_key},
    {"mode", parse_mode_key},
    {"track", parse_track_key},
    {"wc", parse_wc_key},
};

enum { n_keys = sizeof keys / sizeof keys[0] };

/* "unknown key; expected size, min, ... or wc": the names of keys[]. */
static void unknown_key_message(char *msg, size_t cap) {
  size_t n = (size_t)snprintf(msg, cap, "unknown key; expected ");
  for (int i = 0; i < n_keys && n < cap; i++)
    n += (size_t)snprintf(msg + n, cap - n, "%s%s",
                          i == 0            ? ""
                          : i == n_keys - 1 ? " or "
                                            : ", ",
                          keys[i].key);
}

static int find_key(ibp__span key) {
  for (int i = 0; i < n_keys; i++)
    if (ibp__word_is(key, keys[i].key))
      return i;
  return -1;
}

/* Parses one "key=value" pair into rule; *seen holds one bit per key. */
static int parse_pair(ibp__span pair, const ibp__where *w, ibp_rule *rule,
                      unsigned *seen) {
  ibp__span value = pair;
  ibp__span key = ibp__trim(ibp__split(&value, '='));
  if (!value.p)
    return ibp__fail(w, pair, "expected key=value");
  int k = find_key(key);
  if (k < 0) {
    char msg[256];
    unknown_key_message(msg, sizeof msg);
    return ibp__fail(w, pair, msg);
  }
  if (*seen & (1u << k))
    return ibp__fail(w, pair, "key given twice in one rule");
  *seen |= 1u << k;
  return keys[k].parse(ibp__trim(value), pair, w, rule);
}

static void auto_rule(ibp_rule *rule) {
  rule->selectors = IBP_SELECT_MIN;
  rule->min = IBP_CONFIG_AUTO_MIN_BYTES;
  rule->is_auto = 1;
}

/* Parses one non-empty, trimmed rule: the word auto or key=value pairs. */
static int parse_rule(ibp__span text, const ibp__where *w, ibp_rule *rule) {
  ibp_rule_init(rule);
  if (ibp__word_is(text, "auto")) {
    auto_rule(rule);
    return 0;
  }
  unsigned seen = 0;
  ibp__span rest = text;
  while (rest.p) {
    ibp__span pair = ibp__trim(ibp__split(&rest, ','));
    if (pair.n > 0 && parse_pair(pair, w, rule, &seen) != 0)
      return -1;
  }
  if (rule->selectors == 0)
    return ibp__fail(w, text, "rule needs a selector: size=, min= or nth=");
  return 0;
}

int ibp__parse_rule_list(ibp__span text, ibp_config *out, ibp__where *w) {
  ibp__span rest = text;
  while (rest.p) {
    ibp__span rule_text = ibp__trim(ibp__split(&rest, ';'));
    if (rule_text.n == 0)
      continue;
    w->rule++;
    if (out->n_rules == IBP_CONFIG_MAX_RULES)
      return ibp__fail(w, rule_text, "too many rules (at most 32 in all)");
    ibp_rule *rule = &out->rules[out->n_rules];
    if (parse_rule(rule_text, w, rule) != 0)
      return -1;
    rule->index = ++out->n_rules;
  }
  return 0;
}

int ibp_config_parse_regions(const char *text, ibp_config *out,
                             ibp_config_error *err) {
  ibp__where w = {"IBP_REGIONS", 0, 0, err};
  unsigned n_before = out->n_rules;
  if (ibp__parse_rule_list(ibp__span_of(text), out, &w) != 0) {
    out->n_rules = n_before;
    return -1;
  }
  return 0;
}

static int rule_matches(const ibp_rule *r, uint64_t bytes, uint64_t nth) {
  if ((r->selectors & IBP_SELECT_SIZE) && bytes != r->size)
    return 0;
  if ((r->selectors & IBP_SELECT_MIN) && bytes < r->min)
    return 0;
  if ((r->selectors & IBP_SELECT_NTH) && nth != r->nth)
    return 0;
  return r->selectors != 0;
}

const ibp_rule *ibp_config_match(const ibp_config *c, uint64_t alloc_bytes,
                                 uint64_t nth_alloc) {
  if (c->disabled)
    return NULL;
  for (unsigned i = 0; i < c->n_rules && i < IBP_CONFIG_MAX_RULES; i++)
    if (rule_matches(&c->rules[i], alloc_bytes, nth_alloc))
      return &c->rules[i];
  return NULL;
}
