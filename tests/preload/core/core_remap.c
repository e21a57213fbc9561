/* Changes to a ready region's mapping that no hooked call announces: a raw
 * mmap(MAP_FIXED) over part of it, a raw mremap moving pages out of it, a
 * raw pkey_mprotect read-only and back followed by stores.  What reaches
 * the device is printed (a hash per step); run with libibp and with
 * IBP_DISABLE=1, the outputs must be equal (core_remap.sh).  The simulated
 * driver, like a GPU, reads pinned memory through its own mapping of the
 * pages, so a copy after a remap need not equal what the CPU sees. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define N (4u << 20)
#define CHUNK (256u << 10)

static uint8_t *host, *dev;
static uint8_t back[CHUNK];

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Copies chunk k to the device and back; prints the hash of what came. */
static int show(const char *step, unsigned k) {
  if (cudaMemcpy(dev, host + k * CHUNK, CHUNK, cudaMemcpyHostToDevice) !=
          cudaSuccess ||
      cudaMemcpy(back, dev, CHUNK, cudaMemcpyDeviceToHost) != cudaSuccess) {
    printf("%s: copy failed\n", step);
    return 1;
  }
  printf("%s: %016llx\n", step, (unsigned long long)fnv(back, CHUNK));
  return 0;
}

int main(void) {
  if (cudaHostAlloc((void **)&host, N, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc((void **)&dev, CHUNK) != cudaSuccess)
    return 2;
  for (size_t i = 0; i < N; i++)
    host[i] = (uint8_t)(i % 61 < 50 ? 0x2e : i * 7);
  for (unsigned k = 0; k < N / CHUNK; k++)
    if (show("ready", k))
      return 1;
  void *p =
      (void *)syscall(SYS_mmap, host + 4 * CHUNK, 65536, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (p == host + 4 * CHUNK)
    memset(p, 0x55, 65536);
  show("mmap MAP_FIXED", 4);
  void *away = mmap(NULL, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *moved = (void *)syscall(SYS_mremap, host + 6 * CHUNK, 65536, 65536,
                                MREMAP_MAYMOVE | MREMAP_FIXED, away);
  if (moved == away) /* the hole is refilled so the CPU can read it */
    syscall(SYS_mmap, host + 6 * CHUNK, 65536, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  show("mremap", 6);
  if (syscall(SYS_pkey_mprotect, host + 8 * CHUNK, 8192, PROT_READ, -1) == 0 &&
      syscall(SYS_pkey_mprotect, host + 8 * CHUNK, 8192, PROT_READ | PROT_WRITE,
              -1) == 0)
    memset(host + 8 * CHUNK + 100, 0x66, 6000);
  show("pkey_mprotect and stores", 8);
  for (unsigned k = 0; k < N / CHUNK; k++)
    show("after", k);
  printf("core_remap: done\n");
  return 0;
}
