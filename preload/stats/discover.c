/* Discovery: pinned allocations, their host-to-device copies, and rules
 * that fit them (stats/discover.h; docs/USING.md, "Finding the regions").
 *
 * One mutex guards the table of allocations; discovery is off (one relaxed
 * load per copy) unless IBP_DISCOVER asks for it.  "Changed after its first
 * copy" compares hashes of the allocation's chunks taken at its first copy
 * with hashes taken when it is released (or at exit): the share of chunks
 * that differ.  "Copied again" (what makes a region pay, docs/USING.md
 * "Good regions and poor ones") is a copy of the same offset and length
 * seen before -- a Bloom filter of (allocation, offset, length), so rarely
 * a false "again" and never a missed one -- or more bytes copied than the
 * allocation holds. */
#include "stats/discover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/log.h"
#include "ibp/codec.h"
#include "stats/path.h"

#define MAX_ALLOCS 1024
#define EXACT_SIZES 6 /* distinct copy lengths listed one by one */
#define CHUNKS 256    /* pieces compared to tell what changed */
/* A buffer more than half of which changed after its first copy is
 * rewritten, not read-mostly (a staging buffer): no rule. */
#define MAX_CHANGED_SHARE 0.5
/* What a suggested region needs (docs/USING.md, "Finding the regions"). */
#define MIN_REGION_BYTES ((uint64_t)1 << 20)
#define MIN_TENSOR_BYTES 64u
#define DEFAULT_TENSOR 4096u
#define SEEN_BITS (1u << 22) /* the Bloom filter of copies seen: 512 KiB */
/* The tensor sizes tried on a buffer's bytes (the codec's own search on a
 * sample, as `ibp analyze` measures): powers of two from 256 B to 64 KiB
 * and a few divisors of its copies' sizes. */
#define TRY_MIN 256u
#define TRY_MAX (64u << 10)
#define MAX_TRIES 16
#define TRY_STATS_BYTES ((uint64_t)256 << 10) /* the statistics' sample */
#define TRY_EVAL_BYTES ((uint64_t)64 << 10)   /* the search's */
/* Within this share of the best saving (a point), the size nearest
 * DEFAULT_TENSOR is taken.  Allocations share a rule when its tensor size
 * saves, over their bytes together, at most SHARE_LOSS (two points) less
 * than each one's own best size would: a rule fewer is worth that much to
 * whoever reads the line, not more. */
#define TRY_TIE 0.01
#define SHARE_LOSS 0.02

typedef struct alloc {
  uintptr_t base;
  uint64_t bytes, nth;
  int live, hashed, compared;
  int registered;       /* cuMemHostRegister: the application's own memory */
  uint64_t *chunk_hash; /* at the first copy, one per chunk; NULL: none */
  uint64_t chunk_bytes;
  unsigned chunks, changed; /* chunks; those that differ when compared */
  uint64_t copies, copied, gcd, max_len, min_len;
  /* gcd of the copies' offsets and of the lengths of those that do not
   * end at the allocation's end: the tensor sizes every copy fits (0:
   * every copy is the whole allocation, any size fits) */
  uint64_t fit_gcd;
  unsigned tries; /* tensor sizes tried on its bytes (0: not yet) */
  uint32_t try_tensor[MAX_TRIES];
  double try_saved[MAX_TRIES]; /* share of its bytes saved, metadata in */
  uint64_t again;              /* copies of an offset and length seen before */
  uint64_t size_len[EXACT_SIZES], size_count[EXACT_SIZES];
  unsigned sizes;    /* distinct lengths in size_len (<= EXACT_SIZES) */
  int many_sizes;    /* more than EXACT_SIZES: the histogram below */
  uint64_t pow2[65]; /* copies of [2^k, 2^(k+1)) bytes */
} alloc;

_Atomic int ibp__discovering;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static alloc table[MAX_ALLOCS];
static unsigned n_allocs;
static uint64_t allocations, lost; /* every allocation; those not kept */
/* host-to-device copies (not cuMemcpy's unified ones, whose source may be
 * device memory) from memory no pinned allocation holds */
static uint64_t unpinned_copies, unpinned_bytes;
static uint64_t seen[SEEN_BITS / 64];
static char out_path[IBP_CONFIG_PATH_MAX];

