/* The driver's call as a set-up probe reshapes it (serve/batch/batch_call.c,
 * ibp__batch_call_halve and ibp__batch_call_part): random calls -- entries
 * of any size, attribute ranges anywhere, with and without a map to the
 * application's entries -- made again must copy exactly the same bytes to
 * the same places, each with its own entry's attributes, and map each
 * piece back to the application's entry its failure would be reported as;
 * an entry's two halves never next to each other in the call.
 * No GPU: the pieces are applied to host buffers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/driver.h"
#include "base/log.h"
#include "serve/batch/batch.h"
#include "serve/batch/batch_call.h"
#include "serve/choose/choose.h"
#include "serve/copy.h"
#include "serve/substitute.h"

/* What batch_call.c calls besides the reshaping (its splitting and 2D
 * copies, not run here). */
int ibp__serve_htod(const ibp_copy *c) {
  (void)c;
  return 1;
}
const ibp_driver *ibp__driver(void) {
  return NULL;
}
int ibp__dst_fits(const ibp_driver *d, CUdeviceptr dst, size_t bytes,
                  CUdeviceptr *base, size_t *size) {
  (void)d, (void)dst, (void)bytes, (void)base, (void)size;
  return 0;
}
void ibp__serve_passed(const ibp_copy *c, int reason) {
  (void)c, (void)reason;
}
int ibp__batch_order(CUstream s) {
  (void)s;
  return 0;
}
int ibp__batch_order_copy(CUstream s) {
  (void)s;
  return 0;
}
void ibp__log(ibp_log_level level, const char *fmt, ...) {
  (void)level, (void)fmt;
}

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

enum { MAX_ENTRIES = 40, SPACE = 1 << 16 };

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n) {
  seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
  return seed % n;
}

/* A random call: entries copying disjoint ranges of a source space to
 * disjoint ranges of a destination space, attribute ranges at random
 * starts (the first at 0), orig present or not. */
typedef struct call {
  CUdeviceptr dsts[MAX_ENTRIES], srcs[MAX_ENTRIES];
  size_t sizes[MAX_ENTRIES], orig[MAX_ENTRIES], idxs[MAX_ENTRIES];
  CUmemcpyAttributes attrs[MAX_ENTRIES];
  ibp_batch_call c;
} call;

static void make(call *k) {
  memset(k, 0, sizeof *k);
  const size_t n = 1 + rnd(MAX_ENTRIES);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    /* small ones (never halved), odd ones, large ones */
    const size_t size = rnd(4) == 0 ? 1 + rnd(511) : 1 + rnd(SPACE / n - 1);
    k->srcs[i] = at;
    k->dsts[i] = SPACE - at - size; /* destinations in reverse */
    k->sizes[i] = size;
    k->orig[i] = 3 * i + 1;
    at += size;
  }
  size_t nattrs = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || rnd(3) == 0) {
      k->idxs[nattrs] = i;
      k->attrs[nattrs].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
      k->attrs[nattrs].flags = (unsigned)(100 + nattrs);
      nattrs++;
    }
  k->c = (ibp_batch_call){k->dsts,  k->srcs, k->sizes, n,
                          k->attrs, k->idxs, nattrs,   rnd(2) ? k->orig : NULL};
}

/* The attributes of entry i of c (its range's). */
static unsigned attr_of(const ibp_batch_call *c, size_t i) {
  size_t a = 0;
  while (a + 1 < c->nattrs && c->attr_idxs[a + 1] <= i)
    a++;
  return c->attrs[a].flags;
}

/* Checks that out copies entries [from, to) of in exactly: every byte of
 * each once, to its place, with its attributes and its application index;
 * returns the entries copied in more than one piece. */
