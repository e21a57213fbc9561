/*
 * The staged path of the emulated decompress kernel (ibp_kernels.h:
 * ibp_decompress_args.staged, staged_lo, staged_hi) against the original
 * bytes and against the same copy launched without a window.
 *
 * Random cases as in test_kernel_decode (tensor sizes 1 B - 64 KiB, every
 * chunk width, data and mask kind, tails, raw tensors, dirty and busy
 * shares, clusters in odd cases, misaligned bases, streams moved away or
 * all adjacent; half the cases data that compresses, so that there are
 * streams to stage), a random copy range, and a window of the packed
 * shadow:
 *   all      every stream of the copy's tensors (and maybe more);
 *   cut      lo and hi inside the copy's streams, often on a stream's
 *            edge or one byte inside it: a stream straddling an edge must
 *            be read from host memory;
 *   empty    lo == hi (nothing staged, only the pad);
 *   null     staged = NULL with lo and hi covering the streams (ignored);
 *   away     anywhere in the shadow.
 * The staged bytes lie in plain memory the emulator takes for device
 * memory (not pinned: no PCIe), 128-byte aligned, garbage (0xA5) before
 * the window and past what was copied; in half the cases the
 * IBP_STAGED_PAD bytes after hi are copied as the copy engine copies them,
 * in the other half they are garbage too (the kernel may read them but
 * never use them).  Staged launches run without strict host reads (they
 * would reject the unpinned window); the launch without a window keeps
 * them.
 *
 * Checks per case: every byte of the copy equals the original, guard
 * bytes around the destination stay untouched; sectors over PCIe (simt.h)
 * never exceed those of the launch without a window, are strictly fewer
 * when a staged stream of a decoded tensor holds a whole 32-byte sector,
 * lie between the raw copies' sectors and that plus the unstaged streams'
 * sectors, and equal the raw copies' alone (but for the byte-wise pieces
 * at the original's misaligned ends) when the window holds every decoded
 * stream of the copy.
 * IBP_TEST_ITERATIONS = cases (default 2000); IBP_TEST_SEED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_data.h"
#include "kcase.h"
#include "kernels_emu.h"

#define GUARD 64u
#define GARBAGE 0xA5u
#define POISON 0xEEu
#define LINE 128u
#define SECTOR 32u

enum { WIN_ALL, WIN_CUT, WIN_EMPTY, WIN_NULL, WIN_AWAY, WIN_KINDS };
static const char *const win_names[WIN_KINDS] = {"all", "cut", "empty", "null",
                                                 "away"};

typedef struct window {
  int kind;
  int pad;         /* the IBP_STAGED_PAD bytes after hi copied (else garbage) */
  int streamless;  /* the copy's tensors have no streams (all raw) */
  uint64_t lo, hi; /* shadow offsets */
  uint8_t *mem;    /* the allocation; staged = mem + LINE (NULL: none) */
  const uint8_t *staged;
} window;

/* What the launches of one case must read over PCIe (in sectors). */
typedef struct expect {
  uint64_t raw;        /* raw units' wide reads, exactly */
  uint64_t raw_slack;  /* what byte-wise edge pieces may add */
  uint64_t host;       /* decoded streams outside the window (+ slack) */
  unsigned decoded;    /* decoded tensors of the copy */
  unsigned staged;     /* ... whose stream lies in the window */
  unsigned whole;      /* ... holding a whole sector of the shadow */
  unsigned straddling; /* decoded streams across lo or hi */
} expect;

typedef struct totals {
  uint64_t cases, kinds[WIN_KINDS], streamless, full, exact, fewer;
  uint64_t straddling, staged;
  uint64_t bytes, base_sectors, staged_sectors;
} totals;

static uint64_t floor_to(uint64_t x, uint64_t a) {
  return x / a * a;
}

