/*
 * The exponent stage (docs/FORMAT.md §9) against a bit-by-bit reference
 * written from the format text:
 *
 *   - random regions of every dtype (bf16, f16, f32), tensor sizes of 1 ..
 *     ~700 values (odd counts included) and now and then up to 8192 values
 *     (many segments), every chunk width, K = 1 .. 5
 *     clusters with random Masks fitted to the stage (or, in some clusters
 *     of a K > 1 region, the stage off: kind 0, a Mask not fitted to any
 *     field, the cluster's tensors IBP alone's), segment sizes 2^4 ..
 *     2^10 values, data with all-equal exponents, uniformly random bits,
 *     float-like values, and float-like values with rare outliers; stages
 *     learned on a part of the region only, so unseen fields take the
 *     escape;
 *   - every tensor: the library's stored bytes equal the reference's
 *     (IBP stream of the stripped tensor + segment lengths + canonical
 *     codes, MSB of each code first), decode gives the tensor back, the
 *     parsed length agrees; the whole region (compress, measure, ranges,
 *     packed offsets) and a version-4 container round-trip;
 *   - iterations alternate the portable and BMI2 paths of the IBP part;
 *   - damaged streams (bit flips, truncation) and damaged descriptors
 *     return a status, never read or write out of bounds (run under ASan);
 *     nonzero padding, an IBP part that carries a value's field, and a
 *     segment length one more or one less than its codes' bits, are
 *     rejected;
 *   - the stage's size on a tensor of dyadic field shares: the entropy, to
 *     a few bits (check_dyadic_size).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "ibp/container.h"
#include "ibp/stage.h"
#include "test_util.h"

#define MAX_K 5

/* ---- the reference ------------------------------------------------------- */

typedef struct ref_dtype {
  uint32_t bytes, lo, bits;
} ref_dtype;

static ref_dtype ref_dtype_of(uint32_t dtype) {
  switch (dtype) {
  case IBP_DTYPE_BF16:
    return (ref_dtype){2, 7, 9};
  case IBP_DTYPE_F16:
    return (ref_dtype){2, 10, 6};
  default:
    return (ref_dtype){4, 23, 9};
  }
}

static uint32_t ref_field(const uint8_t *t, uint32_t j, ref_dtype d) {
  uint32_t v = 0;
  for (uint32_t b = 0; b < d.bytes; b++)
    v |= (uint32_t)t[j * d.bytes + b] << (8 * b);
  return v >> d.lo;
}

/* Canonical codes (RFC 1951 §3.2.2 style) from the lengths. */
static void ref_codes(const ibp_stage *st, uint32_t *code) {
  uint32_t count[16] = {0}, next[16] = {0}, c = 0;
  for (uint32_t s = 0; s <= st->symbols; s++)
    count[st->lengths[s]]++;
  count[0] = 0;
  for (uint32_t l = 1; l < 16; l++) {
    c = (c + count[l - 1]) << 1;
    next[l] = c;
  }
  for (uint32_t s = 0; s <= st->symbols; s++)
    if (st->lengths[s])
      code[s] = next[st->lengths[s]]++;
}

static void put_msb(uint8_t *out, uint64_t *pos, uint32_t code, uint32_t len) {
  for (uint32_t i = len; i-- > 0;)
    ref_put_bit(out, (*pos)++, (code >> i) & 1);
}

static void put_lsb(uint8_t *out, uint64_t *pos, uint64_t v, uint32_t len) {
  for (uint32_t i = 0; i < len; i++)
    ref_put_bit(out, (*pos)++, (v >> i) & 1);
}

/* Bits the reference writes for value field f (0: cannot be sent). */
static uint32_t ref_len(const ibp_stage *st, uint32_t f, ref_dtype d) {
  if (st->lengths[f])
    return st->lengths[f];
  return st->lengths[st->symbols] ? st->lengths[st->symbols] + d.bits : 0;
}

