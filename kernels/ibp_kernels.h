/*
 * Launch ABI of libibp's GPU kernels, shared by host code (C) and device
 * code (CUDA C++ or the CPU emulator).  Every kernel takes exactly one
 * parameter: the struct below, by value.
 *
 * ibp_decompress: copies bytes [offset, offset+length) of an IBP region to
 * dst, where offset = first_tensor * R + first_offset.  The compressed
 * tensors' streams lie in mapped host memory (`packed`, the GPU layout of
 * docs/FORMAT.md §3: back to back, except streams a recompression moved)
 * at device-resident offsets and lengths.  One warp
 * per walk of `walk` consecutive tensors of the copy (grid-stride); the
 * region's raw tail is one more unit.  The warp stages each stream in
 * shared memory with 128-byte-aligned cp.async reads that never pass the
 * end of a stream it decodes, fetching the next tensor's stream while it
 * decodes one; where two adjacent streams of a walk share a 32-byte
 * sector, the sector is fetched once.  Tensors stored raw, marked dirty, and
 * the tail are copied from the original by an aligned warp copy.
 *
 * A copy may also be served staged: the copy engine first moves a window
 * of the packed streams to device memory (`staged`), and streams inside it
 * are read there instead of over PCIe.
 *
 * ibp_decompress_batch: the copies of a batch (docs/ARCHITECTURE.md
 * "Batched launches") in one launch: a job list of (source range,
 * destination), each range a region's (decoded as ibp_decompress does,
 * from the region's launch template) or a raw range of mapped host memory.
 * The jobs' units (a region job's tensors, a raw job's pieces of
 * IBP_BATCH_RAW_UNIT bytes) are numbered across the whole list and walked
 * like one copy's, so adjacent tensors of consecutive jobs share the
 * sector between their streams.
 *
 * ibp_gather: copies a list of byte ranges from host memory to device
 * memory, one warp per range, with the same aligned warp copy.
 *
 * ibp_stage_exp: the exponent stage's device decoder on its own (docs/
 * FORMAT.md §9.3, §9.6), one warp per tensor: ORs each tensor's
 * sign+exponent field, decoded from the stage part of its stream, into
 * the bytes the IBP part decoded to (the field 0 there).  Lane l decodes
 * segments l, l + 32, ...  ibp_decompress does not call it yet.
 *
 * Tensors of IBP_KERNEL_BLOCK_R bytes and more are decoded by a whole
 * block each (docs/ARCHITECTURE.md "Large tensors"): in rounds, the warps
 * of the block find where each one's slice of the stream starts with a
 * block-level scan; a round's bytes are staged, not the whole stream, so
 * R is not bounded by shared memory.  Smaller tensors are staged whole and
 * decoded by one warp each.
 */
#ifndef IBP_KERNELS_H
#define IBP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IBP_KERNEL_DECOMPRESS "ibp_decompress"
#define IBP_KERNEL_GATHER "ibp_gather"
#define IBP_KERNEL_BATCH "ibp_decompress_batch"
#define IBP_KERNEL_STAGE_EXP "ibp_stage_exp"
#define IBP_KERNEL_WARP_SIZE 32u

