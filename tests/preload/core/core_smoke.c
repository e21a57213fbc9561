/* Smoke test of the interposer's data path through the CUDA runtime API:
 * a pinned region of float32 rows, whole and partial host-to-device copies
 * (sync and async, legacy stream and a user stream), each copied back and
 * compared byte for byte.  Run under LD_PRELOAD=libibp.so with IBP_REGIONS
 * selecting the region and IBP_WAIT_READY=1; passes without libibp too. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
              cudaGetErrorString(e_));                                         \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static uint64_t rng = 0x853c49e6748fea9bull;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int check(const uint8_t *host, void *dev, size_t off, size_t len,
                 cudaStream_t s, int async) {
  static uint8_t back[1 << 22];
  if (async) {
    CHECK(cudaMemcpyAsync(dev, host + off, len, cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));
  } else {
    CHECK(cudaMemcpy(dev, host + off, len, cudaMemcpyHostToDevice));
  }
  memset(back, 0xa5, len);
  CHECK(cudaMemcpy(back, dev, len, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < len; i++)
    if (back[i] != host[off + i]) {
      fprintf(stderr, "mismatch: copy [%zu, +%zu) byte %zu: %02x != %02x\n",
              off, len, i, back[i], host[off + i]);
      return 1;
    }
  return 0;
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (8u << 20) + 1000;
  uint8_t *host;
  void *dev;
  cudaStream_t s;
  CHECK(cudaHostAlloc((void **)&host, bytes, cudaHostAllocDefault));
  CHECK(cudaMalloc(&dev, 4u << 20));
  CHECK(cudaStreamCreate(&s));
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float v = (float)(sqrt(-2 * log(uniform() + 1e-12)) *
                      cos(6.283185307 * uniform()));
    memcpy(host + i, &v, 4);
  }
  int bad = check(host, dev, 0, 4u << 20, s, 0);
  bad |= check(host, dev, bytes - 3000, 3000, s, 1); /* the tail */
  for (int k = 0; k < 200 && !bad; k++) {
    size_t len = 1 + (size_t)(uniform() * (1u << 18));
    size_t off = (size_t)(uniform() * (double)(bytes - len));
    bad |= check(host, dev, off, len, s, k & 1);
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  printf("core_smoke: %s\n", bad ? "MISMATCH" : "ok");
  return bad;
}
