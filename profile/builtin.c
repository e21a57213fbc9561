/* The built-in device cost profiles: text in the profile format
 * (profile/profile.h), read by the same parser as a file.  Every value
 * carries the published figure it comes from, or "ASSUMPTION:" and the
 * reasoning behind it (docs/PROFILE.md, "Built-in profiles").  A parameter
 * added to profile.def needs its value in each text here; the tests parse
 * every built-in. */
#include "profile/profile.h"

#include <string.h>

/* CPU time of API calls is a property of the host, not of the GPU: both
 * profiles give the same values, with the same reasoning. */
#define HOST_CALLS                                                             \
  "\n"                                                                         \
  "# ASSUMPTION: no published split between runtime and driver; a\n"           \
  "# cudaMemcpyAsync costs ~2.3-2.5 us of CPU in total (FlexKV, H20:\n"        \
  "# \"per-call overhead (~2.3 us)\",\n"                                       \
  "# https://github.com/taco-project/FlexKV/pull/193; DualPath, arXiv\n"       \
  "# 2602.21548 section 5.2: 5-7 us per copy including its DMA).  The\n"       \
  "# runtime is a thin wrapper: 0.3 us of it, the rest the driver's.\n"        \
  "runtime_call_us = 0.3\n"                                                    \
  "# ASSUMPTION: the driver's share of the ~2.5 us above.\n"                   \
  "driver_copy_call_us = 2.2\n"                                                \
  "\n"                                                                         \
  "# ASSUMPTION (measured on other hosts): cuLaunchKernel 3.0 us on GB200\n"   \
  "# (https://github.com/meta-pytorch/tritonbench/pull/1017); null-kernel\n"   \
  "# launch overhead ~3 us (https://forums.developer.nvidia.com/t/\n"          \
  "# too-much-time-for-kernel-launch-latency/233645); taken as 2.5 us.\n"      \
  "driver_launch_call_us = 2.5\n"                                              \
  "# ASSUMPTION: an event record or stream wait only queues a small\n"         \
  "# command: a fraction of a copy call.  No published figure.\n"              \
  "driver_call_us = 0.5\n"                                                     \
  "\n"                                                                         \
  "# Measured by libibp itself (bench/batch_hold.sh in its repository, on\n"   \
  "# a 2-core x86-64 VM, simulated driver, libibp at b3bed4e): 654-657 ns\n"   \
  "# per held 256-byte row -- 452 ns holding it (the copy call, its gate\n"    \
  "# decision included), 202-204 ns its share of the flush (the job list,\n"   \
  "# the rows' stored sizes, and the simulated driver's own CPU for the\n"     \
  "# flush's calls, which the calls above model again: a little too\n"         \
  "# much).  On the H200's host (16 cores) the same script measured\n"         \
  "# 0.32-0.53 us at 349b4da.  The write tracker's scan at a flush is\n"       \
  "# charged by its own model (preload/track/track.h).\n"                      \
  "ibp_hold_us = 0.65\n"                                                       \
  "# ASSUMPTION: a flush costs ~5 us of calls (the job list's copy, the\n"     \
  "# launch, an event, above): batches that last 20 times that keep them\n"    \
  "# under 5 % of a copying thread's time, and no held copy waits more\n"      \
  "# than 0.1 ms for the GPU to start on it.\n"                                \
  "batch_deadline_us = 100\n"                                                  \
  "\n"                                                                         \
  "# ASSUMPTION: a null kernel takes ~5.5-6.4 us from launch to the end\n"     \
  "# of a synchronize (https://github.com/ahrefs/ocannl/issues/488:\n"         \
  "# ~6.4 us launch+sync on an RTX 5070 Ti), less the ~2.5 us CPU call.\n"     \
  "launch_latency_us = 3.0\n"

