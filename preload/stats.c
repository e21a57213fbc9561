/* Statistics: the exit report IBP_STATS asks for (DESIGN.md section 8).
 *
 * Per region: name, size, tensors, codec parameters, space saved, copies
 * served / passed through / fallen back, bytes requested vs bytes read over
 * PCIe, compression time, write tracking.  IBP_STATS=1 prints an aligned
 * table on stderr; IBP_STATS=<path> writes JSON through a temporary file in
 * the same directory and rename, so a reader never sees half a file (a path
 * that exists and is not a regular file, e.g. /dev/stderr, is written in
 * place).  The JSON document:
 *
 *   {"version": 1,
 *    "regions": [{"id", "name", "base" ("0x..."), "bytes", "tensor_bytes",
 *                 "tensors", "tensors_compressed", "chunk_bytes",
 *                 "threshold", "compressed_bytes", "metadata_bytes",
 *                 "saved_fraction", "state", "retired" (bool),
 *                 "copies_served", "copies_passthrough", "copies_fallback",
 *                 "bytes_requested", "bytes_read_pcie", "compress_seconds",
 *                 "write_faults", "dirty_tensors",
 *                 "tensors_recompressed"}, ...],
 *    "totals": {"regions", "bytes", "stored_bytes", "saved_fraction",
 *               "copies_served", "copies_passthrough", "copies_fallback",
 *               "bytes_requested", "bytes_read_pcie", "pcie_saved_fraction",
 *               "compress_seconds", "write_faults", "dirty_tensors",
 *               "tensors_recompressed"}}
 *
 * Regions in registration order (id).  A region never compressed has
 * chunk_bytes 0, threshold 0, tensors 0 and saved_fraction 0; saved_fraction
 * is 1 - compressed_bytes / bytes (Mask/Bitval/flags not counted);
 * stored_bytes counts compressed regions at compressed_bytes, others at
 * bytes.  Integers are exact; fractions are the shortest decimal that reads
 * back as the same double; nothing is NaN or infinite.
 *
 * Regions that leave the registry before exit are kept by
 * ibp__stats_retire on a lock-free list (a CAS push; nodes are never freed):
 * no mutex, so neither a thread that dies inside it nor a fork() taken while
 * another thread holds it can block the exit path.  The live regions are
 * read with ibp_registry_foreach, which takes the registry's writer mutex;
 * that mutex is only ever held inside registry calls (never across a call
 * into the application), and ibp_registry_reset_after_fork re-initialises it
 * in a child, so the wait is bounded.
 *
 * Fields written by the compressing thread (params, summary) are read only
 * when the region is not COMPRESSING (acquire load of the state); a region
 * still compressing at exit is reported as not compressed.
 *
 * The report makes no CUDA call, never aborts, and reports a failure (out of
 * memory, unwritable path) with one warning.  Numbers never depend on the
 * application's locale. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

/* The figures of one region, copied out of its record. */
typedef struct stat_row {
  uint64_t id;
  uint64_t seq; /* retire order; UINT64_MAX for a live region */
  uintptr_t base;
  uint64_t bytes;
  char name[IBP_REGISTRY_NAME_MAX + 32];
  uint32_t tensor_bytes, chunk_bytes, rule_chunk;
  double threshold, rule_threshold;
  int compressed;
  uint64_t tensors, tensors_compressed, compressed_bytes, metadata_bytes;
  double saved_fraction;
  ibp_region_state state;
  int retired;
  uint64_t copies_served, copies_passed, copies_fallback;
  uint64_t bytes_requested, bytes_pcie, compress_ns;
  uint64_t write_faults, dirty_tensors, recompressed;
} stat_row;

typedef struct retired_node {
  struct retired_node *next;
  stat_row row;
} retired_node;

static _Atomic(retired_node *) retired_head;
static atomic_uint_fast64_t retired_seq;
static atomic_int retired_lost; /* retire calls that found no memory */
static atomic_int reported;

