/*
 * The emulated batch kernel (ibp_decompress_batch) against the original
 * bytes.
 *
 * Random cases: 1-3 regions (random shapes as in test_kernel_decode:
 * every chunk width, data and mask kind, raw, dirty and busy tensors,
 * clusters, misaligned bases; in 5 % of the regions tensors of
 * IBP_KERNEL_BLOCK_R - 128 KiB, when every unit of the batch is decoded
 * or copied by a whole block) and a raw pinned buffer; 1-300 jobs, each a
 * random range of a random region (whole region, whole tensors, one byte,
 * anything; or, in 30 % of the cases, one random whole tensor per job, a
 * gather) or of the raw buffer, written to its own place in one device
 * buffer with random gaps that must stay untouched; the plan's walks or
 * random ones, one block or many.  Every host read must stay inside the
 * pinned ranges (strict reads).
 *
 * Adjacent rows: jobs of one tensor each, consecutive tensors of one
 * region, written to destinations in random order: the sectors read over
 * PCIe stay within 1 % of the stored bytes (the streams of adjacent jobs
 * share the sector between them, as they do within one copy).
 *
 * IBP_TEST_ITERATIONS = random cases (default 3000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

#define MAX_REGIONS 3
#define MAX_SHARED (227u * 1024u)

typedef struct batch_case {
  kcase k[MAX_REGIONS];
  ibp_decompress_args tpl[MAX_REGIONS];
  unsigned regions;
  uint8_t *raw;
  uint64_t raw_bytes;
  ibp_batch_job *jobs;
  uint32_t count;
  uint8_t *dst, *want;
  uint64_t dst_bytes;
} batch_case;

static void shape_for(rng *r, kcase_shape *s) {
  s->R = rng_log_uniform(r, 1, 16384);
  if (rng_chance(r, 0.05)) /* every unit of the batch decoded by a block */
    s->R = rng_log_uniform(r, IBP_KERNEL_BLOCK_R, 131072);
  s->c = rng_chunk(r);
  uint64_t max_n = (s->R > 16384 ? 262144 : 65536) / s->R;
  s->n = 1 + rng_below(r, max_n < 24 ? max_n + 1 : 24);
  s->tail = rng_chance(r, 0.3) ? rng_below(r, s->R) : 0;
  s->orig_misalign = (unsigned)rng_below(r, 128);
  s->packed_misalign = (unsigned)rng_below(r, 128);
  s->data_kind = (int)rng_below(r, DATA_KINDS);
  s->mask_kind = (int)rng_below(r, MASK_KINDS);
  s->dirty_share = rng_chance(r, 0.2) ? 0.3 : 0;
  s->clusters = rng_chance(r, 0.3) ? 1 + (unsigned)rng_below(r, 9) : 1;
}

static void pick_range(rng *r, uint64_t bytes, uint64_t R, uint64_t *off,
                       uint64_t *len) {
  switch (rng_below(r, 4)) {
  case 0:
    *off = 0;
    *len = bytes;
    break;
  case 1: { /* whole tensors (or what is left of the region) */
    uint64_t n = bytes / R ? bytes / R : 1;
    uint64_t a = rng_below(r, n), b = rng_range(r, a, n - 1);
    *off = a * R < bytes ? a * R : 0;
    *len = (b - a + 1) * R;
    if (*off + *len > bytes)
      *len = bytes - *off;
    break;
  }
  case 2:
    *off = rng_below(r, bytes);
    *len = 1;
    break;
  default:
    *off = rng_below(r, bytes);
    *len = rng_range(r, 1, bytes - *off);
  }
}

/* Appends a job copying [off, off+len) of region `region` (or of the raw
 * buffer) after a random gap of the device buffer. */
static void add_job(batch_case *b, rng *r, uint32_t region, uint64_t off,
                    uint64_t len, uint64_t *units) {
  ibp_batch_job *j = &b->jobs[b->count++];
  uint64_t at = b->dst_bytes + rng_below(r, 3);
  const ibp_decompress_args *t =
      region == IBP_BATCH_RAW ? NULL : &b->tpl[region];
  const uint8_t *from = t ? b->k[region].orig + off : b->raw + off;
  /* dst: an offset until the device buffer exists (run) */
  *j = (ibp_batch_job){t ? off : (uint64_t)(uintptr_t)from, at, *units,
                       (uint32_t)len, region};
  *units += ibp_kernels_job_units(j, t);
  memcpy(b->want + at, from, len);
  b->dst_bytes = at + len;
}

