/* The application's own batches (serve/batch/batch_call.h). */
#include <stdlib.h>

#include "serve/batch/batch_call.h"

#include "base/base.h"
#include "base/driver.h"
#include "serve/batch/batch.h"
#include "serve/choose/choose.h"
#include "serve/substitute.h"

/* Arguments the driver accepts: arrays present, attribute ranges starting
 * at 0, increasing, inside the batch, each with a valid source order. */
static int well_formed(const ibp_batch_call *c) {
  if (!c->dsts || !c->srcs || !c->sizes || !c->count || !c->attrs ||
      !c->attr_idxs || !c->nattrs || c->nattrs > c->count ||
      c->attr_idxs[0] != 0)
    return 0;
  for (size_t a = 1; a < c->nattrs; a++)
    if (c->attr_idxs[a] <= c->attr_idxs[a - 1] || c->attr_idxs[a] >= c->count)
      return 0;
  for (size_t a = 0; a < c->nattrs; a++)
    if (c->attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
        c->attrs[a].srcAccessOrder !=
            CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
        c->attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
      return 0; /* the driver refuses the whole call */
  return 1;
}

static int holdable(const CUmemcpyAttributes *a) {
  return a->srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
         a->srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* Allocates rest for up to n entries and n attribute ranges. */
static int rest_alloc(ibp_batch_call *rest, size_t n) {
  *rest = (ibp_batch_call){0};
  rest->dsts = malloc(n * sizeof *rest->dsts);
  rest->srcs = malloc(n * sizeof *rest->srcs);
  rest->sizes = malloc(n * sizeof *rest->sizes);
  rest->attrs = malloc(n * sizeof *rest->attrs);
  rest->attr_idxs = malloc(n * sizeof *rest->attr_idxs);
  rest->orig = malloc(n * sizeof *rest->orig);
  return rest->dsts && rest->srcs && rest->sizes && rest->attrs &&
         rest->attr_idxs && rest->orig;
}

void ibp__batch_call_free(const ibp_batch_call *in, ibp_batch_call *c) {
  if (c->dsts == in->dsts)
    return; /* nothing was allocated */
  free(c->dsts);
  free(c->srcs);
  free(c->sizes);
  free(c->attrs);
  free(c->attr_idxs);
  free(c->orig);
  *c = (ibp_batch_call){0};
}

size_t ibp__batch_call_split(const ibp_batch_call *in, CUstream s,
                             ibp_batch_call *rest, ibp_call_timing *timing) {
  *rest = *in;
  if (!well_formed(in))
    return 0;
  ibp_batch_call r;
  if (!rest_alloc(&r, in->count)) {
    ibp__batch_call_free(in, &r);
    return 0;
  }
  size_t held = 0, a = 0;
  size_t last_attr = (size_t)-1;
  int probeable = in->sizes[0] >= 2 * IBP_CHOOSE_PROBE_MIN;
  for (size_t i = 1; i < in->count; i++)
    probeable &= in->sizes[i] == in->sizes[0];
  for (size_t i = 0; i < in->count; i++) {
    while (a + 1 < in->nattrs && in->attr_idxs[a + 1] <= i)
      a++;
    ibp_copy c = {.dst = in->dsts[i],
                  .src = (const void *)(uintptr_t)in->srcs[i],
                  .bytes = in->sizes[i],
                  .stream = s,
                  .unified = 1,
                  .hold_only = 1,
                  .arrive = in->count - i,
                  .entries = in->count,
                  .call = timing,
                  .probeable = probeable};
    if (holdable(&in->attrs[a]) && ibp__serve_htod(&c) == 0) {
      held++;
      continue;
    }
    if (a != last_attr) { /* a new attribute range in the rest */
      r.attrs[r.nattrs] = in->attrs[a];
      r.attr_idxs[r.nattrs++] = r.count;
      last_attr = a;
    }
    r.dsts[r.count] = in->dsts[i];
    r.srcs[r.count] = in->srcs[i];
    r.sizes[r.count] = in->sizes[i];
    r.orig[r.count++] = i;
  }
  if (!held) {
    ibp__batch_call_free(in, &r);
    return 0;
  }
  if (!r.count) { /* all held: nothing for the driver */
    ibp__batch_call_free(in, &r);
    *rest = (ibp_batch_call){0};
    return held;
  }
  *rest = r;
  return held;
}

/* Where entry i of `size` bytes is halved by a set-up probe (0: whole):
 * one entry in IBP_CHOOSE_PROBE_EVERY, each half at least
 * IBP_CHOOSE_PROBE_MIN bytes, the first ending on a multiple of it. */
static size_t half_at(size_t i, size_t size) {
  if (i % IBP_CHOOSE_PROBE_EVERY || size < 2 * IBP_CHOOSE_PROBE_MIN)
    return 0;
  return size / 2 / IBP_CHOOSE_PROBE_MIN * IBP_CHOOSE_PROBE_MIN;
}

/* Entries [from, to) of `in` into *out, allocated, with their attribute
 * ranges, each one halved where `halve` says (half_at); *halved: how
 * many were.  0 when out could not be allocated (*out is then *in). */
static int reshape(const ibp_batch_call *in, size_t from, size_t to, int halve,
                   ibp_batch_call *out, size_t *halved) {
  *halved = 0;
  for (size_t i = from; halve && i < to; i++)
    *halved += half_at(i - from, in->sizes[i]) != 0;
  ibp_batch_call o;
  if (!rest_alloc(&o, to - from + *halved)) {
    ibp__batch_call_free(in, &o);
    *out = *in;
    return 0;
  }
  /* the entries, whole or their first halves, then the second halves: an
   * entry's two halves are not next to each other in the call, so that a
   * driver that joined neighbours copying adjacent ranges into one
   * transfer would still set up each (the copies of one call may run in
   * any order) -- where the only entry halved is the last, its second half
   * goes first */
  const int front = *halved == 1 && to - from > 1 &&
                    half_at(to - 1 - from, in->sizes[to - 1]);
  size_t last = (size_t)-1;
  for (int pass = front ? 0 : 1; pass < (*halved ? 3 : 2); pass++)
    for (size_t i = pass ? from : to - 1, a = 0; i < to; i++) {
      while (a + 1 < in->nattrs && in->attr_idxs[a + 1] <= i)
        a++;
      const size_t mid = halve ? half_at(i - from, in->sizes[i]) : 0;
      const int second = pass != 1;
      if (second && (!mid || (pass == 2 && front)))
        continue;
      if (in->nattrs && a != last) { /* a new attribute range */
        o.attrs[o.nattrs] = in->attrs[a];
        o.attr_idxs[o.nattrs++] = o.count;
        last = a;
      }
      const size_t at = second ? mid : 0;
      o.dsts[o.count] = in->dsts[i] + at;
      o.srcs[o.count] = in->srcs[i] + at;
      o.sizes[o.count] = second ? in->sizes[i] - mid : mid ? mid : in->sizes[i];
      o.orig[o.count++] = in->orig ? in->orig[i] : i;
    }
  *out = o;
  return 1;
}

size_t ibp__batch_call_halve(const ibp_batch_call *in, ibp_batch_call *out) {
  size_t halved = 0;
  *out = *in;
  if (!in->count || !reshape(in, 0, in->count, 1, out, &halved))
    return 0;
  if (!halved) { /* none large enough */
    ibp__batch_call_free(in, out);
    *out = *in;
  }
  return halved;
}

int ibp__batch_call_part(const ibp_batch_call *in, size_t from, size_t to,
                         ibp_batch_call *out) {
  size_t none;
  *out = *in;
  return from < to && to <= in->count && reshape(in, from, to, 0, out, &none);
}

/* ---- 2D copies ------------------------------------------------------------
 */

/* Row y of the copy: its source (a host address) and destination. */
static void row(const CUDA_MEMCPY2D *p, size_t y, const void **src,
                CUdeviceptr *dst) {
  uintptr_t s = p->srcMemoryType == CU_MEMORYTYPE_HOST
                    ? (uintptr_t)p->srcHost
                    : (uintptr_t)p->srcDevice;
  *src = (const void *)(s + (p->srcY + y) * p->srcPitch + p->srcXInBytes);
  *dst = p->dstDevice + (p->dstY + y) * p->dstPitch + p->dstXInBytes;
}

/* A host (or unified) source, a device (or unified) destination, rows
 * that fit their pitches, offsets that do not overflow. */
static int rows_servable(const CUDA_MEMCPY2D *p) {
  size_t last;
  return p && p->WidthInBytes && p->Height &&
         (p->srcMemoryType == CU_MEMORYTYPE_HOST ||
          p->srcMemoryType == CU_MEMORYTYPE_UNIFIED) &&
         (p->dstMemoryType == CU_MEMORYTYPE_DEVICE ||
          p->dstMemoryType == CU_MEMORYTYPE_UNIFIED) &&
         p->srcPitch >= p->WidthInBytes && p->dstPitch >= p->WidthInBytes &&
         !__builtin_mul_overflow(p->srcY + p->Height, p->srcPitch, &last) &&
         !__builtin_mul_overflow(p->dstY + p->Height, p->dstPitch, &last);
}

int ibp__serve_2d(const CUDA_MEMCPY2D *p, CUstream s, int sync) {
  const ibp_driver *d = ibp__driver();
  if (!d || !rows_servable(p))
    return 1;
  /* every row's destination in one allocation, or the driver's answer
   * (a row it would refuse must not leave the others copied) */
  const void *first;
  CUdeviceptr dst, base;
  size_t size;
  row(p, 0, &first, &dst);
  if (!ibp__dst_fits(d, dst, (p->Height - 1) * p->dstPitch + p->WidthInBytes,
                     &base, &size))
    return 1;
  for (size_t y = 0; y < p->Height; y++) {
    ibp_copy c = {.bytes = p->WidthInBytes,
                  .stream = s,
                  .unified = 1,
                  .hold_only = 1,
                  .arrive = p->Height - y};
    row(p, y, &c.src, &c.dst);
    const int rc = ibp__serve_htod(&c);
    if (rc == 0)
      continue;
    /* the rows after it are the driver's too: counted once each (the
     * refused one was, with its own reason) */
    for (size_t z = y + 1; z < p->Height; z++) {
      ibp_copy rest = c;
      row(p, z, &rest.src, &rest.dst);
      ibp__serve_passed(&rest, IBP_PASSED_ROW_AFTER);
    }
    if (y == 0)
      return 1; /* nothing held: the driver's 2D copy, whole */
    /* the rest by the driver, after what is held (rows never overlap); a
     * row the gate did not count ends the stream's run */
    if (rc == 2)
      ibp__batch_order_copy(s);
    else
      ibp__batch_order(s);
    for (; y < p->Height; y++) {
      row(p, y, &c.src, &c.dst);
      /* a row the driver refuses: its 2D copy, whole, after what is
       * queued (the rows again, same bytes), says why -- the application
       * sees its error, not a success with a row missing */
      if (d->cuMemcpyHtoDAsync(c.dst, c.src, c.bytes, s) != CUDA_SUCCESS &&
          d->cuMemcpyHtoD(c.dst, c.src, c.bytes) != CUDA_SUCCESS)
        return 1;
    }
    break;
  }
  if (sync) { /* the host-synchronous contract */
    ibp__batch_order(s);
    if (d->cuStreamSynchronize(s) != CUDA_SUCCESS)
      return 1; /* the driver's copy rewrites the rows and says why */
  }
  return 0;
}
