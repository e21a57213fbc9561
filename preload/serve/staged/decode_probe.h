/*
 * The staged path's decode as measured (decode_probe.c): now and then one
 * chunk's decode is timed on the GPU (serve/staged/staged.c, which owns
 * the events), and each reading -- its time over the model's -- is kept
 * here as the chooser keeps its timed copies (serve/choose/choose.h): the
 * smallest recent reading scales the model's decodes, a reading counts for
 * IBP_CHOOSE_AGE_NS, and a failing event call pauses the timing for
 * IBP_CHOOSE_PAUSE_NS, twice as long after each failure in a row, at most
 * IBP_CHOOSE_PAUSE_MAX_NS.  Times are the device's clock (ns).
 * Threads: the caller's lock (one per device slot's probe).
 */
#ifndef IBP_PRELOAD_DECODE_PROBE_H
#define IBP_PRELOAD_DECODE_PROBE_H

/* The readings kept */
#define IBP_DECODE_PROBES 3

typedef struct ibp_decode_probe {
  double after_ns; /* no timing before */
  double pause_ns; /* the next failure's pause (0: the first's) */
  double seen[IBP_DECODE_PROBES];    /* readings, each within [1/16, 16] */
  double seen_ns[IBP_DECODE_PROBES]; /* ... when each was read */
  unsigned readings;                 /* taken so far */
} ibp_decode_probe;

/* Whether a decode may be timed at now_ns (none pending: the caller's). */
int ibp__probe_due(const ibp_decode_probe *p, double now_ns);
/* A decode was timed at now_ns: the next no sooner than gap_ns later. */
void ibp__probe_timed(ibp_decode_probe *p, double now_ns, double gap_ns);
/* A timed decode took `took` where the model gave model_us, of which
 * `fixed` the launch's latency: read at now_ns; returns the reading. */
double ibp__probe_read(ibp_decode_probe *p, double took, double model_us,
                       double fixed, double now_ns);
/* An event call of the timing failed at now_ns: a pause. */
void ibp__probe_failed(ibp_decode_probe *p, double now_ns);
/* The measured decode over the model's at now_ns: the smallest reading
 * not older than IBP_CHOOSE_AGE_NS, 1 while none is. */
double ibp__probe_scale(const ibp_decode_probe *p, double now_ns);

#endif /* IBP_PRELOAD_DECODE_PROBE_H */
