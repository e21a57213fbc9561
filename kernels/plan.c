/* Host-side launch planning for the kernels in ibp_decompress.cu: the
 * fields of the launch ABI that depend on the parameters, and the grid. */
#include "ibp_kernels.h"

#include "ibp/chunk_widths.h"

#define WARPS_PER_BLOCK 4u
#define BLOCKS_PER_SM 16u

/* A walk covers about this many bytes of original data: long enough that
 * the one sector two walks both fetch (where one ends and the next
 * begins) costs under 1 % of the bytes at 50 % saved... */
#define WALK_BYTES 8192u
#define WALK_MAX 64u
/* ... but copies too small to give every SM this many walks get shorter
 * walks: on a GPU, warps in flight matter more than one sector each. */
#define MIN_WALKS_PER_SM WARPS_PER_BLOCK

static unsigned grid_for(uint64_t units, unsigned warps, unsigned sms) {
  uint64_t want = (units + warps - 1) / warps;
  uint64_t cap = (uint64_t)(sms ? sms : 1) * BLOCKS_PER_SM;
  return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

/* Dynamic shared memory a warp uses. */
static uint64_t warp_bytes(unsigned buffers, uint32_t stage_bytes) {
  return (uint64_t)buffers * stage_bytes + IBP_KERNEL_JOB_BYTES;
}

uint64_t ibp_kernels_copy_units(const ibp_decompress_args *a) {
  const uint64_t R = a->tensor_bytes;
  uint64_t g0 = a->first_tensor * R + a->first_offset;
  uint64_t last = a->length ? (g0 + a->length - 1) / R : a->first_tensor;
  if (last > a->tensors)
    last = a->tensors;
  return last - a->first_tensor + 1;
}

/* Per warp of a block of `warps`: its share of a block decode's round
 * buffer (IBP_KERNEL_ROUND_BYTES a block). */
static uint32_t round_share(unsigned warps) {
  return ((IBP_KERNEL_ROUND_BYTES + warps - 1) / warps + 15) & ~15u;
}

static uint32_t walk_for(uint32_t R, uint64_t units, unsigned sms) {
  uint64_t walk = WALK_BYTES / R;
  uint64_t min_walks = (uint64_t)(sms ? sms : 1) * MIN_WALKS_PER_SM;
  uint64_t fill = (units + min_walks - 1) / min_walks;
  if (walk > fill)
    walk = fill;
  if (walk > WALK_MAX)
    walk = WALK_MAX;
  return walk < 1 ? 1 : (uint32_t)walk;
}

int ibp_kernels_plan_decompress(ibp_decompress_args *a, unsigned max_shared,
                                unsigned sms, ibp_kernel_plan *plan) {
  return ibp_kernels_plan_decompress_warps(a, max_shared, sms, WARPS_PER_BLOCK,
                                           plan);
}

int ibp_kernels_plan_decompress_warps(ibp_decompress_args *a,
                                      unsigned max_shared, unsigned sms,
                                      unsigned most_warps,
                                      ibp_kernel_plan *plan) {
  const uint32_t R = a->tensor_bytes, c = a->chunk_bytes;
  if (R == 0 || !ibp_chunk_width_valid(c) || most_warps < 1 || most_warps > 16)
    return -1;
  if (a->stages && R >= IBP_KERNEL_BLOCK_R)
    return -1; /* a block decode stages rounds, not the stage's part */
  unsigned warps = most_warps;
  if (R >= IBP_KERNEL_BLOCK_R) { /* a block per tensor, in rounds */
    a->stage_bytes = round_share(warps);
    a->stage_buffers = 1;
  } else {
    /* a whole stream (< R bytes) after up to 15 bytes of alignment, up to
     * 31 bytes of the next stream (fetch_end), plus the 16 bytes the
     * 128-bit stream reads may look past it */
    a->stage_bytes = (R + 64 + 15) & ~15u;
    if (a->stage_bytes < IBP_KERNEL_GROUP_BYTES) /* room for a group */
      a->stage_bytes = IBP_KERNEL_GROUP_BYTES;
    /* two buffers per warp (prefetch) when they fit, else one; each warp
     * also has its job slots */
    a->stage_buffers = 2;
    while (warps > 1 && warp_bytes(2, a->stage_bytes) * warps > max_shared)
      warps /= 2;
    if (warp_bytes(2, a->stage_bytes) * warps > max_shared)
      a->stage_buffers = 1;
  }
  if (warp_bytes(a->stage_buffers, a->stage_bytes) * warps > max_shared)
    return -1;
  const uint32_t k = a->clusters > 1 ? a->clusters : 1;
  if (k > 1 && (!a->cluster_ids || k > 256))
    return -1;
  if (!a->plan || a->plan_stages > IBP_PLAN_MAX_STAGES ||
      (c == 1 && a->plan_stages != 3)) /* (ibp_kernels_plan_stages) */
    return -1;
  a->plan_stride = (uint32_t)ibp_kernels_plan_bytes(R, 1, a->plan_stages);
  const uint64_t staging = warp_bytes(a->stage_buffers, a->stage_bytes) * warps;
  plan->block = warps * 32;
  plan->dynamic_shared = (unsigned)staging;
  ibp_kernels_plan_range(a, sms, plan);
  return 0;
}

void ibp_kernels_plan_gather(uint64_t count, unsigned sms,
                             ibp_kernel_plan *plan) {
  plan->block = WARPS_PER_BLOCK * 32;
  plan->dynamic_shared = 0;
  plan->grid = grid_for(count, WARPS_PER_BLOCK, sms);
}

void ibp_kernels_plan_stage_exp(uint64_t tensors, uint32_t k, unsigned sms,
                                ibp_kernel_plan *plan) {
  plan->block = WARPS_PER_BLOCK * 32;
  plan->dynamic_shared = k * IBP_KERNEL_STAGE_TABLE * 2;
  plan->grid = grid_for(tensors, WARPS_PER_BLOCK, sms);
}

void ibp_kernels_plan_range(ibp_decompress_args *a, unsigned sms,
                            ibp_kernel_plan *plan) {
  const uint64_t units = ibp_kernels_copy_units(a);
  if (a->tensor_bytes >= IBP_KERNEL_BLOCK_R) { /* a block per unit */
    a->walk = 1;
    plan->grid = grid_for(units, 1, sms);
    return;
  }
  a->walk = walk_for(a->tensor_bytes, units, sms);
  plan->grid = grid_for((units + a->walk - 1) / a->walk, plan->block / 32, sms);
}

uint64_t ibp_kernels_job_units(const ibp_batch_job *j,
                               const ibp_decompress_args *region) {
  if (!region)
    return (j->length + IBP_BATCH_RAW_UNIT - 1) / IBP_BATCH_RAW_UNIT;
  ibp_decompress_args a = *region;
  a.first_tensor = j->src / a.tensor_bytes;
  a.first_offset = (uint32_t)(j->src % a.tensor_bytes);
  a.length = j->length;
  return ibp_kernels_copy_units(&a);
}

/* Units per warp walk of a batch of `units` units, the largest tensor R
 * bytes (0: raw jobs only). */
static uint32_t batch_walk(uint64_t units, uint32_t R, unsigned sms) {
  uint64_t walk = WALK_BYTES / (R ? R : IBP_BATCH_RAW_UNIT);
  uint64_t per_sm = (units + (sms ? sms : 1) - 1) / (sms ? sms : 1);
  if (walk > per_sm)
    walk = per_sm;
  if (walk > WALK_MAX)
    walk = WALK_MAX;
  return walk < 1 ? 1 : (uint32_t)walk;
}

unsigned ibp_kernels_decode_sms(uint64_t grid, unsigned block_threads,
                                unsigned sms) {
  uint64_t warps = grid * (block_threads / 32);
  uint64_t eq = (warps + IBP_STAGED_WARPS - 1) / IBP_STAGED_WARPS;
  if (sms < 1)
    sms = 1;
  return eq < 1 ? 1 : eq > sms ? sms : (unsigned)eq;
}

unsigned ibp_kernels_batch_sms(uint64_t units, uint32_t tensor_bytes,
                               unsigned sms) {
  uint32_t walk = batch_walk(units, tensor_bytes, sms);
  uint64_t grid =
      tensor_bytes >= IBP_KERNEL_BLOCK_R
          ? grid_for(units, 1, sms)
          : grid_for((units + walk - 1) / walk, WARPS_PER_BLOCK, sms);
  return ibp_kernels_decode_sms(grid, WARPS_PER_BLOCK * 32, sms);
}

void ibp_kernels_plan_batch(ibp_batch_args *b,
                            const ibp_decompress_args *regions,
                            unsigned nregions, unsigned max_shared,
                            unsigned sms, ibp_kernel_plan *plan) {
  uint32_t R = 0, stage = 0, buffers = 2;
  unsigned warps = WARPS_PER_BLOCK;
  for (unsigned i = 0; i < nregions; i++) {
    const ibp_decompress_args *a = &regions[i];
    R = a->tensor_bytes > R ? a->tensor_bytes : R;
    stage = a->stage_bytes > stage ? a->stage_bytes : stage;
    buffers = a->stage_buffers < buffers ? a->stage_buffers : buffers;
  }
  const int by_block = R >= IBP_KERNEL_BLOCK_R;
  if (by_block) { /* every unit by a block, in rounds */
    stage = round_share(warps);
    buffers = 1;
  }
  /* each template fits one warp's buffers (ibp_kernels_plan_decompress),
   * so the largest stage with the fewest buffers does too */
  while (warps > 1 && warp_bytes(buffers, stage) * warps > max_shared)
    warps /= 2;
  b->stage_bytes = stage;
  b->stage_buffers = by_block ? 0 : buffers;
  b->walk = by_block ? 1 : batch_walk(b->units, R, sms);
  plan->block = warps * 32;
  plan->dynamic_shared = (unsigned)(warp_bytes(buffers, stage) * warps);
  plan->grid = by_block
                   ? grid_for(b->units, 1, sms)
                   : grid_for((b->units + b->walk - 1) / b->walk, warps, sms);
}
