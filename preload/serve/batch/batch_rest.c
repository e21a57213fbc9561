/* The driver's part of an application's batch call (batch_rest.h): made
 * as the application made it, or where an entry's decision asks for a
 * set-up probe, reshaped (serve/batch/batch_call.c) and timed part by
 * part (serve/batch/batch_route.c). */
#include "serve/batch/batch_rest.h"

#include "base/base.h"
#include "base/driver.h"
#include "serve/choose/choose.h"

/* Part c of the rest, timed by timing where it asks (batch_route.h): c as
 * it is, or where the timing probes the set-up, with entries halved (the
 * same bytes; *halved: whether it was).  Returns the driver's answer. */
static CUresult timed_call(ibp_call_timing *timing, const ibp_batch_call *c,
                           ibp_batch_call_fn real, size_t *fail, CUstream s,
                           CUstream es, int *was_halved) {
  ibp_batch_call h;
  ibp__guard++;
  size_t halved = ibp__call_probes(timing) ? ibp__batch_call_halve(c, &h) : 0;
  if (!halved)
    h = *c;
  ibp__call_time_begin(timing, c->sizes, c->count, halved, es);
  if (halved && timing->t.index < 0) { /* not timed after all: as it was */
    ibp__batch_call_free(c, &h);
    h = *c;
    halved = 0;
  }
  ibp__guard--;
  /* a reshaped call's failure index is in its own numbering: the
   * application's is written only by its own call (the retry below) */
  size_t own_fail = fail ? *fail : 0;
  CUresult res = real(&h, halved && fail ? &own_fail : fail, s);
  if (halved && fail && res == CUDA_SUCCESS)
    *fail = own_fail;
  ibp__guard++;
  ibp__call_time_end(timing, es, res == CUDA_SUCCESS);
  ibp__batch_call_free(c, &h);
  ibp__guard--;
  *was_halved = halved != 0;
  return res;
}

/* r's two calls for a paired set-up probe (batch_route.h,
 * ibp__call_time_pair): its first half, timed by timing, and its second,
 * by *probe.  0 where timing asks for none, or they could not be made
 * (nothing then allocated). */
static int pair_parts(ibp_call_timing *timing, const ibp_batch_call *r,
                      ibp_batch_call *first, ibp_batch_call *second,
                      ibp_call_timing *probe) {
  if (ibp__call_probes(timing) != IBP_PROBE_PAIRED ||
      !ibp__batch_call_part(r, 0, r->count / 2, first))
    return 0;
  if (ibp__batch_call_part(r, r->count / 2, r->count, second) &&
      ibp__call_time_pair(timing, r->count, first->count, probe))
    return 1;
  ibp__batch_call_free(r, first);
  ibp__batch_call_free(r, second);
  return 0;
}

/* Whether a set-up probe may reshape r on stream es: its entries all of
 * one size, each large enough to halve -- a probe's reading takes the
 * call's parts to be made alike (a first half of 4 KiB entries and a
 * second of 64 KiB read the set-up 4x where it was as modelled, 0 where
 * it was 4x) -- and the stream not captured (a graph's shape is the
 * application's). */
static int probe_fits(const ibp_batch_call *r, CUstream es) {
  const ibp_driver *d = ibp__driver();
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!r->count || !r->sizes || r->sizes[0] < 2 * IBP_CHOOSE_PROBE_MIN || !d ||
      d->cuStreamIsCapturing(es, &cs) != CUDA_SUCCESS ||
      cs != CU_STREAM_CAPTURE_STATUS_NONE)
    return 0;
  for (size_t i = 1; i < r->count; i++)
    if (r->sizes[i] != r->sizes[0])
      return 0;
  return 1;
}

CUresult ibp__batch_call_rest(ibp_call_timing *timing, const ibp_batch_call *r,
                              ibp_batch_call_fn real, size_t *fail, CUstream s,
                              CUstream es) {
  ibp_batch_call first, second;
  ibp_call_timing probe;
  ibp__guard++;
  if (ibp__call_probes(timing) && !probe_fits(r, es))
    ibp__call_probe_release(timing); /* timed as it is */
  const int paired = pair_parts(timing, r, &first, &second, &probe);
  if (!paired && ibp__call_probes(timing) == IBP_PROBE_PAIRED)
    ibp__call_probe_release(timing); /* a call of one entry */
  ibp__guard--;
  int halved;
  if (!paired) { /* a refused call made again only where it was halved */
    CUresult res = timed_call(timing, r, real, fail, s, es, &halved);
    return halved && res != CUDA_SUCCESS ? real(r, fail, s) : res;
  }
  /* the parts' failure indices are theirs: the application's is written
   * by the driver's answer to a whole call only */
  size_t own_fail = fail ? *fail : 0;
  size_t *part_fail = fail ? &own_fail : NULL;
  CUresult res = timed_call(timing, &first, real, part_fail, s, es, &halved);
  if (res == CUDA_SUCCESS) {
    res = timed_call(&probe, &second, real, part_fail, s, es, &halved);
  } else {
    ibp__guard++;
    ibp__call_time_drop(&probe);
    ibp__guard--;
  }
  ibp__batch_call_free(r, &first);
  ibp__batch_call_free(r, &second);
  if (res != CUDA_SUCCESS)
    return real(r, fail, s);
  if (fail)
    *fail = own_fail;
  return res;
}
