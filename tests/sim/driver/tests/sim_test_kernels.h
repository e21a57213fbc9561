/* Argument structs of the test kernels (sim_test_kernels.cc). */
#ifndef SIM_TEST_KERNELS_H
#define SIM_TEST_KERNELS_H

#include <stdint.h>

/* sim_fill_u32: dst[i] = value + i for i < n.
 * sim_store_host_u32: the same into pinned host memory, as a GPU's stores
 * over the bus (simt_write_host).
 * sim_warp_sum: dst[w] = sum of the global thread indices of warp w (< n).
 * sim_trap: the thread whose global index is `value` traps. */
typedef struct sim_fill_args {
  uint32_t *dst;
  uint32_t value;
  uint32_t n;
} sim_fill_args;

/* sim_copy_host_u32: dst[i] = src[i] for i < n; src is pinned host memory. */
typedef struct sim_copy_args {
  uint32_t *dst;
  const uint32_t *src;
  uint32_t n;
} sim_copy_args;

#endif