/* The decompress kernels' build, as far as their speed goes: the name a
 * device cost profile's `decoder_build` gives to the decoder its decode
 * terms were measured with (docs/PROFILE.md "Which decoder the decode terms
 * are of").  libibp and `ibp calibrate` compare it with the profile's: a
 * profile measured with another build (or with none named) has its decode
 * terms flagged unmeasured.
 *
 *   word-pdep      the kernel before the decode plan (a lane per 64-bit
 *                  word, a deposit loop over the invariant bits): what the
 *                  built-in profiles' decode terms were measured with
 *   decode-plan-1  the per-region decode plan (docs/ARCHITECTURE.md "The
 *                  decode plan"), 16 bytes per lane and step
 *   decode-plan-2  the same, with groups of small tensors decoded in one
 *                  flat step (issue 36)
 *   decode-plan-3  the same, a group's tensors looked up in one warp-wide
 *                  step (issue 36)
 *   decode-plan-4  the same, the exponent stage's last round of segments
 *                  split across lanes by bits, read through a bit buffer
 *                  (issue 37)
 *   decode-plan-5  the same, the walk's and the step's addressing and
 *                  fetches cut (issue 36: 0.81 -> 0.69 instructions a byte
 *                  all in at 400 B, W=8); the exponent stage as in -4
 *   decode-plan-6  the same, groups of tensors of whole 512-byte steps
 *                  decoded tensor by tensor with the full step, a group's
 *                  first bits taken by shuffle (issue 36: 0.626 -> 0.589
 *                  at 1 KiB, W=8); the exponent stage as in -4
 *   decode-plan-7  the same, 1-byte chunks' step leaner (dp4a sums,
 *                  prmt merges), a group step's tensor and block by one
 *                  multiply (issue 36: 0.745 -> 0.692 at 400 B, W=1); the
 *                  exponent stage as in -4
 *   decode-plan-8  the same, a group's look-up conditions decided once
 *                  per launch, a job of one whole tensor of whole steps
 *                  decoded as a group of one, a group's context and first
 *                  bits held across its steps (issue 36: 0.511 -> 0.490
 *                  at 4 KiB, W=8); the exponent stage as in -4
 *   decode-plan-9  the same, the exponent stage two values a step (two
 *                  look-ups from one peek, fields in place in the table,
 *                  one word read-modify-write a pair), its counts by the
 *                  count table (the codes of the next 11 bits at once),
 *                  its reads without a bit buffer (issue 37: 1.317 ->
 *                  1.080 all in at 4 KiB, W=8)
 *   decode-plan-10 the same, a block decode's count of its warps' payload
 *                  bits from the plan's bit planes, its fetch's requests
 *                  leaner (issue 36: 0.479 -> 0.399 at 64 KiB, W=8); the
 *                  exponent stage as in -9
 *   decode-plan-11 the same, a block's fetch's requests after its first
 *                  without the readable range's test (issue 36); the
 *                  exponent stage as in -9
 *   decode-plan-12 the same, a warp's fetch's requests after its first
 *                  without the readable range's test but on sm_120
 *                  (issue 36: 0.476 -> 0.465 all in at 4 KiB, W=8); the
 *                  exponent stage as in -9
 *   decode-plan-13 the same, a single copy's arguments read as
 *                  constants (no pointer to them in the walk state), a
 *                  group's step context made once a group, not once a
 *                  tensor, both but on sm_120 (issue 36: 0.549 -> 0.529
 *                  all in at 1 KiB, W=8); the exponent stage as in -9
 *   decode-plan-14 the same, a group's job decoded without the one
 *                  tensor's stage test after it, a group's step's plan
 *                  address by one wide multiply-add and its fit bits'
 *                  word by one LEA, a full-step loop's bound tested
 *                  once a step (issue 36: 0.518 -> 0.497 all in at
 *                  1 KiB, W=8); the exponent stage as in -9
 *
 * Whoever changes how fast ibp_decompress or ibp_decompress_batch decode
 * (ibp_decompress.cu, ibp_dev.h, the plan they read, their launch shape in
 * plan.c) bumps it -- a new name, never one used before, and never
 * "unknown" -- so that every profile measured before is flagged until `ibp
 * calibrate` measures the new build. */
#define IBP_DECODER_BUILD "decode-plan-14"

/* The exponent stage's build (stage_exp_dev.cuh and a stage job's path in
 * ibp_decompress.cu), as far as its speed goes: the name a profile's
 * `stage_decoder_build` gives to the build its stage terms were measured
 * with (docs/PROFILE.md "The stage's decode terms"); a name of the list
 * above, the build in which the stage last changed.  Whoever changes how
 * fast the stage decodes makes it IBP_DECODER_BUILD's new name. */
#define IBP_STAGE_BUILD "decode-plan-9"

/* ---- the exponent stage (docs/FORMAT.md §9.3, §9.6) --------------------- */

#define IBP_KERNEL_STAGE_TABLE 2048u /* entries: 2^IBP_STAGE_MAX_CODE_BITS */
#define IBP_KERNEL_STAGE_MAX_K 16u   /* tables one ibp_stage_exp keeps */

/* A table entry's bits (ibp_kernel_stage.table, stage_plan.c): the bits
 * the step moves on (a code's, an escape's with its raw field), and the
 * escape's flag (its raw field follows its code; the field bits 0). */
#define IBP_KERNEL_STAGE_BITS 31u
#define IBP_KERNEL_STAGE_ESC 32u