static uint32_t ref_width(const ibp_stage *st, uint32_t values, ref_dtype d) {
  uint32_t worst = 0;
  for (uint32_t s = 0; s <= st->symbols; s++)
    if (st->lengths[s] > worst)
      worst = st->lengths[s];
  if (st->lengths[st->symbols] && st->lengths[st->symbols] + d.bits > worst)
    worst = st->lengths[st->symbols] + d.bits;
  uint32_t seg = 1u << st->segment_log2;
  uint64_t most = (uint64_t)(values < seg ? values : seg) * worst;
  uint32_t w = 1;
  while ((most >> w) != 0)
    w++;
  return w;
}

/* The bits of the stream ref_stage_store made last (its end bit), and
 * where its segment lengths start, their width and the segments. */
static uint64_t ref_stream_bits, ref_lengths_bit;
static uint32_t ref_length_bits, ref_segments;

/* The stored form of t per the format: returns its length (R = raw).
 * carry < R / value bytes: a corrupt stream instead, whose IBP part codes
 * value `carry` with its field's bits (FORMAT.md §9: IBP codes the tensor
 * with the field zeroed); 0 where the Mask is the field alone (no chunk of
 * the IBP part can hold them). */
static size_t ref_stage_store(const fixture *f, const ibp_stage *st,
                              const uint8_t *t, uint8_t *slot, uint32_t carry) {
  const uint32_t R = f->R;
  if (st->kind == IBP_STAGE_NONE) { /* a stage-off cluster: IBP alone (§9.2) */
    int compressed;
    return ref_store(&f->ref, t, slot, &compressed);
  }
  ref_dtype d = ref_dtype_of(st->dtype);
  uint8_t *stripped = xmalloc(R);
  uint8_t *out = xcalloc(ref_stream_capacity(&f->ref) + 16 * (size_t)R + 64);
  for (uint32_t b = 0; b < R; b++) {
    uint32_t pos = b % d.bytes, fm = ((1u << d.bits) - 1) << d.lo;
    stripped[b] =
        b / d.bytes == carry ? t[b] : (uint8_t)(t[b] & ~(fm >> (8 * pos)));
  }
  uint64_t pos = 0;
  ref_encode(&f->ref, stripped, out, &pos);
  int omit = 1; /* Mask = the field exactly: the bitmap is left out */
  for (uint32_t b = 0; b < R; b++) {
    uint32_t fm = ((1u << d.bits) - 1) << d.lo;
    omit &= f->mask[b] == (uint8_t)(fm >> (8 * (b % d.bytes)));
  }
  if (omit && carry < R / d.bytes) {
    free(stripped);
    free(out);
    return 0;
  }
  if (omit) {
    uint64_t nch = ref_nchunks(&f->ref);
    for (uint64_t i = nch; i < pos; i++)
      ref_put_bit(out, i - nch, ref_get_bit(out, i));
    pos -= nch;
    for (uint64_t i = pos; i < pos + nch; i++)
      ref_put_bit(out, i, 0);
  }
  uint32_t code[IBP_STAGE_MAX_SYMBOLS + 1] = {0};
  ref_codes(st, code);
  const uint32_t values = R / d.bytes, V = 1u << st->segment_log2;
  const uint32_t S = (values + V - 1) / V, W = ref_width(st, values, d);
  int sendable = 1;
  ref_lengths_bit = pos;
  ref_length_bits = W;
  ref_segments = S;
  for (uint32_t s = 0; s + 1 < S; s++) {
    uint64_t len = 0;
    for (uint32_t j = s * V; j < (s + 1) * V; j++)
      len += ref_len(st, ref_field(t, j, d), d);
    put_lsb(out, &pos, len, W);
  }
  for (uint32_t j = 0; j < values; j++) {
    uint32_t fl = ref_field(t, j, d);
    if (st->lengths[fl]) {
      put_msb(out, &pos, code[fl], st->lengths[fl]);
    } else if (st->lengths[st->symbols]) {
      put_msb(out, &pos, code[st->symbols], st->lengths[st->symbols]);
      put_lsb(out, &pos, fl, d.bits);
    } else {
      sendable = 0;
    }
  }
  size_t len = (size_t)((pos + 7) / 8);
  ref_stream_bits = pos;
  if (!sendable || len >= R) {
    memcpy(slot, t, R);
    len = R;
  } else {
    memcpy(slot, out, len);
  }
  free(stripped);
  free(out);
  return len;
}

