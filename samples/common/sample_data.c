/* Generated data, data files and the checksum of the samples (sample.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sample.h"

#define MAX_THREADS 64

uint64_t sample_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double sample_uniform(uint64_t *state) {
  return (double)((sample_rand(state) >> 11) + 1) * 0x1.0p-53;
}

void *sample_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL) {
    fprintf(stderr, "%s: cannot allocate %zu bytes of host memory\n",
            sample_prog, bytes);
    exit(SAMPLE_EXIT_USAGE);
  }
  return p;
}

sample_dtype sample_dtype_parse(const char *s) {
  if (strcmp(s, "f32") == 0)
    return SAMPLE_F32;
  if (strcmp(s, "bf16") == 0)
    return SAMPLE_BF16;
  sample_usage_error("--dtype must be f32 or bf16 (got '%s')", s);
}

const char *sample_dtype_name(sample_dtype t) {
  return t == SAMPLE_F32 ? "f32" : t == SAMPLE_BF16 ? "bf16" : "fp16";
}

size_t sample_dtype_size(sample_dtype t) {
  return t == SAMPLE_F32 ? 4 : 2;
}

/* IEEE half of a finite float, rounded to nearest even: subnormals below
 * 2^-14, infinity from 65520 on. */
static uint32_t half_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, mag = u & 0x7fffffffu;
  if (mag >= 0x47800000u) /* 2^16 and above */
    return sign | 0x7c00u;
  if (mag < 0x38800000u) /* below 2^-14: units of 2^-24, exact scaling */
    return sign | (uint32_t)lrintf(fabsf(f) * 16777216.0f);
  mag -= 0x38000000u; /* exponent bias 127 -> 15 */
  return sign | ((mag + 0xfffu + ((mag >> 13) & 1u)) >> 13);
}

/* Little-endian store of a float32, or of its bfloat16 or float16 (round to
 * nearest even; the values are finite). */
static void put_value(uint8_t *p, double v, sample_dtype t) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (t != SAMPLE_F32) {
    u = t == SAMPLE_BF16 ? (u + 0x7fffu + ((u >> 16) & 1u)) >> 16 : half_of(f);
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    return;
  }
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(u >> (8 * i));
}

/* Value v at dst + off of a row cut at `len` bytes: a data size that is
 * not a multiple of the element keeps the first bytes of the last one. */
static void put_at(uint8_t *dst, size_t len, size_t off, double v,
                   sample_dtype t) {
  size_t esize = sample_dtype_size(t);
  uint8_t last[4];
  if (off + esize <= len) {
    put_value(dst + off, v, t);
  } else {
    put_value(last, v, t);
    memcpy(dst + off, last, len - off);
  }
}

/* The random stream of row number r, one value drawn. */
static uint64_t row_state(uint64_t seed, uint64_t r) {
  uint64_t state = seed ^ (r * 0xd1342543de82ef95ull);
  sample_rand(&state);
  return state;
}

/* SAMPLE_DIST_NORMAL: `len` (<= row_bytes) bytes of row number r. */
static void fill_normal_row(uint8_t *dst, size_t len, uint64_t r,
                            const sample_gen *g, uint64_t sd_period) {
  uint64_t state = row_state(g->seed, r);
  double u = sample_uniform(&state);
  if (sd_period > 0) { /* the first draw of row r % sd_period */
    uint64_t head = row_state(g->seed, r % sd_period);
    u = sample_uniform(&head);
  }
  double sd = g->sd_min * pow(g->sd_max / g->sd_min, u);
  size_t esize = sample_dtype_size(g->dtype);
  double spare = 0.0;
  for (size_t off = 0, k = 0; off < len; off += esize, k++) {
    double v = spare;
    if (k % 2 == 0) {
      /* Box-Muller: two independent normal values per two uniforms. */
      double rad = sqrt(-2.0 * log(sample_uniform(&state)));
      double ang = 6.283185307179586 * sample_uniform(&state);
      v = sd * rad * cos(ang);
      spare = sd * rad * sin(ang);
    }
    put_at(dst, len, off, v, g->dtype);
  }
}

/* SAMPLE_DIST_TFIDF: `len` bytes of row number r; acc has room for the
 * row's values. */