/* An entry of a cuMemcpyBatchAsync: the figure above is of such entries. */
#define BATCH_SETUP                                                            \
  "# The figure above is of entries of one cuMemcpyBatchAsync (vLLM PR\n"      \
  "# 42212), so it stands for them directly.  An H200 agrees: 64 KiB\n"        \
  "# entries, 64 to a call, took ~0.75 us each beyond their bytes, while\n"    \
  "# copies of their own call, back to back, took 2.3 us (libibp's\n"          \
  "# docs/RESULTS.md section 4, kv_blocks' A runs, and `ibp calibrate`).\n"    \
  "ce_batch_setup_us = 1.0\n"

/* Bytes in flight and read granularity come from libibp's kernel and the
 * GPU's memory system, alike on both GPUs. */
#define KERNEL_SHAPE                                                           \
  "# ASSUMPTION: libibp's decompress kernel keeps ~8 warps x 2 staging\n"      \
  "# buffers x ~2 KiB of host reads in flight per SM\n"                        \
  "# (kernels/ibp_decompress.cu in libibp).\n"                                 \
  "sm_inflight_bytes = 32768\n"                                                \
  "# L1/L2 lines are 128 bytes of four 32-byte sectors; a warp's loads\n"      \
  "# become as many 32-byte transactions as sectors they touch (CUDA C++\n"    \
  "# Best Practices Guide, \"Coalesced Access to Global Memory\",\n"           \
  "# https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/); host\n"       \
  "# reads go out at cache-line granularity (EMOGI, Min et al., PVLDB\n"       \
  "# 14(2) 2020, https://github.com/illinois-impact/EMOGI).\n"                 \
  "sector_bytes = 32\n"

/* The exponent stage's decode, as an H200 timed it (docs/PROFILE.md "The
 * stage's decode terms"). */
#define STAGE_MEASURED                                                         \
  "\n"                                                                         \
  "# Measured on an NVIDIA H200 (libibp at c4e3d53, decoder decode-plan-4;\n"  \
  "# bench/results/gpu/2026-12-04-h200-1/stage.txt in libibp): 64 MiB of\n"    \
  "# bf16 weights served staged (IBP_MAX_SMS: 32 blocks) with the stage\n"     \
  "# and without, each decode timed on the GPU by libibp's probe.  The\n"      \
  "# stage added 51.4 us to a 2 MiB chunk of 4 KiB tensors and 43.9 us to\n"   \
  "# one of 1 KiB tensors: one SM 3.2 us a 4 KiB tensor, 0.69 us a 1 KiB\n"    \
  "# one, fitted through zero (a fit with a time per tensor gives it\n"        \
  "# below zero).  In those runs the IBP part decoded at ~2 GB/s per SM, a\n"  \
  "# third of what `ibp calibrate` measured the same day: taken in the\n"      \
  "# application's conditions, these terms are likely dear.\n"                 \
  "stage_decoder_build = decode-plan-4\n"

