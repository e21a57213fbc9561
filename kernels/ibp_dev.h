/*
 * The whole contract between libibp's kernel bodies and the machine they
 * run on: kernel code calls only these ibp_dev_* helpers (and plain loads
 * and stores of device memory).  Each helper has two implementations side
 * by side: CUDA (nvcc, __CUDACC__) and the SIMT emulator (any C++
 * compiler; tests/sim/simt/simt_device.h).  Inline PTX lives only here.
 *
 * Memory kinds: "host" pointers are mapped pinned host memory, read over
 * PCIe and only through ibp_dev_ld_host_* / ibp_dev_cp_async16 (which the
 * emulator bounds-checks and counts); everything else is device memory.
 */
#ifndef IBP_DEV_H
#define IBP_DEV_H

#include <stdint.h>

#if defined(__CUDACC__)
/* ======================= CUDA ============================================ */

#define IBP_DEV static __device__ __forceinline__
#define IBP_KERNEL extern "C" __global__
/* A kernel parameter whose address may be taken without a copy to local
 * memory (read in place, from the parameter bank). */
#define IBP_GRID_CONSTANT __grid_constant__

IBP_DEV unsigned ibp_dev_thread() {
  return threadIdx.x;
}
IBP_DEV unsigned ibp_dev_block() {
  return blockIdx.x;
}
IBP_DEV unsigned ibp_dev_block_threads() {
  return blockDim.x;
}
IBP_DEV unsigned ibp_dev_grid_blocks() {
  return gridDim.x;
}

IBP_DEV unsigned ibp_dev_shfl(unsigned v, int src) {
  return __shfl_sync(0xFFFFFFFFu, v, src);
}
IBP_DEV unsigned ibp_dev_shfl_up(unsigned v, unsigned d) {
  return __shfl_up_sync(0xFFFFFFFFu, v, d);
}
IBP_DEV unsigned ibp_dev_ballot(int pred) {
  return __ballot_sync(0xFFFFFFFFu, pred);
}
IBP_DEV void ibp_dev_syncwarp() {
  __syncwarp(0xFFFFFFFFu);
}
IBP_DEV unsigned ibp_dev_popc(uint32_t v) {
  return (unsigned)__popc(v);
}
IBP_DEV void ibp_dev_syncthreads() {
  __syncthreads();
}

extern __shared__ __align__(16) unsigned char ibp_dev_smem_[];
IBP_DEV unsigned char *ibp_dev_shared() {
  return ibp_dev_smem_;
}

/* 16-byte async copy to shared memory; only src_bytes are read, the rest
 * of the 16 is zero-filled.  Plain loads before sm_80. */
IBP_DEV void ibp_dev_cp_async16(void *smem, const void *src,
                                unsigned src_bytes) {
#if __CUDA_ARCH__ >= 800
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s),
               "l"(src), "r"(src_bytes)
               : "memory");
#else /* both 16-byte aligned */
  if (src_bytes == 16) {
    *(uint4 *)smem = __ldcg((const uint4 *)src);
    return;
  }
  unsigned char *d = (unsigned char *)smem;
  const volatile unsigned char *p = (const volatile unsigned char *)src;
#pragma unroll 1
  for (unsigned i = 0; i < 16; i++)
    d[i] = i < src_bytes ? p[i] : 0;
#endif
}
IBP_DEV void ibp_dev_cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* Waits until at most n committed groups are pending (n <= 3). */
IBP_DEV void ibp_dev_cp_async_wait(unsigned n) {
#if __CUDA_ARCH__ >= 800
  switch (n) {
  case 0:
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    break;
  case 1:
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    break;
  case 2:
    asm volatile("cp.async.wait_group 2;\n" ::: "memory");
    break;
  default:
    asm volatile("cp.async.wait_group 3;\n" ::: "memory");
    break;
  }
#else
  (void)n;
#endif
}

/* Loads of mapped host memory, cached at L2 only (ld.global.cg): the
 * shadow is read once per copy, L1 would only be polluted. */
IBP_DEV uint8_t ibp_dev_ld_host_u8(const uint8_t *p) {
  return (uint8_t)__ldcg((const unsigned char *)p);
}
IBP_DEV uint4 ibp_dev_ld_host_16(const uint8_t *p) {
  return __ldcg((const uint4 *)p);
}
typedef uint4 ibp_dev_u128;