/* What the device decoder needs of one cluster's exponent stage, built on
 * the host by ibp_kernels_stage_exp (16-byte aligned in device memory). */
typedef struct ibp_kernel_stage {
  /* per value of the next 11 stream bits (first code bit lowest), the code
   * that starts there: its field in place in the value's top 16 bits (bf16
   * and f16 bits 7 and 10 up; f32 bits 7 up, the value's 23 up) |
   * IBP_KERNEL_STAGE_ESC for the escape | the bits the step takes
   * (IBP_KERNEL_STAGE_BITS: the code's, with an escape's raw field; 1
   * where no code starts) (stage_plan.c) */
  uint16_t table[IBP_KERNEL_STAGE_TABLE];
  /* per value of the next 11 stream bits, the codes of `table` a decode
   * steps over one by one that start and end in them (the first always;
   * an escape's raw field may end past them, and ends them): their count
   * << 16 | where they start (bit 5 + o: one at the 11 bits' bit o) |
   * their bits (IBP_KERNEL_STAGE_BITS) (stage_plan.c) */
  uint32_t counts[IBP_KERNEL_STAGE_TABLE];
  /* (dtype, segment_log2, length_bits, values: 16 bytes read at once) */
  uint32_t dtype;        /* ibp_dtype: 1 bf16, 2 f16, 3 f32; 0: no stage */
  uint32_t segment_log2; /* values per segment: 2^segment_log2 */
  uint32_t length_bits;  /* W: bits of each stored segment length (<= 32) */
  uint32_t values;       /* per tensor: R / value bytes */
  uint32_t no_bitmap;    /* 1: the cluster's Mask is the field, so the IBP
                            part has no bitmap (docs/FORMAT.md §9.1) */
  uint32_t reserved[3];
} ibp_kernel_stage;

typedef struct ibp_stage_exp_args {
  const uint8_t *streams;         /* device: the tensors' streams */
  const uint64_t *offsets;        /* device: tensor t's at streams + [t] */
  const uint32_t *lengths;        /* device: its bytes */
  const uint32_t *first_bits;     /* device: its stage part's first bit (the
                                     IBP part's bits, B) */
  const uint8_t *ids;             /* device: its cluster (NULL: all 0) */
  const ibp_kernel_stage *stages; /* device: one per cluster */
  uint8_t *dst; /* device: tensor t's window at dst + t * (w1 - w0), holding
                   what its IBP part decodes to (the field 0) */
  uint64_t tensors;
  uint32_t k;      /* clusters (1 .. IBP_KERNEL_STAGE_MAX_K) */
  uint32_t w0, w1; /* the window of each tensor, 0 <= w0 < w1 <= R */
} ibp_stage_exp_args;

struct ibp_stage; /* ibp/stage.h */

/* Fills out from a finished (or read) exponent stage of a cluster whose
 * Mask is `mask` (R bytes; NULL: not the field alone) for tensors of R
 * bytes; a stage of kind none (or NULL) gives dtype 0.  Returns 0, or -1
 * for an unknown kind or dtype or a length field wider than 32 bits. */
int ibp_kernels_stage_exp(const struct ibp_stage *st, const uint8_t *mask,
                          uint32_t tensor_bytes, ibp_kernel_stage *out);

