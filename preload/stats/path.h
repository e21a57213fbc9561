/*
 * Report file names (stats/path.c): IBP_STATS and IBP_DISCOVER paths may
 * hold %p (the process id) and %r (the rank of a multi-process job), so
 * every process of a torchrun or Slurm job writes its own file
 * (docs/CONFIG.md, "Statistics").
 */
#ifndef IBP_PRELOAD_STATS_PATH_H
#define IBP_PRELOAD_STATS_PATH_H

#include <stddef.h>

/* Writes `in` into out (cap bytes) with %p replaced by the process id, %r
 * by $RANK, else $LOCAL_RANK (when it is a number of at most 9 digits),
 * else 0, and %% by %; any other % is kept as it is.  Returns 0, or -1
 * when the result does not fit (out then holds `in` truncated). */
int ibp__stats_path_expand(const char *in, char *out, size_t cap);

#endif /* IBP_PRELOAD_STATS_PATH_H */
