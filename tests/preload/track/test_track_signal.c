/*
 * sigaction/signal virtualisation (preload/track/hooks_signal.c) and the chain
 * from the tracker's handler to the application's: handlers installed
 * before and after ibp__track_install, oldact, signal(), SA_RESETHAND,
 * SIG_IGN, SIG_DFL (in forked children, checked by the signal they die
 * of), nested faults, the alternate stack, fork.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "track_test.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static uint8_t *none_page; /* PROT_NONE: the application's own faults */
static size_t pg;
static _Atomic int app_calls, bus_calls, usr_calls;
static ibp_tracked *nested_region;

static void new_none_page(void) {
  pg = (size_t)sysconf(_SC_PAGESIZE);
  none_page = mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(none_page != MAP_FAILED);
}

static int none_page_ok; /* the next call may have any si_addr */

/* The application's handler: fixes its own page and returns. */
static void app_info(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (sig != SIGSEGV ||
      (!none_page_ok && ((uint8_t *)si->si_addr < none_page ||
                         (uint8_t *)si->si_addr >= none_page + pg)))
    abort();
  none_page_ok = 0;
  mprotect(none_page, pg, PROT_READ | PROT_WRITE);
  app_calls++;
}

/* Like app_info, but first writes to a tracked page itself. */
static void app_nested(int sig, siginfo_t *si, void *uc) {
  ((uint8_t *)nested_region->base)[pg + 5] = 0x42;
  app_info(sig, si, uc);
}

static void app_plain(int sig) {
  if (sig != SIGSEGV)
    abort();
  mprotect(none_page, pg, PROT_READ | PROT_WRITE);
  app_calls++;
}

static void app_usr1_blocked(int sig, siginfo_t *si, void *uc) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  if (!sigismember(&cur, SIGUSR1))
    abort();
  app_info(sig, si, uc);
}

static void on_bus(int sig) {
  bus_calls += sig == SIGBUS;
}

static void on_usr(int sig) {
  usr_calls += sig == SIGUSR1;
}

static struct sigaction action(void (*info)(int, siginfo_t *, void *),
                               int flags) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_sigaction = info;
  a.sa_flags = SA_SIGINFO | flags;
  sigemptyset(&a.sa_mask);
  return a;
}

/* The action the kernel has: still the tracker's. */
static void check_kernel_has_ours(int sig, void *not_this) {
  sigaction_fn real = (sigaction_fn)ibp__libc("sigaction");
  struct sigaction k;
  CHECK(real && real(sig, NULL, &k) == 0);
  CHECK((void *)k.sa_sigaction != not_this);
  CHECK((k.sa_flags & (SA_SIGINFO | SA_ONSTACK | SA_NODEFER)) ==
        (SA_SIGINFO | SA_ONSTACK | SA_NODEFER));
}

/* A fault on the PROT_NONE page goes to the application; a store to a
 * tracked region does not. */
static void check_chain_and_tracking(void) {
  int before = app_calls;
  none_page[7] = 1;
  CHECK(none_page[7] == 1);
  CHECK_EQ(app_calls, before + 1);
  mprotect(none_page, pg, PROT_NONE);

  arena a;
  arena_init(&a, 4);
  ibp_tracked *r = region_new(&a, 0, 4 * a.pg, 2048);
  CHECK(ibp__track_protect(r) == 0);
  arena_store(&a, 2 * a.pg + 3, 7);
  region_check(&a, r);
  CHECK_EQ(atomic_load(&r->write_faults), 1);
  CHECK_EQ(app_calls, before + 1);
  ibp__track_unprotect(r);
  arena_check_bytes(&a);
  region_free(r);
  arena_free(&a);
}

static void case_before(void) {
  new_none_page();
  struct sigaction h0 = action(app_info, 0), q;
  CHECK(sigaction(SIGSEGV, &h0, NULL) == 0); /* passes through */
  CHECK(ibp__track_install() == 0);
  CHECK(sigaction(SIGSEGV, NULL, &q) == 0);
  CHECK(q.sa_sigaction == app_info && (q.sa_flags & SA_SIGINFO));
  check_kernel_has_ours(SIGSEGV, (void *)app_info);
  check_chain_and_tracking();
}

