/* Synthetic float32 weight rows (see synth_data.h). */
#include "synth_data.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define ROW_BYTES (SYNTH_ROW_FLOATS * 4u)

typedef struct synth_job {
  uint8_t *dst;
  uint64_t bytes;
  uint64_t seed;
  uint64_t first_row, end_row;
} synth_job;

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so that log() is finite. */
static double uniform(uint64_t *state) {
  return (double)((splitmix64(state) >> 11) + 1) * 0x1.0p-53;
}

static void put_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(u >> (8 * i));
}

static void fill_row(uint8_t *row, uint64_t seed, uint64_t r) {
  uint64_t state = seed ^ (r * 0xd1342543de82ef95ull);
  splitmix64(&state);
  double std =
      SYNTH_STD_MIN * pow(SYNTH_STD_MAX / SYNTH_STD_MIN, uniform(&state));
  for (int i = 0; i < SYNTH_ROW_FLOATS; i += 2) {
    /* Box-Muller: two independent normal values per pair of uniforms. */
    double rad = sqrt(-2.0 * log(uniform(&state)));
    double ang = 6.283185307179586 * uniform(&state);
    put_f32(row + 4 * i, (float)(std * rad * cos(ang)));
    put_f32(row + 4 * i + 4, (float)(std * rad * sin(ang)));
  }
}

static void *synth_worker(void *arg) {
  synth_job *j = arg;
  uint8_t row[ROW_BYTES];
  for (uint64_t r = j->first_row; r < j->end_row; r++) {
    uint64_t off = r * ROW_BYTES;
    if (off + ROW_BYTES <= j->bytes) {
      fill_row(j->dst + off, j->seed, r);
    } else {
      fill_row(row, j->seed, r);
      memcpy(j->dst + off, row, (size_t)(j->bytes - off));
    }
  }
  return NULL;
}

void synth_floats(void *dst, uint64_t bytes, uint64_t seed, unsigned threads) {
  uint64_t rows = (bytes + ROW_BYTES - 1) / ROW_BYTES;
  unsigned n = cli_threads(threads);
  synth_job *jobs = calloc(n, sizeof *jobs);
  pthread_t *tids = calloc(n, sizeof *tids);
  if (jobs == NULL || tids == NULL) {
    synth_job all = {dst, bytes, seed, 0, rows};
    synth_worker(&all);
    n = 0;
  }
  unsigned started = 0;
  for (unsigned t = 0; t < n; t++) {
    jobs[t] = (synth_job){dst, bytes, seed, rows * t / n, rows * (t + 1) / n};
    /* The last part, or the rest when no thread starts, is done here. */
    if (t + 1 == n ||
        pthread_create(&tids[t], NULL, synth_worker, &jobs[t]) != 0) {
      jobs[t].end_row = rows;
      synth_worker(&jobs[t]);
      break;
    }
    started++;
  }
  for (unsigned t = 0; t < started; t++)
    pthread_join(tids[t], NULL);
  free(jobs);
  free(tids);
}