static void build(batch_case *b, rng *r) {
  memset(b, 0, sizeof *b);
  b->regions = 1 + (unsigned)rng_below(r, MAX_REGIONS);
  for (unsigned i = 0; i < b->regions; i++) {
    kcase_shape s;
    shape_for(r, &s);
    kcase_build(&b->k[i], r, &s);
    kcase_template(&b->k[i], &b->tpl[i]);
    ibp_kernel_plan ignored;
    CHECK(ibp_kernels_plan_decompress(&b->tpl[i], MAX_SHARED, 4, &ignored) ==
          0);
  }
  b->raw_bytes = rng_log_uniform(r, 1, 1 << 15);
  b->raw = xmalloc(b->raw_bytes);
  rng_fill(r, b->raw, b->raw_bytes);
}

static void free_case(batch_case *b) {
  for (unsigned i = 0; i < b->regions; i++)
    kcase_free(&b->k[i]);
  free(b->raw);
  free(b->jobs);
  free(b->dst);
  free(b->want);
}

/* Runs the batch; returns the emulator's result, with pcie filled. */
static int run(batch_case *b, uint64_t units, int walk, unsigned grid_cap,
               simt_pcie *pcie, char *err, size_t errlen) {
  b->dst = xmalloc(b->dst_bytes + 1);
  memset(b->dst, 0xEE, b->dst_bytes + 1);
  for (uint32_t i = 0; i < b->count; i++)
    b->jobs[i].dst += (uint64_t)(uintptr_t)b->dst;
  ibp_batch_args a = {b->tpl, b->jobs, units, b->count, 0, 0, 0};
  ibp_kernel_plan plan;
  ibp_kernels_plan_batch(&a, b->tpl, b->regions, MAX_SHARED, 4, &plan);
  if (walk) {
    a.walk = (uint32_t)walk;
    uint64_t walks = (units + a.walk - 1) / a.walk;
    plan.grid = (unsigned)((walks + plan.block / 32 - 1) / (plan.block / 32));
  }
  if (grid_cap && plan.grid > grid_cap)
    plan.grid = grid_cap;
  simt_set_strict_host_reads(1);
  for (unsigned i = 0; i < b->regions; i++) {
    simt_host_register(b->k[i].packed, b->k[i].packed_bytes);
    simt_host_register(b->k[i].orig, b->k[i].bytes);
  }
  simt_host_register(b->raw, b->raw_bytes);
  simt_launch l = {ibp_emu_entry(IBP_KERNEL_BATCH),
                   &a,
                   {plan.grid, 1, 1},
                   {plan.block, 1, 1},
                   plan.dynamic_shared};
  int rc = simt_run(&l, pcie, err, errlen);
  for (unsigned i = 0; i < b->regions; i++) {
    simt_host_unregister(b->k[i].packed);
    simt_host_unregister(b->k[i].orig);
  }
  simt_host_unregister(b->raw);
  return rc;
}

static void random_cases(uint64_t iters) {
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    batch_case b;
    uint32_t jobs = 1 + (uint32_t)rng_below(&r, rng_chance(&r, 0.5) ? 8 : 300);
    uint64_t cap = 0;
    build(&b, &r);
    for (unsigned i = 0; i < b.regions; i++)
      cap = b.k[i].bytes > cap ? b.k[i].bytes : cap;
    cap = (cap > b.raw_bytes ? cap : b.raw_bytes) + 3;
    b.want = xmalloc(cap * jobs + 1);
    memset(b.want, 0xEE, cap * jobs + 1);
    b.jobs = xmalloc(jobs * sizeof *b.jobs);
    uint64_t units = 0;
    const int rows = rng_chance(&r, 0.3);
    for (uint32_t i = 0; i < jobs; i++) {
      uint32_t region = rng_chance(&r, 0.15)
                            ? IBP_BATCH_RAW
                            : (uint32_t)rng_below(&r, b.regions);
      uint64_t bytes =
          region == IBP_BATCH_RAW ? b.raw_bytes : b.k[region].bytes;
      uint64_t R = region == IBP_BATCH_RAW ? 4096 : b.k[region].R;
      uint64_t off, len;
      if (rows && region != IBP_BATCH_RAW && bytes >= R) {
        off = rng_below(&r, bytes / R) * R; /* a gather: one row */
        len = R;
      } else {
        pick_range(&r, bytes, R, &off, &len);
      }
      add_job(&b, &r, region, off, len, &units);
    }
    /* a walk of 1 with one block: warps jump from job to job */
    int walk = rng_chance(&r, 0.2)   ? 1
               : rng_chance(&r, 0.3) ? (int)rng_range(&r, 2, 40)
                                     : 0;
    unsigned grid_cap = rng_chance(&r, 0.3) ? 1 : 0;
    test_case("%u regions (R=%u, ...), %u jobs, %llu units, walk %d, grid "
              "cap %u",
              b.regions, b.k[0].R, b.count, (unsigned long long)units, walk,
              grid_cap);
    char err[512] = "";
    simt_set_seed(rng_next(&r) | 1);
    int rc = run(&b, units, walk, grid_cap, NULL, err, sizeof err);
    CHECKF(rc == 0, "emulator: %s", err);
    CHECK_MEM(b.dst, b.want, b.dst_bytes + 1, "batched bytes");
    free_case(&b);
  }
}

