/*
 * Helpers for the SIMT emulator's tests: checks that exit(1) with the
 * location, and a launch wrapper that keeps the result and the message.
 * The kernels are C++ written directly against simt_device.h.
 */
#ifndef IBP_SIMT_TEST_H
#define IBP_SIMT_TEST_H

#include "simt.h"
#include "simt_device.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,    \
                   #cond);                                                     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    unsigned long long va_ = (unsigned long long)(a);                          \
    unsigned long long vb_ = (unsigned long long)(b);                          \
    if (va_ != vb_) {                                                          \
      std::fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__, \
                   __LINE__, #a, #b, va_, vb_);                                \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace simt_test {

struct Result {
  int rc = 0;
  std::string err;
  simt_pcie pcie{};
};

inline simt_dim3 dim(unsigned x, unsigned y = 1, unsigned z = 1) {
  return simt_dim3{x, y, z};
}

inline Result launch(simt_entry k, const void *args, simt_dim3 grid,
                     simt_dim3 block, size_t dynamic_shared = 0) {
  simt_launch l{};
  l.entry = k;
  l.args = args;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared = dynamic_shared;
  Result r;
  char err[512];
  err[0] = 0;
  r.rc = simt_run(&l, &r.pcie, err, sizeof err);
  r.err = err;
  return r;
}

/* A launch that must succeed. */
inline Result ok(simt_entry k, const void *args, simt_dim3 grid,
                 simt_dim3 block, size_t dynamic_shared = 0) {
  Result r = launch(k, args, grid, block, dynamic_shared);
  if (r.rc != 0) {
    std::fprintf(stderr, "unexpected launch failure: %s\n", r.err.c_str());
    std::exit(1);
  }
  return r;
}

/* A launch that must fail with a message containing `what` and the seed. */
inline void fails(const char *label, const Result &r, const char *what) {
  std::fprintf(stderr, "[%s] rc=%d %s\n", label, r.rc, r.err.c_str());
  if (r.rc == 0 || r.err.find(what) == std::string::npos ||
      r.err.find("SIMT_SEED=") == std::string::npos) {
    std::fprintf(stderr, "[%s] expected a failure mentioning \"%s\"\n", label,
                 what);
    std::exit(1);
  }
}

/* Device-side conveniences. */
inline unsigned tid() {
  return simt_thread_idx(0) +
         simt_block_dim(0) *
             (simt_thread_idx(1) + simt_block_dim(1) * simt_thread_idx(2));
}
inline unsigned lane() {
  return tid() % 32;
}
inline unsigned block_threads() {
  return simt_block_dim(0) * simt_block_dim(1) * simt_block_dim(2);
}
inline unsigned block_linear() {
  return simt_block_idx(0) +
         simt_grid_dim(0) *
             (simt_block_idx(1) + simt_grid_dim(1) * simt_block_idx(2));
}

inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

constexpr uint32_t kPoison32 = 0xCDCDCDCDu;

} // namespace simt_test

#endif /* IBP_SIMT_TEST_H */