static void case_after(void) {
  new_none_page();
  struct sigaction pre, o1, o2;
  CHECK(sigaction(SIGSEGV, NULL, &pre) == 0);
  CHECK(ibp__track_install() == 0);
  CHECK(ibp__track_install() == 0);
  struct sigaction a = action(app_nested, SA_RESTART);
  sigaddset(&a.sa_mask, SIGUSR1);
  CHECK(sigaction(SIGSEGV, &a, &o1) == 0);
  CHECK(o1.sa_handler == pre.sa_handler && o1.sa_flags == pre.sa_flags);
  struct sigaction b = action(app_usr1_blocked, 0);
  sigaddset(&b.sa_mask, SIGUSR1);
  CHECK(sigaction(SIGSEGV, &b, &o2) == 0);
  CHECK(o2.sa_sigaction == app_nested);
  CHECK(o2.sa_flags == (SA_SIGINFO | SA_RESTART));
  CHECK(sigismember(&o2.sa_mask, SIGUSR1));
  check_kernel_has_ours(SIGSEGV, (void *)app_usr1_blocked);
  check_chain_and_tracking();
  sigset_t cur; /* the handler's mask is gone again */
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  CHECK(!sigismember(&cur, SIGUSR1));

  /* The application's handler itself stores to a tracked page. */
  arena ar;
  arena_init(&ar, 4);
  nested_region = region_new(&ar, 0, 3 * ar.pg, 1024);
  CHECK(ibp__track_protect(nested_region) == 0);
  CHECK(sigaction(SIGSEGV, &a, NULL) == 0);
  none_page[1] = 5;
  CHECK_EQ(app_calls, 2);
  ar.want[pg + 5] = 0x42;
  arena_touch(&ar, pg + 5, 1);
  region_check(&ar, nested_region);
  CHECK_EQ(atomic_load(&nested_region->write_faults), 1);
  arena_check_bytes(&ar);
  ibp__track_unprotect(nested_region);
  region_free(nested_region);
  arena_free(&ar);
}

static void case_signal(void) {
  new_none_page();
  struct sigaction pre, q;
  CHECK(sigaction(SIGSEGV, NULL, &pre) == 0);
  CHECK(ibp__track_install() == 0);
  CHECK(signal(SIGSEGV, app_plain) == pre.sa_handler);
  CHECK(signal(SIGSEGV, app_plain) == app_plain);
  CHECK(sigaction(SIGSEGV, NULL, &q) == 0);
  CHECK(q.sa_handler == app_plain && !(q.sa_flags & SA_SIGINFO));
  CHECK(sigismember(&q.sa_mask, SIGSEGV));
  check_kernel_has_ours(SIGSEGV, (void *)app_plain);
  check_chain_and_tracking();
  errno = 0;
  CHECK(signal(SIGSEGV, SIG_ERR) == SIG_ERR && errno == EINVAL);

  signal(SIGBUS, on_bus);
  CHECK(signal(SIGBUS, on_bus) == on_bus);
  check_kernel_has_ours(SIGBUS, (void *)on_bus);
  raise(SIGBUS);
  CHECK_EQ(bus_calls, 1);

  CHECK(signal(SIGUSR1, on_usr) == SIG_DFL); /* not virtualised */
  sigaction_fn real = (sigaction_fn)ibp__libc("sigaction");
  struct sigaction k;
  CHECK(real(SIGUSR1, NULL, &k) == 0 && k.sa_handler == on_usr);
  raise(SIGUSR1);
  CHECK_EQ(usr_calls, 1);
}

static void case_resethand(void) {
  new_none_page();
  CHECK(ibp__track_install() == 0);
  struct sigaction a = action(app_info, SA_RESETHAND), q;
  CHECK(sigaction(SIGSEGV, &a, NULL) == 0);
  none_page[0] = 1;
  CHECK_EQ(app_calls, 1);
  CHECK(sigaction(SIGSEGV, NULL, &q) == 0);
  CHECK(q.sa_handler == SIG_DFL);
  check_kernel_has_ours(SIGSEGV, NULL);
}

/* ---- children that must die of a signal ---------------------------------- */

/* Runs fn in a child; returns the signal it died of, or -1. */
static int dies_of(void (*fn)(void)) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    ibp__track_after_fork_child();
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    fn();
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  return WIFSIGNALED(st) ? WTERMSIG(st) : -1;
}

static void set_action(int sig, void (*h)(int)) {
  struct sigaction a;
  memset(&a, 0, sizeof a);
  a.sa_handler = h;
  sigemptyset(&a.sa_mask);
  CHECK(sigaction(sig, &a, NULL) == 0);
}

static void child_fault(void) {
  none_page[3] = 1;
}

static void child_dfl_fault(void) {
  set_action(SIGSEGV, SIG_DFL);
  child_fault();
}

