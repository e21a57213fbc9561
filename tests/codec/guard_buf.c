/* Guarded buffers (see guard_buf.h). */
#include "guard_buf.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"

void guard_init(guard_buf *g, size_t cap) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t data = (cap + page - 1) / page * page;
  if (data == 0)
    data = page;
  g->map_len = data + page;
  void *m = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECKF(m != MAP_FAILED, "mmap of %zu bytes failed", g->map_len);
  g->map = m;
  g->cap = data;
  CHECKF(mprotect(g->map + data, page, PROT_NONE) == 0, "mprotect failed");
}

void guard_free(guard_buf *g) {
  if (g->map)
    munmap(g->map, g->map_len);
  g->map = NULL;
}

uint8_t *guard_tail(const guard_buf *g, size_t len) {
  CHECKF(len <= g->cap, "guard buffer too small: %zu > %zu", len, g->cap);
  return g->map + g->cap - len;
}

uint8_t *guard_place(const guard_buf *g, const void *src, size_t len) {
  uint8_t *p = guard_tail(g, len);
  if (len)
    memcpy(p, src, len);
  return p;
}
