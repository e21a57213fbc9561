/*
 * A served region: everything libibp keeps about one pinned region beyond
 * the registry's record (identity, range, state, references), which points
 * to it as its owner.  One sub-struct per concern, each with one writer
 * (docs/ARCHITECTURE.md, "Who owns what"):
 *
 *   geometry  fixed at creation, from the rule: the one source of the
 *             tensor size
 *   layout    the codec's result and the packed shadow (compress.c; the
 *             offsets, lengths and cluster ids of busy tensors also by
 *             refresh.c)
 *   track     write tracking (track/track.h)
 *   refresh   recompressing written tensors (refresh.c)
 *   dev       per-device state (device.c)
 *   gate      what the gate saw of the copies (gate.c)
 *   counters  statistics (stats/stats.def)
 *
 * Created with the registry record (hooks/hooks_pinned.c) and freed by the
 * release hook (worker.c), which hands its pinned and device memory to the
 * worker first.
 */
#ifndef IBP_PRELOAD_SERVE_REGION_H
#define IBP_PRELOAD_SERVE_REGION_H

#include <cuda.h>
#include <ibp/codec.h>
#include <ibp/stage.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kernels/ibp_kernels.h"
#include "registry/registry.h"
#include "serve/staged/decode_probe.h"
#include "stats/stats.h"
#include "track/track.h"

#define IBP_MAX_DEVICES 16 /* device ordinals 0..15 */

/* Where a region's tensors lie; immutable after creation. */
typedef struct ibp_geometry {
  uint32_t tensor_bytes; /* R: tensor i is [base + i*R, base + (i+1)*R) */
  uint64_t tensors;      /* n = bytes / R (0: smaller than one tensor) */
} ibp_geometry;

/* Whether a region is stored with the exponent stage, and why
 * (serve/prepare/compress.c; docs/PROFILE.md "Whether the stage pays"). */
typedef enum ibp_stage_pick {
  IBP_STAGE_PICK_UNTRIED = 0, /* not tried: R too large, a compact region,
                                 or the choice failed */
  IBP_STAGE_PICK_NO_FIT,      /* no value type fits R */
  IBP_STAGE_PICK_BYTES,       /* IBP alone: the stage stores no fewer bytes */
  IBP_STAGE_PICK_TIME,        /* IBP alone: the stage stores fewer bytes
                                 but a copy costs more with it (the
                                 device's profile) */
  IBP_STAGE_PICK_EXP          /* the exponent stage */
} ibp_stage_pick;

/* The codec's result: written only by the thread that moved the region to
 * COMPRESSING; read-only once READY (seen with acquire), except that a
 * refresh (refresh.c, on the worker) changes offsets/lengths/cluster ids
 * of tensors it holds busy. */
typedef struct ibp_layout {
  ibp_clusters clusters;     /* the region's K >= 1 Mask/Bitval pairs
                                (docs/FORMAT.md §4), K = 1 with clusters=1 or
                                where more save nothing; count 0 until the
                                search ran */
  uint8_t *ids;              /* K > 1: tensor i's cluster id, bits [i*b,
                                (i+1)*b) (b = ibp_cluster_id_bits(K)), padded
                                with zeros to whole 32-bit words; NULL when
                                K = 1.  A refresh rewrites the ids of the
                                tensors it holds busy. */
  ibp_stage *stages;         /* K exponent stages, one per pair (docs/FORMAT.md
                                §9; the pairs fit them), or NULL: IBP alone.
                                Set with the pairs, before any stream. */
  ibp_stage_pick stage_pick; /* why stages is what it is */
  ibp_region_summary summary;
  void *shadow;          /* the compressed streams, packed (docs/FORMAT.md §3;
                            pinned, device-mapped), then room for streams a
                            refresh moves */
  uint64_t shadow_bytes; /* allocated */
  CUcontext ctx;         /* the context the shadow was allocated in */
  uint8_t *flags;        /* one bit per tensor, 1 = compressed */
  uint64_t *offsets;     /* n+1: tensor i's stream starts at shadow +
                            offsets[i] (offsets[n]: end of the packed part) */
  uint32_t *lengths;     /* n: ... and is lengths[i] bytes (0: stored raw) */
  uint64_t *prefix;      /* n+1: stored bytes of tensors 0..i-1 (raw ones
                            count R): what a copy reads over PCIe */
  uint64_t stream_capacity; /* bytes of the shadow the fill may use */
  _Atomic uint64_t filled;  /* tensors the fill has placed (pack.c):
                               prefix[0..filled] are final */
} ibp_layout;