static void fill_tfidf_row(uint8_t *dst, size_t len, uint64_t r,
                           const sample_gen *g, double density, double *acc) {
  size_t esize = sample_dtype_size(g->dtype), dim = g->row_bytes / esize;
  uint64_t state = row_state(g->seed, r);
  double mean = density * (double)dim;
  uint64_t span = mean < 1.0 ? 2 : (uint64_t)(2.0 * mean);
  uint64_t words = 1 + sample_rand(&state) % span;
  memset(acc, 0, dim * sizeof *acc);
  for (uint64_t i = 0; i < words; i++) { /* term counts */
    size_t w = (size_t)((double)dim * pow(sample_uniform(&state), 3.0));
    acc[w < dim ? w : dim - 1] += 1.0;
  }
  double norm = 0.0;
  for (size_t k = 0; k < dim; k++) {
    if (acc[k] > 0.0) { /* rarer words (higher k) weigh more */
      acc[k] = (1.0 + log(acc[k])) * (1.0 + log(1.0 + (double)k) / 1.5);
      norm += acc[k] * acc[k];
    }
  }
  norm = sqrt(norm);
  for (size_t off = 0, k = 0; off < len; off += esize, k++)
    put_at(dst, len, off, acc[k] / norm, g->dtype);
}

typedef struct gen_job {
  uint8_t *dst;
  size_t bytes;
  const sample_gen *g;
  const sample_gen_ext *x;
  uint64_t first, end; /* rows */
} gen_job;

static void *gen_worker(void *arg) {
  gen_job *j = arg;
  const sample_gen *g = j->g;
  const sample_gen_ext *x = j->x;
  size_t rb = g->row_bytes;
  double *acc = NULL;
  if (x->dist == SAMPLE_DIST_TFIDF)
    acc = sample_alloc(rb / sample_dtype_size(g->dtype) * sizeof *acc);
  for (uint64_t r = j->first; r < j->end; r++) {
    size_t off = (size_t)r * rb;
    size_t len = j->bytes - off < rb ? j->bytes - off : rb;
    if (acc != NULL)
      fill_tfidf_row(j->dst + off, len, x->first_row + r, g, x->density, acc);
    else
      fill_normal_row(j->dst + off, len, x->first_row + r, g, x->sd_period);
  }
  free(acc);
  return NULL;
}

void sample_generate(void *dst, size_t bytes, const sample_gen *g) {
  static const sample_gen_ext plain = {SAMPLE_DIST_NORMAL, 0.0, 0, 0};
  sample_generate_ext(dst, bytes, g, &plain);
}

void sample_generate_ext(void *dst, size_t bytes, const sample_gen *g,
                         const sample_gen_ext *x) {
  uint64_t rows = (bytes + g->row_bytes - 1) / g->row_bytes;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (unsigned)cpus;
  if (rows < 64 * (uint64_t)n)
    n = 1;
  gen_job jobs[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int joined[MAX_THREADS] = {0};
  for (unsigned t = 0; t < n; t++)
    jobs[t] = (gen_job){dst, bytes, g, x, rows * t / n, rows * (t + 1) / n};
  for (unsigned t = 1; t < n; t++) {
    joined[t] = pthread_create(&tids[t], NULL, gen_worker, &jobs[t]) == 0;
    if (!joined[t])
      gen_worker(&jobs[t]); /* no thread: do its rows here */
  }
  gen_worker(&jobs[0]);
  for (unsigned t = 1; t < n; t++) {
    if (joined[t])
      pthread_join(tids[t], NULL);
  }
}

uint64_t sample_fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* ---- files --------------------------------------------------------------- */

static void file_error(const char *path, const char *why) {
  fprintf(stderr, "%s: %s: %s\n", sample_prog, path, why);
  exit(SAMPLE_EXIT_USAGE);
}

size_t sample_file_size(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    file_error(path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    file_error(path, "not a regular file");
  if (st.st_size == 0)
    file_error(path, "file is empty");
  return (size_t)st.st_size;
}

void sample_file_read(const char *path, void *dst, size_t bytes) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    file_error(path, strerror(errno));
  for (size_t done = 0; done < bytes;) {
    ssize_t n = read(fd, (uint8_t *)dst + done, bytes - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      file_error(path,
                 n < 0 ? strerror(errno) : "file is shorter than expected");
    done += (size_t)n;
  }
  close(fd);
}

void sample_file_write(const char *path, const void *src, size_t bytes) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    file_error(path, strerror(errno));
  for (size_t done = 0; done < bytes;) {
    ssize_t n = write(fd, (const uint8_t *)src + done, bytes - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      file_error(path, strerror(errno));
    done += (size_t)n;
  }
  if (close(fd) != 0)
    file_error(path, strerror(errno));
}
