/* Kernel test cases (kcase.h). */
#include "kcase.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gen_data.h"
#include "ibp/stage.h"

#define PAGE 4096u

static uint8_t *host_alloc(uint64_t bytes, unsigned misalign, uint8_t **mem) {
  size_t size = (bytes + misalign + 2 * PAGE) & ~(size_t)(PAGE - 1);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(p != MAP_FAILED);
  *mem = p;
  return (uint8_t *)p + misalign;
}

static void host_free(uint8_t *mem, uint64_t bytes, unsigned misalign) {
  munmap(mem, (bytes + misalign + 2 * PAGE) & ~(size_t)(PAGE - 1));
}

static uint32_t *bits32(uint64_t n) {
  return xcalloc(((n + 31) / 32 + 1) * sizeof(uint32_t));
}

static void set_bit(uint32_t *b, uint64_t i) {
  b[i / 32] |= 1u << (i % 32);
}

static int get_bit(const uint32_t *b, uint64_t i) {
  return b && ((b[i / 32] >> (i % 32)) & 1);
}

void kcase_plan(kcase *k) {
  const uint32_t K = k->clusters > 1 ? k->clusters : 1;
  const uint32_t stride = (k->R + 15) & ~15u;
  free(k->plan);
  k->plan_stages = ibp_kernels_plan_stages(k->mask, stride, K, k->R, k->c);
  k->plan = xmalloc(ibp_kernels_plan_bytes(k->R, K, k->plan_stages));
  CHECK(ibp_kernels_decode_plan(k->mask, k->bitval, stride, K, k->R, k->c,
                                k->plan_stages, k->plan) == 0);
}

void kcase_compress(kcase *k) {
  const uint64_t n = k->n;
  if (k->packed_mem)
    host_free(k->packed_mem, k->packed_bytes, k->packed_misalign);
  free(k->offsets);
  const uint32_t K = k->clusters > 1 ? k->clusters : 1;
  const ibp_params *p = K > 1 ? k->cl : &k->params;
  uint8_t *slots = xmalloc(k->bytes + 1);
  uint8_t *flags8 = xcalloc(ibp_region_flag_bytes(p, k->bytes) + 1);
  uint64_t id_bytes = ibp_cluster_id_bytes(K, n);
  uint8_t *ids8 = xcalloc((id_bytes + 3) / 4 * 4 + 4);
  ibp_region_summary sum;
  if (k->stages)
    CHECK_OK(ibp_compress_region_staged(p, k->stages, K, k->orig, k->bytes,
                                        slots, flags8, ids8, 1, &sum));
  else
    CHECK_OK(ibp_compress_region_clustered(p, K, k->orig, k->bytes, slots,
                                           flags8, ids8, 1, &sum));
  k->compressed_bytes = sum.compressed_bytes;
  ibp_region reg = {p, slots, k->bytes, flags8};
  k->offsets = xmalloc((n + 1) * sizeof *k->offsets);
  if (k->stages)
    CHECK_OK(ibp_region_pack_offsets_staged(&reg, K > 1 ? ids8 : NULL, K,
                                            k->stages, k->offsets));
  else
    CHECK_OK(ibp_region_pack_offsets_clustered(&reg, K > 1 ? ids8 : NULL, K,
                                               k->offsets));
  k->packed_bytes = k->offsets[n];
  k->packed = host_alloc(k->packed_bytes, k->packed_misalign, &k->packed_mem);
  CHECK_OK(ibp_region_pack(&reg, k->offsets, k->packed));
  free(k->lengths);
  k->lengths = xcalloc((n + 1) * sizeof *k->lengths);
  for (uint64_t i = 0; i < n; i++)
    k->lengths[i] = (uint32_t)(k->offsets[i + 1] - k->offsets[i]);
  free(k->flags);
  k->flags = bits32(n);
  for (uint64_t i = 0; i < n; i++)
    if ((flags8[i / 8] >> (i % 8)) & 1)
      set_bit(k->flags, i);
  free(flags8);
  free(slots);
  free(k->ids);
  k->ids = NULL;
  kcase_plan(k);
  free(k->kstages);
  k->kstages = NULL;
  if (k->stages) {
    const uint32_t stride = (k->R + 15) & ~15u;
    k->kstages = xmalloc(K * sizeof *k->kstages);
    for (uint32_t c = 0; c < K; c++)
      CHECK(ibp_kernels_stage_exp(&k->stages[c], k->mask + (size_t)c * stride,
                                  k->R, &k->kstages[c]) == 0);
  }
  if (K > 1)
    k->ids = (uint32_t *)ids8; /* little-endian: the same bits as words */
  else
    free(ids8);
}

