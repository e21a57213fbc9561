/* Recompressing written tensors (DESIGN.md section 3).
 *
 * A write marks tensors dirty and the kernel serves them raw from the
 * original.  When a 32nd of a region more is dirty than the last
 * refresh left dirty, the worker recompresses
 * the dirty tensors (same Mask/Bitval) and clears their bits, so appended
 * or updated data (a KV cache offloaded block by block) is served
 * compressed again.  A new stream goes to the tensor's place in the shadow
 * when it fits there, else to the spill room after the packed streams
 * (docs/FORMAT.md §3; when that is full too, the tensor stays dirty), and
 * the offsets and lengths on the GPU are updated.  Streams are rewritten in
 * place, so no kernel may read them meanwhile, and no write may be lost:
 *
 *   1. CPU writes: every page is write-protected again, in place, and the
 *      tracker is quiesced (no fault pass in flight).
 *   2. S = the dirty bits now.  `refreshing` on, then every copy between
 *      its decision and its launch is waited for: from now on kernels read
 *      the busy bits.  busy |= S, then cuCtxSynchronize in every context
 *      the region is set up in (RELAXED capture mode; refused during a
 *      capture -> try later): a kernel that judged a tensor of S clean, or
 *      was launched without busy bits, has finished.
 *   3. Clear the dirty bits of S, then keep only tensors whose pages are
 *      all still read-only: the tracker marks a tensor dirty both before
 *      and after it clears a page's bit, so a write racing with the clear
 *      either leaves its mark or shows as an unprotected page.  Wait for
 *      device-to-host copies into regions queued so far (dtoh.c); later
 *      ones mark after our clear.
 *   4. Compress each kept tensor into its place or the spill room (busy:
 *      kernels serve it raw), put back the dirty bit of any that does not
 *      compress or fit, upload offsets and lengths to every device, and
 *      wait for every kernel again: one launched during the refresh may
 *      have read an old offset or length and must not outlive busy (a
 *      failure: all rewritten tensors dirty again).  Then clear busy and
 *      `refreshing`.
 * A region recompressed more often than every 4th copy, or half dirty
 * regardless, is demoted (substitute.c). */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "preload.h"

#define REFRESH_SHARE 32 /* refresh once 1/32 more of the tensors are dirty */

void ibp__refresh_maybe(ibp_region_rec *r) {
  ibp_region_priv *p = r->priv;
  /* counted from what the last refresh left dirty (tensors stored raw, or
   * whose stream found no room): those it cannot help */
  uint64_t dirty =
      atomic_load_explicit(&r->dirty_tensors, memory_order_relaxed);
  uint64_t floor = atomic_load_explicit(&p->dirty_floor, memory_order_relaxed);
  dirty = dirty > floor ? dirty - floor : 0;
  if (dirty == 0 || dirty * REFRESH_SHARE < r->summary.tensors ||
      atomic_load_explicit(&p->refresh_pending, memory_order_relaxed))
    return;
  int expected = 0;
  if (atomic_compare_exchange_strong(&p->refresh_pending, &expected, 1))
    ibp__worker_refresh(r);
}

/* Step 2's wait: every kernel launched so far in r's contexts finished. */
static int wait_kernels(const ibp_driver *d, ibp_region_rec *r) {
  ibp_region_priv *p = r->priv;
  while (atomic_load(&p->launching))
    sched_yield();
  for (int i = 0; i < IBP_REGISTRY_MAX_DEVICES; i++) {
    if (atomic_load(&r->devices[i].state) != IBP_DEVICE_READY)
      continue;
    CUcontext ignored;
    if (d->cuCtxPushCurrent(p->dev[i].ctx) != CUDA_SUCCESS)
      return -1;
    CUresult e = d->cuCtxSynchronize();
    d->cuCtxPopCurrent(&ignored);
    if (e != CUDA_SUCCESS)
      return -1;
  }
  return 0;
}

