/*
 * The staged path (staged.c; docs/ARCHITECTURE.md "Staged copies"): the
 * copy engine moves the packed streams a copy needs from the shadow into a
 * per-context ring of device buffers (IBP_STAGING), on libibp's own
 * stream, chunk by chunk; each chunk is decoded from device memory by the
 * decompress kernel on the caller's stream, with at most IBP_MAX_SMS
 * blocks.  Events join the two streams both ways: a chunk's decode waits
 * for its copy, a buffer's next copy for the decode that read it.
 */
#ifndef IBP_PRELOAD_STAGED_H
#define IBP_PRELOAD_STAGED_H

#include <cuda.h>

#include "ibp_kernels.h"
#include "profile/profile.h"
#include "serve/choose/gate.h"
#include "serve/copy.h"
#include "serve/region.h"

/* A copy as the staged path would serve it: the gate's view, the buffer
 * size and tail share its chunks were cut for, and the shadow they are
 * copied from. */
typedef struct ibp_staged_plan {
  ibp_gate_staged gate;
  uint64_t buffer_bytes;
  double share; /* of what is left, a chunk near the copy's end */
  const uint8_t *shadow;
} ibp_staged_plan;

/* Plans copy c of region s on device dev in context ctx, whose launch
 * arguments `a` are prepared (substitute.c, with `launching` held), and
 * models its decodes on the slot's staged launch shape.  busy: c's stream
 * still runs earlier work, by the chooser's estimates (serve/choose/
 * streams.h; no driver call): copies back to back overlap.
 * Returns 0 and fills *out when the path can serve it: staging enabled
 * (and not failed in ctx: its ring is made by the first staged copy), no
 * refresh running, every tensor of the copy placed.  The decodes are the
 * model's, scaled by the smallest of the slot's recent measured decodes
 * against the model (decode_probe.h): a region whose data decodes
 * slower than the profile's rate is planned as it runs. */
int ibp__staged_plan(ibp_served_region *s, ibp_device_slot *slot, CUcontext ctx,
                     int dev, const ibp_copy *c, unsigned busy,
                     const ibp_decompress_args *a, ibp_staged_plan *out);

/* The launch of a planned copy: the kernel in the context, the device's
 * SMs, the copy's arguments and geometry (substitute.c prepares them). */
typedef struct ibp_staged_args {
  ibp_device_slot *slot; /* its decodes are timed now and then */
  int dev;
  CUfunction fn;
  unsigned sms;
  const ibp_decompress_args *a;
  const ibp_kernel_plan *plan;      /* the staged launch shape ... */
  const ibp_decompress_args *shape; /* ... and its staging fields */
  const ibp_staged_plan *sp;
  /* A timed copy's start (NULL: none): recorded on the copy stream before
   * its first window's copy, after that buffer's wait for its last decode
   * -- the windows' span holds no decode; *started says it was */
  CUevent start;
  int *started;
  double *aside_ns; /* adds the decode probe's CPU time, which is the probe's,
                       not the copy's (NULL: not counted) */
} ibp_staged_args;

/* Serves copy c as planned: for each chunk, its window copied into a
 * buffer of the ring and the kernel launched on c->stream with the chunk's
 * range and at most IBP_MAX_SMS blocks.  Returns 0 when served; 1 when
 * nothing was queued (no buffer free of other streams' work: the caller
 * takes another path); 2 when a later chunk found none (cut: the chunks
 * before it wrote correct bytes, the caller's own copy, queued after them,
 * rewrites them all -- no failure); -1 on a failure (*err), likewise. */
int ibp__staged_copy(const ibp_served_region *s, CUcontext ctx,
                     const ibp_copy *c, const ibp_staged_args *x,
                     CUresult *err);

/* The copy stream that moves the windows of caller stream `stream`'s
 * copies in context ctx (made with the ring on first use); NULL when the
 * path cannot serve it there.  A timed staged copy's span is taken on it:
 * the windows, the route's first stage (serve/route/route_staged.c). */
CUstream ibp__staged_copy_stream(CUcontext ctx, int dev, CUstream stream);

/* A context ends (NULL: the primary context of device dev): its ring goes
 * with it (its memory, stream and events are the context's). */
void ibp__staged_context_end(CUcontext ctx, int dev);

void ibp__staged_after_fork_child(void);

#endif /* IBP_PRELOAD_STAGED_H */
