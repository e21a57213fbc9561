/*
 * SIMT emulator micro-benchmark: the cost of a bare context switch, of warp
 * collectives and __syncthreads per participating thread, and the output
 * rate of a kernel shaped like the warp-per-tensor decompress kernel
 * (docs/ARCHITECTURE.md, "kernels/": cp.async staging of host reads in a
 * 2-stage ring, a warp exclusive scan of bit widths, one output word per
 * lane).
 *
 *   bench_simt [--quick] [switch|syncwarp|shfl|syncthreads|decompress]
 *
 * Single host thread; numbers are per-core.  --quick runs a few iterations
 * only (the ctest smoke run); a name runs that part alone.
 */
#include "simt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_or_die(simt_entry k, const void *args, unsigned grid,
                       unsigned block, size_t dyn, simt_pcie *pcie) {
  simt_launch l = {k, args, {grid, 1, 1}, {block, 1, 1}, dyn};
  char err[512];
  if (simt_run(&l, pcie, err, sizeof err) != 0) {
    fprintf(stderr, "bench_simt: %s\n", err);
    exit(1);
  }
}

/* ---- bare switch --------------------------------------------------------- */

/* Two fibers bounce between each other through one call site, as fibers of
 * a launch do (so the return-stack predictor guesses right); the host
 * starts the first and is resumed by the last. */

#if SIMT_ASAN
/* Bare switches bypass ASan's fiber annotations: measured without ASan. */
static void bench_switch(const char *name, void (*fn)(void **, void *),
                         long n) {
  (void)fn;
  (void)n;
  printf("%-26s skipped under ASan\n", name);
}
#else
static void *host_sp, *fiber_sp[2];
static long bounces;
static void (*swap_fn)(void **, void *);

static SIMT_NORETURN void bounce(void *arg) {
  uintptr_t me = (uintptr_t)arg;
  while (bounces-- > 0)
    swap_fn(&fiber_sp[me], fiber_sp[me ^ 1]);
  simt__ctx_swap_fpenv(&fiber_sp[me], host_sp);
  __builtin_unreachable();
}

static void bench_switch(const char *name, void (*fn)(void **, void *),
                         long n) {
  struct simt_stacks s;
  if (simt__stacks_map(&s, 2) != 0)
    exit(1);
  for (uintptr_t i = 0; i < 2; i++)
    fiber_sp[i] = simt__ctx_prepare(
        simt__stack_lo(&s, (unsigned)i) + s.stack_bytes, bounce, (void *)i);
  swap_fn = fn;
  bounces = n;
  double t = now_s();
  simt__ctx_swap_fpenv(&host_sp, fiber_sp[0]);
  t = now_s() - t;
  printf("%-26s %6.2f ns\n", name, t * 1e9 / (double)n);
  simt__stacks_unmap(&s);
}
#endif

/* ---- collectives --------------------------------------------------------- */

struct loop_args {
  long iters;
};

static void k_syncwarp(const void *p) {
  const struct loop_args *a = p;
  for (long i = 0; i < a->iters; i++)
    simt_syncwarp(0xffffffffu);
}

static void k_shfl(const void *p) {
  const struct loop_args *a = p;
  unsigned v = simt_thread_idx(0);
  for (long i = 0; i < a->iters; i++)
    v += simt_shfl_xor(0xffffffffu, v, (unsigned)i & 31);
  if (v == 1)
    simt_trap("unlikely");
}

static void k_syncthreads(const void *p) {
  const struct loop_args *a = p;
  for (long i = 0; i < a->iters; i++)
    simt_syncthreads();
}

/* Reports ns per thread per call, and per 32-lane warp call. */
static void bench_loop(const char *name, simt_entry k, unsigned block,
                       long iters) {
  struct loop_args a = {iters};
  double t = now_s();
  run_or_die(k, &a, 1, block, 0, NULL);
  t = now_s() - t;
  double per_thread = t * 1e9 / ((double)iters * block);
  printf("%-26s %6.2f ns per thread, %7.1f ns per warp (block %u)\n", name,
         per_thread, per_thread * 32, block);
}

/* ---- a decompress-shaped kernel ------------------------------------------ */

#define TENSOR_BYTES 4096u /* output bytes per tensor */
#define STAGE_BYTES 512u   /* compressed bytes a warp stages per step */

struct dec_args {
  const unsigned char *shadow; /* pinned: TENSOR_BYTES per tensor */
  const uint32_t *mask;        /* 32 words: per-lane varying bits */
  uint32_t *out;
  unsigned tensors;
};

static void stage(const struct dec_args *a, unsigned char *ring, unsigned t,
                  unsigned step, unsigned lane) {
  const unsigned char *src =
      a->shadow + (size_t)t * TENSOR_BYTES + step * STAGE_BYTES;
  simt_cp_async(ring + (step % 2) * STAGE_BYTES + lane * 16, src + lane * 16,
                16, 16);
  simt_cp_async_commit();
}

