/* The staged path's decode as measured (serve/staged/decode_probe.h). */
#include "serve/staged/decode_probe.h"

#include "serve/choose/choose.h"

#define RATIO_MAX 16.0 /* a reading is kept within [1/16, 16] */

int ibp__probe_due(const ibp_decode_probe *p, double now_ns) {
  return now_ns >= p->after_ns;
}

void ibp__probe_timed(ibp_decode_probe *p, double now_ns, double gap_ns) {
  p->after_ns = now_ns + gap_ns;
}

/* The measured decode over the model's: where it took longer than the
 * model, both less the launch's latency `fixed` (which the data does not
 * change); else as measured -- continuous at the model, and never read
 * cheaper than it ran (a GPU whose launches start sooner than the profile's
 * latency would read a decode at its model as a fraction of it).  A decode
 * the model gives little more than its latency is read whole (the
 * difference would be noise). */
static double ratio_of(double took, double model_us, double fixed) {
  if (took > model_us && fixed > 0 && model_us >= 2 * fixed)
    return (took - fixed) / (model_us - fixed);
  return took / model_us;
}

double ibp__probe_read(ibp_decode_probe *p, double took, double model_us,
                       double fixed, double now_ns) {
  double r = ratio_of(took, model_us, fixed);
  r = r > RATIO_MAX ? RATIO_MAX : r < 1.0 / RATIO_MAX ? 1.0 / RATIO_MAX : r;
  p->seen_ns[p->readings % IBP_DECODE_PROBES] = now_ns;
  p->seen[p->readings++ % IBP_DECODE_PROBES] = r;
  p->pause_ns = 0; /* timing works again */
  return r;
}

void ibp__probe_failed(ibp_decode_probe *p, double now_ns) {
  const double pause = p->pause_ns > 0 ? p->pause_ns : IBP_CHOOSE_PAUSE_NS;
  p->after_ns = now_ns + pause;
  p->pause_ns =
      2 * pause < IBP_CHOOSE_PAUSE_MAX_NS ? 2 * pause : IBP_CHOOSE_PAUSE_MAX_NS;
}

double ibp__probe_scale(const ibp_decode_probe *p, double now_ns) {
  const unsigned n =
      p->readings < IBP_DECODE_PROBES ? p->readings : IBP_DECODE_PROBES;
  double least = 0;
  for (unsigned i = 0; i < n; i++)
    if (p->seen_ns[i] >= now_ns - IBP_CHOOSE_AGE_NS &&
        (least == 0 || p->seen[i] < least))
      least = p->seen[i];
  return least > 0 ? least : 1.0;
}
