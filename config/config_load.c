/* ibp_config_load: the IBP_* variables, the IBP_CONFIG file, and the
 * one-line error message. */
#include "config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ibp_rule_init(ibp_rule *rule) {
  memset(rule, 0, sizeof *rule);
  rule->tensor_bytes = IBP_CONFIG_DEFAULT_TENSOR;
  rule->mode = IBP_MODE_SHADOW;
  rule->track = IBP_TRACK_PROTECT;
}

void ibp_config_init(ibp_config *out) {
  memset(out, 0, sizeof *out);
  out->log_level = IBP_LOG_WARN;
  out->stats = IBP_STATS_OFF;
  out->staging_bytes = IBP_STAGING_DEFAULT;
  out->max_sms = IBP_MAX_SMS_DEFAULT;
  out->scanners = IBP_SCANNERS_DEFAULT;
  out->track_quiet_ms = IBP_TRACK_QUIET_DEFAULT;
}

/* ---- IBP_CONFIG ---------------------------------------------------------- */

/* A rule file is read only when it is a regular file of at most this many
 * bytes: a device (/dev/zero), a FIFO or a huge file would hang or stall
 * the application's first CUDA call. */
#define FILE_MAX ((off_t)1 << 20)

static const char *errno_text(int e) {
  switch (e) {
  case ENOENT:
    return "cannot open file: no such file or directory";
  case EACCES:
    return "cannot open file: permission denied";
  default:
    return "cannot read file";
  }
}

/* Why st is no file to read rules from, or NULL. */
static const char *not_a_rule_file(const struct stat *st) {
  if (S_ISDIR(st->st_mode))
    return "cannot read file: it is a directory";
  if (S_ISFIFO(st->st_mode))
    return "not a regular file (a FIFO): not read";
  if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
    return "not a regular file (a device): not read";
  if (!S_ISREG(st->st_mode))
    return "not a regular file: not read";
  if (st->st_size > FILE_MAX)
    return "larger than 1 MiB: not read";
  return NULL;
}

/* Parses one line (without its newline); '#' starts a comment. */
static int parse_line(const char *line, ibp_config *out, ibp__where *w) {
  ibp__span text = ibp__span_of(line);
  const char *hash = memchr(text.p, '#', text.n);
  if (hash)
    text.n = (size_t)(hash - text.p);
  return ibp__parse_rule_list(text, out, w);
}

/* The lines of a file, split from fixed-size reads (no allocation). */
typedef struct line_reader {
  int fd;
  char buf[4096];
  size_t at, n;
  int eof, error;
} line_reader;

/* The next byte, or -1 at the end (or on a read error: error set). */
static int next_byte(line_reader *r) {
  if (r->at == r->n) {
    if (r->eof)
      return -1;
    ssize_t got;
    do
      got = read(r->fd, r->buf, sizeof r->buf);
    while (got < 0 && errno == EINTR);
    if (got <= 0) {
      r->eof = 1;
      r->error = got < 0 ? errno : 0;
      return -1;
    }
    r->at = 0;
    r->n = (size_t)got;
  }
  return (unsigned char)r->buf[r->at++];
}

/* Reads the next line into line; returns 1, 0 at the end, -1 when it does
 * not fit, -2 for a NUL byte. */
static int read_line(line_reader *r, char *line, size_t cap) {
  size_t n = 0;
  int c = next_byte(r);
  if (c < 0)
    return 0;
  for (; c >= 0 && c != '\n'; c = next_byte(r)) {
    if (c == 0)
      return -2;
    if (n + 1 == cap)
      return -1;
    line[n++] = (char)c;
  }
  line[n] = '\0';
  return 1;
}

/* Returns 0, -1 for a bad line (error filled) or -2 for a read error. */
static int parse_lines(line_reader *r, ibp_config *out, ibp__where *w) {
  char line[IBP_CONFIG_LINE_MAX];
  int got;
  while ((got = read_line(r, line, sizeof line)) != 0) {
    w->line++;
    w->rule = 0;
    if (got == -1)
      return ibp__fail(w, ibp__span_of(line),
                       "line too long (at most 1023 characters)");
    if (got == -2)
      return ibp__fail(w, ibp__span_of(""), "NUL byte: not a text file");
    if (parse_line(line, out, w) != 0)
      return -1;
  }
  return r->error ? -2 : 0;
}