/* ---- the bytes of an allocation ------------------------------------------ */

/* A 64-bit hash of the bytes (four lanes of multiply-xor, then mixed):
 * only ever compared with itself. */
static uint64_t hash_bytes(const void *p, uint64_t n) {
  const unsigned char *b = p;
  uint64_t h[4] = {1, 2, 3, 4};
  const uint64_t k = 0x9e3779b97f4a7c15u;
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      memcpy(&w, b + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * k;
    }
  uint64_t t = n;
  for (; i < n; i++)
    t = (t ^ b[i]) * k;
  for (int l = 0; l < 4; l++)
    t = (t ^ h[l] ^ (h[l] >> 29)) * k;
  return t ^ (t >> 32);
}

static uint64_t chunk_hash(const alloc *a, unsigned c) {
  uint64_t off = (uint64_t)c * a->chunk_bytes;
  uint64_t n =
      a->bytes - off < a->chunk_bytes ? a->bytes - off : a->chunk_bytes;
  return hash_bytes((const void *)(a->base + off), n);
}

/* The allocation cut in at most CHUNKS chunks of whole 4 KiB pages, each
 * hashed at the first copy: at the end, the share of chunks that differ
 * tells a buffer rewritten every step from one partly written. */
static void hash_first(alloc *a) {
  uint64_t page = 4096, per = (a->bytes + CHUNKS - 1) / CHUNKS;
  a->chunk_bytes = (per + page - 1) / page * page;
  a->chunks = (unsigned)((a->bytes + a->chunk_bytes - 1) / a->chunk_bytes);
  a->chunk_hash = malloc(a->chunks * sizeof *a->chunk_hash);
  a->hashed = 1;
  for (unsigned c = 0; a->chunk_hash && c < a->chunks; c++)
    a->chunk_hash[c] = chunk_hash(a, c);
}

static void compare(alloc *a) {
  if (!a->chunk_hash || a->compared)
    return;
  for (unsigned c = 0; c < a->chunks; c++)
    a->changed += chunk_hash(a, c) != a->chunk_hash[c];
  a->compared = 1;
  free(a->chunk_hash);
  a->chunk_hash = NULL;
}

/* Whether a copy of n bytes at offset off of allocation a was seen before
 * (Bloom filter, two probes); records it. */
static int seen_before(const alloc *a, uint64_t off, uint64_t n) {
  uint64_t key[3] = {a->nth, off, n};
  uint64_t h = hash_bytes(key, sizeof key);
  uint32_t p[2] = {(uint32_t)h % SEEN_BITS, (uint32_t)(h >> 32) % SEEN_BITS};
  int all = 1;
  for (int i = 0; i < 2; i++) {
    uint64_t bit = (uint64_t)1 << (p[i] % 64);
    all &= (seen[p[i] / 64] & bit) != 0;
    seen[p[i] / 64] |= bit;
  }
  return all;
}

/* ---- the tensor size, by what it saves ---------------------------------- */

/* Whether every copy of a fits tensors of t bytes: each starts on a tensor
 * and ends on one or at the allocation's end (whose partial tensor is
 * stored raw), and the buffer holds enough of them to learn from. */
static int fits(const alloc *a, uint64_t t) {
  return t >= MIN_TENSOR_BYTES && t <= IBP_CONFIG_MAX_TENSOR &&
         (a->fit_gcd == 0 || a->fit_gcd % t == 0) && a->bytes / t >= 64;
}

static void add_try(alloc *a, uint64_t t) {
  if (!fits(a, t) || t > TRY_MAX || a->tries == MAX_TRIES)
    return;
  for (unsigned i = 0; i < a->tries; i++)
    if (a->try_tensor[i] == t)
      return;
  a->try_tensor[a->tries++] = (uint32_t)t;
}

/* The share of a's bytes that tensors of t bytes save: the codec's own
 * search (Mask/Bitval, chunk width, threshold) on a sample of its tensors,
 * less the metadata (two tensors' worth and a flag bit per tensor, as
 * `ibp analyze` counts it); the tail past the last whole tensor saves
 * nothing.  -1 when the search fails. */
