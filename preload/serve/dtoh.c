/* Device-to-host copies into regions (serve/dtoh.h, docs/ARCHITECTURE.md
 * "No stale byte").
 *
 * Such a copy invalidates the tensors it overwrites before it is queued
 * (note_write).  Its bytes, though, land later -- on a GPU by DMA,
 * which write protection does not see.  So the compressor must not read a
 * region while a copy into it may still be in flight: every asynchronous
 * copy into a region gets an event recorded after it on its stream, and
 * ibp__dtoh_wait (worker only) waits until no copy is between begin and
 * end and every event recorded so far has completed.  A copy queued where
 * no event can follow it (a capturing stream, a driver error) makes the
 * wait report "unknown" from then on, and the compressor gives up. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "serve/dtoh.h"

#include "base/base.h"
#include "base/driver.h"
#include "serve/compact.h"
#include "serve/region.h"

typedef struct pending_event {
  CUevent ev;
  CUcontext ctx;
  struct pending_event *next;
} pending_event;

static _Atomic int inflight; /* device-to-host copies between begin/end */
static _Atomic int unknown;  /* a copy we cannot wait for was queued */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static pending_event *events; /* recorded after async copies into regions */

/* ---- device-to-host copies ----------------------------------------------- */

/* Invalidates every region [dst, dst+bytes) overlaps (lowest first).
 * Returns the number of regions touched. */
static int note_write(const void *dst, size_t bytes) {
  uintptr_t a = (uintptr_t)dst, end = a + (bytes ? bytes : 1);
  int touched = 0;
  while (a < end) {
    ibp_region_rec *r = NULL;
    if (ibp_registry_find((const void *)a, end - a, &r) == IBP_FIND_NONE)
      break;
    touched++;
    ibp_served_region *s = ibp__served(r);
    if (s && ibp_region_state_get(r) == IBP_REGION_COMPRESSING)
      atomic_store(&s->invalidated, 1); /* seen when compression ends */
    if (s && __atomic_load_n(&s->track.dirty, __ATOMIC_ACQUIRE))
      ibp__track_mark_dirty(&s->track, a, end - a);
    uintptr_t region_end = r->base + r->bytes;
    ibp_region_release(r);
    a = region_end;
  }
  return touched;
}

static int begin(const void *dst, size_t bytes) {
  atomic_fetch_add(&inflight, 1);
  if (note_write(dst, bytes))
    return 1;
  atomic_fetch_sub(&inflight, 1);
  return 0;
}

int ibp__dtoh_begin(const void *dst, size_t bytes) {
  /* compact regions there are pinned first: the device writes host memory
   * it must see pinned.  Before the write counts as in flight: pinning
   * waits for a compression, which waits for those. */
  ibp__compact_pin_range(dst, bytes ? bytes : 1, "the device writes into it");
  return begin(dst, bytes);
}

int ibp__dtoh_begin_copy(const void *dst, size_t bytes, CUstream stream) {
  /* a compact region's memory is pageable to the driver, which copies into
   * it as into any pageable memory (synchronously, from the host side):
   * its pages come back as the copy writes them, its tensors dirty.  Only
   * a graph cannot capture such a copy: pinned first then. */
  const ibp_driver *d = ibp__driver();
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (ibp__compact_owns(dst, bytes ? bytes : 1) &&
      (!d || d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS ||
       cs != CU_STREAM_CAPTURE_STATUS_NONE))
    ibp__compact_pin_range(dst, bytes ? bytes : 1,
                           "a copy into it is captured");
  return begin(dst, bytes);
}

/* An event after the copy on `stream`; refreshing is switched off when that
 * is impossible (capturing stream, driver error). */
static void record_after(CUstream stream) {
  const ibp_driver *d = ibp__driver();
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  pending_event *pe = malloc(sizeof *pe);
  ibp__guard++;
  if (!d || !pe || d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS ||
      cs != CU_STREAM_CAPTURE_STATUS_NONE ||
      d->cuCtxGetCurrent(&pe->ctx) != CUDA_SUCCESS ||
      d->cuEventCreate(&pe->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    atomic_store(&unknown, 1);
    free(pe);
  } else if (d->cuEventRecord(pe->ev, stream) != CUDA_SUCCESS) {
    atomic_store(&unknown, 1);
    d->cuEventDestroy(pe->ev);
    free(pe);
  } else {
    pthread_mutex_lock(&events_lock);
    pe->next = events;
    events = pe;
    pthread_mutex_unlock(&events_lock);
  }
  ibp__guard--;
}

void ibp__dtoh_end(CUstream stream, int async) {
  if (async && stream)
    record_after(stream);
  atomic_fetch_sub(&inflight, 1);
}

int ibp__dtoh_wait(void) {
  const ibp_driver *d = ibp__driver();
  if (!d)
    return -1;
  while (atomic_load(&inflight))
    sched_yield();
  pthread_mutex_lock(&events_lock);
  pending_event *list = events;
  events = NULL;
  pthread_mutex_unlock(&events_lock);
  int rc = 0;
  while (list) {
    pending_event *pe = list;
    list = pe->next;
    CUcontext ignored;
    if (d->cuCtxPushCurrent(pe->ctx) != CUDA_SUCCESS) {
      rc = -1; /* leak the event rather than guess */
    } else {
      if (d->cuEventSynchronize(pe->ev) != CUDA_SUCCESS)
        rc = -1;
      d->cuEventDestroy(pe->ev);
      d->cuCtxPopCurrent(&ignored);
    }
    free(pe);
  }
  if (rc)
    atomic_store(&unknown, 1);
  return atomic_load(&unknown) ? -1 : 0;
}

void ibp__dtoh_after_fork_child(void) {
  pthread_mutex_init(&events_lock, NULL);
  events = NULL; /* the parent's events */
  atomic_store(&inflight, 0);
}