static const char a100_pcie4[] =
    "# NVIDIA A100 40GB PCIe (108 SMs, HBM2) behind a PCIe Gen4 x16 host\n"
    "# link: at most 31.5 GB/s per direction (16 GT/s x 16 x 128/130 / 8).\n"
    "name = a100-pcie4\n"
    "# Its decode terms are h100-pcie5's, scaled (below): of the same\n"
    "# decoder build.\n"
    "decoder_build = word-pdep\n"
    "\n"
    "# nvbandwidth on A100 PCIe: host_to_device_memcpy_ce \"around\n"
    "# 25-26GB/s\" (https://github.com/NVIDIA/nvbandwidth/issues/11);\n"
    "# bandwidthTest, pinned, A100-PCIE-40GB: 26.2 GB/s at 200-500 MB\n"
    "# (https://github.com/jdh4/della-gpu-A100, README).\n"
    "ce_h2d_gbps = 25.5\n"
    "# device_to_host_memcpy_ce \"around 25-26GB/s\" (nvbandwidth issue 11\n"
    "# above); A100-SXM4-80GB on PCIe 4.0, unidirectional D2H ~25 GB/s\n"
    "# (https://github.com/NVIDIA/nvbandwidth/issues/53).\n"
    "ce_d2h_gbps = 25.5\n"
    "# ASSUMPTION: 4 KiB descriptors in one cuMemcpyBatchAsync move at\n"
    "# 3.8-6.8 GB/s on H100\n"
    "# (https://github.com/vllm-project/vllm/pull/42212), i.e. ~0.6-1.0 us\n"
    "# per copy beyond its bytes; no A100 figure.\n"
    "ce_setup_us = 1.0\n" BATCH_SETUP HOST_CALLS "\n"
    "# nvbandwidth host_to_device_memcpy_sm on A100-SXM4-40GB: 25.13 GB/s\n"
    "# at 512 MiB and 1 GiB\n"
    "# (https://github.com/NVIDIA/nvbandwidth/issues/42).\n"
    "sm_h2d_gbps = 25.0\n"
    "# ASSUMPTION: no PCIe figure published.  On GB300 over NVLink-C2C,\n"
    "# 64 KB in flight gave ~48 GB/s, a ~1.3 us round trip\n"
    "# (https://github.com/sgl-project/sglang/pull/40278); a PCIe Gen4\n"
    "# read taken a little slower.\n"
    "sm_read_rtt_us = 1.5\n" KERNEL_SHAPE
    "# A100 40GB: 1,555 GB/s HBM2 (NVIDIA A100 datasheet, as tabled at\n"
    "# https://www.glennklockwood.com/garden/processors/A100).\n"
    "dram_gbps = 1555\n"
    "# ASSUMPTION: h100-pcie5's figures, measured on an H200, scaled by the\n"
    "# SM clock: 1410 against 1980 MHz (NVIDIA A100 and H200 datasheets).\n"
    "decode_gbps_per_sm = 2.26\n"
    "# ASSUMPTION: likewise scaled.\n"
    "decode_tensor_us = 0.135\n"
    "# ASSUMPTION: the share of a plain gather's reads the H200 measurement\n"
    "# gave (28.8 of 51.2 GB/s) of this link's sm_h2d_gbps.\n"
    "decode_h2d_gbps = 14.1\n"
    "# deviceQuery on A100: \"(108) Multiprocessors\"; 108 SMs on every A100\n"
    "# (https://www.glennklockwood.com/garden/processors/A100).\n"
    "sms = 108\n" STAGE_MEASURED
    "# ASSUMPTION: h100-pcie5's (measured, above), scaled by the SM clock\n"
    "# like the decode terms (1410 against 1980 MHz).\n"
    "stage_decode_gbps_per_sm = 0.92\n"
    "# Likewise: none.\n"
    "stage_tensor_us = 0\n";

