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

static double kernel_us(const ibp_profile *p, uint64_t host_bytes,
                        uint64_t out_bytes, uint64_t units, unsigned n,
                        double read_gbps) {
  double read = bytes_us((double)host_bytes, read_gbps);
  double decode = bytes_us((double)out_bytes, p->decode_gbps_per_sm * n) +
                  (double)units * p->decode_tensor_us / n;
  double write = bytes_us((double)out_bytes, p->dram_gbps);
  double rtt = host_bytes > 0 ? p->sm_read_rtt_us : 0.0;
  return p->launch_latency_us + rtt + max2(read, max2(decode, write));
}

double ibp_profile_kernel_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, unsigned sms) {
  unsigned n = clamp_sms(p, sms);
  return kernel_us(p, host_bytes, out_bytes, 0, n,
                   ibp_profile_sm_read_gbps(p, n));
}

double ibp_profile_decode_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, uint64_t units, unsigned sms) {
  unsigned n = clamp_sms(p, sms);
  return kernel_us(p, host_bytes, out_bytes, units, n,
                   ibp_profile_decode_read_gbps(p, n));
}
