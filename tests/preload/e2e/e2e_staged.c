/*
 * e2e_staged: copies large enough for libibp's staged path (README.md;
 * docs/ARCHITECTURE.md "Staged copies"), every byte that arrives on the
 * device checked.  Registered with IBP_PATH=staged under the h100-pcie5
 * profile, where the gate stages copies of a few hundred KiB and more.
 *
 *   e2e_staged [copies] [--faults]
 *
 * Four regions selected by IBP_REGIONS size= rules, tensors of 4 KiB,
 * 49157 bytes (odd, registered at an unaligned address), 200003 bytes (two
 * in three all zeros: the others' streams are larger than a small staging
 * buffer and read over PCIe inside staged copies) and 1000 bytes, each with
 * a raw tail; cudaHostAlloc (default, write-combined), cudaMallocHost,
 * cudaHostRegister.
 *
 *   1. fixed spans of every region: the whole region, its tensors only,
 *      from and to the middle of a tensor, into the tail, single tensors,
 *      a few MiB across many tensors from inside one -- on every API and
 *      stream in turn (0, a blocking and a non-blocking stream,
 *      cudaStreamPerThread, cudaStreamLegacy);
 *   2. stores into tensors (one byte, a whole tensor, across a tensor
 *      boundary, the tail) and at once the same spans: written tensors are
 *      read raw; again after a verification, when they may be recompressed;
 *   3. four threads, each with its own stream and device buffer, copy
 *      large random spans of the regions at once (the context's one ring of
 *      staging buffers shared by every stream);
 *   4. random copies (e2e_random_copies) of up to 4 MiB, in rounds with
 *      stores into a region between them.
 *
 * The count of phase 4 is argv[1], else IBP_E2E_COPIES, else 100 (30
 * under IBP_TEST_REDUCE, the sanitizer builds).
 *
 * --faults: the shape used under driver fault injection
 * (run_batch_faults.sh): regions registered (no cudaHostAlloc), copies
 * cudaMemcpyDefault only, streams created with a priority, synchronization
 * cudaDeviceSynchronize only, no threads (a repeatable order of calls), the
 * first two regions only (short runs).
 */
#include "e2e_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTREAMS 5
#define DEV_BYTES ((size_t)24 << 20)
#define THREADS 4
#define THREAD_DEV_BYTES ((size_t)8 << 20)
#define THREAD_COPIES 12
#define LARGE_COPY ((size_t)4 << 20)