/* ---- data ---------------------------------------------------------------- */

enum { SD_EQUAL, SD_RANDOM, SD_FLOAT, SD_OUTLIERS, SD_KINDS };

static void gen_values(rng *r, uint8_t *data, uint64_t bytes, ref_dtype d,
                       int kind) {
  rng_fill(r, data, bytes);
  if (kind == SD_RANDOM)
    return;
  uint32_t fixed = (uint32_t)rng_below(r, 1u << d.bits);
  uint32_t centre = (uint32_t)rng_below(r, 1u << (d.bits - 1));
  for (uint64_t j = 0; j + d.bytes <= bytes; j += d.bytes) {
    uint32_t f = fixed;
    if (kind != SD_EQUAL) {
      uint32_t sign = (uint32_t)rng_below(r, 2) << (d.bits - 1);
      uint32_t e = centre;
      while (e > 0 && rng_chance(r, 0.5))
        e--;
      f = sign | e;
      if (kind == SD_OUTLIERS && rng_chance(r, 0.02))
        f = (uint32_t)rng_below(r, 1u << d.bits);
    }
    uint32_t v = 0;
    for (uint32_t b = 0; b < d.bytes; b++)
      v |= (uint32_t)data[j + b] << (8 * b);
    v = (v & ((1u << d.lo) - 1)) | f << d.lo;
    for (uint32_t b = 0; b < d.bytes; b++)
      data[j + b] = (uint8_t)(v >> (8 * b));
  }
}

/* ---- one region ---------------------------------------------------------- */

typedef struct sregion {
  uint32_t R, c, k, dtype;
  uint64_t n, bytes;
  uint8_t *data;
  fixture f[MAX_K];
  ibp_params p[MAX_K];
  ibp_stage *st; /* k */
} sregion;

static void make_region(rng *r, sregion *g) {
  static const uint32_t dtypes[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                    IBP_DTYPE_F32};
  g->dtype = dtypes[rng_below(r, 3)];
  ref_dtype d = ref_dtype_of(g->dtype);
  /* few values, up to a few hundred, and now and then tensors of many
   * segments (a libibp region's 4 KiB to 16 KiB) */
  uint32_t values = rng_chance(r, 0.2)    ? (uint32_t)rng_range(r, 1, 9)
                    : rng_chance(r, 0.05) ? rng_log_uniform(r, 700, 8192)
                                          : rng_log_uniform(r, 1, 700);
  g->R = values * d.bytes;
  g->c = rng_chunk(r);
  g->k = rng_chance(r, 0.5) ? 1 : (uint32_t)rng_range(r, 2, MAX_K);
  g->n = rng_chance(r, 0.1) ? 1 : rng_range(r, 1, 40);
  g->bytes = g->n * g->R + rng_below(r, g->R);
  g->data = xmalloc(g->bytes + 1);
  int kind = (int)rng_below(r, SD_KINDS);
  gen_values(r, g->data, g->bytes, d, kind);
  g->st = xcalloc(g->k * sizeof *g->st);
  /* with K > 1, now and then clusters with the stage off (docs/FORMAT.md
   * §9.2, kind 0: IBP alone, their pairs not fitted to any field); cluster
   * 0 keeps it, so the container is version 4 */
  uint8_t off[MAX_K] = {0};
  for (uint32_t c = 1; c < g->k && rng_chance(r, 0.5); c++)
    off[c] = rng_chance(r, 0.6);
  test_case("R=%u c=%u k=%u n=%llu dtype=%s data=%d off=%u%u%u%u%u", g->R, g->c,
            g->k, (unsigned long long)g->n, ibp_dtype_name(g->dtype), kind,
            off[0], off[1], off[2], off[3], off[4]);
  for (uint32_t c = 0; c < g->k; c++) {
    CHECK_OK(ibp_stage_init(&g->st[c], IBP_STAGE_EXP, g->dtype, 0, g->R));
    fixture_init(&g->f[c], g->R, g->c);
    int only_field = rng_chance(r, 0.3);
    for (uint32_t b = 0; b < g->R; b++) {
      g->f[c].mask[b] = only_field ? 0 : (uint8_t)(rng_next(r) & rng_next(r));
      g->f[c].bitval[b] = (uint8_t)(rng_next(r) & g->f[c].mask[b]);
      if (rng_chance(r, 0.5)) { /* a likely Bitval: the data's own bits */
        uint8_t x = g->data[(rng_below(r, g->n) * g->R) + b];
        g->f[c].bitval[b] = x & g->f[c].mask[b];
      }
    }
    uint8_t *field = xcalloc(g->R);
    if (!off[c])
      ibp_stage_field(&g->st[c], field, g->R);
    for (uint32_t b = 0; b < g->R; b++) {
      g->f[c].mask[b] |= field[b];
      g->f[c].bitval[b] &= (uint8_t)~field[b];
    }
    free(field);
    fixture_commit(&g->f[c]);
    g->p[c] = g->f[c].lib;
    if (!off[c])
      CHECK_OK(ibp_stage_check_params(&g->st[c], &g->p[c]));
  }
  /* learn on a part of the tensors (unseen fields take the escape) */
  uint64_t learn = rng_range(r, 1, g->n);
  CHECK_OK(ibp_stage_learn(g->p, g->k, IBP_STAGE_EXP, g->dtype, g->data, learn,
                           0, 1, g->st));
  for (uint32_t c = 0; c < g->k; c++)
    g->st[c].segment_log2 = (uint32_t)rng_range(r, 4, 10);
  for (uint32_t c = 0; c < g->k; c++)
    if (off[c])
      CHECK_OK(
          ibp_stage_init(&g->st[c], IBP_STAGE_NONE, IBP_DTYPE_NONE, 0, g->R));
}

