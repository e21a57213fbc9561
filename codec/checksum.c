/* The container's checksum, by version (docs/FORMAT.md §7, §8): XXH64
 * with seed 0 (libxxhash) from version 3 on, the legacy hash
 * (hash_legacy.c) for versions 1 and 2. */
#include "internal.h"

void ibp__hash_init(ibp__hash *h, uint32_t version) {
  memset(h, 0, sizeof *h);
  h->legacy = version < 3;
  if (h->legacy)
    ibp__legacy_hash_init(&h->old);
  else
    XXH64_reset(&h->xxh, 0);
}

void ibp__hash_update(ibp__hash *h, const void *data, size_t len) {
  if (h->legacy)
    ibp__legacy_hash_update(&h->old, data, len);
  else if (len)
    XXH64_update(&h->xxh, data, len);
}

uint64_t ibp__hash_final(const ibp__hash *h) {
  return h->legacy ? ibp__legacy_hash_final(&h->old) : XXH64_digest(&h->xxh);
}