static uint64_t load64(const _Atomic uint64_t *p) {
  return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

/* Compressed: the summary counts tensors, or (a region smaller than one
 * tensor) Mask/Bitval exist and the summary counts its raw tail.  A
 * compression that failed half-way leaves no summary: not compressed. */
static void fill_codec(stat_row *w, const ibp_region_rec *r) {
  w->compressed = r->summary.tensors > 0 ||
                  (r->params.mask != NULL && r->summary.compressed_bytes > 0);
  if (!w->compressed)
    return;
  if (r->params.tensor_bytes)
    w->tensor_bytes = r->params.tensor_bytes;
  w->chunk_bytes = r->params.chunk_bytes;
  w->threshold = r->params.threshold;
  w->tensors = r->summary.tensors;
  w->tensors_compressed = r->summary.tensors_compressed;
  w->compressed_bytes = r->summary.compressed_bytes;
  w->metadata_bytes = r->summary.metadata_bytes;
  w->saved_fraction = 1.0 - (double)w->compressed_bytes / (double)w->bytes;
}

static void fill_row(stat_row *w, const ibp_region_rec *r) {
  memset(w, 0, sizeof *w);
  w->id = r->id;
  w->seq = UINT64_MAX;
  w->base = r->base;
  w->bytes = r->bytes ? r->bytes : 1;
  if (r->name[0])
    snprintf(w->name, sizeof w->name, "%.*s", IBP_REGISTRY_NAME_MAX - 1,
             r->name);
  else
    snprintf(w->name, sizeof w->name, "region@0x%" PRIxPTR, r->base);
  w->tensor_bytes = r->rule.tensor_bytes;
  w->rule_chunk = r->rule.chunk;
  w->rule_threshold = r->rule.threshold;
  w->state = ibp_region_state_get(r);
  if (w->state != IBP_REGION_COMPRESSING)
    fill_codec(w, r);
  const ibp_region_counters *c = &r->counters;
  w->copies_served = load64(&c->copies_served);
  w->copies_passed = load64(&c->copies_passed);
  w->copies_fallback = load64(&c->copies_fallback);
  w->bytes_requested = load64(&c->bytes_requested);
  w->bytes_pcie = load64(&c->bytes_pcie);
  w->compress_ns = load64(&c->compress_ns);
  w->write_faults = load64(&r->write_faults);
  w->dirty_tensors = load64(&r->dirty_tensors);
  w->recompressed = load64(&r->tensors_recompressed);
}

void ibp__stats_retire(const ibp_region_rec *r) {
  if (r == NULL)
    return;
  retired_node *n = malloc(sizeof *n);
  if (n == NULL) {
    atomic_fetch_add(&retired_lost, 1);
    return;
  }
  fill_row(&n->row, r);
  n->row.retired = 1;
  n->row.seq = atomic_fetch_add(&retired_seq, 1);
  n->next = atomic_load_explicit(&retired_head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &retired_head, &n->next, n, memory_order_release, memory_order_relaxed))
    ;
}

/* ---- collecting the rows ------------------------------------------------- */

typedef struct row_list {
  stat_row *v;
  size_t n, cap;
  int oom;
} row_list;

static stat_row *row_push(row_list *l) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    stat_row *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      l->oom = 1;
      return NULL;
    }
    l->v = v;
    l->cap = cap;
  }
  return &l->v[l->n++];
}

static void collect_live(const ibp_region_rec *r, void *ctx) {
  stat_row *w = row_push(ctx);
  if (w != NULL)
    fill_row(w, r);
}

static int by_id_then_seq(const void *a, const void *b) {
  const stat_row *x = a, *y = b;
  if (x->id != y->id)
    return x->id < y->id ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Retired and live rows in registration order; a region listed twice (live
 * and retired, or retired twice) keeps its latest figures. */
static void collect(row_list *l) {
  const retired_node *n =
      atomic_load_explicit(&retired_head, memory_order_acquire);
  for (; n != NULL; n = n->next) {
    stat_row *w = row_push(l);
    if (w != NULL)
      *w = n->row;
  }
  ibp_registry_foreach(collect_live, l);
  if (l->n == 0)
    return;
  qsort(l->v, l->n, sizeof *l->v, by_id_then_seq);
  size_t k = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (k > 0 && l->v[k - 1].id == l->v[i].id)
      k--;
    l->v[k++] = l->v[i];
  }
  l->n = k;
}