/* Moves some streams elsewhere, as libibp's recompression does with a
 * stream that outgrew its place: to the end of a larger buffer, after
 * random gaps, their old bytes garbage.  Streams are no longer all
 * adjacent, and a kernel that assumed so would read the wrong bytes. */
static void relocate(kcase *k, rng *r) {
  uint64_t cap = 2 * k->packed_bytes + 64 * k->n + 64, top = k->packed_bytes;
  uint8_t *mem, *buf = host_alloc(cap, k->packed_misalign, &mem);
  memcpy(buf, k->packed, k->packed_bytes);
  for (uint64_t i = 0; i < k->n; i++) {
    if (!k->lengths[i] || !rng_chance(r, 0.3))
      continue;
    top += rng_below(r, 40);
    memcpy(buf + top, buf + k->offsets[i], k->lengths[i]);
    rng_fill(r, buf + k->offsets[i], k->lengths[i]);
    k->offsets[i] = top;
    top += k->lengths[i];
  }
  host_free(k->packed_mem, k->packed_bytes, k->packed_misalign);
  k->packed_mem = mem;
  k->packed = buf;
  k->packed_bytes = cap;
}

void kcase_build(kcase *k, rng *r, const kcase_shape *s) {
  memset(k, 0, sizeof *k);
  k->R = s->R;
  k->c = s->c;
  k->n = s->n;
  k->tail = s->tail;
  k->bytes = s->n * s->R + s->tail;
  k->orig_misalign = s->orig_misalign;
  k->packed_misalign = s->packed_misalign;
  k->orig = host_alloc(k->bytes, s->orig_misalign, &k->orig_mem);
  gen_data(r, (data_kind)s->data_kind, s->R, s->n, k->orig);
  rng_fill(r, k->orig + s->n * s->R, s->tail);

  const uint32_t stride = (s->R + 15) & ~15u, K = s->clusters ? s->clusters : 1;
  CHECK(K <= KCASE_MAX_CLUSTERS);
  k->clusters = K;
  k->mask = xcalloc((size_t)K * stride + 16);
  k->bitval = xcalloc((size_t)K * stride + 16);
  gen_masks(r, (mask_kind)s->mask_kind, s->R, s->c, k->orig, s->n, k->mask,
            k->bitval);
  CHECK_OK(ibp_params_from_masks(s->R, s->c, k->mask, k->bitval, &k->params));
  for (uint32_t c = 0; K > 1 && c < K; c++) {
    uint8_t *m = k->mask + (size_t)c * stride,
            *v = k->bitval + (size_t)c * stride;
    if (c > 0) /* each cluster its own kind of mask, over its own tensors */
      gen_masks(r, (mask_kind)rng_below(r, MASK_KINDS), s->R, s->c,
                k->orig + rng_below(r, s->n) * s->R, 1, m, v);
    CHECK_OK(ibp_params_from_masks(s->R, s->c, m, v, &k->cl[c]));
  }
  kcase_compress(k);
  if (!s->adjacent && rng_chance(r, 0.3))
    relocate(k, r);

  if (s->dirty_share > 0) {
    k->dirty = bits32(s->n);
    k->busy = bits32(s->n);
    for (uint64_t i = 0; i < s->n; i++)
      if (rng_chance(r, s->dirty_share))
        set_bit(rng_chance(r, 0.5) ? k->dirty : k->busy, i);
  }
  /* the kernel must serve dirty and busy tensors from the original */
  for (uint64_t i = 0; i < s->n; i++)
    if (get_bit(k->dirty, i) || get_bit(k->busy, i))
      rng_fill(r, k->packed + k->offsets[i], k->lengths[i]);
}

void kcase_free(kcase *k) {
  host_free(k->orig_mem, k->bytes, k->orig_misalign);
  if (k->packed_mem)
    host_free(k->packed_mem, k->packed_bytes, k->packed_misalign);
  free(k->offsets);
  free(k->lengths);
  free(k->flags);
  free(k->dirty);
  free(k->busy);
  free(k->mask);
  free(k->bitval);
  free(k->plan);
  free(k->ids);
  free(k->kstages);
  ibp_params_free(&k->params);
  for (uint32_t c = 0; c < KCASE_MAX_CLUSTERS; c++)
    ibp_params_free(&k->cl[c]);
  memset(k, 0, sizeof *k);
}

uint32_t kcase_stored(const kcase *k, uint64_t i) {
  return get_bit(k->flags, i) ? k->lengths[i] : k->R;
}

