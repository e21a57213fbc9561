/* What shared the link with a timed copy after it started
 * (serve/choose/beside.h). */
#include "serve/choose/beside.h"

#include "serve/choose/streams.h"

enum { SAMPLE_FREE = 0 }; /* chooser.c's */

/* The samples of ch that a copy on `stream` may run beside (lock held):
 * timed on another stream, their whole span's caller's included. */
static uint32_t beside_of(const ibp_chooser *ch, CUstream stream) {
  uint32_t mask = 0;
  for (int i = 0; i < IBP_TIMING_SAMPLES; i++) {
    const ibp_timing_sample *x = &ch->sample[i];
    if (x->state != SAMPLE_FREE &&
        !ibp__stream_same(x->stream, x->thread, stream) &&
        !ibp__stream_same(x->caller, x->thread, stream))
      mask |= 1u << i;
  }
  return mask;
}

int ibp__beside_wanted(ibp_chooser *ch, CUstream stream) {
  if (!ch || !atomic_load_explicit(&ch->live, memory_order_relaxed))
    return 0;
  pthread_mutex_lock(&ch->lock);
  const int wanted = beside_of(ch, stream) != 0;
  pthread_mutex_unlock(&ch->lock);
  return wanted;
}

/* Entry j's two events, created on first use (lock held). */
static int events(const ibp_driver *d, ibp_device_slot *slot, int j) {
  CUevent *ev = &slot->mem.beside[2 * j];
  for (int k = 0; k < 2; k++)
    if (!ev[k] && d->cuEventCreate(&ev[k], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      ev[k] = NULL;
      return 0;
    }
  return 1;
}

/* Records entry j's event `which` (0 before, 1 after) on `stream`, in
 * relaxed capture mode -- not on a capturing stream, which runs nothing
 * now.  Frees the entry where it was not recorded; an entry freed and
 * taken again meanwhile (gen) is not touched.  Returns whether it was
 * recorded. */
static int record(const ibp_driver *d, ibp_device_slot *slot, ibp_chooser *ch,
                  int j, unsigned gen, CUstream stream, int which) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  const int recorded =
      d->cuStreamIsCapturing(stream, &cs) == CUDA_SUCCESS &&
      cs == CU_STREAM_CAPTURE_STATUS_NONE &&
      d->cuEventRecord(slot->mem.beside[2 * j + which], stream) == CUDA_SUCCESS;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  pthread_mutex_lock(&ch->lock);
  ibp_beside *b = &ch->beside[j];
  if (b->gen == gen && !recorded)
    b->waiting = 0;
  else if (b->gen == gen && which)
    b->queued = 1;
  pthread_mutex_unlock(&ch->lock);
  return recorded;
}

int ibp__beside_begin(ibp_device_slot *slot, ibp_chooser *ch, CUstream stream,
                      double link_ns, unsigned *gen) {
  const ibp_driver *d = ibp__driver();
  if (!ch || !atomic_load_explicit(&ch->live, memory_order_relaxed) || !d ||
      link_ns <= 0)
    return -1;
  int j = -1;
  pthread_mutex_lock(&ch->lock);
  const uint32_t mask = beside_of(ch, stream);
  for (int k = 0; k < IBP_TIMING_BESIDE && mask && j < 0; k++)
    if (!ch->beside[k].waiting)
      j = k;
  if (j >= 0 && events(d, slot, j)) {
    *gen = ch->beside[j].gen + 1;
    ch->beside[j] = (ibp_beside){stream, link_ns, mask, 0, *gen};
  } else {
    j = -1;
  }
  pthread_mutex_unlock(&ch->lock);
  return j >= 0 && record(d, slot, ch, j, *gen, stream, 0) ? j : -1;
}

void ibp__beside_end(ibp_device_slot *slot, ibp_chooser *ch, int j,
                     unsigned gen, CUstream stream, int queued) {
  const ibp_driver *d = ibp__driver();
  if (j < 0 || !ch || !d)
    return;
  if (queued) {
    (void)record(d, slot, ch, j, gen, stream, 1);
    return;
  }
  pthread_mutex_lock(&ch->lock);
  if (ch->beside[j].gen == gen)
    ch->beside[j].waiting = 0;
  pthread_mutex_unlock(&ch->lock);
}

void ibp__beside_forget(ibp_chooser *ch, int i) {
  for (int k = 0; k < IBP_TIMING_BESIDE; k++)
    ch->beside[k].waiting &= ~(1u << i);
}

double ibp__beside_less(const ibp_driver *d, const ibp_device_slot *slot,
                        const ibp_chooser *ch, int i, CUevent end, double gpu,
                        double model_ns) {
  double beside = 0;
  for (int k = 0; k < IBP_TIMING_BESIDE; k++) {
    const ibp_beside *b = &ch->beside[k];
    const CUevent *ev = &slot->mem.beside[2 * k];
    float after = 0, ran = 0; /* from its end to the span's; its own */
    if (!(b->waiting >> i & 1) || !b->queued ||
        d->cuEventElapsedTime(&after, ev[1], end) != CUDA_SUCCESS ||
        after < 0 || 1e6 * after >= gpu ||
        d->cuEventElapsedTime(&ran, ev[0], ev[1]) != CUDA_SUCCESS || ran < 0)
      continue; /* it ended after the span (or before it began) */
    double took = gpu - 1e6 * after; /* the span's part before it ended */
    took = took < b->link_ns ? took : b->link_ns;
    took = took < 1e6 * ran ? took : 1e6 * ran;
    beside += took;
  }
  const double floor = gpu < model_ns ? gpu : model_ns;
  return gpu - beside > floor ? gpu - beside : floor;
}