typedef struct ibp_decompress_args {
  const uint8_t *packed;   /* mapped host: the compressed streams */
  const uint8_t *original; /* mapped host: the original region */
  const uint64_t *offsets; /* device: n; tensor i's stream starts at
                              packed + offsets[i] ... */
  const uint32_t *lengths; /* device: n; ... and is lengths[i] bytes (0:
                              none); streams need not be adjacent */
  const uint32_t *flags;   /* device: bit i = tensor i stored compressed */
  const uint32_t *dirty;   /* device or NULL: bit i = serve i raw */
  const uint32_t *busy;    /* device or NULL: bit i = serve i raw (its
                              slot is being rewritten) */
  const uint8_t *plan;     /* device: the decode plan of every
                              cluster (ibp_kernels_decode_plan), cluster
                              k's at plan + k * plan_stride */
  uint8_t *dst;            /* device: length bytes */
  uint64_t tensors;        /* n: tensors in the region */
  uint64_t first_tensor;   /* unit of the first byte (n = the tail) */
  uint64_t length;         /* bytes to copy */
  uint32_t first_offset;   /* offset of the first byte in that unit */
  uint32_t tensor_bytes;   /* R */
  uint32_t chunk_bytes;    /* c: IBP_CHUNK_WIDTHS (ibp/chunk_widths.h) */
  uint32_t tail_bytes;     /* region bytes after the last tensor */
  uint32_t walk;           /* tensors per warp walk (>= 1) */
  uint32_t stage_bytes;    /* one staging buffer (shared memory) */
  uint32_t stage_buffers;  /* per warp: 2 = fetch the next tensor while
                              one decodes; 1 = no prefetch */
  uint32_t plan_stages;    /* S of the plan (ibp_kernels_plan_stages) */
  /* Clusters (docs/FORMAT.md §4); all zero = one Mask/Bitval. */
  const uint32_t *cluster_ids; /* device, NULL when clusters <= 1: tensor
                                  i's id is bits [i*b, (i+1)*b) (b =
                                  ibp_cluster_id_bits(clusters)), padded to
                                  a multiple of 4 bytes */
  uint32_t clusters;           /* K; 0 or 1 = one Mask/Bitval */
  uint32_t plan_stride;        /* bytes from one cluster's plan to the
                                  next: ibp_kernels_plan_bytes(R, 1, S) */
  /* The staged path (docs/ARCHITECTURE.md "Staged copies"): shadow bytes
   * [staged_lo, staged_hi) were copied by the copy engine to device memory
   * at `staged` (staged_lo a multiple of 128, `staged` 128-byte aligned,
   * IBP_STAGED_PAD readable bytes after staged_hi); a stream lying wholly
   * in that window is read there, any other from `packed`.  NULL: none. */
  const uint8_t *staged;
  uint64_t staged_lo, staged_hi;
  /* Coding stages (docs/FORMAT.md §9): device, NULL when none; one per
   * cluster (K, or 1), dtype 0 for a cluster without.  Such a region's
   * tensors are never grouped, and R < IBP_KERNEL_BLOCK_R
   * (ibp_kernels_plan_decompress refuses others; a batch whose
   * stage_buffers is 0 copies their tensors from the original). */
  const ibp_kernel_stage *stages;
} ibp_decompress_args;

/* Shared memory per warp besides its staging buffers: the jobs of the
 * tensors it fetches and decodes, and its walk's state. */
#define IBP_KERNEL_JOB_BYTES 416u

/* A warp's staging buffer holds at least this many bytes, so that the
 * streams of several small tensors fit one and the warp decodes them as a
 * group, in steps that run from one tensor into the next
 * (docs/ARCHITECTURE.md "Groups of small tensors").  Two buffers and the
 * job slots of 4 warps, 26 KiB a block, leave 8 blocks (32 warps) an SM. */
#define IBP_KERNEL_GROUP_BYTES 3072u

/* Device bytes a staged window must be readable past its end: a warp's
 * fetch of a stream runs on to the end of the sector the next stream
 * starts in, in 16-byte pieces. */
#define IBP_STAGED_PAD 128u

/* A launch whose tensors have at least this many bytes decodes each with a
 * whole block (ibp_decompress: the region's R; ibp_decompress_batch:
 * stage_buffers 0, when any region's R is this large). */
#define IBP_KERNEL_BLOCK_R 16384u
/* A block decode's round: about this many steps of 512 bytes, the block's
 * warps together (each warp ceil(steps / warps) of them); its buffer, the
 * block's IBP_KERNEL_ROUND_BYTES of shared memory after the warps' job
 * slots, holds the warps' sums, the round's fit bits (at most 2 bytes per
 * 16-byte block) and its payload (at most 16 bytes per block). */
#define IBP_KERNEL_ROUND_STEPS 64u
#define IBP_KERNEL_ROUND_BLOCKS (32u * (IBP_KERNEL_ROUND_STEPS + 15u))
#define IBP_KERNEL_ROUND_BYTES (IBP_KERNEL_ROUND_BLOCKS * 18u + 192u)

#define IBP_BATCH_RAW 0xFFFFFFFFu /* ibp_batch_job.region: a raw range */
#define IBP_BATCH_RAW_UNIT 8192u  /* bytes of a raw job per unit */