/* Sets bits `m` of word w of a bitmap; returns how many were newly set. */
static uint64_t set_bits(_Atomic uint32_t *map, uint64_t w, uint32_t m) {
  return (uint64_t)__builtin_popcount(m & ~atomic_fetch_or(&map[w], m));
}

/* Step 3 for word w: clears the dirty bits of s[w] and returns those whose
 * tensors may be rewritten (the others are dirty again). */
static uint32_t take(ibp_region_rec *r, uint64_t w, uint32_t s, int tracked) {
  const uint32_t R = r->params.tensor_bytes;
  uint32_t old = atomic_fetch_and(&r->dirty[w], ~s);
  atomic_fetch_sub(&r->dirty_tensors, (uint64_t)__builtin_popcount(old & s));
  uint32_t keep = s, back = 0;
  for (uint32_t b = s; tracked && b; b &= b - 1) {
    uint64_t t = w * 32 + (uint64_t)__builtin_ctz(b);
    if (!ibp__track_still_protected(r, r->base + t * R, R))
      back |= b & -b;
  }
  if (back) {
    atomic_fetch_add(&r->dirty_tensors, set_bits(r->dirty, w, back));
    keep &= ~back;
  }
  return keep;
}

/* The place for a new stream of len bytes of tensor t: its own when it
 * fits, else the spill room; 0 when neither has room. */
static int place(ibp_region_rec *r, ibp_region_priv *p, uint64_t t,
                 size_t len) {
  if (len <= p->room[t])
    return 1;
  if (len > r->shadow_bytes - p->spill_top)
    return 0;
  r->offsets[t] = p->spill_top;
  p->room[t] = (uint32_t)len;
  p->spill_top += len;
  return 1;
}

/* Step 4 for word w: rewrites the streams of `keep` (which stays the set
 * rewritten); returns how many. */
static uint64_t rewrite(ibp_region_rec *r, uint64_t w, uint32_t *keep,
                        uint8_t *tmp) {
  ibp_region_priv *p = r->priv;
  const uint32_t R = r->params.tensor_bytes;
  uint32_t back = 0;
  for (uint32_t b = *keep; b; b &= b - 1) {
    uint64_t t = w * 32 + (uint64_t)__builtin_ctz(b);
    int compressed = 0;
    size_t len = ibp_compress_tensor(
        &r->params, (const uint8_t *)r->base + t * R, tmp, &compressed);
    if (compressed && place(r, p, t, len)) {
      memcpy((uint8_t *)r->shadow + r->offsets[t], tmp, len);
      r->lengths[t] = (uint32_t)len;
    } else {
      back |= b & -b; /* served raw */
    }
  }
  if (back)
    atomic_fetch_add(&r->dirty_tensors, set_bits(r->dirty, w, back));
  *keep &= ~back;
  return (uint64_t)__builtin_popcount(*keep);
}

/* Step 4's upload: offsets and lengths to every device r is ready on. */
static int upload(const ibp_driver *d, ibp_region_rec *r) {
  ibp_region_priv *p = r->priv;
  const uint64_t n = r->summary.tensors;
  int ok = 1;
  for (int i = 0; ok && i < IBP_REGISTRY_MAX_DEVICES; i++) {
    if (atomic_load(&r->devices[i].state) != IBP_DEVICE_READY)
      continue;
    CUcontext ignored;
    CUstream s = NULL;
    if (d->cuCtxPushCurrent(p->dev[i].ctx) != CUDA_SUCCESS)
      return -1;
    ok = d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
         d->cuMemcpyHtoDAsync(r->devices[i].offsets, r->offsets,
                              n * sizeof *r->offsets, s) == CUDA_SUCCESS &&
         d->cuMemcpyHtoDAsync(r->devices[i].lengths, r->lengths,
                              n * sizeof *r->lengths, s) == CUDA_SUCCESS &&
         d->cuStreamSynchronize(s) == CUDA_SUCCESS;
    if (s)
      d->cuStreamDestroy(s);
    d->cuCtxPopCurrent(&ignored);
  }
  return ok ? 0 : -1;
}