static double trial(const alloc *a, uint32_t t) {
  uint64_t n = a->bytes / t, whole = n * t;
  /* at least 64 tensors learnt from and 8 measured: fewer would find
   * invariant bits that are not */
  uint64_t stats = TRY_STATS_BYTES > 64u * t ? TRY_STATS_BYTES : 64u * t;
  uint64_t eval = TRY_EVAL_BYTES > 8u * t ? TRY_EVAL_BYTES : 8u * t;
  ibp_search_options o = {
      .chunk_bytes = 0,
      .threshold = -1,
      .sampling = {.fraction =
                       whole > stats ? (double)stats / (double)whole : 0},
      .eval_max_bytes = eval,
      .threads = 1,
  };
  ibp_params p;
  ibp_search_report r;
  if (ibp_search((const void *)a->base, n, t, &o, &p, &r) != IBP_OK)
    return -1.0;
  ibp_params_free(&p);
  double best = 0;
  for (unsigned c = 0; c < IBP_CHUNK_WIDTH_COUNT; c++)
    best = r.best_saved[c] > best ? r.best_saved[c] : best;
  double meta = 2.0 * t + (double)((n + 7) / 8);
  return (best * (double)whole - meta) / (double)a->bytes;
}

static const char *unsuited_usage(const alloc *a);

/* Tries the candidate tensor sizes on a's bytes while they are there (at
 * its release, or at exit): only for an allocation that would otherwise
 * get a rule. */
static void try_tensors(alloc *a) {
  if (a->tries || unsuited_usage(a))
    return;
  for (uint64_t t = TRY_MIN; t <= TRY_MAX; t *= 2)
    add_try(a, t);
  uint64_t g = a->fit_gcd;
  if (g) {
    add_try(a, g);
    add_try(a, ibp__discover_fit_tensor(g));
    for (uint64_t k = 2; k <= 8; k++)
      if (g % k == 0)
        add_try(a, g / k);
  }
  unsigned kept = 0;
  for (unsigned i = 0; i < a->tries; i++) {
    double v = trial(a, a->try_tensor[i]);
    if (v < -0.5)
      continue;
    a->try_tensor[kept] = a->try_tensor[i];
    a->try_saved[kept++] = v;
  }
  a->tries = kept;
}

/* How far t is from DEFAULT_TENSOR, on a log scale. */
static unsigned distance(uint64_t t) {
  unsigned lt = 63u - (unsigned)__builtin_clzll(t);
  unsigned ld = 63u - (unsigned)__builtin_clzll(DEFAULT_TENSOR);
  return (lt > ld ? lt - ld : ld - lt) * 2u + (t & (t - 1) ? 1u : 0u);
}

/* The share a saves with tensors of t bytes; -1 when t was not tried. */
static double saved_with(const alloc *a, uint64_t t) {
  for (unsigned i = 0; i < a->tries; i++)
    if (a->try_tensor[i] == t)
      return a->try_saved[i];
  return -1.0;
}

/* The best share a saves with any tried size. */
static double best_saved(const alloc *a) {
  double b = -1.0;
  for (unsigned i = 0; i < a->tries; i++)
    b = a->try_saved[i] > b ? a->try_saved[i] : b;
  return b;
}

/* ---- recording ----------------------------------------------------------- */

static void report(void);

static void after_fork_child(void) {
  atomic_store_explicit(&ibp__discovering, 0, memory_order_relaxed);
  pthread_mutex_init(&lock, NULL);
  out_path[0] = '\0';
}

/* IBP_DISCOVER: unset, empty or 0 = off; 1 = report on stderr; else the
 * path of the report file (%p, %r expanded at exit). */
static void start(void) {
  const char *v = getenv("IBP_DISCOVER");
  if (!v || !v[0] || strcmp(v, "0") == 0)
    return;
  ibp__config_load();
  if (ibp__cfg.disabled)
    return;
  if (strcmp(v, "1") != 0)
    snprintf(out_path, sizeof out_path, "%s", v);
  pthread_atfork(NULL, NULL, after_fork_child);
  atexit(report);
  atomic_store_explicit(&ibp__discovering, 1, memory_order_relaxed);
}

void ibp__discover_start(void) {
  pthread_once(&once, start);
}

