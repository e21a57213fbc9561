/*
 * PCIe accounting.  The k-th host read of each lane of a warp belongs to
 * the warp's k-th request (lanes' counters are aligned again whenever they
 * meet in a collective, see warp.c).  A request is closed once every live
 * lane of the warp has gone past it; it then counts the distinct 32-byte
 * sectors and 128-byte lines that its lanes' bytes touch.
 *
 * A lane far ahead of the rest of its warp (no collective in its loop)
 * yields at its host reads, so the others catch up and the window of open
 * requests stays short; this only picks another legal interleaving.
 */
#include "simt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SECTOR_SHIFT 5 /* 32-byte sectors */
#define LINE_SHIFT 7   /* 128-byte lines */
#define AHEAD_YIELD 64 /* open requests before a lane makes way */

static pthread_mutex_t total_lock = PTHREAD_MUTEX_INITIALIZER;
static simt_pcie total;

void simt__pcie_add_total(const simt_pcie *p) {
  pthread_mutex_lock(&total_lock);
  total.requests += p->requests;
  total.sectors += p->sectors;
  total.lines += p->lines;
  total.bytes += p->bytes;
  pthread_mutex_unlock(&total_lock);
}

void simt_pcie_total(simt_pcie *out) {
  pthread_mutex_lock(&total_lock);
  *out = total;
  pthread_mutex_unlock(&total_lock);
}

void simt_pcie_reset(void) {
  pthread_mutex_lock(&total_lock);
  memset(&total, 0, sizeof total);
  pthread_mutex_unlock(&total_lock);
}

/* ---- closing a request --------------------------------------------------- */

static uint64_t count_distinct(uintptr_t *v, unsigned n, unsigned shift) {
  /* Insertion sort: lanes usually come in address order already. */
  for (unsigned i = 1; i < n; i++) {
    uintptr_t x = v[i];
    unsigned j = i;
    for (; j > 0 && v[j - 1] > x; j--)
      v[j] = v[j - 1];
    v[j] = x;
  }
  uint64_t d = 0;
  for (unsigned i = 0; i < n; i++)
    if (i == 0 || v[i] >> shift != v[i - 1] >> shift)
      d++;
  return d;
}

static void close_request(struct simt_run *r, const struct simt_req *q) {
  /* Each lane reads at most 16 aligned bytes: one sector, but keep the
   * general case (a read over a sector boundary) right as well. */
  uintptr_t sec[2 * SIMT_WARP];
  unsigned n = 0;
  uint64_t bytes = 0;
  for (uint32_t m = q->lanes; m; m &= m - 1) {
    unsigned l = (unsigned)__builtin_ctz(m);
    if (!q->len[l])
      continue;
    uintptr_t first = q->addr[l] >> SECTOR_SHIFT;
    uintptr_t last = (q->addr[l] + q->len[l] - 1) >> SECTOR_SHIFT;
    for (uintptr_t s = first; s <= last && n < 2 * SIMT_WARP; s++)
      sec[n++] = s << SECTOR_SHIFT;
    bytes += q->len[l];
  }
  if (!n)
    return; /* nothing crossed the bus */
  r->pcie.requests++;
  r->pcie.bytes += bytes;
  r->pcie.sectors += count_distinct(sec, n, SECTOR_SHIFT);
  r->pcie.lines += count_distinct(sec, n, LINE_SHIFT);
}

static struct simt_req *slot(struct simt_reqwin *win, uint64_t k) {
  return &win->ring[(win->head + (unsigned)(k - win->base)) & (win->cap - 1)];
}

/* Closes requests below `upto`. */
static void close_below(struct simt_run *r, struct simt_reqwin *win,
                        uint64_t upto) {
  while (win->count && win->base < upto) {
    close_request(r, slot(win, win->base));
    win->head = (win->head + 1) & (win->cap - 1);
    win->base++;
    win->count--;
  }
  if (win->base < upto)
    win->base = upto; /* empty window: start where the lanes are */
}

void simt__pcie_settle(struct simt_run *r, struct simt_warp *w) {
  uint32_t live = w->exists & ~w->exited;
  uint64_t low = UINT64_MAX;
  for (uint32_t m = live; m; m &= m - 1) {
    uint64_t k = w->lane[__builtin_ctz(m)]->host_reads;
    low = k < low ? k : low;
  }
  if (live)
    close_below(r, &w->reads, low);
}

void simt__pcie_flush(struct simt_run *r, struct simt_warp *w) {
  struct simt_reqwin *win = &w->reads;
  close_below(r, win, win->base + win->count);
}

void simt__pcie_reset_window(struct simt_reqwin *win) {
  win->head = win->count = 0;
  win->base = 0;
}

void simt__pcie_free_window(struct simt_reqwin *win) {
  free(win->ring);
  memset(win, 0, sizeof *win);
}

/* ---- recording a read ---------------------------------------------------- */

static int grow(struct simt_reqwin *win, unsigned need) {
  unsigned cap = win->cap ? win->cap : 8;
  while (cap < need)
    cap *= 2;
  if (cap == win->cap)
    return 0;
  struct simt_req *n = malloc(cap * sizeof *n);
  if (!n)
    return -1;
  for (unsigned i = 0; i < win->count; i++)
    n[i] = win->ring[(win->head + i) & (win->cap - 1)];
  free(win->ring);
  win->ring = n;
  win->cap = cap;
  win->head = 0;
  return 0;
}

void simt__pcie_record(struct simt_fiber *f, uintptr_t a, unsigned n) {
  struct simt_warp *w = f->warp;
  struct simt_reqwin *win = &w->reads;
  /* f's counter moves past k only once the read is recorded: until then
   * request k stays open, whoever runs while f yields. */
  uint64_t k = f->host_reads;
  if (k - win->base >= AHEAD_YIELD) {
    simt__pcie_settle(f->run, w);
    if (k - win->base >= AHEAD_YIELD) {
      /* Make way for the lanes behind; f's read is recorded as the k-th
       * either way. */
      simt__make_ready(f->run, f);
      simt__yield(f);
    }
  }
  if (k - win->base >= win->cap && grow(win, (unsigned)(k - win->base + 1)))
    simt__fail(f, "out of memory recording host reads");
  while (win->base + win->count <= k) {
    slot(win, win->base + win->count)->lanes = 0;
    win->count++;
  }
  struct simt_req *q = slot(win, k);
  q->lanes |= 1u << f->lane;
  q->addr[f->lane] = a;
  q->len[f->lane] = (uint8_t)n;
  f->host_reads = k + 1;
}