/* Recompression of written tensors (refresh.c). */
typedef struct ibp_refresh {
  /* Like track.dirty (same layout, same mapped allocation, right after
   * it): tensors whose stream a refresh is rewriting, or that the first
   * compression has not written yet (compress.c, "filling"); the kernel
   * serves them raw.  NULL until compression allocated it. */
  _Atomic uint32_t *busy;
  _Atomic int pending;          /* a refresh job is queued, or the region is
                                   still filling: no refresh may start */
  _Atomic int refreshing;       /* busy bits may be set: kernels read them */
  _Atomic int filling;          /* streams still being written (compress.c) */
  uint64_t fill_started_ns;     /* worker only: when compression began */
  _Atomic int launching;        /* copies between deciding and launching */
  _Atomic uint64_t runs;        /* refresh jobs run */
  _Atomic uint64_t work;        /* ... weighed: one per 32nd of the region
                                   each took up, at least one (refresh.c) */
  _Atomic uint64_t dirty_floor; /* dirty tensors the last refresh could not
                                   help: stored raw, or no room */
  _Atomic uint64_t stuck;       /* of those, the ones once compressed, or all
                                   dirty once the pages could not be
                                   protected again (refresh.c) */
  unsigned refused;             /* worker only: refreshes in a row whose
                                   pages could not be protected again */
  /* Worker only: each tensor's room in the shadow (bytes; a stream that no
   * longer fits moves to the spill room after the packed streams, from
   * spill_top on). */
  uint32_t *room;
  uint64_t spill_top;
} ibp_refresh;

/* Copies of a region on a device timed at once at most
 * (serve/choose/chooser.h). */
#define IBP_TIMING_SAMPLES 4
/* Events per timed copy: its start and end on its stream, and one on each
 * of at most IBP_TIMING_OTHERS other streams whose work it may wait for
 * (serve/choose/chooser.c, contention); a copy timed on a stream of the
 * route's own (the staged path's copy stream) also has its whole span on
 * the caller's stream, with IBP_TIMING_CALLER_OTHERS others of its own;
 * the last, IBP_TIMING_MARK, is recorded on a stream that runs nothing. */
#define IBP_TIMING_OTHERS 3
#define IBP_TIMING_CALLER_OTHERS 2
#define IBP_TIMING_CALLER (2 + IBP_TIMING_OTHERS)
#define IBP_TIMING_MARK (IBP_TIMING_CALLER + 2 + IBP_TIMING_CALLER_OTHERS)
#define IBP_TIMING_EVENTS (IBP_TIMING_MARK + 1)
/* Events after the other streams' copies libibp queued on the link while
 * copies were timed (serve/choose/beside.c): what shared the link with
 * them, at most this many at once. */
#define IBP_TIMING_BESIDE 4

/* Per-device state (ibp_device_slot.state). */
typedef enum ibp_device_state {
  IBP_DEVICE_ABSENT = 0,    /* nothing uploaded */
  IBP_DEVICE_UPLOADING = 1, /* claimed by one thread, which fills the slot */
  IBP_DEVICE_READY = 2,     /* fields valid (published with release) */
  IBP_DEVICE_FAILED = 3     /* substitution disabled on this device */
} ibp_device_state;

/* A region's metadata in one device's memory (device.c allocates it, the
 * worker frees it with the region). */
typedef struct ibp_device_memory {
  CUdeviceptr plan;     /* the decode plan of every cluster
                           (kernels/ibp_kernels.h) */
  unsigned plan_stages; /* its S */
  CUdeviceptr stages;   /* K ibp_kernel_stage (layout.stages); 0: none */
  CUdeviceptr ids;      /* the cluster ids (layout.ids); 0 when K = 1 */
  CUdeviceptr flags;    /* one bit per tensor */
  CUdeviceptr offsets;  /* n stream offsets into the shadow */
  CUdeviceptr lengths;  /* n stream lengths (uint32) */
  CUevent probe[2];     /* serve/staged/staged.c: a decode's timing; NULL
                           until used */
  /* serve/choose/chooser.c: the timed copies' events, IBP_TIMING_EVENTS
   * per sample; NULL until used */
  CUevent timing[IBP_TIMING_EVENTS * IBP_TIMING_SAMPLES];
  CUevent beside[2 * IBP_TIMING_BESIDE]; /* ... and serve/choose/beside.c's:
                                           before and after each copy */
  /* ... and the stream their markers are recorded on, which runs nothing
   * (an event there completes as it is recorded); NULL until used, or
   * where it could not be created (mark_failed: not tried again) */
  CUstream mark;
  int mark_failed;
} ibp_device_memory;

/* One device.  Protocol: a thread moves state ABSENT -> UPLOADING with
 * ibp__device_transition, fills the rest, then moves it to READY
 * (release); readers read the rest only after seeing READY (acquire). */
