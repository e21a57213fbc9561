/*
 * The entry-point table built from simcuda_entries.def.  This header does
 * not include cuda.h: simcuda_proc_table.c and simcuda_stubs.c declare the
 * exported symbols themselves (as `void f(void)`), which would clash with
 * cuda.h's prototypes.
 */
#ifndef SIMCUDA_PROC_H
#define SIMCUDA_PROC_H

#include <stddef.h>

typedef void (*scu_fn)(void);

typedef struct scu_proc_entry {
  const char *name;   /* looked-up name */
  const char *symbol; /* exported symbol */
  int version;        /* ABI introduced in this version */
  char variant;       /* 'D' default stream, 'P' per-thread default stream */
  char impl;          /* 1: implemented, 0: stub (CUDA_ERROR_NOT_SUPPORTED) */
  scu_fn fn;
} scu_proc_entry;

__attribute__((
    visibility("hidden"))) extern const scu_proc_entry scu_proc_table[];
__attribute__((visibility("hidden"))) extern const size_t scu_proc_count;

/* What every stub does: fault injection and tracing like any entry point,
 * one line on stderr the first time (`warned`), then
 * CUDA_ERROR_NOT_SUPPORTED. */
__attribute__((visibility("hidden"))) int
scu_stub_called(const char *name, const char *symbol, int *warned);

#endif
