/*
 * A progress bar on stderr for long runs.  It draws only when stderr is a
 * terminal, the caller allows it (not --quiet, not --json), and the run has
 * lasted more than a second; it redraws at most ten times a second and
 * erases itself when finished.  A `progress` is used from one thread.
 */
#ifndef IBP_TOOLS_PROGRESS_H
#define IBP_TOOLS_PROGRESS_H

#include <pthread.h>
#include <stdint.h>

typedef struct progress {
  const char *label;
  uint64_t total;
  double start;
  double last_draw;
  int enabled;
  int drawn;
} progress;

void progress_start(progress *pg, const char *label, uint64_t total,
                    int allowed);
/* `done` of `total` units (bytes) are finished; clamped to total. */
void progress_update(progress *pg, uint64_t done);
/* Erases the bar if it was drawn. */
void progress_finish(progress *pg);

/* For a blocking call that reports no progress (the parameter search): a
 * thread shows "LABEL ... 12 s" under the same rules until stopped. */
typedef struct progress_ticker {
  const char *label;
  int running;
  int stop;
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} progress_ticker;

void progress_ticker_start(progress_ticker *t, const char *label, int allowed);
/* Stops the thread and erases its line. */
void progress_ticker_stop(progress_ticker *t);

#endif /* IBP_TOOLS_PROGRESS_H */
