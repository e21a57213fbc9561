/*
 * The gate (gate.c; docs/ARCHITECTURE.md "The gate"): for every copy from a
 * ready region, the modelled time of each path on the device's cost
 * profile (docs/PROFILE.md), and the choice: the decompress kernel only
 * where the model says it is faster than the driver's own copy.
 */
#ifndef IBP_PRELOAD_GATE_H
#define IBP_PRELOAD_GATE_H

#include <stdint.h>

#include "profile/profile.h"
#include "registry/registry.h"
#include "serve/choose/choose.h"
#include "serve/region.h"

/* Worker, before the first region is set up on device `dev` (in its
 * context): chooses the device's profile -- IBP_PROFILE, else the
 * built-in whose GPU the device's name names ("A100", "H100"), else
 * a100-pcie4 (one info line).  Idempotent. */
void ibp__gate_setup_device(int dev);

/* The profile of a device set up by ibp__gate_setup_device (a region
 * READY on it implies that); NULL otherwise. */
const ibp_profile *ibp__gate_profile(int dev);

/* 1 when that profile's decode terms (decode_gbps_per_sm, decode_tensor_us,
 * decode_h2d_gbps) were measured with the running decompress kernels:
 * ibp_profile_decode_measured(ibp__gate_profile(dev), IBP_DECODER_BUILD),
 * worked out once at set-up.  0 when they are unmeasured for this decoder
 * -- its decoder_build names another build or none (every built-in today:
 * docs/PROFILE.md "Which decoder the decode terms are of"), so the GPU
 * routes' priors are a guess the chooser should explore early -- and when
 * the device is not set up.  Lock-free; any thread. */
int ibp__gate_decode_measured(int dev);

/* Flags the routes of prior[] that decode (all but the driver's copy) as
 * guesses where device dev's decode terms are unmeasured for this decoder
 * (ibp_route_cost.guessed: the chooser explores them early). */
void ibp__gate_flag_guesses(int dev, ibp_route_cost prior[IBP_ROUTES]);

/* One copy as the gate sees it. */
typedef struct ibp_gate_copy {
  uint64_t bytes;        /* requested */
  uint64_t host_bytes;   /* what the kernel would read over PCIe */
  unsigned sms;          /* the SMs its grid is worth
                            (ibp_kernels_decode_sms) */
  uint64_t units;        /* tensors (and the tail) it touches */
  uint32_t tensor_bytes; /* the region's */
} ibp_gate_copy;

/* Tensors (and the tail) a copy of len > 0 bytes at region offset off
 * touches, in a region of n tensors of R bytes. */
uint64_t ibp__gate_units(uint64_t R, uint64_t n, uint64_t off, uint64_t len);

/* Modelled steady-state time of a copy by each path (ns): the larger of
 * the calling thread's CPU time and the GPU's time, as copies queue up
 * back to back.  The runtime's share of the call is paid either way. */
double ibp__gate_pass_ns(const ibp_profile *p, const ibp_gate_copy *c);
double ibp__gate_kernel_ns(const ibp_profile *p, const ibp_gate_copy *c);

/* The same for a copy held for a batched launch of `copies` copies like
 * it (serve/batch/batch.h): libibp's hold on the CPU plus the SMs' reads on the
 * GPU (the sum: a batch's GPU work starts after its copies were held),
 * and the flush's calls, launch and job-list copy shared among them;
 * own_call: the copy came in a runtime call of its own (not as an entry of
 * the application's batch).  The write tracker's scan at the flush is
 * the caller's to add (serve/batch/batch.c measures it). */
double ibp__gate_batch_ns(const ibp_profile *p, const ibp_gate_copy *c,
                          double copies, int own_call);
/* Its two terms (ns per copy): the CPU's (hold, call, the flush's share)
 * and the GPU's (the batch's kernel and job-list copy, shared). */
void ibp__gate_batch_split(const ibp_profile *p, const ibp_gate_copy *c,
                           double copies, int own_call, double *cpu_ns,
                           double *gpu_ns);

/* A copy by the staged path (serve/staged/staged.h) as the gate sees it. */
typedef struct ibp_gate_staged {
  uint64_t bytes;      /* requested */
  uint64_t ce_bytes;   /* the windows the copy engine moves */
  uint64_t host_bytes; /* what the decode still reads over PCIe (tensors
                          read raw, the tail, streams larger than a
                          buffer) */
  double gpu_us;       /* the GPU's time: per chunk the copy engine's
                          window, then its decode (ibp_profile_decode_us
                          over its units, on the SMs its blocks are
                          worth), each stage in order, chunk k's decode
                          after its copy and chunk k-1's decode; for a
                          copy issued while its stream is busy (copies
                          back to back), the slower stage's sum */
  unsigned chunks;     /* a launch each */
  unsigned windows;    /* chunks with streams to move: a copy each */
} ibp_gate_staged;

/* The staged path's time (ns), on the same terms as ibp__gate_pass_ns:
 * the calling thread's calls against the GPU's time, where the copy
 * engine's chunks and the decodes overlap as a two-stage pipeline
 * (gpu_us), whether the copy is synchronous or not. */
double ibp__gate_staged_ns(const ibp_profile *p, const ibp_gate_staged *c);

/* Its calling thread's share (us): the runtime's call, a launch per chunk,
 * per window the copy and four event calls. */
double ibp__gate_staged_cpu_us(const ibp_profile *p, const ibp_gate_staged *c);

/* Once the region's fit is judged (its first 32 copies seen by
 * ibp__gate_mismatch), the stored bytes a copy of `bytes` bytes reads,
 * estimated from those copies' ratio (for the choice of a held copy, which
 * then need not read the region's prefix sums: a cache miss per row on a
 * large table); 0 before, and while some tensor is read raw (written, busy
 * or not yet placed: the caller counts exactly). */
uint64_t ibp__gate_stored_estimate(const ibp_served_region *s, uint64_t bytes);

/* Observes a copy of region r's served region before the choice, with
 * `stored` the stored bytes of the tensors it touches (what the kernel
 * reads, before sector rounding): a region whose copies touch more stored
 * bytes than they request (its tensor size does not fit the copies) is
 * demoted, with one line naming the region, the copy sizes seen and a
 * tensor= value that would fit.  Returns nonzero when r was demoted. */
int ibp__gate_mismatch(ibp_region_rec *r, uint64_t offset, uint64_t bytes,
                       uint64_t stored);

#endif /* IBP_PRELOAD_GATE_H */
