/*
 * sigaction and signal, virtualised for SIGSEGV and SIGBUS once the write
 * tracker installed its handler: the fault handler must survive the
 * application (docs/ARCHITECTURE.md, "No stale byte").
 *
 * From ibp__sig_take_over on, the kernel keeps our handler; what the
 * application installs is only recorded as "the application's action" and
 * what it reads back (oldact, signal's result) is that record, never ours.
 * The tracker's handler calls ibp__sig_chain for every fault that is not
 * its own, which delivers it the way the kernel would have.
 *
 * The record is read inside a signal handler, so readers take no lock: two
 * copies, an index, and a reader count per copy.  A reader announces itself
 * on the current copy and re-checks the index; a writer (serialized by a
 * spin lock taken with all signals blocked) fills the other copy only once
 * nobody reads it, then flips the index.
 *
 * Not covered: the raw rt_sigaction system call, sigvec/sigset/bsd_signal.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "base/libc.h"
#include "track/track_private.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

typedef struct app_action {
  _Atomic int on;  /* our handler is installed for this signal */
  _Atomic int idx; /* the current copy */
  _Atomic int readers[2];
  struct sigaction copy[2];
} app_action;

static app_action apps[2]; /* SIGSEGV, SIGBUS */
static atomic_flag wlock = ATOMIC_FLAG_INIT;
static void *_Atomic real_sigaction_p, *_Atomic real_signal_p;

static app_action *app_of(int sig) {
  return sig == SIGSEGV ? &apps[0] : sig == SIGBUS ? &apps[1] : NULL;
}

/* Resolved by ibp__sig_take_over before our handler can run, so that die()
 * only loads it (base/libc.h: errno ENOSYS only when it is missing). */
static sigaction_fn real_sigaction(void) {
  return (sigaction_fn)ibp__libc_once(&real_sigaction_p, "sigaction");
}

/* The writer lock, with every signal blocked so that no handler on this
 * thread can want it (or a reader count we wait on) meanwhile. */
static void lock(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
  while (atomic_flag_test_and_set(&wlock))
    sched_yield();
}

static void unlock(const sigset_t *old) {
  atomic_flag_clear(&wlock);
  pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void app_get(app_action *a, struct sigaction *out) {
  for (;;) {
    int i = atomic_load(&a->idx);
    atomic_fetch_add(&a->readers[i], 1);
    if (atomic_load(&a->idx) == i) {
      *out = a->copy[i];
      atomic_fetch_sub(&a->readers[i], 1);
      return;
    }
    atomic_fetch_sub(&a->readers[i], 1);
  }
}

/* Under wlock. */
static void app_set(app_action *a, const struct sigaction *act) {
  int n = 1 - atomic_load(&a->idx);
  while (atomic_load(&a->readers[n]))
    sched_yield();
  a->copy[n] = *act;
  atomic_store(&a->idx, n);
}

/* Under wlock: records the current action of sig as the application's,
 * then installs ours -- in that order, so that a fault in between already
 * finds the record. */
static int take_over(int sig, app_action *a, const struct sigaction *ours) {
  sigaction_fn real = real_sigaction();
  struct sigaction prev;
  if (atomic_load(&a->on))
    return 0;
  if (!real || real(sig, NULL, &prev) != 0)
    return -1;
  app_set(a, &prev);
  if (real(sig, ours, NULL) != 0)
    return -1;
  atomic_store(&a->on, 1);
  return 0;
}

int ibp__sig_take_over(const struct sigaction *ours) {
  sigset_t old;
  lock(&old);
  int segv_was_on = atomic_load(&apps[0].on);
  int rc = take_over(SIGSEGV, &apps[0], ours);
  if (rc == 0 && take_over(SIGBUS, &apps[1], ours) != 0) {
    rc = -1;
    if (!segv_was_on) { /* undo SIGSEGV: tracking is all or nothing */
      struct sigaction prev;
      app_get(&apps[0], &prev);
      real_sigaction()(SIGSEGV, &prev, NULL);
      atomic_store(&apps[0].on, 0);
    }
  }
  unlock(&old);
  return rc;
}

/* Default action for a signal nobody handles: the kernel's.  A fault
 * (si_code > 0) re-occurs when we return and now kills; a signal sent by
 * kill/raise is sent again. */
static void die(int sig, int fault) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction_fn real = real_sigaction();
  if (real)
    real(sig, &dfl, NULL);
  if (!fault)
    raise(sig);
}

