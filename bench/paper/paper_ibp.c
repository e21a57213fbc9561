/*
 * paper_ibp — an independent re-implementation of the size model of the
 * paper's Invariant Bit Packing (sections 4.1 and 4.2), used as the baseline
 * that libibp's own codec is compared with.  It never writes compressed data:
 * it only computes, for every threshold T in 0.50..0.99 and chunk width c in
 * {1,2,4,8} bytes, how many bytes the paper's format would occupy.
 *
 *   paper_ibp FILE --tensor-bytes R [--json] [--threads N] [--naive]
 *
 * Model (see README.md for the worked example):
 *   - FILE holds n = floor(size / R) tensors of R bytes; a tail is ignored.
 *   - bit k of a tensor is bit k % 8 of byte k / 8 (LSB-first).
 *   - per-bit counter = number of tensors with that bit set.
 *   - Mask/Bitval at threshold T: invariant-1 if count > T*n, invariant-0 if
 *     count < (1-T)*n, else not invariant.  T = pct/100 is compared exactly
 *     in integers: 100*count > pct*n and 100*count < (100-pct)*n.
 *   - chunk j of width c is bytes [j*c, (j+1)*c); only widths dividing R.
 *     It fits when (chunk & mask) == bitval and then saves popcount(mask).
 *   - bytesSaved = floor((bitsSaved - nchunks) / 8); the tensor costs R if
 *     bytesSaved <= 0, else R - bytesSaved.  Mask, Bitval and the per-tensor
 *     flag bits are not counted.
 *
 * Fast path (one pass over the data for all 50 x 4 settings):
 *   As T grows the conditions only tighten, so every bit has a "top level"
 *   (the highest threshold index at which it is invariant) and a fixed
 *   preferred value.  A chunk fits at level L iff every mismatching bit
 *   has a top level < L, so its fit level is F = 1 + max(top of mismatching
 *   bits) — a maximum, which decomposes over bytes: one table lookup per
 *   byte gives F for widths 1, 2, 4 and 8 alike.  The bits saved by a chunk
 *   as a function of L (zero below F, a non-increasing step function from F
 *   on) are added to a per-tensor difference array over the 50 levels.
 *   --naive recomputes every setting with the plain definition instead; the
 *   tests compare the two.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
  NLEVELS = 50,   /* thresholds 0.50, 0.51, ..., 0.99 */
  FIRST_PCT = 50, /* level L is T = (FIRST_PCT + L) / 100 */
  NWIDTHS = 4,
  MAX_TENSOR_BYTES = 65536,
  MAX_THREADS = 16,
};

static const uint32_t WIDTHS[NWIDTHS] = {1, 2, 4, 8};

/* ---------------------------------------------------------------- input */

typedef struct {
  const char *path;
  uint32_t tensor_bytes;
  unsigned threads;
  int json;
  int naive;
} options;

typedef struct {
  const uint8_t *data;
  size_t map_len;
  uint64_t n;
  uint32_t r;
} dataset;

static void usage(FILE *out) {
  fprintf(out,
          "usage: paper_ibp FILE --tensor-bytes R [--json] "
          "[--threads N] [--naive]\n"
          "  R: 1..%d bytes per tensor\n",
          MAX_TENSOR_BYTES);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out) {
  char *end = NULL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 0 ||
      v > max)
    return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  unsigned long v = 0;
  memset(o, 0, sizeof(*o));
  o->threads = 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--naive") == 0) {
      o->naive = 1;
    } else if (strcmp(a, "--tensor-bytes") == 0 && i + 1 < argc) {
      if (parse_uint(argv[++i], MAX_TENSOR_BYTES, &v) != 0)
        return -1;
      o->tensor_bytes = (uint32_t)v;
    } else if (strcmp(a, "--threads") == 0 && i + 1 < argc) {
      if (parse_uint(argv[++i], MAX_THREADS, &v) != 0)
        return -1;
      o->threads = (unsigned)v;
    } else if (a[0] != '-' && o->path == NULL) {
      o->path = a;
    } else {
      return -1;
    }
  }
  return (o->path != NULL && o->tensor_bytes != 0) ? 0 : -1;
}

