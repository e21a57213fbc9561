/* The device's streams as libibp queued work on them
 * (serve/choose/streams.h). */
#include "serve/choose/streams.h"

#include <pthread.h>

#include "base/clock.h"
#include "base/driver.h"
#include "serve/region.h"

/* Streams remembered per device: the one whose work ends first makes room
 * for a new one (the table is a guess, never a correctness matter). */
#define STREAMS 16

typedef struct stream_end {
  CUstream stream;
  double end_ns;    /* 0: a free entry */
  int link;         /* its last work holds the link or the copy engine (not a
                       decode in device memory) */
  int own;          /* libibp's own (a staged copy stream): its copies' decodes
                       run on their caller's stream, counted there */
  pthread_t thread; /* CU_STREAM_PER_THREAD: the thread whose stream it is
                       (each thread has its own) */
} stream_end;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static stream_end table[IBP_MAX_DEVICES][STREAMS];
/* per device, when the work queued on its link (every stream's) ends */
static double link_end[IBP_MAX_DEVICES];

/* per device, libibp's own uploads: running now, and when the last one
 * ended on the device's clock (under the lock) */
static unsigned own_running[IBP_MAX_DEVICES];
static double own_end_ns[IBP_MAX_DEVICES];

static int valid(int dev) {
  return dev >= 0 && dev < IBP_MAX_DEVICES;
}

/* Whether e is the calling thread's stream s. */
static int is(const stream_end *e, CUstream s) {
  return ibp__stream_same(e->stream, e->thread, s);
}

void ibp__streams_own_begin(int dev) {
  if (!valid(dev))
    return;
  pthread_mutex_lock(&lock);
  own_running[dev]++;
  pthread_mutex_unlock(&lock);
}

void ibp__streams_own_end(int dev) {
  if (!valid(dev))
    return;
  const double now = ibp__clock_ns();
  pthread_mutex_lock(&lock);
  if (own_running[dev])
    own_running[dev]--;
  if (now > own_end_ns[dev])
    own_end_ns[dev] = now;
  pthread_mutex_unlock(&lock);
}

int ibp__streams_own_clear(int dev, double since_ns) {
  if (!valid(dev))
    return 0;
  pthread_mutex_lock(&lock);
  const int clear = !own_running[dev] && own_end_ns[dev] <= since_ns;
  pthread_mutex_unlock(&lock);
  return clear;
}

unsigned ibp__streams_busy(int dev, CUstream s, double now_ns) {
  if (!valid(dev))
    return 0;
  unsigned busy = 0, self = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS; i++) {
    const stream_end *e = &table[dev][i];
    if (e->end_ns > now_ns && is(e, s))
      self = 1;
    else if (e->end_ns > now_ns && !e->own)
      busy++;
  }
  pthread_mutex_unlock(&lock);
  return self ? busy + 1 : 0;
}

double ibp__streams_link_ahead_ns(int dev, double now_ns) {
  if (!valid(dev))
    return 0;
  pthread_mutex_lock(&lock);
  const double ahead = link_end[dev] > now_ns ? link_end[dev] - now_ns : 0;
  pthread_mutex_unlock(&lock);
  return ahead;
}

unsigned ibp__streams_mark_others(int dev, CUstream s, CUstream also,
                                  int link_only, double now_ns, CUevent ev[],
                                  unsigned max, unsigned *gapped) {
  const ibp_driver *d = ibp__driver();
  if (gapped)
    *gapped = 0;
  if (!valid(dev) || !d || !max)
    return 0;
  stream_end pick[STREAMS];
  unsigned n = 0, recorded = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS; i++) {
    const stream_end *e = &table[dev][i];
    if (e->stream != s && e->stream != also &&
        (link_only ? e->link : !e->own) && e->end_ns > now_ns && e->stream &&
        e->stream != CU_STREAM_LEGACY && e->stream != CU_STREAM_PER_THREAD)
      pick[n++] = *e;
  }
  for (unsigned k = 0; k < n && recorded < max; k++) {
    unsigned last = k; /* the latest end among those left */
    for (unsigned j = k + 1; j < n; j++)
      if (pick[j].end_ns > pick[last].end_ns)
        last = j;
    const stream_end t = pick[k];
    pick[k] = pick[last];
    pick[last] = t;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (d->cuStreamIsCapturing(pick[k].stream, &cs) == CUDA_SUCCESS &&
        cs == CU_STREAM_CAPTURE_STATUS_NONE &&
        d->cuEventRecord(ev[recorded], pick[k].stream) == CUDA_SUCCESS) {
      /* a staged copy's windows, or its decodes on its caller's stream */
      if (gapped && (pick[k].own || !pick[k].link))
        *gapped |= 1u << recorded;
      recorded++;
    }
  }
  pthread_mutex_unlock(&lock);
  return recorded;
}