#define IBP_UNROLL _Pragma("unroll")
#define IBP_NO_UNROLL _Pragma("unroll 1")

/* Read-only device loads (the non-coherent path; the data never changes
 * while a kernel runs). */
IBP_DEV ibp_dev_u128 ibp_dev_ldg_u128(const uint8_t *p) {
  return __ldg((const uint4 *)p);
}
/* One 16-byte store; p is 16-byte aligned. */
IBP_DEV void ibp_dev_st16(uint8_t *p, ibp_dev_u128 v) {
  __stwb((uint4 *)p, v);
}
/* Bits [sh, sh + 32) of the 64-bit value hi:lo (sh taken mod 32). */
IBP_DEV uint32_t ibp_dev_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
  return __funnelshift_r(lo, hi, sh);
}
/* Bits [sh, sh + 32) of the 64-bit value hi:lo, sh at most 32 (larger
 * ones read as 32: hi). */
IBP_DEV uint32_t ibp_dev_funnel_rc(uint32_t lo, uint32_t hi, uint32_t sh) {
  return __funnelshift_rc(lo, hi, sh);
}
/* Bits [32 - sh, 64 - sh) of the 64-bit value hi:lo, sh at most 32
 * (larger ones read as 32: lo). */
IBP_DEV uint32_t ibp_dev_funnel_lc(uint32_t lo, uint32_t hi, uint32_t sh) {
  return __funnelshift_lc(lo, hi, sh);
}
/* v << (n mod 32): one shift (shf.l.wrap), the amount not masked. */
IBP_DEV uint32_t ibp_dev_shl_wrap(uint32_t v, uint32_t n) {
  return __funnelshift_l(0u, v, n);
}
/* v << n, 0 for n >= 32: one shift (shf.l.clamp). */
IBP_DEV uint32_t ibp_dev_shl_clamp(uint32_t v, uint32_t n) {
  return __funnelshift_lc(0u, v, n);
}
/* v >> n, the compiler kept from folding it into an address: a word
 * index scaled back by a pointer add (p + (v >> n)) is then one shift and
 * one LEA, not a shift, a mask and an add. */
IBP_DEV uint32_t ibp_dev_shr(uint32_t v, uint32_t n) {
  uint32_t r;
  asm("shr.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(n));
  return r;
}
/* p + i * n (i, n 32 bits, the product 64): one wide multiply-add, where
 * nvcc multiplies, then adds the 64-bit halves apart. */
IBP_DEV const uint8_t *ibp_dev_at(const uint8_t *p, uint32_t i, uint32_t n) {
  const uint8_t *q;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(q) : "r"(i), "r"(n), "l"(p));
  return q;
}
/* p[i] (any address space), its address one wide multiply-add (nvcc
 * otherwise shifts, masks and adds the 64-bit halves apart). */
IBP_DEV uint32_t ibp_dev_ld_u16(const uint16_t *p, uint32_t i) {
  const uint16_t *q;
  asm("mad.wide.u32 %0, %1, 2, %2;" : "=l"(q) : "r"(i), "l"(p));
  return *q;
}
/* PTX prmt.b32 (default mode): byte n of the result is byte s_n & 7 of
 * b:a (a bytes 0-3, b bytes 4-7), or, where s_n & 8, that byte's top bit
 * copied into all 8 bits (s_n: nibble n of s). */
IBP_DEV uint32_t ibp_dev_prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
}
/* c plus the sum of the four byte products of a and b (unsigned bytes):
 * one instruction (IDP.4A). */
IBP_DEV uint32_t ibp_dev_dp4a(uint32_t a, uint32_t b, uint32_t c) {
  return __dp4a(a, b, c);
}
/* The high 32 bits of the 64-bit product a * b. */
IBP_DEV uint32_t ibp_dev_umulhi(uint32_t a, uint32_t b) {
  return __umulhi(a, b);
}
IBP_DEV uint64_t ibp_dev_ldg_u64(const uint8_t *p) {
  return __ldg((const unsigned long long *)p);
}
IBP_DEV uint32_t ibp_dev_ldg_u32(const uint32_t *p) {
  return __ldg(p);
}

/* Exclusive prefix sum of v over the warp; *total gets the warp sum. */
/* (Each step adds under the shuffle's own "source lane exists" predicate:
 * two instructions a step.) */