typedef struct ibp_device_slot {
  _Atomic int state; /* ibp_device_state */
  CUcontext ctx;     /* the context the device memory was allocated in */
  CUfunction fn;     /* ibp_decompress in that context */
  unsigned sms;
  ibp_device_memory mem;
  ibp_kernel_plan plan;
  ibp_decompress_args args; /* launch template: region geometry filled,
                               range fields per copy */
  /* the staged path's launch shape (IBP_STAGED_WARPS warps per block):
   * its plan, and the template whose stage_bytes and stage_buffers go
   * with it */
  ibp_kernel_plan staged_plan;
  ibp_decompress_args staged_args;
  const uint32_t *busy; /* device address of refresh.busy */
  /* the staged decode as measured (serve/staged/staged.c, under its lock):
   * a chunk's kernel timed between mem.probe's events, against the model's
   * time for it (probe_model_us, while probe_pending; of which the launch's
   * latency probe_fixed_us), its readings kept, aged and paused as the
   * chooser's timed copies are (serve/staged/decode_probe.h): their
   * smallest scales the model's staged decodes of this region on this
   * device */
  int probe_pending;
  double probe_model_us;
  double probe_fixed_us;
  ibp_decode_probe decode;
  /* the chooser of this region on this device (serve/choose/chooser.h):
   * its estimates and timed copies; NULL until the first decision */
  struct ibp_chooser *_Atomic chooser;
} ibp_device_slot;

/* What the gate saw of the region's first copies (gate.c): whether its
 * tensor size fits them.  Relaxed atomics, any copying thread. */
typedef struct ibp_gate_seen {
  _Atomic uint64_t copies;
  _Atomic uint64_t requested;  /* bytes */
  _Atomic uint64_t host_bytes; /* stored bytes of the tensors they touch */
  _Atomic uint64_t min_len, max_len;
  _Atomic uint64_t gcd; /* of every copy's length and offset */
} ibp_gate_seen;

typedef struct ibp_served_region {
  ibp_geometry geometry;
  ibp_layout layout;
  ibp_tracked track;
  ibp_refresh refresh;
  ibp_device_slot dev[IBP_MAX_DEVICES];
  ibp_gate_seen gate;
  ibp_counters counters;
  CUcontext home_ctx;      /* current when the memory was pinned (its owner) */
  int home_dev;            /* ... and its device; -1 when unknown */
  _Atomic int invalidated; /* written by a copy while compressing */
  _Atomic unsigned failures; /* substitution errors (degrade on repeat) */
  _Atomic int kernel_args;   /* an application kernel got a pointer into it */
  /* compact regions (serve/compact.h): 1 while the memory is libibp's and
   * may be released (until ibp__compact_pin); the tracker's questions */
  _Atomic int compact;
  ibp_compact_ops compact_ops;
  /* host memory of the region and its shadow (stats), set once it is
   * compressed and after each release of a compact region's pages: the
   * region's resident bytes, the pinned bytes (the region's unless
   * compact, the shadow, the bitmaps), and how long the first release took
   * after compression began */
  struct {
    _Atomic uint64_t resident_bytes, pinned_bytes, release_ns;
    _Atomic uint64_t rebuilt_mark; /* track.pages_rebuilt at the last
                                      release (compact.c) */
  } host;
  _Atomic double batch_scan_ns; /* serve/batch/batch.c (a holding thread, or the
                                   flusher): what the write tracker's scan
                                   cost the region's batched launches
                                   (smoothed; fades while copies are
                                   refused for it) */
  _Atomic uint32_t batch_scan_refused; /* copies refused for it (batch.c) */
} ibp_served_region;

/* The served region of record r; NULL until attached. */
static inline ibp_served_region *ibp__served(const ibp_region_rec *r) {
  return (ibp_served_region *)ibp_region_owner(r);
}

/* A served region for r (geometry from r's rule, tracking described), not
 * yet attached.  NULL on out of memory. */
ibp_served_region *ibp__served_new(const ibp_region_rec *r);

/* Frees the host memory of s (layout arrays, refresh rooms, codec
 * parameters and cluster ids) and s itself; pinned and device memory are the
 * worker's (worker.c).  NULL is ignored. */
void ibp__served_free(ibp_served_region *s);

/* Moves device `dev`'s slot from -> to (CAS, acq_rel); any change is
 * allowed.  Returns 1 when it moved, 0 otherwise (or dev out of range). */
int ibp__device_transition(ibp_served_region *s, unsigned dev,
                           ibp_device_state from, ibp_device_state to);

/* Device `dev`'s state (acquire); IBP_DEVICE_FAILED when out of range. */
ibp_device_state ibp__device_state(const ibp_served_region *s, unsigned dev);

#endif /* IBP_PRELOAD_SERVE_REGION_H */