static const char h100_pcie5[] =
    "# NVIDIA H100 PCIe (114 SMs, 80 GB HBM2e) behind a PCIe Gen5 x16 host\n"
    "# link: at most 63.0 GB/s per direction (32 GT/s x 16 x 128/130 / 8).\n"
    "name = h100-pcie5\n"
    "# The decode terms below were measured on an H200 with the decompress\n"
    "# kernel before its decode plan (a lane per 64-bit word, a deposit\n"
    "# loop over the invariant bits; libibp at commits f709149 to 182187d,\n"
    "# docs/RESULTS.md section 4, runs 2026-11-26-h200-3 to -6): that\n"
    "# build is named word-pdep (kernels/ibp_kernels.h in libibp).  No GPU\n"
    "# has measured the decode-plan kernel yet.\n"
    "decoder_build = word-pdep\n"
    "\n"
    "# nvbandwidth on H100: host to device 57.06 GB/s\n"
    "# (https://github.com/NVIDIA/nvbandwidth/issues/6); H100 PCIe Gen5,\n"
    "# cuMemcpyBatchAsync of merged 128 KiB runs, back to back: 54.1 GB/s\n"
    "# (https://github.com/vllm-project/vllm/pull/48434).\n"
    "ce_h2d_gbps = 55\n"
    "# ASSUMPTION: symmetric to host-to-device; the SMs alone write to the\n"
    "# host at 52.77 GB/s (device_to_host_memcpy_sm,\n"
    "# https://github.com/NVIDIA/nvbandwidth/issues/24).\n"
    "ce_d2h_gbps = 55\n"
    "# ASSUMPTION from a measurement on H100: 4 KiB descriptors in one\n"
    "# cuMemcpyBatchAsync move at 3.8-6.8 GB/s\n"
    "# (https://github.com/vllm-project/vllm/pull/42212), i.e. ~0.6-1.0 us\n"
    "# per copy beyond its bytes.\n"
    "ce_setup_us = 1.0\n" BATCH_SETUP HOST_CALLS "\n"
    "# nvbandwidth host_to_device_memcpy_sm on 8x H100: 35.03-35.39 GB/s\n"
    "# (https://github.com/NVIDIA/nvbandwidth/issues/24; every H100 has a\n"
    "# Gen5 x16 host link).\n"
    "sm_h2d_gbps = 35\n"
    "# ASSUMPTION: no PCIe figure published.  On GB300 over NVLink-C2C,\n"
    "# 64 KB in flight gave ~48 GB/s, a ~1.3 us round trip\n"
    "# (https://github.com/sgl-project/sglang/pull/40278); a PCIe Gen5\n"
    "# read taken a little faster.\n"
    "sm_read_rtt_us = 1.2\n" KERNEL_SHAPE
    "# H100 PCIe: 2,000 GB/s HBM2e (NVIDIA H100 PCIe product brief\n"
    "# PB-11133-001, \"greater than 2,000 gigabytes per second\"; NVIDIA's\n"
    "# spec table at https://archive-lib.hpctech.co.jp/gpuproduct/\n"
    "# nvidia-h100.html).\n"
    "dram_gbps = 2000\n"
    "# Measured by `ibp calibrate` on an NVIDIA H200 (the H100's GH100 SM,\n"
    "# same clocks), libibp's decompress kernel launched as its staged path\n"
    "# launches it: one SM decodes 2.94, 2.58 and 1.66 GB/s of 4096-, 1024-\n"
    "# and 400-byte tensors (docs/RESULTS.md in libibp, \"On a real GPU\"),\n"
    "# fitted as 3.17 GB/s plus 0.096 us per tensor.\n"
    "decode_gbps_per_sm = 3.17\n"
    "# The same fit's time per tensor.\n"
    "decode_tensor_us = 0.096\n"
    "# Measured likewise: the whole H200 decoding 4 KiB tensors from pinned\n"
    "# host memory read 28.8 GB/s of it (a plain gather: 51.2 GB/s), a warp\n"
    "# fetching one stream and then decoding it.\n"
    "decode_h2d_gbps = 28.8\n"
    "# H100 PCIe: 114 SMs, 57 TPCs (NVIDIA's spec table above).\n"
    "sms = 114\n" STAGE_MEASURED "# The fit through zero (above).\n"
    "stage_decode_gbps_per_sm = 1.29\n"
    "# None: the fit with a time per tensor puts it below zero.\n"
    "stage_tensor_us = 0\n";

typedef struct builtin {
  const char *name, *text;
} builtin;

static const builtin builtins[] = {
    {"a100-pcie4", a100_pcie4},
    {"h100-pcie5", h100_pcie5},
};

static const char *const names[] = {"a100-pcie4", "h100-pcie5", NULL};

_Static_assert(sizeof names / sizeof names[0] ==
                   sizeof builtins / sizeof builtins[0] + 1,
               "one name per built-in profile");

const char *ibp_profile_builtin_text(const char *name) {
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strcmp(builtins[i].name, name) == 0)
      return builtins[i].text;
  return NULL;
}

const char *ibp_profile_builtin_for_device(const char *device_name) {
  if (device_name == NULL)
    return NULL;
  if (strstr(device_name, "H100") || strstr(device_name, "H200"))
    return "h100-pcie5";
  if (strstr(device_name, "A100"))
    return "a100-pcie4";
  return NULL;
}

const char *const *ibp_profile_builtin_names(void) {
  return names;
}
