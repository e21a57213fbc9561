// Emulated test kernels for the simulated driver's tests, registered by
// name from a constructor.  Built as a shared library linked against
// libcuda.so.1 (whose simt_* functions it calls) and loaded by the driver
// through SIMCUDA_KERNELS, or linked directly.  Each kernel takes one
// argument struct (simt_kernel.args_bytes), as the driver expects.
#include "sim_test_kernels.h"
#include "simt.h"
#include "simt_device.h"

namespace {

unsigned global_index() {
  return simt_block_idx(0) * simt_block_dim(0) + simt_thread_idx(0);
}
unsigned grid_threads() {
  return simt_grid_dim(0) * simt_block_dim(0);
}

// dst[i] = value + i
void fill_u32(const void *p) {
  const sim_fill_args *a = static_cast<const sim_fill_args *>(p);
  for (unsigned i = global_index(); i < a->n; i += grid_threads())
    a->dst[i] = a->value + i;
}

// dst[i] = src[i], src in pinned host memory (a counted, checked read)
void copy_host_u32(const void *p) {
  const sim_copy_args *a = static_cast<const sim_copy_args *>(p);
  for (unsigned i = global_index(); i < a->n; i += grid_threads()) {
    uint32_t v;
    simt_read_host(&v, &a->src[i], sizeof v);
    a->dst[i] = v;
  }
}

// dst[i] = value + i, dst in pinned host memory (a GPU's store over the
// bus: the CPU's page protection does not see it)
void store_host_u32(const void *p) {
  const sim_fill_args *a = static_cast<const sim_fill_args *>(p);
  for (unsigned i = global_index(); i < a->n; i += grid_threads()) {
    uint32_t v = a->value + i;
    simt_write_host(&a->dst[i], &v, sizeof v);
  }
}

// Every warp sums its lanes' indices with shuffles; lane 0 writes it.
void warp_sum(const void *p) {
  const sim_fill_args *a = static_cast<const sim_fill_args *>(p);
  unsigned i = global_index(), v = i;
  for (unsigned d = 16; d > 0; d /= 2)
    v += simt_shfl_down(0xffffffffu, v, d);
  if (simt_thread_idx(0) % 32 == 0 && i / 32 < a->n)
    a->dst[i / 32] = v;
}

// Stops the launch: a failed device-side check.
void trap(const void *p) {
  const sim_fill_args *a = static_cast<const sim_fill_args *>(p);
  if (global_index() == a->value)
    simt_trap("sim_trap: deliberate failure");
}

const simt_kernel kernels[] = {
    {"sim_fill_u32", fill_u32, sizeof(sim_fill_args), nullptr, nullptr,
     nullptr},
    {"sim_copy_host_u32", copy_host_u32, sizeof(sim_copy_args), nullptr,
     nullptr, nullptr},
    {"sim_store_host_u32", store_host_u32, sizeof(sim_fill_args), nullptr,
     nullptr, nullptr},
    {"sim_warp_sum", warp_sum, sizeof(sim_fill_args), nullptr, nullptr,
     nullptr},
    {"sim_trap", trap, sizeof(sim_fill_args), nullptr, nullptr, nullptr},
};

__attribute__((constructor)) void register_kernels() {
  for (const simt_kernel &k : kernels)
    simt_kernel_register(&k);
}

} // namespace
