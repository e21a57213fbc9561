/* A .cu with a kernel, launched with <<<>>> and with cudaLaunchKernel, built
 * by tests/sim/nvcc/check_nvcc.sh with -cudart shared.  The simulated GPU
 * runs no program's kernels: each launch must fail with
 * cudaErrorNoKernelImageForDevice (not a missing symbol, not a crash), the
 * error must not be sticky, and copies must still work afterwards.
 *
 * Prints one line per launch and "after: ok"; exit 3 when the launches
 * failed as expected, 0 if a launch succeeded, 1 a copy failed. */
#include <cuda_runtime.h>
#include <stdio.h>

__device__ float bias;

__global__ void scale(float *p, float f) {
  p[threadIdx.x] = p[threadIdx.x] * f + bias;
}

int main(void) {
  float *dev, f = 2.0f, host[256] = {0}, back[256];
  if (cudaMalloc((void **)&dev, sizeof host) != cudaSuccess)
    return 1;
  scale<<<1, 256>>>(dev, f);
  cudaError_t chevrons = cudaGetLastError();
  printf("<<<>>>: %s\n", cudaGetErrorName(chevrons));
  void *args[] = {&dev, &f};
  cudaError_t api =
      cudaLaunchKernel((const void *)scale, dim3(1), dim3(256), args, 0, 0);
  printf("cudaLaunchKernel: %s\n", cudaGetErrorName(api));
  cudaGetLastError();
  for (int i = 0; i < 256; i++)
    host[i] = (float)i;
  if (cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) ||
      cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost) ||
      cudaDeviceSynchronize())
    return 1;
  for (int i = 0; i < 256; i++)
    if (back[i] != host[i])
      return 1;
  printf("after: ok\n");
  return chevrons == cudaSuccess || api == cudaSuccess ? 0 : 3;
}
