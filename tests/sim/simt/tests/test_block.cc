/*
 * Block-level behaviour: thread and block geometry of 3-D launches,
 * __syncthreads across warps with shared memory (neighbour exchange and a
 * tree reduction), static and dynamic shared memory (one pointer per block,
 * poisoned at every block start) and a fiber that uses most of its stack.
 */
#include "simt_test.h"

#include <vector>

using namespace simt_test;

namespace {

/* ---- geometry ------------------------------------------------------------ */

struct GeoArgs {
  uint32_t *out; /* 8 words per thread */
};

void k_geometry(const void *p) {
  const GeoArgs *a = static_cast<const GeoArgs *>(p);
  unsigned g = block_linear() * block_threads() + tid();
  uint32_t *o = a->out + (size_t)g * 8;
  o[0] = simt_thread_idx(0);
  o[1] = simt_thread_idx(1);
  o[2] = simt_thread_idx(2);
  o[3] = simt_block_idx(0);
  o[4] = simt_block_idx(1);
  o[5] = simt_block_idx(2);
  o[6] = simt_grid_dim(0) * 100 + simt_grid_dim(1) * 10 + simt_grid_dim(2);
  o[7] = simt_block_dim(0) * 100 + simt_block_dim(1) * 10 + simt_block_dim(2);
}

void test_geometry() {
  const simt_dim3 grid = dim(2, 3, 2), block = dim(4, 2, 3);
  unsigned bt = 24, nb = 12;
  std::vector<uint32_t> out(bt * nb * 8, 0xffffffffu);
  GeoArgs a{out.data()};
  ok(k_geometry, &a, grid, block);
  for (unsigned b = 0; b < nb; b++)
    for (unsigned t = 0; t < bt; t++) {
      const uint32_t *o = &out[(b * bt + t) * 8];
      CHECK_EQ(o[0], t % 4);
      CHECK_EQ(o[1], t / 4 % 2);
      CHECK_EQ(o[2], t / 8);
      CHECK_EQ(o[3], b % 2);
      CHECK_EQ(o[4], b / 2 % 3);
      CHECK_EQ(o[5], b / 6);
      CHECK_EQ(o[6], 232u);
      CHECK_EQ(o[7], 423u);
    }
}

/* ---- __syncthreads with shared memory ------------------------------------ */

struct BarArgs {
  uint32_t seed;
  uint32_t *out; /* 4 words per thread */
};

void k_barrier(const void *p) {
  const BarArgs *a = static_cast<const BarArgs *>(p);
  unsigned t = tid(), n = block_threads();
  static const char key = 0;
  uint32_t *s = static_cast<uint32_t *>(simt_static_shared(&key, 1024 * 4));
  uint32_t *o = a->out + ((size_t)block_linear() * n + t) * 4;
  uint32_t v = hash32(a->seed + t);
  /* Three rounds of neighbour exchange across warps. */
  for (unsigned round = 0; round < 3; round++) {
    s[t] = v + round;
    simt_syncthreads();
    o[round] = s[(t + 37 * (round + 1)) % n];
    simt_syncthreads();
  }
  /* Tree reduction (n is a power of two here). */
  s[t] = v;
  simt_syncthreads();
  for (unsigned stride = n / 2; stride; stride /= 2) {
    if (t < stride)
      s[t] += s[t + stride];
    simt_syncthreads();
  }
  o[3] = s[0];
}

void test_barrier(uint32_t seed, unsigned n) {
  std::vector<uint32_t> out(2 * n * 4, 0);
  BarArgs a{seed, out.data()};
  simt_set_seed(seed);
  ok(k_barrier, &a, dim(2), dim(n));
  uint32_t sum = 0;
  for (unsigned t = 0; t < n; t++)
    sum += hash32(seed + t);
  for (unsigned b = 0; b < 2; b++)
    for (unsigned t = 0; t < n; t++) {
      const uint32_t *o = &out[(b * n + t) * 4];
      for (unsigned round = 0; round < 3; round++)
        CHECK_EQ(o[round], hash32(seed + (t + 37 * (round + 1)) % n) + round);
      CHECK_EQ(o[3], sum);
    }
}

/* ---- static and dynamic shared memory ------------------------------------ */

struct ShmArgs {
  uintptr_t *ptrs;  /* 3 per thread: static A, static B, dynamic */
  uint32_t *before; /* per thread: first word of A before any write */
  uint32_t *dyn_in; /* per thread: its dynamic word before writing */
  uint32_t *sum;    /* per block */
};

void k_shared(const void *p) {
  const ShmArgs *a = static_cast<const ShmArgs *>(p);
  static const char key_a = 0, key_b = 0;
  unsigned t = tid(), n = block_threads();
  size_t g = (size_t)block_linear() * n + t;
  auto *sa = static_cast<uint32_t *>(simt_static_shared(&key_a, 64 * 4));
  auto *sb = static_cast<double *>(simt_static_shared(&key_b, 8 * 8));
  auto *dyn = static_cast<uint32_t *>(simt_dynamic_shared());
  a->ptrs[g * 3] = (uintptr_t)sa;
  a->ptrs[g * 3 + 1] = (uintptr_t)sb;
  a->ptrs[g * 3 + 2] = (uintptr_t)dyn;
  a->dyn_in[g] = dyn[t];
  if (t == 0) {
    a->before[g] = sa[0];
    sb[0] = 0;
  }
  simt_syncthreads();
  dyn[t] = t + 1;
  sa[t % 64] = 0;
  simt_syncthreads();
  if (t == 0) {
    uint32_t s = 0;
    for (unsigned i = 0; i < n; i++)
      s += dyn[i];
    a->sum[block_linear()] = s;
    sa[0] = 12345; /* the next block must not see this */
  }
}

void test_shared(uint32_t seed) {
  const unsigned n = 96, nb = 3;
  std::vector<uintptr_t> ptrs(n * nb * 3);
  std::vector<uint32_t> before(n * nb), dyn_in(n * nb), sum(nb);
  ShmArgs a{ptrs.data(), before.data(), dyn_in.data(), sum.data()};
  simt_set_seed(seed);
  ok(k_shared, &a, dim(nb), dim(n), n * 4);
  for (unsigned b = 0; b < nb; b++) {
    for (unsigned t = 0; t < n; t++) {
      size_t g = (size_t)b * n + t;
      for (unsigned k = 0; k < 3; k++)
        CHECK_EQ(ptrs[g * 3 + k], ptrs[(size_t)b * n * 3 + k]);
      CHECK_EQ(dyn_in[g], kPoison32);
      CHECK(ptrs[g * 3] % 16 == 0 && ptrs[g * 3 + 2] % 16 == 0);
    }
    CHECK_EQ(before[(size_t)b * n], kPoison32);
    CHECK_EQ(sum[b], n * (n + 1) / 2);
  }
  CHECK(ptrs[0] != ptrs[1] && ptrs[0] != ptrs[2]);
}

/* ---- a deep stack -------------------------------------------------------- */

struct StackArgs {
  uint32_t *out;
};

/* Uses about 40 KiB of the fiber's stack (each frame is passed down, so
 * the recursion cannot become a loop). */
uint32_t deep(unsigned depth, uint32_t x, volatile unsigned char *up) {
  volatile unsigned char frame[1024];
  for (unsigned i = 0; i < sizeof frame; i += 64)
    frame[i] = (unsigned char)(x + i + up[0]);
  if (depth == 0)
    return x;
  uint32_t r = deep(depth - 1, x * 3 + 1, frame);
  return r + frame[64];
}

void k_stack(const void *p) {
  const StackArgs *a = static_cast<const StackArgs *>(p);
  unsigned t = tid();
  volatile unsigned char top = 0;
  uint32_t r = deep(36, t, &top);
  simt_syncthreads(); /* every fiber's frames are live at once here */
  a->out[t] = r;
}

void test_stack() {
  std::vector<uint32_t> out(256);
  StackArgs a{out.data()};
  ok(k_stack, &a, dim(1), dim(256));
  /* Same computation on the host thread's stack. */
  volatile unsigned char top = 0;
  for (unsigned t = 0; t < 256; t++)
    CHECK_EQ(out[t], deep(36, t, &top));
}

} // namespace

int main() {
  test_geometry();
  for (uint32_t seed = 1; seed <= 12; seed++) {
    test_barrier(seed, seed % 2 ? 256 : 1024);
    test_shared(seed);
  }
  test_stack();
  std::printf("block: ok\n");
  return 0;
}
