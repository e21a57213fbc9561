/*
 * The virtual clock of the simulated GPU (docs/PROFILE.md, "The virtual
 * clock"): every operation gets a modelled start and end time from the
 * device cost profile (tests/sim/clock/simclock.h), so that events, their
 * elapsed time and every synchronisation report modelled time, not the
 * emulator's.
 *
 *   submission   the calling thread is charged the CPU cost of the call
 *                (driver_copy_call_us, driver_launch_call_us,
 *                driver_call_us); the operation cannot start before that
 *   start        max(submission, the stream's previous operation, its
 *                dependencies)
 *   copies       host<->device: ce_setup_us, then bytes at the copy
 *                engine's bandwidth on the PCIe link (shared by all
 *                streams, one timeline per direction); device to device:
 *                read + write at dram_gbps.  A batch call
 *                (cuMemcpyBatchAsync) is one call, charged with its first
 *                entry; each later entry is set up at ce_batch_setup_us
 *                (what the CPU spends on an entry within the call is not
 *                modelled: not measured)
 *   sets         bytes at dram_gbps
 *   kernels      ibp_profile_kernel_us (ibp_profile_decode_staged_us for
 *                the decompress kernels, the exponent stage's term over
 *                what they decode through it) from the sectors the
 *                emulator counted and the bytes the kernel writes, on its
 *                SMs (launch_sms): the time it takes alone.  Kernels share
 *                their device's SMs: from its start a kernel gets what
 *                the kernels before it left free (at most its own), and
 *                runs slower on fewer, until it has had its SM time
 *                (simclock_sms_reserve; reserved in the order of
 *                submission, simcuda_turns.c).  Its host reads occupy the
 *                host-to-device link; it ends when both are done.
 *                SIMCUDA_DECODE_SCALE=f (tests) makes the decompress
 *                kernels take f times the model's time: data that decodes
 *                slower than the profile's rate
 *   host work    host functions and callbacks take their real time
 *   events       stamped with their start
 */
#include "simcuda_internal.h"

#include "ibp_kernels.h"

#include "simclock.h"

#include <pthread.h>
#include <stdlib.h>

static double us_to_ns(double us) {
  return us * 1e3;
}

static double call_us(const ibp_profile *p, scu_opkind kind) {
  switch (kind) {
  case SCU_OP_COPY:
  case SCU_OP_COPY2D:
    return p->driver_copy_call_us;
  case SCU_OP_LAUNCH:
    return p->driver_launch_call_us;
  case SCU_OP_NOP:
  case SCU_OP_FREE:
    return 0;
  default:
    return p->driver_call_us;
  }
}

void scu_vclock_submit(scu_op *op) {
  if (!op->batch_entry)
    simclock_charge_us(call_us(simclock_profile(), op->kind));
  op->vt_submit = simclock_now();
}

double scu_vclock_end_of(const scu_stream *s, uint64_t seq) {
  const scu_vt *v = &s->vt;
  if (v->ring[seq % SCU_VT_RING].seq == seq)
    return v->ring[seq % SCU_VT_RING].end;
  return v->end; /* long gone: at most the stream's latest end */
}

void scu_vclock_complete(scu_stream *s, uint64_t seq, double end) {
  scu_vt *v = &s->vt;
  if (end > v->end)
    v->end = end;
  v->ring[seq % SCU_VT_RING].seq = seq;
  v->ring[seq % SCU_VT_RING].end = end;
}

double scu_vclock_start(scu_stream *s, const scu_op *op) {
  double t = op->vt_submit;
  pthread_mutex_lock(&s->m);
  if (s->vt.end > t)
    t = s->vt.end;
  pthread_mutex_unlock(&s->m);
  for (unsigned i = 0; i < op->ndeps; i++) {
    scu_stream *d = op->deps[i].s;
    pthread_mutex_lock(&d->m);
    double e = scu_vclock_end_of(d, op->deps[i].seq);
    pthread_mutex_unlock(&d->m);
    if (e > t)
      t = e;
  }
  return t;
}

static double copy_end(const ibp_profile *p, const scu_op *op, uint64_t bytes,
                       double start) {
  const unsigned link = op->link;
  if (link == SCU_LINK_NONE) /* device to device: read and write */
    return start + us_to_ns(p->ce_setup_us) +
           2.0 * (double)bytes / p->dram_gbps;
  int h2d = link == SIMCLOCK_LINK_H2D;
  double ready =
      start + us_to_ns(op->batch_entry ? p->ce_batch_setup_us : p->ce_setup_us);
  double dur = (double)bytes / (h2d ? p->ce_h2d_gbps : p->ce_d2h_gbps);
  scu_turn_wait(op);
  return simclock_link_reserve((simclock_link)link, ready, dur);
}

