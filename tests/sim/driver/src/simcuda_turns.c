/*
 * The order in which operations take the PCIe link and the SMs
 * (docs/PROFILE.md, "The virtual clock").  The link's timeline gives a
 * transfer the free time after it is ready, and a device's SM timeline
 * gives a kernel the SMs earlier kernels left free, so when two streams'
 * work overlaps, the one reserved first gets the earlier share.  Stream
 * workers reach their reservations in whatever order the host schedules
 * them; to keep every modelled time independent of that, each operation
 * that may use the link or the SMs (every launch, every host<->device
 * copy) takes a turn when it is queued and reserves only once every
 * earlier turn has passed: they are taken in the order the operations
 * were submitted.
 *
 * An earlier turn whose stream waits on a host thread (a host function,
 * callback or inline operation, scu_stream_host_bound) is not waited for:
 * the application decides when that work ends, and waiting could tie it
 * to the waiting worker.  Turns are kept in a ring; an operation queued
 * while the ring is full takes no turn (no ordering, never a wait).
 */
#include "simcuda_internal.h"

#include <time.h>

#define TURNS 65536u
/* Real time a reservation waits for earlier turns at most (a safety net). */
#define TURN_LIMIT_NS (30ull * 1000 * 1000 * 1000)

typedef struct turn {
  uint64_t id;
  scu_stream *stream; /* alive while the turn is open: its op is queued */
  bool passed;
} turn;

static pthread_mutex_t turns_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turns_cv = PTHREAD_COND_INITIALIZER;
static uint64_t next_id = 1, lowest_open = 1;
static turn ring[TURNS];

static bool may_use_link(const scu_op *op) {
  switch (op->kind) {
  case SCU_OP_LAUNCH: /* its SMs; its host reads are counted as it runs */
    return true;
  case SCU_OP_COPY:
  case SCU_OP_COPY2D:
    return op->link != SCU_LINK_NONE;
  default:
    return false;
  }
}

void scu_turn_take(scu_stream *s, scu_op *op) {
  op->turn = 0;
  if (!may_use_link(op))
    return;
  pthread_mutex_lock(&turns_m);
  if (next_id - lowest_open < TURNS) {
    op->turn = next_id++;
    ring[op->turn % TURNS] = (turn){op->turn, s, false};
  }
  pthread_mutex_unlock(&turns_m);
}

/* The stream of the lowest open turn, referenced; NULL when op's turn has
 * come (turns_m held). */
static scu_stream *blocker(const scu_op *op) {
  if (lowest_open >= op->turn)
    return NULL;
  scu_stream *s = ring[lowest_open % TURNS].stream;
  scu_obj_ref(&s->hdr);
  return s;
}

static void wait_a_little(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 1000 * 1000;
  if (until.tv_nsec >= 1000 * 1000 * 1000) {
    until.tv_sec++;
    until.tv_nsec -= 1000 * 1000 * 1000;
  }
  pthread_cond_timedwait(&turns_cv, &turns_m, &until);
}

void scu_turn_wait(const scu_op *op) {
  if (!op->turn)
    return;
  const uint64_t start = scu_now_ns();
  pthread_mutex_lock(&turns_m);
  for (scu_stream *s; (s = blocker(op)) != NULL;) {
    pthread_mutex_unlock(&turns_m);
    bool host = scu_stream_host_bound(s);
    scu_stream_put(s);
    if (host)
      return;
    if (scu_now_ns() - start > TURN_LIMIT_NS) {
      scu_log("an operation waited %llu s for its turn on the link; it "
              "goes ahead",
              TURN_LIMIT_NS / 1000000000ull);
      return;
    }
    pthread_mutex_lock(&turns_m);
    if (lowest_open < op->turn)
      wait_a_little();
  }
  pthread_mutex_unlock(&turns_m);
}

void scu_turn_pass(scu_op *op) {
  if (!op->turn)
    return;
  pthread_mutex_lock(&turns_m);
  ring[op->turn % TURNS].passed = true;
  while (lowest_open < next_id && ring[lowest_open % TURNS].passed)
    lowest_open++;
  pthread_cond_broadcast(&turns_cv);
  pthread_mutex_unlock(&turns_m);
  op->turn = 0;
}
