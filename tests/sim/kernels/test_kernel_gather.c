/*
 * The emulated gather kernel: random lists of byte ranges (any length and
 * alignment, overlapping sources, up to the edges of the pinned buffer)
 * copied from pinned host memory into device memory, compared byte for
 * byte; every host read must stay inside the pinned buffer (strict reads).
 * IBP_TEST_ITERATIONS = launches (default 2000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp_kernels.h"
#include "kernels_emu.h"
#include "test_util.h"

int main(void) {
  uint64_t iters = test_begin("test_kernel_gather", 2000);
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_GATHER);
  CHECK(entry != NULL);
  simt_set_strict_host_reads(1);
  for (uint64_t it = 0; it < iters; it++) {
    rng r;
    test_iteration(&r, it);
    uint64_t host_bytes = rng_log_uniform(&r, 1, 1 << 18);
    unsigned misalign = (unsigned)rng_below(&r, 128);
    uint8_t *mem = xmalloc(host_bytes + 256);
    uint8_t *host =
        (uint8_t *)(((uintptr_t)mem + 127) & ~(uintptr_t)127) + misalign;
    rng_fill(&r, host, host_bytes);
    uint64_t count = 1 + rng_below(&r, 64);
    ibp_gather_range *ranges = xmalloc(count * sizeof *ranges);
    uint64_t dst_bytes = 0;
    for (uint64_t i = 0; i < count; i++) {
      uint64_t off = rng_below(&r, host_bytes);
      uint64_t len = rng_chance(&r, 0.2) ? host_bytes - off
                                         : rng_range(&r, 0, host_bytes - off);
      ranges[i] = (ibp_gather_range){off, dst_bytes, len};
      dst_bytes += len + rng_below(&r, 3); /* gaps stay untouched */
    }
    uint8_t *dst = xmalloc(dst_bytes + 1), *want = xmalloc(dst_bytes + 1);
    memset(dst, 0xEE, dst_bytes + 1);
    memset(want, 0xEE, dst_bytes + 1);
    for (uint64_t i = 0; i < count; i++)
      memcpy(want + ranges[i].dst_offset, host + ranges[i].src_offset,
             ranges[i].length);
    test_case("host %llu B (+%u), %llu ranges", (unsigned long long)host_bytes,
              misalign, (unsigned long long)count);
    ibp_gather_args a = {host, dst, ranges, count};
    ibp_kernel_plan plan;
    ibp_kernels_plan_gather(count, rng_chance(&r, 0.5) ? 1 : 4, &plan);
    simt_host_register(host, host_bytes);
    simt_launch l = {
        entry, &a, {plan.grid, 1, 1}, {plan.block, 1, 1}, plan.dynamic_shared};
    char err[512] = "";
    simt_set_seed(rng_next(&r) | 1);
    int rc = simt_run(&l, NULL, err, sizeof err);
    simt_host_unregister(host);
    CHECKF(rc == 0, "emulator: %s", err);
    CHECK_MEM(dst, want, dst_bytes + 1, "gathered bytes");
    free(dst);
    free(want);
    free(ranges);
    free(mem);
  }
  return test_end();
}