void ibp__discover_pinned(const void *p, size_t n, int registered) {
  if (ibp__guard || !p || n == 0)
    return;
  pthread_once(&once, start);
  if (!atomic_load_explicit(&ibp__discovering, memory_order_relaxed))
    return;
  pthread_mutex_lock(&lock);
  allocations++;
  if (n_allocs == MAX_ALLOCS) {
    lost++;
  } else {
    alloc *a = &table[n_allocs++];
    *a = (alloc){.base = (uintptr_t)p,
                 .bytes = n,
                 .nth = allocations,
                 .live = 1,
                 .registered = registered};
  }
  pthread_mutex_unlock(&lock);
}

static alloc *find_live(uintptr_t p, uint64_t n) {
  for (unsigned i = n_allocs; i-- > 0;) {
    alloc *a = &table[i];
    if (a->live && p >= a->base && p - a->base < a->bytes &&
        n <= a->bytes - (p - a->base))
      return a;
  }
  return NULL;
}

void ibp__discover_released(const void *p) {
  if (ibp__guard ||
      !atomic_load_explicit(&ibp__discovering, memory_order_relaxed))
    return;
  pthread_mutex_lock(&lock);
  alloc *a = find_live((uintptr_t)p, 1);
  if (a && a->base == (uintptr_t)p) {
    compare(a);
    try_tensors(a);
    a->live = 0;
  }
  pthread_mutex_unlock(&lock);
}

static void count_length(alloc *a, uint64_t n) {
  a->pow2[63 - __builtin_clzll(n)]++;
  for (unsigned i = 0; i < a->sizes; i++)
    if (a->size_len[i] == n) {
      a->size_count[i]++;
      return;
    }
  if (a->sizes < EXACT_SIZES) {
    a->size_len[a->sizes] = n;
    a->size_count[a->sizes++] = 1;
  } else {
    a->many_sizes = 1;
  }
}

void ibp__discover_copy_slow(const void *src, size_t n, int unified) {
  if (ibp__guard || n == 0)
    return;
  pthread_mutex_lock(&lock);
  alloc *a = find_live((uintptr_t)src, n);
  if (!a && !unified) {
    unpinned_copies++;
    unpinned_bytes += n;
  }
  if (a) {
    if (!a->hashed) /* before the first copy is queued */
      hash_first(a);
    a->copies++;
    a->copied += n;
    a->again += seen_before(a, (uintptr_t)src - a->base, n);
    uint64_t off = (uintptr_t)src - a->base;
    a->gcd = ibp__gcd(ibp__gcd(a->gcd, n), off);
    a->fit_gcd = ibp__gcd(a->fit_gcd, off);
    if (off + n != a->bytes)
      a->fit_gcd = ibp__gcd(a->fit_gcd, n);
    if (n > a->max_len)
      a->max_len = n;
    if (!a->min_len || n < a->min_len)
      a->min_len = n;
    count_length(a, n);
  }
  pthread_mutex_unlock(&lock);
}

uint64_t ibp__discover_fit_tensor(uint64_t g) {
  if (g <= DEFAULT_TENSOR)
    return g;
  for (uint64_t t = DEFAULT_TENSOR; t >= 1024; t--)
    if (g % t == 0)
      return t;
  if (g <= IBP_CONFIG_MAX_TENSOR)
    return g;
  for (uint64_t t = IBP_CONFIG_MAX_TENSOR; t > DEFAULT_TENSOR; t--)
    if (g % t == 0)
      return t;
  return 1; /* only small divisors: nothing fits */
}

/* ---- the report ---------------------------------------------------------- */

typedef struct out {
  int fd;
  char line[1024];
  size_t n;
} out;

