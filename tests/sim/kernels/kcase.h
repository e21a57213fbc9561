/*
 * A kernel test case: a random region compressed by the host codec, laid
 * out as libibp lays it out for the GPU (original + packed streams in
 * "pinned" host memory at chosen misalignments, some streams moved away;
 * offsets, lengths, flags/dirty/busy bits
 * and zero-padded Mask/Bitval in "device" memory, with K clusters K of
 * each and a cluster id per tensor), and a copy of a byte range run
 * through an emulated kernel.
 */
#ifndef IBP_KCASE_H
#define IBP_KCASE_H

#include <stdint.h>

#include "ibp/codec.h"
#include "ibp_kernels.h"
#include "simt.h"
#include "test_util.h"

#define KCASE_MAX_CLUSTERS 256

typedef struct kcase {
  uint32_t R, c;
  uint64_t n, tail, bytes;
  ibp_params params;                 /* one cluster */
  uint32_t clusters;                 /* K (1: params) */
  ibp_params cl[KCASE_MAX_CLUSTERS]; /* K > 1: each cluster's */
  uint32_t *ids;                     /* device, K > 1: cluster ids */
  uint8_t *orig_mem, *orig;          /* original region (host) */
  uint8_t *packed_mem, *packed;      /* the compressed streams (host) */
  uint64_t packed_bytes;
  uint64_t *offsets;       /* device: n+1 (the kernel reads n) */
  uint32_t *lengths;       /* device: n */
  uint32_t *flags, *dirty; /* device bits (dirty may be NULL) */
  uint32_t *busy;          /* device bits, may be NULL: like dirty */
  uint8_t *mask, *bitval;  /* K of each, (R + 15) & ~15 apart */
  uint32_t *plan;          /* device: their decode plan */
  unsigned plan_stages;
  uint64_t compressed_bytes; /* stored bytes of the tensors + tail */
  unsigned orig_misalign, packed_misalign;
  unsigned grid_cap;     /* 0, or at most this many blocks (so warps take
                            several walks) */
  unsigned walk;         /* 0, or tensors per walk instead of the plan's */
  unsigned dst_misalign; /* the copy's destination: this many bytes past
                            a 16-byte boundary */
  /* NULL, or K coding stages (docs/FORMAT.md §9; the caller's, its params
   * and masks fitted to them) kcase_compress compresses with, and their
   * device form (ibp_kernels_stage_exp), which kcase_template passes */
  const struct ibp_stage *stages;
  struct ibp_kernel_stage *kstages;
} kcase;

typedef struct kcase_shape {
  uint32_t R, c;
  uint64_t n, tail;
  unsigned orig_misalign, packed_misalign; /* bytes past a page boundary */
  int data_kind, mask_kind;                /* gen_data.h kinds */
  double dirty_share; /* tensors marked dirty or busy (half each) */
  unsigned clusters;  /* K, 0 or 1 = one Mask/Bitval; at most
                         KCASE_MAX_CLUSTERS */
  int adjacent;       /* 1: every stream stays where the packing put it
                         (else some are moved, as a refresh moves them) */
} kcase_shape;

/* Builds the case; the streams of dirty and busy tensors are overwritten
 * with garbage so that a kernel reading them instead of the original
 * fails. */
void kcase_build(kcase *k, rng *r, const kcase_shape *shape);
/* (Re)compresses k->orig with k->params (K > 1: k->cl) into the packed
 * layout, offsets, lengths, flags and ids (kcase_build does it; for
 * callers that change the data). */
void kcase_compress(kcase *k);
void kcase_free(kcase *k);
/* (Re)builds k->plan from k->mask and k->bitval (kcase_compress does). */
void kcase_plan(kcase *k);
/* A random shape: R from 1 B to 64 KiB (log-uniform), any chunk width, up
 * to most_tensors tensors (and 256 KiB), a tail in 30 % of cases,
 * misaligned bases in 70 %, any data and Mask kind; the rest zero (no
 * dirty tensors, one cluster, streams may move). */
void kcase_random_shape(rng *r, kcase_shape *s, uint64_t most_tensors);
/* A random copy range of k: the whole region, whole tensors, one byte, or
 * anything. */
void kcase_pick_range(rng *r, const kcase *k, uint64_t *off, uint64_t *len);

/* Stored length of tensor i (its compressed length, or R). */
uint32_t kcase_stored(const kcase *k, uint64_t i);

/* The launch fields of k that do not depend on a copy's range (the
 * template libibp keeps per region and device), not yet planned. */
void kcase_template(const kcase *k, ibp_decompress_args *a);

/* Runs kernel `entry` copying [off, off+len) into a fresh buffer, with the
 * host ranges registered as given (packed_end: bytes of the packed range to
 * register, normally k->packed_bytes).  Returns simt_run's result; on success
 * *mismatch is the first differing byte + 1 (0 = identical). */
int kcase_run(const kcase *k, simt_entry entry, uint64_t off, uint64_t len,
              uint64_t packed_end, simt_pcie *pcie, uint64_t *mismatch,
              char *err, size_t errlen);

#endif
