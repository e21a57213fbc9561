/*
 * The route BATCHED's model (route_batched.c): a copy held for its
 * stream's batched launch (serve/batch/batch.h), as the batch's timing
 * and the statistics' modelled saving need it besides the prior.
 */
#ifndef IBP_PRELOAD_ROUTE_BATCHED_H
#define IBP_PRELOAD_ROUTE_BATCHED_H

#include "profile/profile.h"
#include "serve/choose/gate.h"
#include "serve/route/batch_model.h"

/* A copy held for a batched launch.  The model's batch is at most this
 * share of its time alone (the prior's margin): the model leaves out how a
 * batched launch's reads share the link with the worker's uploads and the
 * application's copies, and batches of written regions recompressed
 * meanwhile (bench/ab's kv_offload line: batches modelled 1 % faster ran
 * 5 % slower). */
#define IBP_BATCH_MARGIN 0.9
/* An explored batch's copies cost the model at most this many times as
 * much each as the batch expected's: its fixed costs at most double a
 * copy's (route_batched.c, explored). */
#define IBP_BATCH_EXPLORE_SPREAD 2.0

#endif /* IBP_PRELOAD_ROUTE_BATCHED_H */