static void free_region(sregion *g) {
  for (uint32_t c = 0; c < g->k; c++)
    fixture_free(&g->f[c]);
  free(g->st);
  free(g->data);
}

/* Damages a copy of a stream: decoding returns a status, in bounds. */
static void damage(rng *r, const sregion *g, uint32_t id, const uint8_t *s,
                   size_t len) {
  uint8_t *bad = xmalloc(len);
  uint8_t *out = xmalloc(g->R);
  memcpy(bad, s, len);
  bad[rng_below(r, len)] ^= (uint8_t)(1u << rng_below(r, 8));
  size_t cut = rng_below(r, len + 1), got;
  (void)ibp_decompress_tensor_staged(&g->p[id], &g->st[id], bad, len, 1, out);
  (void)ibp_compressed_length_staged(&g->p[id], &g->st[id], bad, len, &got);
  uint8_t *shorter = xmalloc(cut ? cut : 1);
  memcpy(shorter, s, cut);
  if (cut < len)
    CHECK(ibp_decompress_tensor_staged(&g->p[id], &g->st[id], shorter, cut, 1,
                                       out) != IBP_OK);
  free(shorter);
  free(bad);
  free(out);
}

/* Sets each padding bit of a stream of `bits` bits (its last byte's bits
 * from bit `bits` on), one at a time: a reader rejects nonzero padding
 * (docs/FORMAT.md §9.1 step 3). */
static void padding(const sregion *g, uint32_t id, const uint8_t *s, size_t len,
                    uint64_t bits) {
  uint8_t *bad = xmalloc(len), *out = xmalloc(g->R);
  CHECK_U64((bits + 7) / 8, len);
  for (uint32_t b = (uint32_t)(bits & 7); b && b < 8; b++) {
    memcpy(bad, s, len);
    bad[len - 1] |= (uint8_t)(1u << b);
    CHECKF(ibp_decompress_tensor_staged(&g->p[id], &g->st[id], bad, len, 1,
                                        out) != IBP_OK,
           "a stream of %llu bits with padding bit %u set decodes",
           (unsigned long long)bits, b);
  }
  free(bad);
  free(out);
}

