/*
 * e2e_threads: 8 threads copy random ranges of one region at the same time,
 * each on its own stream (and, in the per-thread default stream build, on
 * its default stream 0), every byte checked (README.md).
 *
 *   e2e_threads [copies per thread]   (default IBP_E2E_COPIES / 8, or 125)
 *
 * The threads start together after a barrier, so their first copies race
 * for the region while it is being compressed and set up.  Then each thread
 * owns one eighth of the region (boundaries not on pages or tensors, so
 * neighbours share pages) and writes into it (memcpy, read(2)) and copies
 * from it at the same time as the others: concurrent write faults on shared
 * pages must never leave a stale byte.
 */
#include "e2e_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 8
#define DEV_BYTES ((size_t)1 << 20)

static e2e_region region = {.name = "threads",
                            .size = (6 << 20) + 4444,
                            .tensor = 4096,
                            .alloc = E2E_HOST_ALLOC,
                            .data = E2E_F32};
static pthread_barrier_t start;
static unsigned long per_thread;

/* Writes into this thread's slice [lo, hi) of the region and copies from
 * it, `rounds` times; the other threads do the same next door. */
static void write_slice(unsigned id, e2e_batch *b, e2e_rng *rng, cudaStream_t s,
                        int rounds) {
  e2e_region *r = &region;
  size_t slice = r->size / NTHREADS, lo = id * slice;
  size_t hi = id == NTHREADS - 1 ? r->size : lo + slice;
  unsigned char *next = malloc(3 * r->tensor);
  E2E_SYS(next != NULL);
  for (int i = 0; i < rounds; i++) {
    size_t len = 1 + (size_t)e2e_rng_below(rng, 3 * r->tensor);
    size_t off = lo + (size_t)e2e_rng_below(rng, hi - lo - len + 1);
    e2e_fill(rng, next, len, r->tensor, r->data);
    if (i % 2) {
      memcpy(r->host + off, next, len);
    } else {
      int fd = e2e_temp_file(next, len);
      if (read(fd, r->host + off, len) != (ssize_t)len)
        e2e_fail("thread %u: read(2) into the region failed", id);
      close(fd);
    }
    memcpy(r->mirror + off, next, len);
    size_t clo = off > lo + 5000 ? off - 5000 : lo;
    size_t chi = off + len + 5000 < hi ? off + len + 5000 : hi;
    e2e_batch_copy(b, r, clo, chi - clo, (e2e_api)(i % E2E_API_COUNT), s);
    e2e_batch_verify(b, &s, 1);
  }
  free(next);
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  char label[32];
  snprintf(label, sizeof label, "thread %u: ", id);
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 1 + id);
  b.label = label;
  cudaStream_t streams[2] = {0, 0};
  E2E_CK(cudaStreamCreateWithFlags(&streams[1], id % 2 ? cudaStreamNonBlocking
                                                       : cudaStreamDefault));
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
  int nstreams = 2; /* 0 is this thread's own default stream */
#else
  int nstreams = 1; /* 0 would be the legacy stream shared by all */
  streams[0] = streams[1];
#endif
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 100 + id);
  e2e_random_plan plan = {.regions = &region,
                          .nregions = 1,
                          .streams = streams,
                          .nstreams = nstreams,
                          .copies = per_thread};
  pthread_barrier_wait(&start);
  e2e_random_copies(&b, &plan, &rng);
  pthread_barrier_wait(&start);
  write_slice(id, &b, &rng, streams[1], 40);
  E2E_CK(cudaStreamDestroy(streams[1]));
  e2e_batch_destroy(&b);
  return NULL;
}

int main(int argc, char **argv) {
  e2e_begin("e2e_threads");
  per_thread =
      argc > 1 ? strtoul(argv[1], NULL, 10)
               : e2e_env_count("IBP_E2E_COPIES", E2E_DEFAULT_COPIES) / NTHREADS;
  e2e_note("%d threads x %lu copies", NTHREADS, per_thread);
  e2e_regions_env(&region, 1);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 3);
  e2e_region_alloc(&region);
  e2e_region_fill(&region, &rng);

  pthread_t tids[NTHREADS];
  pthread_barrier_init(&start, NULL, NTHREADS);
  for (unsigned i = 0; i < NTHREADS; i++)
    if (pthread_create(&tids[i], NULL, worker, (void *)(uintptr_t)i) != 0)
      e2e_die("pthread_create failed");
  for (unsigned i = 0; i < NTHREADS; i++)
    pthread_join(tids[i], NULL);
  pthread_barrier_destroy(&start);
  e2e_region_check_host(&region, "at the end");
  e2e_region_free(&region);
  return e2e_end();
}
