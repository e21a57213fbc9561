/*
 * SIMT emulator, device side: what kernels/ibp_dev.h calls when a kernel is
 * compiled for the CPU.  Each function acts for the calling fiber (one GPU
 * thread).  Kernel code never calls these directly; it uses ibp_dev_*.
 */
#ifndef IBP_SIMT_DEVICE_H
#define IBP_SIMT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Thread geometry (x, y, z via axis 0, 1, 2). */
unsigned simt_thread_idx(int axis);
unsigned simt_block_idx(int axis);
unsigned simt_block_dim(int axis);
unsigned simt_grid_dim(int axis);

/* Warp collectives; lanes are threadIdx (linearised) % 32.  Every lane in
 * mask must call the same collective with the same mask. */
unsigned simt_ballot(unsigned mask, int pred);
int simt_any(unsigned mask, int pred);
int simt_all(unsigned mask, int pred);
/* __shfl_sync / _up / _down / _xor on 32-bit values, width 32. */
unsigned simt_shfl(unsigned mask, unsigned v, int src_lane);
unsigned simt_shfl_up(unsigned mask, unsigned v, unsigned delta);
unsigned simt_shfl_down(unsigned mask, unsigned v, unsigned delta);
unsigned simt_shfl_xor(unsigned mask, unsigned v, unsigned lane_mask);
/* One collective for a whole add-scan (what CUDA code does with five
 * __shfl_up_sync and a broadcast): returns the sum of v over the lanes of
 * mask below the caller; *total gets the sum over all of them (mod 2^32). */
unsigned simt_scan_add(unsigned mask, unsigned v, unsigned *total);
void simt_syncwarp(unsigned mask);
void simt_syncthreads(void);

/* Shared memory of the calling thread's block.  Static arrays are keyed by
 * the address of a per-declaration static object; both are filled with a
 * poison pattern when the block starts. */
void *simt_dynamic_shared(void);
void *simt_static_shared(const void *key, size_t bytes);

/* cp.async: copies cp_bytes (4, 8 or 16; dst and src aligned to it) from
 * src to shared memory, of which only the first src_bytes (<= cp_bytes)
 * are read and the rest zero-filled (PTX's src-size operand).  Lands at the
 * wait that retires its group.  A src in pinned host memory is a host read
 * (bounds-checked and counted). */
void simt_cp_async(void *smem_dst, const void *src, unsigned cp_bytes,
                   unsigned src_bytes);
void simt_cp_async_commit(void);
/* cp.async.wait_group n: waits until at most n committed groups are
 * pending; uncommitted copies count as a group of their own for n = 0. */
void simt_cp_async_wait(unsigned n);

/* A plain load of `bytes` (1, 2, 4, 8 or 16, aligned) that may read pinned
 * host memory: bounds-checked and counted when it does. */
void simt_read_host(void *dst, const void *src, unsigned bytes);

/* A store of `bytes` (as simt_read_host) that may write pinned host memory:
 * bounds-checked, and through the driver's alias of the range when it set
 * one (simt_host_set_alias), as a GPU's writes over the bus would land. */
void simt_write_host(void *dst, const void *src, unsigned bytes);

/* Stops the launch with an error (a failed device-side check). */
void simt_trap(const char *what);

#ifdef __cplusplus
}
#endif
#endif /* IBP_SIMT_DEVICE_H */
