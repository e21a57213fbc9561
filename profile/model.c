/* The time model on a device cost profile (profile/profile.h; the formulas
 * are in docs/PROFILE.md).  Bandwidths are GB/s = 1e9 bytes per second, so
 * `bytes / (gbps * 1e3)` is microseconds. */
#include "profile/profile.h"

static double bytes_us(double bytes, double gbps) {
  return bytes / (gbps * 1e3);
}

static double max2(double a, double b) {
  return a > b ? a : b;
}

/* sms within [1, p->sms]. */
static unsigned clamp_sms(const ibp_profile *p, unsigned sms) {
  unsigned most = p->sms >= 1 ? (unsigned)p->sms : 1;
  if (sms < 1)
    return 1;
  return sms < most ? sms : most;
}

double ibp_profile_ce_copy_us(const ibp_profile *p, uint64_t bytes, int h2d) {
  double gbps = h2d ? p->ce_h2d_gbps : p->ce_d2h_gbps;
  return p->ce_setup_us + bytes_us((double)bytes, gbps);
}

double ibp_profile_sm_read_gbps(const ibp_profile *p, unsigned sms) {
  double inflight = (double)clamp_sms(p, sms) * p->sm_inflight_bytes;
  double gbps = inflight / (p->sm_read_rtt_us * 1e3);
  return gbps < p->sm_h2d_gbps ? gbps : p->sm_h2d_gbps;
}

double ibp_profile_decode_read_gbps(const ibp_profile *p, unsigned sms) {
  double sm = ibp_profile_sm_read_gbps(p, clamp_sms(p, sms));
  return p->decode_h2d_gbps < sm ? p->decode_h2d_gbps : sm;
}

/* The SMs' share of a decode: out_bytes at decode_gbps_per_sm, units at
 * decode_tensor_us, on each of n SMs. */
static double decode_sm_us(const ibp_profile *p, uint64_t out_bytes,
                           uint64_t units, unsigned n) {
  return bytes_us((double)out_bytes, p->decode_gbps_per_sm * n) +
         (double)units * p->decode_tensor_us / n;
}

/* `stage_us`: what a coding stage adds to the decode (0: none). */
static double kernel_us(const ibp_profile *p, uint64_t host_bytes,
                        uint64_t out_bytes, uint64_t units, unsigned n,
                        double read_gbps, double stage_us) {
  double read = bytes_us((double)host_bytes, read_gbps);
  double decode = decode_sm_us(p, out_bytes, units, n);
  if (stage_us > 0)
    decode += stage_us;
  double write = bytes_us((double)out_bytes, p->dram_gbps);
  double rtt = host_bytes > 0 ? p->sm_read_rtt_us : 0.0;
  return p->launch_latency_us + rtt + max2(read, max2(decode, write));
}

double ibp_profile_kernel_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, unsigned sms) {
  unsigned n = clamp_sms(p, sms);
  return kernel_us(p, host_bytes, out_bytes, 0, n,
                   ibp_profile_sm_read_gbps(p, n), 0);
}

double ibp_profile_decode_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, uint64_t units, unsigned sms) {
  return ibp_profile_decode_staged_us(p, host_bytes, out_bytes, units, 0, 0,
                                      sms);
}

double ibp_profile_stage_us(const ibp_profile *p, uint64_t stage_bytes,
                            uint64_t stage_units, unsigned sms) {
  if (stage_bytes == 0 && stage_units == 0)
    return 0;
  unsigned n = clamp_sms(p, sms);
  return bytes_us((double)stage_bytes, p->stage_decode_gbps_per_sm * n) +
         (double)stage_units * p->stage_tensor_us / n;
}

double ibp_profile_decode_staged_us(const ibp_profile *p, uint64_t host_bytes,
                                    uint64_t out_bytes, uint64_t units,
                                    uint64_t stage_bytes, uint64_t stage_units,
                                    unsigned sms) {
  unsigned n = clamp_sms(p, sms);
  return kernel_us(p, host_bytes, out_bytes, units, n,
                   ibp_profile_decode_read_gbps(p, n),
                   ibp_profile_stage_us(p, stage_bytes, stage_units, n));
}

/* ---- whether a coding stage pays ---------------------------------------- */

ibp_profile_region_cost
ibp_profile_region_copy(const ibp_profile *p, uint64_t bytes,
                        uint32_t tensor_bytes, uint64_t stored,
                        uint64_t stage_tensors, unsigned staged_sms) {
  const unsigned n = clamp_sms(p, (unsigned)p->sms);
  const unsigned k = clamp_sms(p, staged_sms);
  const uint64_t R = tensor_bytes ? tensor_bytes : 1;
  const uint64_t tensors = bytes / R, units = tensors + (bytes % R != 0);
  /* the stage runs on the tensors it codes alone, in the same pass as
   * their IBP decode (kernels/ibp_decompress.cu: decode_stage after
   * warp_decode_tensor, a job with a stage) */
  const uint64_t su = stage_tensors < tensors ? stage_tensors : tensors;
  const uint64_t sb = su * R;
  ibp_profile_region_cost c;
  c.link_us = bytes_us((double)stored, p->ce_h2d_gbps);
  c.decode_us =
      decode_sm_us(p, bytes, units, n) + ibp_profile_stage_us(p, sb, su, n);
  /* the routes overlap link and decode: the slower of the two counts */
  c.zerocopy_us =
      ibp_profile_decode_staged_us(p, stored, bytes, units, sb, su, n);
  c.staged_us =
      max2(ibp_profile_ce_copy_us(p, stored, 1),
           ibp_profile_decode_staged_us(p, 0, bytes, units, sb, su, k));
  return c;
}

double ibp_profile_region_best_us(const ibp_profile_region_cost *c) {
  return c->zerocopy_us < c->staged_us ? c->zerocopy_us : c->staged_us;
}

int ibp_profile_stage_pays(const ibp_profile *p, uint64_t bytes,
                           uint32_t tensor_bytes, uint64_t ibp_stored,
                           uint64_t stage_stored, uint64_t stage_tensors,
                           unsigned staged_sms) {
  if (stage_stored == 0)
    return 0;
  ibp_profile_region_cost alone = ibp_profile_region_copy(
      p, bytes, tensor_bytes, ibp_stored, 0, staged_sms);
  ibp_profile_region_cost staged = ibp_profile_region_copy(
      p, bytes, tensor_bytes, stage_stored, stage_tensors, staged_sms);
  const double with = ibp_profile_region_best_us(&staged);
  return with < ibp_profile_region_best_us(&alone) &&
         with < ibp_profile_ce_copy_us(p, bytes, 1);
}
