/*
 * The gate (gate.c; docs/ARCHITECTURE.md "The gate"): each device's cost
 * profile (docs/PROFILE.md), a copy as the model sees it, and whether a
 * region's tensor size fits its copies.  The routes' priors are their own
 * files' (serve/route/route.h); the chooser (serve/choose/chooser.h)
 * weighs them.
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

/* How far an unmeasured decoder's speed may be from its profile's
 * figures, at most: its decode terms (decode_gbps_per_sm, decode_h2d_gbps,
 * decode_tensor_us) up to this many times faster.
 * Not a measurement: the widest error the gate plans for.  The built-in
 * profiles' decode terms are an older decoder's (h100-pcie5: 3.17 GB/s per
 * SM); the running one was designed for 8 GB/s per SM (issue N), 2.5x
 * that, and no GPU has timed it (docs/PROFILE.md, "Which decoder the
 * decode terms are of"). */
#define IBP_GATE_GUESS_SPAN 4.0

/* Device dev's profile with its unmeasured decode terms at their hope
 * (IBP_GATE_GUESS_SPAN times faster) -- the exponent stage's
 * (stage_decode_gbps_per_sm, stage_tensor_us) likewise where they were not
 * measured with the running stage decoder, IBP_STAGE_BUILD: what the
 * routes that decode would cost were the running decoders as fast as they
 * may be (ibp_route_cost.hope_ns).  NULL where both were measured with the
 * running decoders, or the device is not set up.  Lock-free. */
const ibp_profile *ibp__gate_hope(int dev);

/* Whether a copy's decode on device dev is a guess: its decode terms
 * unmeasured for this decoder, or, for a copy of a region stored with the
 * exponent stage (`stage` nonzero), its stage terms for the stage's.
 * Lock-free. */
int ibp__gate_guessed(int dev, int stage);

/* Flags the routes of prior[] that decode (all but the driver's copy) as
 * guesses where ibp__gate_guessed(dev, stage) (ibp_route_cost.guessed: the
 * chooser explores them early). */
void ibp__gate_flag_guesses(int dev, int stage,
                            ibp_route_cost prior[IBP_ROUTES]);

/* One copy as the gate sees it. */
typedef struct ibp_gate_copy {
  uint64_t bytes;        /* requested */
  uint64_t host_bytes;   /* what the kernel would read over PCIe */
  unsigned sms;          /* the SMs its grid is worth
                            (ibp_kernels_decode_sms) */
  uint64_t units;        /* tensors (and the tail) it touches */
  uint32_t tensor_bytes; /* the region's */
  int stage;             /* the region is stored with the exponent stage
                            (ibp_layout.stages): its decode adds the stage's
                            terms (ibp__gate_decode_us) */
} ibp_gate_copy;

/* The decompress kernels' time for a copy of a region stored with the
 * exponent stage or not (`stage`) on profile p: ibp_profile_decode_us,
 * with the stage's term over all of out_bytes and units where `stage` --
 * every tensor counted as stage-coded (a tensor read raw is not: at most
 * the stage's cost, which the timed copies correct).  Inline: the routes'
 * models are linked on their own in tests. */
static inline double ibp__gate_decode_us(const ibp_profile *p, int stage,
                                         uint64_t host_bytes,
                                         uint64_t out_bytes, uint64_t units,
                                         unsigned sms) {
  return ibp_profile_decode_staged_us(p, host_bytes, out_bytes, units,
                                      stage ? out_bytes : 0, stage ? units : 0,
                                      sms);
}

/* Tensors (and the tail) a copy of len > 0 bytes at region offset off
 * touches, in a region of n tensors of R bytes. */
uint64_t ibp__gate_units(uint64_t R, uint64_t n, uint64_t off, uint64_t len);

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
  double link_us;      /* the copy engine's windows */
  double sm_us;        /* the decodes: pipelined, all of them (those of
                          copies of busy streams side by side counted
                          once, but no sooner than their reads of the
                          host at the link's rate); else their part the
                          windows do not overlap (gpu_us - link_us) */
  int pipelined;       /* gpu_us is the slower stage's (copies back to
                          back) */
} ibp_gate_staged;

/* Once the region's fit is judged (its first 32 copies seen by
 * ibp__gate_misfit), the stored bytes a copy of `bytes` bytes reads,
 * estimated from those copies' ratio (for the choice of a held copy, which
 * then need not read the region's prefix sums: a cache miss per row on a
 * large table); 0 before, and while some tensor is read raw (written, busy
 * or not yet placed: the caller counts exactly). */
uint64_t ibp__gate_stored_estimate(const ibp_served_region *s, uint64_t bytes);

/* Observes a copy of region r's served region before the choice, with
 * `stored` the stored bytes of the tensors it touches (what the kernel
 * reads, before sector rounding).  Returns nonzero once, at the copy that
 * judges the region's fit, when its copies touch more stored bytes than
 * they request (its tensor size does not fit the copies): the caller
 * demotes the region, then calls ibp__gate_warn_misfit. */
int ibp__gate_misfit(ibp_region_rec *r, uint64_t offset, uint64_t bytes,
                     uint64_t stored);

/* The one warning for a region demoted as misfit: the region, the copy
 * sizes seen and a tensor= value that would fit. */
void ibp__gate_warn_misfit(const ibp_region_rec *r);

#endif /* IBP_PRELOAD_GATE_H */