static void write_out(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

/* Appends to the line; a line longer than the buffer is written out in
 * pieces, never cut (a suggested IBP_REGIONS line is pasted whole). */
static void put(out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  const size_t cap = sizeof o->line - 1; /* the last byte: '\n' */
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int m = vsnprintf(o->line + o->n, cap - o->n, fmt, ap);
  va_end(ap);
  if (m >= 0 && (size_t)m >= cap - o->n) {
    write_out(o->fd, o->line, o->n); /* what came before, then the piece */
    o->n = 0;
    m = vsnprintf(o->line, cap, fmt, again);
    if (m >= 0 && (size_t)m >= cap) {
      va_end(again);
      va_start(again, fmt);
      vdprintf(o->fd, fmt, again);
      m = 0;
    }
  }
  va_end(again);
  if (m > 0)
    o->n += (size_t)m;
}

static void end_line(out *o) {
  o->line[o->n++] = '\n';
  write_out(o->fd, o->line, o->n);
  o->n = 0;
}

/* Copy lengths: "256 B x2048, 512 B x3" or a power-of-two histogram. */
static void put_lengths(out *o, const alloc *a) {
  char h[32], h2[32];
  if (!a->copies) {
    put(o, "-");
    return;
  }
  if (!a->many_sizes) {
    for (unsigned i = 0; i < a->sizes; i++)
      put(o, "%s%s x%" PRIu64, i ? ", " : "",
          ibp__human_bytes(a->size_len[i], h, 32), a->size_count[i]);
    return;
  }
  int first = 1;
  for (int k = 0; k < 64; k++)
    if (a->pow2[k]) {
      put(o, "%s%s-%s x%" PRIu64, first ? "" : ", ",
          ibp__human_bytes((uint64_t)1 << k, h, 32),
          ibp__human_bytes(((uint64_t)2 << k) - 1, h2, 32), a->pow2[k]);
      first = 0;
    }
}

/* Why allocation a gets no rule by how the program used it, or NULL. */
static const char *unsuited_usage(const alloc *a) {
  if (a->copies == 0)
    return "never copied to the device";
  if (a->copies < 2)
    return "copied once: nothing to gain from compressing it";
  if (a->again == 0 && a->copied <= a->bytes)
    return "its bytes were copied once each (no copy repeated): the "
           "compression costs more than one copy saves";
  if (a->changed > MAX_CHANGED_SHARE * a->chunks)
    return "more than half of it changed after its first copy (a staging "
           "buffer?): written tensors are served raw until recompressed, so "
           "it gains little";
  if (a->bytes < MIN_REGION_BYTES)
    return "smaller than 1 MiB: not worth a region";
  return NULL;
}

/* Why allocation a gets no rule, or NULL when it gets one. */
static const char *unsuited(const alloc *a) {
  const char *why = unsuited_usage(a);
  if (why)
    return why;
  if (!a->tries && ibp__discover_fit_tensor(a->gcd) < MIN_TENSOR_BYTES)
    return "its copies start or end on fewer than 64-byte boundaries: no "
           "tensor size fits them";
  return NULL;
}

/* Whether no other allocation has a's size (then size= selects it). */
static int unique_size(const alloc *a) {
  for (unsigned i = 0; i < n_allocs; i++)
    if (&table[i] != a && table[i].bytes == a->bytes)
      return 0;
  return 1;
}

/* ---- the rules ------------------------------------------------------------
 *
 * As few as the guide would write (docs/USING.md, "Finding the regions"):
 * the allocations worth a rule that are larger than every other one are
 * taken by `min=` rules, largest first, each run of sizes as long as one
 * tensor size serves it (saving, over the run's bytes, at most SHARE_LOSS
 * less than each allocation's own best size);
 * the others by `size=` (all of one size, when no other allocation has
 * it) or `nth=` and `size=`.  At most IBP_CONFIG_MAX_RULES. */

typedef struct suggestion {
  int by_min; /* min=<min>; else size=<size> (and nth=<nth>) */
  uint64_t min, size, nth;
  uint32_t tensor;
  const alloc *member[MAX_ALLOCS]; /* the allocations it takes */
  unsigned members;
} suggestion;

static suggestion rules_out[IBP_CONFIG_MAX_RULES];
static unsigned n_rules, rules_dropped; /* rules; allocations left out */

/* The tensor size that saves most over members [0, n) of m (bytes
 * weighted), losing at most SHARE_LOSS against each member's own best
 * (`strict`, weighted alike); the size nearest DEFAULT_TENSOR among those
 * within TRY_TIE of it.  0: none. */
static uint32_t common_tensor(const alloc *const *m, unsigned n, int strict) {
  uint32_t pick = 0;
  double pick_v = -1.0, top = -1.0, total = 0, bests = 0;
  for (unsigned k = 0; k < n; k++) {
    total += (double)m[k]->bytes;
    bests += best_saved(m[k]) * (double)m[k]->bytes;
  }
  bests /= total;
  for (int pass = 0; pass < 2; pass++)
    for (unsigned i = 0; m[0]->tries && i < m[0]->tries; i++) {
      uint32_t t = m[0]->try_tensor[i];
      double v = 0;
      unsigned k = 0;
      for (; k < n; k++) {
        double x = saved_with(m[k], t);
        if (x < -0.5)
          break;
        v += x * (double)m[k]->bytes;
      }
      if (k < n)
        continue;
      v /= total;
      if (strict && v < bests - SHARE_LOSS)
        continue;
      if (pass == 0) {
        top = v > top ? v : top;
      } else if (v >= top - TRY_TIE &&
                 (!pick || distance(t) < distance(pick) ||
                  (distance(t) == distance(pick) && v > pick_v))) {
        pick = t;
        pick_v = v;
      }
    }
  return pick;
}

/* The tensor size of a rule of members m: the shared one within
 * SHARE_LOSS of their own best sizes, else the one that saves most, else
 * (an allocation that could not be tried) what its copies fit. */
static uint32_t rule_tensor(const alloc *const *m, unsigned n) {
  uint32_t t = common_tensor(m, n, 1);
  if (!t)
    t = common_tensor(m, n, 0);
  return t ? t : (uint32_t)ibp__discover_fit_tensor(m[0]->gcd);
}

static suggestion *new_rule(void) {
  if (n_rules == IBP_CONFIG_MAX_RULES)
    return NULL;
  suggestion *r = &rules_out[n_rules++];
  memset(r, 0, sizeof *r);
  return r;
}

static void add_rule(const alloc *const *m, unsigned n, int by_min) {
  suggestion *r = new_rule();
  if (!r) {
    rules_dropped += n;
    return;
  }
  r->by_min = by_min && n > 1;
  r->min = m[n - 1]->bytes;
  r->size = m[0]->bytes;
  r->nth = !by_min && n == 1 && !unique_size(m[0]) ? m[0]->nth : 0;
  r->tensor = rule_tensor(m, n);
  for (unsigned k = 0; k < n; k++)
    r->member[r->members++] = m[k];
}

static int by_size_desc(const void *x, const void *y) {
  const alloc *a = *(const alloc *const *)x, *b = *(const alloc *const *)y;
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes ? -1 : 1;
  return a->nth < b->nth ? -1 : a->nth > b->nth;
}

/* Whether an allocation without a rule has `bytes`. */
static int other_has_size(uint64_t bytes) {
  for (unsigned i = 0; i < n_allocs; i++)
    if (unsuited(&table[i]) && table[i].bytes == bytes)
      return 1;
  return 0;
}

static void make_rules(void) {
  static const alloc *m[MAX_ALLOCS];
  unsigned n = 0;
  uint64_t above = lost ? UINT64_MAX : 0; /* the largest without a rule */
  n_rules = rules_dropped = 0;
  for (unsigned i = 0; i < n_allocs; i++) {
    if (!unsuited(&table[i]))
      m[n++] = &table[i];
    else if (table[i].bytes > above)
      above = table[i].bytes;
  }
  qsort(m, n, sizeof *m, by_size_desc);
  unsigned i = 0;
  while (i < n && m[i]->bytes > above) { /* min= runs, largest first */
    unsigned j = i + 1;
    while (
        j < n && m[j]->bytes > above &&
        (m[j]->bytes == m[j - 1]->bytes || common_tensor(m + i, j + 1 - i, 1)))
      j++;
    add_rule(m + i, j - i, 1);
    i = j;
  }
  while (i < n) { /* one size at a time */
    unsigned j = i + 1;
    while (j < n && m[j]->bytes == m[i]->bytes)
      j++;
    if (j - i > 1 && !other_has_size(m[i]->bytes) &&
        common_tensor(m + i, j - i, 1)) {
      add_rule(m + i, j - i, 0);
      rules_out[n_rules - 1].nth = 0;
    } else {
      for (unsigned k = i; k < j; k++)
        add_rule(m + k, 1, 0);
    }
    i = j;
  }
}

static void put_rule(out *o, const suggestion *r, unsigned index) {
  if (r->by_min)
    put(o, "min=%" PRIu64, r->min);
  else if (r->nth)
    put(o, "nth=%" PRIu64 ",size=%" PRIu64, r->nth, r->size);
  else
    put(o, "size=%" PRIu64, r->size);
  put(o, ",tensor=%" PRIu32, r->tensor);
  if (r->members == 1)
    put(o, ",name=pinned%" PRIu64, r->member[0]->nth);
  else
    put(o, ",name=pinned_rule%u", index);
}

/* What each rule saves by the codec's trial, and where its allocations'
 * last tensor is partial (its tail is stored and copied raw). */
static void put_rule_notes(out *o, const suggestion *r, unsigned index) {
  char h[32], h2[32];
  double v = 0, best = 0, bytes = 0;
  unsigned partial = 0, tried = 0;
  for (unsigned k = 0; k < r->members; k++) {
    const alloc *a = r->member[k];
    double x = saved_with(a, r->tensor);
    if (x > -0.5) {
      v += x * (double)a->bytes;
      best += best_saved(a) * (double)a->bytes;
      bytes += (double)a->bytes;
      tried++;
    }
    partial += a->bytes % r->tensor != 0;
  }
  put(o, "[ibp] discover: rule %u: %u allocation%s (%s", index, r->members,
      r->members == 1 ? "" : "s",
      ibp__human_bytes(r->member[r->members - 1]->bytes, h, 32));
  if (r->members > 1)
    put(o, " to %s", ibp__human_bytes(r->member[0]->bytes, h2, 32));
  put(o, ")");
  if (tried && bytes > 0)
    put(o,
        ", tensor=%" PRIu32 " saves %.1f%% of their bytes (the codec's "
        "trial on a sample; the best size for each: %.1f%%)",
        r->tensor, 100.0 * v / bytes, 100.0 * best / bytes);
  end_line(o);
  if (!partial)
    return;
  put(o,
      "[ibp] discover: rule %u: the last tensor of %u of its allocations is "
      "partial (not a multiple of %" PRIu32 " B), so its tail is stored and "
      "copied raw:",
      index, partial, r->tensor);
  for (unsigned k = 0, shown = 0; k < r->members; k++)
    if (r->member[k]->bytes % r->tensor && shown++ < 8)
      put(o, " nth=%" PRIu64 " (%" PRIu64 " B)", r->member[k]->nth,
          r->member[k]->bytes % r->tensor);
  if (partial > 8)
    put(o, " ...");
  end_line(o);
}

/* Why the table is empty, or why nothing was copied from it. */
static void put_why_empty(out *o, unsigned copied_from) {
  char h[32];
  if (copied_from)
    return;
  if (allocations == 0)
    put(o, "[ibp] discover: the program made no pinned allocation");
  else
    put(o, "[ibp] discover: no host-to-device copy came from a pinned "
           "allocation");
  if (unpinned_copies)
    put(o,
        "; its %" PRIu64 " host-to-device cop%s (%s) came from pageable "
        "memory (malloc, a NumPy array), which cannot be a region",
        unpinned_copies, unpinned_copies == 1 ? "y" : "ies",
        ibp__human_bytes(unpinned_bytes, h, 32));
  put(o, " (docs/USING.md, \"What libibp needs from your program\")");
  end_line(o);
}

static void put_table(out *o, unsigned copied_from) {
  char h[32], h2[32];
  put(o,
      "[ibp] discover: %" PRIu64 " pinned allocation%s; host-to-device "
      "copies from %u of them",
      allocations, allocations == 1 ? "" : "s", copied_from);
  end_line(o);
  put_why_empty(o, copied_from);
  put(o, "  %5s %11s %8s %11s %7s %8s  %s", "nth", "size", "copies", "copied",
      "reuse", "changed", "copy lengths");
  end_line(o);
  for (unsigned i = 0; i < n_allocs; i++) {
    const alloc *a = &table[i];
    put(o, "  %5" PRIu64 " %11s %8" PRIu64 " %11s", a->nth,
        ibp__human_bytes(a->bytes, h, 32), a->copies,
        ibp__human_bytes(a->copied, h2, 32));
    if (a->copies) {
      char changed[16] = "?"; /* no memory for the hashes */
      if (a->compared && a->changed == 0)
        snprintf(changed, sizeof changed, "no");
      else if (a->compared)
        snprintf(changed, sizeof changed, "%.0f%%",
                 ceil(100.0 * a->changed / a->chunks));
      put(o, " %6.1fx %8s  ", (double)a->copied / (double)a->bytes, changed);
    } else
      put(o, " %7s %8s  ", "-", "-");
    put_lengths(o, a);
    end_line(o);
  }
}

/* The suggested allocations whose bytes did not change after their first
 * copy: mode=compact would keep them at (1 - saved) of their host memory
 * (docs/CONFIG.md); said apart from the rules, because it trades the
 * time of copies the driver would do faster, and of CPU reads, for that
 * memory.  (Registered memory is the application's own: not offered.) */
static void put_compact(out *o) {
  unsigned n = 0;
  const alloc *one = NULL;
  for (unsigned i = 0; i < n_allocs; i++) {
    const alloc *a = &table[i];
    if (unsuited(a) || a->registered || !a->compared || a->changed)
      continue;
    one = n++ ? one : a;
  }
  if (!n)
    return;
  if (n == 1) {
    put(o,
        "[ibp] discover: allocation nth=%" PRIu64 " did not change after "
        "its first copy: add mode=compact to its rule",
        one->nth);
  } else {
    put(o, "[ibp] discover: %u allocations (nth=", n);
    for (unsigned i = 0, k = 0; i < n_allocs; i++) {
      const alloc *a = &table[i];
      if (unsuited(a) || a->registered || !a->compared || a->changed)
        continue;
      if (k++ < 16)
        put(o, "%s%" PRIu64, k > 1 ? "," : "", a->nth);
    }
    put(o,
        "%s) did not change after their first copy: add mode=compact to "
        "their rules",
        n > 16 ? ",..." : "");
  }
  put(o, " to keep only its compressed bytes in host memory (its copies are "
         "then always libibp's, and CPU reads of it rebuild pages; "
         "docs/CONFIG.md)");
  end_line(o);
}

static void put_suggestions(out *o) {
  for (unsigned i = 0; i < n_allocs; i++) {
    const char *why = unsuited(&table[i]);
    if (why && table[i].copies) {
      put(o, "[ibp] discover: allocation nth=%" PRIu64 ": %s", table[i].nth,
          why);
      end_line(o);
    }
  }
  make_rules();
  if (!n_rules) {
    put(o, "[ibp] discover: no allocation is worth a rule%s",
        n_allocs ? "" : " (an empty table: libibp cannot help this program)");
    end_line(o);
    return;
  }
  put(o, "[ibp] discover: suggested rules (docs/USING.md, \"Finding the "
         "regions\"):");
  end_line(o);
  put(o, "IBP_REGIONS='");
  for (unsigned k = 0; k < n_rules; k++) {
    if (k)
      put(o, ";");
    put_rule(o, &rules_out[k], k + 1);
  }
  put(o, "'");
  end_line(o);
  for (unsigned k = 0; k < n_rules; k++)
    put_rule_notes(o, &rules_out[k], k + 1);
  if (rules_dropped) {
    put(o,
        "[ibp] discover: %u more allocation%s worth a rule left out: "
        "IBP_REGIONS takes at most %d rules",
        rules_dropped, rules_dropped == 1 ? "" : "s", IBP_CONFIG_MAX_RULES);
    end_line(o);
  }
  put_compact(o);
}

static void report(void) {
  if (!atomic_exchange_explicit(&ibp__discovering, 0, memory_order_relaxed))
    return;
  ibp__guard++;
  pthread_mutex_lock(&lock);
  unsigned copied_from = 0;
  for (unsigned i = 0; i < n_allocs; i++) {
    if (table[i].live) {
      compare(&table[i]);
      try_tensors(&table[i]);
    }
    copied_from += table[i].copies > 0;
  }
  out o = {.fd = STDERR_FILENO};
  char path[IBP_CONFIG_PATH_MAX];
  if (out_path[0]) {
    ibp__stats_path_expand(out_path, path, sizeof path);
    o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o.fd < 0)
      ibp__log(IBP_LOG_WARN, "IBP_DISCOVER, path '%s': cannot open it: %s",
               path, strerror(errno));
  }
  if (o.fd >= 0) {
    put_table(&o, copied_from);
    if (lost) {
      put(&o,
          "[ibp] discover: %" PRIu64 " later allocations not recorded "
          "(more than %d)",
          lost, MAX_ALLOCS);
      end_line(&o);
    }
    put_suggestions(&o);
    if (o.fd != STDERR_FILENO)
      close(o.fd);
  }
  pthread_mutex_unlock(&lock);
  ibp__guard--;
}
