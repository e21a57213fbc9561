/*
 * libFuzzer target: the container reader.  ibp_container_read_info and
 * ibp_container_decode on arbitrary bytes must return a status without
 * reading outside the input; what they accept must be self-consistent:
 * decode succeeds only where read_info does, its writes come in order and
 * cover exactly original_bytes, and the sizes in the info fit the input.
 * Version 1 (one Mask/Bitval) and version 2 (clusters: K pairs and a
 * cluster id per tensor) containers are both in the seed corpus, which
 * predates version 3 (version 2's layout for any K, XXH64 checksums);
 * gen_corpus writes version 3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp/container.h"

#define FUZZ_ASSERT(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz_container: %s:%d: %s\n", __FILE__, __LINE__,       \
              #cond);                                                          \
      abort();                                                                 \
    }                                                                          \
  } while (0)

typedef struct order {
  uint64_t next, limit;
  uint8_t sink;
} order;

static int check_write(void *ctx, uint64_t offset, const void *buf,
                       size_t len) {
  order *o = ctx;
  FUZZ_ASSERT(offset == o->next);
  FUZZ_ASSERT(len <= o->limit - offset);
  const volatile uint8_t *b = buf; /* touch every byte: ASan checks it */
  uint8_t x = 0;
  for (size_t i = 0; i < len; i++)
    x ^= b[i];
  o->sink ^= x;
  o->next += len;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ibp_container_info info;
  memset(&info, 0, sizeof info);
  ibp_status st_info = ibp_container_read_info(data, size, &info);
  if (st_info == IBP_OK) {
    FUZZ_ASSERT(info.container_bytes <= size);
    FUZZ_ASSERT(info.tensor_bytes >= 1 &&
                info.tensor_bytes <= IBP_MAX_TENSOR_BYTES);
    FUZZ_ASSERT(info.tensors * info.tensor_bytes + info.tail_bytes ==
                info.original_bytes);
    FUZZ_ASSERT(info.tensors_compressed <= info.tensors);
    /* version 1: one Mask/Bitval; version 2: 2 .. 256; versions 3 and 4:
     * 1 .. 256 (docs/FORMAT.md) */
    FUZZ_ASSERT(info.version == IBP_FORMAT_VERSION ? info.stage_bytes != 0
                                                   : info.stage_bytes == 0);
    FUZZ_ASSERT(
        info.version == IBP_FORMAT_VERSION_SINGLE
            ? info.clusters == 1
            : (info.version == IBP_FORMAT_VERSION_CLUSTERS ||
               info.version == IBP_FORMAT_VERSION_XXH64 ||
               info.version == IBP_FORMAT_VERSION) &&
                  info.clusters >=
                      (info.version == IBP_FORMAT_VERSION_CLUSTERS ? 2u : 1u) &&
                  info.clusters <= IBP_MAX_CLUSTERS);
  }
  order o = {0, st_info == IBP_OK ? info.original_bytes : UINT64_MAX, 0};
  ibp_status st = ibp_container_decode(data, size, check_write, &o);
  FUZZ_ASSERT(st != IBP_ERR_IO); /* check_write never fails */
  if (st == IBP_OK) {
    FUZZ_ASSERT(st_info == IBP_OK);
    FUZZ_ASSERT(o.next == info.original_bytes);
  }
  FUZZ_ASSERT(ibp_container_decode(data, size, NULL, NULL) == st);
  return 0;
}