/* One copy of a batch (32 bytes). */
typedef struct ibp_batch_job {
  uint64_t src;        /* region job: byte offset in the region; raw job:
                          mapped host address */
  uint64_t dst;        /* device address */
  uint64_t first_unit; /* units of the jobs before this one */
  uint32_t length;     /* bytes (> 0) */
  uint32_t region;     /* index into ibp_batch_args.regions, or
                          IBP_BATCH_RAW */
} ibp_batch_job;

typedef struct ibp_batch_args {
  const ibp_decompress_args *regions; /* device: launch templates (range
                                         fields unused) */
  const ibp_batch_job *jobs;          /* device: count, in unit order */
  uint64_t units;                     /* all jobs' */
  uint32_t count;
  uint32_t walk;          /* units per warp walk (>= 1) */
  uint32_t stage_bytes;   /* the largest of the regions' */
  uint32_t stage_buffers; /* the fewest of the regions'; 0: every unit is
                             decoded (or copied) by a whole block, as
                             tensors of IBP_KERNEL_BLOCK_R bytes are (some
                             region's R is that large) */
} ibp_batch_args;

typedef struct ibp_gather_range {
  uint64_t src_offset; /* from src */
  uint64_t dst_offset; /* into dst */
  uint64_t length;
} ibp_gather_range;

typedef struct ibp_gather_args {
  const uint8_t *src;             /* mapped host memory */
  uint8_t *dst;                   /* device memory */
  const ibp_gather_range *ranges; /* device: count ranges */
  uint64_t count;
} ibp_gather_args;

/* ---- the decode plan (docs/ARCHITECTURE.md "The decode plan") ----------
 *
 * Everything the decompress kernel needs of a region's Mask/Bitval pairs,
 * worked out once on the host.  For every 16-byte block of a tensor (the
 * bytes a lane decodes per step) 4 + S groups of four 32-bit words, one
 * word per 32-bit word of the block:
 *   keep    ~Mask (0 past R)
 *   bitval  Bitval
 *   inv     per byte: the invariant bits a fitting chunk does not carry
 *           (8 past R)
 *   short   per byte: the bits a non-fitting chunk does not carry (8 past
 *           R, else 0)
 *           (chunks of 4 and 8 bytes: these two groups are the block's
 *           counts instead, word 0 byte i the payload bits of word i
 *           when its chunk does not fit -- 32 less 8 per byte past R --,
 *           word 1 byte i its invariant bits inside R, the other six
 *           words 0)
 *   stage s (s < S; group 4 for the top stage, S - 1, group 5 + s for
 *           the others: IBP_PLAN_STAGE_ROW): the positions that
 *           take the bit 2^s below them in stage s of the deposit (Hacker's
 *           Delight's "expand", stages S-1 down to 0), per chunk (per
 *           32-bit word for chunks of 8 bytes)
 * S (0..5) is the fewest stages that deposit every word of every pair
 * (1-byte chunks: always 3, ibp_kernels_plan_stages).
 * After the blocks, the chunks' invariant bits as bit planes: per 32
 * chunks of the tensor (chunk k in group k / 32, at bit k % 32) the words
 * of IBP_PLAN_PLANE_WORDS(c), word j bit j of each chunk's invariant bits
 * inside R (0 for a chunk past R; at most 8c, so 4 to 7 planes, the rest
 * 0): a range's payload bits are 8 per byte inside R less the sum, over
 * its fitting chunks, of 2^j x the fitting chunks in plane j. */
#define IBP_PLAN_MAX_STAGES 5u
/* Stage s of S's group is 4 + this: the top stage, S - 1, first (the
 * kernel reads it unpredicated at a fixed place), then stages 0 .. S - 2. */
#define IBP_PLAN_STAGE_ROW(s, S) ((s) + 1u == (S) ? 0u : (s) + 1u)
#define IBP_PLAN_PLANE_WORDS(c) ((c) == 1 ? 4u : 8u)

/* S for K pairs: Masks at mask + k * stride (k < K), R bytes each, chunk
 * width c: the fewest stages that deposit every word, but for 1-byte
 * chunks always 3, their most (the kernel takes it as a constant there:
 * no test of S in the deposit, the plan's stride known). */
unsigned ibp_kernels_plan_stages(const uint8_t *mask, uint32_t stride,
                                 uint32_t K, uint32_t R, uint32_t c);

/* Bytes of the plan of K pairs with S stages. */
uint64_t ibp_kernels_plan_bytes(uint32_t R, uint32_t K, unsigned S);