void kcase_template(const kcase *k, ibp_decompress_args *out) {
  ibp_decompress_args a = {0};
  a.packed = k->packed;
  a.original = k->orig;
  a.offsets = k->offsets;
  a.lengths = k->lengths;
  a.flags = k->flags;
  a.dirty = k->dirty;
  a.busy = k->busy;
  a.plan = (const uint8_t *)k->plan;
  a.plan_stages = k->plan_stages;
  a.clusters = k->clusters;
  a.cluster_ids = k->ids;
  a.tensors = k->n;
  a.tensor_bytes = k->R;
  a.chunk_bytes = k->c;
  a.tail_bytes = (uint32_t)k->tail;
  a.stages = k->kstages;
  *out = a;
}

int kcase_run(const kcase *k, simt_entry entry, uint64_t off, uint64_t len,
              uint64_t packed_end, simt_pcie *pcie, uint64_t *mismatch,
              char *err, size_t errlen) {
  const uint64_t R = k->R;
  ibp_decompress_args a;
  kcase_template(k, &a);
  a.first_tensor = off / R < k->n ? off / R : k->n;
  a.first_offset = (uint32_t)(off - a.first_tensor * R);
  a.length = len;
  uint8_t *dst_mem = xmalloc(len + 32);
  uint8_t *dst = (uint8_t *)(((uintptr_t)dst_mem + 15) & ~(uintptr_t)15) +
                 k->dst_misalign % 16;
  a.dst = dst;
  ibp_kernel_plan plan;
  CHECK(ibp_kernels_plan_decompress(&a, 227 * 1024, 4, &plan) == 0);
  if (k->walk) { /* the kernel must be right for any walk length */
    a.walk = k->walk;
    uint64_t units = (len ? (off + len - 1) / R : off / R) + 1 - a.first_tensor;
    if (units > k->n + 1 - a.first_tensor)
      units = k->n + 1 - a.first_tensor;
    uint64_t walks = (units + a.walk - 1) / a.walk;
    plan.grid = (unsigned)((walks + plan.block / 32 - 1) / (plan.block / 32));
  }
  if (k->grid_cap && plan.grid > k->grid_cap)
    plan.grid = k->grid_cap;
  /* the kernel reads device memory with plain loads only: any host read
   * outside the pinned ranges is a bug */
  simt_set_strict_host_reads(1);
  if (packed_end)
    simt_host_register(k->packed, packed_end);
  simt_host_register(k->orig, k->bytes);
  simt_launch l = {
      entry, &a, {plan.grid, 1, 1}, {plan.block, 1, 1}, plan.dynamic_shared};
  int rc = simt_run(&l, pcie, err, errlen);
  if (packed_end)
    simt_host_unregister(k->packed);
  simt_host_unregister(k->orig);
  *mismatch = 0;
  for (uint64_t i = 0; rc == 0 && i < len; i++)
    if (dst[i] != k->orig[off + i]) {
      *mismatch = i + 1;
      break;
    }
  free(dst_mem);
  return rc;
}

void kcase_pick_range(rng *r, const kcase *k, uint64_t *off, uint64_t *len) {
  switch (rng_below(r, 4)) {
  case 0: /* the whole region */
    *off = 0;
    *len = k->bytes;
    break;
  case 1: { /* whole tensors */
    uint64_t a = rng_below(r, k->n), b = rng_range(r, a, k->n - 1);
    *off = a * k->R;
    *len = (b - a + 1) * k->R;
    break;
  }
  case 2: /* one byte */
    *off = rng_below(r, k->bytes);
    *len = 1;
    break;
  default: /* anything */
    *off = rng_below(r, k->bytes);
    *len = rng_range(r, 1, k->bytes - *off);
  }
}

void kcase_random_shape(rng *r, kcase_shape *s, uint64_t most_tensors) {
  memset(s, 0, sizeof *s);
  s->R = rng_log_uniform(r, 1, 65536);
  s->c = rng_chunk(r);
  uint64_t max_n = 262144 / s->R;
  s->n = 1 + rng_below(r, max_n < most_tensors ? max_n + 1 : most_tensors);
  s->tail = rng_chance(r, 0.3) ? rng_below(r, s->R) : 0;
  int aligned = rng_chance(r, 0.3);
  s->orig_misalign = aligned ? 0 : (unsigned)rng_below(r, 128);
  s->packed_misalign = aligned ? 0 : (unsigned)rng_below(r, 128);
  s->data_kind = (int)rng_below(r, DATA_KINDS);
  s->mask_kind = (int)rng_below(r, MASK_KINDS);
}