#define IBP_DEV_SCAN_STEP(d)                                                   \
  asm("{\n .reg .u32 t;\n .reg .pred p;\n"                                     \
      " shfl.sync.up.b32 t|p, %0, " #d ", 0, 0xffffffff;\n"                    \
      " @p add.u32 %0, %0, t;\n}"                                              \
      : "+r"(x))
IBP_DEV unsigned ibp_dev_warp_exclusive_scan(unsigned v, unsigned *total) {
  unsigned x = v;
  IBP_DEV_SCAN_STEP(1);
  IBP_DEV_SCAN_STEP(2);
  IBP_DEV_SCAN_STEP(4);
  IBP_DEV_SCAN_STEP(8);
  IBP_DEV_SCAN_STEP(16);
  *total = __shfl_sync(0xFFFFFFFFu, x, 31);
  return x - v;
}

/* The sum of v over the warp, in every lane: one instruction (redux) from
 * sm_80 on, five butterfly steps before. */
IBP_DEV unsigned ibp_dev_warp_sum(unsigned v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xFFFFFFFFu, v);
#else
  for (unsigned d = 16; d > 0; d /= 2)
    v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
  return v;
#endif
}

#else
/* ======================= SIMT emulator ==================================== */

#include <string.h>

#include "simt_device.h"

#define IBP_DEV static inline
#define IBP_KERNEL extern "C"
#define IBP_GRID_CONSTANT

IBP_DEV unsigned ibp_dev_thread() {
  return simt_thread_idx(0);
}
IBP_DEV unsigned ibp_dev_block() {
  return simt_block_idx(0);
}
IBP_DEV unsigned ibp_dev_block_threads() {
  return simt_block_dim(0);
}
IBP_DEV unsigned ibp_dev_grid_blocks() {
  return simt_grid_dim(0);
}

IBP_DEV unsigned ibp_dev_shfl(unsigned v, int src) {
  return simt_shfl(0xFFFFFFFFu, v, src);
}
IBP_DEV unsigned ibp_dev_shfl_up(unsigned v, unsigned d) {
  return simt_shfl_up(0xFFFFFFFFu, v, d);
}
IBP_DEV unsigned ibp_dev_ballot(int pred) {
  return simt_ballot(0xFFFFFFFFu, pred);
}
IBP_DEV void ibp_dev_syncwarp() {
  simt_syncwarp(0xFFFFFFFFu);
}
IBP_DEV unsigned ibp_dev_popc(uint32_t v) {
  return (unsigned)__builtin_popcount(v);
}
IBP_DEV void ibp_dev_syncthreads() {
  simt_syncthreads();
}

IBP_DEV unsigned char *ibp_dev_shared() {
  return (unsigned char *)simt_dynamic_shared();
}

IBP_DEV void ibp_dev_cp_async16(void *smem, const void *src,
                                unsigned src_bytes) {
  simt_cp_async(smem, src, 16, src_bytes);
}
IBP_DEV void ibp_dev_cp_async_commit() {
  simt_cp_async_commit();
}
IBP_DEV void ibp_dev_cp_async_wait(unsigned n) {
  simt_cp_async_wait(n > 3 ? 3 : n);
}

IBP_DEV uint8_t ibp_dev_ld_host_u8(const uint8_t *p) {
  uint8_t v;
  simt_read_host(&v, p, 1);
  return v;
}
typedef struct ibp_dev_u128 {
  uint32_t x, y, z, w;
} ibp_dev_u128;
IBP_DEV ibp_dev_u128 ibp_dev_ld_host_16(const uint8_t *p) {
  ibp_dev_u128 v;
  simt_read_host(&v, p, 16);
  return v;
}

#define IBP_UNROLL
#define IBP_NO_UNROLL

IBP_DEV ibp_dev_u128 ibp_dev_ldg_u128(const uint8_t *p) {
  ibp_dev_u128 v;
  memcpy(&v, p, 16);
  return v;
}
IBP_DEV void ibp_dev_st16(uint8_t *p, ibp_dev_u128 v) {
  if ((uintptr_t)p & 15) /* a GPU faults on it */
    simt_trap("misaligned 16-byte store");
  memcpy(p, &v, 16);
}
IBP_DEV uint32_t ibp_dev_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
  return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}
