/* Reading and writing device cost profiles (profile/profile.h): the strict
 * parser of the text format, loading a built-in or a file, and the writer.
 *
 * Numbers never depend on the program's locale: the public entry points
 * switch the calling thread to the C locale (uselocale, per thread) for
 * their duration, so strtod and snprintf read and write '.'.  The parser
 * keeps a fixed table of the line each key was given on; it allocates
 * nothing, and loading a file allocates its bytes for the call only. */
#include "profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the parameter table, from profile.def ------------------------------- */

typedef struct param {
  const char *key, *unit;
  double lo, hi;
  const char *what;
  size_t offset; /* of the field in ibp_profile */
} param;

static const param params[] = {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what)                             \
  {#key, unit, lo, hi, what, offsetof(ibp_profile, key)},
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
};

enum {
  PARAM_COUNT = sizeof params / sizeof params[0],
  KEY_NAME = PARAM_COUNT,  /* `name`, after the parameters */
  KEY_DECODER_BUILD,       /* `decoder_build`: optional */
  KEY_STAGE_DECODER_BUILD, /* `stage_decoder_build`: optional */
  KEY_COUNT,
  NUMBER_MAX = 64, /* longest number token, with its NUL */
};

static double *field(ibp_profile *p, const param *d) {
  return (double *)(void *)((char *)p + d->offset);
}

static double field_of(const ibp_profile *p, const param *d) {
  return *(const double *)(const void *)((const char *)p + d->offset);
}

/* A size or a count is whole. */
static int whole_only(const param *d) {
  return d->unit[0] == '\0' || strcmp(d->unit, "B") == 0;
}

/* ---- output into a caller buffer, snprintf-like -------------------------- */

typedef struct sink {
  char *buf;
  size_t cap, len; /* len: what it needs, even past cap */
} sink;

static void put(sink *s, const char *str, size_t n) {
  if (s->len < s->cap) {
    size_t room = s->cap - s->len - 1;
    size_t k = n < room ? n : room;
    memcpy(s->buf + s->len, str, k);
    s->buf[s->len + k] = '\0';
  }
  s->len += n;
}

static void puts_(sink *s, const char *str) {
  put(s, str, strlen(str));
}

static void vputf(sink *s, const char *fmt, va_list ap) {
  char *at = s->len < s->cap ? s->buf + s->len : NULL;
  int n = vsnprintf(at, at ? s->cap - s->len : 0, fmt, ap);
  if (n > 0)
    s->len += (size_t)n;
}

