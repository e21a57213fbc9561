/*
 * Every violation makes simt_run return nonzero with a one-line message that
 * names the problem and the seed; the process survives and the next launch
 * works.
 */
#include "simt_test.h"

#include <vector>

using namespace simt_test;

namespace {

constexpr unsigned kFull = 0xffffffffu;

struct Args {
  const unsigned char *pinned; /* 128-aligned, 100 bytes registered */
  const unsigned char *device;
  int variant;
};

/* A kernel that must keep working after each failure. */
void k_good(const void *p) {
  uint32_t *out = *static_cast<uint32_t *const *>(p);
  uint32_t v = simt_shfl_xor(kFull, lane(), 1);
  simt_syncthreads();
  out[tid()] = v;
}

void check_next_launch_works() {
  std::vector<uint32_t> out(64);
  uint32_t *ptr = out.data();
  ok(k_good, &ptr, dim(1), dim(64));
  for (unsigned t = 0; t < 64; t++)
    CHECK_EQ(out[t], (t % 32) ^ 1);
}

void k_not_in_mask(const void *) {
  simt_ballot(0x0000fffe, 1);
}

void k_exited_lane(const void *) {
  if (lane() == 31)
    return;
  simt_shfl(kFull, 1, 0);
}

void k_mask_mismatch(const void *) {
  if (lane() < 16)
    simt_syncwarp(kFull);
  else
    simt_syncwarp(0xffff0000u);
}

void k_op_mismatch(const void *) {
  if (lane() % 2)
    simt_any(kFull, 1);
  else
    simt_all(kFull, 1);
}

void k_src_outside(const void *) {
  if (lane() < 16)
    simt_shfl(0x0000ffffu, 1, 20);
}

void k_missing_lanes(const void *) {
  simt_syncwarp(kFull);
}

void k_bar_vs_warp(const void *) {
  if (lane() < 16)
    simt_syncwarp(kFull);
  else
    simt_syncthreads();
}

/* Thread 0 leaves after many yields, by which time the others wait. */
void k_exit_at_barrier(const void *) {
  if (tid() == 0) {
    for (int i = 0; i < 200; i++)
      simt_syncwarp(1);
    return;
  }
  simt_syncthreads();
}

void k_past_range(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  uint64_t v;
  if (a->variant == 0) {
    simt_read_host(&v, a->pinned + 96, 8); /* [96,104) of a 100-byte range */
  } else {
    auto *s = static_cast<unsigned char *>(simt_dynamic_shared());
    simt_cp_async(s, a->pinned + 96, 16, 8); /* reads [96,104) too */
    simt_cp_async_wait(0);
  }
}

/* Reads 8 bytes at [112,120), wholly past the 100 registered bytes (the
 * buffer itself is 128 bytes long), and copies zero bytes from there. */
void k_beyond_range(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  auto *s = static_cast<unsigned char *>(simt_dynamic_shared());
  simt_cp_async(s, a->pinned + 112, 16, 0);
  simt_cp_async_wait(0);
  if (a->variant) {
    uint64_t v;
    simt_read_host(&v, a->pinned + 112, 8);
  }
}

void k_pending_copy(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  auto *s = static_cast<unsigned char *>(simt_dynamic_shared());
  simt_cp_async(s + 16 * tid(), a->device + 16 * tid(), 16, 16);
  if (a->variant)
    simt_cp_async_commit();
}

void k_bad_copy(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  auto *s = static_cast<unsigned char *>(simt_dynamic_shared());
  unsigned char local[32];
  switch (a->variant) {
  case 0:
    simt_cp_async(s + 4, a->device, 16, 16); /* misaligned */
    break;
  case 1:
    simt_cp_async(local, a->device, 16, 16); /* not shared memory */
    break;
  case 2:
    simt_cp_async(s, a->device, 12, 12); /* no such size */
    break;
  default:
    simt_cp_async(s + 64, a->device, 16, 16); /* past the 64 bytes */
    break;
  }
  simt_cp_async_wait(0);
}

void k_misaligned_read(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  uint32_t v;
  simt_read_host(&v, a->pinned + 2, 4);
}

void k_trap(const void *) {
  if (tid() == 5)
    simt_trap("checksum mismatch in tensor 7");
  simt_syncthreads();
}

/* Frames with arrays (ASan redzones) live on every fiber's stack. */
unsigned nest(unsigned depth, bool trap) {
  volatile unsigned char a[512];
  for (unsigned i = 0; i < sizeof a; i++)
    a[i] = (unsigned char)(depth + i);
  if (depth == 0) {
    simt_syncwarp(kFull);
    if (trap && lane() == 7)
      simt_trap("deep");
    simt_syncthreads();
    return a[5];
  }
  unsigned r = nest(depth - 1, trap);
  return r + a[depth];
}

void k_deep(const void *p) {
  const Args *a = static_cast<const Args *>(p);
  if (nest(24, a->variant) == 12345)
    simt_trap("unreachable");
}

void k_static_size(const void *) {
  static const char key = 0;
  simt_static_shared(&key, lane() == 3 ? 64 : 32);
}

void k_static_too_big(const void *) {
  static const char key = 0;
  simt_static_shared(&key, 200 * 1024);
}

void k_nested(const void *) {
  simt_launch l{};
  l.entry = k_nested;
  l.grid = l.block = dim(1);
  char err[256];
  if (simt_run(&l, nullptr, err, sizeof err) != 0)
    simt_trap(err);
}

} // namespace

