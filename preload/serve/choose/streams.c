/* The device's streams as libibp queued work on them
 * (serve/choose/streams.h). */
#include "serve/choose/streams.h"

#include <pthread.h>

#include "serve/region.h"

/* Streams remembered per device: the one whose work ends first makes room
 * for a new one (the table is a guess, never a correctness matter). */
#define STREAMS 16

typedef struct stream_end {
  CUstream stream;
  double end_ns; /* 0: a free entry */
} stream_end;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static stream_end table[IBP_MAX_DEVICES][STREAMS];

static int valid(int dev) {
  return dev >= 0 && dev < IBP_MAX_DEVICES;
}

int ibp__streams_busy(int dev, CUstream s, double now_ns) {
  if (!valid(dev))
    return 0;
  int busy = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS && !busy; i++)
    busy = table[dev][i].stream == s && table[dev][i].end_ns > now_ns;
  pthread_mutex_unlock(&lock);
  return busy;
}

double ibp__streams_ahead(int dev, CUstream s, double now_ns) {
  if (!valid(dev))
    return 0;
  double ahead = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS; i++) {
    const stream_end *e = &table[dev][i];
    if (e->stream != s && e->end_ns > now_ns)
      ahead += e->end_ns - now_ns;
  }
  pthread_mutex_unlock(&lock);
  return ahead;
}

void ibp__streams_queued(int dev, CUstream s, double now_ns, double est_ns) {
  if (!valid(dev))
    return;
  pthread_mutex_lock(&lock);
  stream_end *row = table[dev], *e = NULL;
  for (int i = 0; i < STREAMS && !e; i++)
    if (row[i].end_ns > 0 && row[i].stream == s)
      e = &row[i];
  if (!e) { /* a new one: in the entry whose work ends first */
    e = &row[0];
    for (int i = 1; i < STREAMS; i++)
      if (row[i].end_ns < e->end_ns)
        e = &row[i];
    *e = (stream_end){s, 0};
  }
  /* back to back: after what it runs */
  e->end_ns = (e->end_ns > now_ns ? e->end_ns : now_ns) + est_ns;
  pthread_mutex_unlock(&lock);
}

void ibp__streams_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  for (int d = 0; d < IBP_MAX_DEVICES; d++)
    for (int i = 0; i < STREAMS; i++)
      table[d][i] = (stream_end){0};
}
