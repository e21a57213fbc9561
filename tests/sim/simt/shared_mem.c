/*
 * Shared memory of the running block.  Dynamic shared memory is one
 * allocation per launch; each static __shared__ declaration gets its own
 * allocation the first time a thread asks for it (keyed by the address of a
 * per-declaration static object), so ASan puts redzones around every array.
 * At each block start all of it is filled with the poison byte: a kernel
 * that reads shared memory before writing it sees 0xCD, not the previous
 * block's data.
 */
#include "simt_internal.h"

#include <stdlib.h>
#include <string.h>

/* CUDA aligns shared arrays to at least 16 bytes; we give 128. */
#define SHARED_ALIGN 128

static unsigned char *alloc_shared(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, SHARED_ALIGN, bytes ? bytes : 1) != 0)
    return NULL;
  return p;
}

int simt__shmem_init(struct simt_shmem *m, size_t dyn_bytes) {
  memset(m, 0, sizeof *m);
  m->dyn_bytes = dyn_bytes;
  m->dyn = alloc_shared(dyn_bytes);
  return m->dyn ? 0 : -1;
}

void simt__shmem_block_start(struct simt_shmem *m) {
  memset(m->dyn, SIMT_POISON, m->dyn_bytes);
  for (unsigned i = 0; i < m->nst; i++)
    memset(m->st[i].mem, SIMT_POISON, m->st[i].bytes);
}

void simt__shmem_free(struct simt_shmem *m) {
  for (unsigned i = 0; i < m->nst; i++)
    free(m->st[i].mem);
  free(m->st);
  free(m->dyn);
  memset(m, 0, sizeof *m);
}

int simt__shmem_contains(const struct simt_shmem *m, const void *p,
                         size_t bytes) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t d = (uintptr_t)m->dyn;
  if (a >= d && a - d <= m->dyn_bytes && bytes <= m->dyn_bytes - (a - d))
    return 1;
  for (unsigned i = 0; i < m->nst; i++) {
    uintptr_t s = (uintptr_t)m->st[i].mem;
    if (a >= s && a - s <= m->st[i].bytes && bytes <= m->st[i].bytes - (a - s))
      return 1;
  }
  return 0;
}

void *simt_dynamic_shared(void) {
  return simt__self()->run->shm.dyn;
}

static void *add_static(struct simt_fiber *f, const void *key, size_t bytes) {
  struct simt_shmem *m = &f->run->shm;
  if (bytes > SIMT_MAX_SHARED - m->dyn_bytes - m->st_bytes)
    simt__fail(f,
               "static shared array of %zu bytes: the block would use more "
               "than %u bytes of shared memory (dynamic %zu, static %zu)",
               bytes, SIMT_MAX_SHARED, m->dyn_bytes, m->st_bytes);
  if (m->nst == m->cap) {
    unsigned cap = m->cap ? m->cap * 2 : 8;
    struct simt_static_shared *n = realloc(m->st, cap * sizeof *n);
    if (!n)
      simt__fail(f, "out of memory for static shared memory");
    m->st = n;
    m->cap = cap;
  }
  unsigned char *mem = alloc_shared(bytes);
  if (!mem)
    simt__fail(f, "out of memory for static shared memory");
  memset(mem, SIMT_POISON, bytes);
  m->st[m->nst++] = (struct simt_static_shared){key, mem, bytes};
  m->st_bytes += bytes;
  return mem;
}

void *simt_static_shared(const void *key, size_t bytes) {
  struct simt_fiber *f = simt__self();
  struct simt_shmem *m = &f->run->shm;
  for (unsigned i = 0; i < m->nst; i++) {
    if (m->st[i].key != key)
      continue;
    if (m->st[i].bytes != bytes)
      simt__fail(f,
                 "static shared array %p asked for with %zu bytes, "
                 "first with %zu",
                 key, bytes, m->st[i].bytes);
    return m->st[i].mem;
  }
  return add_static(f, key, bytes);
}