typedef struct totals {
  uint64_t bytes, stored_bytes;
  uint64_t copies_served, copies_passed, copies_fallback;
  uint64_t bytes_requested, bytes_pcie, compress_ns;
  uint64_t write_faults, dirty_tensors, recompressed;
} totals;

static totals sum_rows(const row_list *l) {
  totals t = {0};
  for (size_t i = 0; i < l->n; i++) {
    const stat_row *w = &l->v[i];
    t.bytes += w->bytes;
    t.stored_bytes += w->compressed ? w->compressed_bytes : w->bytes;
    t.copies_served += w->copies_served;
    t.copies_passed += w->copies_passed;
    t.copies_fallback += w->copies_fallback;
    t.bytes_requested += w->bytes_requested;
    t.bytes_pcie += w->bytes_pcie;
    t.compress_ns += w->compress_ns;
    t.write_faults += w->write_faults;
    t.dirty_tensors += w->dirty_tensors;
    t.recompressed += w->recompressed;
  }
  return t;
}

static double saving(uint64_t after, uint64_t before) {
  return before ? 1.0 - (double)after / (double)before : 0.0;
}

/* ---- text ---------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void
sb_printf(sbuf *b, const char *fmt, ...) {
  for (int pass = 0; pass < 2 && !b->oom; pass++) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(b->p ? b->p + b->n : NULL, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (m < 0) {
      b->oom = 1;
      return;
    }
    if ((size_t)m < b->cap - b->n) {
      b->n += (size_t)m;
      return;
    }
    size_t cap = 2 * b->cap + (size_t)m + 256;
    char *p = realloc(b->p, cap);
    if (p == NULL)
      b->oom = 1;
    else {
      b->p = p;
      b->cap = cap;
    }
  }
}

/* Formats a finite double with printf format `fmt` (one conversion) in the
 * C locale's notation whatever the application's locale: the decimal
 * separator, which may be several bytes, becomes '.'.  Non-finite -> 0. */
static void fmt_double(char *out, size_t cap, const char *fmt, double v) {
  char tmp[64];
  if (!isfinite(v))
    v = 0.0;
  snprintf(tmp, sizeof tmp, fmt, v);
  size_t k = 0;
  int sep = 0;
  for (const char *s = tmp; *s && k + 1 < cap; s++) {
    if (strchr("0123456789+-eE", *s)) {
      out[k++] = *s;
      sep = 0;
    } else if (!sep) {
      out[k++] = '.';
      sep = 1;
    }
  }
  out[k] = '\0';
}

/* Shortest of %.15g .. %.17g that reads back as v (C locale). */
static void json_double(char *out, size_t cap, double v) {
  static locale_t c_locale;
  if (c_locale == (locale_t)0)
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  static const char *const fmts[] = {"%.15g", "%.16g", "%.17g"};
  for (int i = 0; i < 3; i++) {
    fmt_double(out, cap, fmts[i], v);
    if (c_locale != (locale_t)0 && strtod_l(out, NULL, c_locale) == v)
      return;
  }
}

/* 64.0 MiB; whole bytes below 1 KiB. */
static void human(char *out, size_t cap, uint64_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(out, cap, "%" PRIu64 " B", bytes);
    return;
  }
  double v = (double)bytes / 1024.0;
  int u = 0;
  while (v >= 1023.95 && u < 5) {
    v /= 1024.0;
    u++;
  }
  char num[32];
  fmt_double(num, sizeof num, "%.1f", v);
  snprintf(out, cap, "%s %s", num, units[u]);
}

static void percent(char *out, size_t cap, double f) {
  char num[24];
  fmt_double(num, sizeof num, "%.1f", 100.0 * f);
  snprintf(out, cap, "%s%%", num);
}

enum { n_cols = 15, cell_max = IBP_REGISTRY_NAME_MAX + 32 };
typedef char text_row[n_cols][cell_max];

