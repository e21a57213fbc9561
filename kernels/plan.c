/* Host-side launch planning for the kernels in ibp_decompress.cu: the
 * fields of the launch ABI that depend on the parameters, and the grid. */
#include "ibp_kernels.h"

#define WARPS_PER_BLOCK 4u
#define BLOCKS_PER_SM 16u

static unsigned popcount8(uint8_t v) {
  unsigned n = 0;
  for (; v; v &= (uint8_t)(v - 1))
    n++;
  return n;
}

static unsigned grid_for(uint64_t units, unsigned warps, unsigned sms) {
  uint64_t want = (units + warps - 1) / warps;
  uint64_t cap = (uint64_t)(sms ? sms : 1) * BLOCKS_PER_SM;
  return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

int ibp_kernels_plan_decompress(ibp_decompress_args *a,
                                const uint8_t *host_mask, unsigned max_shared,
                                unsigned sms, ibp_kernel_plan *plan) {
  const uint32_t R = a->tensor_bytes, c = a->chunk_bytes;
  if (R == 0 || !(c == 1 || c == 2 || c == 4 || c == 8) || !host_mask)
    return -1;
  /* the shortest stream: every chunk fits, only non-mask bits travel */
  uint64_t bits = (R + c - 1) / c + 8ull * R;
  for (uint32_t i = 0; i < R; i++)
    bits -= popcount8(host_mask[i]);
  a->min_stream_bytes = (uint32_t)((bits + 7) / 8);
  /* a whole stream (< R bytes) after up to 15 bytes of alignment, plus
   * the 16 bytes the 128-bit stream reads may look past it */
  a->stage_bytes = (R + 32 + 15) & ~15u;
  /* two buffers per warp (prefetch) when they fit, else one */
  unsigned warps = WARPS_PER_BLOCK;
  a->stage_buffers = 2;
  while (warps > 1 && (uint64_t)warps * 2 * a->stage_bytes > max_shared)
    warps /= 2;
  if ((uint64_t)warps * 2 * a->stage_bytes > max_shared)
    a->stage_buffers = 1;
  if ((uint64_t)warps * a->stage_buffers * a->stage_bytes > max_shared)
    return -1;
  /* Mask/Bitval in shared memory when they fit beside the buffers */
  const uint32_t masks = (R + 15) & ~15u;
  uint64_t staging = (uint64_t)warps * a->stage_buffers * a->stage_bytes;
  a->mask_shared_bytes = staging + 2ull * masks <= max_shared ? masks : 0;
  uint64_t g0 = a->first_tensor * R + a->first_offset;
  uint64_t last = a->length ? (g0 + a->length - 1) / R : a->first_tensor;
  if (last > a->tensors)
    last = a->tensors;
  plan->block = warps * 32;
  plan->dynamic_shared = (unsigned)(staging + 2ull * a->mask_shared_bytes);
  plan->grid = grid_for(last - a->first_tensor + 1, warps, sms);
  return 0;
}

void ibp_kernels_plan_gather(uint64_t count, unsigned sms,
                             ibp_kernel_plan *plan) {
  plan->block = WARPS_PER_BLOCK * 32;
  plan->dynamic_shared = 0;
  plan->grid = grid_for(count, WARPS_PER_BLOCK, sms);
}

void ibp_kernels_plan_range(const ibp_decompress_args *a, unsigned sms,
                            ibp_kernel_plan *plan) {
  const uint32_t R = a->tensor_bytes;
  uint64_t g0 = a->first_tensor * R + a->first_offset;
  uint64_t last = a->length ? (g0 + a->length - 1) / R : a->first_tensor;
  if (last > a->tensors)
    last = a->tensors;
  plan->grid = grid_for(last - a->first_tensor + 1, plan->block / 32, sms);
}
