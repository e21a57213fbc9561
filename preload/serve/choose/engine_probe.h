/*
 * The copy engine's set-up, measured (engine_probe.c; docs/ARCHITECTURE.md
 * "The gate", set-up or link): a timed copy that took longer than its model
 * may have met a slower link or a dearer set-up, and one span cannot tell
 * which -- a route that reads the link over the SMs is hopeful in the one
 * case and hopeless in the other.  A copy of a few bytes of libibp's own
 * (the region's pinned shadow to a device scratch buffer, on a stream of
 * its own) is nearly all set-up: its span over its model is how much
 * dearer the set-up is.  Probed beside a timed copy of a copy-engine
 * route, up to IBP_CHOOSE_MIN_SAMPLES fresh probes, so that the hope that
 * reads its span has the set-up at hand; read, like the timed copies, at
 * a later decision once the model says it ran, never waited for.  Its handles
 * live in the device slot's memory (ibp_device_memory.setup_*) and end with it;
 * a failing call ends probing on that device (the hope then reads
 * IBP_CHOOSE_SETUP_SPAN).
 *
 * Limit: the span holds what the GPU took from its start event to its end,
 * less the copy call's time on the host: on a GPU whose front end starts a
 * copy later than the call's return, that latency reads as set-up (a hope
 * the wider: explored as before the probe).  One that waited behind other
 * work reads dearer likewise; the least fresh probe is believed.
 */
#ifndef IBP_PRELOAD_ENGINE_PROBE_H
#define IBP_PRELOAD_ENGINE_PROBE_H

#include <cuda.h>
#include <stdint.h>

#include "base/driver.h"
#include "profile/profile.h"
#include "serve/choose/choose.h"
#include "serve/region.h"

/* The bytes a probe copies. */
#define IBP_ENGINE_PROBE_BYTES 1024

/* A device's probes of one region (a chooser's). */
typedef struct ibp_engine_probe {
  ibp_choose_setup setup; /* what they measured: the classes read it */
  const void *src;        /* what they copy: the region's pinned shadow */
  uint64_t src_bytes;
  double call_ns;  /* the copy call's time on the host */
  double model_ns; /* the model's set-up and bytes */
  double due_ns;   /* not read before (the model's time, twice over) */
  int failed;      /* a call failed: not probed again */
} ibp_engine_probe;

/* A copy of a copy-engine route is being timed: probes the set-up on
 * slot's device beside it (read with it), unless a probe is on its way,
 * enough fresh ones were read at now_ns, probing failed, there is no
 * source, or slot's context is not current.  Caller holds the chooser's
 * lock, in relaxed capture mode, the caller's stream not capturing. */
void ibp__engine_probe_start(const ibp_driver *d, const ibp_profile *p,
                             ibp_device_slot *slot, ibp_engine_probe *e,
                             double now_ns);

/* Reads the probe on its way if the GPU has run it (never waits); returns
 * 1 when it learnt something.  Same conditions as ibp__engine_probe_start. */
int ibp__engine_probe_read(const ibp_driver *d, ibp_device_slot *slot,
                           ibp_engine_probe *e, double now_ns);

#endif /* IBP_PRELOAD_ENGINE_PROBE_H */
