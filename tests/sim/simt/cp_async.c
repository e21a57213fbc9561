/*
 * cp.async: each thread keeps a queue of its copies in issue order, tagged
 * with the group they were committed in.  At issue the source is read (so
 * host-read checks and PCIe accounting happen there) and the destination is
 * poisoned; the bytes land only at the cp.async wait that retires their
 * group, so a kernel that reads its staging buffer too early reads poison.
 */
#include "simt_internal.h"

#include <stdlib.h>
#include <string.h>

unsigned simt__cpa_pending(const struct simt_fiber *f) {
  return f->cpa.len - f->cpa.head;
}

void simt__cpa_free(struct simt_cpa_queue *q) {
  free(q->q);
  q->q = NULL;
  q->head = q->len = q->cap = 0;
}

static struct simt_cpa *push(struct simt_fiber *f) {
  struct simt_cpa_queue *q = &f->cpa;
  if (q->head == q->len)
    q->head = q->len = 0;
  if (q->len == q->cap) {
    unsigned cap = q->cap ? q->cap * 2 : 16;
    struct simt_cpa *n = realloc(q->q, cap * sizeof *n);
    if (!n)
      simt__fail(f, "out of memory queueing cp.async copies");
    q->q = n;
    q->cap = cap;
  }
  return &q->q[q->len++];
}

static void check_copy(struct simt_fiber *f, void *dst, const void *src,
                       unsigned cp_bytes, unsigned src_bytes) {
  if (cp_bytes != 4 && cp_bytes != 8 && cp_bytes != 16)
    simt__fail(f, "cp.async of %u bytes (4, 8 or 16 allowed)", cp_bytes);
  if (src_bytes > cp_bytes)
    simt__fail(f, "cp.async reads %u source bytes of a %u-byte copy", src_bytes,
               cp_bytes);
  if ((uintptr_t)dst % cp_bytes || (uintptr_t)src % cp_bytes)
    simt__fail(f, "cp.async of %u bytes from %p to %p is misaligned", cp_bytes,
               src, dst);
  if (!simt__shmem_contains(&f->run->shm, dst, cp_bytes))
    simt__fail(f, "cp.async destination %p is not in shared memory", dst);
}

void simt_cp_async(void *smem_dst, const void *src, unsigned cp_bytes,
                   unsigned src_bytes) {
  struct simt_fiber *f = simt__self();
  check_copy(f, smem_dst, src, cp_bytes, src_bytes);
  int host = simt__host_check(f, (uintptr_t)src, src_bytes);
  struct simt_cpa *c = push(f);
  c->dst = smem_dst;
  c->group = f->cpa.committed;
  c->bytes = (uint8_t)cp_bytes;
  memset(c->data, 0, sizeof c->data);
  if (src_bytes)
    memcpy(c->data, src, src_bytes);
  if (host)
    simt__pcie_record(f, (uintptr_t)src, src_bytes);
  memset(smem_dst, SIMT_POISON, cp_bytes);
}

void simt_cp_async_commit(void) {
  simt__self()->cpa.committed++;
}

void simt_cp_async_wait(unsigned n) {
  struct simt_cpa_queue *q = &simt__self()->cpa;
  /* Groups with id < limit retire; for n == 0 the open group does too. */
  uint64_t limit = n == 0 ? (uint64_t)q->committed + 1
                          : (q->committed >= n ? q->committed - n : 0);
  while (q->head < q->len && q->q[q->head].group < limit) {
    const struct simt_cpa *c = &q->q[q->head++];
    memcpy(c->dst, c->data, c->bytes);
  }
}