/* The snapshot S: dirty tensors stored compressed (raw ones stay dirty:
 * they have no place in the shadow). */
static uint64_t snapshot(ibp_region_rec *r, uint32_t *s, uint64_t words) {
  uint64_t any = 0;
  for (uint64_t w = 0; w < words; w++) {
    uint32_t f;
    memcpy(&f, r->flags + 4 * w, 4); /* flags are padded to whole words */
    s[w] = atomic_load(&r->dirty[w]) & f;
    any |= s[w];
  }
  return any;
}

/* The places start as the packed streams (first refresh). */
static int init_room(ibp_region_rec *r, ibp_region_priv *p, uint64_t n) {
  if (!p->room && (p->room = malloc((size_t)(n ? n : 1) * 4)) != NULL) {
    memcpy(p->room, r->lengths, (size_t)n * sizeof *p->room);
    p->spill_top = r->offsets[n];
  }
  return p->room != NULL;
}

void ibp__refresh_region(ibp_region_rec *r) {
  const ibp_driver *d = ibp__driver();
  ibp_region_priv *p = r->priv;
  const uint64_t n = r->summary.tensors, words = (n + 31) / 32;
  const int tracked = r->rule.track == IBP_TRACK_PROTECT;
  uint32_t *s = calloc(words ? words : 1, sizeof *s);
  uint8_t *tmp = malloc((size_t)r->params.tensor_bytes + 16);
  uint64_t count = 0;
  /* a region being released (pinned_released waits for this job) or
   * demoted is left alone */
  if (!d || !s || !tmp || !r->busy || atomic_load(&r->removed) ||
      ibp_region_state_get(r) != IBP_REGION_READY || !init_room(r, p, n) ||
      (tracked && ibp__track_reprotect(r) != 0))
    goto out;
  if (tracked)
    ibp__track_quiesce();
  if (!snapshot(r, s, words))
    goto out;
  atomic_store(&p->refreshing, 1);
  for (uint64_t w = 0; w < words; w++)
    if (s[w])
      atomic_fetch_or(&r->busy[w], s[w]);
  if (wait_kernels(d, r) == 0) {
    for (uint64_t w = 0; w < words; w++)
      s[w] = s[w] ? take(r, w, s[w], tracked) : 0;
    if (ibp__dtoh_wait() == 0) {
      for (uint64_t w = 0; w < words; w++)
        count += s[w] ? rewrite(r, w, &s[w], tmp) : 0;
      /* A kernel launched during the refresh may have read a tensor's old
       * offset or length before the upload and find it no longer busy
       * after: all such kernels finish before busy is cleared. */
      if (count && (upload(d, r) != 0 || wait_kernels(d, r) != 0)) {
        for (uint64_t w = 0; w < words; w++)
          if (s[w])
            atomic_fetch_add(&r->dirty_tensors, set_bits(r->dirty, w, s[w]));
        count = 0;
      }
    } else { /* cannot know what landed: all dirty again */
      for (uint64_t w = 0; w < words; w++)
        if (s[w])
          atomic_fetch_add(&r->dirty_tensors, set_bits(r->dirty, w, s[w]));
    }
  }
  for (uint64_t w = 0; w < words; w++)
    atomic_store(&r->busy[w], 0);
  atomic_store(&p->refreshing, 0);
  atomic_fetch_add(&p->refreshes, 1);
  atomic_store(&p->dirty_floor, atomic_load(&r->dirty_tensors));
  atomic_fetch_add(&r->tensors_recompressed, count);
  ibp__log(IBP_LOG_DEBUG, "region '%s': %llu tensors recompressed", r->name,
           (unsigned long long)count);
out:
  free(s);
  free(tmp);
  atomic_store(&p->refresh_pending, 0);
}
