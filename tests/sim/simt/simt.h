/*
 * SIMT emulator, host side: runs a kernel written against kernels/ibp_dev.h
 * (compiled as C++ for the CPU) with one fiber per GPU thread.
 *
 * Strictness (what a real GPU would expose, made deterministic-per-seed):
 *   - lanes of a block run in a random order between synchronisation points
 *     (seed: simt_set_seed, else env SIMT_SEED, else a fixed default; the
 *     seed is part of every error message);
 *   - cp.async copies land only at the cp.async wait that retires their
 *     group; their destination holds a poison pattern until then;
 *   - warp collectives check their member masks (every named lane must take
 *     part, with the same mask); __syncthreads must be reached by all;
 *   - a host read (simt_device.h: simt_read_host / simt_cp_async from host
 *     memory) must lie entirely inside one registered pinned host range;
 *   - a thread exiting with cp.async groups still pending is an error.
 *   Any violation stops the launch and simt_run returns nonzero with a
 *   message; the process is never aborted.
 *
 * PCIe accounting: host reads are grouped per warp by instruction (the
 * n-th host read of each lane of a warp is one warp-wide request); each
 * request counts the distinct 32-byte sectors and 128-byte lines its lanes
 * touched.  Totals accumulate in process-wide counters.
 *
 * Threading: simt_run may be called from several host threads at once
 * (each launch runs on the calling thread); registration and counters are
 * thread-safe.
 */
#ifndef IBP_SIMT_H
#define IBP_SIMT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct simt_dim3 {
  unsigned x, y, z;
} simt_dim3;

/* Runs one GPU thread of a kernel; args points to the kernel's parameter
 * block (a copy owned by the launch). */
typedef void (*simt_entry)(const void *args);

/* An emulated kernel, found by name (the driver's module/library loads). */
typedef struct simt_kernel {
  const char *name;
  simt_entry entry;
  size_t args_bytes; /* size of the parameter block */
  /* The bytes a launch with these arguments writes to device memory, for
   * the simulated driver's time model (docs/PROFILE.md); NULL: none. */
  uint64_t (*out_bytes)(const void *args);
  /* libibp's decompress kernels: the tensors (units) a launch decodes,
   * for the time model (ibp_profile_decode_us); NULL for other kernels. */
  uint64_t (*units)(const void *args);
  /* ... and of its output the bytes, with their units in *units, decoded
   * through the exponent stage (ibp_profile_stage_us); NULL: none. */
  uint64_t (*stage_bytes)(const void *args, uint64_t *units);
} simt_kernel;

/* Kernel libraries register their kernels (e.g. from a constructor). */
void simt_kernel_register(const simt_kernel *k);
const simt_kernel *simt_kernel_find(const char *name);

typedef struct simt_launch {
  simt_entry entry;
  const void *args;
  simt_dim3 grid, block;
  size_t dynamic_shared; /* bytes */
} simt_launch;

typedef struct simt_pcie {
  uint64_t requests; /* warp-wide host read requests */
  uint64_t sectors;  /* distinct 32-byte sectors per request, summed */
  uint64_t lines;    /* distinct 128-byte lines per request, summed */
  uint64_t bytes;    /* bytes the lanes asked for */
} simt_pcie;

/* Runs the whole grid; 0 on success.  On a violation returns nonzero and
 * writes a one-line message (with the seed) into err.  `pcie` (may be
 * NULL) receives this launch's counts. */
int simt_run(const simt_launch *l, simt_pcie *pcie, char *err, size_t errlen);

/* Pinned host memory: reads through the host helpers must fall inside one
 * registered range.  Ranges may not overlap; unregister by base. */
void simt_host_register(const void *base, size_t bytes);
void simt_host_unregister(const void *base);
/* The same with a result, for callers that must report failure (e.g. the
 * simulated cuMemHostRegister): 0 on success; -1 when the range is empty,
 * wraps around, overlaps a registered one or memory runs out (register), or
 * when no range starts at base (unregister). */
int simt_host_try_register(const void *base, size_t bytes);
int simt_host_try_unregister(const void *base);

/* Where device-side writes into the range starting at base land
 * (simt_write_host): another mapping of the same pages.  0, or -1 when no
 * range starts at base. */
int simt_host_set_alias(const void *base, void *alias);

/* Strict host reads (process-wide; also env SIMT_STRICT_HOST=1): when on,
 * every simt_read_host / simt_cp_async source must lie in a registered
 * pinned range; one that touches none is an error instead of a device
 * memory read.  For kernels that read device memory only with plain loads
 * (as libibp's do), this also catches a read entirely past a range's end.
 * Takes effect at the next launch. */
void simt_set_strict_host_reads(int on);

/* Process-wide PCIe counters (all launches since the last reset). */
void simt_pcie_total(simt_pcie *out);
void simt_pcie_reset(void);

/* Lane-order seed for the following launches on this thread (0 = from
 * SIMT_SEED or the default). */
void simt_set_seed(uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* IBP_SIMT_H */
