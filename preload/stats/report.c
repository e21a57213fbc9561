/* Statistics: the exit report IBP_STATS asks for (docs/ARCHITECTURE.md,
 * "Statistics").
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
 *    "decoder": {"build" (the running decompress kernels',
 *                IBP_DECODER_BUILD),
 *                "devices": [{"device", "profile", "decoder_build",
 *                             "decode_measured" (bool)}, ...]},
 *    "regions": [{"id", "name", "base" ("0x..."), "bytes", "tensor_bytes",
 *                 "tensors", "tensors_compressed", "chunk_bytes",
 *                 "threshold", "clusters", "compressed_bytes",
 *                 "metadata_bytes",
 *                 "saved_fraction", "stage" ("exp": stored with the
 *                 exponent stage after IBP, on "stage_clusters" of its
 *                 clusters; "none": IBP alone), "stage_pick" (why:
 *                 "exp", or "untried" -- R too large, a compact region,
 *                 not compressed --, "no-fit", "bytes" -- the stage
 *                 stores no fewer --, "time" -- a copy costs more with
 *                 it under the device's profile: docs/PROFILE.md
 *                 "Whether the stage pays"), "state" (the registry's, or
 *                 "freed-early": freed before its compression finished),
 *                 "retired" (bool), "tracker"
 *                 ("userfaultfd", "mprotect", "compact" or "none"), "mode"
 *                 (the userfaultfd tracker's: "scanning" or "faulting";
 *                 "none" under the others),
 *                 <one key per row of stats.def>,
 *                 "routes": {<one key per route of routes.def>:
 *                            {"copies", "explored", "timed",
 *                             "measured_seconds", "model_seconds",
 *                             "cpu_seconds", "cpu_model_seconds",
 *                             "classes"}, ...}}, ...],
 *    "totals": {"regions", "bytes", "stored_bytes", "saved_fraction",
 *               <one key per row of stats.def>, "pcie_saved_fraction"}}
 *
 * Regions in registration order (id).  A region never compressed has
 * chunk_bytes 0, threshold 0, clusters 0, tensors 0 and saved_fraction 0;
 * saved_fraction is 1 - compressed_bytes / bytes (Mask/Bitval/flags not
 * counted); stored_bytes counts compressed regions at compressed_bytes, others
 * at bytes.  Integers are exact; fractions are the shortest decimal that reads
 * back as the same double; nothing is NaN or infinite.
 *
 * "decoder" names the decompress kernels' build and, per device set up,
 * the profile its copies were modelled with and the build that profile's
 * decode terms were measured with (docs/PROFILE.md "Which decoder the
 * decode terms are of"); the text report says it in one line when some
 * device's decode terms are unmeasured for this decoder.
 *
 * The figures after the codec's are the rows of stats.def, in its order
 * (NANOSECONDS figures in seconds, as JSON numbers).  "routes" is what the
 * gate's chooser did with the region's copies on each route
 * (docs/ARCHITECTURE.md "The gate"): copies that took it, explorations
 * among them, copies timed, the timed copies' cost summed as measured and
 * as modelled, and the classes of copies whose choice ended on it; the
 * text report shows it as a second table (routes some copy took, the
 * costs per timed copy).
 *
 * Regions that leave the registry before exit are kept by
 * ibp__stats_keep_retired on a lock-free list (a CAS push; nodes are never
 * freed): no mutex, so neither a thread that dies inside it nor a fork() taken
 * while another thread holds it can block the exit path.  The live regions'
 * rows come from serve/figures.c.
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

#include "base/log.h"
#include "kernels/ibp_kernels.h"
#include "stats/discover.h"
#include "stats/path.h"
#include "stats/stats.h"

typedef struct retired_node {
  struct retired_node *next;
  ibp_stat_row row;
} retired_node;

static _Atomic(retired_node *) retired_head;
static atomic_uint_fast64_t retired_seq;
static atomic_int retired_lost; /* retire calls that found no memory */
static atomic_int reported;
/* write-combined allocations a rule matched, left to the driver */
static _Atomic uint64_t wc_left, wc_left_bytes;

/* ibp__stats_note_profile's, per device. */
typedef struct profile_note {
  _Atomic int state; /* NOTE_NONE, NOTE_WRITING, NOTE_SET */
  char name[64], decoder_build[64];
  int decode_measured;
} profile_note;
enum { NOTE_NONE, NOTE_WRITING, NOTE_SET };
static profile_note profile_notes[IBP_STATS_DEVICES];