static const char *const col_head[n_cols] = {
    "region",   "state",     "size",      "tensor",   "tensors",
    "chunk",    "thresh",    "saved",     "served",   "passed",
    "fallback", "requested", "over PCIe", "compress", "faults"};

static void cell_u64(char *out, uint64_t v) {
  snprintf(out, cell_max, "%" PRIu64, v);
}

static void cell_seconds(char *out, uint64_t ns) {
  char num[32];
  fmt_double(num, sizeof num, "%.3f", (double)ns / 1e9);
  snprintf(out, cell_max, "%s s", num);
}

/* The name with anything but printable ASCII shown as '?'. */
static void cell_name(char *out, const char *name) {
  size_t k = 0;
  for (; name[k] && k + 1 < cell_max; k++)
    out[k] = (name[k] > ' ' && name[k] < 127) ? name[k] : '?';
  out[k] = '\0';
}

static void text_cells(text_row c, const stat_row *w) {
  cell_name(c[0], w->name);
  snprintf(c[1], cell_max, "%s%s", ibp_region_state_name(w->state),
           w->retired ? "*" : "");
  human(c[2], cell_max, w->bytes);
  human(c[3], cell_max, w->tensor_bytes);
  cell_u64(c[4], w->tensors);
  unsigned chunk = w->compressed ? w->chunk_bytes : w->rule_chunk;
  double thr = w->compressed ? w->threshold : w->rule_threshold;
  if (chunk)
    snprintf(c[5], cell_max, "%u", chunk);
  else
    snprintf(c[5], cell_max, "auto");
  if (thr > 0)
    fmt_double(c[6], cell_max, "%.3f", thr);
  else
    snprintf(c[6], cell_max, "auto");
  if (w->compressed)
    percent(c[7], cell_max, w->saved_fraction);
  else
    snprintf(c[7], cell_max, "-");
  cell_u64(c[8], w->copies_served);
  cell_u64(c[9], w->copies_passed);
  cell_u64(c[10], w->copies_fallback);
  human(c[11], cell_max, w->bytes_requested);
  human(c[12], cell_max, w->bytes_pcie);
  cell_seconds(c[13], w->compress_ns);
  cell_u64(c[14], w->write_faults);
}

static void total_cells(text_row c, const totals *t, size_t n) {
  snprintf(c[0], cell_max, "total (%zu)", n);
  snprintf(c[1], cell_max, " ");
  human(c[2], cell_max, t->bytes);
  snprintf(c[3], cell_max, " ");
  snprintf(c[4], cell_max, " ");
  snprintf(c[5], cell_max, " ");
  snprintf(c[6], cell_max, " ");
  percent(c[7], cell_max, saving(t->stored_bytes, t->bytes));
  cell_u64(c[8], t->copies_served);
  cell_u64(c[9], t->copies_passed);
  cell_u64(c[10], t->copies_fallback);
  human(c[11], cell_max, t->bytes_requested);
  human(c[12], cell_max, t->bytes_pcie);
  cell_seconds(c[13], t->compress_ns);
  cell_u64(c[14], t->write_faults);
}

