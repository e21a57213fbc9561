/*
 * Grace periods for the lock-free lookups (two-counter reader announcement,
 * as in userspace RCU's "memb" flavour).
 *
 * A reader increments readers[parity] before loading the snapshot pointer
 * and decrements the same counter when done.  After publishing a new
 * snapshot, the writer flips the parity and waits for the old counter to
 * reach zero, then does it again for the other counter.  Every lookup either
 * retired before the writer saw its counter at zero, or announced itself
 * after that point -- and then (all operations being seq_cst) it loads the
 * new pointer.  Flipping keeps new readers off the counter being drained, so
 * the wait ends even under a steady stream of lookups.
 */
#include "registry_internal.h"

#include <sched.h>
#include <stdalign.h>

typedef struct padded_counter {
  alignas(64) _Atomic long value;
} padded_counter;

static padded_counter readers[2];
static alignas(64) _Atomic unsigned parity;

unsigned ibp__read_enter(void) {
  unsigned p = atomic_load(&parity) & 1u;
  atomic_fetch_add(&readers[p].value, 1);
  return p;
}

void ibp__read_exit(unsigned ticket) {
  atomic_fetch_sub_explicit(&readers[ticket].value, 1, memory_order_release);
}

static void drain(unsigned p) {
  while (atomic_load(&readers[p].value) != 0)
    sched_yield();
}

void ibp__grace_wait(void) {
  for (int round = 0; round < 2; round++) {
    unsigned old = atomic_load(&parity) & 1u;
    atomic_store(&parity, old ^ 1u);
    drain(old);
  }
}

void ibp__grace_reset(void) {
  atomic_store(&readers[0].value, 0);
  atomic_store(&readers[1].value, 0);
  atomic_store(&parity, 0);
}
