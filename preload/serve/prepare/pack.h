/*
 * Compressing a region straight into its packed layout, chunk by chunk
 * (serve/prepare/compress.c, docs/ARCHITECTURE.md "Preparing a region"): no
 * buffer as large as the region besides the shadow itself, each tensor
 * compressed once, each chunk usable as soon as it is in place.
 *
 * Per chunk of CHUNK_TENSORS tensors (whole 32-tensor words), in order:
 *   1. every thread compresses its part of the chunk into a buffer of its
 *      own (at most its part's bytes), each tensor with the cluster that
 *      stores it in the fewest bytes (its id written too) -- the first
 *      part straight into the shadow where the chunk's streams begin,
 *      whenever its capacity holds the part's bytes (one thread: every
 *      part, no copy);
 *   2. the chunk's streams get the next offsets in the shadow; streams that
 *      no longer fit its capacity are stored raw (flag 0: the kernel reads
 *      the original);
 *   3. every other thread copies its streams to their places (the shadow's
 *      pages faulted in first with one system call, where the kernel
 *      can: MADV_POPULATE_WRITE);
 *   4. flags, offsets, lengths and prefix sums of the chunk are final:
 *      `publish` makes the device see them, then the chunk's busy words are
 *      cleared (a release store): copies from then on read it compressed.
 *
 * The passes run on ibp__pack_threads() threads at lower scheduling
 * priority (10 nice levels below the application).
 */
#ifndef IBP_PRELOAD_SERVE_PACK_H
#define IBP_PRELOAD_SERVE_PACK_H

#include <stdatomic.h>
#include <stdint.h>

#include "ibp/codec.h"
#include "ibp/stage.h"

typedef struct ibp_pack {
  const ibp_params *params; /* `clusters` pairs (docs/FORMAT.md §4) */
  uint32_t clusters;        /* K >= 1 (0 counts as 1) */
  const ibp_stage *stages;  /* K exponent stages fitting the pairs
                               (docs/FORMAT.md §9), or NULL: IBP alone */
  uint8_t *ids;             /* K > 1: each tensor's cluster id is written here
                               (ibp_cluster_id_bytes(K, n) bytes, zero); NULL: K = 1 */
  const uint8_t *data;      /* the region: n tensors of R bytes */
  uint64_t n;
  uint8_t *flags;    /* (n + 31) / 32 * 4 bytes, zero: bit i = i compressed */
  uint32_t *lengths; /* n, zero: stream length, 0 = raw */
  uint64_t *offsets; /* n + 1: stream offset in the shadow (0 for raw) */
  uint64_t *prefix;  /* n + 1: stored bytes of tensors 0..i-1 (raw: R) */
  _Atomic uint64_t *filled; /* tensors whose prefix entries are final */
  uint8_t *shadow;
  uint64_t capacity; /* bytes of the shadow the streams may take */
  /* bit i set while tensor i is not in place; each word is cleared once
   * `publish` returned for its chunk.  NULL: none. */
  _Atomic uint32_t *busy;
  const _Atomic int *stop; /* nonzero: stop at the next chunk (NULL: never) */
  /* Makes tensors [t0, t1) usable on the device(s) (uploads their
   * metadata, waits for kernels that may have read the old); 0, or -1 to
   * stop.  NULL: nothing to do. */
  int (*publish)(void *ctx, uint64_t t0, uint64_t t1);
  void *publish_ctx;
  /* results */
  _Atomic uint64_t first_chunk_ns; /* CLOCK_MONOTONIC when the first chunk
                                      was published; 0 before */
  uint64_t packed_bytes;           /* the streams' total */
  uint64_t compressed_tensors, zero_tensors, overflow_tensors;
} ibp_pack;

/* Threads the passes use: IBP_THREADS, else a quarter of the CPUs (>= 1). */
unsigned ibp__pack_threads(void);

/* Bytes the packed streams of p's region will take, estimated from a
 * sample spread over it (the caller adds a margin); *zero_tensors (may be
 * NULL): the estimated number of all-zero tensors. */
uint64_t ibp__pack_estimate(const ibp_pack *p, uint64_t *zero_tensors);

/* Tensor i's stored size under p's pairs (and stages), and the id of the
 * pair that gives it (ibp_cluster_best_staged; 0 when K = 1, without
 * measuring when stored is NULL).  scratch: R bytes, used with stages. */
uint32_t ibp__pack_best(const ibp_pack *p, const uint8_t *tensor,
                        uint8_t *scratch, size_t *stored);

/* Compresses tensor with pair (and stage) id into out (R bytes); returns
 * its length, *compressed 1 when it is a stream (< R bytes).  scratch as
 * above. */
size_t ibp__pack_compress(const ibp_pack *p, uint32_t id, const uint8_t *tensor,
                          uint8_t *out, uint8_t *scratch, int *compressed);

/* Writes tensor i's cluster id into ids (K > 1): ibp_cluster_id_bits(K)
 * bits at i * bits (docs/FORMAT.md §4).  Threads writing tensors of
 * different 32-tensor words never share a byte. */
void ibp__pack_put_id(uint8_t *ids, uint32_t k, uint64_t i, uint32_t id);

/* Bytes the packed streams of p's region take now, exactly: every tensor
 * measured with its best pair (a compact region's shadow is all the memory
 * it keeps, so it gets no margin; compact.h). */
uint64_t ibp__pack_exact(const ibp_pack *p);

/* Compresses every chunk into place.  Returns 0, or -1 (out of memory,
 * stopped, or publish failed: the tensors not yet published stay busy). */
int ibp__pack_fill(ibp_pack *p);

#endif /* IBP_PRELOAD_SERVE_PACK_H */
