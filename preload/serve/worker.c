/* The background worker (serve/worker.h): one thread, started by the
 * first job.
 *
 * The thread runs with the recursion guard set and in RELAXED stream
 * capture mode, so its allocations and synchronous copies neither reach
 * our hooks nor invalidate a capture the application has running. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/worker.h"

#include "base/base.h"
#include "base/clock.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/thread.h"
#include "serve/choose/chooser.h"
#include "serve/compact.h"
#include "serve/prepare/compress.h"
#include "serve/prepare/device.h"
#include "serve/prepare/refresh.h"
#include "serve/region.h"

#define WAIT_LIMIT_SECONDS 300

typedef enum job_kind {
  JOB_COMPRESS,
  JOB_DEVICE,
  JOB_REFRESH,
  JOB_RELEASE
} job_kind;

/* What a released region leaves for the worker to free. */
typedef struct release_data {
  void *shadow;
  void *dirty; /* dirty and busy bits, one pinned allocation */
  CUcontext ctx;
  struct {
    CUcontext ctx;
    ibp_device_memory mem;
  } dev[IBP_MAX_DEVICES];
} release_data;

typedef struct job {
  job_kind kind;
  ibp_region_rec *r; /* referenced (compress, device) */
  CUcontext ctx;
  int dev;
  release_data rel;
  struct job *next;
} job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* a job arrived */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* a job finished */
static job *head, *tail;
static int running;
static int warned_thread;
/* the worker's clock when its last job finished (base/clock.h) */
static double finished_ns;

/* ---- jobs ---------------------------------------------------------------- */

static int push_ctx(const ibp_driver *d, CUcontext ctx) {
  return ctx && d->cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
}

static void pop_ctx(const ibp_driver *d) {
  CUcontext ignored;
  d->cuCtxPopCurrent(&ignored);
}

static void setup_device(const ibp_driver *d, ibp_region_rec *r, int dev) {
  CUstream s = NULL;
  int ok = d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
           ibp__device_setup(r, dev, s) == 0;
  if (s)
    d->cuStreamDestroy(s);
  ibp__device_transition(ibp__served(r), (unsigned)dev, IBP_DEVICE_UPLOADING,
                         ok ? IBP_DEVICE_READY : IBP_DEVICE_FAILED);
}

static void run_compress(const ibp_driver *d, job *j) {
  ibp_region_rec *r = j->r;
  ibp_served_region *s = ibp__served(r);
  if (atomic_load(&r->removed) || !push_ctx(d, j->ctx)) {
    ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED);
    return;
  }
  s->layout.ctx = j->ctx;
  int ok = ibp__compress_region(r, j->dev) == 0;
  ibp_region_transition(r, IBP_REGION_COMPRESSING,
                        ok ? IBP_REGION_READY : IBP_REGION_DEGRADED);
  /* (pinning waits for the region to leave COMPRESSING) */
  if (!ok && !ibp__compact_pin(r, "it could not be compressed"))
    ibp__track_unprotect(&s->track);
  if (ok && ibp__device_transition(s, (unsigned)j->dev, IBP_DEVICE_ABSENT,
                                   IBP_DEVICE_UPLOADING))
    setup_device(d, r, j->dev);
  /* served from here on: tensors not written yet are read raw */
  if (ok && ibp__compress_fill(r) != 0 &&
      !ibp__compact_pin(r, "its compression failed") &&
      ibp_region_transition(r, IBP_REGION_READY, IBP_REGION_DEGRADED))
    ibp__track_unprotect(&s->track);
  ibp__track_hold_moves(&s->track, 0); /* held by ibp__compress_region */
  pop_ctx(d);
}

static void run_device(const ibp_driver *d, job *j) {
  if (!push_ctx(d, j->ctx)) {
    ibp__device_transition(ibp__served(j->r), (unsigned)j->dev,
                           IBP_DEVICE_UPLOADING, IBP_DEVICE_FAILED);
    return;
  }
  setup_device(d, j->r, j->dev);
  pop_ctx(d);
}

static void run_release(const ibp_driver *d, job *j) {
  release_data *rel = &j->rel;
  for (int i = 0; i < IBP_MAX_DEVICES; i++) {
    if (!rel->dev[i].ctx || !push_ctx(d, rel->dev[i].ctx))
      continue;
    ibp__device_memory_free(d, &rel->dev[i].mem);
    pop_ctx(d);
  }
  if ((rel->shadow || rel->dirty) && push_ctx(d, rel->ctx)) {
    if (rel->shadow)
      d->cuMemFreeHost(rel->shadow);
    if (rel->dirty)
      d->cuMemFreeHost(rel->dirty);
    pop_ctx(d);
  }
}

static void run(const ibp_driver *d, job *j) {
  switch (j->kind) {
  case JOB_COMPRESS:
    run_compress(d, j);
    break;
  case JOB_DEVICE:
    run_device(d, j);
    break;
  case JOB_REFRESH:
    ibp__refresh_region(j->r);
    break;
  case JOB_RELEASE:
    run_release(d, j);
    break;
  }
}

/* ---- the thread ---------------------------------------------------------- */

static void *worker_main(void *arg) {
  (void)arg;
  ibp__guard = 1;
  const ibp_driver *d = ibp__driver();
  if (d && d->cuThreadExchangeStreamCaptureMode) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    d->cuThreadExchangeStreamCaptureMode(&mode);
  }
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!head)
      pthread_cond_wait(&wake, &lock);
    job *j = head;
    head = j->next;
    if (!head)
      tail = NULL;
    pthread_mutex_unlock(&lock);
    if (d)
      run(d, j);
    ibp_region_release(j->r);
    free(j);
    const double now = ibp__clock_ns();
    pthread_mutex_lock(&lock);
    if (now > finished_ns)
      finished_ns = now;
    pthread_cond_broadcast(&done);
  }
  return NULL;
}