static int map_dataset(const char *path, uint32_t r, dataset *ds) {
  struct stat st;
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "paper_ibp: %s: %s\n", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  ds->r = r;
  ds->n = (uint64_t)st.st_size / r;
  ds->map_len = (size_t)(ds->n * r);
  ds->data = NULL;
  if (ds->n > UINT32_MAX) { /* per-thread histograms count in 32 bits */
    fprintf(stderr, "paper_ibp: %s: more than 2^32 tensors\n", path);
    close(fd);
    return -1;
  }
  if (ds->map_len > 0) {
    void *p = mmap(NULL, ds->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      fprintf(stderr, "paper_ibp: mmap %s: %s\n", path, strerror(errno));
      close(fd);
      return -1;
    }
    posix_madvise(p, ds->map_len, POSIX_MADV_SEQUENTIAL);
    ds->data = p;
  }
  close(fd);
  return 0;
}

/* ------------------------------------------------------- thread helper */

typedef void *(*worker_fn)(void *);

/* Runs fn on `count` job structs of `size` bytes each, one thread per job
 * (the first on the calling thread).  A job whose thread cannot be started
 * runs on the calling thread instead. */
static void run_jobs(worker_fn fn, void *jobs, size_t size, unsigned count) {
  pthread_t tid[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  char *base = jobs;
  for (unsigned t = 1; t < count; t++)
    started[t] = pthread_create(&tid[t], NULL, fn, base + t * size) == 0;
  fn(base);
  for (unsigned t = 1; t < count; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    else
      fn(base + t * size);
  }
}

static void split_range(uint64_t n, unsigned parts, unsigned i, uint64_t *lo,
                        uint64_t *hi) {
  *lo = n * i / parts;
  *hi = n * (i + 1) / parts;
}

/* ------------------------------------------------------- bit counters */

typedef struct {
  const dataset *ds;
  uint64_t lo, hi;
  uint32_t *hist; /* [r][256]: how often byte p held value v */
} count_job;

/* A byte-value histogram per position costs one increment per byte; the
 * per-bit counters are derived from it afterwards. */
static void *count_worker(void *arg) {
  count_job *job = arg;
  uint32_t r = job->ds->r;
  for (uint64_t i = job->lo; i < job->hi; i++) {
    const uint8_t *t = job->ds->data + i * r;
    for (uint32_t p = 0; p < r; p++)
      job->hist[(size_t)p * 256 + t[p]]++;
  }
  return NULL;
}

/* counts[k] = number of tensors whose bit k is 1; counts has 8*r entries. */
static int count_bits(const dataset *ds, unsigned threads, uint64_t *counts) {
  count_job jobs[MAX_THREADS];
  size_t cells = (size_t)ds->r * 256;
  for (unsigned t = 0; t < threads; t++) {
    jobs[t].ds = ds;
    split_range(ds->n, threads, t, &jobs[t].lo, &jobs[t].hi);
    jobs[t].hist = calloc(cells, sizeof(uint32_t));
    if (jobs[t].hist == NULL) {
      while (t-- > 0)
        free(jobs[t].hist);
      return -1;
    }
  }
  run_jobs(count_worker, jobs, sizeof(jobs[0]), threads);
  memset(counts, 0, (size_t)ds->r * 8 * sizeof(uint64_t));
  for (unsigned t = 0; t < threads; t++) {
    for (size_t cell = 0; cell < cells; cell++) {
      uint32_t c = jobs[t].hist[cell];
      size_t p = cell / 256;
      unsigned v = (unsigned)(cell % 256);
      for (unsigned k = 0; k < 8; k++)
        if (v & (1u << k))
          counts[p * 8 + k] += c;
    }
    free(jobs[t].hist);
  }
  return 0;
}

/* ---------------------------------------------------- invariant levels */

/* The paper's rule at T = pct/100, in exact integer arithmetic.
 * Returns 1 for invariant-1, 0 for invariant-0, -1 for not invariant. */
static int invariant_value(uint64_t count, uint64_t n, unsigned pct) {
  if (100 * count > (uint64_t)pct * n)
    return 1;
  if (100 * count < (uint64_t)(100 - pct) * n)
    return 0;
  return -1;
}

/* Per bit: top[k] = highest level at which bit k is invariant (-1: never)
 * and value[k] = its Bitval there.  The levels at which a bit is invariant
 * form a prefix 0..top because the conditions tighten as T grows, and the
 * value cannot change (for T >= 0.5 the two conditions exclude each other). */
static void invariant_levels(const uint64_t *counts, uint64_t n, uint32_t r,
                             int8_t *top, uint8_t *value) {
  for (size_t k = 0; k < (size_t)r * 8; k++) {
    int first = invariant_value(counts[k], n, FIRST_PCT);
    top[k] = -1;
    value[k] = first == 1;
    for (int l = 0; first >= 0 && l < NLEVELS; l++) {
      if (invariant_value(counts[k], n, FIRST_PCT + (unsigned)l) != first)
        break;
      top[k] = (int8_t)l;
    }
  }
}

/* fit[p*256 + v]: the lowest level at which byte p holding v matches
 * Bitval under Mask (NLEVELS if it matches at no level). */
static void byte_fit_table(const int8_t *top, const uint8_t *value, uint32_t r,
                           uint8_t *fit) {
  for (uint32_t p = 0; p < r; p++) {
    for (unsigned v = 0; v < 256; v++) {
      int worst = -1; /* highest top level among mismatching bits */
      for (unsigned k = 0; k < 8; k++) {
        size_t b = (size_t)p * 8 + k;
        if (top[b] >= 0 && ((v >> k) & 1u) != value[b] && top[b] > worst)
          worst = top[b];
      }
      fit[(size_t)p * 256 + v] = (uint8_t)(worst + 1);
    }
  }
}

/* ------------------------------------------------ per-width chunk plan */

/* For one chunk width: per chunk j, saved[j][L] = popcount of the mask over
 * the chunk at level L, end[j] = first level at which that is 0, and the
 * levels where it drops, as (level, amount) pairs sorted by level. */
typedef struct {
  uint32_t width, nchunks;
  uint8_t *saved; /* [nchunks][NLEVELS] */
  uint8_t *end;   /* [nchunks] */
  uint32_t *drop_first;
  uint8_t *drop_count;
  uint8_t *drop_level;
  uint8_t *drop_amount;
} width_plan;

static int plan_width(const int8_t *top, uint32_t r, uint32_t width,
                      width_plan *w) {
  w->width = width;
  w->nchunks = r / width;
  size_t nch = w->nchunks;
  w->saved = calloc(nch * NLEVELS, 1);
  w->end = calloc(nch, 1);
  w->drop_first = calloc(nch, sizeof(uint32_t));
  w->drop_count = calloc(nch, 1);
  w->drop_level = calloc(nch * NLEVELS, 1);
  w->drop_amount = calloc(nch * NLEVELS, 1);
  if (!w->saved || !w->end || !w->drop_first || !w->drop_count ||
      !w->drop_level || !w->drop_amount)
    return -1;
  uint32_t ndrops = 0;
  for (size_t j = 0; j < nch; j++) {
    uint8_t *s = w->saved + j * NLEVELS;
    for (size_t b = j * width * 8; b < (j + 1) * width * 8; b++)
      for (int l = 0; l <= top[b]; l++)
        s[l]++;
    w->drop_first[j] = ndrops;
    for (int l = 0; l < NLEVELS; l++) {
      if (s[l] > 0)
        w->end[j] = (uint8_t)(l + 1);
      if (l > 0 && s[l] < s[l - 1]) {
        w->drop_level[ndrops] = (uint8_t)l;
        w->drop_amount[ndrops] = (uint8_t)(s[l - 1] - s[l]);
        ndrops++;
        w->drop_count[j]++;
      }
    }
  }
  return 0;
}

static void free_plan(width_plan *w) {
  free(w->saved);
  free(w->end);
  free(w->drop_first);
  free(w->drop_count);
  free(w->drop_level);
  free(w->drop_amount);
}

/* ----------------------------------------------------- size evaluation */

typedef struct {
  const dataset *ds;
  const uint8_t *fit;
  const width_plan *plans;
  unsigned nplans;
  uint64_t lo, hi;
  uint64_t saved_bytes[NWIDTHS][NLEVELS]; /* summed bytesSaved > 0 */
  int failed;
} eval_job;

/* Adds one tensor's bytesSaved at every level for one width, given the fit
 * level of each of its chunks. */
static void add_tensor(const width_plan *w, const uint8_t *chunk_fit,
                       uint64_t *saved_bytes) {
  int32_t diff[NLEVELS + 1] = {0};
  for (uint32_t j = 0; j < w->nchunks; j++) {
    unsigned f = chunk_fit[j];
    if (f >= w->end[j])
      continue; /* fits only where the mask over it is empty */
    diff[f] += w->saved[(size_t)j * NLEVELS + f];
    uint32_t d = w->drop_first[j], dend = d + w->drop_count[j];
    for (; d < dend; d++)
      if (w->drop_level[d] > f)
        diff[w->drop_level[d]] -= w->drop_amount[d];
  }
  int64_t bits = 0;
  for (int l = 0; l < NLEVELS; l++) {
    bits += diff[l];
    int64_t spare = bits - (int64_t)w->nchunks; /* participation bits */
    if (spare >= 8)
      saved_bytes[l] += (uint64_t)(spare / 8);
  }
}

static void *eval_worker(void *arg) {
  eval_job *job = arg;
  uint32_t r = job->ds->r;
  uint8_t *lv[NWIDTHS]; /* fit level per chunk, for each width */
  for (unsigned i = 0; i < NWIDTHS; i++)
    lv[i] = malloc(r);
  job->failed = !lv[0] || !lv[1] || !lv[2] || !lv[3];
  for (uint64_t i = job->lo; i < job->hi && !job->failed; i++) {
    const uint8_t *t = job->ds->data + i * r;
    for (uint32_t p = 0; p < r; p++)
      lv[0][p] = job->fit[(size_t)p * 256 + t[p]];
    /* A chunk of width 2c fits from the later level of its two halves. */
    for (unsigned w = 1; w < job->nplans; w++) {
      const uint8_t *half = lv[w - 1];
      for (uint32_t j = 0; j < job->plans[w].nchunks; j++)
        lv[w][j] =
            half[2 * j] > half[2 * j + 1] ? half[2 * j] : half[2 * j + 1];
    }
    for (unsigned w = 0; w < job->nplans; w++)
      add_tensor(&job->plans[w], lv[w], job->saved_bytes[w]);
  }
  for (unsigned i = 0; i < NWIDTHS; i++)
    free(lv[i]);
  return NULL;
}

/* ------------------------------------------------------ naive reference */

/* The definition applied literally, one (T, c) at a time.  Slow: for tests. */
static uint64_t naive_saved(const dataset *ds, const uint64_t *counts,
                            unsigned pct, uint32_t width, uint8_t *mask,
                            uint8_t *bitval) {
  uint32_t r = ds->r, nchunks = r / width;
  memset(mask, 0, r);
  memset(bitval, 0, r);
  for (size_t k = 0; k < (size_t)r * 8; k++) {
    int v = invariant_value(counts[k], ds->n, pct);
    if (v >= 0)
      mask[k / 8] |= (uint8_t)(1u << (k % 8));
    if (v == 1)
      bitval[k / 8] |= (uint8_t)(1u << (k % 8));
  }
  uint64_t total = 0;
  for (uint64_t i = 0; i < ds->n; i++) {
    const uint8_t *t = ds->data + i * r;
    int64_t bits = 0;
    for (uint32_t j = 0; j < nchunks; j++) {
      int fits = 1, pop = 0;
      for (uint32_t b = j * width; b < (j + 1) * width; b++) {
        fits &= (t[b] & mask[b]) == bitval[b];
        for (unsigned k = 0; k < 8; k++)
          pop += (mask[b] >> k) & 1;
      }
      if (fits)
        bits += pop;
    }
    /* bytesSaved = floor((bitsSaved - nchunks) / 8); the tensor stays raw
     * (saves nothing) when that is <= 0. */
    int64_t spare = bits - (int64_t)nchunks;
    int64_t bytes = spare >= 0 ? spare / 8 : -((-spare + 7) / 8);
    if (bytes > 0)
      total += (uint64_t)bytes;
  }
  return total;
}

/* ------------------------------------------------------------ results */

typedef struct {
  unsigned nwidths;
  uint64_t saved[NWIDTHS][NLEVELS];
} sweep;

static unsigned valid_widths(uint32_t r) {
  unsigned nw = 0;
  while (nw < NWIDTHS && r % WIDTHS[nw] == 0)
    nw++;
  return nw; /* widths are powers of two, so the valid ones are a prefix */
}

static int run_fast(const dataset *ds, const uint64_t *counts, unsigned threads,
                    sweep *out) {
  uint32_t r = ds->r;
  int8_t *top = malloc((size_t)r * 8);
  uint8_t *value = malloc((size_t)r * 8);
  uint8_t *fit = malloc((size_t)r * 256);
  width_plan plans[NWIDTHS];
  eval_job *jobs = calloc(threads, sizeof(*jobs));
  int rc = (top && value && fit && jobs) ? 0 : -1;
  memset(plans, 0, sizeof(plans));
  if (rc == 0) {
    invariant_levels(counts, ds->n, r, top, value);
    byte_fit_table(top, value, r, fit);
    for (unsigned w = 0; w < out->nwidths && rc == 0; w++)
      rc = plan_width(top, r, WIDTHS[w], &plans[w]);
  }
  if (rc == 0) {
    for (unsigned t = 0; t < threads; t++) {
      jobs[t] = (eval_job){
          .ds = ds, .fit = fit, .plans = plans, .nplans = out->nwidths};
      split_range(ds->n, threads, t, &jobs[t].lo, &jobs[t].hi);
    }
    run_jobs(eval_worker, jobs, sizeof(*jobs), threads);
    memset(out->saved, 0, sizeof(out->saved));
    for (unsigned t = 0; t < threads; t++) {
      rc |= jobs[t].failed ? -1 : 0;
      for (unsigned w = 0; w < out->nwidths; w++)
        for (int l = 0; l < NLEVELS; l++)
          out->saved[w][l] += jobs[t].saved_bytes[w][l];
    }
  }
  for (unsigned w = 0; w < NWIDTHS; w++)
    free_plan(&plans[w]);
  free(jobs);
  free(fit);
  free(value);
  free(top);
  return rc;
}

/* Per-bit counters the plain way (the fast path derives them from byte
 * histograms), so that --naive checks the counting as well. */
static void naive_counts(const dataset *ds, uint64_t *counts) {
  memset(counts, 0, (size_t)ds->r * 8 * sizeof(uint64_t));
  for (uint64_t i = 0; i < ds->n; i++)
    for (size_t k = 0; k < (size_t)ds->r * 8; k++)
      counts[k] += (ds->data[i * ds->r + k / 8] >> (k % 8)) & 1u;
}

static int run_naive(const dataset *ds, const uint64_t *counts, sweep *out) {
  uint8_t *mask = malloc(ds->r), *bitval = malloc(ds->r);
  if (!mask || !bitval) {
    free(mask);
    free(bitval);
    return -1;
  }
  for (unsigned w = 0; w < out->nwidths; w++)
    for (int l = 0; l < NLEVELS; l++)
      out->saved[w][l] = naive_saved(ds, counts, FIRST_PCT + (unsigned)l,
                                     WIDTHS[w], mask, bitval);
  free(mask);
  free(bitval);
  return 0;
}

/* Best setting: fewest total bytes; ties go to the lower threshold, then to
 * the narrower chunk. */
static void best_setting(const sweep *s, int *best_l, unsigned *best_w) {
  *best_l = 0;
  *best_w = 0;
  for (int l = 0; l < NLEVELS; l++)
    for (unsigned w = 0; w < s->nwidths; w++)
      if (s->saved[w][l] > s->saved[*best_w][*best_l]) {
        *best_l = l;
        *best_w = w;
      }
}

static void report(const options *o, const dataset *ds, const sweep *s) {
  uint64_t total = ds->n * ds->r;
  int bl;
  unsigned bw;
  best_setting(s, &bl, &bw);
  uint64_t comp = total - s->saved[bw][bl];
  double frac = total ? (double)s->saved[bw][bl] / (double)total : 0.0;
  if (o->json) {
    printf("{\"tensor_bytes\":%" PRIu32 ",\"tensors\":%" PRIu64
           ",\"best_threshold\":0.%02d,\"best_chunk_bytes\":%" PRIu32
           ",\"saved_fraction\":%.6f,\"compressed_bytes\":%" PRIu64 "}\n",
           ds->r, ds->n, FIRST_PCT + bl, WIDTHS[bw], frac, comp);
    return;
  }
  printf("file %s: %" PRIu64 " tensors of %" PRIu32 " bytes (%" PRIu64
         " bytes)\n",
         o->path, ds->n, ds->r, total);
  printf("best: threshold 0.%02d, chunk %" PRIu32 " bytes: %" PRIu64
         " bytes, saved fraction %.6f\n",
         FIRST_PCT + bl, WIDTHS[bw], comp, frac);
  printf("saved fraction by threshold (rows) and chunk width (columns)\n");
  printf("   T ");
  for (unsigned w = 0; w < s->nwidths; w++)
    printf("      c=%" PRIu32, WIDTHS[w]);
  printf("\n");
  for (int l = 0; l < NLEVELS; l++) {
    printf("0.%02d ", FIRST_PCT + l);
    for (unsigned w = 0; w < s->nwidths; w++)
      printf("  %7.4f", total ? (double)s->saved[w][l] / (double)total : 0.0);
    printf("\n");
  }
}

int main(int argc, char **argv) {
  options o;
  dataset ds;
  if (parse_args(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  if (map_dataset(o.path, o.tensor_bytes, &ds) != 0)
    return 1;
  if (ds.n == 0) {
    fprintf(stderr,
            "paper_ibp: %s holds no whole tensor of %" PRIu32 " bytes\n",
            o.path, ds.r);
    return 1;
  }
  if ((uint64_t)o.threads > ds.n)
    o.threads = (unsigned)ds.n;
  sweep s = {.nwidths = valid_widths(ds.r)};
  uint64_t *counts = malloc((size_t)ds.r * 8 * sizeof(uint64_t));
  int rc = counts ? 0 : -1;
  if (rc == 0 && o.naive) {
    naive_counts(&ds, counts);
    rc = run_naive(&ds, counts, &s);
  } else if (rc == 0) {
    rc = count_bits(&ds, o.threads, counts);
    if (rc == 0)
      rc = run_fast(&ds, counts, o.threads, &s);
  }
  if (rc != 0)
    fprintf(stderr, "paper_ibp: out of memory\n");
  else
    report(&o, &ds, &s);
  free(counts);
  munmap((void *)ds.data, ds.map_len);
  return rc == 0 ? 0 : 1;
}
