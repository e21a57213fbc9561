/*
 * The emulator's plumbing: the kernel and pinned-range registries, launches
 * from several host threads at once, and the guard page under each fiber
 * stack (an overflow kills the process with a fault instead of corrupting
 * a neighbouring stack).
 */
#include "simt_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

using namespace simt_test;

namespace {

void k_noop(const void *) {}

void test_kernel_registry() {
  static const simt_kernel a{"ibp_test_a", k_noop,  8,
                             nullptr,      nullptr, nullptr};
  static const simt_kernel b{"ibp_test_b", k_noop,  16,
                             nullptr,      nullptr, nullptr};
  static const simt_kernel a2{"ibp_test_a", k_noop,  24,
                              nullptr,      nullptr, nullptr};
  CHECK(simt_kernel_find("ibp_test_a") == nullptr);
  simt_kernel_register(&a);
  simt_kernel_register(&b);
  CHECK(simt_kernel_find("ibp_test_a") == &a);
  CHECK(simt_kernel_find("ibp_test_b") == &b);
  simt_kernel_register(&a2); /* same name: replaces */
  CHECK(simt_kernel_find("ibp_test_a") == &a2);
  CHECK(simt_kernel_find("ibp_test_c") == nullptr);
  CHECK(simt_kernel_find(nullptr) == nullptr);
}

void test_host_registry() {
  static unsigned char buf[4096];
  CHECK(simt_host_try_register(buf + 1024, 1024) == 0);
  CHECK(simt_host_try_register(buf + 1024, 1024) == -1); /* again */
  CHECK(simt_host_try_register(buf + 512, 1024) == -1);  /* overlaps */
  CHECK(simt_host_try_register(buf + 2047, 10) == -1);   /* overlaps */
  CHECK(simt_host_try_register(buf + 2048, 10) == 0);    /* adjacent */
  CHECK(simt_host_try_register(buf, 1024) == 0);         /* adjacent */
  CHECK(simt_host_try_register(buf + 3000, 0) == -1);    /* empty */
  CHECK(simt_host_try_unregister(buf + 1025) == -1);     /* not a base */
  CHECK(simt_host_try_unregister(buf + 1024) == 0);
  CHECK(simt_host_try_unregister(buf + 1024) == -1);
  CHECK(simt_host_try_unregister(buf) == 0);
  CHECK(simt_host_try_unregister(buf + 2048) == 0);
}

/* ---- launches from several host threads ---------------------------------- */

struct ScanArgs {
  const uint32_t *in; /* pinned */
  uint32_t *out;
};

void k_scan(const void *p) {
  const ScanArgs *a = static_cast<const ScanArgs *>(p);
  unsigned g = block_linear() * block_threads() + tid();
  uint32_t v;
  simt_read_host(&v, &a->in[g], 4);
  for (unsigned d = 1; d < 32; d *= 2) {
    uint32_t up = simt_shfl_up(0xffffffffu, v, d);
    if (lane() >= d)
      v += up;
  }
  simt_syncthreads();
  a->out[g] = v;
}

void *worker(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  const unsigned n = 4 * 128;
  auto *in = static_cast<uint32_t *>(std::aligned_alloc(128, n * 4));
  std::vector<uint32_t> out(n);
  for (unsigned i = 0; i < n; i++)
    in[i] = hash32((uint32_t)(id * 1000 + i)) % 100;
  simt_host_register(in, n * 4);
  ScanArgs a{in, out.data()};
  for (unsigned iter = 0; iter < 20; iter++) {
    simt_set_seed(id * 100 + iter + 1);
    Result r = ok(k_scan, &a, dim(4), dim(128));
    CHECK_EQ(r.pcie.requests, 16); /* 4 blocks x 4 warps */
    CHECK_EQ(r.pcie.sectors, 64);
    for (unsigned w = 0; w < n / 32; w++) {
      uint32_t s = 0;
      for (unsigned l = 0; l < 32; l++) {
        s += in[w * 32 + l];
        CHECK_EQ(out[w * 32 + l], s);
      }
    }
  }
  simt_host_unregister(in);
  std::free(in);
  return nullptr;
}

void test_threads() {
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++)
    CHECK(pthread_create(&t[i], nullptr, worker, (void *)i) == 0);
  for (auto &th : t)
    pthread_join(th, nullptr);
}

/* ---- stack overflow ------------------------------------------------------ */

/* Each frame is passed down, so no compiler can fold the recursion into a
 * loop or reuse one frame. */
unsigned recurse(unsigned depth, volatile unsigned char *up) {
  volatile unsigned char frame[1024];
  frame[0] = (unsigned char)(up[0] + 1);
  frame[1023] = frame[0];
  if (depth == 0)
    return frame[1023];
  unsigned r = recurse(depth - 1, frame);
  return r + frame[0];
}

void k_overflow(const void *) {
  /* 1 MiB of frames: far past the fiber's stack. */
  volatile unsigned char top = 1;
  unsigned r = recurse(1024, &top);
  simt_syncthreads();
  if (r == 12345)
    simt_trap("unreachable");
}

void test_stack_guard() {
  std::fflush(nullptr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    /* A sanitizer's report (it ends the child itself) would be 200 frames
     * long: the parent says what happened. */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, 2);
    Result r = launch(k_overflow, nullptr, dim(1), dim(64));
    std::printf("overflow survived: rc=%d\n", r.rc);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  bool faulted = WIFSIGNALED(status) &&
                 (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
  bool sanitizer = WIFEXITED(status) && WEXITSTATUS(status) != 0;
  std::printf("stack overflow: %s\n", faulted     ? "fault"
                                      : sanitizer ? "sanitizer report"
                                                  : "not detected");
  CHECK(faulted || sanitizer);
}

} // namespace

int main() {
  test_kernel_registry();
  test_host_registry();
  test_threads();
  test_stack_guard();
  std::printf("infra: ok\n");
  return 0;
}