static void text_line(sbuf *b, text_row c, const size_t *width) {
  sb_printf(b, "[ibp]  ");
  for (int k = 0; k < n_cols; k++) {
    int left = k < 2; /* name and state left-aligned, numbers right */
    sb_printf(b, left ? " %-*s" : " %*s", (int)width[k], c[k]);
  }
  while (b->n > 0 && b->p[b->n - 1] == ' ')
    b->n--;
  sb_printf(b, "\n");
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

static void report_text(const row_list *l, const totals *t) {
  text_row *cells = calloc(l->n + 2, sizeof *cells);
  if (cells == NULL) {
    ibp__log(IBP_LOG_WARN, "stats: out of memory; no report");
    return;
  }
  size_t width[n_cols] = {0};
  for (int k = 0; k < n_cols; k++)
    snprintf(cells[0][k], cell_max, "%s", col_head[k]);
  for (size_t i = 0; i < l->n; i++)
    text_cells(cells[i + 1], &l->v[i]);
  total_cells(cells[l->n + 1], t, l->n);
  for (size_t i = 0; i < l->n + 2; i++)
    for (int k = 0; k < n_cols; k++) {
      size_t len = strlen(cells[i][k]);
      width[k] = len > width[k] ? len : width[k];
    }
  sbuf b = {0};
  sb_printf(&b, "[ibp] stats: %zu region%s (* = freed before exit)\n", l->n,
            l->n == 1 ? "" : "s");
  for (size_t i = 0; i < l->n + 2; i++)
    text_line(&b, cells[i], width);
  char req[32], pcie[32], pct[32];
  human(req, sizeof req, t->bytes_requested);
  human(pcie, sizeof pcie, t->bytes_pcie);
  percent(pct, sizeof pct, saving(t->bytes_pcie, t->bytes_requested));
  sb_printf(&b, "[ibp] stats: requested %s, read over PCIe %s, saved %s\n", req,
            pcie, pct);
  if (b.oom)
    ibp__log(IBP_LOG_WARN, "stats: out of memory; no report");
  else
    write_all(STDERR_FILENO, b.p, b.n);
  free(b.p);
  free(cells);
}

/* ---- JSON ------------------------------------------------------------------
 */

/* A JSON string; bytes outside printable ASCII become \u00XX escapes. */
static void json_string(sbuf *b, const char *s) {
  sb_printf(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      sb_printf(b, "\\%c", *p);
    else if (*p < 0x20 || *p >= 0x7f)
      sb_printf(b, "\\u%04x", *p);
    else
      sb_printf(b, "%c", *p);
  }
  sb_printf(b, "\"");
}

static void json_u64(sbuf *b, const char *key, uint64_t v) {
  sb_printf(b, ", \"%s\": %" PRIu64, key, v);
}

static void json_num(sbuf *b, const char *key, double v) {
  char num[64];
  json_double(num, sizeof num, v);
  sb_printf(b, ", \"%s\": %s", key, num);
}

static void json_region(sbuf *b, const stat_row *w) {
  sb_printf(b, "    {\"id\": %" PRIu64 ", \"name\": ", w->id);
  json_string(b, w->name);
  sb_printf(b, ", \"base\": \"0x%" PRIxPTR "\"", w->base);
  json_u64(b, "bytes", w->bytes);
  json_u64(b, "tensor_bytes", w->tensor_bytes);
  json_u64(b, "tensors", w->tensors);
  json_u64(b, "tensors_compressed", w->tensors_compressed);
  json_u64(b, "chunk_bytes", w->chunk_bytes);
  json_num(b, "threshold", w->threshold);
  json_u64(b, "compressed_bytes", w->compressed_bytes);
  json_u64(b, "metadata_bytes", w->metadata_bytes);
  json_num(b, "saved_fraction", w->saved_fraction);
  sb_printf(b, ", \"state\": \"%s\"", ibp_region_state_name(w->state));
  sb_printf(b, ", \"retired\": %s", w->retired ? "true" : "false");
  json_u64(b, "copies_served", w->copies_served);
  json_u64(b, "copies_passthrough", w->copies_passed);
  json_u64(b, "copies_fallback", w->copies_fallback);
  json_u64(b, "bytes_requested", w->bytes_requested);
  json_u64(b, "bytes_read_pcie", w->bytes_pcie);
  json_num(b, "compress_seconds", (double)w->compress_ns / 1e9);
  json_u64(b, "write_faults", w->write_faults);
  json_u64(b, "dirty_tensors", w->dirty_tensors);
  json_u64(b, "tensors_recompressed", w->recompressed);
  sb_printf(b, "}");
}

static void json_totals(sbuf *b, const totals *t, size_t n) {
  sb_printf(b, "  \"totals\": {\"regions\": %zu", n);
  json_u64(b, "bytes", t->bytes);
  json_u64(b, "stored_bytes", t->stored_bytes);
  json_num(b, "saved_fraction", saving(t->stored_bytes, t->bytes));
  json_u64(b, "copies_served", t->copies_served);
  json_u64(b, "copies_passthrough", t->copies_passed);
  json_u64(b, "copies_fallback", t->copies_fallback);
  json_u64(b, "bytes_requested", t->bytes_requested);
  json_u64(b, "bytes_read_pcie", t->bytes_pcie);
  json_num(b, "pcie_saved_fraction", saving(t->bytes_pcie, t->bytes_requested));
  json_num(b, "compress_seconds", (double)t->compress_ns / 1e9);
  json_u64(b, "write_faults", t->write_faults);
  json_u64(b, "dirty_tensors", t->dirty_tensors);
  json_u64(b, "tensors_recompressed", t->recompressed);
  sb_printf(b, "}\n");
}

static void json_document(sbuf *b, const row_list *l, const totals *t) {
  sb_printf(b, "{\n  \"version\": 1,\n  \"regions\": [");
  for (size_t i = 0; i < l->n; i++) {
    sb_printf(b, i ? ",\n" : "\n");
    json_region(b, &l->v[i]);
  }
  sb_printf(b, l->n ? "\n  ],\n" : "],\n");
  json_totals(b, t, l->n);
  sb_printf(b, "}\n");
}

static void warn_unwritable(const char *what, int err) {
  char msg[128];
  const char *s = strerror_r(err, msg, sizeof msg);
  ibp__log(IBP_LOG_WARN, "IBP_STATS, path '%s': %s: %s; statistics not written",
           ibp__cfg.stats_path, what, s);
}

static int write_fd(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Creates "<path>.<pid>.<n>.tmp" exclusively (mode 0666 & ~umask). */
static int open_temp(const char *path, char *tmp, size_t cap) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  for (unsigned i = 0; i < 16; i++) {
    snprintf(tmp, cap, "%s.%ld.%lx.tmp", path, (long)getpid(),
             (unsigned long)ts.tv_nsec + i);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/* A path that exists and is no regular file (/dev/stderr, a FIFO) is written
 * in place: renaming over it would replace the device node or link. */
static void write_in_place(const char *path, const sbuf *b) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    warn_unwritable("cannot open", errno);
    return;
  }
  if (write_fd(fd, b->p, b->n) != 0)
    warn_unwritable("cannot write", errno);
  close(fd);
}

/* Regular files: a temporary file beside the target, then rename, so a
 * reader sees the old file or the whole new one. */
static void write_replace(const char *path, const sbuf *b) {
  char tmp[IBP_CONFIG_PATH_MAX + 64];
  int fd = open_temp(path, tmp, sizeof tmp);
  if (fd < 0) {
    warn_unwritable("cannot create a file in its directory", errno);
    return;
  }
  const char *what = "cannot write";
  int rc = write_fd(fd, b->p, b->n);
  int err = errno;
  if (rc == 0 && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
    rc = -1, err = errno;
  if (close(fd) != 0 && rc == 0)
    rc = -1, err = errno;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -1, err = errno, what = "cannot replace it";
  if (rc != 0) {
    unlink(tmp);
    warn_unwritable(what, err);
  }
}

static void report_json(const row_list *l, const totals *t) {
  sbuf b = {0};
  json_document(&b, l, t);
  const char *path = ibp__cfg.stats_path;
  struct stat st;
  if (b.oom)
    warn_unwritable("cannot build the report", ENOMEM);
  else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    write_in_place(path, &b);
  else
    write_replace(path, &b);
  free(b.p);
}

void ibp__stats_report(void) {
  if (atomic_exchange(&reported, 1))
    return;
  if (ibp__cfg.stats != IBP_STATS_STDERR && ibp__cfg.stats != IBP_STATS_JSON)
    return;
  int saved_errno = errno;
  ibp__guard++;
  row_list l = {0};
  collect(&l);
  int lost = atomic_load(&retired_lost);
  if (l.oom || lost)
    ibp__log(IBP_LOG_WARN, "stats: out of memory; some regions not listed");
  totals t = sum_rows(&l);
  if (ibp__cfg.stats == IBP_STATS_STDERR)
    report_text(&l, &t);
  else
    report_json(&l, &t);
  free(l.v);
  ibp__guard--;
  errno = saved_errno;
}

void ibp__stats_after_fork_child(void) {
  atomic_store(&reported, 1);
}
