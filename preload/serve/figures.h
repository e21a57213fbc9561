/*
 * The statistics of served regions (figures.c): their rows for the exit
 * report (stats/stats.h).
 */
#ifndef IBP_PRELOAD_FIGURES_H
#define IBP_PRELOAD_FIGURES_H

#include "registry/registry.h"

/* Keeps the final figures of r, about to leave the registry (freed,
 * unregistered), so the exit report still lists it; `freed_early`: its
 * compression had not finished (the report's state "freed-early").
 * Thread-safe. */
void ibp__figures_retire(const ibp_region_rec *r, int freed_early);

/* The exit report (atexit): the figures of every live region, with the
 * retired ones, written as IBP_STATS asks.  Makes no CUDA call. */
void ibp__figures_report(void);

#endif /* IBP_PRELOAD_FIGURES_H */
