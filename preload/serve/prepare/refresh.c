/* Recompressing written tensors (serve/prepare/refresh.h).
 *
 * A write marks tensors dirty and the kernel serves them raw from the
 * original.  When a 32nd of a region more is dirty than the last
 * refresh left dirty, the worker recompresses the dirty tensors, each with
 * the region's Mask/Bitval pair (cluster, docs/FORMAT.md §4) that now
 * stores it in the fewest bytes, and clears their bits, so appended or
 * updated data (a KV cache offloaded block by block) is served compressed
 * again.  A new stream goes to the tensor's place in the shadow when it
 * fits there, else to the spill room after the packed streams
 * (docs/FORMAT.md §3; when that is full too, the tensor stays dirty), and
 * the offsets, lengths and cluster ids on the GPU are updated.  Streams are
 * rewritten in place, so no kernel may read them meanwhile, and no write may be
 * lost:
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
 *      compress or fit, upload offsets, lengths and cluster ids to every
 *      device, and
 *      wait for every kernel again: one launched during the refresh may
 *      have read an old offset or length and must not outlive busy (a
 *      failure: all rewritten tensors dirty again).  Then clear busy and
 *      `refreshing`.
 * Each run weighs one for every 32nd of the region it took up (at least
 * one: ibp_refresh.work), and what it left dirty that no refresh can help
 * -- tensors stored raw, or whose stream no longer compresses or fits --
 * is the floor the next one counts from (ibp__refresh_due).  A region
 * refreshed 8 times or more whose work outweighs a quarter of its copies,
 * or half of whose tensors are stuck -- their new bytes no longer compress
 * or fit, or its pages could not be protected again REFUSED_MAX times in a
 * row -- is demoted (substitute.c).
 *
 * Here `s` is the served region (serve/region.h): its layout is rewritten,
 * its refresh state drives the protocol, its track.dirty bits are taken. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "serve/prepare/refresh.h"

#include "base/driver.h"
#include "base/log.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/dtoh.h"
#include "serve/prepare/pack.h"
#include "serve/region.h"

#define REFRESH_SHARE 32 /* refresh once 1/32 more of the tensors are dirty */
/* Refreshes whose pages could not be protected again, in a row, before
 * what is dirty counts as stuck (the region's writes can no longer be
 * watched, or a write is always in flight). */
#define REFUSED_MAX 8

int ibp__refresh_due(ibp_region_rec *r) {
  ibp_served_region *s = ibp__served(r);
  /* counted from what the last refresh left dirty that it cannot help
   * (tensors stored raw, or whose stream no longer compresses or fits) */
  uint64_t dirty =
      atomic_load_explicit(&s->track.dirty_tensors, memory_order_relaxed);
  uint64_t floor =
      atomic_load_explicit(&s->refresh.dirty_floor, memory_order_relaxed);
  dirty = dirty > floor ? dirty - floor : 0;
  /* a compact region's pages that came back (read, or rewritten and
   * recompressed) go again at the same pace */
  const int due = ibp__compact_release_due(s, REFRESH_SHARE);
  if ((!due && (dirty == 0 || dirty * REFRESH_SHARE < s->geometry.tensors)) ||
      atomic_load_explicit(&s->refresh.pending, memory_order_relaxed))
    return 0;
  int expected = 0;
  return atomic_compare_exchange_strong(&s->refresh.pending, &expected, 1);
}