/* Each stored segment length of a stream one more and one less (where its
 * W bits hold that), the codes as they are: a reader rejects it
 * (docs/FORMAT.md §9.3: a segment must end where its length says; the
 * device decoder finds each segment's first code from the lengths alone,
 * so a reader that took such a stream would decode it otherwise than the
 * GPU -- a mutant that dropped the check passed every stage, container
 * and replay test; only the fuzzer's CPU-device agreement caught it). */
static uint64_t lengths_checked; /* such streams tried */

static void wrong_lengths(const sregion *g, uint32_t id, const uint8_t *s,
                          size_t len) {
  const uint64_t at = ref_lengths_bit;
  const uint32_t W = ref_length_bits, S = ref_segments;
  uint8_t *bad = xmalloc(len), *out = xmalloc(g->R);
  for (uint32_t k = 0; k + 1 < S; k++) {
    const uint64_t b0 = at + (uint64_t)k * W;
    uint64_t v = 0;
    for (uint32_t i = 0; i < W; i++)
      v |= (uint64_t)ref_get_bit(s, b0 + i) << i;
    for (int d = -1; d <= 1; d += 2) {
      const uint64_t w = v + (uint64_t)(int64_t)d;
      if ((d < 0 && v == 0) || (W < 64 && (w >> W) != 0))
        continue;
      memcpy(bad, s, len);
      for (uint32_t i = 0; i < W; i++)
        ref_put_bit(bad, b0 + i, (uint32_t)(w >> i) & 1u);
      CHECKF(ibp_decompress_tensor_staged(&g->p[id], &g->st[id], bad, len, 1,
                                          out) == IBP_ERR_CORRUPT,
             "a stream whose segment %u says %llu bits, not %llu, decodes", k,
             (unsigned long long)w, (unsigned long long)v);
      lengths_checked++;
    }
  }
  free(bad);
  free(out);
}

/* A stream whose IBP part carries the field of one value of t whose field
 * is not 0 (its chunk stored whole), the stage part coding t's fields as
 * always: the IBP part decodes to t with that field in, the stage would OR
 * the same bits in -- the right tensor from a stream no writer makes.  A
 * reader rejects it (codec/stage.c: the IBP part's field must be 0; a
 * mutant that dropped that check passed every stage, container, analyze
 * and fuzz test). */
static uint64_t carried_checked; /* such streams tried */

static void field_carried(const sregion *g, uint32_t id, const uint8_t *t) {
  const ref_dtype d = ref_dtype_of(g->dtype);
  uint32_t v = 0;
  while (v < g->R / d.bytes && ref_field(t, v, d) == 0)
    v++;
  if (v == g->R / d.bytes)
    return; /* every field 0: nothing to carry */
  uint8_t *bad = xmalloc(g->R), *out = xmalloc(g->R);
  size_t len = ref_stage_store(&g->f[id], &g->st[id], t, bad, v);
  if (len > 0 && len < g->R) { /* (0: no bitmap; R: stored raw) */
    CHECKF(ibp_decompress_tensor_staged(&g->p[id], &g->st[id], bad, len, 1,
                                        out) == IBP_ERR_CORRUPT,
           "a stream whose IBP part carries value %u's field decodes", v);
    carried_checked++;
  }
  free(bad);
  free(out);
}

static void check_tensors(rng *r, const sregion *g) {
  uint8_t *slot = xmalloc(g->R), *want = xmalloc(g->R), *out = xmalloc(g->R);
  for (uint64_t i = 0; i < g->n; i++) {
    const uint8_t *t = g->data + i * g->R;
    size_t stored;
    uint32_t id = 0;
    size_t least = SIZE_MAX;
    for (uint32_t c = 0; c < g->k; c++) { /* the writer's choice */
      size_t len = ibp_compressed_size_staged(&g->p[c], &g->st[c], t);
      if (len < least) {
        least = len;
        id = c;
      }
    }
    int compressed;
    stored =
        ibp_compress_tensor_staged(&g->p[id], &g->st[id], t, slot, &compressed);
    size_t ref = ref_stage_store(&g->f[id], &g->st[id], t, want, UINT32_MAX);
    const uint64_t bits = ref_stream_bits;
    CHECK_U64(stored, ref);
    CHECK_U64(stored, least);
    CHECK_MEM(slot, want, stored, "stored bytes vs reference");
    CHECK_U64(compressed, stored < g->R);
    CHECK_OK(ibp_decompress_tensor_staged(&g->p[id], &g->st[id], slot, stored,
                                          compressed, out));
    CHECK_MEM(out, t, g->R, "decoded tensor");
    if (compressed) {
      size_t len = 0;
      CHECK_OK(ibp_compressed_length_staged(&g->p[id], &g->st[id], slot, stored,
                                            &len));
      CHECK_U64(len, stored);
      damage(r, g, id, slot, stored);
      if (g->st[id].kind != IBP_STAGE_NONE) {
        padding(g, id, slot, stored, bits);
        wrong_lengths(g, id, slot, stored);
        field_carried(g, id, t);
      }
    }
  }
  free(slot);
  free(want);
  free(out);
}