static uint64_t ceil_to(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

static int bit(const uint32_t *b, uint64_t i) {
  return b && ((b[i / 32] >> (i % 32)) & 1);
}

/* ---- the case ------------------------------------------------------------ */

static void shape_for(rng *r, kcase_shape *s, int clustered) {
  kcase_random_shape(r, s, 32);
  if (rng_chance(r, 0.5)) { /* data that compresses: streams to stage */
    s->data_kind = (int)rng_below(r, DATA_RANDOM);
    s->mask_kind = MASK_STATS;
  }
  s->dirty_share = rng_chance(r, 0.3) ? 0.3 : 0;
  static const unsigned ks[] = {2, 3, 4, 5, 9, 16, 17, 40};
  s->clusters = clustered ? ks[rng_below(r, 8)] : 1;
  s->adjacent = rng_chance(r, 0.3); /* else kcase moves some, sometimes */
}

/* The copy's units [*t0, *t1] (t == n: the tail), as the kernel numbers
 * them. */
static void copy_units(const kcase *k, uint64_t off, uint64_t len, uint64_t *t0,
                       uint64_t *t1) {
  *t0 = off / k->R < k->n ? off / k->R : k->n;
  *t1 = (off + len - 1) / k->R < k->n ? (off + len - 1) / k->R : k->n;
}

static int decoded(const kcase *k, uint64_t t) {
  return t < k->n && k->lengths[t] && bit(k->flags, t) && !bit(k->dirty, t) &&
         !bit(k->busy, t);
}

/* ---- the window ---------------------------------------------------------- */

/* Shadow range [*lo, *hi) of the streams of the copy's tensors (decoded
 * or not); lo == hi when there are none. */
static void copy_streams(const kcase *k, uint64_t t0, uint64_t t1, uint64_t *lo,
                         uint64_t *hi) {
  *lo = UINT64_MAX;
  *hi = 0;
  for (uint64_t t = t0; t <= t1 && t < k->n; t++) {
    if (!k->lengths[t])
      continue;
    if (k->offsets[t] < *lo)
      *lo = k->offsets[t];
    if (k->offsets[t] + k->lengths[t] > *hi)
      *hi = k->offsets[t] + k->lengths[t];
  }
  if (*hi == 0)
    *lo = *hi = 0;
}

/* An offset on the edge of a random stream of the copy, or one byte
 * inside it: where a window boundary is most likely to be wrong. */
static uint64_t stream_edge(rng *r, const kcase *k, uint64_t t0, uint64_t t1) {
  uint64_t t = rng_range(r, t0, t1 < k->n ? t1 : k->n - 1);
  uint64_t s = k->offsets[t], e = s + k->lengths[t];
  switch (rng_below(r, 4)) {
  case 0:
    return s;
  case 1:
    return s + (k->lengths[t] > 1);
  case 2:
    return e;
  default:
    return e - (k->lengths[t] > 1);
  }
}

static void pick_window(rng *r, const kcase *k, uint64_t t0, uint64_t t1,
                        window *w) {
  const uint64_t end = k->packed_bytes;
  uint64_t slo, shi;
  copy_streams(k, t0, t1, &slo, &shi);
  memset(w, 0, sizeof *w);
  uint64_t d = rng_below(r, 100);
  w->kind = d < 30   ? WIN_ALL
            : d < 72 ? WIN_CUT
            : d < 80 ? WIN_EMPTY
            : d < 87 ? WIN_NULL
                     : WIN_AWAY;
  w->pad = rng_chance(r, 0.5);
  w->streamless = shi == slo;
  if (w->streamless && (w->kind == WIN_CUT || w->kind == WIN_ALL))
    w->kind = WIN_AWAY; /* no streams to cut */
  switch (w->kind) {
  case WIN_ALL:
  case WIN_NULL:
    w->lo = floor_to(slo, LINE);
    w->lo -= rng_chance(r, 0.3) ? floor_to(rng_below(r, w->lo + 1), LINE) : 0;
    w->hi = shi + (rng_chance(r, 0.3) ? rng_below(r, 300) : 0);
    break;
  case WIN_CUT: {
    uint64_t a =
        rng_chance(r, 0.5) ? stream_edge(r, k, t0, t1) : rng_range(r, slo, shi);
    uint64_t b =
        rng_chance(r, 0.6) ? stream_edge(r, k, t0, t1) : rng_range(r, slo, shi);
    if (a > b) {
      uint64_t x = a;
      a = b;
      b = x;
    }
    /* the line below a, or the one above (cutting the stream at a) */
    w->lo = rng_chance(r, 0.5) ? floor_to(a, LINE) : ceil_to(a, LINE);
    w->hi = rng_chance(r, 0.15) ? shi : b;
    break;
  }
  case WIN_EMPTY:
    w->lo = w->hi = floor_to(rng_below(r, end + 1), LINE);
    break;
  default: /* WIN_AWAY */
    w->lo = floor_to(rng_below(r, end + 1), LINE);
    w->hi = rng_range(r, w->lo, end);
  }
  if (w->hi > end)
    w->hi = end;
  if (w->lo > w->hi)
    w->lo = floor_to(w->hi, LINE);
}

/* The device copy of the window: garbage, then shadow bytes [lo, hi) (and
 * the pad when w->pad) at staged = mem + LINE. */
static void stage_window(const kcase *k, window *w) {
  if (w->kind == WIN_NULL)
    return;
  const uint64_t span = w->hi - w->lo + IBP_STAGED_PAD;
  const size_t size = (size_t)ceil_to(LINE + span + 2 * LINE, LINE);
  w->mem = aligned_alloc(LINE, size);
  CHECK(w->mem != NULL);
  memset(w->mem, GARBAGE, size);
  uint64_t to = w->pad ? w->hi + IBP_STAGED_PAD : w->hi;
  if (to > k->packed_bytes)
    to = k->packed_bytes;
  memcpy(w->mem + LINE, k->packed + w->lo, to - w->lo);
  w->staged = w->mem + LINE;
}

/* ---- expected PCIe ------------------------------------------------------- */

static uint64_t sectors(uintptr_t a, uintptr_t b) {
  return b > a ? (ceil_to(b, SECTOR) - floor_to(a, SECTOR)) / SECTOR : 0;
}

/* 512-byte steps of a warp reading host bytes [a, b). */
static uint64_t steps(uintptr_t a, uintptr_t b) {
  return b > a ? (b - floor_to(a, LINE) + 511) / 512 : 0;
}

/* What 16-byte pieces read byte by byte (those at an edge of the readable
 * range [ok_lo, ok_hi)) may add to the sectors of host reads [a, b): a
 * request per byte, and their lane's later reads out of step with the
 * rest of the warp until the next warp collective (one more sector per
 * step; `more` steps after this read before that collective). */
static uint64_t edge_slack(uintptr_t a, uintptr_t b, uintptr_t ok_lo,
                           uintptr_t ok_hi, uint64_t more) {
  unsigned edges = (floor_to(a, 16) < ok_lo) + (ceil_to(b, 16) > ok_hi);
  return edges * (16 + steps(a, b) + more);
}

/* What a block decode of a tensor of R bytes may read twice: per round
 * (at least IBP_KERNEL_ROUND_STEPS x 512 bytes of the tensor), the sector
 * its fit bits share with the last round's, the one its payload shares
 * with the last round's, and the one where the fit bits end and the
 * payload begins. */
static uint64_t block_slack(uint64_t R) {
  return 3 * ((R + 512 * IBP_KERNEL_ROUND_STEPS - 1) /
              (512 * IBP_KERNEL_ROUND_STEPS));
}

/* The host stream of unit t, 0 when none (raw, or staged). */
static int host_stream(const kcase *k, const window *w, uint64_t t) {
  if (!decoded(k, t))
    return 0;
  const uint64_t s = k->offsets[t], e = s + k->lengths[t];
  return !(w->staged && s >= w->lo && e <= w->hi);
}

static void tally(const kcase *k, uint64_t off, uint64_t len, const window *w,
                  expect *x) {
  const uint64_t R = k->R, g1 = off + len;
  const uintptr_t orig = (uintptr_t)k->orig, packed = (uintptr_t)k->packed;
  uint64_t t0, t1;
  copy_units(k, off, len, &t0, &t1);
  memset(x, 0, sizeof *x);
  for (uint64_t t = t0; t <= t1; t++) {
    const uint64_t start = t * R, size = t < k->n ? R : k->tail;
    const uint64_t lo = off > start ? off : start;
    const uint64_t hi = g1 < start + size ? g1 : start + size;
    if (!decoded(k, t)) { /* copied raw from the original */
      x->raw += sectors(orig + lo, orig + hi);
      x->raw_slack +=
          edge_slack(orig + lo, orig + hi, orig, orig + k->bytes, 0);
      continue;
    }
    const uint64_t s = k->offsets[t], e = s + k->lengths[t];
    x->decoded++;
    if (!host_stream(k, w, t)) {
      x->staged++;
      x->whole += ceil_to(packed + s, SECTOR) + SECTOR <= packed + e;
      continue;
    }
    x->straddling += w->kind != WIN_NULL &&
                     ((s < w->lo && e > w->lo) || (s < w->hi && e > w->hi));
    /* a fetch is followed by the next tensor's (prefetch) before the
     * lanes meet again */
    const uint64_t u = t + 1;
    const uint64_t more = u <= t1 && host_stream(k, w, u)
                              ? steps(packed + k->offsets[u],
                                      packed + k->offsets[u] + k->lengths[u])
                              : 0;
    x->host += sectors(packed + s, packed + e) +
               edge_slack(packed + s, packed + e, packed, UINTPTR_MAX, more);
    if (R >= IBP_KERNEL_BLOCK_R) /* a block decode (ibp_kernels.h) */
      x->host += block_slack(R);
  }
}

/* ---- launches ------------------------------------------------------------ */

/* The launch of k's copy [off, off+len) to dst as kcase_run plans it. */
static void plan_copy(const kcase *k, uint64_t off, uint64_t len, uint8_t *dst,
                      ibp_decompress_args *a, ibp_kernel_plan *plan) {
  const uint64_t R = k->R;
  kcase_template(k, a);
  a->first_tensor = off / R < k->n ? off / R : k->n;
  a->first_offset = (uint32_t)(off - a->first_tensor * R);
  a->length = len;
  a->dst = dst;
  /* 1 to 16 warps per block, as the zero-copy and the staged launches
   * use them (IBP_STAGED_WARPS) */
  const unsigned warps = 1u << ((off / 64 + len) % 5);
  CHECK(ibp_kernels_plan_decompress_warps(a, 227 * 1024, 4, warps, plan) == 0);
  if (k->walk) {
    a->walk = k->walk;
    uint64_t t0, t1;
    copy_units(k, off, len, &t0, &t1);
    uint64_t walks = (t1 - t0 + 1 + a->walk - 1) / a->walk;
    plan->grid =
        (unsigned)((walks + plan->block / 32 - 1) / (plan->block / 32));
  }
  if (k->grid_cap && plan->grid > k->grid_cap)
    plan->grid = k->grid_cap;
}

/* Runs the copy (with window w, or none) into a guarded buffer and checks
 * every byte of it and of the guards; returns the launch's PCIe counts. */
static simt_pcie run_copy(const kcase *k, uint64_t off, uint64_t len,
                          const window *w, uint64_t seed) {
  uint8_t *buf = xmalloc(len + 2 * GUARD);
  memset(buf, POISON, len + 2 * GUARD);
  ibp_decompress_args a;
  ibp_kernel_plan plan;
  plan_copy(k, off, len, buf + GUARD, &a, &plan);
  if (w) {
    a.staged = w->staged;
    a.staged_lo = w->lo;
    a.staged_hi = w->hi;
  }
  /* the window is unpinned memory, which strict host reads reject */
  simt_set_strict_host_reads(!(w && w->staged));
  simt_host_register(k->packed, k->packed_bytes);
  simt_host_register(k->orig, k->bytes);
  simt_launch l = {ibp_emu_entry(IBP_KERNEL_DECOMPRESS),
                   &a,
                   {plan.grid, 1, 1},
                   {plan.block, 1, 1},
                   plan.dynamic_shared};
  simt_pcie pcie = {0};
  char err[512] = "";
  simt_set_seed(seed);
  int rc = simt_run(&l, &pcie, err, sizeof err);
  simt_host_unregister(k->packed);
  simt_host_unregister(k->orig);
  simt_set_strict_host_reads(1);
  const char *what = w ? "staged launch" : "launch without a window";
  CHECKF(rc == 0, "%s: emulator: %s", what, err);
  CHECK_MEM(buf + GUARD, k->orig + off, len, what);
  for (unsigned i = 0; i < GUARD; i++)
    CHECKF(buf[i] == POISON && buf[GUARD + len + i] == POISON,
           "%s wrote a guard byte (%u before or after the copy)", what, i);
  free(buf);
  return pcie;
}

/* ---- checks -------------------------------------------------------------- */

static void check_pcie(const expect *x, const simt_pcie *base,
                       const simt_pcie *st, totals *tot) {
  CHECKF(st->sectors <= base->sectors,
         "staged: %llu sectors over PCIe, without the window %llu",
         (unsigned long long)st->sectors, (unsigned long long)base->sectors);
  if (x->whole) {
    CHECKF(st->sectors < base->sectors,
           "%u staged streams hold a whole sector, yet %llu sectors over "
           "PCIe as without the window",
           x->whole, (unsigned long long)st->sectors);
    tot->fewer++;
  }
  CHECKF(st->sectors >= x->raw,
         "staged: %llu sectors over PCIe, the raw copies alone need %llu",
         (unsigned long long)st->sectors, (unsigned long long)x->raw);
  CHECKF(st->sectors <= x->raw + x->raw_slack + x->host,
         "staged: %llu sectors over PCIe, more than the raw copies (%llu + "
         "%llu) and the %u unstaged streams (%llu)",
         (unsigned long long)st->sectors, (unsigned long long)x->raw,
         (unsigned long long)x->raw_slack, x->decoded - x->staged,
         (unsigned long long)x->host);
  if (x->staged == x->decoded) { /* nothing compressed crosses PCIe */
    CHECKF(st->sectors <= x->raw + x->raw_slack,
           "every decoded stream staged, yet %llu sectors over PCIe for "
           "%llu (+ %llu) of raw copies",
           (unsigned long long)st->sectors, (unsigned long long)x->raw,
           (unsigned long long)x->raw_slack);
    tot->full += x->decoded > 0;
    tot->exact += x->decoded > 0 && x->raw_slack == 0;
  }
}

static void one_case(uint64_t i, totals *tot) {
  rng r;
  test_iteration(&r, i);
  kcase_shape s;
  shape_for(&r, &s, i % 2);
  kcase k;
  kcase_build(&k, &r, &s);
  uint64_t off, len, t0, t1;
  kcase_pick_range(&r, &k, &off, &len);
  copy_units(&k, off, len, &t0, &t1);
  k.grid_cap = rng_chance(&r, 0.5) ? 1 : 0;
  k.walk = rng_chance(&r, 0.5) ? (unsigned)rng_range(&r, 1, s.n + 2) : 0;
  window w;
  pick_window(&r, &k, t0, t1, &w);
  test_case("R=%u c=%u n=%llu tail=%llu misalign=%u/%u data=%s mask=%s "
            "dirty=%.1f K=%u adjacent=%d copy [%llu, +%llu) grid_cap=%u "
            "walk=%u window %s [%llu, %llu) of %llu, pad %s",
            s.R, s.c, (unsigned long long)s.n, (unsigned long long)s.tail,
            s.orig_misalign, s.packed_misalign,
            data_kind_name((data_kind)s.data_kind),
            mask_kind_name((mask_kind)s.mask_kind), s.dirty_share, s.clusters,
            s.adjacent, (unsigned long long)off, (unsigned long long)len,
            k.grid_cap, k.walk, win_names[w.kind], (unsigned long long)w.lo,
            (unsigned long long)w.hi, (unsigned long long)k.packed_bytes,
            w.pad ? "copied" : "garbage");
  stage_window(&k, &w);
  const uint64_t seed = rng_next(&r) | 1;
  simt_pcie base = run_copy(&k, off, len, NULL, seed);
  simt_pcie st = run_copy(&k, off, len, &w, seed);
  expect x;
  tally(&k, off, len, &w, &x);
  check_pcie(&x, &base, &st, tot);
  tot->cases++;
  tot->kinds[w.kind]++;
  tot->streamless += w.streamless;
  tot->straddling += x.straddling;
  tot->staged += x.staged;
  tot->bytes += len;
  tot->base_sectors += base.sectors;
  tot->staged_sectors += st.sectors;
  free(w.mem);
  kcase_free(&k);
}

int main(void) {
  uint64_t iters = test_begin("test_kernel_staged", 2000);
  CHECK(ibp_emu_entry(IBP_KERNEL_DECOMPRESS) != NULL);
  totals tot = {0};
  for (uint64_t i = 0; i < iters; i++)
    one_case(i, &tot);
  /* the adversarial shapes must have come up */
  if (iters >= 500)
    CHECK(tot.straddling > 0 && tot.fewer > 0 && tot.full > 0);
#define U(x) ((unsigned long long)(x))
  printf("test_kernel_staged: %llu cases (all %llu, cut %llu, empty %llu, "
         "null %llu, away %llu; %llu copies all raw), %llu streams staged, "
         "%llu straddling an edge, %llu fully staged (%llu: exactly the raw "
         "reads), %llu strictly fewer sectors; %llu bytes, %llu -> %llu "
         "sectors over PCIe, 0 mismatches\n",
         U(tot.cases), U(tot.kinds[WIN_ALL]), U(tot.kinds[WIN_CUT]),
         U(tot.kinds[WIN_EMPTY]), U(tot.kinds[WIN_NULL]),
         U(tot.kinds[WIN_AWAY]), U(tot.streamless), U(tot.staged),
         U(tot.straddling), U(tot.full), U(tot.exact), U(tot.fewer),
         U(tot.bytes), U(tot.base_sectors), U(tot.staged_sectors));
#undef U
  return test_end();
}