/* SA_RESETHAND: the kernel resets the action when it delivers.  From a
 * handler we may only try the lock; losing the race keeps the handler. */
static void reset_hand(app_action *a) {
  if (atomic_flag_test_and_set(&wlock))
    return;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  app_set(a, &dfl);
  atomic_flag_clear(&wlock);
}

/*
 * Kernel semantics, as far as a handler can give them:
 *   SIG_IGN: a signal from kill/raise is dropped; a fault cannot be ignored
 *            (the kernel kills), so it is treated as SIG_DFL;
 *   SIG_DFL: die with the right signal (see die);
 *   handler: called with sa_mask blocked, SA_SIGINFO picking the form.
 *            SIGSEGV/SIGBUS themselves stay unblocked even without
 *            SA_NODEFER: a write to a tracked page inside the handler must
 *            still reach the tracker.  A nested genuine fault then recurses
 *            instead of killing at once.
 */
void ibp__sig_chain(int sig, siginfo_t *si, void *uc) {
  app_action *a = app_of(sig);
  if (!a)
    return;
  struct sigaction act;
  app_get(a, &act);
  int fault = si->si_code > 0;
  if (act.sa_handler == SIG_IGN && !fault)
    return;
  if (act.sa_handler == SIG_IGN || act.sa_handler == SIG_DFL) {
    die(sig, fault);
    return;
  }
  if (act.sa_flags & SA_RESETHAND)
    reset_hand(a);
  sigset_t mask = act.sa_mask, old;
  sigdelset(&mask, SIGSEGV);
  sigdelset(&mask, SIGBUS);
  int masked = !sigisemptyset(&mask);
  if (masked)
    pthread_sigmask(SIG_BLOCK, &mask, &old);
  if (act.sa_flags & SA_SIGINFO)
    act.sa_sigaction(sig, si, uc);
  else
    act.sa_handler(sig);
  if (masked)
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void ibp__sig_after_fork_child(void) {
  atomic_flag_clear(&wlock);
  for (int k = 0; k < 2; k++) {
    atomic_store(&apps[k].readers[0], 0);
    atomic_store(&apps[k].readers[1], 0);
  }
}

IBP_EXPORT int sigaction(int sig, const struct sigaction *act,
                         struct sigaction *oldact) {
  sigaction_fn real = real_sigaction();
  app_action *a = app_of(sig);
  if (!real)
    return -1; /* errno ENOSYS */
  if (!a)
    return real(sig, act, oldact);
  /* User memory is read and written outside the lock, where a fault on
   * it (tracked page, bad pointer) behaves as it would without us. */
  struct sigaction want, prev;
  if (act)
    want = *act;
  sigset_t old;
  lock(&old);
  int rc = 0, err = 0;
  if (!atomic_load(&a->on)) {
    rc = real(sig, act ? &want : NULL, &prev);
    err = errno;
  } else {
    app_get(a, &prev);
    if (act)
      app_set(a, &want);
  }
  unlock(&old);
  if (rc != 0) {
    errno = err;
    return rc;
  }
  if (oldact)
    *oldact = prev;
  return 0;
}

IBP_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  if (!app_of(sig)) {
    signal_fn real = (signal_fn)ibp__libc_once(&real_signal_p, "signal");
    if (!real)
      return SIG_ERR; /* errno ENOSYS */
    return real(sig, handler);
  }
  if (handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  /* glibc's signal(): BSD semantics. */
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) != 0)
    return SIG_ERR;
  return old.sa_handler;
}
