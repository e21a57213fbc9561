/* The checksum of container versions 1 and 2 (docs/FORMAT.md §7, §8): four
 * multiply-rotate lanes over 32-byte blocks, then a final avalanche.  It is
 * not XXH64 (no input gives the same value); version 3 uses XXH64
 * (checksum.c), and this code only verifies older containers. */
#include "internal.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL

static inline uint64_t rotl(uint64_t x, unsigned r) {
  return (x << r) | (x >> (64 - r));
}

static inline uint64_t lane_step(uint64_t lane, uint64_t w) {
  return rotl(lane + w * P2, 31) * P1;
}

static inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

void ibp__legacy_hash_init(ibp__legacy_hash *h) {
  *h = (ibp__legacy_hash){{P1 + P2, P2, 0, 0 - P1}, {0}, 0, 0};
}

static void block(ibp__legacy_hash *h, const uint8_t *p) {
  for (int i = 0; i < 4; i++)
    h->lane[i] = lane_step(h->lane[i], ibp__load64(p + 8 * i));
}

void ibp__legacy_hash_update(ibp__legacy_hash *h, const void *data,
                             size_t len) {
  const uint8_t *p = data;
  h->total += len;
  if (h->buffered) {
    size_t take = 32 - h->buffered < len ? 32 - h->buffered : len;
    memcpy(h->buf + h->buffered, p, take);
    h->buffered += (unsigned)take;
    p += take;
    len -= take;
    if (h->buffered < 32)
      return;
    block(h, h->buf);
    h->buffered = 0;
  }
  for (; len >= 32; p += 32, len -= 32)
    block(h, p);
  memcpy(h->buf, p, len);
  h->buffered = (unsigned)len;
}

uint64_t ibp__legacy_hash_final(const ibp__legacy_hash *h) {
  uint64_t acc = rotl(h->lane[0], 1) + rotl(h->lane[1], 7) +
                 rotl(h->lane[2], 12) + rotl(h->lane[3], 18);
  for (int i = 0; i < 4; i++)
    acc = (acc ^ lane_step(0, h->lane[i])) * P1 + P3;
  acc += h->total;
  for (unsigned i = 0; i < h->buffered; i++)
    acc = rotl(acc ^ (h->buf[i] * P3), 11) * P1;
  return avalanche(acc);
}
