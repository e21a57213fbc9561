/*
 * The immutable lookup structure.
 *
 * Regions sorted by base and non-overlapping touch buckets in nondecreasing
 * order, so walking the regions and, for each, its buckets yields (bucket,
 * region) pairs already grouped by bucket: `lists` is that walk, and each
 * hash slot points at one bucket's run.  Memory: one pointer per (region,
 * bucket) pair plus 16 bytes per slot (at least twice the pairs); a 64 GiB
 * region touches 32768 buckets (~0.8 MiB).
 */
#include "registry_internal.h"

#include <stdlib.h>

static uint64_t bucket_of(uintptr_t addr) {
  return (uint64_t)addr >> IBP_REGISTRY_BUCKET_SHIFT;
}

static uint64_t hash_bucket(uint64_t b) {
  return (b * 0x9E3779B97F4A7C15ull) >> 20;
}

static uintptr_t last_byte(const ibp_region_rec *r) {
  return r->base + (uintptr_t)(r->bytes - 1);
}

static size_t count_pairs(ibp_region_rec *const *sorted, size_t n) {
  size_t pairs = 0;
  for (size_t i = 0; i < n; i++)
    pairs += bucket_of(last_byte(sorted[i])) - bucket_of(sorted[i]->base) + 1;
  return pairs;
}

static uint64_t table_size(size_t pairs) {
  uint64_t size = 16;
  while (size < 2 * (uint64_t)pairs)
    size <<= 1;
  return size;
}

static ibp__slot *slot_for(const ibp__snapshot *s, uint64_t key) {
  uint64_t i = hash_bucket(key) & s->mask;
  while (s->slots[i].key != 0 && s->slots[i].key != key)
    i = (i + 1) & s->mask;
  return &s->slots[i];
}

static void fill(ibp__snapshot *s, ibp_region_rec *const *sorted) {
  uint32_t at = 0;
  for (size_t i = 0; i < s->n; i++) {
    s->by_base[i] = sorted[i];
    uint64_t last = bucket_of(last_byte(sorted[i]));
    for (uint64_t b = bucket_of(sorted[i]->base); b <= last; b++) {
      ibp__slot *slot = slot_for(s, b + 1);
      if (slot->key == 0) {
        slot->key = b + 1;
        slot->first = at;
      }
      slot->count++;
      s->lists[at++] = sorted[i];
    }
  }
}

ibp__snapshot *ibp__snapshot_build(ibp_region_rec *const *sorted, size_t n) {
  size_t pairs = count_pairs(sorted, n);
  if (pairs > UINT32_MAX / 2)
    return NULL;
  uint64_t size = table_size(pairs);
  ibp__snapshot *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->n = n;
  s->mask = size - 1;
  s->by_base = malloc((n ? n : 1) * sizeof *s->by_base);
  s->lists = malloc((pairs ? pairs : 1) * sizeof *s->lists);
  s->slots = calloc(size, sizeof *s->slots);
  if (s->by_base == NULL || s->lists == NULL || s->slots == NULL) {
    ibp__snapshot_free(s);
    return NULL;
  }
  fill(s, sorted);
  return s;
}

void ibp__snapshot_free(ibp__snapshot *s) {
  if (s == NULL)
    return;
  free(s->by_base);
  free(s->lists);
  free(s->slots);
  free(s);
}

size_t ibp__snapshot_lower_bound(const ibp__snapshot *s, uintptr_t addr) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->by_base[mid]->base < addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The lowest region of bucket b's run overlapping [first, last]. */
static ibp_region_rec *scan_bucket(const ibp__snapshot *s, uint64_t b,
                                   uintptr_t first, uintptr_t last) {
  const ibp__slot *slot = slot_for(s, b + 1);
  for (uint32_t i = 0; i < slot->count; i++) {
    ibp_region_rec *r = s->lists[slot->first + i];
    if (r->base > last)
      return NULL;
    if (last_byte(r) >= first)
      return r;
  }
  return NULL;
}

/* O(log n): the region containing `first`, else the first starting in
 * (first, last]. */
static ibp_region_rec *search_sorted(const ibp__snapshot *s, uintptr_t first,
                                     uintptr_t last) {
  size_t i = ibp__snapshot_lower_bound(s, first);
  if (i > 0 && last_byte(s->by_base[i - 1]) >= first)
    return s->by_base[i - 1];
  if (i < s->n && s->by_base[i]->base <= last)
    return s->by_base[i];
  return NULL;
}

ibp_region_rec *ibp__snapshot_overlap(const ibp__snapshot *s, uintptr_t first,
                                      uintptr_t last) {
  uint64_t b0 = bucket_of(first), b1 = bucket_of(last);
  ibp_region_rec *r = scan_bucket(s, b0, first, last);
  if (r != NULL || b1 == b0)
    return r;
  if (b1 - b0 > 1)
    return search_sorted(s, first, last);
  return scan_bucket(s, b1, first, last);
}