/* Queues j, starting the thread if needed.  On failure the job is undone
 * (the region degraded or the device slot failed) and freed. */
static void submit(job *j) {
  pthread_mutex_lock(&lock);
  if (!running)
    running = ibp__thread_start(worker_main);
  if (running) {
    j->next = NULL;
    if (tail)
      tail->next = j;
    else
      head = j;
    tail = j;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return;
  }
  pthread_mutex_unlock(&lock);
  ibp__warn_once(&warned_thread, "cannot start the worker thread; copies "
                                 "pass through");
  if (j->kind == JOB_COMPRESS)
    ibp_region_transition(j->r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED);
  else if (j->kind == JOB_REFRESH)
    atomic_store(&ibp__served(j->r)->refresh.pending, 0);
  else if (j->kind == JOB_DEVICE)
    ibp__device_transition(ibp__served(j->r), (unsigned)j->dev,
                           IBP_DEVICE_UPLOADING, IBP_DEVICE_FAILED);
  ibp_region_release(j->r);
  free(j);
}

static job *new_job(job_kind kind, ibp_region_rec *r, CUcontext ctx, int dev) {
  job *j = calloc(1, sizeof *j);
  if (!j)
    return NULL;
  j->kind = kind;
  j->r = r;
  j->ctx = ctx;
  j->dev = dev;
  if (r)
    ibp_region_acquire(r);
  return j;
}

void ibp__worker_compress(ibp_region_rec *r, CUcontext ctx, int dev) {
  job *j = new_job(JOB_COMPRESS, r, ctx, dev);
  if (j)
    submit(j);
  else
    ibp_region_transition(r, IBP_REGION_COMPRESSING, IBP_REGION_DEGRADED);
}

void ibp__worker_setup_device(ibp_region_rec *r, CUcontext ctx, int dev) {
  job *j = new_job(JOB_DEVICE, r, ctx, dev);
  if (j)
    submit(j);
  else
    ibp__device_transition(ibp__served(r), (unsigned)dev, IBP_DEVICE_UPLOADING,
                           IBP_DEVICE_FAILED);
}

void ibp__worker_refresh(ibp_region_rec *r) {
  job *j = new_job(JOB_REFRESH, r, NULL, 0);
  if (j)
    submit(j);
  else
    atomic_store(&ibp__served(r)->refresh.pending, 0);
}

void ibp__worker_release(ibp_region_rec *r, void *ctx) {
  (void)ctx;
  ibp_served_region *s = ibp__served(r);
  job *j = new_job(JOB_RELEASE, NULL, NULL, 0);
  if (j && s) {
    j->rel.shadow = s->layout.shadow;
    j->rel.dirty = (void *)s->track.dirty;
    j->rel.ctx = s->layout.ctx;
    for (int i = 0; i < IBP_MAX_DEVICES; i++) {
      if (ibp__device_state(s, (unsigned)i) != IBP_DEVICE_READY)
        continue;
      j->rel.dev[i].ctx = s->dev[i].ctx;
      j->rel.dev[i].mem = s->dev[i].mem;
    }
    submit(j);
  } else {
    free(j); /* nothing to free on the GPU side, or no memory to ask */
  }
  for (int i = 0; s && i < IBP_MAX_DEVICES; i++)
    ibp__chooser_free(atomic_load(&s->dev[i].chooser));
  ibp__served_free(s);
}

/* ---- waiting ------------------------------------------------------------- */

/* Whether r is being compressed, or set up on device dev (-1: any). */
static int preparing(ibp_region_rec *r, int dev) {
  ibp_served_region *s = ibp__served(r);
  if (ibp_region_state_get(r) == IBP_REGION_COMPRESSING)
    return 1;
  for (int i = 0; s && i < IBP_MAX_DEVICES; i++)
    if ((dev < 0 || dev == i) &&
        ibp__device_state(s, (unsigned)i) == IBP_DEVICE_UPLOADING)
      return 1;
  return 0;
}

static int busy(ibp_region_rec *r, int dev) {
  ibp_served_region *s = ibp__served(r);
  return preparing(r, dev) || (s && atomic_load(&s->refresh.pending));
}

void ibp__worker_wait(ibp_region_rec *r, int dev) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_LIMIT_SECONDS;
  pthread_mutex_lock(&lock);
  const int prepared = preparing(r, dev);
  while (busy(r, dev))
    if (pthread_cond_timedwait(&done, &lock, &until) == ETIMEDOUT)
      break;
  const double until_ns = finished_ns;
  pthread_mutex_unlock(&lock);
  /* a wait for the region's compression and set-up (its uploads) took the
   * worker's time: on the simulated GPU's clock too, so that the copies
   * after it do not share the link with uploads that ended before them.
   * Not a refresh's: the worker's clock runs ahead of the copying
   * thread's (it started where the farthest thread had reached), and a
   * wait for each refresh moved the copies of a region the device writes
   * that far (docs/PROFILE.md, "The virtual clock") */
  if (prepared)
    ibp__clock_reach(until_ns);
}

void ibp__worker_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&wake, NULL);
  pthread_cond_init(&done, NULL);
  head = tail = NULL; /* the parent's jobs are the parent's */
  running = 0;
  finished_ns = 0;
}