static int write_mem(void *ctx, uint64_t offset, const void *buf, size_t len) {
  memcpy((uint8_t *)ctx + offset, buf, len);
  return 0;
}

typedef struct cmp_ctx {
  const uint8_t *want;
  uint64_t bytes;
  int bad;
} cmp_ctx;

static int compare_out(void *ctx, uint64_t offset, const void *buf,
                       size_t len) {
  cmp_ctx *c = ctx;
  if (offset + len > c->bytes || memcmp(c->want + offset, buf, len) != 0)
    c->bad = 1;
  return 0;
}

static void check_region(rng *r, const sregion *g) {
  uint8_t *slots = xmalloc(g->bytes + 1), *out = xmalloc(g->bytes + 1);
  uint8_t *flags = xcalloc(g->n / 8 + 1);
  uint8_t *ids = xcalloc(ibp_cluster_id_bytes(g->k, g->n) + 1);
  ibp_region_summary sum, meas;
  CHECK_OK(ibp_compress_region_staged(g->p, g->st, g->k, g->data, g->bytes,
                                      slots, flags, ids, 2, &sum));
  CHECK_OK(ibp_measure_region_staged(g->p, g->st, g->k, g->data, g->bytes, 1,
                                     &meas));
  CHECK_U64(meas.compressed_bytes, sum.compressed_bytes);
  CHECK_U64(sum.metadata_bytes, ibp_cluster_metadata_bytes(g->k, g->R, g->n) +
                                    ibp_stage_metadata_bytes(g->st, g->k));
  ibp_region reg = {g->p, slots, g->bytes, flags};
  CHECK_OK(
      ibp_decompress_range_staged(&reg, ids, g->k, g->st, 0, g->bytes, out));
  CHECK_MEM(out, g->data, g->bytes, "region");
  uint64_t off = rng_below(r, g->bytes + 1);
  uint64_t len = rng_below(r, g->bytes - off + 1);
  CHECK_OK(ibp_decompress_range_staged(&reg, ids, g->k, g->st, off, len, out));
  CHECK_MEM(out, g->data + off, len, "range");
  uint64_t *offsets = xmalloc((g->n + 1) * sizeof *offsets);
  CHECK_OK(ibp_region_pack_offsets_staged(&reg, ids, g->k, g->st, offsets));
  CHECK_U64(offsets[g->n] + g->bytes % g->R,
            sum.compressed_bytes - (g->n - sum.tensors_compressed) * g->R);
  free(offsets);
  /* the container */
  uint64_t cap = 128 + g->k * (2ull * g->R + IBP_STAGE_DESCRIPTOR_MAX_BYTES) +
                 2 * g->n + g->bytes + 64;
  uint8_t *file = xcalloc(cap);
  ibp_container_info info, read;
  CHECK_OK(ibp_container_write_staged(g->p, g->st, g->k, g->data, g->bytes, 2,
                                      write_mem, file, &info));
  CHECK_U64(info.version, IBP_FORMAT_VERSION);
  CHECK_U64(info.container_bytes,
            128 + sum.metadata_bytes + sum.compressed_bytes);
  CHECK_OK(ibp_container_read_info(file, info.container_bytes, &read));
  CHECK_U64(read.stage_bytes, info.stage_bytes);
  cmp_ctx cc = {g->data, g->bytes, 0};
  CHECK_OK(ibp_container_decode(file, info.container_bytes, compare_out, &cc));
  CHECK(!cc.bad);
  /* a damaged container: any status, in bounds */
  for (int t = 0; t < 4; t++) {
    uint8_t *bad = xmalloc(info.container_bytes);
    memcpy(bad, file, info.container_bytes);
    bad[rng_below(r, info.container_bytes)] ^= (uint8_t)(1u << rng_below(r, 8));
    (void)ibp_container_decode(bad, info.container_bytes, NULL, NULL);
    free(bad);
  }
  free(file);
  free(slots);
  free(out);
  free(flags);
  free(ids);
}

