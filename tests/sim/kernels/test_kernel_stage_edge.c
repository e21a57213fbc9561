/*
 * The exponent stage's device decoder (kernels/stage_exp_dev.cuh, through
 * the ibp_stage_exp kernel) at the end of readable memory: each stream is
 * placed so that the one word after its last -- the only one past it the
 * caller keeps readable (stage_exp_dev.cuh) -- ends at a PROT_NONE guard
 * page, so that a read of any word further on faults (reported with the
 * case, exit 1).  Most streams end on a word's edge, where a read clamped
 * at the stream's end bit would take its two words from that bit's word
 * on, one past the readable one (stage_last clamps one bit earlier there,
 * ef06884).  A valid stream's reads start before its end bit; a damaged
 * one's (segment lengths, codes) reach it -- so half the cases also decode
 * a copy with bits of its stage part flipped: any bytes of the tensor,
 * nothing written outside it, nothing read past that word (a mutant of
 * stage_last that clamped at the end bit passed every other kernel,
 * fuzz-replay and preload test; here it faults within a few cases).
 * bf16, float16 and float32 tensors of 1 .. 16 Ki values, segments of 2^4
 * .. 2^12 values, exponents spread or narrow, the stage learned on the
 * tensor (no escapes) or on another (escapes), the Mask the field alone,
 * streams at any byte of a word; the valid stream must decode to the
 * original, byte for byte.
 * IBP_TEST_ITERATIONS = cases (default 1000); SIMT_SEED / IBP_TEST_SEED.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard_buf.h"
#include "ibp/stage.h"
#include "ibp_kernels.h"
#include "kernels_emu.h"
#include "test_util.h"

#define GUARD 16u

/* The case running, for the fault handler. */
static char what[256];

static void on_fault(int sig) {
  static const char head[] = "test_kernel_stage_edge: FAIL: the stage decoder "
                             "read past the word after its stream (the guard "
                             "page faulted): ";
  (void)sig;
  ssize_t w = write(2, head, sizeof head - 1);
  w = write(2, what, strlen(what));
  w = write(2, "\n", 1);
  (void)w;
  _exit(1);
}

static uint32_t field_of(uint32_t dtype, uint32_t *lo) {
  switch (dtype) {
  case IBP_DTYPE_BF16:
    *lo = 7;
    return 9;
  case IBP_DTYPE_F16:
    *lo = 10;
    return 6;
  default:
    *lo = 23;
    return 9;
  }
}

/* A tensor of n values: random bits, the field near `centre` (spread or
 * narrow: a geometric fall-off), now and then any. */
static void make_tensor(rng *r, uint32_t dtype, uint32_t n, uint32_t centre,
                        int narrow, uint8_t *t) {
  const uint32_t vb = ibp_dtype_bytes(dtype);
  uint32_t lo, e = field_of(dtype, &lo);
  const uint32_t top = (1u << e) - 1, fm = top << lo;
  rng_fill(r, t, (size_t)n * vb);
  for (uint32_t v = 0; v < n; v++) {
    uint32_t f = centre;
    while (f > 0 && rng_chance(r, narrow ? 0.2 : 0.6))
      f--;
    if (rng_chance(r, 0.01))
      f = (uint32_t)rng_below(r, top + 1);
    uint32_t x = 0;
    memcpy(&x, t + (size_t)v * vb, vb);
    x = (x & ~fm) | (f & top) << lo;
    memcpy(t + (size_t)v * vb, &x, vb);
  }
}

/* Runs the kernel on the stream at s (len bytes, its stage part from bit
 * `first`) into dst + GUARD (R bytes between guards, holding what the IBP
 * part decodes to); returns the emulator's status. */
static int run(simt_entry entry, const ibp_kernel_stage *ks, const uint8_t *s,
               uint32_t len, uint32_t first, uint8_t *dst, uint32_t R,
               uint64_t seed, char *err, size_t cap) {
  const uint64_t offset = 0;
  ibp_stage_exp_args a;
  memset(&a, 0, sizeof a);
  a.streams = s;
  a.offsets = &offset;
  a.lengths = &len;
  a.first_bits = &first;
  a.stages = ks;
  a.dst = dst + GUARD;
  a.tensors = 1;
  a.k = 1;
  a.w0 = 0;
  a.w1 = R;
  ibp_kernel_plan plan;
  ibp_kernels_plan_stage_exp(1, 1, 1, &plan);
  simt_launch l = {
      entry, &a, {plan.grid, 1, 1}, {plan.block, 1, 1}, plan.dynamic_shared};
  simt_set_seed(seed);
  return simt_run(&l, NULL, err, cap);
}

typedef struct tally {
  uint64_t cases, edge, escapes_learned, corrupt;
} tally;

