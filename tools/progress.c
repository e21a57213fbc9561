/* Progress bar on a terminal's stderr (see progress.h). */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define PROGRESS_DELAY_S 1.0
#define PROGRESS_PERIOD_S 0.1
#define PROGRESS_WIDTH 30

void progress_start(progress *pg, const char *label, uint64_t total,
                    int allowed) {
  pg->label = label;
  pg->total = total;
  pg->start = cli_now();
  pg->last_draw = 0.0;
  pg->enabled = allowed && total > 0 && isatty(STDERR_FILENO);
  pg->drawn = 0;
}

static void draw(progress *pg, uint64_t done, double elapsed) {
  double share = (double)done / (double)pg->total;
  int fill = (int)(share * PROGRESS_WIDTH);
  char bar[PROGRESS_WIDTH + 1];
  for (int i = 0; i < PROGRESS_WIDTH; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[PROGRESS_WIDTH] = '\0';
  char a[32], b[32];
  fprintf(stderr, "\r%s [%s] %5.1f%%  %s / %s  %.0f s ", pg->label, bar,
          100.0 * share, cli_human_bytes(done, a, sizeof a),
          cli_human_bytes(pg->total, b, sizeof b), elapsed);
  fflush(stderr);
  pg->drawn = 1;
}

void progress_update(progress *pg, uint64_t done) {
  if (!pg->enabled)
    return;
  double now = cli_now();
  double elapsed = now - pg->start;
  if (elapsed < PROGRESS_DELAY_S || now - pg->last_draw < PROGRESS_PERIOD_S)
    return;
  pg->last_draw = now;
  draw(pg, done < pg->total ? done : pg->total, elapsed);
}

void progress_finish(progress *pg) {
  if (pg->drawn)
    fprintf(stderr, "\r\033[K");
  pg->drawn = 0;
  pg->enabled = 0;
}

/* ---- ticker ------------------------------------------------------------- */

static void *tick(void *arg) {
  progress_ticker *t = arg;
  double start = cli_now();
  int drawn = 0;
  long shown = -1; /* whole seconds last drawn */
  pthread_mutex_lock(&t->mu);
  while (!t->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(PROGRESS_PERIOD_S * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    double elapsed = cli_now() - start;
    if (!t->stop && elapsed >= PROGRESS_DELAY_S && (long)elapsed != shown) {
      shown = (long)elapsed;
      fprintf(stderr, "\r%s ... %ld s ", t->label, shown);
      fflush(stderr);
      drawn = 1;
    }
  }
  pthread_mutex_unlock(&t->mu);
  if (drawn)
    fprintf(stderr, "\r\033[K");
  return NULL;
}

void progress_ticker_start(progress_ticker *t, const char *label, int allowed) {
  t->label = label;
  t->stop = 0;
  t->running = 0;
  if (!allowed || !isatty(STDERR_FILENO))
    return;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&t->mu, NULL);
  t->running = pthread_create(&t->tid, NULL, tick, t) == 0;
  if (!t->running) { /* no ticker: the work goes on without one */
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
  }
}

void progress_ticker_stop(progress_ticker *t) {
  if (!t->running)
    return;
  pthread_mutex_lock(&t->mu);
  t->stop = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->tid, NULL);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  t->running = 0;
}
