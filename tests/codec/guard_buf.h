/*
 * Guarded buffers: memory whose end abuts a PROT_NONE page, so that a read
 * or write one byte past a span placed at the end faults even without ASan.
 */
#ifndef IBP_TEST_GUARD_BUF_H
#define IBP_TEST_GUARD_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct guard_buf {
  uint8_t *map; /* whole mapping: data pages + one guard page */
  size_t map_len;
  size_t cap; /* usable bytes before the guard page */
} guard_buf;

/* Maps at least `cap` usable bytes (fails the test on error). */
void guard_init(guard_buf *g, size_t cap);
void guard_free(guard_buf *g);
/* Start of a span of `len` (<= cap) bytes that ends at the guard page. */
uint8_t *guard_tail(const guard_buf *g, size_t len);
/* Copies len bytes to the end of the buffer and returns where they are. */
uint8_t *guard_place(const guard_buf *g, const void *src, size_t len);

#endif /* IBP_TEST_GUARD_BUF_H */