void ibp__streams_forget(CUstream s) {
  pthread_mutex_lock(&lock);
  for (int dev = 0; dev < IBP_MAX_DEVICES; dev++)
    for (int i = 0; i < STREAMS; i++)
      if (table[dev][i].stream == s)
        table[dev][i] = (stream_end){0};
  pthread_mutex_unlock(&lock);
}

void ibp__streams_forget_device(int dev) {
  if (!valid(dev))
    return;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < STREAMS; i++)
    table[dev][i] = (stream_end){0};
  link_end[dev] = 0;
  pthread_mutex_unlock(&lock);
}

/* Stream s's entry in row, NULL where none (lock held). */
static stream_end *found(stream_end *row, CUstream s) {
  for (int i = 0; i < STREAMS; i++)
    if (row[i].end_ns > 0 && is(&row[i], s))
      return &row[i];
  return NULL;
}

/* Stream s's entry in row (lock held): its own, or the one whose work
 * ends first, made its -- never `keep` (an entry just written). */
static stream_end *entry(stream_end *row, CUstream s, const stream_end *keep) {
  stream_end *e = found(row, s);
  if (e)
    return e;
  e = NULL;
  for (int i = 0; i < STREAMS; i++)
    if (&row[i] != keep && (!e || row[i].end_ns < e->end_ns))
      e = &row[i];
  *e = (stream_end){.stream = s, .thread = pthread_self()};
  return e;
}

double ibp__streams_queued(int dev, CUstream s, double now_ns, double est_ns,
                           double link_ns, CUstream link_stream) {
  if (!valid(dev))
    return 0;
  pthread_mutex_lock(&lock);
  stream_end *row = table[dev];
  /* where its link part waits from: its link stream's last work, which
   * does not wait for s's (a staged copy's windows, s's decodes apart) */
  const stream_end *l_was = link_stream ? found(row, link_stream) : NULL;
  const double on_link = l_was ? l_was->end_ns : 0;
  const double link_own = on_link > now_ns ? on_link : now_ns;
  const double link_ahead =
      link_ns > 0 && link_end[dev] > link_own ? link_end[dev] - link_own : 0;
  stream_end *e = entry(row, s, NULL);
  /* back to back: after what the stream runs, and after the work queued
   * on the link, which every stream's copies share */
  const double own = e->end_ns > now_ns ? e->end_ns : now_ns;
  double start = own;
  if (link_ns > 0 && link_end[dev] > start)
    start = link_end[dev];
  e->end_ns = start + est_ns;
  e->link = link_ns > 0 && !link_stream;
  if (link_ns > 0)
    link_end[dev] = start + link_ns;
  if (link_ns > 0 && link_stream) {
    stream_end *l = entry(row, link_stream, e);
    l->end_ns = start + link_ns;
    l->link = 1;
    l->own = 1;
  }
  pthread_mutex_unlock(&lock);
  return link_stream ? link_ahead : start - own;
}

void ibp__streams_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  for (int d = 0; d < IBP_MAX_DEVICES; d++) {
    link_end[d] = 0;
    own_running[d] = 0; /* their threads are gone */
    own_end_ns[d] = 0;
    for (int i = 0; i < STREAMS; i++)
      table[d][i] = (stream_end){0};
  }
}
