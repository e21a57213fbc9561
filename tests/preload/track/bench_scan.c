/*
 * The CPU time of the userfaultfd tracker's scan before a copy
 * (ibp__track_sync: one PAGEMAP_SCAN over the copy's pages), as a cost
 * per call and per page: the constants IBP_TRACK_SCAN_CALL_NS and
 * IBP_TRACK_SCAN_PAGE_NS of preload/track/track.h, which the simulated
 * GPU's clock charges for every scan (docs/PROFILE.md, "The virtual
 * clock").  Scans spans of 1 to 1024 clean pages of a protected region
 * many times each (the thread's CPU clock), and fits cost = call + pages x
 * page by least squares over the spans' medians.  Prints one line per
 * span, then `scan_call_ns=C scan_page_ns=P`.  Exits 77 where the kernel
 * lacks asynchronous userfaultfd write protection.  bench/track_scan.sh
 * runs it.
 */
#include "track_test.h"

#include <time.h>

enum { REPS = 2001, SPANS = 6 };

static double cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The median CPU time of one scan of `pages` pages of r. */
static double scan_ns(ibp_tracked *r, size_t pages, size_t pg) {
  static double t[REPS];
  for (int i = 0; i < REPS; i++) {
    size_t first = (size_t)i * 7 % (r->bytes / pg - pages + 1);
    double t0 = cpu_ns();
    CHECK(ibp__track_sync(r, r->base + first * pg, pages * pg) == 0);
    t[i] = cpu_ns() - t0;
  }
  qsort(t, REPS, sizeof t[0], by_value);
  return t[REPS / 2];
}

int main(void) {
  if (!ibp__uffd_available()) {
    printf("userfaultfd write protection unavailable: skipped\n");
    return 77;
  }
  static arena a;
  arena_init(&a, 1024);
  ibp_tracked *r = region_new(&a, 0, 1024 * a.pg, 4096);
  CHECK(ibp__track_protect(r) == 0);
  static const size_t spans[SPANS] = {1, 4, 16, 64, 256, 1024};
  double x[SPANS], y[SPANS], sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int k = 0; k < SPANS; k++) {
    x[k] = (double)spans[k];
    y[k] = scan_ns(r, spans[k], a.pg);
    printf("pages=%zu scan_ns=%.0f\n", spans[k], y[k]);
    sx += x[k], sy += y[k], sxx += x[k] * x[k], sxy += x[k] * y[k];
  }
  double page = (SPANS * sxy - sx * sy) / (SPANS * sxx - sx * sx);
  double call = (sy - page * sx) / SPANS;
  printf("scan_call_ns=%.0f scan_page_ns=%.2f\n", call, page);
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
  return 0;
}
