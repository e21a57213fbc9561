/* What shared the link with a timed copy after it started
 * (serve/choose/beside.h). */
#include "serve/choose/beside.h"

enum { SAMPLE_FREE = 0 }; /* chooser.c's */

/* The samples of ch that a copy on `stream` may run beside (lock held):
 * timed on another stream, their whole span's caller's included. */
static uint32_t beside_of(const ibp_chooser *ch, CUstream stream) {
  uint32_t mask = 0;
  for (int i = 0; i < IBP_TIMING_SAMPLES; i++) {
    const ibp_timing_sample *x = &ch->sample[i];
    if (x->state != SAMPLE_FREE && x->stream != stream && x->caller != stream)
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

void ibp__beside_queued(ibp_device_slot *slot, ibp_chooser *ch, CUstream stream,
                        double link_ns) {
  const ibp_driver *d = ibp__driver();
  if (!ch || !atomic_load_explicit(&ch->live, memory_order_relaxed) || !d ||
      link_ns <= 0)
    return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  int j = -1;
  pthread_mutex_lock(&ch->lock);
  const uint32_t mask = beside_of(ch, stream);
  for (int k = 0; k < IBP_TIMING_BESIDE && mask && j < 0; k++)
    if (!ch->beside[k].waiting)
      j = k;
  CUevent *ev = j >= 0 ? &slot->mem.beside[j] : NULL;
  if (ev && !*ev && d->cuEventCreate(ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    *ev = NULL;
    j = -1;
  }
  if (j >= 0)
    ch->beside[j] = (ibp_beside){stream, link_ns, mask};
  pthread_mutex_unlock(&ch->lock);
  /* a capturing stream runs nothing now: no copy beside */
  const int recorded = j >= 0 &&
                       d->cuStreamIsCapturing(stream, &cs) == CUDA_SUCCESS &&
                       cs == CU_STREAM_CAPTURE_STATUS_NONE &&
                       d->cuEventRecord(*ev, stream) == CUDA_SUCCESS;
  if (d->cuThreadExchangeStreamCaptureMode)
    d->cuThreadExchangeStreamCaptureMode(&mode);
  if (j >= 0 && !recorded) {
    pthread_mutex_lock(&ch->lock);
    ch->beside[j].waiting = 0;
    pthread_mutex_unlock(&ch->lock);
  }
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
    float after = 0; /* from its end to the span's */
    if (!(b->waiting >> i & 1) || !slot->mem.beside[k] ||
        d->cuEventElapsedTime(&after, slot->mem.beside[k], end) !=
            CUDA_SUCCESS ||
        after < 0 || 1e6 * after >= gpu)
      continue; /* it ended after the span (or before it began) */
    const double inside = gpu - 1e6 * after;
    beside += inside < b->link_ns ? inside : b->link_ns;
  }
  const double floor = gpu < model_ns ? gpu : model_ns;
  return gpu - beside > floor ? gpu - beside : floor;
}