/* Step 2's wait: every kernel launched so far in s's contexts finished. */
static int wait_kernels(const ibp_driver *d, ibp_served_region *s) {
  while (atomic_load(&s->refresh.launching))
    sched_yield();
  for (unsigned i = 0; i < IBP_MAX_DEVICES; i++) {
    if (ibp__device_state(s, i) != IBP_DEVICE_READY)
      continue;
    CUcontext ignored;
    if (d->cuCtxPushCurrent(s->dev[i].ctx) != CUDA_SUCCESS)
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

/* Step 3 for word w: clears the dirty bits of m and returns those whose
 * tensors may be rewritten (the others are dirty again). */
static uint32_t take(ibp_served_region *s, uint64_t w, uint32_t m,
                     int tracked) {
  ibp_tracked *t = &s->track;
  const uint32_t R = s->geometry.tensor_bytes;
  uint32_t old = atomic_fetch_and(&t->dirty[w], ~m);
  atomic_fetch_sub(&t->dirty_tensors, (uint64_t)__builtin_popcount(old & m));
  uint32_t keep = m, back = 0;
  for (uint32_t b = m; tracked && b; b &= b - 1) {
    uint64_t i = w * 32 + (uint64_t)__builtin_ctz(b);
    if (!ibp__track_still_protected(t, t->base + i * R, R))
      back |= b & -b;
  }
  if (back) {
    atomic_fetch_add(&t->dirty_tensors, set_bits(t->dirty, w, back));
    keep &= ~back;
  }
  return keep;
}

/* The place for a new stream of len bytes of tensor i: its own when it
 * fits, else the spill room; 0 when neither has room. */
static int place(ibp_served_region *s, uint64_t i, size_t len) {
  ibp_refresh *f = &s->refresh;
  if (len <= f->room[i])
    return 1;
  if (len > s->layout.shadow_bytes - f->spill_top)
    return 0;
  s->layout.offsets[i] = f->spill_top;
  f->room[i] = (uint32_t)len;
  f->spill_top += len;
  return 1;
}

/* Step 4 for word w: rewrites the streams of `keep` (which stays the set
 * rewritten); returns how many, and adds those that stay raw (no longer
 * compress, or find no room) to *raw. */
static uint64_t rewrite(ibp_region_rec *r, ibp_served_region *s, uint64_t w,
                        uint32_t *keep, uint8_t *tmp, uint64_t *raw) {
  ibp_layout *l = &s->layout;
  const uint32_t R = s->geometry.tensor_bytes;
  uint32_t back = 0;
  for (uint32_t b = *keep; b; b &= b - 1) {
    uint64_t i = w * 32 + (uint64_t)__builtin_ctz(b);
    const uint8_t *t = (const uint8_t *)r->base + i * R;
    const uint32_t K = l->clusters.count;
    /* the tensor's best cluster now, which its new bytes may have changed,
     * and its stream as the fill writes it (pack.c: its stage too) */
    const ibp_pack pk = {
        .params = l->clusters.params, .clusters = K, .stages = l->stages};
    const uint32_t id = K > 1 ? ibp__pack_best(&pk, t, tmp + R + 16, NULL) : 0;
    int compressed = 0;
    size_t len = ibp__pack_compress(&pk, id, t, tmp, tmp + R + 16, &compressed);
    if (compressed && place(s, i, len)) {
      memcpy((uint8_t *)l->shadow + l->offsets[i], tmp, len);
      l->lengths[i] = (uint32_t)len;
      ibp__pack_put_id(l->ids, K, i, id);
    } else {
      back |= b & -b; /* served raw */
    }
  }
  if (back)
    atomic_fetch_add(&s->track.dirty_tensors,
                     set_bits(s->track.dirty, w, back));
  *keep &= ~back;
  *raw += (uint64_t)__builtin_popcount(back);
  return (uint64_t)__builtin_popcount(*keep);
}

/* Step 4's upload: offsets, lengths and cluster ids to every device s is
 * ready on. */
static int upload(const ibp_driver *d, ibp_served_region *s) {
  const ibp_layout *l = &s->layout;
  const uint64_t n = s->geometry.tensors;
  const uint64_t id_bytes =
      l->ids ? ibp_cluster_id_bytes(l->clusters.count, n) : 0;
  int ok = 1;
  for (unsigned i = 0; ok && i < IBP_MAX_DEVICES; i++) {
    if (ibp__device_state(s, i) != IBP_DEVICE_READY)
      continue;
    CUcontext ignored;
    CUstream st = NULL;
    if (d->cuCtxPushCurrent(s->dev[i].ctx) != CUDA_SUCCESS)
      return -1;
    ibp__streams_own_begin((int)i); /* serve/choose/streams.h */
    ok = d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
         d->cuMemcpyHtoDAsync(s->dev[i].mem.offsets, l->offsets,
                              n * sizeof *l->offsets, st) == CUDA_SUCCESS &&
         d->cuMemcpyHtoDAsync(s->dev[i].mem.lengths, l->lengths,
                              n * sizeof *l->lengths, st) == CUDA_SUCCESS &&
         (!id_bytes || d->cuMemcpyHtoDAsync(s->dev[i].mem.ids, l->ids, id_bytes,
                                            st) == CUDA_SUCCESS) &&
         d->cuStreamSynchronize(st) == CUDA_SUCCESS;
    if (st)
      d->cuStreamDestroy(st);
    ibp__streams_own_end((int)i);
    d->cuCtxPopCurrent(&ignored);
  }
  return ok ? 0 : -1;
}

/* The snapshot S: dirty tensors stored compressed (raw ones stay dirty:
 * they have no place in the shadow); returns how many. */
static uint64_t snapshot(ibp_served_region *s, uint32_t *set, uint64_t words) {
  uint64_t count = 0;
  for (uint64_t w = 0; w < words; w++) {
    uint32_t f;
    memcpy(&f, s->layout.flags + 4 * w, 4); /* padded to whole words */
    set[w] = atomic_load(&s->track.dirty[w]) & f;
    count += (uint64_t)__builtin_popcount(set[w]);
  }
  return count;
}

/* Dirty tensors stored raw: no refresh can help them. */
static uint64_t dirty_raw(ibp_served_region *s, uint64_t words) {
  uint64_t count = 0;
  for (uint64_t w = 0; w < words; w++) {
    uint32_t f;
    memcpy(&f, s->layout.flags + 4 * w, 4);
    count += (uint64_t)__builtin_popcount(atomic_load(&s->track.dirty[w]) & ~f);
  }
  return count;
}

/* What a refresh of `tried` of n tensors weighs in ibp_refresh.work: one
 * per REFRESH_SHARE-th of the region, at least one. */
static uint64_t work_of(uint64_t tried, uint64_t n) {
  const uint64_t w = n ? tried * REFRESH_SHARE / n : 0;
  return w ? w : 1;
}

/* The places start as the packed streams (first refresh). */
static int init_room(ibp_served_region *s) {
  ibp_refresh *f = &s->refresh;
  const uint64_t n = s->geometry.tensors;
  if (!f->room && (f->room = malloc((size_t)(n ? n : 1) * 4)) != NULL) {
    memcpy(f->room, s->layout.lengths, (size_t)n * sizeof *f->room);
    f->spill_top = s->layout.offsets[n];
  }
  return f->room != NULL;
}

/* Puts the dirty bits of `set` back (the rewrite cannot be trusted). */
static void all_dirty_again(ibp_served_region *s, const uint32_t *set,
                            uint64_t words) {
  for (uint64_t w = 0; w < words; w++)
    if (set[w])
      atomic_fetch_add(&s->track.dirty_tensors,
                       set_bits(s->track.dirty, w, set[w]));
}

void ibp__refresh_region(ibp_region_rec *r) {
  const ibp_driver *d = ibp__driver();
  ibp_served_region *s = ibp__served(r);
  ibp_refresh *f = &s->refresh;
  const uint64_t n = s->geometry.tensors, words = (n + 31) / 32;
  const int tracked =
      r->rule.track == IBP_TRACK_PROTECT || ibp__compact_active(s);
  uint32_t *set = calloc(words ? words : 1, sizeof *set);
  /* a stream (R + 16 bytes) and a scratch tensor (pack.h) */
  uint8_t *tmp = malloc(2 * (size_t)s->geometry.tensor_bytes + 16);
  uint64_t count = 0, tried = 0, raw = 0;
  /* a region being released (pinned_released waits for this job) or
   * demoted is left alone */
  if (!d || !set || !tmp || !f->busy || atomic_load(&r->removed) ||
      ibp_region_state_get(r) != IBP_REGION_READY || !init_room(s))
    goto out;
  if (tracked && ibp__track_reprotect(&s->track) != 0) {
    /* refused (a hooked call writing now: later) or lost (remapped): after
     * REFUSED_MAX refusals in a row no refresh can help what is dirty, and
     * substitute.c demotes it when that is half */
    if (++f->refused >= REFUSED_MAX)
      atomic_store(&f->stuck, atomic_load(&s->track.dirty_tensors));
    goto out;
  }
  f->refused = 0;
  if (tracked)
    ibp__track_quiesce();
  if ((tried = snapshot(s, set, words)) == 0) {
    /* only raw tensors dirty: nothing to do until more are written */
    atomic_store(&f->dirty_floor, dirty_raw(s, words));
    goto out;
  }
  atomic_store(&f->refreshing, 1);
  for (uint64_t w = 0; w < words; w++)
    if (set[w])
      atomic_fetch_or(&f->busy[w], set[w]);
  if (wait_kernels(d, s) == 0) {
    for (uint64_t w = 0; w < words; w++)
      set[w] = set[w] ? take(s, w, set[w], tracked) : 0;
    if (ibp__dtoh_wait() == 0) {
      if (tracked) /* landed: an early sum is older than our read */
        ibp__track_landed(&s->track);
      for (uint64_t w = 0; w < words; w++)
        count += set[w] ? rewrite(r, s, w, &set[w], tmp, &raw) : 0;
      /* A kernel launched during the refresh may have read a tensor's old
       * offset or length before the upload and find it no longer busy
       * after: all such kernels finish before busy is cleared. */
      if (count && (upload(d, s) != 0 || wait_kernels(d, s) != 0)) {
        all_dirty_again(s, set, words);
        count = raw = 0; /* a failure, not raw tensors: the next may help */
      }
    } else { /* cannot know what landed: all dirty again */
      all_dirty_again(s, set, words);
    }
  }
  for (uint64_t w = 0; w < words; w++)
    atomic_store(&f->busy[w], 0);
  atomic_store(&f->refreshing, 0);
  atomic_fetch_add(&f->work, work_of(tried, n)); /* before runs: read after */
  atomic_fetch_add(&f->runs, 1);
  /* tensors written meanwhile are not the floor: the next refresh helps */
  atomic_store(&f->dirty_floor, dirty_raw(s, words) + raw);
  atomic_store(&f->stuck, raw);
  ibp__count(&s->counters, tensors_recompressed, count);
  ibp__log(IBP_LOG_DEBUG, "region '%s': %llu tensors recompressed", r->name,
           (unsigned long long)count);
out:
  /* a compact region's pages that came back since the last release
   * (read, or rewritten and recompressed now), at the refresh's own pace
   * (refresh_maybe) */
  ibp__compact_release(r);
  free(set);
  free(tmp);
  atomic_store(&f->pending, 0);
}
