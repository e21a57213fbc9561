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

void ibp__streams_look(int dev, CUstream s, double now_ns, int *busy,
                       int *shared) {
  *busy = *shared = 0;
  if (!valid(dev))
    return;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS; i++) {
    const stream_end *e = &table[dev][i];
    if (e->end_ns <= now_ns)
      continue;
    if (e->stream == s)
      *busy = 1;
    else
      *shared = 1;
  }
  pthread_mutex_unlock(&lock);
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
