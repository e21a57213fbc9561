/*
 * Every symbol of simcuda_entries.def is a function cuda.h declares (with
 * __CUDA_API_VERSION_INTERNAL, which exposes every ABI under its exported
 * name) -- so each table row names a real driver export.  A compile-time
 * test: a misspelt symbol fails the build.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaEGL.h>
#include <cudaGL.h>
#include <cudaProfiler.h>
/* cudaVDPAU.h wants the VDPAU types; their shape does not matter here. */
#include <stdint.h>
typedef uint32_t VdpDevice;
typedef uint32_t VdpVideoSurface;
typedef uint32_t VdpOutputSurface;
typedef int VdpGetProcAddress(uint32_t, uint32_t, void **);
#include <cudaVDPAU.h>

#include <stdio.h>

int main(void) {
  size_t n = 0;
#define SIM_PROC(name, version, variant, symbol, kind)                         \
  n += sizeof(&symbol) != 0;
#include "simcuda_entries.def"
#undef SIM_PROC
  printf("test_simcuda_decls: %zu symbols declared by cuda.h\n", n);
  return 0;
}