static e2e_region regions[] = {
    {.name = "s4k",
     .size = (4 << 20) + 1234,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
    {.name = "s49157",
     .size = (3 << 20) + 333,
     .tensor = 49157,
     .alloc = E2E_REGISTER,
     .misalign = 100,
     .data = E2E_BF16},
    {.name = "s200k",
     .size = (3 << 20) + 4321,
     .tensor = 200003,
     .alloc = E2E_MALLOC_HOST,
     .data = E2E_F32},
    {.name = "s1000",
     .size = (2 << 20) + 999,
     .tensor = 1000,
     .alloc = E2E_HOST_ALLOC,
     .flags = cudaHostAllocWriteCombined,
     .keys = "wc=yes", /* write-combined: served only when asked for */
     .data = E2E_BF16},
};
#define NREGIONS ((int)(sizeof regions / sizeof regions[0]))

static int faults;
static int nregions = NREGIONS; /* in use: the first two with --faults */
static cudaStream_t streams[NSTREAMS];

/* Zeros in two of every three tensors of r (host and mirror). */
static void sparse(e2e_region *r) {
  for (size_t at = 0; at < r->size; at += r->tensor)
    if (at / r->tensor % 3) {
      size_t len = r->size - at < r->tensor ? r->size - at : r->tensor;
      memset(r->mirror + at, 0, len);
      memset(r->host + at, 0, len);
    }
}

/* The API and stream of the nth fixed copy: every pair in turn. */
static e2e_api api_of(unsigned n) {
  return faults ? (n % 2 ? E2E_ASYNC_DEFAULT : E2E_SYNC_DEFAULT)
                : (e2e_api)(n % E2E_API_COUNT);
}

static cudaStream_t stream_of(unsigned n) {
  return streams[(n / E2E_API_COUNT) % NSTREAMS];
}

/* Copies [off, off+len) of r (clipped to it) into b, verifying first when
 * b is full. */
static void copy(e2e_batch *b, const e2e_region *r, size_t off, size_t len) {
  static unsigned n;
  if (off >= r->size || len == 0)
    return;
  if (len > r->size - off)
    len = r->size - off;
  if (!e2e_batch_fits(b, len))
    e2e_batch_verify(b, streams, NSTREAMS);
  e2e_batch_copy(b, r, off, len, api_of(n), stream_of(n));
  n++;
}

/* Phase 1 (and 2): the spans of r the staged path cuts differently. */
static void fixed_spans(e2e_batch *b, const e2e_region *r) {
  const size_t T = r->tensor, body = r->size / T * T, n = r->size / T;
  copy(b, r, 0, r->size);                         /* whole, with the tail */
  copy(b, r, 0, body);                            /* tensors only */
  copy(b, r, T / 2 + 3, r->size - T - 5 - T / 2); /* mid to mid */
  copy(b, r, body - 3 * T - 7, r->size);          /* into the tail */
  copy(b, r, body, r->size - body);               /* the tail alone */
  copy(b, r, 0, T);                               /* single tensors */
  copy(b, r, n / 2 * T, T);
  copy(b, r, (n - 1) * T, T);
  copy(b, r, (n - 2) * T + 1, T);         /* two halves */
  copy(b, r, 7 * T + 13, (2 << 20) + 17); /* from inside one, many */
  copy(b, r, r->size / 3 + 1, (2 << 20) + 5);
}

/* Stores new bytes into r (and its mirror) at [off, off+len). */
static void store(e2e_region *r, e2e_rng *rng, size_t off, size_t len) {
  if (off >= r->size)
    return;
  if (len > r->size - off)
    len = r->size - off;
  e2e_fill(rng, r->mirror + off, len, r->tensor, r->data);
  memcpy(r->host + off, r->mirror + off, len);
}

/* Phase 2: writes, then the spans at once (dirty tensors read raw), then
 * again after a verification. */
static void written_spans(e2e_batch *b, e2e_region *r, e2e_rng *rng) {
  const size_t T = r->tensor, n = r->size / T;
  store(r, rng, 5 * T + 17, 1);           /* one byte */
  store(r, rng, n / 2 * T, T);            /* a whole tensor */
  store(r, rng, (n / 3 + 1) * T - 9, 20); /* across a boundary */
  store(r, rng, r->size - 3, 3);          /* the tail */
  fixed_spans(b, r);
  e2e_batch_verify(b, streams, NSTREAMS);
  fixed_spans(b, r);
}

/* ---- phase 3: threads ---------------------------------------------------- */

typedef struct worker {
  pthread_t thread;
  int index;
  cudaStream_t stream;
  int failed;
} worker;

static void *thread_main(void *arg) {
  worker *w = arg;
  char label[32];
  snprintf(label, sizeof label, "thread %d: ", w->index);
  e2e_batch b;
  e2e_batch_init(&b, THREAD_DEV_BYTES, 1 + (uint64_t)w->index);
  b.label = label;
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 100 + (uint64_t)w->index);
  for (int i = 0; i < THREAD_COPIES && !w->failed; i++) {
    const e2e_region *r = &regions[e2e_rng_below(&rng, (uint64_t)nregions)];
    size_t len = (256 << 10) + (size_t)e2e_rng_below(&rng, 2 << 20);
    if (len > r->size)
      len = r->size;
    size_t off = (size_t)e2e_rng_below(&rng, r->size - len + 1);
    if (!e2e_batch_fits(&b, len))
      w->failed |= e2e_batch_verify(&b, &w->stream, 1);
    e2e_api api = i % 3 ? E2E_ASYNC_H2D : E2E_SYNC_DEFAULT;
    e2e_batch_copy(&b, r, off, len, api, w->stream);
  }
  w->failed |= e2e_batch_verify(&b, &w->stream, 1);
  e2e_batch_destroy(&b);
  return NULL;
}

