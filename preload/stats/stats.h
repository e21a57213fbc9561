/*
 * Statistics (stats/): the per-region figures of stats.def, and the exit
 * report IBP_STATS asks for (report.c): a text table on stderr or a JSON
 * file (its document is described in report.c).
 *
 * This directory depends on base/ and the registry only.  The rows come
 * from the owner of the regions (serve/figures.c), which fills an
 * ibp_stat_row per region and hands them over.
 */
#ifndef IBP_PRELOAD_STATS_H
#define IBP_PRELOAD_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"

/* Why a copy was the driver's (stats/reasons.def). */
enum {
#define IBP_REASON(name, text) IBP_PASSED_##name,
#include "stats/reasons.def"
#undef IBP_REASON
  IBP_PASSED_REASONS
};

/* The counters of one region (the IBP_COUNTER rows, and the copies passed
 * by reason); relaxed atomic adds from any thread. */
typedef struct ibp_counters {
#define IBP_COUNTER(key, unit, column) _Atomic uint64_t key;
#define IBP_GAUGE(key, unit, column, from)
#include "stats/stats.def"
#undef IBP_COUNTER
#undef IBP_GAUGE
  _Atomic uint64_t passed[IBP_PASSED_REASONS]; /* copies, by reason */
} ibp_counters;

/* Adds v to counter `key` of an ibp_counters (relaxed). */
#define ibp__count(counters, key, v)                                           \
  atomic_fetch_add_explicit(&(counters)->key, (v), memory_order_relaxed)

/* `copies` copies of `bytes` in all that the driver ran for `reason`
 * (IBP_PASSED_*), each counted once: by its reason, and as copies_gated
 * (gated), copies_fallback (failed) or copies_passthrough (the others;
 * not-ready ones also as copies_not_ready). */
static inline void ibp__count_passed(ibp_counters *c, int reason,
                                     uint64_t copies, uint64_t bytes) {
  ibp__count(c, passed[reason], copies);
  if (reason == IBP_PASSED_GATED) {
    ibp__count(c, copies_gated, copies);
    ibp__count(c, bytes_gated, bytes);
  } else if (reason == IBP_PASSED_FAILED) {
    ibp__count(c, copies_fallback, copies);
  } else {
    ibp__count(c, copies_passthrough, copies);
    ibp__count(c, bytes_passthrough, bytes);
    if (reason == IBP_PASSED_NOT_READY)
      ibp__count(c, copies_not_ready, copies);
  }
}

/* The routes of stats/routes.def, counted. */
enum {
#define IBP_ROUTE(name, text, ops) IBP_STAT_ROUTE_##name,
#include "stats/routes.def"
#undef IBP_ROUTE
  IBP_STAT_ROUTES
};

/* What the gate's chooser (docs/ARCHITECTURE.md "The gate") saw of one
 * route of a region, all devices together. */
typedef struct ibp_stat_route {
  uint64_t copies;     /* that took it */
  uint64_t explored;   /* of those, taken to measure it */
  uint64_t timed;      /* of those, timed on the GPU */
  double measured_ns;  /* the timed copies' cost, measured (summed) */
  double model_ns;     /* ... and as the model gave it */
  double cpu_ns;       /* the timed copies' calls on the calling thread,
                          measured (summed; the runtime's and libibp's own
                          work before them left out) */
  double cpu_model_ns; /* ... and as the model gave them */
  uint64_t classes;    /* classes of copies whose choice ended on it */
} ibp_stat_route;

/* The figures of one region, copied out of its records. */
typedef struct ibp_stat_row {
  uint64_t id;
  uint64_t seq; /* retire order; UINT64_MAX for a live region */
  uintptr_t base;
  uint64_t bytes;
  char name[IBP_REGISTRY_NAME_MAX + 32];
  char label[IBP_REGISTRY_NAME_MAX + 32]; /* the report's: the name, and
                                              "#k" where names repeat */
  uint32_t tensor_bytes, chunk_bytes, rule_chunk;
  uint32_t clusters; /* Mask/Bitval pairs (docs/FORMAT.md §4) */
  double threshold, rule_threshold;
  int compressed; /* the codec fields below are valid */
  uint64_t tensors, tensors_compressed, compressed_bytes, metadata_bytes;
  double saved_fraction;
  const char *stage_pick;  /* why the coding stage is what it is: "exp"
                              (the exponent stage), "untried", "no-fit",
                              "bytes", "time" (serve/region.h
                              ibp_stage_pick); a static string, NULL:
                              "untried" */
  uint32_t stage_clusters; /* clusters with the stage on (0: IBP alone) */
  ibp_region_state state;
  int retired;
  int freed_early;     /* freed before its compression finished: state
                          "freed-early", nothing compressed */
  uint64_t copy_gcd;   /* of its first copies' offsets and lengths; 0: none */
  const char *tracker; /* ibp__track_kind_name: a static string */
  const char *mode;    /* ibp__track_mode_name: a static string */
#define IBP_COUNTER(key, unit, column) uint64_t key;
#define IBP_GAUGE(key, unit, column, from) uint64_t key;
#include "stats/stats.def"
#undef IBP_COUNTER
#undef IBP_GAUGE
  uint64_t passed[IBP_PASSED_REASONS]; /* copies the driver ran, by reason */
  ibp_stat_route route[IBP_STAT_ROUTES];
} ibp_stat_row;

/* Keeps the final figures of a region about to leave the registry (freed,
 * unregistered) so the exit report still lists it; `row` is copied.
 * Lock-free and thread-safe. */
void ibp__stats_keep_retired(const ibp_stat_row *row);

/* Writes the report IBP_STATS asks for (nothing when it is off): every
 * retired row, then the `n` live rows of `live` (a region listed more than
 * once keeps its latest figures).  Makes no CUDA call; a failure (out of
 * memory, unwritable path) is one warning.  Runs once per process; later
 * calls do nothing. */
void ibp__stats_write(ibp_stat_row *live, size_t n, int live_incomplete);

/* A write-combined pinned allocation of `bytes` that a rule matched but
 * did not ask for by wc=yes: left to the driver, and said once in the
 * report (docs/CONFIG.md, `wc=`).  Lock-free. */
void ibp__stats_left_write_combined(uint64_t bytes);

/* Devices whose cost profile the report notes: ordinals 0 .. this - 1. */
#define IBP_STATS_DEVICES 16

/* The cost profile device `dev` is modelled with (serve/choose/gate.c, as
 * it sets the device up): its name, its decoder_build and whether that is
 * the running decompress kernels' build (ibp_profile_decode_measured).
 * The report lists them and says once when decode terms are unmeasured
 * for this decoder.  The first call per device counts; the strings are
 * copied (cut to 63 bytes).  Lock-free. */
void ibp__stats_note_profile(int dev, const char *name,
                             const char *decoder_build, int decode_measured);

/* Nonzero when a report will be written (IBP_STATS set, not yet written). */
int ibp__stats_wanted(void);

/* In the child after fork: the exit report is the parent's; the child
 * writes none. */
void ibp__stats_after_fork_child(void);

#endif /* IBP_PRELOAD_STATS_H */