static void one_case(simt_entry entry, uint64_t it, tally *y) {
  rng r;
  test_iteration(&r, it);
  static const uint32_t dtypes[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                    IBP_DTYPE_F32};
  const uint32_t dtype = dtypes[rng_below(&r, 3)];
  const uint32_t vb = ibp_dtype_bytes(dtype);
  const uint32_t n = rng_chance(&r, 0.2) ? 2048 / vb /* a 4 KiB tensor */
                                         : rng_log_uniform(&r, 1, 16384);
  const uint32_t R = n * vb;
  uint32_t lo, e = field_of(dtype, &lo);
  const uint32_t centre = (uint32_t)rng_below(&r, 1u << e);
  const int narrow = rng_chance(&r, 0.5), own = rng_chance(&r, 0.5);
  const uint32_t L = (uint32_t)rng_range(&r, 4, 12);
  uint8_t *t = xmalloc(R), *other = xmalloc(R), *strip = xmalloc(R);
  make_tensor(&r, dtype, n, centre, narrow, t);
  ibp_stage st;
  CHECK_OK(ibp_stage_init(&st, IBP_STAGE_EXP, dtype, L, R));
  if (own) {
    ibp_stage_count(&st, t, R);
  } else { /* learned on another: its unseen fields escape */
    make_tensor(&r, dtype, n, centre, narrow, other);
    ibp_stage_count(&st, other, R);
  }
  CHECK_OK(ibp_stage_finish(&st));
  ibp_params p; /* the Mask the field alone, Bitval 0 */
  uint8_t *field = xcalloc(R), *zero = xcalloc(R);
  ibp_stage_field(&st, field, R);
  CHECK_OK(ibp_params_from_masks(R, 1, field, zero, &p));
  free(field);
  free(zero);
  ibp_kernel_stage ks;
  CHECK(ibp_kernels_stage_exp(&st, p.mask, R, &ks) == 0);
  CHECK(ks.no_bitmap == 1);
  /* the stream; its IBP part every bit outside the field */
  uint8_t *slot = xmalloc(R);
  int compressed = 0;
  const size_t len = ibp_compress_tensor_staged(&p, &st, t, slot, &compressed);
  CHECK(len > 0);
  if (!compressed)
    goto out; /* stored raw: no stage part */
  const uint32_t first = n * (8 * vb - e);
  /* its end 0 .. 3 bytes before the word that ends at the guard page
   * (0: on a word's edge, most cases), its start at any byte */
  const uint32_t gap = rng_chance(&r, 0.7) ? 0 : (uint32_t)rng_range(&r, 1, 3);
  guard_buf g;
  guard_init(&g, len + gap + 4 + 8);
  uint8_t *s = guard_tail(&g, len + gap + 4);
  memcpy(s, slot, len);
  memset(s + len, 0, gap + 4);
  y->edge += gap == 0;
  y->escapes_learned += !own;
  ibp_stage_strip(&st, t, strip, R);
  uint8_t *dst = xmalloc(R + 2 * GUARD), *want = xmalloc(R + 2 * GUARD);
  memset(dst, 0xA5, R + 2 * GUARD);
  memcpy(dst + GUARD, strip, R);
  memset(want, 0xA5, R + 2 * GUARD);
  memcpy(want + GUARD, t, R);
  snprintf(what, sizeof what,
           "case %llu: %s n=%u segments of 2^%u, %s, learned on %s; stream "
           "of %zu bytes at +%u of a word, ending %u bytes before the "
           "readable word",
           (unsigned long long)it, ibp_dtype_name(dtype), n, L,
           narrow ? "narrow" : "spread", own ? "itself" : "another", len,
           (unsigned)((uintptr_t)s & 3u), gap);
  test_case("%s", what);
  char err[512] = "";
  CHECKF(run(entry, &ks, s, (uint32_t)len, first, dst, R, rng_next(&r) | 1, err,
             sizeof err) == 0,
         "emulator: %s", err);
  CHECK_MEM(dst, want, R + 2 * GUARD, "decoded tensor and guards");
  /* a corrupt stage part: any bytes of the tensor, nothing outside it */
  if (8 * len > first && rng_chance(&r, 0.5)) {
    for (int k = 0, m = (int)rng_range(&r, 1, 8); k < m; k++) {
      const uint64_t b = first + rng_below(&r, 8 * len - first);
      s[b / 8] ^= (uint8_t)(1u << (b % 8));
    }
    snprintf(what + strlen(what), sizeof what - strlen(what),
             ", its stage part damaged");
    memset(dst, 0xA5, R + 2 * GUARD);
    memcpy(dst + GUARD, strip, R);
    CHECKF(run(entry, &ks, s, (uint32_t)len, first, dst, R, rng_next(&r) | 1,
               err, sizeof err) == 0,
           "emulator on the damaged stream: %s", err);
    CHECK_MEM(dst, want, GUARD, "the guard before the tensor");
    CHECK_MEM(dst + GUARD + R, want + GUARD + R, GUARD,
              "the guard after the tensor");
    y->corrupt++;
  }
  y->cases++;
  free(dst);
  free(want);
  guard_free(&g);
out:
  free(slot);
  ibp_params_free(&p);
  free(t);
  free(other);
  free(strip);
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_stage_edge", 1000);
  simt_entry entry = ibp_emu_entry(IBP_KERNEL_STAGE_EXP);
  CHECK(entry != NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fault;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGSEGV, &sa, NULL) == 0 &&
        sigaction(SIGBUS, &sa, NULL) == 0);
  tally y = {0, 0, 0, 0};
  for (uint64_t it = 0; it < iters; it++)
    one_case(entry, it, &y);
  printf("test_kernel_stage_edge: %llu streams decoded at a guard page, %llu "
         "of them ending on a word's edge, %llu with escapes; %llu damaged "
         "streams read in bounds\n",
         (unsigned long long)y.cases, (unsigned long long)y.edge,
         (unsigned long long)y.escapes_learned, (unsigned long long)y.corrupt);
  if (iters >= 100)
    CHECK(y.edge >= iters / 4 && y.corrupt > 0 && y.escapes_learned > 0);
  return test_end();
}
