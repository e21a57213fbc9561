/*
 * libibp container: a self-describing file holding one compressed region
 * (docs/FORMAT.md, "Container").  Layout: a fixed 128-byte header, Mask and
 * Bitval of each cluster, the cluster ids (K > 1 only), flag bits, then
 * each tensor's slot bytes (compressed length or R) back to back, then the
 * raw tail.  The header carries a checksum of itself
 * and the metadata, and one of the original bytes (XXH64 in version 3).
 *
 * Output goes through a positional write callback so that callers can write
 * files (pwrite), memory, or discard.  The reader works on a byte span (for
 * instance a memory-mapped file) and never reads outside it.
 */
#ifndef IBP_CONTAINER_H
#define IBP_CONTAINER_H

#include "ibp/codec.h"
#include "ibp/stage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IBP_CONTAINER_MAGIC "\x89IBP\r\n\x1a\n" /* 8 bytes */
#define IBP_CONTAINER_HEADER_BYTES 128u

/* Writes len bytes at offset; returns 0 on success, nonzero on failure. */
typedef int (*ibp_write_fn)(void *ctx, uint64_t offset, const void *buf,
                            size_t len);

typedef struct ibp_container_info {
  uint32_t version;
  uint32_t tensor_bytes;
  uint32_t chunk_bytes;
  double threshold;
  uint64_t original_bytes;
  uint64_t tensors;
  uint64_t tail_bytes;
  uint64_t tensors_compressed;
  uint64_t payload_bytes;   /* slots + tail */
  uint64_t container_bytes; /* whole file */
  uint64_t data_checksum;   /* of the original bytes */
  uint32_t clusters;        /* K Mask/Bitval pairs (always 1 in version 1) */
  uint32_t stage_bytes;     /* version 4: bytes of the K stage descriptors
                               (docs/FORMAT.md §9); 0 before */
} ibp_container_info;

/* Compresses `bytes` bytes at src with p and writes the container through
 * `write` (offsets 0 .. container_bytes-1, not in order).  `info` may be
 * NULL.  IBP_ERR_IO when the callback fails. */
ibp_status ibp_container_write(const ibp_params *p, const void *src,
                               uint64_t bytes, unsigned threads,
                               ibp_write_fn write, void *ctx,
                               ibp_container_info *info);

/* The same with K >= 1 Mask/Bitval pairs (ibp_compress_region_clustered
 * picks each tensor's): a container with a cluster id per tensor when
 * k > 1, exactly the bytes of ibp_container_write when k == 1. */
ibp_status ibp_container_write_clustered(const ibp_params *params, uint32_t k,
                                         const void *src, uint64_t bytes,
                                         unsigned threads, ibp_write_fn write,
                                         void *ctx, ibp_container_info *info);

/* The same with a coding stage per cluster (stages[0 .. k-1], each
 * fitting its params: ibp/stage.h): version 4 when any stage is on, else
 * exactly the bytes of ibp_container_write_clustered (version 3).
 * stages may be NULL. */
ibp_status ibp_container_write_staged(const ibp_params *params,
                                      const ibp_stage *stages, uint32_t k,
                                      const void *src, uint64_t bytes,
                                      unsigned threads, ibp_write_fn write,
                                      void *ctx, ibp_container_info *info);

/* Validates the header and metadata of the container in buf[0, len) and
 * fills info.  Errors: IBP_ERR_BAD_MAGIC, IBP_ERR_VERSION, IBP_ERR_TRUNCATED,
 * IBP_ERR_CHECKSUM, IBP_ERR_CORRUPT. */
ibp_status ibp_container_read_info(const void *buf, uint64_t len,
                                   ibp_container_info *info);

/* Decodes the container and writes the original bytes through `write`
 * (in order, offsets 0 .. original_bytes-1); checks every tensor and the
 * data checksum.  `write` may be NULL to only verify. */
ibp_status ibp_container_decode(const void *buf, uint64_t len,
                                ibp_write_fn write, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* IBP_CONTAINER_H */