static void k_decompress(const void *p) {
  const struct dec_args *a = p;
  static const char ring_key = 0, mask_key = 0;
  unsigned tid = simt_thread_idx(0), lane = tid % 32, warp = tid / 32;
  unsigned warps = simt_block_dim(0) / 32;
  unsigned char *rings = simt_static_shared(&ring_key, 8 * 2 * STAGE_BYTES);
  uint32_t *mask = simt_static_shared(&mask_key, 32 * 4);
  unsigned char *ring = rings + warp * 2 * STAGE_BYTES;
  if (tid < 32)
    mask[tid] = a->mask[tid];
  simt_syncthreads();
  uint32_t m = mask[lane];
  unsigned width = (unsigned)__builtin_popcount(m);
  unsigned steps = TENSOR_BYTES / STAGE_BYTES;
  for (unsigned t = simt_block_idx(0) * warps + warp; t < a->tensors;
       t += simt_grid_dim(0) * warps) {
    uint32_t *out = a->out + (size_t)t * (TENSOR_BYTES / 4);
    stage(a, ring, t, 0, lane);
    for (unsigned step = 0, word = 0; step < steps; step++) {
      if (step + 1 < steps)
        stage(a, ring, t, step + 1, lane);
      simt_cp_async_wait(step + 1 < steps ? 1 : 0);
      simt_syncwarp(0xffffffffu);
      /* One output word per lane per round, 4 rounds per stage. */
      for (unsigned r = 0, bits = 0; r < 4; r++, word += 32) {
        unsigned off = width;
        for (unsigned d = 1; d < 32; d *= 2) {
          unsigned up = simt_shfl_up(0xffffffffu, off, d);
          if (lane >= d)
            off += up;
        }
        unsigned total = simt_shfl(0xffffffffu, off, 31);
        off -= width;
        unsigned pos = bits + off;
        uint64_t win;
        memcpy(&win, ring + (step % 2) * STAGE_BYTES + pos / 8, 8);
        uint32_t v = (uint32_t)(win >> (pos % 8));
        v = width == 32 ? v : v & ((1u << width) - 1);
        unsigned zero = simt_ballot(0xffffffffu, v == 0);
        out[word + lane] = (v & m) | (zero & 1u);
        bits += total;
      }
      simt_syncwarp(0xffffffffu);
    }
  }
}

static void bench_decompress(unsigned tensors, int reps) {
  size_t shadow_bytes = (size_t)tensors * TENSOR_BYTES;
  unsigned char *shadow = aligned_alloc(128, shadow_bytes);
  uint32_t *out = malloc(shadow_bytes);
  uint32_t mask[32];
  for (size_t i = 0; i < shadow_bytes; i++)
    shadow[i] = (unsigned char)(i * 2654435761u >> 13);
  /* About 24 varying bits per word: each round consumes ~96 bytes. */
  for (unsigned l = 0; l < 32; l++)
    mask[l] = 0x00ffffffu << (l % 8);
  simt_host_register(shadow, shadow_bytes);
  struct dec_args a = {shadow, mask, out, tensors};
  simt_pcie pcie;
  double t = now_s();
  for (int i = 0; i < reps; i++)
    run_or_die(k_decompress, &a, 8, 128, 0, &pcie);
  t = now_s() - t;
  double mb = (double)shadow_bytes * reps / 1e6;
  printf("decompress-shaped kernel:  %6.1f MB/s of output (%u tensors of "
         "%u B, 8 blocks x 4 warps; %llu requests, %llu sectors per launch)\n",
         mb / t, tensors, TENSOR_BYTES, (unsigned long long)pcie.requests,
         (unsigned long long)pcie.sectors);
  simt_host_unregister(shadow);
  free(shadow);
  free(out);
}

int main(int argc, char **argv) {
  int quick = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else
      only = argv[i];
  }
#define PART(name) (!only || strcmp(only, name) == 0)
  long scale = quick ? 1 : 100;
  if (PART("switch")) {
    bench_switch("switch, fiber to fiber:", simt__ctx_swap, 200000 * scale);
    bench_switch("switch with MXCSR/x87 cw:", simt__ctx_swap_fpenv,
                 200000 * scale);
  }
  if (PART("syncwarp"))
    bench_loop("__syncwarp", k_syncwarp, 32, 2000 * scale);
  if (PART("shfl"))
    bench_loop("__shfl_xor_sync", k_shfl, 256, 500 * scale);
  if (PART("syncthreads"))
    bench_loop("__syncthreads", k_syncthreads, 1024, 20 * scale);
  if (PART("decompress"))
    bench_decompress(quick ? 32 : 256, quick ? 1 : 20);
  return 0;
}