static size_t same_copies(const ibp_batch_call *in, size_t from, size_t to,
                          const ibp_batch_call *out) {
  static unsigned char covered[SPACE];
  memset(covered, 0, sizeof covered);
  size_t pieces = 0, split = 0, prev = (size_t)-1;
  CHECK(out->nattrs >= 1 && out->attr_idxs[0] == 0);
  for (size_t a = 1; a < out->nattrs; a++)
    CHECK(out->attr_idxs[a] > out->attr_idxs[a - 1] &&
          out->attr_idxs[a] < out->count);
  for (size_t j = 0; j < out->count; j++) {
    /* the entry it is of: the one whose source range holds it */
    size_t i = from;
    while (i < to && !(out->srcs[j] >= in->srcs[i] &&
                       out->srcs[j] < in->srcs[i] + in->sizes[i]))
      i++;
    CHECK(i < to);
    if (i >= to)
      continue;
    const CUdeviceptr off = out->srcs[j] - in->srcs[i];
    CHECK(off + out->sizes[j] <= in->sizes[i] && out->sizes[j] > 0);
    CHECK(off % IBP_CHOOSE_PROBE_MIN == 0); /* a half starts on it */
    CHECK(out->dsts[j] == in->dsts[i] + off);
    CHECK(out->orig[j] == (in->orig ? in->orig[i] : i));
    CHECK(attr_of(out, j) == attr_of(in, i));
    /* an entry's halves apart (but in a call of one entry): a driver
     * joining neighbours of adjacent ranges would set up each all the
     * same */
    CHECK(i != prev || to - from == 1);
    prev = i;
    for (size_t b = 0; b < out->sizes[j]; b++)
      covered[out->srcs[j] + b]++;
    pieces++;
    split += off != 0;
  }
  for (size_t i = 0; i < in->count; i++)
    for (size_t b = 0; b < in->sizes[i]; b++)
      CHECK(covered[in->srcs[i] + b] == (i >= from && i < to));
  CHECK(pieces == to - from + split);
  return split;
}

int main(void) {
  size_t halved_total = 0;
  for (int round = 0; round < 2000; round++) {
    call k;
    make(&k);
    const ibp_batch_call *in = &k.c;
    /* halved: one entry in IBP_CHOOSE_PROBE_EVERY large enough, at a
     * multiple of IBP_CHOOSE_PROBE_MIN */
    ibp_batch_call h;
    const size_t halved = ibp__batch_call_halve(in, &h);
    size_t want = 0;
    for (size_t i = 0; i < in->count; i++)
      want += i % IBP_CHOOSE_PROBE_EVERY == 0 &&
              in->sizes[i] >= 2 * IBP_CHOOSE_PROBE_MIN;
    CHECK(halved == want);
    if (halved) {
      CHECK(h.dsts != in->dsts && h.count == in->count + halved);
      CHECK(same_copies(in, 0, in->count, &h) == halved);
    } else {
      CHECK(h.dsts == in->dsts && h.count == in->count);
    }
    halved_total += halved;
    ibp__batch_call_free(in, &h);
    /* a pair's parts: the first half of the entries, then the rest */
    ibp_batch_call first, second;
    const size_t mid = in->count / 2;
    const int made = ibp__batch_call_part(in, 0, mid, &first);
    CHECK(made == (mid > 0));
    if (made)
      CHECK(same_copies(in, 0, mid, &first) == 0);
    CHECK(ibp__batch_call_part(in, mid, in->count, &second));
    CHECK(same_copies(in, mid, in->count, &second) == 0);
    /* and the second part halved, as a paired probe makes it */
    ibp_batch_call sh;
    const size_t second_halved = ibp__batch_call_halve(&second, &sh);
    if (second_halved)
      CHECK(same_copies(in, mid, in->count, &sh) == second_halved);
    ibp__batch_call_free(&second, &sh);
    ibp__batch_call_free(in, &first);
    ibp__batch_call_free(in, &second);
  }
  CHECK(halved_total > 1000); /* the rounds halved many */
  if (failures)
    fprintf(stderr, "test_batch_call: %d failures\n", failures);
  return failures ? 1 : 0;
}
