/*
 * PCIe accounting for known access patterns: the k-th host read of each
 * lane of a warp is the warp's k-th request, which counts the distinct
 * 32-byte sectors and 128-byte lines its lanes touched.
 */
#include "simt_test.h"

using namespace simt_test;

namespace {

constexpr unsigned kFull = 0xffffffffu;

struct Args {
  const unsigned char *base; /* pinned, 128-aligned */
  int variant;
};

void read4(const unsigned char *p) {
  uint32_t v;
  simt_read_host(&v, p, 4);
}

void k_pattern(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  const unsigned char *b = a->base;
  unsigned ln = lane();
  auto *s = static_cast<unsigned char *>(simt_dynamic_shared());
  unsigned char v16[16];
  switch (a->variant) {
  case 0: /* 32 x 4 B contiguous, aligned */
    read4(b + ln * 4);
    break;
  case 1: /* the same, 4 B off alignment */
    read4(b + 4 + ln * 4);
    break;
  case 2: /* 16-B cp.async per lane over 512 B */
    simt_cp_async(s + ln * 16, b + ln * 16, 16, 16);
    simt_cp_async_wait(0);
    break;
  case 3: /* stride 32 B */
    read4(b + ln * 32);
    break;
  case 4: /* stride 128 B */
    read4(b + ln * 128);
    break;
  case 5: /* one word for everyone */
    read4(b + 64);
    break;
  case 6: /* four warp-wide 16-B reads over 512 B each */
    for (unsigned k = 0; k < 4; k++)
      simt_read_host(v16, b + k * 512 + ln * 16, 16);
    break;
  case 7: /* lane 0 reads a header, then the warp reads together */
    if (ln == 0)
      read4(b + 2048);
    simt_syncwarp(kFull);
    read4(b + ln * 4);
    break;
  case 8: /* a long loop with no collective: 200 requests */
    for (unsigned k = 0; k < 200; k++)
      read4(b + k * 128 + ln * 4);
    break;
  case 9: /* device memory: not counted */
    read4(reinterpret_cast<const unsigned char *>(s) + ln * 4);
    break;
  case 10: /* two warps, each its own line */
    read4(b + tid() * 4);
    break;
  case 11: /* half a warp, 8 B each */
    if (ln < 16)
      simt_read_host(v16, b + ln * 8, 8);
    break;
  case 12: /* upper lanes copy zero source bytes (zero-fill) */
    simt_cp_async(s + ln * 16, b + ln * 16, 16, ln < 16 ? 16 : 0);
    simt_cp_async_commit();
    simt_cp_async_wait(0);
    break;
  case 13: /* lower lanes read twice, then all meet and read again */
    read4(b + ln * 4);
    if (ln < 16)
      read4(b + 1024 + ln * 4);
    simt_syncwarp(kFull);
    read4(b + 2048 + ln * 4);
    break;
  }
}

void expect(const unsigned char *base, int variant, unsigned threads,
            unsigned blocks, uint64_t requests, uint64_t sectors,
            uint64_t lines, uint64_t bytes) {
  Args a{base, variant};
  for (uint64_t seed = 1; seed <= 3; seed++) {
    simt_set_seed(seed);
    Result r = ok(k_pattern, &a, dim(blocks), dim(threads), 1024);
    const simt_pcie &p = r.pcie;
    if (p.requests != requests || p.sectors != sectors || p.lines != lines ||
        p.bytes != bytes) {
      std::fprintf(stderr,
                   "pattern %d: got %llu requests, %llu sectors, %llu lines, "
                   "%llu bytes; want %llu, %llu, %llu, %llu\n",
                   variant, (unsigned long long)p.requests,
                   (unsigned long long)p.sectors, (unsigned long long)p.lines,
                   (unsigned long long)p.bytes, (unsigned long long)requests,
                   (unsigned long long)sectors, (unsigned long long)lines,
                   (unsigned long long)bytes);
      std::exit(1);
    }
  }
}

} // namespace

int main() {
  const size_t bytes = 32 * 1024;
  auto *base = static_cast<unsigned char *>(std::aligned_alloc(128, bytes));
  std::memset(base, 7, bytes);
  simt_host_register(base, bytes);

  expect(base, 0, 32, 1, 1, 4, 1, 128);
  expect(base, 1, 32, 1, 1, 5, 2, 128);
  expect(base, 2, 32, 1, 1, 16, 4, 512);
  expect(base, 3, 32, 1, 1, 32, 8, 128);
  expect(base, 4, 32, 1, 1, 32, 32, 128);
  expect(base, 5, 32, 1, 1, 1, 1, 128);
  expect(base, 6, 32, 1, 4, 64, 16, 2048);
  expect(base, 7, 32, 1, 2, 5, 2, 132);
  expect(base, 8, 32, 1, 200, 800, 200, 200 * 128);
  expect(base, 9, 32, 1, 0, 0, 0, 0);
  expect(base, 10, 64, 1, 2, 8, 2, 256);
  expect(base, 11, 32, 1, 1, 4, 1, 128);
  expect(base, 12, 32, 1, 1, 8, 2, 256);
  expect(base, 13, 32, 1, 3, 10, 3, 64 * 4 + 16 * 4);
  expect(base, 0, 32, 3, 3, 12, 3, 3 * 128); /* blocks add up */

  /* Process totals: the sum of the launches since the reset. */
  simt_pcie_reset();
  expect(base, 0, 32, 1, 1, 4, 1, 128); /* 3 launches (seeds) */
  expect(base, 2, 32, 1, 1, 16, 4, 512);
  simt_pcie t;
  simt_pcie_total(&t);
  CHECK_EQ(t.requests, 6);
  CHECK_EQ(t.sectors, 3 * 4 + 3 * 16);
  CHECK_EQ(t.lines, 3 * 1 + 3 * 4);
  CHECK_EQ(t.bytes, 3 * 128 + 3 * 512);

  /* Unregistered memory is device memory. */
  simt_host_unregister(base);
  expect(base, 0, 32, 1, 0, 0, 0, 0);
  std::free(base);
  std::printf("pcie: ok\n");
  return 0;
}