static void threads(void) {
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.index = i};
    E2E_CK(cudaStreamCreateWithFlags(&w[i].stream, i % 2 ? cudaStreamNonBlocking
                                                         : cudaStreamDefault));
  }
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&w[i].thread, NULL, thread_main, &w[i]) != 0)
      e2e_die("pthread_create failed");
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].thread, NULL);
    E2E_CK(cudaStreamDestroy(w[i].stream));
  }
}

/* ---- phase 4: random copies ---------------------------------------------- */

static void random_rounds(e2e_batch *b, unsigned long copies, e2e_rng *rng) {
  e2e_random_plan plan = {.regions = regions,
                          .nregions = nregions,
                          .streams = streams,
                          .nstreams = NSTREAMS,
                          .default_kind_only = faults,
                          .copies = 16,
                          .max_copy = LARGE_COPY};
  for (unsigned long done = 0; done < copies; done += plan.copies) {
    if (copies - done < plan.copies)
      plan.copies = copies - done;
    if (e2e_random_copies(b, &plan, rng))
      return;
    /* an eighth of a region's tensors, or a few bytes of one */
    e2e_region *r = &regions[e2e_rng_below(rng, (uint64_t)nregions)];
    size_t len = e2e_rng_pct(rng, 50) ? r->size / 8 : e2e_rng_len(rng, 64);
    store(r, rng, (size_t)e2e_rng_below(rng, r->size - len), len);
  }
}

int main(int argc, char **argv) {
  e2e_begin("e2e_staged");
  unsigned long copies =
      e2e_env_count("IBP_E2E_COPIES", E2E_DEFAULT_COPIES / 10);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--faults") == 0)
      faults = 1;
    else if (strtoul(argv[i], NULL, 10) > 0)
      copies = strtoul(argv[i], NULL, 10);
    else
      e2e_die("usage: e2e_staged [copies] [--faults]");
  }
  e2e_note("%lu random copies (argv[1] or IBP_E2E_COPIES)%s", copies,
           faults ? ", fault-injection shape" : "");
  if (faults)
    for (int i = 0; i < NREGIONS; i++) {
      nregions = 2;
      regions[i].alloc = E2E_REGISTER;
      regions[i].flags = 0;
    }
  e2e_regions_env(regions, nregions);

  e2e_batch batch;
  e2e_batch_init(&batch, DEV_BYTES, 0);
  batch.device_sync_only = faults;
  streams[0] = 0;
  streams[3] = cudaStreamPerThread;
  streams[4] = cudaStreamLegacy;
  for (int i = 1; i <= 2; i++)
    E2E_CK(cudaStreamCreateWithPriority(
        &streams[i], i % 2 ? cudaStreamNonBlocking : cudaStreamDefault,
        -(i % 2)));

  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 1);
  for (int i = 0; i < nregions; i++) {
    e2e_region_alloc(&regions[i]);
    e2e_region_fill(&regions[i], &rng);
  }
  if (nregions > 2)
    sparse(&regions[2]);

  for (int i = 0; i < nregions; i++)
    fixed_spans(&batch, &regions[i]);
  int bad = e2e_batch_verify(&batch, streams, NSTREAMS);
  for (int i = 0; i < nregions && !bad; i++) {
    written_spans(&batch, &regions[i], &rng);
    bad = e2e_batch_verify(&batch, streams, NSTREAMS);
  }
  if (!bad && !faults)
    threads();
  if (!bad && !e2e_failures())
    random_rounds(&batch, copies, &rng);
  for (int i = 0; i < nregions; i++)
    e2e_region_check_host(&regions[i], "after the copies");

  for (int i = 0; i < nregions; i++)
    e2e_region_free(&regions[i]);
  for (int i = 1; i <= 2; i++)
    E2E_CK(cudaStreamDestroy(streams[i]));
  e2e_batch_destroy(&batch);
  return e2e_end();
}
