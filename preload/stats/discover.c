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

typedef struct alloc {
  uintptr_t base;
  uint64_t bytes, nth;
  int live, hashed, compared;
  int registered;       /* cuMemHostRegister: the application's own memory */
  uint64_t *chunk_hash; /* at the first copy, one per chunk; NULL: none */
  uint64_t chunk_bytes;
  unsigned chunks, changed; /* chunks; those that differ when compared */
  uint64_t copies, copied, gcd, max_len;
  uint64_t again; /* copies of an offset and length seen before */
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
    a->gcd = ibp__gcd(ibp__gcd(a->gcd, n), (uintptr_t)src - a->base);
    if (n > a->max_len)
      a->max_len = n;
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

static void put(out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  const size_t cap = sizeof o->line - 1; /* the last byte: '\n' */
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(o->line + o->n, cap - o->n, fmt, ap);
  va_end(ap);
  if (m > 0)
    o->n += (size_t)m < cap - o->n - 1 ? (size_t)m : cap - o->n - 1;
}

static void end_line(out *o) {
  o->line[o->n++] = '\n';
  const char *p = o->line;
  while (o->n > 0) {
    ssize_t w = write(o->fd, p, o->n);
    if (w <= 0)
      break;
    p += w;
    o->n -= (size_t)w;
  }
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

/* Why allocation a gets no rule, or NULL when it gets one. */
static const char *unsuited(const alloc *a) {
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
  if (ibp__discover_fit_tensor(a->gcd) < MIN_TENSOR_BYTES)
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

static void put_rule(out *o, const alloc *a) {
  if (unique_size(a))
    put(o, "size=%" PRIu64, a->bytes);
  else
    put(o, "nth=%" PRIu64 ",size=%" PRIu64, a->nth, a->bytes);
  put(o, ",tensor=%" PRIu64 ",name=pinned%" PRIu64,
      ibp__discover_fit_tensor(a->gcd), a->nth);
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
  for (unsigned i = 0; i < n_allocs; i++) {
    const alloc *a = &table[i];
    if (unsuited(a) || a->registered || !a->compared || a->changed)
      continue;
    put(o,
        "[ibp] discover: allocation nth=%" PRIu64 " did not change after "
        "its first copy: add mode=compact to its rule to keep only its "
        "compressed bytes in host memory (its copies are then always "
        "libibp's, and CPU reads of it rebuild pages; docs/CONFIG.md)",
        a->nth);
    end_line(o);
  }
}

static void put_suggestions(out *o) {
  unsigned rules = 0;
  for (unsigned i = 0; i < n_allocs; i++) {
    const char *why = unsuited(&table[i]);
    if (why && table[i].copies) {
      put(o, "[ibp] discover: allocation nth=%" PRIu64 ": %s", table[i].nth,
          why);
      end_line(o);
    }
  }
  for (unsigned i = 0; i < n_allocs; i++) {
    if (unsuited(&table[i]))
      continue;
    if (rules++ == 0)
      put(o, "[ibp] discover: suggested rules (docs/USING.md, \"Finding the "
             "regions\"):");
    if (rules == 1) {
      end_line(o);
      put(o, "IBP_REGIONS='");
    } else {
      put(o, ";");
    }
    put_rule(o, &table[i]);
  }
  if (rules) {
    put(o, "'");
    end_line(o);
    put_compact(o);
  } else {
    put(o, "[ibp] discover: no allocation is worth a rule%s",
        n_allocs ? "" : " (an empty table: libibp cannot help this program)");
    end_line(o);
  }
}

static void report(void) {
  if (!atomic_exchange_explicit(&ibp__discovering, 0, memory_order_relaxed))
    return;
  ibp__guard++;
  pthread_mutex_lock(&lock);
  unsigned copied_from = 0;
  for (unsigned i = 0; i < n_allocs; i++) {
    if (table[i].live)
      compare(&table[i]);
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
