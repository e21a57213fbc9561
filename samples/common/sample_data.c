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

/* Uniform in (0, 1]: never 0, so that log() is finite. */
static double uniform(uint64_t *state) {
  return (double)((sample_rand(state) >> 11) + 1) * 0x1.0p-53;
}

sample_dtype sample_dtype_parse(const char *s) {
  if (strcmp(s, "f32") == 0)
    return SAMPLE_F32;
  if (strcmp(s, "bf16") == 0)
    return SAMPLE_BF16;
  sample_usage_error("--dtype must be f32 or bf16 (got '%s')", s);
}

const char *sample_dtype_name(sample_dtype t) {
  return t == SAMPLE_F32 ? "f32" : "bf16";
}

size_t sample_dtype_size(sample_dtype t) {
  return t == SAMPLE_F32 ? 4 : 2;
}

/* Little-endian store of a float32, or of its bfloat16 (round to nearest
 * even; the values are finite). */
static void put_value(uint8_t *p, double v, sample_dtype t) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (t == SAMPLE_BF16) {
    u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    return;
  }
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(u >> (8 * i));
}

/* One row: `len` (<= row_bytes) bytes of row number r. */
static void fill_row(uint8_t *dst, size_t len, uint64_t r,
                     const sample_gen *g) {
  uint64_t state = g->seed ^ (r * 0xd1342543de82ef95ull);
  sample_rand(&state);
  double sd = g->sd_min * pow(g->sd_max / g->sd_min, uniform(&state));
  size_t esize = sample_dtype_size(g->dtype);
  double spare = 0.0;
  uint8_t last[4];
  for (size_t off = 0, k = 0; off < len; off += esize, k++) {
    double v = spare;
    if (k % 2 == 0) {
      /* Box-Muller: two independent normal values per two uniforms. */
      double rad = sqrt(-2.0 * log(uniform(&state)));
      double ang = 6.283185307179586 * uniform(&state);
      v = sd * rad * cos(ang);
      spare = sd * rad * sin(ang);
    }
    if (off + esize <= len) {
      put_value(dst + off, v, g->dtype);
    } else { /* a data size that is not a multiple of the element */
      put_value(last, v, g->dtype);
      memcpy(dst + off, last, len - off);
    }
  }
}

typedef struct gen_job {
  uint8_t *dst;
  size_t bytes;
  const sample_gen *g;
  uint64_t first, end; /* rows */
} gen_job;

static void *gen_worker(void *arg) {
  gen_job *j = arg;
  size_t rb = j->g->row_bytes;
  for (uint64_t r = j->first; r < j->end; r++) {
    size_t off = (size_t)r * rb;
    size_t len = j->bytes - off < rb ? j->bytes - off : rb;
    fill_row(j->dst + off, len, r, j->g);
  }
  return NULL;
}

void sample_generate(void *dst, size_t bytes, const sample_gen *g) {
  uint64_t rows = (bytes + g->row_bytes - 1) / g->row_bytes;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (unsigned)cpus;
  if (rows < 64 * (uint64_t)n)
    n = 1;
  gen_job jobs[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int joined[MAX_THREADS] = {0};
  for (unsigned t = 0; t < n; t++)
    jobs[t] = (gen_job){dst, bytes, g, rows * t / n, rows * (t + 1) / n};
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

/* ---- files ----------------------------------------------------------------
 */

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