IBP_DEV uint32_t ibp_dev_funnel_rc(uint32_t lo, uint32_t hi, uint32_t sh) {
  return sh >= 32 ? hi : (uint32_t)((((uint64_t)hi << 32) | lo) >> sh);
}
IBP_DEV uint32_t ibp_dev_funnel_lc(uint32_t lo, uint32_t hi, uint32_t sh) {
  return sh >= 32 ? lo : (uint32_t)(((((uint64_t)hi << 32) | lo) << sh) >> 32);
}
IBP_DEV uint32_t ibp_dev_shl_wrap(uint32_t v, uint32_t n) {
  return v << (n & 31);
}
IBP_DEV uint32_t ibp_dev_shl_clamp(uint32_t v, uint32_t n) {
  return n < 32 ? v << n : 0u;
}
IBP_DEV uint32_t ibp_dev_shr(uint32_t v, uint32_t n) {
  return v >> n;
}
IBP_DEV const uint8_t *ibp_dev_at(const uint8_t *p, uint32_t i, uint32_t n) {
  return p + (uint64_t)i * n;
}
IBP_DEV uint32_t ibp_dev_ld_u16(const uint16_t *p, uint32_t i) {
  return p[i];
}
IBP_DEV uint32_t ibp_dev_prmt(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t ba = ((uint64_t)b << 32) | a;
  uint32_t r = 0;
  for (unsigned n = 0; n < 4; n++) {
    const unsigned sn = (s >> (4 * n)) & 15u;
    uint32_t byte = (uint32_t)(ba >> (8 * (sn & 7u))) & 0xFFu;
    if (sn & 8u)
      byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * n);
  }
  return r;
}
IBP_DEV uint32_t ibp_dev_dp4a(uint32_t a, uint32_t b, uint32_t c) {
  for (unsigned n = 0; n < 32; n += 8)
    c += ((a >> n) & 0xFFu) * ((b >> n) & 0xFFu);
  return c;
}
IBP_DEV uint32_t ibp_dev_umulhi(uint32_t a, uint32_t b) {
  return (uint32_t)(((uint64_t)a * b) >> 32);
}
IBP_DEV uint64_t ibp_dev_ldg_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
IBP_DEV uint32_t ibp_dev_ldg_u32(const uint32_t *p) {
  return *p;
}

/* The same scan as one emulated collective: the emulator's cost is per
 * collective, and the five shuffle steps only move registers. */
IBP_DEV unsigned ibp_dev_warp_exclusive_scan(unsigned v, unsigned *total) {
  return simt_scan_add(0xFFFFFFFFu, v, total);
}
IBP_DEV unsigned ibp_dev_warp_sum(unsigned v) {
  unsigned total;
  (void)simt_scan_add(0xFFFFFFFFu, v, &total);
  return total;
}

#endif

/* ======================= shared helpers ====================================
 */

/* Marks for the all-in static count (bench/kernel_sass.sh,
 * docs/ARCHITECTURE.md "Counting a tensor's instructions"): IBP_MARK(id)
 * is nothing unless IBP_KERNEL_SASS_MARKS is defined.  Then nvcc emits it
 * as one PMTRIG instruction carrying id (the SASS listing shows where each
 * mark's code begins), and the emulator counts, per warp, how often each
 * lane passes it (ibp_emu_mark, defined by the counting driver). */
#if !defined(IBP_KERNEL_SASS_MARKS)
#define IBP_MARK(id) ((void)0)
#elif defined(__CUDACC__)
#define IBP_MARK(id) asm volatile("pmevent.mask %0;" ::"n"((int)(id)))
#else
extern "C" void ibp_emu_mark(unsigned id);
#define IBP_MARK(id) ibp_emu_mark(id)
#endif

/* Values read from memory before this point are read again after it: the
 * compiler may not keep them in registers across it. */
IBP_DEV void ibp_dev_compiler_fence() {
  __asm__ __volatile__("" ::: "memory");
}

IBP_DEV unsigned ibp_dev_lane() {
  return ibp_dev_thread() & 31u;
}
IBP_DEV unsigned ibp_dev_warp_in_block() {
  return ibp_dev_thread() >> 5;
}
IBP_DEV unsigned ibp_dev_warps_per_block() {
  return ibp_dev_block_threads() >> 5;
}
IBP_DEV uint64_t ibp_dev_warp_global() {
  return (uint64_t)ibp_dev_block() * ibp_dev_warps_per_block() +
         ibp_dev_warp_in_block();
}
IBP_DEV uint64_t ibp_dev_warps_total() {
  return (uint64_t)ibp_dev_grid_blocks() * ibp_dev_warps_per_block();
}

#endif /* IBP_DEV_H */
