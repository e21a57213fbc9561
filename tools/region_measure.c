/* Exact compressed size of a region, measured by worker threads
 * (see region_measure.h). */
#include "region_measure.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cli.h"

#define BATCH_BYTES (4u << 20) /* tensors handed out at a time */

typedef struct measure_job {
  const ibp_params *p;
  const uint8_t *data;
  uint64_t tensors;
  uint64_t batch;   /* tensors per batch */
  uint64_t batches; /* ceil(tensors / batch) */
  atomic_uint_fast64_t next_batch;
  atomic_uint_fast64_t tensors_done;
  atomic_uint_fast64_t compressed_bytes;
  atomic_uint_fast64_t tensors_compressed;
} measure_job;

/* Measures one batch; returns 0 when no batch was left. */
static int measure_batch(measure_job *job) {
  uint64_t b = atomic_fetch_add(&job->next_batch, 1);
  if (b >= job->batches)
    return 0;
  uint64_t first = b * job->batch;
  uint64_t end = first + job->batch;
  if (end > job->tensors)
    end = job->tensors;
  uint32_t r = job->p->tensor_bytes;
  uint64_t bytes = 0, compressed = 0;
  for (uint64_t i = first; i < end; i++) {
    size_t len = ibp_compressed_size(job->p, job->data + i * r);
    bytes += len;
    compressed += len < r;
  }
  atomic_fetch_add(&job->compressed_bytes, bytes);
  atomic_fetch_add(&job->tensors_compressed, compressed);
  atomic_fetch_add(&job->tensors_done, end - first);
  return 1;
}

static void *worker(void *arg) {
  while (measure_batch(arg))
    ;
  return NULL;
}

ibp_status region_measure_run(const ibp_params *p, const void *data,
                              uint64_t bytes, unsigned threads,
                              measure_progress_fn progress, void *ctx,
                              region_measure *out) {
  uint32_t r = p->tensor_bytes;
  measure_job job = {.p = p, .data = data, .tensors = bytes / r};
  job.batch = BATCH_BYTES / r > 0 ? BATCH_BYTES / r : 1;
  job.batches = (job.tensors + job.batch - 1) / job.batch;
  atomic_init(&job.next_batch, 0);
  atomic_init(&job.tensors_done, 0);
  atomic_init(&job.compressed_bytes, 0);
  atomic_init(&job.tensors_compressed, 0);

  unsigned nthreads = cli_threads(threads);
  pthread_t *tids = calloc(nthreads, sizeof *tids);
  if (tids == NULL)
    return IBP_ERR_NO_MEMORY;
  unsigned started = 0;
  ibp_status st = IBP_OK;
  for (; started + 1 < nthreads; started++) {
    if (pthread_create(&tids[started], NULL, worker, &job) != 0) {
      st = IBP_ERR_THREAD;
      atomic_store(&job.next_batch, job.batches); /* stop the others */
      break;
    }
  }
  /* The calling thread works too, and reports progress between batches. */
  while (st == IBP_OK && measure_batch(&job)) {
    if (progress != NULL)
      progress(ctx, atomic_load(&job.tensors_done) * r);
  }
  for (unsigned i = 0; i < started; i++)
    pthread_join(tids[i], NULL);
  free(tids);
  if (st != IBP_OK)
    return st;

  out->tensors = job.tensors;
  out->tail_bytes = bytes % r;
  out->tensors_compressed = atomic_load(&job.tensors_compressed);
  out->compressed_bytes = atomic_load(&job.compressed_bytes) + out->tail_bytes;
  return IBP_OK;
}