int ibp_config_parse_file(const char *path, ibp_config *out,
                          ibp_config_error *err) {
  ibp__where w = {"IBP_CONFIG", 0, 0, err};
  unsigned n_before = out->n_rules;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return ibp__fail(&w, ibp__span_of(path), errno_text(errno));
  struct stat st;
  const char *why =
      fstat(fd, &st) != 0 ? "cannot read file" : not_a_rule_file(&st);
  if (why) {
    close(fd);
    return ibp__fail(&w, ibp__span_of(path), why);
  }
  static line_reader reader; /* one load at a time (pthread_once) */
  line_reader *r = &reader;
  memset(r, 0, sizeof *r);
  r->fd = fd;
  int rc = parse_lines(r, out, &w);
  close(fd);
  if (rc == 0)
    return 0;
  out->n_rules = n_before;
  if (rc == -2) {
    w.line = 0;
    ibp__fail(&w, ibp__span_of(path), errno_text(r->error));
  }
  return -1;
}

/* ---- the scalar variables ------------------------------------------------ */

/* IBP_DISABLE, IBP_WAIT_READY, IBP_BATCH: 0 (or unset, empty) or 1. */
static int load_flag(ibp__span v, ibp__where *w, int *flag) {
  if (v.n == 0 || ibp__word_is(v, "0"))
    *flag = 0;
  else if (ibp__word_is(v, "1"))
    *flag = 1;
  else
    return ibp__fail(w, v, "must be 0 or 1");
  return 0;
}

/* One of `n` words (empty: *out unchanged): its index in *out; `msg` names
 * them. */
static int load_word(ibp__span v, ibp__where *w, const char *const *names,
                     int n, const char *msg, int *out) {
  if (v.n == 0)
    return 0;
  for (int i = 0; i < n; i++)
    if (ibp__word_is(v, names[i])) {
      *out = i;
      return 0;
    }
  return ibp__fail(w, v, msg);
}

static int load_log(ibp__span v, ibp__where *w, ibp_log_level *level) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  int i = (int)*level;
  int rc = load_word(v, w, names, 4, "must be error, warn, info or debug", &i);
  *level = (ibp_log_level)i;
  return rc;
}

static int load_tracker(ibp__span v, ibp__where *w, ibp_tracker *out) {
  static const char *const names[] = {"auto", "userfaultfd", "mprotect"};
  int i = (int)*out;
  int rc =
      load_word(v, w, names, 3, "must be auto, userfaultfd or mprotect", &i);
  *out = (ibp_tracker)i;
  return rc;
}

/* A whole number in [least, most] (empty: *out unchanged); `msg` names
 * the range. */
static int load_count(ibp__span v, ibp__where *w, unsigned least, unsigned most,
                      const char *msg, unsigned *out) {
  if (v.n == 0)
    return 0;
  unsigned t = 0;
  for (size_t i = 0; i < v.n; i++) {
    if (v.p[i] < '0' || v.p[i] > '9' || t > most)
      return ibp__fail(w, v, msg);
    t = t * 10 + (unsigned)(v.p[i] - '0');
  }
  if (t < least || t > most)
    return ibp__fail(w, v, msg);
  *out = t;
  return 0;
}

static int load_path(ibp__span v, ibp__where *w, ibp_path *out) {
  static const char *const names[] = {"auto", "zerocopy", "staged"};
  int i = (int)*out;
  int rc = load_word(v, w, names, 3, "must be auto, zerocopy or staged", &i);
  *out = (ibp_path)i;
  return rc;
}

static int load_force_route(ibp__span v, ibp__where *w, ibp_force_route *out) {
  static const char *const names[] = {"none", "driver", "zerocopy", "staged",
                                      "batched"};
  int i = (int)*out;
  int rc = load_word(v, w, names, 5,
                     "must be none, driver, zerocopy, staged or batched", &i);
  *out = (ibp_force_route)i;
  return rc;
}

/* IBP_STAGING: 0 (none), or a size from 128K (two buffers of 64 KiB) to
 * 64M (sixteen of 4 MiB: serve/staged/staged.c). */
static int load_staging(ibp__span v, ibp__where *w, uint64_t *bytes) {
  if (v.n == 0)
    return 0;
  uint64_t b = 0;
  if (ibp__parse_size(v, v, w, &b) != 0)
    return -1;
  if (b != 0 && (b < (128u << 10) || b > (64u << 20)))
    return ibp__fail(w, v, "must be 0 or from 128K to 64M");
  *bytes = b;
  return 0;
}

static int load_stats(ibp__span v, ibp__where *w, ibp_config *out) {
  if (v.n == 0 || ibp__word_is(v, "0"))
    return 0;
  if (ibp__word_is(v, "1")) {
    out->stats = IBP_STATS_STDERR;
    return 0;
  }
  if (v.n >= sizeof out->stats_path)
    return ibp__fail(w, v, "path too long (at most 255 bytes)");
  memcpy(out->stats_path, v.p, v.n);
  out->stats_path[v.n] = '\0';
  out->stats = IBP_STATS_JSON;
  return 0;
}

static int load_min_copy(ibp__span v, ibp__where *w, uint64_t *bytes) {
  if (v.n == 0)
    return 0;
  return ibp__parse_size(v, v, w, bytes);
}

