/* What the exponent stage's device decoder needs of one cluster's stage
 * (docs/FORMAT.md §9.3, §9.6): its decode table as the codec derived it
 * and the per-region numbers a lane must not work out per tensor. */
#include <string.h>

#include "ibp/stage.h"
#include "ibp_kernels.h"

_Static_assert(IBP_KERNEL_STAGE_TABLE == 1u << IBP_STAGE_MAX_CODE_BITS,
               "one table entry per IBP_STAGE_MAX_CODE_BITS-bit peek");
_Static_assert(sizeof(ibp_kernel_stage) % 16 == 0, "16-byte aligned array");

/* Value bytes (what 0), field bits (1) or the field's lowest bit (2) of a
 * dtype (docs/FORMAT.md §9.3), 0 for none or unknown; from the list alone
 * (no codec code linked). */
static uint32_t dtype_info(uint32_t dtype, int what) {
  switch (dtype) {
#define IBP_KSTAGE_INFO_(name, value, text, b, l, n)                           \
  case value:                                                                  \
    return what == 1 ? n : what == 2 ? l : b;
    IBP_DTYPE_LIST(IBP_KSTAGE_INFO_)
#undef IBP_KSTAGE_INFO_
  default:
    return 0;
  }
}

/* W of §9.3: the bit width of min(V, n) * worst, worst the longest code or
 * the escape's length + e. */
static uint32_t length_bits(const ibp_stage *st, uint32_t values, uint32_t e) {
  uint32_t worst = 0;
  for (uint32_t s = 0; s <= st->symbols; s++)
    if (st->lengths[s] > worst)
      worst = st->lengths[s];
  const uint32_t esc = st->lengths[st->symbols];
  if (esc && esc + e > worst)
    worst = esc + e;
  const uint32_t seg = 1u << st->segment_log2;
  const uint64_t most = (uint64_t)(values < seg ? values : seg) * worst;
  uint32_t w = 1;
  while (w < 63 && (most >> w) != 0)
    w++;
  return w;
}

/* The field's lowest bit within its value's top 16 bits (bf16 and f16: the
 * value's own; f32: less 16): where a table entry holds it. */
static uint32_t field_lo16(uint32_t dtype) {
  const uint32_t lo = dtype_info(dtype, 2);
  return lo >= 16 ? lo - 16 : lo;
}

/* The codec's decode table (symbol | code length << 10, 0: no code) as the
 * device decoder reads it (ibp_kernel_stage.table): the field in place
 * (bits lo16 up) | IBP_KERNEL_STAGE_ESC for the escape | the bits the step
 * moves on (an escape's its code's and the raw field's together, so a
 * count steps over a code in one add; 1 where no code starts, so a lane's
 * decode from a bit that starts no code, or a corrupt stream's, moves
 * on). */
static void device_table(const ibp_stage *st, uint32_t e, uint16_t *out) {
  const uint32_t lo16 = field_lo16(st->dtype);
  for (uint32_t i = 0; i < IBP_KERNEL_STAGE_TABLE; i++) {
    const uint32_t s = st->decode[i] & 0x3FFu, l = st->decode[i] >> 10;
    if (l == 0)
      out[i] = 1;
    else if (s == st->symbols)
      out[i] = (uint16_t)(IBP_KERNEL_STAGE_ESC | (l + e));
    else
      out[i] = (uint16_t)(s << lo16 | l);
  }
}

/* The count table (ibp_kernel_stage.counts): per value of the next 11
 * stream bits, the codes that start in them and end in them (an escape's
 * code, its raw field wherever it ends: the last one) as steps of the
 * single-code table would step over them one by one -- their count << 16
 * | bit 5 + o for each that starts at bit o | the bits they take.  The
 * first code is always taken (a bit that starts no code: one bit); a
 * later one only where its code lies whole in the 11 bits (the prefix
 * property: then no bit past them changes it), never one that starts no
 * code. */
static void count_table(const ibp_stage *st, const uint16_t *table,
                        uint32_t *out) {
  const uint32_t n = IBP_STAGE_MAX_CODE_BITS;
  for (uint32_t i = 0; i < IBP_KERNEL_STAGE_TABLE; i++) {
    uint32_t at = 0, count = 0, starts = 0;
    while (at < n) {
      const uint32_t d = st->decode[(i >> at) & (IBP_KERNEL_STAGE_TABLE - 1)];
      const uint32_t code = d >> 10, t = table[(i >> at)];
      if (at > 0 && (code == 0 || code > n - at))
        break; /* not whole in the 11 bits (or no code): the next step's */
      count++;
      starts |= 1u << (5 + at);
      at += t & IBP_KERNEL_STAGE_BITS;
      if (t & IBP_KERNEL_STAGE_ESC)
        break; /* its raw field: not codes */
    }
    out[i] = count << 16 | starts | at;
  }
}

int ibp_kernels_stage_exp(const ibp_stage *st, const uint8_t *mask,
                          uint32_t tensor_bytes, ibp_kernel_stage *out) {
  memset(out, 0, sizeof *out);
  if (!st || st->kind == IBP_STAGE_NONE)
    return 0;
  const uint32_t vb = dtype_info(st->dtype, 0), e = dtype_info(st->dtype, 1);
  if (st->kind != IBP_STAGE_EXP || vb == 0 || e == 0 ||
      tensor_bytes % vb != 0 || st->symbols != 1u << e ||
      st->segment_log2 < IBP_STAGE_SEGMENT_LOG2_MIN ||
      st->segment_log2 > IBP_STAGE_SEGMENT_LOG2_MAX)
    return -1;
  const uint32_t w = length_bits(st, tensor_bytes / vb, e);
  if (w > 32)
    return -1;
  device_table(st, e, out->table);
  count_table(st, out->table, out->counts);
  out->dtype = st->dtype;
  out->segment_log2 = st->segment_log2;
  out->length_bits = w;
  out->values = tensor_bytes / vb;
  /* the Mask is the field (the codec's test, codec/stage.c): no bitmap */
  const uint32_t lo = dtype_info(st->dtype, 2);
  const uint32_t fm = ((1u << e) - 1) << lo;
  out->no_bitmap = mask != NULL;
  for (uint32_t b = 0; mask && b < tensor_bytes; b++)
    if (mask[b] != (uint8_t)(fm >> (8 * (b % vb))))
      out->no_bitmap = 0;
  return 0;
}