/* A descriptor read back equals the one written; damaged ones are refused
 * or read as some valid table. */
static void check_descriptor(rng *r, const sregion *g) {
  uint8_t d[IBP_STAGE_DESCRIPTOR_MAX_BYTES];
  size_t n = ibp_stage_descriptor_bytes(&g->st[0]), used = 0;
  ibp_stage back;
  ibp_stage_write(&g->st[0], d);
  CHECK_OK(ibp_stage_read(&back, d, n, g->R, &used));
  CHECK_U64(used, n);
  CHECK_MEM(back.lengths, g->st[0].lengths, sizeof back.lengths, "lengths");
  CHECK(ibp_stage_read(&back, d, n - 1, g->R, &used) != IBP_OK);
  if (g->st[0].kind == IBP_STAGE_EXP) { /* docs/FORMAT.md §9.2, §9.3 */
    const size_t nb = (g->st[0].symbols + 2) / 2; /* 2^e + 1 nibbles: odd */
    d[3 + nb - 1] |= 0x10;                        /* the unused nibble */
    CHECK(ibp_stage_read(&back, d, n, g->R, &used) != IBP_OK);
    memset(d + 3, 0, nb); /* three codes of 1 bit: a Kraft sum of 1.5 */
    d[3] = 0x11;
    d[4] = 0x01;
    CHECK(ibp_stage_read(&back, d, n, g->R, &used) != IBP_OK);
    ibp_stage_write(&g->st[0], d);
  }
  d[rng_below(r, n)] ^= (uint8_t)(1u << rng_below(r, 8));
  (void)ibp_stage_read(&back, d, n, g->R, &used);
}

/* The stage's size pinned on one bf16 tensor whose field distribution is
 * dyadic, so that a Huffman code reaches its entropy exactly: of N = 4096
 * values, 2048 share one field (p = 1/2: a 1-bit code), 128 fields take 8
 * values each (p = 2^-9: 9 bits) and 256 fields 4 each (p = 2^-10: 10 bits; the
 * rarest share a writer still gives a code of its own, docs/FORMAT.md
 * §9.3 "Code").  H = 1/2 * 1 + 1/4 * 9 +
 * 1/4 * 10 = 5.25 bits a value, 21504 bits of codes; the escape (weight 1,
 * never sent) takes some code space, a few bits of one rare field's codes
 * at most -- the tolerance, N / 256 bits.  The Mask is the field alone: the
 * IBP part is the 7 mantissa bits of every value, no bitmap; the segment
 * lengths (S - 1 of W bits) as the format writes them.  A writer that sent
 * the rarer fields as escapes (a threshold of 2^-7 instead of 2^-10: 1 +
 * 9 bits for half the values, 5.5 bits a value) misses the bound by 1024
 * bits; so do other lengths than the entropy's. */
