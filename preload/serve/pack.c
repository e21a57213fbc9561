/* Compressing a region straight into its packed layout (serve/pack.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "serve/pack.h"

#include "base/base.h"

#define MAX_THREADS 64
#define NICE_STEP 10 /* below the application's threads */
#define NICE_MAX 19

unsigned ibp__pack_threads(void) {
  if (ibp__cfg.threads)
    return ibp__cfg.threads;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned t = cpus > 0 ? (unsigned)(cpus / 4) : 1;
  return t < 1 ? 1 : t > MAX_THREADS ? MAX_THREADS : t;
}

typedef struct job {
  ibp_pack *p;
  uint64_t i0, i1; /* tensors [i0, i1), i0 a multiple of 32 */
  uint64_t compressed, zero, rewritten;
  int failed;
} job;

static int all_zero(const uint8_t *t, uint32_t R) {
  for (uint32_t i = 0; i < R; i++)
    if (t[i])
      return 0;
  return 1;
}

static void sizes(job *j) {
  const ibp_pack *p = j->p;
  const uint32_t R = p->params->tensor_bytes;
  for (uint64_t i = j->i0; i < j->i1; i++) {
    const uint8_t *t = p->data + i * R;
    size_t len = ibp_compressed_size(p->params, t);
    int c = len < R;
    p->lengths[i] = c ? (uint32_t)len : 0;
    if (c) /* whole 32-tensor words per job: no other thread writes here */
      p->flags[i / 8] |= (uint8_t)(1u << (i % 8));
    j->compressed += (uint64_t)c;
    j->zero += (uint64_t)all_zero(t, R);
  }
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The streams of word w's tensors are in place: the kernel may read them
 * (the release store orders the streams before the bit). */
static void publish(ibp_pack *p, uint64_t w) {
  if (!p->busy)
    return;
  atomic_store_explicit(&p->busy[w], 0, memory_order_release);
  uint64_t zero = 0;
  if (!atomic_load_explicit(&p->first_word_ns, memory_order_relaxed))
    atomic_compare_exchange_strong(&p->first_word_ns, &zero, now_ns());
}

static void streams(job *j) {
  ibp_pack *p = j->p;
  const uint32_t R = p->params->tensor_bytes;
  uint8_t *tmp = malloc((size_t)R + 16);
  if (!tmp) {
    j->failed = 1;
    return;
  }
  for (uint64_t i = j->i0; i < j->i1; i++) {
    if (i % 32 == 0 && p->stop && atomic_load(p->stop)) {
      j->failed = 1; /* the region is going away */
      break;
    }
    int c = 0;
    size_t len = p->lengths[i]
                     ? ibp_compress_tensor(p->params, p->data + i * R, tmp, &c)
                     : 0; /* raw: the kernel reads the original */
    if (!p->lengths[i]) {
      /* nothing to write */
    } else if (c && len == p->lengths[i]) {
      memcpy(p->shadow + p->offsets[i], tmp, len);
    } else { /* written since pass 1: served raw until recompressed */
      ibp__track_mark_dirty(p->track, (uintptr_t)p->data + i * R, R);
      j->rewritten++;
    }
    if (i % 32 == 31 || i + 1 == j->i1)
      publish(p, i / 32);
  }
  free(tmp);
}

typedef struct run {
  job *j;
  void (*fn)(job *);
} run;

/* The worker thread steps 10 nice levels below the application's threads,
 * once; the threads it creates inherit that. */
static void lower_priority_once(void) {
  static __thread int lowered;
  if (lowered)
    return;
  lowered = 1;
  id_t tid = (id_t)syscall(SYS_gettid);
  errno = 0;
  int prio = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && prio < NICE_MAX)
    setpriority(PRIO_PROCESS, tid,
                prio + NICE_STEP < NICE_MAX ? prio + NICE_STEP : NICE_MAX);
}

static void *thread_main(void *arg) {
  run *r = arg;
  r->fn(r->j);
  return NULL;
}

/* Runs fn over the tensors on up to ibp__pack_threads() threads (the
 * calling one included); 0, or -1 when a job failed. */
static int parallel(ibp_pack *p, void (*fn)(job *)) {
  uint64_t words = (p->n + 31) / 32;
  unsigned t = ibp__pack_threads();
  if (t > words)
    t = words ? (unsigned)words : 1;
  job jobs[MAX_THREADS];
  run runs[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (unsigned k = 0; k < t; k++) {
    uint64_t w0 = words * k / t, w1 = words * (k + 1) / t;
    jobs[k] = (job){p, 32 * w0, 32 * w1 < p->n ? 32 * w1 : p->n, 0, 0, 0, 0};
    runs[k] = (run){&jobs[k], fn};
  }
  lower_priority_once();
  for (unsigned k = 1; k < t; k++)
    started[k] = pthread_create(&th[k], NULL, thread_main, &runs[k]) == 0;
  thread_main(&runs[0]); /* the worker itself takes the first range */
  for (unsigned k = 1; k < t; k++) {
    if (started[k])
      pthread_join(th[k], NULL);
    else
      fn(&jobs[k]); /* no thread: done here */
  }
  int failed = 0;
  for (unsigned k = 0; k < t; k++) {
    p->compressed_tensors += jobs[k].compressed;
    p->zero_tensors += jobs[k].zero;
    p->rewritten += jobs[k].rewritten;
    failed |= jobs[k].failed;
  }
  return failed ? -1 : 0;
}

int ibp__pack_sizes(ibp_pack *p) {
  p->compressed_tensors = p->zero_tensors = 0;
  memset(p->flags, 0, (size_t)((p->n + 31) / 32 * 4));
  return parallel(p, sizes);
}

int ibp__pack_streams(ibp_pack *p) {
  p->rewritten = 0;
  return parallel(p, streams);
}