static void putf(sink *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void putf(sink *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vputf(s, fmt, ap);
  va_end(ap);
}

/* Input text for a message: at most 40 bytes (longer: cut, "..."), bytes
 * other than printable ASCII shown as '?'. */
enum { SHOWN_MAX = 44 };
static const char *shown(char out[SHOWN_MAX], const char *text, size_t n) {
  size_t k = n <= 40 ? n : 37;
  for (size_t i = 0; i < k; i++)
    out[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
  strcpy(out + k, k < n ? "..." : "");
  return out;
}

/* The shortest text that reads back as v ("%.0f" for whole values). */
static void format_number(char *out, size_t cap, double v) {
  if (v >= -1e15 && v <= 1e15 && v == (double)(int64_t)v) {
    snprintf(out, cap, "%.0f", v);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(out, cap, "%.*g", prec, v);
    if (strtod(out, NULL) == v)
      return;
  }
}

/* ---- the C locale, for the calling thread only --------------------------- */

typedef struct c_locale_scope {
  locale_t c, old;
} c_locale_scope;

/* If no C locale object can be made (not with glibc, whose "C" is a static
 * object), the thread's locale stays. */
static c_locale_scope c_locale_enter(void) {
  c_locale_scope sc = {newlocale(LC_ALL_MASK, "C", (locale_t)0), (locale_t)0};
  if (sc.c != (locale_t)0)
    sc.old = uselocale(sc.c);
  return sc;
}

static void c_locale_leave(c_locale_scope sc) {
  if (sc.c == (locale_t)0)
    return;
  uselocale(sc.old);
  freelocale(sc.c);
}

/* ---- the parser ---------------------------------------------------------- */

typedef struct span {
  const char *p;
  size_t n;
} span;

typedef struct reader {
  const char *origin;
  char *err;
  size_t errlen;
  size_t line;             /* current line, from 1 */
  size_t given[KEY_COUNT]; /* line each key was given on; 0 = not yet */
  ibp_profile *out;
} reader;

/* "origin:line: key: what" into err (":line" when line > 0, "key: " when
 * key.p is set); returns -1. */
static int fail(const reader *r, size_t line, span key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(const reader *r, size_t line, span key, const char *fmt, ...) {
  if (r->err == NULL || r->errlen == 0)
    return -1;
  sink s = {r->err, r->errlen, 0};
  r->err[0] = '\0';
  puts_(&s, r->origin);
  if (line > 0)
    putf(&s, ":%zu", line);
  puts_(&s, ": ");
  if (key.p != NULL) {
    char k[SHOWN_MAX];
    putf(&s, "%s: ", shown(k, key.p, key.n));
  }
  va_list ap;
  va_start(ap, fmt);
  vputf(&s, fmt, ap);
  va_end(ap);
  return -1;
}

static const span no_key = {NULL, 0};

static int is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static span trim(span s) {
  while (s.n > 0 && is_blank(s.p[0])) {
    s.p++;
    s.n--;
  }
  while (s.n > 0 && is_blank(s.p[s.n - 1]))
    s.n--;
  return s;
}

static int span_is(span s, const char *word) {
  return strlen(word) == s.n && memcmp(s.p, word, s.n) == 0;
}

/* Index of the key (KEY_NAME for `name`, ...), or -1. */
static int find_key(span key) {
  if (span_is(key, "name"))
    return KEY_NAME;
  if (span_is(key, "decoder_build"))
    return KEY_DECODER_BUILD;
  if (span_is(key, "stage_decoder_build"))
    return KEY_STAGE_DECODER_BUILD;
  for (int i = 0; i < PARAM_COUNT; i++)
    if (span_is(key, params[i].key))
      return i;
  return -1;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static size_t digits(const char *s, size_t i, size_t n) {
  while (i < n && is_digit(s[i]))
    i++;
  return i;
}

/* [-] digits [. digits] [e|E [+|-] digits], a digit in the mantissa: what
 * strtod would read, without spaces, '+', hex, inf or nan. */
static int number_syntax(span v) {
  size_t i = v.n > 0 && v.p[0] == '-' ? 1 : 0;
  size_t int_end = digits(v.p, i, v.n);
  size_t frac_end = int_end;
  if (frac_end < v.n && v.p[frac_end] == '.')
    frac_end = digits(v.p, frac_end + 1, v.n);
  if (int_end == i && frac_end <= int_end + 1)
    return 0;
  i = frac_end;
  if (i < v.n && (v.p[i] == 'e' || v.p[i] == 'E')) {
    i++;
    if (i < v.n && (v.p[i] == '+' || v.p[i] == '-'))
      i++;
    size_t exp_end = digits(v.p, i, v.n);
    if (exp_end == i)
      return 0;
    i = exp_end;
  }
  return i == v.n;
}

static int read_number(const reader *r, span key, span v, const param *d,
                       double *out) {
  char text[NUMBER_MAX], show[SHOWN_MAX];
  if (v.n >= sizeof text || !number_syntax(v))
    return fail(r, r->line, key, "'%s' is not a decimal number",
                shown(show, v.p, v.n));
  memcpy(text, v.p, v.n);
  text[v.n] = '\0';
  errno = 0;
  double x = strtod(text, NULL);
  char lo[32], hi[32];
  format_number(lo, sizeof lo, d->lo);
  format_number(hi, sizeof hi, d->hi);
  /* ERANGE with a subnormal result is a value; with 0, too small for one. */
  if ((errno == ERANGE && x == 0) || !(x >= d->lo && x <= d->hi))
    return fail(r, r->line, key, "%s is out of range [%s, %s]", text, lo, hi);
  if (whole_only(d) && x != (double)(int64_t)x)
    return fail(r, r->line, key, "%s is not a whole number", text);
  *out = x;
  return 0;
}

/* `name`, `decoder_build` or `stage_decoder_build` into out
 * (IBP_PROFILE_NAME_MAX bytes). */
static int read_name(const reader *r, span key, span v, char *out) {
  int ok = v.n >= 1 && v.n < IBP_PROFILE_NAME_MAX;
  for (size_t i = 0; ok && i < v.n; i++)
    ok = v.p[i] > 0x20 && v.p[i] < 0x7f;
  char show[SHOWN_MAX];
  if (!ok)
    return fail(r, r->line, key,
                "'%s' is not a name (1 to %d printable characters, no "
                "spaces)",
                shown(show, v.p, v.n), IBP_PROFILE_NAME_MAX - 1);
  memcpy(out, v.p, v.n);
  out[v.n] = '\0';
  return 0;
}

/* One line, without its '\n'. */
static int read_line(reader *r, span line) {
  const char *hash = line.n ? memchr(line.p, '#', line.n) : NULL;
  if (hash != NULL)
    line.n = (size_t)(hash - line.p);
  line = trim(line);
  if (line.n == 0)
    return 0;
  const char *eq = memchr(line.p, '=', line.n);
  if (eq == NULL)
    return fail(r, r->line, no_key, "expected 'key = value'");
  span key = trim((span){line.p, (size_t)(eq - line.p)});
  span value = trim((span){eq + 1, (size_t)(line.p + line.n - (eq + 1))});
  if (key.n == 0)
    return fail(r, r->line, no_key, "expected 'key = value' (no key)");
  int k = find_key(key);
  if (k < 0)
    return fail(r, r->line, key, "unknown key");
  if (r->given[k] != 0)
    return fail(r, r->line, key, "repeated (first given on line %zu)",
                r->given[k]);
  if (value.n == 0)
    return fail(r, r->line, key, "no value");
  r->given[k] = r->line;
  if (k == KEY_NAME)
    return read_name(r, key, value, r->out->name);
  if (k == KEY_DECODER_BUILD)
    return read_name(r, key, value, r->out->decoder_build);
  if (k == KEY_STAGE_DECODER_BUILD)
    return read_name(r, key, value, r->out->stage_decoder_build);
  return read_number(r, key, value, &params[k], field(r->out, &params[k]));
}

/* A parameter a profile may lack: ce_batch_setup_us, added after files
 * were written without it; missing, it is ce_setup_us (an entry of a
 * batch call set up like a copy of its own: no saving known). */
static int optional(int k) {
  return k < PARAM_COUNT &&
         params[k].offset == offsetof(ibp_profile, ce_batch_setup_us);
}

/* The name first, then the parameters in profile.def's order;
 * decoder_build and stage_decoder_build may be missing, and so may the
 * optional parameter (then given its default). */
static int check_all_given(const reader *r) {
  for (int i = 0; i <= PARAM_COUNT; i++) {
    int k = i == 0 ? KEY_NAME : i - 1;
    if (r->given[k] != 0)
      continue;
    if (optional(k)) {
      r->out->ce_batch_setup_us = r->out->ce_setup_us;
      continue;
    }
    const char *key = k == KEY_NAME ? "name" : params[k].key;
    return fail(r, 0, (span){key, strlen(key)},
                "missing (a profile gives every parameter)");
  }
  return 0;
}

static int parse(reader *r, const char *text, size_t len) {
  size_t pos = 0;
  while (pos < len) {
    r->line++;
    const char *nl = memchr(text + pos, '\n', len - pos);
    size_t end = nl ? (size_t)(nl - text) : len;
    span line = {text + pos, end - pos};
    if (line.n > IBP_PROFILE_LINE_MAX)
      return fail(r, r->line, no_key, "line longer than %d bytes",
                  IBP_PROFILE_LINE_MAX);
    if (line.n > 0 && memchr(line.p, '\0', line.n) != NULL)
      return fail(r, r->line, no_key, "NUL byte (not a text file)");
    if (read_line(r, line) != 0)
      return -1;
    pos = end + 1;
  }
  return check_all_given(r);
}

int ibp_profile_parse(const char *text, size_t len, const char *origin,
                      ibp_profile *out, char *err, size_t errlen) {
  reader r = {origin ? origin : "profile", err, errlen, 0, {0}, out};
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  if (text == NULL && len > 0)
    return fail(&r, 0, no_key, "no text");
  memset(out, 0, sizeof *out);
  strcpy(out->decoder_build, IBP_PROFILE_DECODER_UNKNOWN);
  strcpy(out->stage_decoder_build, IBP_PROFILE_DECODER_UNKNOWN);
  c_locale_scope sc = c_locale_enter();
  int rc = parse(&r, text, len);
  c_locale_leave(sc);
  return rc;
}

/* ---- loading ------------------------------------------------------------- */

static const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

/* Reads up to cap bytes; returns the count, or -1 with errno. */
static ssize_t read_all(int fd, char *buf, size_t cap) {
  size_t got = 0;
  while (got < cap) {
    ssize_t n = read(fd, buf + got, cap - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    if (n == 0)
      break;
    got += (size_t)n;
  }
  return (ssize_t)got;
}

static int load_fd(int fd, const char *path, ibp_profile *out, char *err,
                   size_t errlen) {
  reader r = {path, err, errlen, 0, {0}, out};
  char why[128];
  struct stat st;
  if (fstat(fd, &st) != 0)
    return fail(&r, 0, no_key, "cannot stat: %s",
                strerror_r(errno, why, sizeof why));
  if (!S_ISREG(st.st_mode))
    return fail(&r, 0, no_key, "not a regular file (%s)",
                file_kind(st.st_mode));
  if (st.st_size > IBP_PROFILE_FILE_MAX)
    return fail(&r, 0, no_key, "larger than %d bytes", IBP_PROFILE_FILE_MAX);
  /* One byte more than allowed: a file that grew is seen. */
  char *buf = malloc(IBP_PROFILE_FILE_MAX + 1);
  if (buf == NULL)
    return fail(&r, 0, no_key, "out of memory");
  ssize_t n = read_all(fd, buf, IBP_PROFILE_FILE_MAX + 1);
  int rc;
  if (n < 0)
    rc = fail(&r, 0, no_key, "cannot read: %s",
              strerror_r(errno, why, sizeof why));
  else if (n > IBP_PROFILE_FILE_MAX)
    rc = fail(&r, 0, no_key, "larger than %d bytes", IBP_PROFILE_FILE_MAX);
  else
    rc = ibp_profile_parse(buf, (size_t)n, path, out, err, errlen);
  free(buf);
  return rc;
}

int ibp_profile_load(const char *spec, ibp_profile *out, char *err,
                     size_t errlen) {
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  reader r = {"profile", err, errlen, 0, {0}, out};
  if (spec == NULL || spec[0] == '\0')
    return fail(&r, 0, no_key, "empty name or path");
  const char *text = ibp_profile_builtin_text(spec);
  if (text != NULL) {
    char origin[IBP_PROFILE_NAME_MAX + 16];
    snprintf(origin, sizeof origin, "built-in %s", spec);
    return ibp_profile_parse(text, strlen(text), origin, out, err, errlen);
  }
  r.origin = spec;
  int fd = open(spec, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    char why[128];
    return fail(&r, 0, no_key,
                "not a built-in profile, and cannot be opened: %s",
                strerror_r(errno, why, sizeof why));
  }
  int rc = load_fd(fd, spec, out, err, errlen);
  close(fd);
  return rc;
}

/* ---- writing ------------------------------------------------------------- */

/* A build name of p, "unknown" when empty (a profile not from the
 * parser). */
static const char *build_of(const char *build) {
  return build[0] ? build : IBP_PROFILE_DECODER_UNKNOWN;
}

static void format_param(sink *s, const ibp_profile *p, const param *d) {
  char num[32];
  format_number(num, sizeof num, field_of(p, d));
  putf(s, "\n# %s: %s\n%s = %s\n", d->unit[0] ? d->unit : "count", d->what,
       d->key, num);
}

size_t ibp_profile_format(const ibp_profile *p, char *buf, size_t cap) {
  sink s = {buf, buf ? cap : 0, 0};
  if (s.cap > 0)
    buf[0] = '\0';
  c_locale_scope sc = c_locale_enter();
  puts_(&s, "# libibp device cost profile (docs/PROFILE.md)\nname = ");
  put(&s, p->name, strnlen(p->name, sizeof p->name));
  puts_(&s, "\n\n# the decoder build the decode terms (decode_*) were "
            "measured with\ndecoder_build = ");
  const char *build = build_of(p->decoder_build);
  put(&s, build, strnlen(build, IBP_PROFILE_NAME_MAX));
  puts_(&s, "\n# the decoder build the exponent stage's decode terms (stage_*) "
            "were measured with\nstage_decoder_build = ");
  build = build_of(p->stage_decoder_build);
  put(&s, build, strnlen(build, IBP_PROFILE_NAME_MAX));
  puts_(&s, "\n");
  for (int i = 0; i < PARAM_COUNT; i++)
    format_param(&s, p, &params[i]);
  c_locale_leave(sc);
  return s.len;
}

/* ---- which decoder the decode terms are of ------------------------------- */

/* 1 when a profile's `build` names `running`, a build that is one. */
static int measured_with(const char *build, const char *running) {
  if (running == NULL || running[0] == '\0' ||
      strcmp(running, IBP_PROFILE_DECODER_UNKNOWN) == 0)
    return 0;
  return strncmp(build, running, IBP_PROFILE_NAME_MAX) == 0;
}

int ibp_profile_decode_measured(const ibp_profile *p, const char *running) {
  return p != NULL && measured_with(p->decoder_build, running);
}

int ibp_profile_stage_measured(const ibp_profile *p, const char *running) {
  return p != NULL && measured_with(p->stage_decoder_build, running);
}
