/*
 * e2e_multigpu: one region served to several devices (README.md).  Run with
 * SIMCUDA_DEVICES=N (N >= 2) on the simulated driver; skips with one device.
 *
 *   1. every device at once: two threads per device, each with its own
 *      stream and device buffer, make random copies from the same region
 *      (the first copies race for its compression and for each device's
 *      setup);
 *   2. switching devices: one thread copies from the region on device 0,
 *      1, ..., N-1, 0, ... (cudaSetDevice before each copy), with writes
 *      into the region between rounds;
 *   3. freeing a region while another device copies from it: a thread on
 *      the last device queues copies from a second region on its stream,
 *      the main thread (device 0) frees that region meanwhile -- the free
 *      waits for the queued copies, as cudaFreeHost does -- and the thread
 *      then verifies what they brought;
 *   4. resetting the device whose copy started a region's compression
 *      (cudaDeviceReset) while another device, whose context owns the
 *      region's memory, goes on copying from it.
 * Every byte that reaches a device is checked; peer access is enabled
 * between every pair and a peer copy moves one device's buffer to another.
 */
#include "e2e_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_DEVICE 2
#define MAX_DEVICES 8
#define DEV_BYTES ((size_t)1 << 20)

static e2e_region shared_region = {.name = "multi",
                                   .size = (5 << 20) + 1234,
                                   .tensor = 4096,
                                   .alloc = E2E_HOST_ALLOC,
                                   .flags = cudaHostAllocPortable |
                                            cudaHostAllocMapped,
                                   .data = E2E_F32};
static e2e_region doomed = {.name = "doomed",
                            .size = 3 << 20,
                            .tensor = 2048,
                            .alloc = E2E_HOST_ALLOC,
                            .flags = cudaHostAllocPortable,
                            .data = E2E_BF16};
static e2e_region late = {.name = "late",
                          .size = (2 << 20) + 100,
                          .tensor = 1024,
                          .alloc = E2E_HOST_ALLOC,
                          .flags = cudaHostAllocPortable,
                          .data = E2E_F32};
static int ndev;
static unsigned long copies;
static pthread_barrier_t start;

/* ---- 1. every device at once --------------------------------------------- */

static void *device_worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  int dev = (int)(id % (unsigned)ndev);
  E2E_CK(cudaSetDevice(dev));
  char label[48];
  snprintf(label, sizeof label, "device %d thread %u: ", dev, id);
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 1 + id);
  b.label = label;
  cudaStream_t s;
  E2E_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 100 + id);
  e2e_random_plan plan = {.regions = &shared_region,
                          .nregions = 1,
                          .streams = &s,
                          .nstreams = 1,
                          .copies = copies};
  pthread_barrier_wait(&start);
  e2e_random_copies(&b, &plan, &rng);
  E2E_CK(cudaStreamDestroy(s));
  e2e_batch_destroy(&b);
  return NULL;
}

static void every_device_at_once(void) {
  unsigned n = (unsigned)ndev * PER_DEVICE;
  pthread_t tids[MAX_DEVICES * PER_DEVICE];
  pthread_barrier_init(&start, NULL, n);
  for (unsigned i = 0; i < n; i++)
    if (pthread_create(&tids[i], NULL, device_worker, (void *)(uintptr_t)i))
      e2e_die("pthread_create failed");
  for (unsigned i = 0; i < n; i++)
    pthread_join(tids[i], NULL);
  pthread_barrier_destroy(&start);
}

/* ---- 2. switching devices ------------------------------------------------ */

static void switching(e2e_rng *rng) {
  e2e_batch b[MAX_DEVICES];
  for (int d = 0; d < ndev; d++) {
    E2E_CK(cudaSetDevice(d));
    e2e_batch_init(&b[d], DEV_BYTES, 50 + (uint64_t)d);
  }
  e2e_region *r = &shared_region;
  for (int round = 0; round < 6; round++) {
    for (int d = 0; d < ndev; d++) {
      E2E_CK(cudaSetDevice(d));
      for (int i = 0; i < 4; i++) {
        size_t len = e2e_rng_len(rng, E2E_MAX_COPY);
        size_t off = (size_t)e2e_rng_below(rng, r->size - len + 1);
        if (!e2e_batch_fits(&b[d], len))
          e2e_batch_verify(&b[d], NULL, 0);
        e2e_batch_copy(&b[d], r, off, len, (e2e_api)(i % E2E_API_COUNT), 0);
      }
      e2e_batch_verify(&b[d], NULL, 0);
    }
    /* new bytes over a few tensors: every device must see them */
    size_t len = 3 * r->tensor + 17;
    size_t off = (size_t)e2e_rng_below(rng, r->size - len);
    e2e_fill(rng, r->host + off, len, r->tensor, r->data);
    memcpy(r->mirror + off, r->host + off, len);
  }
  for (int d = 0; d < ndev; d++) {
    E2E_CK(cudaSetDevice(d));
    e2e_batch_destroy(&b[d]);
  }
  E2E_CK(cudaSetDevice(0));
}

/* ---- 3. free while another device copies --------------------------------- */

static void *doomed_worker(void *arg) {
  (void)arg;
  E2E_CK(cudaSetDevice(ndev - 1));
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, 77);
  b.label = "doomed region's copier: ";
  cudaStream_t s;
  E2E_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 78);
  for (int round = 0; round < 3; round++) { /* served: ready on this device */
    for (int i = 0; i < 8; i++) {
      size_t len = e2e_rng_len(&rng, 64 << 10);
      size_t off = (size_t)e2e_rng_below(&rng, doomed.size - len + 1);
      e2e_batch_copy(&b, &doomed, off, len, E2E_ASYNC_H2D, s);
    }
    if (round < 2)
      e2e_batch_verify(&b, &s, 1);
  }
  pthread_barrier_wait(&start); /* copies queued: free it now */
  pthread_barrier_wait(&start); /* freed */
  e2e_batch_verify(&b, &s, 1);
  E2E_CK(cudaStreamDestroy(s));
  e2e_batch_destroy(&b);
  return NULL;
}

