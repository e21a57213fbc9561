/*
 * Warp collectives against CPU references, for many seeds and block shapes:
 * scans through shfl_up and the one-collective scan, reductions through
 * shfl_xor / shfl_down, shfl broadcast and rotation, the keep-own-value edges
 * of every shuffle, and ballot / any / all with full, partial and concurrent
 * disjoint masks.
 */
#include "simt_test.h"

#include <vector>

using namespace simt_test;

namespace {

constexpr unsigned kFull = 0xffffffffu;

struct Args {
  uint32_t seed;
  uint32_t *out; /* kOuts words per global thread */
};
constexpr unsigned kOuts = 12;

uint32_t input(uint32_t seed, unsigned gtid) {
  return hash32(seed * 7919u + gtid) % 1000u;
}

/* The mask of the lanes present in the calling thread's warp. */
unsigned warp_mask() {
  unsigned n = block_threads() - tid() / 32 * 32;
  return n >= 32 ? kFull : (1u << n) - 1u;
}

void k_collectives(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  unsigned g = block_linear() * block_threads() + tid();
  unsigned ln = lane(), mask = warp_mask();
  uint32_t v = input(a->seed, g);
  uint32_t *o = a->out + (size_t)g * kOuts;

  /* Inclusive scan (Hillis-Steele through shfl_up). */
  uint32_t scan = v;
  for (unsigned d = 1; d < 32; d *= 2) {
    uint32_t up = simt_shfl_up(mask, scan, d);
    if (ln >= d)
      scan += up;
  }
  o[0] = scan;
  o[1] = scan - v; /* exclusive */
  unsigned total = 0;
  o[11] = simt_scan_add(mask, v, &total);
  if (total != simt_shfl(mask, scan, 31 - __builtin_clz(mask)))
    o[11] = ~0u; /* the last present lane's inclusive sum is the total */

  /* Butterfly sum: every lane gets the total.  Only for full warps. */
  if (mask == kFull) {
    uint32_t s = v;
    for (unsigned m = 16; m; m /= 2)
      s += simt_shfl_xor(mask, s, m);
    o[2] = s;
    uint32_t t = v;
    for (unsigned d = 16; d; d /= 2)
      t += simt_shfl_down(mask, t, d);
    o[3] = t; /* lane 0 holds the total */
  }

  /* Broadcast and rotation; a source lane >= 32 wraps (mod 32). */
  unsigned n = 32 - __builtin_clz(mask); /* lanes present */
  o[4] = simt_shfl(mask, v, (int)(a->seed % n));
  o[5] = simt_shfl(mask, v, (int)((ln + 3) % n + 32));

  /* Shuffles whose source falls outside the warp keep their own value. */
  o[6] = simt_shfl_up(mask, v, ln + 1);
  o[7] = simt_shfl_down(mask, v, 40);
  o[8] = simt_shfl_xor(mask, v, 32);

  /* Votes. */
  int pred = (v % 3) == 0;
  o[9] = simt_ballot(mask, pred);
  o[10] = (uint32_t)simt_any(mask, pred) | (uint32_t)simt_all(mask, 1) << 1 |
          (uint32_t)simt_all(mask, pred) << 2;
  simt_syncwarp(mask);
}

void check_collectives(uint32_t seed, simt_dim3 grid, simt_dim3 block) {
  unsigned bt = block.x * block.y * block.z;
  unsigned total = bt * grid.x * grid.y * grid.z;
  std::vector<uint32_t> out((size_t)total * kOuts, 0);
  Args a{seed, out.data()};
  simt_set_seed(seed);
  ok(k_collectives, &a, grid, block);
  for (unsigned b = 0; b < total / bt; b++) {
    for (unsigned w = 0; w * 32 < bt; w++) {
      unsigned first = b * bt + w * 32;
      unsigned n = bt - w * 32 < 32 ? bt - w * 32 : 32;
      uint32_t v[32], sum = 0, ballot = 0;
      for (unsigned l = 0; l < n; l++) {
        v[l] = input(seed, first + l);
        sum += v[l];
        if (v[l] % 3 == 0)
          ballot |= 1u << l;
      }
      uint32_t incl = 0;
      for (unsigned l = 0; l < n; l++) {
        const uint32_t *o = &out[(size_t)(first + l) * kOuts];
        incl += v[l];
        CHECK_EQ(o[0], incl);
        CHECK_EQ(o[1], incl - v[l]);
        CHECK_EQ(o[11], incl - v[l]);
        if (n == 32) {
          CHECK_EQ(o[2], sum);
          if (l == 0)
            CHECK_EQ(o[3], sum);
        }
        CHECK_EQ(o[4], v[seed % n]);
        CHECK_EQ(o[5], v[(l + 3) % n]);
        CHECK_EQ(o[6], v[l]);
        CHECK_EQ(o[7], v[l]);
        CHECK_EQ(o[8], v[l]);
        CHECK_EQ(o[9], ballot);
        unsigned all_mask = n == 32 ? kFull : (1u << n) - 1u;
        uint32_t votes = (ballot != 0) | 1u << 1 | (ballot == all_mask) << 2;
        CHECK_EQ(o[10], votes);
      }
    }
  }
}

/* Two halves of a warp run different collectives at the same time. */
struct SplitArgs {
  uint32_t *out;
};

void k_split(const void *p) {
  const SplitArgs *a = static_cast<const SplitArgs *>(p);
  unsigned ln = lane();
  unsigned half = ln < 16 ? 0x0000ffffu : 0xffff0000u;
  uint32_t v = ln * 3 + 1;
  uint32_t r;
  if (ln < 16)
    r = simt_shfl_xor(half, v, 1);
  else
    r = simt_shfl(half, v, 16 + (ln + 1) % 16);
  uint32_t b = simt_ballot(half, ln % 2);
  a->out[ln * 2] = r;
  a->out[ln * 2 + 1] = b;
}

void check_split(uint32_t seed) {
  uint32_t out[64];
  SplitArgs a{out};
  simt_set_seed(seed);
  ok(k_split, &a, dim(1), dim(32));
  for (unsigned l = 0; l < 32; l++) {
    uint32_t want = l < 16 ? (l ^ 1) * 3 + 1 : (16 + (l + 1) % 16) * 3 + 1;
    CHECK_EQ(out[l * 2], want);
    CHECK_EQ(out[l * 2 + 1], l < 16 ? 0x0000aaaau : 0xaaaa0000u);
  }
}

} // namespace

int main() {
  const simt_dim3 shapes[] = {dim(32), dim(64, 2), dim(8, 4, 3),
                              dim(48), dim(1024),  dim(7, 5, 3)};
  for (uint32_t seed = 1; seed <= 40; seed++) {
    const simt_dim3 &b = shapes[seed % (sizeof shapes / sizeof shapes[0])];
    check_collectives(seed, dim(2, 1, 2), b);
    check_split(seed);
  }
  std::printf("collectives: ok\n");
  return 0;
}
