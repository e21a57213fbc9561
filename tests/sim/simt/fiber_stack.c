/*
 * Fiber stacks: one anonymous mapping per workspace, cut into slots of
 * [guard | stack].  Stacks grow down, so an overflow runs into the guard
 * pages below its own stack and faults (SIGSEGV) instead of silently
 * overwriting the neighbouring fiber.
 */
#include "simt_internal.h"

#include <sys/mman.h>
#include <unistd.h>

#if SIMT_ASAN
#include <sanitizer/asan_interface.h>
/* Instrumented frames carry redzones: give them room. */
#define STACK_BYTES (256u * 1024u)
#else
#define STACK_BYTES (64u * 1024u)
#endif
#define GUARD_BYTES (64u * 1024u)

int simt__stacks_map(struct simt_stacks *s, unsigned count) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* Several pages: a frame larger than one page could step over a single
   * guard page (the reason for -fstack-clash-protection); PROT_NONE costs
   * address space only. */
  s->guard_bytes = GUARD_BYTES > page ? GUARD_BYTES : page;
  s->stack_bytes = STACK_BYTES;
  s->stride = s->guard_bytes + s->stack_bytes;
  s->map_bytes = s->stride * count;
  s->count = count;
  /* Reserve everything inaccessible, then open each stack: the guard pages
   * are what stays PROT_NONE.  NORESERVE: only touched pages cost memory. */
  void *m = mmap(NULL, s->map_bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    s->map = NULL;
    return -1;
  }
  s->map = m;
  for (unsigned i = 0; i < count; i++) {
    if (mprotect(simt__stack_lo(s, i), s->stack_bytes,
                 PROT_READ | PROT_WRITE) != 0) {
      simt__stacks_unmap(s);
      return -1;
    }
  }
  return 0;
}

void simt__stacks_unmap(struct simt_stacks *s) {
  if (s->map)
    munmap(s->map, s->map_bytes);
  s->map = NULL;
}

char *simt__stack_lo(const struct simt_stacks *s, unsigned i) {
  return s->map + (size_t)i * s->stride + s->guard_bytes;
}

void simt__stack_unpoison(const struct simt_stacks *s, unsigned i,
                          const void *sp) {
#if SIMT_ASAN
  char *lo = simt__stack_lo(s, i), *hi = lo + s->stack_bytes;
  uintptr_t at = (uintptr_t)sp;
  if (at <= (uintptr_t)lo || at > (uintptr_t)hi)
    return; /* never ran on this stack (sp may be NULL) */
  /* the red zone below the stack pointer too */
  char *from = at - (uintptr_t)lo > 128 ? (char *)sp - 128 : lo;
  ASAN_UNPOISON_MEMORY_REGION(from, (size_t)(hi - from));
#else
  (void)s;
  (void)i;
  (void)sp;
#endif
}