int main() {
  auto *pinned = static_cast<unsigned char *>(std::aligned_alloc(128, 128));
  std::vector<unsigned char> device(4096, 1);
  simt_host_register(pinned, 100);
  Args a{pinned, device.data(), 0};
  const simt_dim3 one = dim(1), warp = dim(32);

  fails("not in mask", launch(k_not_in_mask, &a, one, warp),
        "the calling lane is not in the mask");
  check_next_launch_works();
  fails("exited lane", launch(k_exited_lane, &a, one, warp), "exit");
  check_next_launch_works();
  fails("mask mismatch", launch(k_mask_mismatch, &a, one, warp), "wait in");
  fails("op mismatch", launch(k_op_mismatch, &a, one, warp), "wait in");
  fails("src outside", launch(k_src_outside, &a, one, warp),
        "reads lane 20, outside the mask");
  fails("missing lanes", launch(k_missing_lanes, &a, one, dim(16)),
        "that this block lacks");
  check_next_launch_works();
  fails("barrier vs warp", launch(k_bar_vs_warp, &a, one, warp),
        "__syncthreads");
  for (uint64_t seed = 1; seed <= 8; seed++) {
    simt_set_seed(seed);
    fails("exit at barrier", launch(k_exit_at_barrier, &a, one, dim(64)),
          "thread exits while 63 threads wait at __syncthreads");
  }
  simt_set_seed(0);
  check_next_launch_works();

  fails("read past range", launch(k_past_range, &a, one, one),
        "runs past pinned range");
  a.variant = 1;
  fails("cp.async past range", launch(k_past_range, &a, one, one, 64),
        "runs past pinned range");
  /* Wholly past the range: device memory, unless host reads are strict. */
  a.variant = 1;
  ok(k_beyond_range, &a, one, one, 64);
  simt_set_strict_host_reads(1);
  fails("strict host reads", launch(k_beyond_range, &a, one, one, 64),
        "lies in no pinned range, 12 bytes past the end of");
  a.variant = 0; /* the zero-byte copy alone reads nothing */
  ok(k_beyond_range, &a, one, one, 64);
  simt_set_strict_host_reads(0);
  fails("pending copy", launch(k_pending_copy, &a, one, warp, 512),
        "cp.async copies pending");
  a.variant = 1;
  fails("pending group", launch(k_pending_copy, &a, one, warp, 512),
        "cp.async copies pending");
  check_next_launch_works();
  for (a.variant = 0; a.variant < 4; a.variant++)
    fails("bad copy", launch(k_bad_copy, &a, one, one, 64), "cp.async");
  fails("misaligned read", launch(k_misaligned_read, &a, one, one),
        "not an aligned");
  Result trap = launch(k_trap, &a, dim(2), dim(64));
  fails("trap", trap, "trap: checksum mismatch in tensor 7");
  CHECK(trap.err.find("block (0,0,0) thread (5,0,0)") != std::string::npos);
  /* A failure abandons fibers deep in their stacks; the stacks must come
   * back clean (under ASan: no stale redzones) for the next launch. */
  a.variant = 1;
  fails("deep trap", launch(k_deep, &a, dim(2), dim(128)), "trap: deep");
  a.variant = 0;
  ok(k_deep, &a, dim(2), dim(128));
  fails("static size", launch(k_static_size, &a, one, warp), "first with");
  fails("static too big", launch(k_static_too_big, &a, one, one, 64 * 1024),
        "more than");
  fails("nested", launch(k_nested, &a, one, one), "from inside a kernel");
  check_next_launch_works();

  /* Launches refused before anything runs. */
  fails("zero dim", launch(k_good, &a, dim(0), warp), "zero");
  fails("block too wide", launch(k_good, &a, one, dim(2048)),
        "block dimensions");
  fails("too many threads", launch(k_good, &a, one, dim(64, 4, 8)),
        "more than 1024");
  fails("too much shared", launch(k_good, &a, one, warp, 300 * 1024),
        "shared memory");
  fails("no entry", launch(nullptr, &a, one, warp), "no kernel entry");
  char msg[256];
  CHECK(simt_run(nullptr, nullptr, msg, sizeof msg) != 0);
  CHECK(std::strstr(msg, "no kernel entry") != nullptr);

  /* A truncated message still fits its buffer. */
  simt_launch l{};
  l.entry = k_not_in_mask;
  l.grid = one;
  l.block = warp;
  char small[16];
  std::memset(small, 'x', sizeof small);
  CHECK(simt_run(&l, nullptr, small, sizeof small) != 0);
  CHECK(std::strlen(small) == sizeof small - 1);

  check_next_launch_works();
  simt_host_unregister(pinned);
  std::free(pinned);
  std::printf("errors: ok\n");
  return 0;
}