static void free_while_copying(void) {
  pthread_t tid;
  pthread_barrier_init(&start, NULL, 2);
  if (pthread_create(&tid, NULL, doomed_worker, NULL))
    e2e_die("pthread_create failed");
  pthread_barrier_wait(&start);
  E2E_CK(cudaSetDevice(0));
  E2E_CK(cudaFreeHost(doomed.host));
  doomed.host = NULL;
  pthread_barrier_wait(&start);
  pthread_join(tid, NULL);
  pthread_barrier_destroy(&start);
  free(doomed.mirror);
  doomed.mirror = NULL;
}

/* ---- 4. reset one device, copy on another -------------------------------- */

/* A few random copies of `late` on the current device, verified. */
static void copy_late(e2e_rng *rng, uint64_t stream_no) {
  e2e_batch b;
  e2e_batch_init(&b, DEV_BYTES, stream_no);
  for (int i = 0; i < 12; i++) {
    size_t len = e2e_rng_len(rng, 128 << 10);
    size_t off = (size_t)e2e_rng_below(rng, late.size - len + 1);
    if (!e2e_batch_fits(&b, len))
      e2e_batch_verify(&b, NULL, 0);
    e2e_batch_copy(&b, &late, off, len, (e2e_api)(i % E2E_API_COUNT), 0);
  }
  e2e_batch_verify(&b, NULL, 0);
  e2e_batch_destroy(&b);
}

static void reset_one_device(e2e_rng *rng) {
  E2E_CK(cudaSetDevice(1)); /* the region's memory: device 1's context */
  e2e_region_alloc(&late);
  e2e_region_fill(&late, rng);
  E2E_CK(cudaSetDevice(0)); /* compressed for device 0's first copy */
  copy_late(rng, 90);
  E2E_CK(cudaSetDevice(1));
  copy_late(rng, 91);
  E2E_CK(cudaSetDevice(0));
  E2E_CK(cudaDeviceReset());
  E2E_CK(cudaSetDevice(1));
  copy_late(rng, 92);
  e2e_region_check_host(&late, "after device 0's reset");
  e2e_region_free(&late);
  E2E_CK(cudaSetDevice(0));
}

/* ---- peer access and a peer copy ----------------------------------------- */

static void peers(e2e_rng *rng) {
  for (int a = 0; a < ndev; a++) {
    E2E_CK(cudaSetDevice(a));
    for (int b = 0; b < ndev; b++) {
      int can = -1;
      E2E_CK(cudaDeviceCanAccessPeer(&can, a, b));
      if (can != (a != b))
        e2e_fail("cudaDeviceCanAccessPeer(%d, %d) = %d", a, b, can);
      if (a != b)
        E2E_CK(cudaDeviceEnablePeerAccess(b, 0));
    }
  }
  unsigned char *d0, *d1, *back = malloc(DEV_BYTES);
  E2E_SYS(back != NULL);
  E2E_CK(cudaSetDevice(0));
  E2E_CK(cudaMalloc((void **)&d0, DEV_BYTES));
  E2E_CK(cudaMemcpy(d0, shared_region.host, DEV_BYTES, cudaMemcpyHostToDevice));
  E2E_CK(cudaSetDevice(1));
  E2E_CK(cudaMalloc((void **)&d1, DEV_BYTES));
  E2E_CK(cudaMemcpyPeer(d1, 1, d0, 0, DEV_BYTES));
  E2E_CK(cudaMemcpy(back, d1, DEV_BYTES, cudaMemcpyDeviceToHost));
  if (memcmp(back, shared_region.mirror, DEV_BYTES) != 0)
    e2e_fail("a peer copy of device 0's copy of the region differs");
  E2E_CK(cudaFree(d1));
  E2E_CK(cudaSetDevice(0));
  E2E_CK(cudaFree(d0));
  free(back);
  (void)rng;
}

int main(int argc, char **argv) {
  e2e_begin("e2e_multigpu");
  e2e_region regs[3] = {shared_region, doomed, late};
  e2e_regions_env(regs, 3); /* before the first CUDA call */
  E2E_CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    e2e_note("%d device(s): needs SIMCUDA_DEVICES >= 2; skipped", ndev);
    return E2E_EXIT_SKIP;
  }
  if (ndev > MAX_DEVICES)
    ndev = MAX_DEVICES;
  copies = argc > 1 ? strtoul(argv[1], NULL, 10)
                    : e2e_env_count("IBP_E2E_COPIES", E2E_DEFAULT_COPIES) /
                          (unsigned long)(ndev * PER_DEVICE);
  e2e_note("%d devices x %d threads x %lu copies", ndev, PER_DEVICE, copies);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 3);
  E2E_CK(cudaSetDevice(0));
  e2e_region_alloc(&shared_region);
  e2e_region_fill(&shared_region, &rng);
  e2e_region_alloc(&doomed);
  e2e_region_fill(&doomed, &rng);

  every_device_at_once();
  switching(&rng);
  free_while_copying();
  peers(&rng);
  e2e_region_check_host(&shared_region, "at the end");
  e2e_region_free(&shared_region);
  reset_one_device(&rng);
  return e2e_end();
}