static void check_dyadic_size(void) {
  enum { N = 4096, R = 2 * N, L = 8 };
  const ref_dtype d = ref_dtype_of(IBP_DTYPE_BF16);
  rng r;
  rng_seed(&r, 0x5eed);
  uint16_t *t = xmalloc(R);
  uint32_t at = 0;
  for (uint32_t i = 0; i < N / 2; i++)
    t[at++] = 120;
  for (uint32_t f = 0; f < 128; f++)
    for (uint32_t i = 0; i < 8; i++)
      t[at++] = (uint16_t)(121 + f);
  for (uint32_t f = 0; f < 256; f++)
    for (uint32_t i = 0; i < 4; i++)
      t[at++] = (uint16_t)(256 + f);
  CHECK_U64(at, N);
  for (uint32_t i = N - 1; i > 0; i--) { /* shuffled, random mantissas */
    uint32_t j = (uint32_t)rng_below(&r, i + 1), x = t[i];
    t[i] = t[j];
    t[j] = (uint16_t)x;
  }
  for (uint32_t i = 0; i < N; i++)
    t[i] = (uint16_t)(t[i] << d.lo | (rng_next(&r) & ((1u << d.lo) - 1)));
  test_case("a dyadic bf16 tensor of %u values, segments of 2^%u", N, L);
  ibp_stage st;
  CHECK_OK(ibp_stage_init(&st, IBP_STAGE_EXP, IBP_DTYPE_BF16, L, R));
  ibp_stage_count(&st, t, R);
  CHECK_OK(ibp_stage_finish(&st));
  fixture f;
  fixture_init(&f, R, 1);
  ibp_stage_field(&st, f.mask, R);
  fixture_commit(&f);
  const uint64_t S = N >> L, W = ref_width(&st, N, d);
  const uint64_t fixed = (uint64_t)N * d.lo + (S - 1) * W;
  const uint64_t entropy = N / 2 * 1 + N / 4 * 9 + N / 4 * 10;
  const uint64_t bytes = ibp_compressed_size_staged(&f.lib, &st, t);
  printf("test_stage: a dyadic bf16 tensor of %u values: %llu bytes; "
         "entropy bound %llu bits of codes + %llu others (W=%llu)\n",
         N, (unsigned long long)bytes, (unsigned long long)entropy,
         (unsigned long long)fixed, (unsigned long long)W);
  CHECKF(8 * bytes >= fixed + entropy,
         "%llu bytes: under the entropy (the arithmetic above is wrong)",
         (unsigned long long)bytes);
  CHECKF(8 * bytes < fixed + entropy + N / 256 + 8,
         "%llu bytes: the code misses the entropy by %lld bits",
         (unsigned long long)bytes,
         (long long)(8 * bytes) - (long long)(fixed + entropy));
  /* and the lengths themselves */
  CHECK_U64(st.lengths[120], 1);
  for (uint32_t f9 = 121; f9 < 121 + 128; f9++)
    CHECK_U64(st.lengths[f9], 9);
  fixture_free(&f);
  free(t);
}

int main(void) {
  uint64_t iterations = test_begin("test_stage", 3000);
  check_dyadic_size();
  for (uint64_t i = 0; i < iterations; i++) {
    rng r;
    sregion g;
    test_iteration(&r, i);
    /* both CPU paths of the IBP part (portable tables, BMI2) */
    if (ibp_impl_available(IBP_IMPL_BMI2))
      CHECK_OK(ibp_impl_select(i % 2 ? IBP_IMPL_BMI2 : IBP_IMPL_PORTABLE));
    memset(&g, 0, sizeof g);
    make_region(&r, &g);
    check_tensors(&r, &g);
    check_region(&r, &g);
    check_descriptor(&r, &g);
    free_region(&g);
  }
  printf("test_stage: %llu streams whose IBP part carries a field, "
         "rejected\n",
         (unsigned long long)carried_checked);
  if (iterations >= 100)
    CHECK(carried_checked > 0);
  printf("test_stage: %llu streams with a segment length one off, "
         "rejected\n",
         (unsigned long long)lengths_checked);
  if (iterations >= 100)
    CHECK(lengths_checked > 0);
  /* arguments that do not fit */
  ibp_stage st;
  CHECK(ibp_stage_init(&st, IBP_STAGE_EXP, IBP_DTYPE_F32, 0, 6) != IBP_OK);
  CHECK(ibp_stage_init(&st, IBP_STAGE_EXP, IBP_DTYPE_BF16, 3, 8) != IBP_OK);
  CHECK(ibp_stage_init(&st, 7, IBP_DTYPE_BF16, 0, 8) != IBP_OK);
  return test_end();
}
