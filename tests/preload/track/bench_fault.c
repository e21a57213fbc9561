/*
 * The costs of quiet regions' faulting mode (preload/track/track_sync.c,
 * track_quiet.c), beside the scanning mode's: IBP_TRACK_FAULT_NS of
 * preload/track/track.h and the figures of docs/ARCHITECTURE.md, "Quiet
 * regions".  On a region of 1024 pages:
 *   sync_ns          a copy's ibp__track_sync while faulting (no call)
 *   fault_ns         the first write to a page while faulting: the writer
 *                    waits for the fault thread (wall time, median)
 *   async_fault_ns   the same write while scanning (resolved in the kernel)
 *   rearm_call_ns, rearm_page_ns   re-protection of written pages while
 *                    faulting (a refresh), fitted per call and per page
 *   move_page_ns     a move to faulting and back, per page
 * Prints `key=value` on its last line.  Exits 77 where quiet regions are
 * unavailable.  bench/track_scan.sh runs it.
 */
#include "track_test.h"

#include <time.h>

enum { PAGES = 1024, REPS = 5 };

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

/* The median wall time of a first write to each page (`stride` apart),
 * 16 at a time, so that the quiet tick does not find the region busy. */
static double first_writes(arena *a, ibp_tracked *r, size_t stride) {
  static double t[PAGES];
  int n = 0;
  for (size_t p = 0; p < PAGES; p += stride) {
    if (n % 16 == 15) {
      struct timespec ts = {0, 60000000};
      nanosleep(&ts, NULL);
    }
    volatile uint8_t *b = a->mem + p * a->pg;
    double t0 = now_ns();
    *b = (uint8_t)(*b + 1);
    t[n++] = now_ns() - t0;
  }
  (void)r;
  return median(t, n);
}

int main(void) {
  if (!ibp__uffd_available() || !ibp__syncwp_available()) {
    printf("quiet regions unavailable here: skipped\n");
    return 77;
  }
  static arena a;
  arena_init(&a, PAGES);
  ibp_tracked *r = region_new(&a, 0, PAGES * a.pg, 4096);
  CHECK(ibp__track_protect(r) == 0);
  /* scanning: the kernel resolves the write */
  double async_fault = first_writes(&a, r, 4);
  CHECK(ibp__track_reprotect(r) == 0);
  /* faulting */
  CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);
  double t0 = now_ns();
  for (int i = 0; i < 100000; i++)
    CHECK(ibp__track_sync(r, r->base + (size_t)(i % 1000) * a.pg, 4 * a.pg) ==
          0);
  double sync = (now_ns() - t0) / 100000;
  double fault = first_writes(&a, r, 4);
  CHECK_EQ(atomic_load(&r->mode), IBP_TRACK_FAULTING);
  /* re-protection of k written pages: fit call + k x page */
  static const size_t ks[] = {1, 16, 256, 1024};
  double x[4], y[4], sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int j = 0; j < 4; j++) {
    double v[REPS];
    for (int rep = 0; rep < REPS; rep++) {
      CHECK(ibp__track_reprotect(r) == 0);
      for (size_t p = 0; p < ks[j]; p++) /* contiguous: one call */
        a.mem[p * a.pg] ^= 1;
      double s = now_ns();
      CHECK(ibp__track_reprotect(r) == 0);
      v[rep] = now_ns() - s;
    }
    x[j] = (double)ks[j];
    y[j] = median(v, REPS);
    sx += x[j], sy += y[j], sxx += x[j] * x[j], sxy += x[j] * y[j];
  }
  double page = (4 * sxy - sx * sy) / (4 * sxx - sx * sx);
  double call = (sy - page * sx) / 4;
  double mv[REPS];
  for (int rep = 0; rep < REPS; rep++) {
    double s = now_ns();
    CHECK(ibp__quiet_now(r, IBP_TRACK_SCANNING) == 0);
    CHECK(ibp__quiet_now(r, IBP_TRACK_FAULTING) == 0);
    mv[rep] = (now_ns() - s) / PAGES;
  }
  printf("sync_ns=%.1f fault_ns=%.0f async_fault_ns=%.0f rearm_call_ns=%.0f "
         "rearm_page_ns=%.1f move_page_ns=%.1f\n",
         sync, fault, async_fault, call, page, median(mv, REPS));
  ibp__track_unprotect(r);
  region_free(r);
  arena_free(&a);
  return 0;
}
