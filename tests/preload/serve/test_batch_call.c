/* The driver's call as a set-up probe reshapes it (serve/batch/batch_call.c,
 * ibp__batch_call_halve and ibp__batch_call_part): random calls -- entries
 * of any size, attribute ranges anywhere, with and without a map to the
 * application's entries -- made again must copy exactly the same bytes to
 * the same places, each with its own entry's attributes, and map each
 * piece back to the application's entry its failure would be reported as;
 * an entry's two halves never next to each other in the call.  And the
 * driver's part made so (serve/batch/batch_rest.c): whether probed whole,
 * in two calls or not at all, and whichever of its calls the driver
 * refuses, the application gets the driver's answer for its own call and
 * its failure index, and every byte that call copies.
 * No GPU: the pieces are applied to host buffers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/driver.h"
#include "base/log.h"
#include "serve/batch/batch.h"
#include "serve/batch/batch_call.h"
#include "serve/batch/batch_rest.h"
#include "serve/choose/choose.h"
#include "serve/copy.h"
#include "serve/substitute.h"

/* What batch_call.c calls besides the reshaping (its splitting and 2D
 * copies, not run here). */
int ibp__serve_htod(const ibp_copy *c) {
  (void)c;
  return 1;
}
static CUresult not_capturing(CUstream s, CUstreamCaptureStatus *cs) {
  (void)s;
  *cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static const ibp_driver driver = {.cuStreamIsCapturing = not_capturing};
const ibp_driver *ibp__driver(void) {
  return &driver;
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

/* What batch_rest.c calls of the timing (serve/batch/batch_route.c): the
 * probe a timing asks for is its choice's; `untimed`: _begin times
 * nothing (another context current), so no call is reshaped. */
__thread int ibp__guard;
static int untimed;
int ibp__call_probes(const ibp_call_timing *t) {
  return t ? t->choice.probe : IBP_PROBE_NONE;
}
void ibp__call_probe_release(ibp_call_timing *t) {
  t->choice.probe = IBP_PROBE_NONE;
}
int ibp__call_time_pair(ibp_call_timing *t, size_t count, size_t first,
                        ibp_call_timing *second) {
  (void)count, (void)first;
  memset(second, 0, sizeof *second);
  second->choice.probe = IBP_PROBE_HALVED;
  t->choice.probe = IBP_PROBE_NONE;
  return 1;
}
void ibp__call_time_begin(ibp_call_timing *t, const size_t *sizes, size_t count,
                          size_t halved, CUstream stream) {
  (void)sizes, (void)count, (void)halved, (void)stream;
  t->t.index = untimed ? -1 : 0;
}
void ibp__call_time_end(ibp_call_timing *t, CUstream stream, int submitted) {
  (void)t, (void)stream, (void)submitted;
}
void ibp__call_time_drop(ibp_call_timing *t) {
  (void)t;
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

/* A driver for batch_rest.c's calls, on host buffers: it refuses its
 * `refuse`th call (1-based; 0: none) without doing anything, as an
 * injected failure does, and any call with an entry reading the source
 * byte `bad` (SPACE: none) -- its failure index that entry's, nothing
 * copied (every operand checked first); else it copies every entry.
 * Either way it writes SIZE_MAX to the failure index first, as a driver
 * does. */
static unsigned char src_space[SPACE], dst_space[SPACE];
static int calls, refuse;
static size_t bad = SPACE;
static const ibp_batch_call *app; /* the application's call */
static int as_app[8];             /* call n was the application's call */
static CUresult fake_driver(const ibp_batch_call *c, size_t *fail, CUstream s) {
  (void)s;
  ++calls;
  if (calls < 8)
    as_app[calls] = c->count == app->count &&
                    !memcmp(c->sizes, app->sizes, c->count * sizeof *c->sizes);
  if (calls == refuse)
    return CUDA_ERROR_UNKNOWN;
  if (fail)
    *fail = SIZE_MAX;
  for (size_t i = 0; i < c->count; i++)
    if (bad >= c->srcs[i] && bad < c->srcs[i] + c->sizes[i]) {
      if (fail)
        *fail = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  for (size_t i = 0; i < c->count; i++)
    memcpy(dst_space + c->dsts[i], src_space + c->srcs[i], c->sizes[i]);
  return CUDA_SUCCESS;
}

/* batch_rest.c's making of in's call (an application's rest, timed as
 * `probe` asks), against the same call made whole by the driver: the same
 * answer, failure index and bytes, whichever call is refused, with the
 * 12.8 ABI's failure index and without; a refused call made again only
 * where libibp reshaped it. */
static void check_rest(const ibp_batch_call *in, int probe) {
  static unsigned char want[SPACE];
  for (int abi = 0; abi < 2; abi++)
    for (int r = 0; r <= 4; r++)
      for (int b = 0; b < 2; b++) {
        const size_t entry = rnd(in->count);
        bad = b ? in->srcs[entry] + rnd(in->sizes[entry]) : SPACE;
        refuse = 0;
        memset(dst_space, 0, sizeof dst_space);
        size_t want_fail = 77, got_fail = 77;
        calls = 0;
        app = in;
        const CUresult want_res = fake_driver(in, abi ? &want_fail : NULL, 0);
        memcpy(want, dst_space, sizeof want);
        memset(dst_space, 0, sizeof dst_space);
        calls = 0;
        refuse = r;
        ibp_call_timing t;
        memset(&t, 0, sizeof t);
        t.choice.probe = probe;
        const CUresult res = ibp__batch_call_rest(
            &t, in, fake_driver, abi ? &got_fail : NULL, 0, (CUstream)1);
        int own = 0; /* the application's call made: once at most */
        for (int n = 1; n <= calls && n < 8; n++)
          own += as_app[n];
        CHECK(own <= 1);
        CHECK(calls <= (probe == IBP_PROBE_PAIRED ? 3 : 2));
        if (r && r <= calls && as_app[r]) { /* its own refused: the answer */
          /* refused before it wrote anything: no reshaped call did */
          CHECK(res == CUDA_ERROR_UNKNOWN && calls == r && got_fail == 77u);
          continue;
        }
        CHECK(res == want_res);
        CHECK(got_fail == (abi ? want_fail : 77u));
        if (res == CUDA_SUCCESS)
          CHECK(memcmp(dst_space, want, sizeof want) == 0);
      }
  bad = SPACE;
  refuse = 0;
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
  for (int i = 0; i < SPACE; i++)
    src_space[i] = (unsigned char)rnd(256);
  for (int round = 0; round < 300; round++) {
    call k;
    make(&k);
    /* a probe's calls are of entries alike (batch_rest.c, probe_fits) */
    const size_t size = 512 + 256 * rnd(4);
    for (size_t i = 0; i < k.c.count && (i + 1) * size <= SPACE / 2; i++) {
      k.sizes[i] = size;
      k.srcs[i] = i * size;
      k.dsts[i] = SPACE - (i + 1) * size;
    }
    if (k.c.count * size > SPACE / 2)
      k.c.count = SPACE / 2 / size;
    untimed = round % 5 == 4;
    check_rest(&k.c, round % 3);
  }
  untimed = 0;
  if (failures)
    fprintf(stderr, "test_batch_call: %d failures\n", failures);
  return failures ? 1 : 0;
}