/* Writes the plan of K pairs (Masks and Bitvals `stride` bytes apart) with
 * S >= ibp_kernels_plan_stages(...) stages to out (ibp_kernels_plan_bytes
 * bytes, 16-byte aligned).  Returns 0, or -1 when S is too small or R, c, K
 * are out of range. */
int ibp_kernels_decode_plan(const uint8_t *mask, const uint8_t *bitval,
                            uint32_t stride, uint32_t K, uint32_t R, uint32_t c,
                            unsigned S, uint32_t *out);

/* Launch geometry for one kernel launch. */
typedef struct ibp_kernel_plan {
  unsigned grid;           /* blocks */
  unsigned block;          /* threads per block */
  unsigned dynamic_shared; /* bytes */
} ibp_kernel_plan;

/* Fills the geometry-dependent fields of `a` (walk, stage_bytes,
 * stage_buffers) and the launch geometry for a device with
 * `max_shared` bytes of dynamic shared memory per block and `sms`
 * multiprocessors.  Returns 0, or -1 when the tensor size cannot be served (the
 * caller then copies itself). */
int ibp_kernels_plan_decompress(ibp_decompress_args *a, unsigned max_shared,
                                unsigned sms, ibp_kernel_plan *plan);

/* The same with blocks of up to `most_warps` warps (1..16; fewer where
 * their staging buffers do not fit): the staged path's launches, whose
 * grid IBP_MAX_SMS cuts to one block per SM, use IBP_STAGED_WARPS. */
int ibp_kernels_plan_decompress_warps(ibp_decompress_args *a,
                                      unsigned max_shared, unsigned sms,
                                      unsigned most_warps,
                                      ibp_kernel_plan *plan);
#define IBP_STAGED_WARPS 16u

/* Recomputes a->walk and plan->grid for a new range in `a` (first_tensor,
 * first_offset, length) of a region planned before with
 * ibp_kernels_plan_decompress: plan->block and dynamic_shared stay valid.
 * O(1), for the per-copy path. */
void ibp_kernels_plan_range(ibp_decompress_args *a, unsigned sms,
                            ibp_kernel_plan *plan);

/* Units of the copy in a: its tensors, and the tail when it reaches it. */
uint64_t ibp_kernels_copy_units(const ibp_decompress_args *a);

/* Units of job j (region: its template, planned; NULL for a raw job). */
uint64_t ibp_kernels_job_units(const ibp_batch_job *j,
                               const ibp_decompress_args *region);

/* Fills b's walk, stage_bytes and stage_buffers and the launch geometry
 * for a batch of b->units units over the `nregions` templates (planned
 * with ibp_kernels_plan_decompress on this device, `max_shared` bytes of
 * dynamic shared memory per block).  Walks are long enough
 * that the sector two walks both fetch costs about 1 % of a walk's bytes,
 * but at least one per SM when there are units enough. */
void ibp_kernels_plan_batch(ibp_batch_args *b,
                            const ibp_decompress_args *regions,
                            unsigned nregions, unsigned max_shared,
                            unsigned sms, ibp_kernel_plan *plan);

/* The SMs a decompress launch of `grid` blocks of `block_threads` threads
 * is worth in the cost model (docs/PROFILE.md): its warps over
 * IBP_STAGED_WARPS -- the warps per SM ibp calibrate measures
 * decode_gbps_per_sm with (a block each on IBP_MAX_SMS's default SMs) --
 * within [1, sms].  A warp decodes a tensor at a time, so an SM decodes
 * in proportion to the warps it holds. */
unsigned ibp_kernels_decode_sms(uint64_t grid, unsigned block_threads,
                                unsigned sms);

/* The same for a batched launch of `units` units whose largest tensor is
 * tensor_bytes (as ibp_kernels_plan_batch plans it with room for its
 * blocks' buffers). */
unsigned ibp_kernels_batch_sms(uint64_t units, uint32_t tensor_bytes,
                               unsigned sms);

/* Geometry for ibp_gather over `count` ranges. */
void ibp_kernels_plan_gather(uint64_t count, unsigned sms,
                             ibp_kernel_plan *plan);

/* Launch geometry for ibp_stage_exp over `tensors` tensors of k clusters. */
void ibp_kernels_plan_stage_exp(uint64_t tensors, uint32_t k, unsigned sms,
                                ibp_kernel_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* IBP_KERNELS_H */