void ibp__stats_keep_retired(const ibp_stat_row *row) {
  retired_node *n = malloc(sizeof *n);
  if (n == NULL) {
    atomic_fetch_add(&retired_lost, 1);
    return;
  }
  n->row = *row;
  n->row.retired = 1;
  n->row.seq = atomic_fetch_add(&retired_seq, 1);
  n->next = atomic_load_explicit(&retired_head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &retired_head, &n->next, n, memory_order_release, memory_order_relaxed))
    ;
}

/* ---- collecting the rows ------------------------------------------------- */

typedef struct row_list {
  ibp_stat_row *v;
  size_t n, cap;
  int oom;
} row_list;

static ibp_stat_row *row_push(row_list *l) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    ibp_stat_row *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      l->oom = 1;
      return NULL;
    }
    l->v = v;
    l->cap = cap;
  }
  return &l->v[l->n++];
}

static int by_id_then_seq(const void *a, const void *b) {
  const ibp_stat_row *x = a, *y = b;
  if (x->id != y->id)
    return x->id < y->id ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Retired and live rows in registration order; a region listed twice (live
 * and retired, or retired twice) keeps its latest figures. */
static void collect(row_list *l, const ibp_stat_row *live, size_t n_live) {
  const retired_node *n =
      atomic_load_explicit(&retired_head, memory_order_acquire);
  for (; n != NULL; n = n->next) {
    ibp_stat_row *w = row_push(l);
    if (w != NULL)
      *w = n->row;
  }
  for (size_t i = 0; i < n_live; i++) {
    ibp_stat_row *w = row_push(l);
    if (w != NULL)
      *w = live[i];
  }
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

/* Rows told apart where names repeat (many regions of one rule): "w#1",
 * "w#2", ... in registration order; a name seen once is its own label.
 * ('#' is no character of a name: docs/CONFIG.md, `name=`.) */
static const row_list *label_of;

static int by_name_then_id(const void *a, const void *b) {
  const ibp_stat_row *x = &label_of->v[*(const size_t *)a],
                     *y = &label_of->v[*(const size_t *)b];
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  return x->id < y->id ? -1 : x->id > y->id;
}

static void label_rows(row_list *l) {
  for (size_t i = 0; i < l->n; i++)
    snprintf(l->v[i].label, sizeof l->v[i].label, "%s", l->v[i].name);
  size_t *ix = l->n ? malloc(l->n * sizeof *ix) : NULL;
  if (!ix)
    return; /* (out of memory: the names, as they are) */
  for (size_t i = 0; i < l->n; i++)
    ix[i] = i;
  label_of = l;
  qsort(ix, l->n, sizeof *ix, by_name_then_id);
  for (size_t i = 0, j; i < l->n; i = j) {
    for (j = i + 1; j < l->n && !strcmp(l->v[ix[j]].name, l->v[ix[i]].name);)
      j++;
    for (size_t k = i; j - i > 1 && k < j; k++) {
      ibp_stat_row *w = &l->v[ix[k]];
      char *at = w->label + strnlen(w->label, IBP_REGISTRY_NAME_MAX);
      snprintf(at, sizeof w->label - (size_t)(at - w->label), "#%zu",
               k - i + 1);
    }
  }
  free(ix);
}

/* The figures of stats.def: how each is shown, and where it lies in a
 * row. */
typedef enum unit { COUNT, BYTES, NANOSECONDS } unit;
typedef struct figure {
  const char *key;
  unit unit;
  const char *column; /* "" = JSON only */
  size_t offset;      /* in ibp_stat_row */
} figure;

static const figure figures[] = {
#define IBP_COUNTER(key, unit, column)                                         \
  {#key, unit, column, offsetof(ibp_stat_row, key)},
#define IBP_GAUGE(key, unit, column, from)                                     \
  {#key, unit, column, offsetof(ibp_stat_row, key)},
#include "stats/stats.def"
#undef IBP_COUNTER
#undef IBP_GAUGE
};
#define N_FIGURES (sizeof figures / sizeof figures[0])

static uint64_t figure_value(const ibp_stat_row *w, const figure *f) {
  uint64_t v;
  memcpy(&v, (const char *)w + f->offset, sizeof v);
  return v;
}

/* Whether a row's compressed bytes are what its copies read: compressed
 * and ready (a degraded region passes every copy through, whatever its
 * compression left; one freed before that finished has none). */
static int serving(const ibp_stat_row *w) {
  return w->compressed && !w->freed_early && w->state == IBP_REGION_READY;
}

/* The copies from a row's region that reached libibp, each counted once:
 * served, or passed to the driver (by reason). */
static uint64_t copies_passed(const ibp_stat_row *w) {
  uint64_t n = 0;
  for (int k = 0; k < IBP_PASSED_REASONS; k++)
    n += w->passed[k];
  return n;
}

static uint64_t copies_seen(const ibp_stat_row *w) {
  return w->copies_served + w->copies_passthrough + w->copies_fallback +
         w->copies_gated;
}

/* The sums over every row: bytes, stored bytes (regions that serve at
 * their compressed bytes), and each figure (in a row, so figure_value
 * reads them). */
typedef struct totals {
  uint64_t bytes, stored_bytes;
  ibp_stat_row sum;
} totals;

static totals sum_rows(const row_list *l) {
  totals t;
  memset(&t, 0, sizeof t);
  for (size_t i = 0; i < l->n; i++) {
    const ibp_stat_row *w = &l->v[i];
    t.bytes += w->bytes;
    t.stored_bytes += serving(w) ? w->compressed_bytes : w->bytes;
    for (size_t k = 0; k < N_FIGURES; k++) {
      uint64_t v =
          figure_value(&t.sum, &figures[k]) + figure_value(w, &figures[k]);
      memcpy((char *)&t.sum + figures[k].offset, &v, sizeof v);
    }
    for (int k = 0; k < IBP_PASSED_REASONS; k++)
      t.sum.passed[k] += w->passed[k];
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

/* The codec's columns, then one per stats.def figure with a heading. */
#define HAS_COLUMN(column) (sizeof(column) > 1)
enum {
  codec_cols = 8,
  n_cols = codec_cols
#define IBP_COUNTER(key, unit, column) +HAS_COLUMN(column)
#define IBP_GAUGE(key, unit, column, from) +HAS_COLUMN(column)
#include "stats/stats.def"
#undef IBP_COUNTER
#undef IBP_GAUGE
  ,
  cell_max = IBP_REGISTRY_NAME_MAX + 32
};
typedef char text_row[n_cols][cell_max];

static const char *const codec_head[codec_cols] = {
    "region", "state", "size", "tensor", "tensors", "chunk", "thresh", "saved"};

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

static void figure_cell(char *out, const figure *f, uint64_t v) {
  if (f->unit == BYTES)
    human(out, cell_max, v);
  else if (f->unit == NANOSECONDS)
    cell_seconds(out, v);
  else
    cell_u64(out, v);
}

/* The cells of the figures with a column, from c[codec_cols] on. */
static void figure_cells(text_row c, const ibp_stat_row *w) {
  int k = codec_cols;
  for (size_t i = 0; i < N_FIGURES; i++)
    if (figures[i].column[0])
      figure_cell(c[k++], &figures[i], figure_value(w, &figures[i]));
}

static void head_cells(text_row c) {
  for (int k = 0; k < codec_cols; k++)
    snprintf(c[k], cell_max, "%s", codec_head[k]);
  int k = codec_cols;
  for (size_t i = 0; i < N_FIGURES; i++)
    if (figures[i].column[0])
      snprintf(c[k++], cell_max, "%s", figures[i].column);
}

/* The state as the user reads it (docs/USING.md, "When it does not
 * help"): a region no copy came from and never compressed is "unused" (a
 * device-to-host target, a buffer the rule need not take); one freed
 * before its compression finished is "freed-early", not "degraded". */
static const char *state_name(const ibp_stat_row *w) {
  if (!copies_seen(w) && !w->compressed &&
      (w->freed_early || w->state == IBP_REGION_CANDIDATE))
    return "unused";
  return w->freed_early ? "freed-early" : ibp_region_state_name(w->state);
}

static void text_cells(text_row c, const ibp_stat_row *w) {
  cell_name(c[0], w->label);
  snprintf(c[1], cell_max, "%s%s", state_name(w), w->retired ? "*" : "");
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
  figure_cells(c, w);
}

static void total_cells(text_row c, const totals *t, size_t n) {
  snprintf(c[0], cell_max, "total (%zu)", n);
  human(c[2], cell_max, t->bytes);
  for (int k = 1; k < codec_cols; k++)
    if (k != 2 && k != 7)
      snprintf(c[k], cell_max, " ");
  percent(c[7], cell_max, saving(t->stored_bytes, t->bytes));
  figure_cells(c, &t->sum);
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

/* ---- the route table ----------------------------------------------------
 *
 * Per region and route, what the gate's chooser did (docs/ARCHITECTURE.md
 * "The gate"): copies, explorations, timed copies, the timed copies' cost
 * per copy as measured and as modelled, and the classes of copies whose
 * choice ended on the route.  Only routes some copy took. */

static const char *const route_names[IBP_STAT_ROUTES] = {
#define IBP_ROUTE(name, text, ops) text,
#include "stats/routes.def"
#undef IBP_ROUTE
};

enum { route_cols = 8 };
typedef char route_row[route_cols][cell_max];

static void cell_per_copy(char *out, double ns, uint64_t n) {
  char num[32];
  if (!n) {
    snprintf(out, cell_max, "-");
    return;
  }
  fmt_double(num, sizeof num, "%.1f", ns / (double)n / 1e3);
  snprintf(out, cell_max, "%s us", num);
}

static void route_cells(route_row c, const ibp_stat_row *w, int r) {
  const ibp_stat_route *q = &w->route[r];
  cell_name(c[0], w->label);
  snprintf(c[1], cell_max, "%s", route_names[r]);
  cell_u64(c[2], q->copies);
  cell_u64(c[3], q->explored);
  cell_u64(c[4], q->timed);
  cell_per_copy(c[5], q->measured_ns, q->timed);
  cell_per_copy(c[6], q->model_ns, q->timed);
  cell_u64(c[7], q->classes);
}

static void report_routes(sbuf *b, const row_list *l) {
  static const char *const head[route_cols] = {"region",   "route",  "copies",
                                               "explored", "timed",  "measured",
                                               "modelled", "classes"};
  size_t n = 1;
  for (size_t i = 0; i < l->n; i++)
    for (int r = 0; r < IBP_STAT_ROUTES; r++)
      n += l->v[i].route[r].copies > 0;
  if (n == 1)
    return;
  route_row *c = calloc(n, sizeof *c);
  if (!c)
    return;
  for (int k = 0; k < route_cols; k++)
    snprintf(c[0][k], cell_max, "%s", head[k]);
  size_t m = 1, width[route_cols] = {0};
  for (size_t i = 0; i < l->n; i++)
    for (int r = 0; r < IBP_STAT_ROUTES; r++)
      if (l->v[i].route[r].copies)
        route_cells(c[m++], &l->v[i], r);
  for (size_t i = 0; i < m; i++)
    for (int k = 0; k < route_cols; k++) {
      size_t len = strlen(c[i][k]);
      width[k] = len > width[k] ? len : width[k];
    }
  sb_printf(b, "[ibp] stats: routes, as the gate chose them (a copy judged "
               "again, or served in parts, counts each time; measured, "
               "modelled: per timed copy; classes: of copies, the choice "
               "they ended on)\n");
  for (size_t i = 0; i < m; i++) {
    sb_printf(b, "[ibp]  ");
    for (int k = 0; k < route_cols; k++)
      sb_printf(b, k < 2 ? " %-*s" : " %*s", (int)width[k], c[i][k]);
    while (b->n > 0 && b->p[b->n - 1] == ' ')
      b->n--;
    sb_printf(b, "\n");
  }
  free(c);
}

/* ---- the devices' profiles ---------------------------------------------- */

void ibp__stats_note_profile(int dev, const char *name,
                             const char *decoder_build, int decode_measured) {
  if (dev < 0 || dev >= IBP_STATS_DEVICES)
    return;
  profile_note *n = &profile_notes[dev];
  int none = NOTE_NONE;
  if (!atomic_compare_exchange_strong_explicit(&n->state, &none, NOTE_WRITING,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return;
  snprintf(n->name, sizeof n->name, "%s", name ? name : "");
  snprintf(n->decoder_build, sizeof n->decoder_build, "%s",
           decoder_build ? decoder_build : "");
  n->decode_measured = decode_measured != 0;
  atomic_store_explicit(&n->state, NOTE_SET, memory_order_release);
}

static const profile_note *profile_note_of(int dev) {
  const profile_note *n = &profile_notes[dev];
  return atomic_load_explicit(&n->state, memory_order_acquire) == NOTE_SET
             ? n
             : NULL;
}

/* One line when some device's decode terms are unmeasured for this
 * decoder: the first such device, and how many others. */
static void text_decoder(sbuf *b) {
  int first = -1, others = 0;
  for (int d = 0; d < IBP_STATS_DEVICES; d++) {
    const profile_note *n = profile_note_of(d);
    if (!n || n->decode_measured)
      continue;
    if (first < 0)
      first = d;
    else
      others++;
  }
  if (first < 0)
    return;
  const profile_note *n = profile_note_of(first);
  sb_printf(b,
            "[ibp] stats: decode terms unmeasured for this decoder (%s): "
            "device %d's profile %s has them of decoder_build %s%s, a guess "
            "until 'ibp calibrate' measures them (docs/PROFILE.md)\n",
            IBP_DECODER_BUILD, first, n->name, n->decoder_build,
            others ? " (and other devices' too)" : "");
}

/* ---- the copies, each once ---------------------------------------------
 *
 * Per region with copies, one line: served, by route, and passed to the
 * driver, by reason (stats/reasons.def; docs/CONFIG.md, "Why a copy was
 * the driver's"); then the same for all regions. */

static const char *const reason_names[IBP_PASSED_REASONS] = {
#define IBP_REASON(name, text) text,
#include "stats/reasons.def"
#undef IBP_REASON
};

#define MAX_COPY_LINES 16

static void copies_line(sbuf *b, const char *label, const ibp_stat_row *w) {
  const uint64_t served = w->copies_served, passed = copies_passed(w);
  const uint64_t by_route[] = {w->copies_staged, w->copies_batched,
                               w->copies_split};
  static const char *const route[] = {"staged", "batched", "in parts"};
  uint64_t zerocopy = served;
  for (int k = 0; k < 3; k++)
    zerocopy -= by_route[k] < zerocopy ? by_route[k] : zerocopy;
  sb_printf(b, "[ibp] stats: %s: %" PRIu64 " cop%s: %" PRIu64 " served", label,
            served + passed, served + passed == 1 ? "y" : "ies", served);
  if (served) {
    sb_printf(b, " (");
    const char *sep = "";
    if (zerocopy)
      sb_printf(b, "zerocopy %" PRIu64, zerocopy), sep = ", ";
    for (int k = 0; k < 3; k++)
      if (by_route[k])
        sb_printf(b, "%s%s %" PRIu64, sep, route[k], by_route[k]), sep = ", ";
    sb_printf(b, ")");
  }
  sb_printf(b, ", %" PRIu64 " to the driver", passed);
  if (passed) {
    sb_printf(b, " (");
    const char *sep = "";
    for (int k = 0; k < IBP_PASSED_REASONS; k++)
      if (w->passed[k])
        sb_printf(b, "%s%s %" PRIu64, sep, reason_names[k], w->passed[k]),
            sep = ", ";
    sb_printf(b, ")");
  }
  sb_printf(b, "\n");
}

static void report_copies(sbuf *b, const row_list *l, const totals *t) {
  size_t with = 0, shown = 0;
  char label[cell_max + 16];
  for (size_t i = 0; i < l->n; i++) {
    const ibp_stat_row *w = &l->v[i];
    if (!w->copies_served && !copies_passed(w))
      continue;
    if (with++ >= MAX_COPY_LINES)
      continue;
    char name[cell_max];
    cell_name(name, w->label);
    snprintf(label, sizeof label, "region '%s'", name);
    copies_line(b, label, w);
    shown++;
  }
  if (with > shown)
    sb_printf(b,
              "[ibp] stats: ... %zu more regions with copies "
              "(IBP_STATS=<path> lists every one)\n",
              with - shown);
  if (with > 1)
    copies_line(b, "all regions", &t->sum);
}

static void report_text(const row_list *l, const totals *t) {
  text_row *cells = calloc(l->n + 2, sizeof *cells);
  if (cells == NULL) {
    ibp__log(IBP_LOG_WARN, "stats: out of memory; no report");
    return;
  }
  size_t width[n_cols] = {0};
  head_cells(cells[0]);
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
  human(req, sizeof req, t->sum.bytes_requested);
  human(pcie, sizeof pcie, t->sum.bytes_read_pcie);
  percent(pct, sizeof pct,
          saving(t->sum.bytes_read_pcie, t->sum.bytes_requested));
  sb_printf(&b, "[ibp] stats: requested %s, read over PCIe %s, saved %s\n", req,
            pcie, pct);
  report_copies(&b, l, t);
  report_routes(&b, l);
  text_decoder(&b);
  if (b.oom)
    ibp__log(IBP_LOG_WARN, "stats: out of memory; no report");
  else
    write_all(STDERR_FILENO, b.p, b.n);
  free(b.p);
  free(cells);
}

/* ---- JSON ---------------------------------------------------------------- */

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

static void json_figures(sbuf *b, const ibp_stat_row *w) {
  for (size_t i = 0; i < N_FIGURES; i++) {
    uint64_t v = figure_value(w, &figures[i]);
    if (figures[i].unit == NANOSECONDS)
      json_num(b, figures[i].key, (double)v / 1e9);
    else
      json_u64(b, figures[i].key, v);
  }
  sb_printf(b, ", \"passed\": {");
  for (int k = 0; k < IBP_PASSED_REASONS; k++)
    sb_printf(b, "%s\"%s\": %" PRIu64, k ? ", " : "", reason_names[k],
              w->passed[k]);
  sb_printf(b, "}");
}

static void json_region(sbuf *b, const ibp_stat_row *w) {
  sb_printf(b, "    {\"id\": %" PRIu64 ", \"name\": ", w->id);
  json_string(b, w->name);
  sb_printf(b, ", \"base\": \"0x%" PRIxPTR "\"", w->base);
  json_u64(b, "bytes", w->bytes);
  json_u64(b, "tensor_bytes", w->tensor_bytes);
  json_u64(b, "tensors", w->tensors);
  json_u64(b, "tensors_compressed", w->tensors_compressed);
  json_u64(b, "chunk_bytes", w->chunk_bytes);
  json_num(b, "threshold", w->threshold);
  json_u64(b, "clusters", w->clusters);
  json_u64(b, "compressed_bytes", w->compressed_bytes);
  json_u64(b, "metadata_bytes", w->metadata_bytes);
  json_num(b, "saved_fraction", w->saved_fraction);
  const char *pick = w->stage_pick ? w->stage_pick : "untried";
  sb_printf(b, ", \"stage\": \"%s\"",
            strcmp(pick, "exp") == 0 ? "exp" : "none");
  sb_printf(b, ", \"stage_pick\": \"%s\"", pick);
  json_u64(b, "stage_clusters", w->stage_clusters);
  sb_printf(b, ", \"state\": \"%s\"", state_name(w));
  sb_printf(b, ", \"retired\": %s", w->retired ? "true" : "false");
  sb_printf(b, ", \"tracker\": \"%s\"", w->tracker ? w->tracker : "none");
  sb_printf(b, ", \"mode\": \"%s\"", w->mode ? w->mode : "none");
  json_figures(b, w);
  sb_printf(b, ", \"routes\": {");
  for (int r = 0; r < IBP_STAT_ROUTES; r++) {
    const ibp_stat_route *q = &w->route[r];
    sb_printf(b, "%s\"%s\": {\"copies\": %" PRIu64, r ? ", " : "",
              route_names[r], q->copies);
    json_u64(b, "explored", q->explored);
    json_u64(b, "timed", q->timed);
    json_num(b, "measured_seconds", q->measured_ns / 1e9);
    json_num(b, "model_seconds", q->model_ns / 1e9);
    json_num(b, "cpu_seconds", q->cpu_ns / 1e9);
    json_num(b, "cpu_model_seconds", q->cpu_model_ns / 1e9);
    json_u64(b, "classes", q->classes);
    sb_printf(b, "}");
  }
  sb_printf(b, "}}");
}

static void json_decoder(sbuf *b) {
  sb_printf(b, "  \"decoder\": {\"build\": ");
  json_string(b, IBP_DECODER_BUILD);
  sb_printf(b, ", \"devices\": [");
  const char *sep = "";
  for (int d = 0; d < IBP_STATS_DEVICES; d++) {
    const profile_note *n = profile_note_of(d);
    if (!n)
      continue;
    sb_printf(b, "%s{\"device\": %d, \"profile\": ", sep, d);
    json_string(b, n->name);
    sb_printf(b, ", \"decoder_build\": ");
    json_string(b, n->decoder_build);
    sb_printf(b, ", \"decode_measured\": %s}",
              n->decode_measured ? "true" : "false");
    sep = ", ";
  }
  sb_printf(b, "]},\n");
}

static void json_totals(sbuf *b, const totals *t, size_t n) {
  sb_printf(b, "  \"totals\": {\"regions\": %zu", n);
  json_u64(b, "bytes", t->bytes);
  json_u64(b, "stored_bytes", t->stored_bytes);
  json_num(b, "saved_fraction", saving(t->stored_bytes, t->bytes));
  json_figures(b, &t->sum);
  json_num(b, "pcie_saved_fraction",
           saving(t->sum.bytes_read_pcie, t->sum.bytes_requested));
  sb_printf(b, "}\n");
}

static void json_document(sbuf *b, const row_list *l, const totals *t) {
  sb_printf(b, "{\n  \"version\": 1,\n");
  json_decoder(b);
  sb_printf(b, "  \"regions\": [");
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
  char path[IBP_CONFIG_PATH_MAX];
  ibp__stats_path_expand(ibp__cfg.stats_path, path, sizeof path);
  struct stat st;
  if (b.oom)
    warn_unwritable("cannot build the report", ENOMEM);
  else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    write_in_place(path, &b);
  else
    write_replace(path, &b);
  free(b.p);
}

/* Copies that passed through because a region was still being compressed
 * (or set up on the device) when they came: a program that ends before
 * compression finished got nothing from libibp, and this says why. */
static void note_not_ready(const row_list *l, const totals *t) {
  uint64_t n = t->sum.copies_not_ready;
  const ibp_stat_row *first = NULL;
  size_t regions = 0;
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].copies_not_ready) {
      regions++;
      if (!first || l->v[i].copies_not_ready > first->copies_not_ready)
        first = &l->v[i];
    }
  if (!first)
    return;
  ibp__log(IBP_LOG_WARN,
           "stats: %" PRIu64 " cop%s passed through uncompressed because "
           "compression had not finished (region '%s'%s): for short runs "
           "and benchmarks set IBP_WAIT_READY=1, so that the first copy "
           "waits for it (docs/CONFIG.md)",
           n, n == 1 ? "y" : "ies", first->label,
           regions > 1 ? " and others" : "");
}

/* Regions no host-to-device copy came from (state "unused"): one line, so
 * that the advice for copies (IBP_WAIT_READY, tensor sizes) is not read
 * as theirs. */
static void note_unused(const row_list *l) {
  size_t n = 0;
  const ibp_stat_row *first = NULL;
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(state_name(&l->v[i]), "unused") && !n++)
      first = &l->v[i];
  if (!n)
    return;
  ibp__log(IBP_LOG_WARN,
           "stats: %zu region%s (region '%s'%s) never the source of a "
           "host-to-device copy that reached libibp (a device-to-host "
           "target, a buffer not copied): nothing to serve; a narrower rule "
           "(size=, nth=) leaves %s out (docs/USING.md, \"When it does not "
           "help\")",
           n, n == 1 ? "" : "s", first->label, n > 1 ? " and others" : "",
           n == 1 ? "it" : "them");
}

/* A region most of whose copies the gate left to the driver: one warning
 * naming its tensor size, and when that size does not divide the copies'
 * offsets and lengths (each copy then reads its partial tensors whole),
 * the size that does, chosen as discovery chooses it (docs/USING.md,
 * "Choosing tensor=", "When it does not help"). */
static void note_gated(const ibp_stat_row *w) {
  uint64_t all = w->copies_served + w->copies_gated + w->copies_passthrough +
                 w->copies_fallback;
  if (2 * w->copies_gated <= all)
    return;
  char fix[160] = "";
  if (w->copy_gcd && w->tensor_bytes && w->copy_gcd % w->tensor_bytes != 0)
    snprintf(fix, sizeof fix,
             "; tensor=%u does not divide their offsets and lengths "
             "(multiples of %" PRIu64 " B), so each reads its partial "
             "tensors whole -- try tensor=%" PRIu64,
             w->tensor_bytes, w->copy_gcd,
             ibp__discover_fit_tensor(w->copy_gcd));
  ibp__log(IBP_LOG_WARN,
           "stats: region '%s': %" PRIu64 " of %" PRIu64 " copies left to "
           "the driver, whose copy the gate models faster than the kernel's "
           "on tensor=%u (IBP_PROFILE)%s (docs/USING.md, \"When it does not "
           "help\")",
           w->label, w->copies_gated, all, w->tensor_bytes, fix);
}

/* A compact region: the host memory it kept against an ordinary region's,
 * and what serving every copy it could from the shadow cost or saved
 * against the driver's copies (modelled: docs/ARCHITECTURE.md, "Compact
 * regions"). */
static void note_compact(const ibp_stat_row *w) {
  if (!w->pages_released && !w->copies_compact_driver)
    return;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  /* an ordinary region keeps its bytes pinned, besides the same shadow */
  const double kept = (double)(w->host_resident_bytes + w->host_pinned_bytes);
  const double ordinary = (double)(w->bytes + w->host_pinned_bytes);
  ibp__log(IBP_LOG_WARN, /* shown like the other notes */
           "stats: region '%s' (compact): host memory %.3f GiB once released, "
           "against "
           "%.3f GiB as an ordinary region (%.3f GiB saved); copies served "
           "from the shadow cost %.3f ms more and saved %.3f ms against "
           "the driver's (modelled); %" PRIu64
           " copies or parts of copies read "
           "by the driver",
           w->label, kept / gib, ordinary / gib, (ordinary - kept) / gib,
           1e-6 * (double)w->compact_seconds_cost,
           1e-6 * (double)w->modelled_seconds_saved, w->copies_compact_driver);
}

void ibp__stats_left_write_combined(uint64_t bytes) {
  atomic_fetch_add_explicit(&wc_left, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&wc_left_bytes, bytes, memory_order_relaxed);
}

/* Write-combined allocations a rule matched but did not name: the CPU
 * reads such memory uncached (many times slower), so compressing or
 * refreshing one could take minutes; one line, however many. */
static void note_write_combined(void) {
  uint64_t n = atomic_load_explicit(&wc_left, memory_order_relaxed);
  if (!n)
    return;
  char size[32];
  human(size, sizeof size,
        atomic_load_explicit(&wc_left_bytes, memory_order_relaxed));
  ibp__log(IBP_LOG_WARN,
           "stats: %" PRIu64 " write-combined pinned allocation%s (%s) "
           "matched a rule and %s left to the driver: the CPU reads such "
           "memory uncached, so compressing it would be slow; add wc=yes "
           "to the rule to take %s (docs/CONFIG.md)",
           n, n == 1 ? "" : "s", size, n == 1 ? "was" : "were",
           n == 1 ? "it" : "them");
}

int ibp__stats_wanted(void) {
  return !atomic_load(&reported) && (ibp__cfg.stats == IBP_STATS_STDERR ||
                                     ibp__cfg.stats == IBP_STATS_JSON);
}

void ibp__stats_write(ibp_stat_row *live, size_t n, int live_incomplete) {
  if (atomic_exchange(&reported, 1))
    return;
  if (ibp__cfg.stats != IBP_STATS_STDERR && ibp__cfg.stats != IBP_STATS_JSON)
    return;
  int saved_errno = errno;
  ibp__guard++;
  row_list l = {0};
  collect(&l, live, n);
  label_rows(&l);
  int lost = atomic_load(&retired_lost);
  if (l.oom || lost || live_incomplete)
    ibp__log(IBP_LOG_WARN, "stats: out of memory; some regions not listed");
  totals t = sum_rows(&l);
  if (ibp__cfg.stats == IBP_STATS_STDERR)
    report_text(&l, &t);
  else
    report_json(&l, &t);
  note_not_ready(&l, &t);
  note_unused(&l);
  note_write_combined();
  for (size_t i = 0; i < l.n; i++) {
    note_gated(&l.v[i]);
    note_compact(&l.v[i]);
  }
  free(l.v);
  ibp__guard--;
  errno = saved_errno;
}

void ibp__stats_after_fork_child(void) {
  atomic_store(&reported, 1);
}