/* Rows of R bytes, consecutive in the region, one job each, to shuffled
 * destinations: sectors over PCIe against the stored bytes. */
static void adjacent_rows(uint32_t R, uint64_t rows) {
  rng r;
  test_iteration(&r, 1000000 + R);
  batch_case b;
  memset(&b, 0, sizeof b);
  b.regions = 1;
  kcase_shape s = {R, 4, rows, 0, 0, 0, DATA_FLOAT, MASK_STATS, 0, 1, 1};
  kcase_build(&b.k[0], &r, &s);
  kcase_template(&b.k[0], &b.tpl[0]);
  ibp_kernel_plan ignored;
  CHECK(ibp_kernels_plan_decompress(&b.tpl[0], MAX_SHARED, 108, &ignored) == 0);
  b.raw = xmalloc(1);
  b.raw_bytes = 1;
  b.want = xmalloc(rows * R + 1);
  memset(b.want, 0xEE, rows * R + 1);
  b.jobs = xmalloc(rows * sizeof *b.jobs);
  uint64_t *slot = xmalloc(rows * sizeof *slot);
  for (uint64_t i = 0; i < rows; i++)
    slot[i] = i;
  for (uint64_t i = rows - 1; i > 0; i--) { /* shuffle the destinations */
    uint64_t j = rng_below(&r, i + 1), t = slot[i];
    slot[i] = slot[j];
    slot[j] = t;
  }
  uint64_t stored = 0;
  for (uint64_t i = 0; i < rows; i++) {
    b.jobs[i] = (ibp_batch_job){i * R, slot[i] * R, i, R, 0};
    memcpy(b.want + slot[i] * R, b.k[0].orig + i * R, R);
    stored += kcase_stored(&b.k[0], i);
  }
  b.count = (uint32_t)rows;
  b.dst_bytes = rows * R;
  test_case("adjacent rows: R=%u, %llu rows", R, (unsigned long long)rows);
  simt_pcie pcie = {0};
  char err[512] = "";
  b.dst = xmalloc(b.dst_bytes + 1);
  memset(b.dst, 0xEE, b.dst_bytes + 1);
  for (uint32_t i = 0; i < b.count; i++)
    b.jobs[i].dst += (uint64_t)(uintptr_t)b.dst;
  ibp_batch_args a = {b.tpl, b.jobs, rows, b.count, 0, 0, 0};
  ibp_kernel_plan plan;
  ibp_kernels_plan_batch(&a, b.tpl, 1, MAX_SHARED, 108, &plan);
  simt_set_strict_host_reads(1);
  simt_host_register(b.k[0].packed, b.k[0].packed_bytes);
  simt_host_register(b.k[0].orig, b.k[0].bytes);
  simt_launch l = {ibp_emu_entry(IBP_KERNEL_BATCH),
                   &a,
                   {plan.grid, 1, 1},
                   {plan.block, 1, 1},
                   plan.dynamic_shared};
  int rc = simt_run(&l, &pcie, err, sizeof err);
  simt_host_unregister(b.k[0].packed);
  simt_host_unregister(b.k[0].orig);
  CHECKF(rc == 0, "emulator: %s", err);
  CHECK_MEM(b.dst, b.want, b.dst_bytes + 1, "adjacent rows");
  double ratio = (double)(pcie.sectors * 32) / (double)stored;
  printf("adjacent rows R=%u x %llu: %llu stored bytes, %llu sectors "
         "(%.4f x), walk %u\n",
         R, (unsigned long long)rows, (unsigned long long)stored,
         (unsigned long long)pcie.sectors, ratio, a.walk);
  simt_pcie one = {0};
  uint64_t mismatch;
  CHECK(kcase_run(&b.k[0], ibp_emu_entry(IBP_KERNEL_DECOMPRESS), 0, rows * R,
                  b.k[0].packed_bytes, &one, &mismatch, err, sizeof err) == 0);
  printf("  (one copy of the same rows: %llu sectors)\n",
         (unsigned long long)one.sectors);
  CHECKF(ratio <= 1.01, "R=%u: %.4f x the stored bytes over PCIe", R, ratio);
  free(slot);
  free_case(&b);
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_batch", 3000);
  CHECK(ibp_emu_entry(IBP_KERNEL_BATCH) != NULL);
  adjacent_rows(300, 2048);
  adjacent_rows(256, 4096);
  adjacent_rows(1200, 1024);
  random_cases(iters);
  printf("test_kernel_batch: %llu random cases, 0 mismatches\n",
         (unsigned long long)iters);
  return test_end();
}
