/* fuzz_stage's device decoder (stage_device.h).  The destination holds
 * what the stream's IBP part decodes to -- the CPU's tensor with the field
 * zeroed --, the stage part starts where the IBP part ends (parsed here
 * from the stream's bitmap, docs/FORMAT.md §9.1), and the kernel ORs the
 * field in. */
#include "stage_device.h"

#ifndef IBP_FUZZ_DEVICE

int stage_device_agrees(const ibp_params *p, const ibp_stage *st,
                        const uint8_t *src, size_t len, unsigned lead,
                        const uint8_t *want) {
  (void)p, (void)st, (void)src, (void)len, (void)lead, (void)want;
  return -1;
}

int stage_device_bounded(const ibp_params *p, const ibp_stage *st,
                         const uint8_t *src, size_t len, unsigned lead) {
  (void)p, (void)st, (void)src, (void)len, (void)lead;
  return -1;
}

#else

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp_kernels.h"
#include "kernels_emu.h"

#define GUARD 16u

static uint32_t keep_bits(const uint8_t *mask, uint32_t b0, uint32_t b1) {
  uint32_t n = 0;
  for (uint32_t b = b0; b < b1; b++)
    n += 8 - (uint32_t)__builtin_popcount(mask[b]);
  return n;
}

/* Bit where the IBP part of the stream ends: no bitmap, every bit outside
 * Mask; else the bitmap's chunks, each fitting (its bits outside Mask) or
 * not (all of its bits). */
static uint64_t ibp_part_end(const ibp_params *p, int no_bitmap,
                             const uint8_t *src, size_t len) {
  const uint32_t R = p->tensor_bytes, c = p->chunk_bytes;
  if (no_bitmap)
    return keep_bits(p->mask, 0, R);
  uint64_t bits = 0, j = 0;
  for (uint32_t b0 = 0; b0 < R; b0 += c, j++) {
    const uint32_t b1 = b0 + c < R ? b0 + c : R;
    const int fit = j / 8 < len && ((src[j / 8] >> (j % 8)) & 1);
    bits += 1 + (fit ? keep_bits(p->mask, b0, b1) : 8 * (b1 - b0));
  }
  return bits;
}

int stage_device_agrees(const ibp_params *p, const ibp_stage *st,
                        const uint8_t *src, size_t len, unsigned lead,
                        const uint8_t *want) {
  const uint32_t R = p->tensor_bytes;
  ibp_kernel_stage ks;
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_STAGE_EXP);
  if (!entry || ibp_kernels_stage_exp(st, p->mask, R, &ks) != 0 || !ks.dtype)
    return -1;
  const uint64_t first = ibp_part_end(p, ks.no_bitmap != 0, src, len);
  /* The stream at byte `lead` (0 .. 3) of a word, in exactly what the
   * device decoder may read (kernels/stage_exp_dev.cuh): the words that
   * hold the stream's bytes -- from the aligned word of its first -- and
   * the one word after them, nothing else (ASan sees a read past that
   * word; the bytes before the stream in its first word are 0xA5, and
   * nothing past the stream decides the bytes that agree) */
  lead &= 3u;
  const size_t words = (lead + len + 3) / 4 + 1;
  uint8_t *streams = malloc(4 * words), *dst = malloc(R + 2 * GUARD);
  uint8_t *expect = malloc(R + 2 * GUARD);
  int agree = -1;
  if (streams && dst && expect && first <= 8 * (uint64_t)len) {
    memset(streams, 0xA5, 4 * words);
    memcpy(streams + lead, src, len);
    memset(dst, 0xA5, R + 2 * GUARD);
    memset(expect, 0xA5, R + 2 * GUARD);
    if (want) {
      ibp_stage_strip(st, want, dst + GUARD, R);
      memcpy(expect + GUARD, want, R);
    }
    const uint64_t offset = lead;
    const uint32_t length = (uint32_t)len, first_bits = (uint32_t)first;
    ibp_stage_exp_args a;
    memset(&a, 0, sizeof a);
    a.streams = streams;
    a.offsets = &offset;
    a.lengths = &length;
    a.first_bits = &first_bits;
    a.stages = &ks;
    a.dst = dst + GUARD;
    a.tensors = 1;
    a.k = 1;
    a.w0 = 0;
    a.w1 = R;
    ibp_kernel_plan plan;
    ibp_kernels_plan_stage_exp(1, 1, 1, &plan);
    simt_launch l = {
        entry, &a, {plan.grid, 1, 1}, {plan.block, 1, 1}, plan.dynamic_shared};
    char err[512] = "";
    if (simt_run(&l, NULL, err, sizeof err) != 0) {
      fprintf(stderr, "stage_device: emulator: %s\n", err);
      agree = 0;
    } else {
      /* without `want`, only the guards: a malformed stream may decode
       * to any bytes of the tensor, never outside it */
      agree = want
                  ? memcmp(dst, expect, R + 2 * GUARD) == 0
                  : memcmp(dst, expect, GUARD) == 0 &&
                        memcmp(dst + GUARD + R, expect + GUARD + R, GUARD) == 0;
      if (!agree)
        fprintf(stderr, want ? "stage_device: the device decoder's bytes "
                               "differ\n"
                             : "stage_device: the device decoder wrote "
                               "outside the tensor\n");
    }
  }
  free(streams);
  free(dst);
  free(expect);
  return agree;
}

int stage_device_bounded(const ibp_params *p, const ibp_stage *st,
                         const uint8_t *src, size_t len, unsigned lead) {
  return stage_device_agrees(p, st, src, len, lead, NULL);
}

#endif
