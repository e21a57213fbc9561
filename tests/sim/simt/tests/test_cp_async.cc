/*
 * cp.async: data is visible after the wait that retires its group and only
 * then (the destination reads as poison before, so a kernel that reads its
 * staging buffer too early gets wrong data); wait_group n keeps the newest
 * n groups pending; uncommitted copies retire at wait(0) only; the src-size
 * operand zero-fills; 4/8/16-byte copies from device and pinned memory.
 */
#include "simt_test.h"

#include <vector>

using namespace simt_test;

namespace {

struct Args {
  const uint32_t *src; /* 4 words per thread */
  uint32_t *out;       /* 12 words per thread */
};

/* Each thread stages 16 bytes and reads its neighbour's after the block
 * has waited and synchronised; `early` holds what the thread saw before its
 * own wait. */
void k_pipeline(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  unsigned t = tid(), n = block_threads();
  auto *s = static_cast<uint32_t *>(simt_dynamic_shared());
  simt_cp_async(&s[t * 4], &a->src[t * 4], 16, 16);
  simt_cp_async_commit();
  uint32_t *o = a->out + (size_t)t * 12;
  o[0] = s[t * 4]; /* too early: the broken read */
  simt_cp_async_wait(0);
  o[1] = s[t * 4]; /* own copy, after the wait */
  simt_syncthreads();
  unsigned nb = (t + 1) % n;
  for (unsigned i = 0; i < 4; i++)
    o[2 + i] = s[nb * 4 + i];
}

void test_pipeline(uint32_t seed, const uint32_t *src, unsigned n) {
  std::vector<uint32_t> out(n * 12);
  Args a{src, out.data()};
  simt_set_seed(seed);
  ok(k_pipeline, &a, dim(1), dim(n), n * 16);
  for (unsigned t = 0; t < n; t++) {
    const uint32_t *o = &out[t * 12];
    CHECK_EQ(o[0], kPoison32); /* the emulator exposes the early read */
    CHECK_EQ(o[1], src[t * 4]);
    for (unsigned i = 0; i < 4; i++)
      CHECK_EQ(o[2 + i], src[((t + 1) % n) * 4 + i]);
  }
}

/* wait_group semantics for one thread. */
void k_groups(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  auto *s = static_cast<uint32_t *>(simt_dynamic_shared());
  uint32_t *o = a->out;
  simt_cp_async(&s[0], &a->src[0], 16, 16); /* group 0 */
  simt_cp_async_commit();
  simt_cp_async(&s[4], &a->src[4], 8, 8); /* group 1 */
  simt_cp_async(&s[6], &a->src[6], 4, 4);
  simt_cp_async_commit();
  simt_cp_async(&s[8], &a->src[8], 16, 5); /* uncommitted; zero-fill */
  simt_cp_async_wait(2);                   /* nothing retires */
  o[0] = s[0];
  simt_cp_async_wait(1); /* group 0 */
  o[1] = s[0];
  o[2] = s[4];
  simt_cp_async_wait(1); /* still only group 0 */
  o[3] = s[6];
  simt_cp_async_commit(); /* the open copy becomes group 2 */
  simt_cp_async_wait(1);  /* group 1 */
  o[4] = s[4];
  o[5] = s[5];
  o[6] = s[6];
  o[7] = s[8];
  simt_cp_async(&s[12], &a->src[12], 16, 16); /* uncommitted */
  simt_cp_async_wait(0); /* everything, the open group included */
  o[8] = s[8];
  o[9] = s[9];
  o[10] = s[12];
  o[11] = s[15];
}

void test_groups(const uint32_t *src) {
  std::vector<uint32_t> out(12);
  Args a{src, out.data()};
  ok(k_groups, &a, dim(1), dim(1), 64);
  CHECK_EQ(out[0], kPoison32);
  CHECK_EQ(out[1], src[0]);
  CHECK_EQ(out[2], kPoison32);
  CHECK_EQ(out[3], kPoison32);
  CHECK_EQ(out[4], src[4]);
  CHECK_EQ(out[5], src[5]);
  CHECK_EQ(out[6], src[6]);
  CHECK_EQ(out[7], kPoison32);
  /* 5 source bytes, then zeros. */
  CHECK_EQ(out[8], src[8]);
  CHECK_EQ(out[9], src[9] & 0xffu);
  CHECK_EQ(out[10], src[12]);
  CHECK_EQ(out[11], src[15]);
}

} // namespace

int main() {
  const unsigned n = 128;
  std::vector<uint32_t> device(n * 4);
  for (unsigned i = 0; i < n * 4; i++)
    device[i] = hash32(i) | 1u; /* never the poison pattern */
  /* The same data from pinned host memory. */
  auto *pinned = static_cast<uint32_t *>(std::aligned_alloc(128, n * 16));
  std::memcpy(pinned, device.data(), n * 16);
  simt_host_register(pinned, n * 16);
  for (uint32_t seed = 1; seed <= 10; seed++) {
    test_pipeline(seed, device.data(), seed % 2 ? 32 : n);
    test_pipeline(seed, pinned, 64);
  }
  test_groups(device.data());
  test_groups(pinned);
  simt_host_unregister(pinned);
  std::free(pinned);
  std::printf("cp_async: ok\n");
  return 0;
}