static void child_ign_fault(void) {
  set_action(SIGSEGV, SIG_IGN);
  child_fault();
}

static void child_dfl_raise(void) {
  set_action(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

/* Tracking still works in the child (after fork), then a real fault. */
static void child_track_then_fault(void) {
  set_action(SIGSEGV, SIG_DFL);
  arena a;
  arena_init(&a, 3);
  ibp_tracked *r = region_new(&a, 0, 3 * a.pg, 4096);
  if (ibp__track_protect(r) != 0)
    _exit(3);
  arena_store(&a, a.pg, 1);
  if (atomic_load(&r->write_faults) != 1 || !dirty_bit(r, 1) || dirty_bit(r, 0))
    _exit(4);
  ibp__track_unprotect(r);
  child_fault();
}

/* A genuine SIGBUS: a mapping past the end of its file. */
static void child_bus(void) {
  set_action(SIGBUS, SIG_DFL);
  char path[] = "/tmp/ibp_track_bus_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    _exit(5);
  unlink(path);
  volatile uint8_t *m =
      mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED)
    _exit(6);
  m[0] = 1;
}

static void case_default(void) {
  new_none_page();
  struct sigaction pre;
  CHECK(sigaction(SIGSEGV, NULL, &pre) == 0);
  CHECK(ibp__track_install() == 0);
  /* With nothing installed before (not so under ASan, whose handler is). */
  if (pre.sa_handler == SIG_DFL)
    CHECK_EQ(dies_of(child_fault), SIGSEGV);
  CHECK_EQ(dies_of(child_dfl_fault), SIGSEGV);
  CHECK_EQ(dies_of(child_ign_fault), SIGSEGV);
  CHECK_EQ(dies_of(child_dfl_raise), SIGSEGV);
  CHECK_EQ(dies_of(child_track_then_fault), SIGSEGV);
  CHECK_EQ(dies_of(child_bus), SIGBUS);
}

static void case_ignore(void) {
  CHECK(ibp__track_install() == 0);
  set_action(SIGSEGV, SIG_IGN);
  set_action(SIGBUS, SIG_IGN);
  raise(SIGSEGV); /* sent, not a fault: ignored */
  kill(getpid(), SIGSEGV);
  raise(SIGBUS);
  check_kernel_has_ours(SIGSEGV, NULL);
}

/* A SIGSEGV sent with sigqueue-like fields that alias si_addr to a
 * tracked page is not a fault: it goes to the application, the page stays
 * protected and clean. */
static void case_sent(void) {
  new_none_page();
  CHECK(ibp__track_install() == 0);
  struct sigaction a = action(app_info, 0);
  CHECK(sigaction(SIGSEGV, &a, NULL) == 0);
  arena ar;
  arena_init(&ar, 2);
  ibp_tracked *r = region_new(&ar, 0, 2 * ar.pg, 4096);
  CHECK(ibp__track_protect(r) == 0);
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGSEGV;
  si.si_code = SI_QUEUE;
  si.si_addr = ar.mem + 100; /* the kernel keeps these bytes as sent */
  none_page_ok = 1;
  CHECK(syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGSEGV, &si) == 0);
  CHECK_EQ(app_calls, 1);
  CHECK_EQ(atomic_load(&r->write_faults), 0);
  CHECK_EQ(atomic_load(&r->dirty_tensors), 0);
  CHECK(page_prot(ar.mem) == 'r');
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&ar);
}

/* The chain runs on the application's alternate stack. */
static char *alt;
#define ALT_SIZE (256 * 1024)

static void app_on_alt(int sig, siginfo_t *si, void *uc) {
  char here;
  if (&here < alt || &here >= alt + ALT_SIZE)
    abort();
  app_info(sig, si, uc);
}

static void case_altstack(void) {
  new_none_page();
  CHECK(ibp__track_install() == 0);
  alt = malloc(ALT_SIZE);
  CHECK(alt);
  stack_t ss = {.ss_sp = alt, .ss_size = ALT_SIZE, .ss_flags = 0};
  CHECK(sigaltstack(&ss, NULL) == 0);
  struct sigaction a = action(app_on_alt, SA_ONSTACK);
  CHECK(sigaction(SIGSEGV, &a, NULL) == 0);
  check_chain_and_tracking();
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"before", case_before},     {"after", case_after},
      {"signal", case_signal},     {"resethand", case_resethand},
      {"default", case_default},   {"ignore", case_ignore},
      {"altstack", case_altstack}, {"sent", case_sent},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  return run_case(cases, sizeof cases / sizeof cases[0], argc, argv);
}