/* A kernel's SMs: a block each, up to the profile's; libibp's decompress
 * kernels are worth their warps over IBP_STAGED_WARPS (the model's SM,
 * ibp_kernels_decode_sms). */
static unsigned launch_sms(const ibp_profile *p, const simt_launch *l,
                           int decodes) {
  uint64_t blocks = (uint64_t)l->grid.x * l->grid.y * l->grid.z;
  if (decodes)
    return ibp_kernels_decode_sms(
        blocks, (unsigned)(l->block.x * l->block.y * l->block.z),
        (unsigned)p->sms);
  return blocks < (uint64_t)p->sms ? (unsigned)(blocks ? blocks : 1)
                                   : (unsigned)p->sms;
}

static double decode_factor = 1.0;
static pthread_once_t decode_once = PTHREAD_ONCE_INIT;

static void read_decode_scale(void) {
  const char *e = getenv("SIMCUDA_DECODE_SCALE");
  char *end = NULL;
  double f = e ? strtod(e, &end) : 0;
  if (e && (end == e || *end || !(f > 0 && f <= 1000)))
    scu_log("SIMCUDA_DECODE_SCALE=%s: not a factor in (0, 1000]; 1", e);
  else if (e)
    decode_factor = f;
}

/* SIMCUDA_DECODE_SCALE, read once (1 when unset). */
static double decode_scale(void) {
  pthread_once(&decode_once, read_decode_scale);
  return decode_factor;
}

/* The model's kernel time on its SMs, shared with the device's other
 * kernels, with its host reads placed on the link: they start after the
 * launch latency and one round trip. */
static double launch_end(const ibp_profile *p, const scu_op *op,
                         unsigned device, double start) {
  const simt_launch *l = &op->u.launch.l;
  unsigned sms = launch_sms(p, l, op->u.launch.decodes);
  uint64_t host = op->u.launch.pcie.sectors * 32; /* simt's sectors */
  const int dec = op->u.launch.decodes;
  const uint64_t out =
      op->u.launch.out_bytes ? op->u.launch.out_bytes(op->owned) : 0;
  uint64_t stage_units = 0;
  const uint64_t stage_bytes =
      dec && op->u.launch.stage_bytes
          ? op->u.launch.stage_bytes(op->owned, &stage_units)
          : 0;
  double alone =
      us_to_ns(dec ? decode_scale() * ibp_profile_decode_staged_us(
                                          p, host, out, op->u.launch.units,
                                          stage_bytes, stage_units, sms)
                   : ibp_profile_kernel_us(p, host, out, sms));
  scu_turn_wait(op);
  double sms_end =
      simclock_sms_reserve(device, start, (unsigned)p->sms, sms, alone);
  if (!host)
    return sms_end;
  double reads_ready =
      start + us_to_ns(p->launch_latency_us) + us_to_ns(p->sm_read_rtt_us);
  double reads = (double)host / (dec ? ibp_profile_decode_read_gbps(p, sms)
                                     : ibp_profile_sm_read_gbps(p, sms));
  double reads_end =
      simclock_link_reserve(SIMCLOCK_LINK_H2D, reads_ready, reads);
  return reads_end > sms_end ? reads_end : sms_end;
}

double scu_vclock_end(const scu_stream *s, const scu_op *op, double start,
                      double host_ns) {
  const ibp_profile *p = simclock_profile();
  switch (op->kind) {
  case SCU_OP_COPY:
    return copy_end(p, op, op->u.copy.bytes, start);
  case SCU_OP_COPY2D:
    return copy_end(p, op,
                    (uint64_t)op->u.copy2d.width * op->u.copy2d.height *
                        op->u.copy2d.depth,
                    start);
  case SCU_OP_SET:
    return start + us_to_ns(p->ce_setup_us) +
           (double)(op->u.set.width * op->u.set.elem * op->u.set.height) /
               p->dram_gbps;
  case SCU_OP_LAUNCH:
    return launch_end(p, op, (unsigned)s->ctx->device, start);
  case SCU_OP_HOSTFN:
  case SCU_OP_CALLBACK:
    return start + host_ns;
  default:
    return start;
  }
}