/* The profile is only named here: the interposer reads it (profile/). */
static int load_profile(ibp__span v, ibp__where *w, ibp_config *out) {
  if (v.n == 0)
    return 0;
  if (v.n >= sizeof out->profile)
    return ibp__fail(w, v, "name or path too long (at most 255 bytes)");
  memcpy(out->profile, v.p, v.n);
  out->profile[v.n] = '\0';
  return 0;
}

/* ---- ibp_config_load ----------------------------------------------------- */

static const char *libc_getenv(const char *name) {
  return getenv(name);
}

typedef struct env_reader {
  const char *(*get)(const char *);
  ibp__where where;
} env_reader;

/* Reads variable name, trimmed; unset reads as empty.  Sets where.variable. */
static ibp__span read_var(env_reader *r, const char *name) {
  r->where.variable = name;
  return ibp__trim(ibp__span_of(r->get(name)));
}

static int load_rules(env_reader *r, ibp_config *out) {
  ibp__span regions = read_var(r, "IBP_REGIONS");
  if (ibp__parse_rule_list(regions, out, &r->where) != 0)
    return -1;
  ibp__span path = read_var(r, "IBP_CONFIG");
  if (path.n == 0)
    return 0;
  const char *raw = r->get("IBP_CONFIG");
  if (path.n != strlen(raw))
    return ibp__fail(&r->where, path, "path has leading or trailing spaces");
  return ibp_config_parse_file(raw, out, r->where.err);
}

static int load_all(env_reader *r, ibp_config *out) {
  if (load_flag(read_var(r, "IBP_DISABLE"), &r->where, &out->disabled))
    return -1;
  if (out->disabled)
    return 0;
  if (load_log(read_var(r, "IBP_LOG"), &r->where, &out->log_level))
    return -1;
  if (load_stats(read_var(r, "IBP_STATS"), &r->where, out))
    return -1;
  if (load_min_copy(read_var(r, "IBP_MIN_COPY"), &r->where,
                    &out->min_copy_bytes))
    return -1;
  if (load_flag(read_var(r, "IBP_WAIT_READY"), &r->where, &out->wait_ready))
    return -1;
  if (load_tracker(read_var(r, "IBP_TRACKER"), &r->where, &out->tracker))
    return -1;
  int batch = 1;
  ibp__span b = read_var(r, "IBP_BATCH");
  if (b.n && load_flag(b, &r->where, &batch))
    return -1;
  out->no_batch = !batch;
  if (load_count(read_var(r, "IBP_THREADS"), &r->where, 1, 64,
                 "must be a whole number from 1 to 64", &out->threads))
    return -1;
  if (load_staging(read_var(r, "IBP_STAGING"), &r->where, &out->staging_bytes))
    return -1;
  if (load_count(read_var(r, "IBP_MAX_SMS"), &r->where, 1, 4096,
                 "must be a whole number from 1 to 4096", &out->max_sms))
    return -1;
  if (load_count(read_var(r, "IBP_SCANNERS"), &r->where, 0, IBP_SCANNERS_MAX,
                 "must be a whole number from 0 to 16", &out->scanners))
    return -1;
  if (load_count(read_var(r, "IBP_TRACK_QUIET"), &r->where, 0, 3600000,
                 "must be a whole number of milliseconds from 0 to 3600000",
                 &out->track_quiet_ms))
    return -1;
  if (load_path(read_var(r, "IBP_PATH"), &r->where, &out->path))
    return -1;
  if (load_force_route(read_var(r, "IBP_FORCE_ROUTE"), &r->where,
                       &out->force_route))
    return -1;
  if (load_profile(read_var(r, "IBP_PROFILE"), &r->where, out))
    return -1;
  return load_rules(r, out);
}

int ibp_config_load(ibp_config *out, const char *(*getenv_fn)(const char *),
                    ibp_config_error *err) {
  env_reader r = {getenv_fn ? getenv_fn : libc_getenv, {"", 0, 0, err}};
  if (err)
    memset(err, 0, sizeof *err);
  ibp_config_init(out);
  if (load_all(&r, out) == 0)
    return 0;
  ibp_config_init(out);
  out->disabled = 1;
  return -1;
}

/* ---- the message --------------------------------------------------------- */

void ibp_config_format_error(const ibp_config_error *e, char *buf, size_t len) {
  char where[48] = "";
  if (len == 0)
    return;
  if (e->line)
    snprintf(where, sizeof where, " line %u", e->line);
  else if (e->rule)
    snprintf(where, sizeof where, " rule %u", e->rule);
  snprintf(buf, len,
           "[ibp] %s%s, token '%s': %s \xe2\x80\x94 libibp passes "
           "everything through",
           e->variable, where, e->token, e->message);
}
