/*
 * A batched launch as the model sees it (batch_model.c): what a batch of
 * n copies costs, and which batch of fewer copies than its class expects
 * stands for the batch expected when timed (docs/ARCHITECTURE.md "The
 * gate", an explored batch).  The route (route_batched.c) and a stream's
 * batch (serve/batch/) use it.
 */
#ifndef IBP_PRELOAD_BATCH_MODEL_H
#define IBP_PRELOAD_BATCH_MODEL_H

#include <stdint.h>

#include "profile/profile.h"
#include "serve/choose/choose.h"
#include "serve/choose/gate.h"

/* The model of copy c held in a batch of `copies` copies like it, before
 * the margin, in two terms (ns per copy): the CPU's (libibp's hold, the
 * runtime's call when own_call -- not for an entry of the application's
 * batch --, the flush's calls shared) and the GPU's (the batch's kernel
 * and job-list copy, shared).  The write tracker's scan at the flush is
 * the caller's to add (serve/batch/batch.c measures it). */
void ibp__route_batched_split(const ibp_profile *p, const ibp_gate_copy *c,
                              double copies, int own_call, double *cpu_ns,
                              double *gpu_ns);

/* A timed batched launch of `copies` copies like c, as the chooser times
 * it (serve/batch/batch_route.c): CPU, the flush's calls (the span's,
 * before its first GPU work) and, as libibp's own (own_ns, not timed), the
 * copies' runtime calls when own_call and holds before it, and the write
 * tracker's scan the flush paid (scan_ns); GPU, the batch's kernel and job
 * list; serial -- as the route's estimate adds them up
 * (serve/choose/chooser.c reads it so). */
ibp_route_cost ibp__batch_timed_model(const ibp_profile *p,
                                      const ibp_gate_copy *c, uint32_t copies,
                                      int own_call, double scan_ns);

/* The ways a profile may be wrong that a batch's size weighs differently:
 * the link (the SMs' host reads and the copy engine) and the SMs' decode,
 * each IBP_BATCH_PROBE times as slow or as fast -- the truths the gate is
 * held to are 3-4x off (docs/ARCHITECTURE.md "The gate"). */
enum { IBP_BATCH_WRONG_LINK, IBP_BATCH_WRONG_DECODE, IBP_BATCH_WRONGS };
#define IBP_BATCH_PROBE 3.0
/* A smaller batch stands for the expected one where, wrong in any of those
 * ways, the profile's model of it is off by at least the expected batch's
 * factor over this: the class learns a factor per launch
 * (serve/choose/choose.c) and takes it for its batches. */
#define IBP_BATCH_STANDS_LIKE 1.15

/* Whether a timed batch of n copies like c stands for a batch of `expected`
 * on profile p (own_call as ibp__route_batched_split's): wherever p is
 * wrong in one of the ways above, the factor by which its GPU time is off
 * p's model is never much less than the expected batch's -- the class
 * would take its batches for cheaper than they are.  More is allowed: they
 * look dearer, a win missed, never a copy made slower. */
int ibp__batch_stands_for(const ibp_profile *p, const ibp_gate_copy *c,
                          uint32_t n, uint32_t expected, int own_call);

#endif /* IBP_PRELOAD_BATCH_MODEL_H */
