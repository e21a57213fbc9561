/* A program as a user writes it, built by tests/sim/nvcc/check_nvcc.sh with
 * nvcc the usual ways: pinned host buffers, host-to-device and
 * device-to-host copies, the bytes compared, no kernel.  The bytes repeat
 * their high halves (bf16-like words with one exponent), so a libibp region
 * over the source compresses.  Deterministic output (no timings), so runs
 * with and without libibp can be compared line for line.
 *
 * Exit: 0 every byte came back; 1 a CUDA call failed (its name on stderr);
 * 2 the bytes differ. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s returned %d %s\n", #call, (int)e_,                   \
              cudaGetErrorString(e_));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  const size_t bytes = 4u << 20;
  const int rounds = 4;
  struct cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  unsigned short *src, *back;
  void *dev;
  CHECK(cudaMallocHost((void **)&src, bytes));
  CHECK(cudaMallocHost((void **)&back, bytes));
  CHECK(cudaMalloc(&dev, bytes));
  for (size_t i = 0; i < bytes / 2; i++)
    src[i] = (unsigned short)(0x3f00u | ((i * 37u) & 0x7fu));
  for (int r = 0; r < rounds; r++) {
    memset(back, 0, bytes);
    CHECK(cudaMemcpy(dev, src, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    if (memcmp(src, back, bytes) != 0) {
      printf("memcpy_only: MISMATCH in round %d\n", r);
      return 2;
    }
  }
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(back));
  CHECK(cudaFreeHost(src));
  printf("memcpy_only: ok device='%s' bytes=%zu copies=%d\n", prop.name, bytes,
         2 * rounds);
  return 0;
}
