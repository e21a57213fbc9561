/*
 * libibp's GPU kernels (launch ABI: ibp_kernels.h; format: docs/FORMAT.md).
 * Kernel bodies use only the ibp_dev_* helpers (ibp_dev.h), so this file
 * also compiles for the CPU against the SIMT emulator.
 *
 * Layers: warp routines (aligned copy, staging, decode of one tensor) /
 * kernels (a warp per unit, grid-stride) / host planning (plan.c, and
 * decode_plan.c: the decode plan docs/ARCHITECTURE.md describes).
 */
#include "ibp_dev.h"
#include "ibp_kernels.h"

#define PIECE 16u          /* bytes per lane per host read */
#define SPAN (PIECE * 32u) /* bytes per warp-wide request */
#define LINE 128u

/* Strictness tests build a variant that stages this many bytes past what
 * the window needs; the emulator must catch the read past the stream. */
#ifndef IBP_KERNEL_STAGE_EXTRA
#define IBP_KERNEL_STAGE_EXTRA 0u
#endif

/* Marks of the all-in count (IBP_MARK, ibp_dev.h; docs/ARCHITECTURE.md
 * "Counting a tensor's instructions"): each names the code from it to the
 * next mark; every loop holds one, and one follows it. */
enum {
  MARK_ENTRY = 1,      /* a warp's start in a kernel */
  MARK_WALK,           /* a walk of a warp */
  MARK_WALK_END,       /* to the warp's next walk */
  MARK_UNIT,           /* a unit of a walk */
  MARK_LOOKUP,         /* a unit's job */
  MARK_RAW,            /* a unit copied raw */
  MARK_RAW_STEP,       /* a 512-byte step of the aligned raw copy */
  MARK_RAW_BYTES,      /* ... its byte-wise edges */
  MARK_RAW_END,        /* after it */
  MARK_STAGE_STEP,     /* a warp-wide request of a fetch */
  MARK_STAGE_BYTES,    /* ... a piece before the readable range */
  MARK_STAGE_END,      /* after a fetch is issued */
  MARK_WAIT,           /* the walk's state saved, the fetch waited for */
  MARK_DECODE,         /* a tensor's decode entry */
  MARK_BITS_STEP,      /* a step of counting stream bits before the window */
  MARK_BITS_END,       /* after it */
  MARK_STEP_FULL,      /* a full decode step */
  MARK_STEP_PART,      /* a step that tests each lane's block */
  MARK_STORE_BYTES,    /* ... a block stored byte by byte */
  MARK_BSTEP_FULL,     /* a full decode step of a block decode */
  MARK_BSTEP_PART,     /* ... one that tests each lane's block */
  MARK_DECODE_END,     /* after a tensor's (or a round's) steps */
  MARK_RESTORE,        /* the walk's state read back, the carry */
  MARK_GROUP,          /* a group's decode entry */
  MARK_GROUP_STEP,     /* a step of a group's decode */
  MARK_GROUP_END,      /* after a group's steps */
  MARK_GROUPING,       /* a unit's job grown into a group */
  MARK_BUNIT,          /* a unit of a block */
  MARK_BUNIT_JOB,      /* its job made */
  MARK_BUNIT_END,      /* after it */
  MARK_ROUND,          /* a round of a block decode */
  MARK_BSTAGE_STEP,    /* a block-wide request of a block's fetch */
  MARK_BSTAGE_BYTES,   /* ... a piece before the readable range */
  MARK_BSTAGE_END,     /* after a block's fetch is issued */
  MARK_SUMS,           /* a warp's sum of a round's block-level scan */
  MARK_SUMS_END,       /* after the scan */
  MARK_ROUND_DECODE,   /* a round's payload fetched, its decode entry */
  MARK_ROUND_END,      /* after a round */
  MARK_EXP_TABLE,      /* ibp_stage_exp: a word of its tables loaded */
  MARK_EXP_TENSOR,     /* ... a tensor's stage decode */
  MARK_EXP_ROUND,      /* a round of 32 segments of a stage decode */
  MARK_EXP_VALUE,      /* a pair of 2-byte values of a segment */
  MARK_EXP_BYTES,      /* ... ORed byte by byte */
  MARK_EXP_END,        /* after a stage decode */
  MARK_STAGE_JOB,      /* a walk's tensor with a coding stage: its stage */
  MARK_GROUP_LOOKUP,   /* a unit's look-up as a group (group_units' units) */
  MARK_DIV64,          /* a 64-bit division (a copy past 4 GiB of its region) */
  MARK_STAGE_REST,     /* a stage job's IBP bits past its window counted */
  MARK_EXP_SCOUT,      /* a count step in a split segment's lane's first bits */
  MARK_EXP_COUNT,      /* ... a count step after them */
  MARK_EXP_SPLIT,      /* after them */
  MARK_EXP_SYNC,       /* a code from the lane's true start to a kept one */
  MARK_EXP_SUMS,       /* after it: the lanes' counts summed */
  MARK_EXP_EDGE,       /* a value at the window's edges (or misaligned) */
  MARK_EXP_SYNC_ROUND, /* a round of the lanes' syncs */
  MARK_EXP_RUN,        /* a lane's values whole in the window: their set-up */
  MARK_EXP_RUN_END,    /* after them */
  MARK_EXP_COUNT_STOP, /* after a count's steps */
  MARK_EXP_SYNCED,     /* a lane's sync walk's end */
  MARK_EXP_SCOUT_STOP, /* after them */
  MARK_EXP_START,      /* a stage decode's set-up, past the dtype's choice */
  MARK_EXP_SEGMENT,    /* a round of 32 segments, a lane each: its decode */
  MARK_STAGE_EDGE,     /* a fetch's piece before the readable range */
  MARK_BSTAGE_EDGE,    /* ... of a block's fetch */
  MARK_FETCH,          /* a unit's fetch, its job looked up */
  MARK_DECODE_NB,      /* a tensor's decode entry, its stream no bitmap */
  MARK_GROUP_TENSOR,   /* a tensor of a group of whole steps */
  MARK_GROUP_TSTEP,    /* ... a full decode step of it */
  MARK_GROUP_FLAT,     /* a group's flat steps: their set-up */
  MARK_BLOCKS,         /* a warp's start on the block path (R >= 16 KiB) */
  MARK_PREFETCH,       /* the look-up of the unit after next, to prefetch */
  MARK_EXP_PAIR_ESC,   /* a stage pair with an escape: one value at a time */
  MARK_EXP_COUNT_TAIL, /* a code of a count's last 10 bits */
  MARK_EXP_COUNT_END,  /* after them */
  MARK_STAGE_PART,     /* a stage job's window short of its tensor's end */
  MARK_EXP_ODD,        /* a value before or after a run's pairs, alone */
  MARK_EXP_VALUE4,     /* a pair of 4-byte values of a segment */
  MARK_PLANES_STEP,    /* a pass of a block decode's bit count (bit planes) */
  MARK_PLANES_END,     /* after it */
  MARK_BSTAGE_FIRST,   /* a block's fetch's first block-wide request */
  MARK_STAGE_FIRST,    /* a fetch's first warp-wide request */
  MARK_GROUP_TENSOR_END, /* after a tensor's steps in a group of them */
  MARK_NEXT,             /* a fetch not prefetched: the next unit's look-up */
  MARK_WALK_SAVE,        /* the walk's state saved before the decode */
  MARK_FULL_END,         /* after a decode's full steps */
  MARK_BSTAGE_LAST,      /* a block's fetch's last request, after a span */
  MARK_PLANES_PAIR,      /* a pass of a block decode's bit count, 1-byte
                            chunks: two groups a lane */
  MARK_PLANES_PAIR_END,  /* after them */
  MARK_GROUP_PAIRS,      /* a group of tensors of whole 1024-byte steps,
                            1-byte chunks: its set-up for steps of two
                            blocks a lane */
  MARK_GROUP_TSTEP2,     /* ... a full step of a tensor of it (1024 bytes) */
  MARK_WALK_FIRST,       /* a walk's first unit looked up: its set-up */
  MARK_COUNT
};

IBP_DEV uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}
IBP_DEV uint64_t max_u64(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}
/* d read as signed, negative ones 0 (one max). */
IBP_DEV uint32_t pos_or_0(uint32_t d) {
  return (int32_t)d > 0 ? d : 0u;
}

/* ---- raw copy: host [src, src+len) -> device dst ------------------------ */

/* Stores the bytes [lo, hi) of the 16-byte piece at host address p. */
IBP_DEV void store_piece(uint8_t *dst, uintptr_t src, uintptr_t p, uintptr_t lo,
                         uintptr_t hi, ibp_dev_u128 v) {
  IBP_NO_UNROLL
  for (uintptr_t a = lo; a < hi; a++) {
    IBP_MARK(MARK_RAW_BYTES);
    unsigned i = (unsigned)(a - p); /* no array: keep it out of local memory */
    uint32_t w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
    dst[a - src] = (uint8_t)(w >> (8 * (i & 3)));
  }
}

/* Every lane reads one 16-byte piece per step; the warp's pieces start at
 * the 128-byte line below src, and lanes whose piece lies outside the
 * range re-read the nearest piece inside it (free: same sectors, same
 * request), so every request is line-aligned and no lane reads outside
 * [floor16(src), ceil16(src+len)) ∩ [lo_ok, hi_ok).  Bytes of a piece
 * outside [lo_ok, hi_ok) (the readable host range) are read one by one. */
IBP_DEV void warp_copy_raw(uint8_t *dst, const uint8_t *src_p, uint64_t len,
                           const uint8_t *lo_ok_p, const uint8_t *hi_ok_p) {
  if (len == 0)
    return;
  const uintptr_t src = (uintptr_t)src_p, end = src + len;
  const uintptr_t lo_ok = (uintptr_t)lo_ok_p, hi_ok = (uintptr_t)hi_ok_p;
  const uintptr_t first = src & ~(uintptr_t)(PIECE - 1);
  const uintptr_t last = (end - 1) & ~(uintptr_t)(PIECE - 1);
  const uintptr_t base = src & ~(uintptr_t)(LINE - 1);
  const unsigned lane = ibp_dev_lane();
  for (uintptr_t step = base; step <= last; step += SPAN) {
    IBP_MARK(MARK_RAW_STEP);
    uintptr_t p = step + PIECE * lane;
    int mine = p >= first && p <= last;
    if (p < first)
      p = first;
    if (p > last)
      p = last;
    uintptr_t lo = max_u64(p, src), hi = min_u64(p + PIECE, end);
    if (p >= lo_ok && p + PIECE <= hi_ok) {
      ibp_dev_u128 v = ibp_dev_ld_host_16((const uint8_t *)p);
      if (mine)
        store_piece(dst, src, p, lo, hi, v);
    } else if (mine) { /* a piece at the edge of the readable range */
      IBP_NO_UNROLL    /* a rare path: loads in flight would cost registers */
          for (uintptr_t a = lo; a < hi; a++) {
        IBP_MARK(MARK_RAW_BYTES);
        dst[a - src] = ibp_dev_ld_host_u8((const uint8_t *)a);
      }
    }
  }
  IBP_MARK(MARK_RAW_END);
  ibp_dev_syncwarp();
}

/* ---- staging a compressed slot into shared memory ------------------------ */

/* Stages host bytes [s + lo, s + hi) into stage (stage[0] holds host
 * address floor16(s)) with 16-byte cp.async pieces, line-aligned requests,
 * never reading at or past s + hi.  A piece that would start below
 * lo_ok (the readable host range) is read byte by byte: only the first
 * request can hold one (the range starts at or below s + lo, less than a
 * line past the request's start), so that request is issued on its own
 * and the requests after it test nothing -- except on sm_120, where
 * ptxas spilled ibp_decompress (8 bytes) in every arrangement of that
 * split tried, and the fetch keeps one loop, each request testing the
 * readable range (bench/README.md, decode-plan-12).  Commits one group. */
IBP_DEV void warp_stage(uint8_t *stage, const uint8_t *s_p, uint32_t lo,
                        uint32_t hi, const uint8_t *lo_ok_p) {
  if (hi > lo) { /* offsets from the line below s + lo: 32 bits */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 1200
    IBP_MARK(MARK_STAGE_FIRST);
#endif
    const uintptr_t s = (uintptr_t)s_p, lo_ok = (uintptr_t)lo_ok_p;
    const uintptr_t line = (s + lo) & ~(uintptr_t)(LINE - 1);
    const uint32_t skip = (uint32_t)((s & ~(uintptr_t)(PIECE - 1)) - line);
    const uint32_t from = (uint32_t)(s + lo - line), end = from + (hi - lo);
    const uint32_t first = from & ~(PIECE - 1), last = (end - 1) & ~(PIECE - 1);
    const uint32_t ok = lo_ok > line ? (uint32_t)(lo_ok - line) : 0;
    const uint32_t mine = PIECE * ibp_dev_lane();
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 1200
    /* the request of the last piece (the only one that may be short)
     * when it is not the first: its lanes past it read it again */
    const uint32_t fin = last & ~(SPAN - 1);
    if (fin) {
      const uint32_t q = fin + mine < last ? fin + mine : last;
      const unsigned n = end - q < PIECE ? end - q : PIECE;
      ibp_dev_cp_async16(stage + (q - skip), (const void *)(line + q), n);
    }
    { /* the first request (first < LINE: every lane's piece is there) */
      const uint32_t q = mine < first ? first : mine > last ? last : mine;
      const unsigned n = end - q < PIECE ? end - q : PIECE;
      if (q >= ok) {
        ibp_dev_cp_async16(stage + (q - skip), (const void *)(line + q), n);
      } else { /* the region starts inside this piece: from >= ok */
        IBP_MARK(MARK_STAGE_EDGE);
        IBP_NO_UNROLL /* a rare path: loads in flight would cost registers */
            for (uint32_t x = from; x < q + n; x++) {
          IBP_MARK(MARK_STAGE_BYTES);
          stage[x - skip] = ibp_dev_ld_host_u8((const uint8_t *)(line + x));
        }
      }
    }
    /* the requests between them, of whole pieces (o >= SPAN > first, and
     * ok <= from < LINE) */
    for (uint32_t o = SPAN + mine; o < fin + mine; o += SPAN) {
      IBP_MARK(MARK_STAGE_STEP);
      ibp_dev_cp_async16(stage + (o - skip), (const void *)(line + o), PIECE);
    }
#else /* sm_120: one loop */
    for (uint32_t step = 0; step <= last; step += SPAN) {
      IBP_MARK(MARK_STAGE_STEP);
      const uint32_t o = step + mine;
      const uint32_t q = o < first ? first : o > last ? last : o;
      const unsigned n = end - q < PIECE ? end - q : PIECE;
      if (q >= ok) {
        ibp_dev_cp_async16(stage + (q - skip), (const void *)(line + q), n);
      } else { /* the region starts inside this piece: from >= ok */
        IBP_MARK(MARK_STAGE_EDGE);
        IBP_NO_UNROLL /* a rare path: loads in flight would cost registers */
            for (uint32_t x = from; x < q + n; x++) {
          IBP_MARK(MARK_STAGE_BYTES);
          stage[x - skip] = ibp_dev_ld_host_u8((const uint8_t *)(line + x));
        }
      }
    }
#endif
  }
  IBP_MARK(MARK_STAGE_END);
  ibp_dev_cp_async_commit();
}

/* ---- decoding one compressed tensor (docs/ARCHITECTURE.md "The decode
 * plan") ------------------------------------------------------------------ */

typedef struct tensor_job {
  const uint8_t *plan;   /* device: the plan of the tensor's Mask pair */
  uint32_t R, c, S;      /* from the launch */
  uint32_t stage_off;    /* this tensor's staging buffer (job_stage: at
                            this offset in shared memory); its byte 0 holds
                            host address floor16(stream) */
  const uint8_t *stream; /* the tensor's stream (packed or staged) */
  const uint8_t *orig;   /* host: the tensor in the original */
  const uint8_t *lo_ok;  /* lowest readable address (packed or staged start) */
  uint8_t *dst;          /* where window byte w0 goes */
  uint32_t w0, w1;       /* window of the tensor */
  uint32_t len;          /* stream bytes */
  uint32_t from, to;     /* stream bytes [from, to) its fetch stages; to may
                            pass len (into the next stream, see below) */
  uint32_t count; /* tensors of the job: 1, or a group (docs/ARCHITECTURE.md
                     "Groups of small tensors") */
  const uint8_t *raw_lo, *raw_hi; /* host range a raw copy may read */
  union {
    const uint64_t *offs; /* a group: offsets of its tensors */
    /* one tensor: its cluster's exponent stage (docs/FORMAT.md §9), NULL:
     * none (a tensor with a stage is never grouped) */
    const ibp_kernel_stage *stage;
  };
} tensor_job;

#define BLOCK 16u /* output bytes a lane decodes per step */
/* In a job's c: whole tensors of whole steps (R a multiple of SPAN), no
 * coding stage, the destination aligned: decode_group_steps, whatever the
 * job's count (group_lookup's jobs). */
#define WHOLE_STEPS 0x100u

/* (An offset, not a pointer: the compiler then knows it is shared memory
 * and addresses it with 32 bits.) */
IBP_DEV uint8_t *job_stage(const tensor_job *j) {
  return ibp_dev_shared() + j->stage_off;
}

/* The warp's job slots (shared memory: IBP_KERNEL_JOB_BYTES per warp
 * before the staging buffers). */
IBP_DEV tensor_job *warp_slots() {
  return (tensor_job *)(ibp_dev_shared() +
                        IBP_KERNEL_JOB_BYTES * ibp_dev_warp_in_block());
}

/* The 32 bits from bit p of the staged words on.  (The funnel shift takes
 * its amount mod 32: no mask.) */
IBP_DEV uint32_t bits_at(const uint32_t *sw, uint32_t p) {
  const uint32_t *q = sw + (p >> 5);
  return ibp_dev_funnel_r(q[0], q[1], p);
}

/* bits_at with its word's address one shift and one LEA (ibp_dev_shr). */
IBP_DEV uint32_t bits_at_lea(const uint32_t *sw, uint32_t p) {
  const uint32_t *q = sw + ibp_dev_shr(p, 5);
  return ibp_dev_funnel_r(q[0], q[1], p);
}

/* The 32 bits from bit p of the staged words on (a) and the 32 from bit
 * p + n on (b), n at most 32: three words' loads for both. */
IBP_DEV void bits_pair(const uint32_t *sw, uint32_t p, uint32_t n, uint32_t &a,
                       uint32_t &b) {
  const uint32_t *q = sw + ibp_dev_shr(p, 5);
  const uint32_t l1 = q[1];
  a = ibp_dev_funnel_r(q[0], l1, p);
  b = ibp_dev_funnel_rc(a, ibp_dev_funnel_r(l1, q[2], p), n);
}

/* bits_pair with word 1 d bits short of 32 after word 0 (d at most 32):
 * the 32 bits from bit p on (a) and the 32 from bit p + 32 - d on (b). */
IBP_DEV void bits_pair_short(const uint32_t *sw, uint32_t p, uint32_t d,
                             uint32_t &a, uint32_t &b) {
  const uint32_t *q = sw + ibp_dev_shr(p, 5);
  const uint32_t l1 = q[1];
  a = ibp_dev_funnel_r(q[0], l1, p);
  b = ibp_dev_funnel_lc(a, ibp_dev_funnel_r(l1, q[2], p), d);
}

#include "stage_exp_dev.cuh"

IBP_DEV void load4(uint32_t *w, const uint8_t *p) {
  ibp_dev_u128 q = ibp_dev_ldg_u128(p);
  w[0] = q.x;
  w[1] = q.y;
  w[2] = q.z;
  w[3] = q.w;
}

/* The fit bits of block b's 16 / C chunks; the bitmap starts at bit bit0.
 * LEA: the word's address by bits_at_lea (a group's tensor step only: in
 * every step, ptxas spilled ibp_decompress_batch on sm_90). */
template <unsigned C, bool LEA = false>
IBP_DEV uint32_t block_fits(const uint32_t *sw, uint32_t bit0, uint32_t b) {
  const uint32_t p = bit0 + b * (16 / C);
  return (LEA ? bits_at_lea(sw, p) : bits_at(sw, p)) & ((1u << (16 / C)) - 1);
}

/* block_fits for lane l's block of a group's tensor step: fw the word of
 * its fit bits, bit0 mod 32 where they start (the tensor's first fit bit
 * + l * 16 / C: a step moves them on by whole words, 16 / C, the caller
 * fw with them). */
template <unsigned C>
IBP_DEV uint32_t lane_fits(const uint32_t *fw, uint32_t bit0) {
  return ibp_dev_funnel_r(fw[0], fw[1], bit0) & ((1u << (16 / C)) - 1);
}

/* 0xFF in each byte of word i of the block whose chunk fits. */
/* (1- and 2-byte chunks: a multiply moves fit bit k to the top bit of the
 * chunk's first byte -- the partial products never meet -- and one prmt
 * copies each top bit over its bytes.  1-byte chunks: words 1 and 3 take
 * their nibble in place, f >> 8 serving words 2 and 3.  Not a table in
 * constant memory: the fit bits differ between lanes, and the constant
 * cache serves a load's distinct addresses one at a time.) */
template <unsigned C> IBP_DEV uint32_t fit_bytes(uint32_t f, unsigned i) {
  if (C == 1) {
    const uint32_t h = i < 2 ? f : f >> 8;
    return ibp_dev_prmt(i & 1 ? (h & 0xF0u) * 0x01020408u
                              : (h & 15u) * 0x10204080u,
                        0, 0xBA98u);
  }
  if (C == 2)
    return ibp_dev_prmt(((f >> (2 * i)) & 3u) * 0x00400080u, 0, 0xAA88u);
  return 0u - ((f >> (C == 4 ? i : i / 2)) & 1u);
}

/* Per byte: the bits its chunk does not carry (fitting: inv, else shrt;
 * one LOP3: the plan's shrt is 0 but past R, where inv is 8 as well). */
IBP_DEV uint32_t dropped(uint32_t fit, uint32_t inv, uint32_t shrt) {
  return (fit & inv) | shrt;
}

IBP_DEV uint32_t byte_sum(uint32_t v) {
  return (v * 0x01010101u) >> 24;
}

/* Chunks of 4 and 8 bytes: byte i of the result is 0xFF where word i's
 * chunk fits (fit bits f: one per chunk). */
template <unsigned C> IBP_DEV uint32_t word_fits(uint32_t f) {
  /* (the multiply moves each fit bit to the top bit of a byte, the prmt
   * copies that bit over the bytes of its words) */
  if (C == 4)
    return ibp_dev_prmt((f & 15u) * 0x10204080u, 0, 0xBA98u);
  return ibp_dev_prmt((f & 3u) * 0x00004080u, 0, 0x9988u);
}

/* Chunks of 4 and 8 bytes: byte i of the result is the payload bits of
 * word i of the block whose plan is pl (fit bits f): the plan's counts
 * word (docs/ARCHITECTURE.md "The decode plan") less, where the chunk
 * fits, its invariant bits.  (No byte borrows: a word's invariant bits
 * are at most its count.) */
template <unsigned C>
IBP_DEV uint32_t word_bits(const uint8_t *pl, uint32_t f) {
  const uint64_t cnt = ibp_dev_ldg_u64(pl + 2 * BLOCK);
  return (uint32_t)cnt - (word_fits<C>(f) & (uint32_t)(cnt >> 32));
}

/* Stages a C-byte chunk may need: log2 of its segment's bits. */
template <unsigned C> struct max_stages {
  static const unsigned value = C == 1 ? 3 : C == 2 ? 4 : 5;
};

/* The plan's S for C-byte chunks: 1-byte chunks' plans always have
 * max_stages (ibp_kernels_plan_stages), a constant to the compiler. */
template <unsigned C> IBP_DEV unsigned plan_stages(unsigned S) {
  return C == 1 ? max_stages<C>::value : S;
}

/* Word i of a block from the 32 stream bits x at its first payload bit,
 * before the deposit: each chunk's bits moved to the chunk's first bit
 * (pre: 2-byte chunks, per byte the bits the chunks before it in the word
 * do not carry, summed; 1-byte chunks, per byte the bits its chunk does
 * not carry, at most 8). */
template <unsigned C> IBP_DEV uint32_t spread_chunks(uint32_t x, uint32_t pre) {
  if (C == 1) {
    /* byte k moves up by the dropped bits of the bytes before it: each
     * shift adds one byte's, from the low bits of pre >> 8k (a wrapping
     * shift reads 5 bits: that byte's count, at most 8, and a zero) */
    const uint32_t t1 = ibp_dev_shl_wrap(x, pre);
    const uint32_t t2 = ibp_dev_shl_wrap(t1, pre >> 8);
    const uint32_t t3 = ibp_dev_shl_wrap(t2, pre >> 16);
    /* (each merge one prmt: byte k from t_k, those below it kept) */
    return ibp_dev_prmt(ibp_dev_prmt(ibp_dev_prmt(x, t1, 0x7650u), t2, 0x7610u),
                        t3, 0x7210u);
  }
  /* (a prmt takes byte k of pre as a shift: one instruction, not two) */
  if (C == 2)
    return (x & 0xFFFFu) | ((x << ibp_dev_prmt(pre, 0, 0x4442u)) & 0xFFFF0000u);
  return x;
}

/* One warp step: lane l decodes block g + l (when < nb) from stream bit
 * pos on and stores the bytes of it inside the window (FULL: all of it,
 * 16-byte aligned; else 16 bytes at once where the block lies inside and
 * lands aligned, byte by byte where not); returns the bit after the warp's
 * blocks.  Each word's
 * chunks are deposited (S stages, warp-uniform) where they fit and taken
 * whole where not, selected per byte. */
/* What a warp's steps through one tensor share. */
typedef struct decode_ctx {
  const uint8_t *plan; /* the tensor's pair's plan */
  uint8_t *dst;        /* where window byte w0 goes */
  const uint32_t *sw;  /* the staged stream, as words */
  uint32_t w0, w1, bit0;
  uint32_t nb; /* the blocks decoded end here */
  unsigned S;
  bool aligned;       /* dst - w0 is 16-byte aligned */
  const uint32_t *fw; /* a group's tensor: the lane's first fit bits' word
                         (lane_fits; bit0 the lane's first fit bit) */
} decode_ctx;

/* Stream bits of blocks [lo, hi), summed over the warp (all lanes).  NB:
 * the stream has no bitmap, every chunk fits (docs/FORMAT.md §9.1: the
 * Mask is a coding stage's field). */
template <unsigned C, bool NB = false>
IBP_DEV uint32_t blocks_bits(const decode_ctx &x, uint32_t lo, uint32_t hi) {
  uint32_t sum = 0;
  for (uint32_t g = lo; g < hi; g += 32) {
    IBP_MARK(MARK_BITS_STEP);
    const uint32_t b = g + ibp_dev_lane();
    uint32_t n = 0;
    if (b < hi) {
      const uint8_t *pl = x.plan + b * ((4 + plan_stages<C>(x.S)) * BLOCK);
      const uint32_t f = NB ? 0xFFFFu : block_fits<C>(x.sw, x.bit0, b);
      if (C >= 4) {
        n = byte_sum(word_bits<C>(pl, f));
      } else {
        uint32_t inv[4], shrt[4], d = 0;
        load4(inv, pl + 2 * BLOCK);
        load4(shrt, pl + 3 * BLOCK);
        IBP_UNROLL
        for (unsigned i = 0; i < 4; i++)
          d = ibp_dev_dp4a(dropped(fit_bytes<C>(f, i), inv[i], shrt[i]),
                           0x01010101u, d);
        n = 128 - d;
      }
    }
    sum += ibp_dev_warp_sum(n);
  }
  IBP_MARK(MARK_BITS_END);
  return sum;
}

/* blocks_bits for a block decode's round, lo a multiple of 2C blocks (32
 * chunks): 8 bits per byte inside R (a tensor of R bytes) less the
 * fitting chunks' invariant bits, summed from the plan's bit planes
 * (docs/ARCHITECTURE.md "Large tensors"), lane l the l-th group of 32
 * chunks of each pass (chunks past R have none).  PAIRS (1-byte chunks):
 * first the passes of 64 groups all below hi, lane l groups 2l and 2l + 1
 * (the range's window start takes the plain passes: with the pairs there
 * too, ptxas spilled ibp_decompress_batch on sm_90, 4 bytes). */
template <unsigned C, bool PAIRS = true>
IBP_DEV uint32_t planes_bits(const decode_ctx &x, uint32_t lo, uint32_t hi,
                             uint32_t R) {
  const uint32_t k0 = lo * (16 / C), k1 = hi * (16 / C); /* chunks */
  const uint32_t PW = IBP_PLAN_PLANE_WORDS(C) * 4;       /* bytes a group */
  const uint32_t lane = 32 * ibp_dev_lane();
  const uint8_t *pp = /* the groups of a pass, from chunk a on */
      ibp_dev_at(x.plan + (R + BLOCK - 1) / BLOCK *
                              ((4 + plan_stages<C>(x.S)) * BLOCK),
                 k0 / 32, PW);
  uint32_t gone = 0, a = k0;
  if (C == 1 && PAIRS) {
    /* passes whose 64 groups all lie below k1: lane l the groups 2l and
     * 2l + 1 (64 fit bits from bit bit0 + a + 64l on: a moves on by whole
     * words, so the shift stays), no clamp, no test */
    const uint32_t sh = x.bit0 + a;
    const uint32_t *fw = x.sw + ibp_dev_shr(sh, 5) + lane / 16;
    const uint8_t *pl = pp + lane / 16 * PW;
    const uint32_t pairs = (k1 - a) / (2 * 32 * 32);
    uint32_t n[4] = {0, 0, 0, 0}; /* per plane: its fitting chunks */
    IBP_NO_UNROLL
    for (uint32_t i = pairs; i; i--, fw += 64, pl += 64 * PW) {
      IBP_MARK(MARK_PLANES_PAIR);
      const uint32_t w1 = fw[1];
      const uint32_t f0 = ibp_dev_funnel_r(fw[0], w1, sh);
      const uint32_t f1 = ibp_dev_funnel_r(w1, fw[2], sh);
      uint32_t p[8];
      load4(p, pl);
      load4(p + 4, pl + PW);
      IBP_UNROLL
      for (int j = 0; j < 4; j++)
        n[j] += ibp_dev_popc(f0 & p[j]) + ibp_dev_popc(f1 & p[4 + j]);
    }
    IBP_MARK(MARK_PLANES_PAIR_END);
    gone = n[0] + 2 * n[1] + 4 * n[2] + 8 * n[3];
    a += pairs * (2 * 32 * 32);
    pp += (a - k0) / 32 * PW;
  }
  for (; a < k1; a += 32 * 32, pp += 32 * PW) {
    IBP_MARK(MARK_PLANES_STEP);
    /* (a lane past k1 reads the first lane's group) */
    const uint32_t at = a + lane < k1 ? lane : 0;
    /* the lane's fit bits, of chunks below k1 only */
    const uint32_t f =
        ~ibp_dev_shl_clamp(0xFFFFFFFFu, pos_or_0(k1 - a - lane)) &
        bits_at_lea(x.sw, x.bit0 + a + at);
    const uint8_t *pl = pp + at / 32 * PW;
    uint32_t p[8];
    load4(p, pl);
    if (C > 1)
      load4(p + 4, pl + 16);
    uint32_t t = 0; /* the sum of 2^j x the fitting chunks of plane j */
    IBP_UNROLL
    for (int j = (C == 1 ? 4 : C == 2 ? 5 : C == 4 ? 6 : 7) - 1; j >= 0; j--)
      t = 2 * t + ibp_dev_popc(f & p[j]);
    gone += t;
  }
  IBP_MARK(MARK_PLANES_END);
  const uint32_t end = hi * BLOCK < R ? hi * BLOCK : R, start = lo * BLOCK;
  return (end > start ? 8 * (end - start) : 0) - ibp_dev_warp_sum(gone);
}

/* A lane's block before the warp scan, from its plan pl and its fit bits
 * f: per word, 0xFF in the bytes whose chunk fits (fit), per byte the bits
 * the chunks before it in the word do not carry, summed (pre: chunks of 1
 * and 2 bytes), where the word's payload starts in the block's (off).
 * INSIDE: the block lies inside R (a full step's, a group's), where the
 * plan's short bits are 0.  PAIRS (chunks of 1 and 2 bytes, block_out's
 * pairs): off[1] and off[3] the bits words 0 and 2 drop instead.  Returns
 * the block's payload bits. */
template <unsigned C, bool INSIDE = false, bool PAIRS = true>
IBP_DEV uint32_t block_prep(const uint8_t *pl, uint32_t f, uint32_t fit[4],
                            uint32_t pre[4], uint32_t off[4]) {
  if (C >= 4) { /* a word is one chunk, or half of one: its counts */
    const uint32_t fw = word_fits<C>(f), n = word_bits<C>(pl, f);
    const uint32_t o = n * 0x01010100u; /* byte i: words 0 .. i-1's */
    IBP_UNROLL
    for (unsigned i = 0; i < 4; i++) { /* (8-byte chunks: 2 words, 1 prmt) */
      fit[i] = ibp_dev_prmt(fw, 0, 0x8888u + 0x1111u * (C == 8 ? i & 2 : i));
      pre[i] = 0;
    }
    off[0] = 0;
    off[1] = ibp_dev_prmt(o, 0, 0x4441u);
    off[2] = ibp_dev_prmt(o, 0, 0x4442u);
    off[3] = o >> 24;
    return off[3] + (n >> 24);
  }
  /* (the words' dropped bits summed, one dp4a a word) */
  uint32_t inv[4], shrt[4] = {0, 0, 0, 0}, d[4];
  load4(inv, pl + 2 * BLOCK);
  if (!INSIDE) /* (0 inside R) */
    load4(shrt, pl + 3 * BLOCK);
  IBP_UNROLL
  for (unsigned i = 0; i < 4; i++) {
    fit[i] = fit_bytes<C>(f, i);
    d[i] = dropped(fit[i], inv[i], shrt[i]);
    pre[i] = C == 1 ? d[i] : d[i] * 0x01010100u;
  }
  const uint32_t g1 = ibp_dev_dp4a(d[0], 0x01010101u, 0);
  const uint32_t g2 = ibp_dev_dp4a(d[1], 0x01010101u, g1);
  off[0] = 0;
  off[2] = 64 - g2;
  if (PAIRS) { /* (off[1], off[3] as they come: no subtraction) */
    const uint32_t d2 = ibp_dev_dp4a(d[2], 0x01010101u, 0);
    off[1] = g1;
    off[3] = d2;
    return 128 - g2 - ibp_dev_dp4a(d[3], 0x01010101u, d2);
  }
  const uint32_t g3 = ibp_dev_dp4a(d[2], 0x01010101u, g2);
  off[1] = 32 - g1;
  off[3] = 96 - g3;
  return 128 - ibp_dev_dp4a(d[3], 0x01010101u, g3);
}

/* The deposit's top stage, S - 1, unpredicated (block_out's FLAT); on
 * sm_120 ptxas spilled ibp_decompress with it, so there every stage stays
 * predicated. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 1200
#define TOP_STAGE_FLAT 1
#else
#define TOP_STAGE_FLAT 0
#endif

/* The block's 16 bytes, its payload from staged stream bit p on (S stages
 * of the deposit, warp-uniform; FLAT: the top one unpredicated -- not for
 * 1-byte chunks' stream without bitmap, whose loop came out 3 longer with
 * it, 5 and 3 shorter for 2- and 4- or 8-byte chunks). */
template <unsigned C, bool FLAT = TOP_STAGE_FLAT, bool PAIRS = true>
IBP_DEV ibp_dev_u128 block_out(const uint8_t *pl, const uint32_t *sw,
                               uint32_t p, unsigned S, const uint32_t fit[4],
                               const uint32_t pre[4], const uint32_t off[4]) {
  uint32_t x[4], y[4], e[4], m[4];
  /* PAIRS: words 0, 1 from p and words 2, 3 from p + off[2], each pair
   * from three staged words (word 1 starts off[1] <= 32 bits after word 0,
   * word 3 off[3] - off[2] <= 32 after word 2; for chunks of 1 and 2 bytes
   * off[1] and off[3] are the bits words 0 and 2 drop, block_prep's PAIRS);
   * else each word from two (a block decode's step but for 1-byte chunks:
   * with pairs there, ptxas spilled ibp_decompress on sm_90, 8 bytes) */
  if (PAIRS && C <= 2) {
    bits_pair_short(sw, p, off[1], x[0], x[1]);
    bits_pair_short(sw, p + off[2], off[3], x[2], x[3]);
  } else if (PAIRS) {
    bits_pair(sw, p, off[1], x[0], x[1]);
    bits_pair(sw, p + off[2], off[3] - off[2], x[2], x[3]);
  } else {
    IBP_UNROLL
    for (unsigned i = 0; i < 4; i++)
      x[i] = bits_at_lea(sw, p + off[i]);
  }
  IBP_UNROLL
  for (unsigned i = 0; i < 4; i++)
    y[i] = e[i] = spread_chunks<C>(x[i], pre[i]);
  /* the top stage, S - 1: its mask in the plan's row 4 whatever S is
   * (IBP_PLAN_STAGE_ROW), its shift 2^(S-1); FLAT: with no predicate (no
   * copy of y kept for it) -- S = 0 reads row 4 (the next block's first,
   * or the planes after the last block) and shifts by 0, so e = y whatever
   * that row holds */
  if (FLAT || S > 0) {
    load4(m, pl + 4 * BLOCK);
    const unsigned top = (1u << S) >> 1;
    IBP_UNROLL
    for (unsigned i = 0; i < 4; i++)
      e[i] = (y[i] & ~m[i]) | ((y[i] << top) & m[i]);
  }
  /* the others, s < S - 1, in row 5 + s */
  IBP_UNROLL
  for (int s = (int)max_stages<C>::value - 2; s >= 0; s--) {
    if ((unsigned)s + 1 < S) {
      load4(m, pl + (5 + s) * BLOCK);
      IBP_UNROLL
      for (unsigned i = 0; i < 4; i++)
        e[i] = (e[i] & ~m[i]) | ((e[i] << (1u << s)) & m[i]);
    }
  }
  uint32_t keep[4], val[4], out[4];
  load4(keep, pl);
  load4(val, pl + BLOCK);
  IBP_UNROLL
  for (unsigned i = 0; i < 4; i++)
    out[i] = (fit[i] & ((e[i] & keep[i]) | val[i])) | (~fit[i] & y[i]);
  return ibp_dev_u128{out[0], out[1], out[2], out[3]};
}

template <unsigned C, bool FULL, bool BLOCKWIDE, bool NB = false,
          bool GROUPED = false, bool LANE_FITS = GROUPED>
IBP_DEV uint32_t decode_step(const decode_ctx &x, uint32_t g, uint32_t pos) {
  IBP_MARK(GROUPED     ? MARK_GROUP_TSTEP
           : BLOCKWIDE ? (FULL ? MARK_BSTEP_FULL : MARK_BSTEP_PART)
                       : (FULL ? MARK_STEP_FULL : MARK_STEP_PART));
  /* (a block decode's step with the lane's fit bits: g is the lane's
   * block already) */
  const uint32_t b = BLOCKWIDE && LANE_FITS ? g : g + ibp_dev_lane();
  const uint32_t nb = x.nb, bit0 = x.bit0;
  const uint32_t *sw = x.sw;
  const unsigned S = plan_stages<C>(x.S);
  const bool live = FULL || b < nb;
  const uint32_t bl = live ? b : g; /* dead lanes read a live block */
  const uint8_t *pl = BLOCKWIDE || GROUPED
                          ? ibp_dev_at(x.plan, bl, (4 + S) * BLOCK)
                          : x.plan + bl * ((4 + S) * BLOCK);
  /* a block decode's step reads its words in pairs for 1-byte chunks only
   * (block_out's PAIRS: with them for every width ptxas spilled on sm_90) */
  constexpr bool pairs = !BLOCKWIDE || C == 1;
  uint32_t fit[4], pre[4], off[4];
  const uint32_t bits =
      block_prep<C, FULL, pairs>(pl,
                                 NB          ? 0xFFFFu
                                 : LANE_FITS ? lane_fits<C>(x.fw, bit0)
                                             : block_fits<C>(sw, bit0, bl),
                                 fit, pre, off);
  unsigned total;
  const uint32_t p = pos + ibp_dev_warp_exclusive_scan(live ? bits : 0, &total);
  constexpr bool flat = TOP_STAGE_FLAT && !(NB && C == 1);
  const ibp_dev_u128 v = block_out<C, flat, pairs>(pl, sw, p, S, fit, pre, off);
  if (FULL) {
    ibp_dev_st16(x.dst + (BLOCK * b - x.w0), v);
  } else if (live) {
    const uint32_t at0 = BLOCK * b;
    if (x.aligned && at0 >= x.w0 && at0 + BLOCK <= x.w1) {
      ibp_dev_st16(x.dst + (at0 - x.w0), v);
    } else { /* the window's bytes of it, one by one */
      const uint32_t out[4] = {v.x, v.y, v.z, v.w};
      const uint32_t hi = at0 + BLOCK < x.w1 ? at0 + BLOCK : x.w1;
      IBP_NO_UNROLL
      for (uint32_t at = at0 > x.w0 ? at0 : x.w0; at < hi; at++) {
        IBP_MARK(MARK_STORE_BYTES);
        const unsigned i = at - at0; /* no array: keep out of local memory */
        const uint32_t w = i < 4    ? out[0]
                           : i < 8  ? out[1]
                           : i < 12 ? out[2]
                                    : out[3];
        x.dst[at - x.w0] = (uint8_t)(w >> (8 * (i & 3)));
      }
    }
  }
  return pos + total;
}

/* A group's tensor's full step of two blocks a lane, 1-byte chunks: lane
 * l decodes blocks b and b + 1 (b = g + 2l: 64 blocks, 1024 bytes), its 32
 * fit bits from x.fw (lane_fits' word, x.bit0 mod 32 their shift), one
 * warp scan for both (half the scans, fit-bit reads and loop tests of
 * decode_step's GROUPED); returns the bit after the warp's blocks.  The
 * pair's payload bits come from its 32 chunks' bit planes (the plan's
 * group b / 2, docs/ARCHITECTURE.md "Large tensors"), so that block b +
 * 1's set-up waits until block b is out: with both blocks' set-ups before
 * the scan ptxas spilled on sm_86, sm_90 and sm_100. */
template <unsigned C>
IBP_DEV uint32_t decode_step_pair(const decode_ctx &x, uint32_t b,
                                  uint32_t pos) {
  IBP_MARK(MARK_GROUP_TSTEP2);
  const unsigned S = plan_stages<C>(x.S);
  const uint32_t stride = (4 + S) * BLOCK;
  const uint8_t *pa = ibp_dev_at(x.plan, b, stride), *pb = pa + stride;
  const uint32_t f = ibp_dev_funnel_r(x.fw[0], x.fw[1], x.bit0);
  uint32_t pl[4]; /* (the planes follow the x.nb blocks) */
  load4(pl, ibp_dev_at(x.plan, x.nb * (stride / 8) + b, 8));
  uint32_t gone = 0;
  IBP_UNROLL
  for (int i = 3; i >= 0; i--)
    gone = 2 * gone + ibp_dev_popc(f & pl[i]);
  uint32_t fit[4], pre[4], off[4];
  const uint32_t na = block_prep<C, true>(pa, f, fit, pre, off);
  unsigned total;
  const uint32_t p = pos + ibp_dev_warp_exclusive_scan(256 - gone, &total);
  uint8_t *d = x.dst + BLOCK * b;
  ibp_dev_st16(d, block_out<C>(pa, x.sw, p, S, fit, pre, off));
  block_prep<C, true>(pb, f >> 16, fit, pre, off);
  ibp_dev_st16(d + BLOCK, block_out<C>(pb, x.sw, p + na, S, fit, pre, off));
  return pos + total;
}

/* The SASS count (bench/kernel_sass.sh) builds the kernels with one chunk
 * width only, so that the fatbin holds one decode loop. */
#ifdef IBP_KERNEL_ONLY_WIDTH
#define IBP_WIDTH_OK(c) ((c) == IBP_KERNEL_ONLY_WIDTH)
#else
#define IBP_WIDTH_OK(c) 1
#endif

/* The context of j's decode, its stream staged at sw with bit0 its first
 * bit; blocks up to `end`. */
IBP_DEV decode_ctx job_ctx(const tensor_job *j, const uint32_t *sw,
                           uint32_t bit0, uint32_t end) {
  return decode_ctx{
      j->plan, j->dst, sw,
      j->w0,   j->w1,  bit0,
      end,     j->S,   (((uintptr_t)j->dst - j->w0) & (BLOCK - 1)) == 0,
      nullptr};
}

/* Decodes blocks [g, x.nb) of the window, the first from stream bit pos
 * on.  Steps whose 32 blocks all lie inside the window and land 16-byte
 * aligned take the full path (the common one: docs/ARCHITECTURE.md "The
 * decode plan"), the others test each lane's block.  BLOCKWIDE (a round of
 * a block decode) only tells the count marks apart. */
template <unsigned C, bool BLOCKWIDE, bool NB = false>
IBP_DEV uint32_t decode_blocks(const decode_ctx &x, uint32_t g, uint32_t pos) {
  const uint32_t end = x.nb;
  const uint32_t full_end = x.w1 / BLOCK; /* blocks below end inside */
  if (x.aligned) {
    if (g * BLOCK < x.w0 && g < end) { /* the first starts before w0 */
      pos = decode_step<C, false, BLOCKWIDE, NB>(x, g, pos);
      g += 32;
    }
    const uint32_t lim = full_end < end ? full_end : end; /* one test a step */
    if (BLOCKWIDE && C == 1 && !NB) {
      /* a block decode's full steps of 1-byte chunks: the lane's fit bits
       * from a word pointer that moves on by whole words a step
       * (lane_fits), the lane's block b the loop's counter (decode_step's
       * g with LANE_FITS) */
      const uint32_t lane = ibp_dev_lane();
      decode_ctx y = x;
      y.bit0 = x.bit0 + (g + lane) * (16 / C);
      y.fw = x.sw + (y.bit0 >> 5);
      uint32_t b = g + lane;
      if (g + 32 <= lim) /* (lim - 32 then does not wrap) */
        for (const uint32_t last = lim - 32 + lane; b <= last;
             b += 32, y.fw += 16 / C)
          pos = decode_step<C, true, BLOCKWIDE, NB, false, true>(y, b, pos);
      g = b - lane;
    } else {
      for (; g + 32 <= lim; g += 32)
        pos = decode_step<C, true, BLOCKWIDE, NB>(x, g, pos);
    }
    IBP_MARK(MARK_FULL_END);
  }
  for (; g < end; g += 32) /* unaligned: all; else the last step, if any */
    pos = decode_step<C, false, BLOCKWIDE, NB>(x, g, pos);
  IBP_MARK(MARK_DECODE_END);
  return pos;
}

/* Decodes the window [w0, w1) of a compressed tensor whose whole stream is
 * staged (its group waited for, the other lanes synchronised).  NB: its
 * stream has no bitmap (docs/FORMAT.md §9.1).  Returns the stream bit
 * after the window's blocks. */
template <unsigned C, bool NB>
IBP_DEV uint32_t decode_ibp(const tensor_job *j) {
  const uint32_t nch = NB ? 0u : (j->R + C - 1) / C, b0 = j->w0 / BLOCK;
  const decode_ctx x =
      job_ctx(j, (const uint32_t *)job_stage(j),
              8 * (uint32_t)((uintptr_t)j->stream & (PIECE - 1)),
              (j->w1 + BLOCK - 1) / BLOCK);
  return decode_blocks<C, false, NB>(
      x, b0, x.bit0 + nch + blocks_bits<C, NB>(x, 0, b0));
}

template <unsigned C> IBP_DEV uint32_t decode_tensor(const tensor_job *j) {
  if (!IBP_WIDTH_OK(C))
    return 0;
  IBP_MARK(MARK_DECODE);
  const ibp_kernel_stage *st = j->stage; /* one tensor: never a group */
  if (st && ibp_dev_ldg_u32(&st->no_bitmap)) {
    IBP_MARK(MARK_DECODE_NB);
    return decode_ibp<C, true>(j);
  }
  return decode_ibp<C, false>(j);
}

/* Stream bits of j's blocks past its window (NB: no bitmap). */
template <unsigned C, bool NB> IBP_DEV uint32_t rest_bits(const tensor_job *j) {
  if (!IBP_WIDTH_OK(C))
    return 0;
  const decode_ctx x =
      job_ctx(j, (const uint32_t *)job_stage(j),
              8 * (uint32_t)((uintptr_t)j->stream & (PIECE - 1)),
              (j->w1 + BLOCK - 1) / BLOCK);
  return blocks_bits<C, NB>(x, x.nb, (j->R + BLOCK - 1) / BLOCK);
}

IBP_DEV uint32_t job_rest_bits(const tensor_job *j, bool nb) {
  switch (j->c) {
  case 1:
    return nb ? rest_bits<1, true>(j) : rest_bits<1, false>(j);
  case 2:
    return nb ? rest_bits<2, true>(j) : rest_bits<2, false>(j);
  case 4:
    return nb ? rest_bits<4, true>(j) : rest_bits<4, false>(j);
  default:
    return nb ? rest_bits<8, true>(j) : rest_bits<8, false>(j);
  }
}

/* ORs the exponent stage's field (docs/FORMAT.md §9) into the window that
 * j's IBP part was decoded to (the job read from its slot); b: the stream
 * bit after the window's blocks (the stage part starts after those past
 * it, at the end of the IBP part). */
IBP_DEV void decode_stage(const tensor_job *j, uint32_t b) {
  IBP_MARK(MARK_STAGE_JOB);
  const ibp_kernel_stage *st = j->stage;
  if ((j->w1 + BLOCK - 1) / BLOCK < (j->R + BLOCK - 1) / BLOCK) {
    IBP_MARK(MARK_STAGE_PART);
    b += job_rest_bits(j, ibp_dev_ldg_u32(&st->no_bitmap) != 0);
  }
  /* (the stage's set-up below is its own code, not the count's BITS_END) */
  IBP_MARK(MARK_STAGE_REST);
  stage_exp_job s;
  s.sw = (const uint32_t *)job_stage(j);
  s.table = st->table; /* (L1-cached global memory) */
  s.counts = st->counts;
  s.dst = j->dst;
  s.bit0 = b;
  s.end = 8 * ((uint32_t)((uintptr_t)j->stream & (PIECE - 1)) + j->len);
  s.w0 = j->w0;
  s.w1 = j->w1;
  /* (dtype, segment_log2, length_bits, values: one 16-byte load) */
  const ibp_dev_u128 k = ibp_dev_ldg_u128((const uint8_t *)&st->dtype);
  s.segment_log2 = k.y;
  s.length_bits = k.z;
  s.values = k.w;
  stage_exp_warp(s, k.x);
}

/* decode_group for tensors of a whole number of steps (R a multiple of
 * 512): no step crosses a tensor, so each tensor takes the full steps of
 * one tensor's decode (docs/ARCHITECTURE.md "Groups of small tensors"),
 * from its own first bit; those steps count under a mark of their own
 * (MARK_GROUP_TSTEP: decode_step's GROUPED, nothing else).  The step's
 * context is made once a group: a tensor moves its destination and first
 * bit on (what the steps keep live anyway, nothing more across them). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 1200
template <unsigned C> IBP_DEV void decode_group_steps(const tensor_job *j) {
  /* lane k holds tensor k's first bit, 8 * (offs[k] - offs[0]) past the
   * first tensor's (a job of one tensor has no offsets): one shuffle a
   * tensor */
  const unsigned lane = ibp_dev_lane(), n = j->count;
  uint32_t first = 8 * (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  if (n > 1)
    first +=
        8 * (uint32_t)(ibp_dev_ldg_u64(
                           (const uint8_t *)(j->offs + (lane < n ? lane : 0))) -
                       ibp_dev_ldg_u64((const uint8_t *)j->offs));
  const uint32_t R = j->R;
  decode_ctx x = {
      j->plan, j->dst, (const uint32_t *)job_stage(j), 0, R, 0, R / BLOCK, j->S,
      true,    nullptr};
  if (C == 1 && R % (2 * SPAN) == 0) { /* two blocks a lane */
    IBP_MARK(MARK_GROUP_PAIRS);
    for (uint32_t t = 0; t < n; t++, x.dst += R) {
      IBP_MARK(MARK_GROUP_TENSOR);
      const uint32_t bit0 = ibp_dev_shfl(first, (int)t);
      x.bit0 = bit0 + lane * 32; /* the lane's 32 fit bits */
      x.fw = x.sw + ibp_dev_shr(x.bit0, 5);
      uint32_t pos = bit0 + R / C;
      /* (the lane's first block b: b < R / 16 as the step's first is) */
      for (uint32_t b = 2 * lane; b < R / BLOCK; b += 64, x.fw += 32)
        pos = decode_step_pair<C>(x, b, pos);
      IBP_MARK(MARK_GROUP_TENSOR_END);
    }
    IBP_MARK(MARK_GROUP_END);
    return;
  }
  for (uint32_t t = 0; t < n; t++, x.dst += R) {
    IBP_MARK(MARK_GROUP_TENSOR);
    const uint32_t bit0 = ibp_dev_shfl(first, (int)t);
    x.bit0 = bit0 + lane * (16 / C);      /* the lane's (lane_fits) */
    x.fw = x.sw + ibp_dev_shr(x.bit0, 5); /* (one shift and one LEA) */
    uint32_t pos = bit0 + R / C;
    uint32_t g = 0; /* (R >= SPAN: a step at least) */
    do {
      pos = decode_step<C, true, false, false, true>(x, g, pos);
      g += 32;
      x.fw += 16 / C;
    } while (g < R / BLOCK);
    IBP_MARK(MARK_GROUP_TENSOR_END);
  }
  IBP_MARK(MARK_GROUP_END);
}
#else
/* sm_120: the context read from the slot once a tensor (ptxas spilled
 * ibp_decompress with it made once a group: decode-plan-13) */
template <unsigned C> IBP_DEV void decode_group_steps(const tensor_job *j) {
  /* lane k holds tensor k's first bit, 8 * (offs[k] - offs[0]) past the
   * first tensor's (a job of one tensor has no offsets): one shuffle a
   * tensor */
  const unsigned lane = ibp_dev_lane(), n = j->count;
  uint32_t first = 8 * (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  if (n > 1)
    first +=
        8 * (uint32_t)(ibp_dev_ldg_u64(
                           (const uint8_t *)(j->offs + (lane < n ? lane : 0))) -
                       ibp_dev_ldg_u64((const uint8_t *)j->offs));
  for (uint32_t t = 0; t < n; t++) {
    IBP_MARK(MARK_GROUP_TENSOR);
    const uint32_t bit0 = ibp_dev_shfl(first, (int)t);
    const uint32_t R = j->R;
    decode_ctx x = {j->plan,
                    j->dst + t * R,
                    (const uint32_t *)job_stage(j),
                    0,
                    R,
                    bit0 + lane * (16 / C), /* the lane's */
                    R / BLOCK,
                    j->S,
                    true,
                    (const uint32_t *)job_stage(j) +
                        ((bit0 + lane * (16 / C)) >> 5)};
    uint32_t pos = bit0 + R / C;
    for (uint32_t g = 0; g < R / BLOCK; g += 32, x.fw += 16 / C)
      pos = decode_step<C, true, false, false, true>(x, g, pos);
    IBP_MARK(MARK_GROUP_TENSOR_END);
  }
  IBP_MARK(MARK_GROUP_END);
}
#endif

/* Decodes a group of j->count whole tensors (R a multiple of 16, their
 * streams adjacent and staged whole, the destination 16-byte aligned) in
 * flat steps: lane l decodes block g + l of the group, tensor i's block b
 * (i = (g + l) / (R / 16)), so one step covers the end of one tensor and
 * the start of the next.  Each lane finds its block's payload bit with a
 * scan segmented at tensor starts: the warp scan less its value at the
 * tensor's first lane of the step, plus, for the tensor begun in an
 * earlier step, that step's carry.  Tensors of a whole number of steps
 * take decode_group_steps. */
template <unsigned C> IBP_DEV void decode_group(const tensor_job *j) {
  if (!IBP_WIDTH_OK(C))
    return;
  IBP_MARK(MARK_GROUP);
  if (j->R % SPAN == 0) {
    decode_group_steps<C>(j);
    return;
  }
  IBP_MARK(MARK_GROUP_FLAT);
  /* few registers live across the steps: the job's pointers are read from
   * its slot (shared memory) where they are used */
  const uint32_t nb = j->count * (j->R / BLOCK);
  const uint32_t *sw = (const uint32_t *)job_stage(j);
  /* tensor i's first bit: 8 * (offs[i] - head) */
  const uint32_t head = (uint32_t)ibp_dev_ldg_u64((const uint8_t *)j->offs) -
                        (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  const unsigned lane = ibp_dev_lane();
  /* lane k holds tensor k's first bit (a group has at most 32 tensors):
   * a step's lanes take theirs with one shuffle, no load */
  const uint32_t first =
      8 * ((uint32_t)ibp_dev_ldg_u64(
               (const uint8_t *)(j->offs + (lane < j->count ? lane : 0))) -
           head);
  /* lane l's block of a step, g + l, is block b of tensor i: i by a
   * multiply with m = floor((2^32 - 1) / bt) (exact for the blocks of a group:
   * ((g + l + 1) * m) >> 32 == (g + l) / bt below 2^15 blocks, bt < 2^10),
   * one division per group, none per step */
  const uint32_t bt = j->R / BLOCK, m = 0xFFFFFFFFu / bt;
  const uint8_t *plan = j->plan;
  uint8_t *dst = j->dst;
  const uint32_t pay = j->R / C;
  const unsigned S = plan_stages<C>(j->S);
  uint32_t carry = 0;
  for (uint32_t g = 0; g < nb; g += 32) {
    IBP_MARK(MARK_GROUP_STEP);
    const uint32_t at = g + lane;
    const uint32_t i = ibp_dev_umulhi(at + 1, m), b = at - i * bt;
    const bool live = at < nb;
    const uint32_t il = live ? i : 0, bl = live ? b : 0;
    const uint32_t base = ibp_dev_shfl(first, (int)il);
    const uint8_t *pl = plan + bl * ((4 + S) * BLOCK);
    uint32_t fit[4], pre[4], off[4];
    uint32_t bits =
        block_prep<C, true>(pl, block_fits<C>(sw, base, bl), fit, pre, off);
    bits = live ? bits : 0;
    unsigned total;
    const uint32_t ex = ibp_dev_warp_exclusive_scan(bits, &total);
    const bool before = b > lane; /* the tensor began in an earlier step */
    const uint32_t within = ex -
                            ibp_dev_shfl(ex, before ? 0 : (int)(lane - b)) +
                            (before ? carry : 0);
    carry = ibp_dev_shfl(within + bits, 31);
    const ibp_dev_u128 v =
        block_out<C>(pl, sw, base + pay + within, S, fit, pre, off);
    if (live)
      ibp_dev_st16(dst + BLOCK * at, v);
  }
  IBP_MARK(MARK_GROUP_END);
}

/* Whether j is a group's job (WHOLE_STEPS in its c: group_lookup's job of
 * one tensor, decoded as a group). */
IBP_DEV bool job_grouped(const tensor_job *j) {
  return j->count > 1 || j->c > 8;
}

/* Decodes j, a group's job (job_grouped). */
IBP_DEV void warp_decode_group(const tensor_job *j) {
  switch (j->c & 15u) {
  case 1:
    decode_group<1>(j);
    break;
  case 2:
    decode_group<2>(j);
    break;
  case 4:
    decode_group<4>(j);
    break;
  default:
    decode_group<8>(j);
  }
}

/* Decodes j, a job of one tensor (not job_grouped); returns the stream bit
 * after its window's blocks (where a coding stage's part starts, for
 * decode_stage: docs/FORMAT.md §9). */
IBP_DEV uint32_t warp_decode_tensor(const tensor_job *j) {
  switch (j->c) {
  case 1:
    return decode_tensor<1>(j);
  case 2:
    return decode_tensor<2>(j);
  case 4:
    return decode_tensor<4>(j);
  default:
    return decode_tensor<8>(j);
  }
}

/* ---- decoding one tensor with a whole block (docs/ARCHITECTURE.md
 * "Large tensors") ----------------------------------------------------------
 */

#define ROUND_STEPS IBP_KERNEL_ROUND_STEPS
#define ROUND_TOTALS 64u /* bytes: a word per warp (at most 16) */

/* Stages host bytes [from, to) into stage (stage[0] holds host address
 * floor16(from)) with the whole block: 16-byte cp.async pieces, thread t
 * of the block the t-th piece of each block-wide step, each warp's
 * request line-aligned (a warp with no piece in range makes none), never
 * reading at or past `to`.  A piece starting
 * below lo_ok (the readable range) is read byte by byte.  Commits one
 * group per thread. */
IBP_DEV void block_stage(uint8_t *stage, uintptr_t from, uintptr_t to,
                         const uint8_t *lo_ok) {
  if (to > from) { /* offsets from the line below `from`: 32 bits */
    const uintptr_t line = from & ~(uintptr_t)(LINE - 1);
    const uint32_t first = (uint32_t)(from - line) & ~(PIECE - 1);
    const uint32_t last = (uint32_t)(to - 1 - line) & ~(PIECE - 1);
    const uint32_t end = (uint32_t)(to - line);
    const uint32_t span = PIECE * ibp_dev_block_threads();
    const uint32_t ok = (uintptr_t)lo_ok > line /* the readable range */
                            ? (uint32_t)((uintptr_t)lo_ok - line)
                            : 0;
    /* the thread's piece of each block-wide span, q (its warp's 512 bytes
     * from q & ~511 on: a warp with none in range makes no request, no
     * sector) */
    uint32_t q = PIECE * ibp_dev_thread();
    if ((q & ~(SPAN - 1)) <= last) {
      /* the first span: the only one whose pieces may start below the
       * readable range (ok <= from - line < LINE, the others' pieces start
       * at SPAN or later) */
      IBP_MARK(MARK_BSTAGE_FIRST);
      const uint32_t o = q < first ? first : q > last ? last : q;
      const unsigned n = end - o < PIECE ? end - o : PIECE;
      if (o >= ok) {
        ibp_dev_cp_async16(stage + (o - first), (const void *)(line + o), n);
      } else { /* the readable range starts inside this piece */
        IBP_MARK(MARK_BSTAGE_EDGE);
        IBP_NO_UNROLL /* a rare path: loads in flight would cost registers */
            for (uint32_t a = (uint32_t)(from - line); a < o + n; a++) {
          IBP_MARK(MARK_BSTAGE_BYTES);
          stage[a - first] = ibp_dev_ld_host_u8((const uint8_t *)(line + a));
        }
      }
      /* the later spans' requests before the one of the last piece (the
       * only piece that may be short), of whole pieces (q >= SPAN > first) */
      const uint32_t fin = last & ~(SPAN - 1), lim = fin + (q & (SPAN - 1));
      for (q += span; q < lim; q += span) {
        IBP_MARK(MARK_BSTAGE_STEP);
        ibp_dev_cp_async16(stage + (q - first), (const void *)(line + q),
                           PIECE);
      }
      /* that request, when a later span holds it, by its warp (lanes past
       * the last piece read it again) */
      IBP_MARK(MARK_BSTAGE_LAST);
      if (fin >= span && (q & ~(SPAN - 1)) == fin) {
        const uint32_t p = q < last ? q : last;
        const unsigned m = end - p < PIECE ? end - p : PIECE;
        ibp_dev_cp_async16(stage + (p - first), (const void *)(line + p), m);
      }
    }
  }
  IBP_MARK(MARK_BSTAGE_END);
  ibp_dev_cp_async_commit();
}

/* Waits for the block's pieces of the last block_stage. */
IBP_DEV void block_staged() {
  ibp_dev_cp_async_wait(0);
  ibp_dev_syncthreads();
}

/* Copies j's window from the original with every warp of the block, each
 * a part starting at a 512-byte boundary of the host range (so no sector
 * is read by two warps). */
IBP_DEV void block_copy_raw(const tensor_job *j) {
  const unsigned W = ibp_dev_warps_per_block(), w = ibp_dev_warp_in_block();
  const uintptr_t src = (uintptr_t)(j->orig + j->w0);
  const uint64_t len = j->w1 - j->w0;
  const uintptr_t base = src & ~(uintptr_t)(SPAN - 1);
  /* (spans: at most 2^24, in 32 bits; part 64) */
  const uint32_t spans = (uint32_t)((src - base + len + SPAN - 1) / SPAN);
  const uint64_t part = (uint64_t)((spans + W - 1) / W) * SPAN;
  const uint64_t a = min_u64(max_u64(base + w * part, src) - src, len);
  const uint64_t b = min_u64(max_u64(base + (w + 1) * part, src) - src, len);
  if (b > a)
    warp_copy_raw(j->dst + a, (const uint8_t *)src + a, b - a, j->raw_lo,
                  j->raw_hi);
}

/* Where a block decode stands: the first block of the next round, and
 * that block's first payload bit.  Each warp keeps its copy in its second
 * job slot (unused by a block decode) and reads it back after each
 * round's decode, so that nothing else stays live across the decode. */
typedef struct round_state {
  uint32_t rb, payload;
} round_state;

IBP_DEV round_state *warp_round() {
  return (round_state *)(warp_slots() + 1);
}

/* One round of j's block decode: W x n x 32 blocks of 16 bytes from
 * rs->rb on (n = ceil(ROUND_STEPS / W)), warp w the w-th n x 32 of them.
 * The round's fit bits are staged, each warp sums its blocks' payload
 * bits, a block-level scan of the warps' sums gives each warp its first
 * payload bit, then the round's payload is staged and every warp decodes
 * its blocks.  The round buffer (IBP_KERNEL_ROUND_BYTES of shared memory
 * after the warps' slots): the warps' sums, the fit bits, the payload.
 * Returns whether rounds remain. */
template <unsigned C> IBP_DEV int block_round(const tensor_job *j) {
  const unsigned W = ibp_dev_warps_per_block(), w = ibp_dev_warp_in_block();
  round_state *rs = warp_round();
  uint8_t *round = ibp_dev_shared() + IBP_KERNEL_JOB_BYTES * W;
  uint32_t *sums = (uint32_t *)round;
  uint8_t *fits = round + ROUND_TOTALS;
  const uint32_t fits_max = IBP_KERNEL_ROUND_BLOCKS * 2 + 64; /* bytes */
  IBP_MARK(MARK_ROUND);
  const uint32_t F = 16 / C; /* fit bits a block */
  const uintptr_t s = (uintptr_t)j->stream, s_end = s + j->len;
  const uint32_t b0 = j->w0 / BLOCK, b1 = (j->w1 + BLOCK - 1) / BLOCK;
  const uint32_t per_warp = 32 * ((ROUND_STEPS + W - 1) / W);
  const uint32_t rb = rs->rb, payload = rs->payload;
  const uint32_t re = (uint32_t)min_u64(rb + W * per_warp, b1);
  const uint32_t wb = (uint32_t)min_u64(rb + w * per_warp, re);
  const uint32_t we = (uint32_t)min_u64(wb + per_warp, re);
  const uintptr_t f0 = s + rb * F / 8;
  block_stage(fits, f0, min_u64(s + ((uint64_t)re * F + 7) / 8, s_end),
              j->lo_ok);
  block_staged();
  /* block b's fit bits (stream bit b * F) are bit bit0 + b * F of fits */
  const decode_ctx x =
      job_ctx(j, (const uint32_t *)fits,
              (uint32_t)(8 * (s - (f0 & ~(uintptr_t)(PIECE - 1)))), we);
  const uint32_t mine = planes_bits<C>(x, wb, we, j->R);
  if (ibp_dev_lane() == 0)
    sums[w] = mine;
  ibp_dev_syncthreads();
  uint32_t before = 0, all = 0;
  for (unsigned i = 0; i < W; i++) {
    IBP_MARK(MARK_SUMS);
    const uint32_t t = sums[i];
    before += i < w ? t : 0;
    all += t;
  }
  IBP_MARK(MARK_SUMS_END);
  rs->rb = re;
  rs->payload = payload + all;
  if (re > b0) {
    const uintptr_t p0 = s + payload / 8;
    block_stage(fits + fits_max, p0,
                min_u64(s + ((uint64_t)payload + all + 7) / 8, s_end),
                j->lo_ok);
    block_staged();
    IBP_MARK(MARK_ROUND_DECODE);
    if (we > b0) {
      /* (x made again from the job: fewer registers held across the
       * round's fetch) */
      ibp_dev_compiler_fence();
      const decode_ctx y =
          job_ctx(j, (const uint32_t *)fits,
                  (uint32_t)(8 * (s - (f0 & ~(uintptr_t)(PIECE - 1)))), we);
      uint32_t g = wb;
      uint32_t pos = 8 * fits_max + 8 * (uint32_t)(p0 & (PIECE - 1)) +
                     payload % 8 + before;
      if (g < b0) { /* the window starts in the warp's blocks */
        pos += planes_bits<C, false>(y, g, b0, j->R);
        g = b0;
      }
      decode_blocks<C, true>(y, g, pos);
    }
  }
  IBP_MARK(MARK_ROUND_END);
  ibp_dev_syncthreads(); /* the round buffer is free */
  ibp_dev_compiler_fence();
  return warp_round()->rb < (j->w1 + BLOCK - 1) / BLOCK;
}

/* Decodes j's window with every warp of the block, round by round. */
template <unsigned C> IBP_DEV void block_decode(const tensor_job *j) {
  if (!IBP_WIDTH_OK(C))
    return;
  round_state *rs = warp_round();
  rs->rb = 0;
  rs->payload = (j->R + C - 1) / C; /* the fit bits come first */
  while (block_round<C>(j)) {
  }
}

IBP_DEV void block_decode_tensor(const tensor_job *j) {
  switch (j->c) {
  case 1:
    block_decode<1>(j);
    break;
  case 2:
    block_decode<2>(j);
    break;
  case 4:
    block_decode<4>(j);
    break;
  default:
    block_decode<8>(j);
  }
}

/* Where the fetch of j ends.  Adjacent streams of a walk share the sector
 * where one ends and the next begins: when the warp decodes the next
 * tensor too (has_next) and its stream starts where j's ends, j's fetch
 * runs on to that sector's end and the next tensor takes those bytes over
 * (carry), so the sector crosses PCIe once.  Only when the next stream
 * reaches past that sector; a stream shorter than the rest of the sector
 * is fetched on its own. */
IBP_DEV uint32_t fetch_end(const tensor_job *j, int has_next,
                           const tensor_job *next) {
  const uintptr_t e = (uintptr_t)j->stream + j->len;
  const uintptr_t up = (e + 31) & ~(uintptr_t)31;
  if (has_next && (uintptr_t)next->stream == e && up > e && up < e + next->len)
    return j->len + (uint32_t)(up - e);
  return j->len;
}

/* Issues j's fetch (stream bytes [from, to) + IBP_KERNEL_STAGE_EXTRA);
 * commits one cp.async group. */
IBP_DEV void stage_job(const tensor_job *j) {
  warp_stage(job_stage(j), j->stream, j->from, j->to + IBP_KERNEL_STAGE_EXTRA,
             j->lo_ok);
}

/* Moves the bytes of next's stream that j's fetch staged (the first
 * next->from bytes) into next's buffer.  The buffers may be the same: all
 * lanes read before any writes. */
IBP_DEV void take_carry(const tensor_job *j, const tensor_job *next) {
  const unsigned lane = ibp_dev_lane();
  const uint32_t off_j = (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  const uint32_t off_n = (uint32_t)((uintptr_t)next->stream & (PIECE - 1));
  uint8_t v = lane < next->from ? job_stage(j)[off_j + j->len + lane] : 0;
  ibp_dev_syncwarp();
  if (lane < next->from)
    job_stage(next)[off_n + lane] = v;
}

/* ---- the kernels
 * --------------------------------------------------------------- */

/* Whether tensor i is served from its stream: compressed, not dirty, not
 * busy (its bits in word w = i / 32 of each map, at bit b = i % 32).  No
 * branch between the three loads: a group look-up's lanes ask at once. */
IBP_DEV uint32_t clean_coded(const ibp_decompress_args &a, uint64_t w,
                             uint32_t b) {
  const uint32_t *fl = a.flags, *di = a.dirty, *bu = a.busy;
  const uint32_t f = fl ? ibp_dev_ldg_u32(fl + w) : 0u;
  const uint32_t d = di ? ibp_dev_ldg_u32(di + w) : 0u;
  const uint32_t y = bu ? ibp_dev_ldg_u32(bu + w) : 0u;
  return ((f & ~(d | y)) >> b) & 1u;
}

/* Tensor t's cluster id (docs/FORMAT.md §4): b = 1, 2, 4 or 8 bits per
 * tensor, so an id never straddles a 32-bit word. */
IBP_DEV uint32_t cluster_of(const uint32_t *ids, uint32_t k, uint64_t t) {
  if (k <= 1)
    return 0;
  const uint32_t b = k <= 2 ? 1 : k <= 4 ? 2 : k <= 16 ? 4 : 8;
  const uint64_t at = t * b;
  uint32_t id =
      (ibp_dev_ldg_u32(ids + (at >> 5)) >> (at & 31)) & ((1u << b) - 1);
  return id < k ? id : 0; /* never outside the Masks */
}

/* A copy's range in a region: bytes [first_tensor * R + first_offset,
 * + length) to dst. */
typedef struct copy_range {
  uint64_t first_tensor, length;
  uint32_t first_offset;
  uint8_t *dst;
} copy_range;

/* Grows j, the job of tensor t (compressed, whole, R a multiple of 16,
 * its destination 16-byte aligned; off: its stream's offset, in_window:
 * read from the staged window), into a group of up to `most` tensors
 * (docs/ARCHITECTURE.md "Groups of small tensors"): lane l looks at tensor
 * t + 1 + l, which joins when every tensor before it joined and it is
 * compressed, clean, wholly inside the copy (rest: the copy's bytes from
 * tensor t on, at most 2^32 - 1), its stream starts where the one before it
 * ends, read from the same place, and the group's streams still fit a staging
 * buffer of cap bytes. */
IBP_DEV void group_job(const ibp_decompress_args &a, uint64_t t, uint32_t most,
                       uint32_t cap, uint32_t rest, tensor_job *j) {
  IBP_MARK(MARK_GROUPING);
  /* where tensor t's stream is read (read back from j: fewer registers
   * live across the three look-ups of a walk) */
  const int in_window = j->lo_ok != a.packed;
  const uint64_t off =
      (uint64_t)(j->stream - (in_window ? a.staged - a.staged_lo : a.packed));
  const unsigned lane = ibp_dev_lane();
  const uint64_t ti = t + 1 + lane;
  /* the stream's alignment, the fetch's run into the next stream's sector
   * and the 16 bytes the stream's reads may look past it */
  const uint32_t room =
      cap - (uint32_t)((uintptr_t)j->stream & (PIECE - 1)) - 32 - 16;
  uint32_t o = 0, end = 0; /* from off */
  int ok = 0;
  if (lane + 1 < most && ti < a.tensors && (lane + 2) * j->R <= rest) {
    const uint64_t at = ibp_dev_ldg_u64((const uint8_t *)(a.offsets + ti));
    const uint32_t len = ibp_dev_ldg_u32(a.lengths + ti);
    const int w = a.staged && at >= a.staged_lo && at + len <= a.staged_hi;
    ok = (at - off + len <= room) & (len != 0) & (w == in_window) &
         (int)clean_coded(a, ti >> 5, (uint32_t)ti & 31u);
    o = (uint32_t)(at - off);
    end = o + len;
  }
  /* the stream before it ends where it starts (lane 0: tensor t's) */
  const uint32_t prev = ibp_dev_shfl_up(end, 1);
  ok = ok && o == (lane ? prev : j->len);
  const uint32_t yes = ibp_dev_ballot(ok);
  const unsigned more = ibp_dev_popc(yes & ~(yes + 1)); /* the leading run */
  if (more == 0)
    return;
  const uint32_t len = ibp_dev_shfl(end, (int)more - 1);
  ibp_dev_syncwarp(); /* every lane has read j */
  j->count = 1 + more;
  j->len = len;
  j->to = len;
  j->w1 = j->R * (1 + more);
  j->offs = a.offsets + t;
}

/* The job of tensor t, compressed, whole inside the copy, in a region with
 * one cluster and no coding stage, R a multiple of 16 and its destination
 * dst 16-byte aligned, grown into a group of up to `most` tensors (all of
 * them whole inside the copy: group_units) in one look-up: lane
 * l looks at tensor t + l (its stream's offset and length, its bits), and
 * the job is the leading run of lanes whose tensor is compressed, clean,
 * wholly inside the copy, read from where tensor t's stream is read, its
 * stream starting where the one before it ends, and the group's streams
 * fitting a staging buffer of cap bytes (the conditions of unit_job and
 * group_job, docs/ARCHITECTURE.md "Groups of small tensors").  Returns 0,
 * the job not written, when tensor t is not compressed (or not clean): the
 * general look-up then makes its job. */
IBP_DEV int group_lookup(const ibp_decompress_args &a, uint8_t *dst, uint64_t t,
                         uint32_t most, uint32_t cap, uint32_t stage_off,
                         tensor_job *j) {
  const unsigned lane = ibp_dev_lane();
  const uint64_t ti = t + lane;
  const uint32_t R = a.tensor_bytes;
  uint64_t at = 0;
  uint32_t len = 0;
  int ok = 0, w = 0;
  if (lane < most) {
    at = ibp_dev_ldg_u64((const uint8_t *)(a.offsets + ti));
    len = ibp_dev_ldg_u32(a.lengths + ti);
    w = a.staged && at >= a.staged_lo && at + len <= a.staged_hi;
    ok = len && clean_coded(a, ti >> 5, (uint32_t)ti & 31u);
  }
  /* tensor t's stream: where the group is read from */
  const uint32_t at0_lo = ibp_dev_shfl((uint32_t)at, 0);
  const uint32_t at0_hi = ibp_dev_shfl((uint32_t)(at >> 32), 0);
  const uint64_t off = ((uint64_t)at0_hi << 32) | at0_lo;
  const int w0 = ibp_dev_shfl(w, 0);
  const uint8_t *stream = w0 ? a.staged + (off - a.staged_lo) : a.packed + off;
  /* the stream's alignment, the fetch's run into the next stream's sector
   * and the 16 bytes the stream's reads may look past it */
  const uint32_t room =
      cap - (uint32_t)((uintptr_t)stream & (PIECE - 1)) - 32 - 16;
  const uint32_t o = (uint32_t)(at - off), end = o + len;
  const uint32_t prev = ibp_dev_shfl_up(end, 1);
  ok = ok && (lane == 0 || (w == w0 && at - off + len <= room && o == prev));
  const uint32_t yes = ibp_dev_ballot(ok);
  if (!(yes & 1u))
    return 0;
  const unsigned n = ibp_dev_popc(yes & ~(yes + 1)); /* the leading run */
  const uint32_t glen = ibp_dev_shfl(end, (int)n - 1);
  ibp_dev_syncwarp(); /* no lane still reads the slot */
  j->plan = a.plan;
  j->R = R;
  j->c = a.chunk_bytes | (R % SPAN == 0 ? WHOLE_STEPS : 0u);
  j->S = a.plan_stages;
  j->stage_off = stage_off;
  j->stream = stream;
  j->lo_ok = w0 ? a.staged : a.packed;
  j->dst = dst;
  j->w0 = 0;
  j->w1 = R * n;
  j->len = glen;
  j->from = 0;
  j->to = glen;
  j->count = n; /* (orig, raw_lo, raw_hi: a raw copy's, never read) */
  j->offs = nullptr;
  if (n > 1)
    j->offs = a.offsets + t;
  return 1;
}

/* The job for unit t of region a's copy c (t == tensors: the tail), grown
 * into a group of up to `most` units where it can be (group_job; cap: the
 * bytes of a staging buffer); returns 1 when it is a compressed tensor (or
 * group) the warp decodes, 0 when it is copied raw from the original.
 * whole: how many tensors from t on may be grouped by group_lookup (all
 * of them whole inside the copy, in a region group_units allows; 0: none).
 * (a is read in place: the launch's parameter, or a batch's template in
 * device memory.) */
IBP_DEV int unit_job(const ibp_decompress_args &a, const copy_range &c,
                     uint64_t t, uint32_t most, uint32_t cap, uint8_t *stage,
                     tensor_job *j, uint32_t whole = 0) {
  if (whole) { /* (its own mark: only the units it may group run it) */
    IBP_MARK(MARK_GROUP_LOOKUP);
    const uint64_t at = (t - c.first_tensor) * a.tensor_bytes;
    if (group_lookup(a, c.dst + at - c.first_offset, t,
                     most < whole ? most : whole, cap,
                     (uint32_t)(stage - ibp_dev_shared()), j))
      return 1;
  }
  IBP_MARK(MARK_LOOKUP);
  const uint64_t R = a.tensor_bytes;
  const uint64_t g0 = c.first_tensor * R + c.first_offset, g1 = g0 + c.length;
  const uint64_t start = t * R;
  const uint64_t size = t < a.tensors ? R : a.tail_bytes;
  const uint64_t lo = max_u64(g0, start), hi = min_u64(g1, start + size);
  uint64_t off = 0, len = 0, mo = 0;
  uint32_t sid = ~0u; /* the cluster, when it has a coding stage */
  if (t < a.tensors) {
    off = ibp_dev_ldg_u64((const uint8_t *)(a.offsets + t));
    len = ibp_dev_ldg_u32(a.lengths + t);
    const uint32_t id = cluster_of(a.cluster_ids, a.clusters, t);
    mo = (uint64_t)id * a.plan_stride;
    if (a.stages && ibp_dev_ldg_u32(&a.stages[id].dtype))
      sid = id;
  }
  /* a stream the copy engine staged is read from device memory */
  const int in_window =
      a.staged && off >= a.staged_lo && off + len <= a.staged_hi;
  const uint8_t *stream =
      in_window ? a.staged + (off - a.staged_lo) : a.packed + off;
  ibp_dev_syncwarp(); /* no lane still reads the slot */
  *j = (tensor_job){a.plan + mo,
                    a.tensor_bytes,
                    a.chunk_bytes,
                    a.plan_stages,
                    (uint32_t)(stage - ibp_dev_shared()),
                    stream,
                    a.original + start,
                    in_window ? a.staged : a.packed,
                    c.dst + (lo - g0),
                    (uint32_t)(lo - start),
                    (uint32_t)(hi - start),
                    (uint32_t)len,
                    0,
                    (uint32_t)len,
                    1,
                    a.original,
                    a.original + a.tensors * R + a.tail_bytes,
                    {nullptr}};
  if (sid != ~0u)
    j->stage = a.stages + sid;
  /* One answer per warp: the dirty bits may change while the kernel runs
   * (libibp recompresses written tensors and clears them), and lanes that
   * disagreed would diverge around the warp collectives. */
  unsigned coded = t < a.tensors && len && clean_coded(a, t >> 5, t & 31u);
  coded = ibp_dev_shfl(coded, 0);
  if (coded && most > 1 && a.clusters <= 1 && !a.stages && R % BLOCK == 0 &&
      lo == start && hi == start + R &&
      (((uintptr_t)c.dst - g0) & (BLOCK - 1)) == 0)
    group_job(a, t, most, cap, (uint32_t)min_u64(g1 - start, 0xFFFFFFFFu), j);
  return (int)coded;
}

/* A warp's place in the launch's walks and in its walk.  It lives in the
 * warp's slots (shared memory) and is read back after each decode: in
 * registers it would stay live across the decode loop and cost it
 * registers (docs/ARCHITECTURE.md "The decode plan"). */
typedef struct walk_state {
  uint64_t next, units; /* the warp's next walk; the launch's */
  uint64_t warps;       /* the launch's (read here, not kept live) */
  uint64_t u, end;      /* the unit being decoded; the walk's end */
  uint32_t walk;        /* units per walk */
  uint32_t stage0;      /* the warp's first staging buffer (an offset in
                           shared memory) */
  uint32_t stage_bytes; /* per buffer */
  uint8_t buffers;      /* 1 or 2 */
  uint8_t slot;         /* j's job slot; n's and nn's follow, mod 3 */
  uint8_t cur, other;   /* j's buffer; n's */
  uint8_t nc, nnc, prefetch;
  /* batch_units: the launch's job list, and the job of the last unit */
  uint32_t count, k;
  const ibp_batch_job *jobs;
  const ibp_decompress_args *regions;
  uint32_t group_lo, group_hi; /* single_units: units_begin's range */
} walk_state;
static_assert(3 * sizeof(tensor_job) + sizeof(walk_state) <=
                  IBP_KERNEL_JOB_BYTES,
              "three jobs and the walk state per warp");

IBP_DEV walk_state *warp_walks(tensor_job *slots) {
  return (walk_state *)(slots + 3);
}
IBP_DEV uint8_t *walk_stage(const walk_state *ws, unsigned b) {
  return ibp_dev_shared() + ws->stage0 + b * ws->stage_bytes;
}

/* (s + k) % 3 for a slot s < 3 and k in 1, 2, from a table of 2-bit
 * entries: no division. */
IBP_DEV unsigned slot_after(unsigned s, unsigned k) {
  return ((k == 1 ? 0x09u : 0x12u) >> (2 * s)) & 3u;
}

/* Decodes units [ws->u, ws->end) of a launch in one warp: in a walk, unit
 * u+1's fetch is issued (two buffers) before unit u is decoded, and
 * decisions are made one unit further ahead, for fetch_end.  `units` maps
 * a unit to its job (single_units, batch_units below). */
template <typename Units>
IBP_DEV void walk_units(Units &units, walk_state *ws, tensor_job *slots) {
  uint64_t u = ws->u, u1 = ws->end;
  /* (the slots from ws->slot, 0: not kept live across the walks) */
  unsigned cur = 0, other = ws->buffers - 1, at = ws->slot;
  tensor_job *j = slots + at, *n = slots + slot_after(at, 1),
             *nn = slots + slot_after(at, 2);
  int jc = unit_of(units, u, u1 - u, ws->stage_bytes, walk_stage(ws, 0), j),
      nc = 0, staged = 0;
  IBP_MARK(MARK_WALK_FIRST);
  while (u < u1) {
    IBP_MARK(MARK_UNIT);
    if (!jc) {
      IBP_MARK(MARK_RAW);
      warp_copy_raw(j->dst, j->orig + j->w0, j->w1 - j->w0, j->raw_lo,
                    j->raw_hi);
      if (++u < u1)
        jc = unit_of_plain(units, u, u1 - u, ws->stage_bytes,
                           walk_stage(ws, cur), j);
      staged = 0;
      continue;
    }
    const uint64_t un = u + j->count; /* n's unit */
    if (!staged) {                    /* j's fetch (nothing of it prefetched) */
      IBP_MARK(MARK_NEXT);
      nc = un < u1 && unit_of(units, un, u1 - un, ws->stage_bytes,
                              walk_stage(ws, other), n);
      IBP_MARK(MARK_FETCH);
      j->to = fetch_end(j, nc, n);
      stage_job(j);
    }
    if (nc)
      n->from = j->to - j->len; /* carried over from j's fetch */
    int prefetch = nc && ws->buffers == 2, nnc = 0;
    if (prefetch) {
      IBP_MARK(MARK_PREFETCH);
      const uint64_t unn = un + n->count;
      nnc = unn < u1 && unit_of(units, unn, u1 - unn, ws->stage_bytes,
                                walk_stage(ws, cur), nn);
      IBP_MARK(MARK_FETCH);
      n->to = fetch_end(n, nnc, nn);
      stage_job(n);
    }
    /* the walk's state to shared memory, and back after the decode */
    IBP_MARK(MARK_WALK_SAVE);
    ibp_dev_syncwarp(); /* every lane has read it */
    ws->u = u;
    ws->end = u1;
    ws->slot = (uint8_t)at;
    ws->cur = (uint8_t)cur;
    ws->other = (uint8_t)other;
    ws->nc = (uint8_t)nc;
    ws->nnc = (uint8_t)nnc;
    ws->prefetch = (uint8_t)prefetch;
    units_save(units, ws);
    IBP_MARK(MARK_WAIT);
    ibp_dev_cp_async_wait(prefetch ? 1 : 0); /* j's fetch */
    ibp_dev_syncwarp(); /* ... and the other lanes' pieces of it */
    /* (a group never has a stage: its union holds the offsets) */
    if (job_grouped(j)) {
      warp_decode_group(j);
    } else { /* one tensor: the union's stage */
      const uint32_t b = warp_decode_tensor(j);
      /* the job read back from its slot: j not live across the decode */
      const tensor_job *k = slots + ws->slot;
      if (k->stage)
        decode_stage(k, b);
    }
    IBP_MARK(MARK_RESTORE);
    ibp_dev_syncwarp(); /* j's buffer is free: the next fetch reuses it */
    ibp_dev_compiler_fence();
    u = ws->u;
    u1 = ws->end;
    at = ws->slot;
    cur = ws->cur;
    other = ws->other;
    nc = ws->nc;
    nnc = ws->nnc;
    prefetch = ws->prefetch;
    units_restore(units, ws);
    j = slots + at;
    n = slots + slot_after(at, 1);
    nn = slots + slot_after(at, 2);
    if (nc && n->from)
      take_carry(j, n);
    const uint64_t after = u + j->count;
    if (after < u1) { /* the slots move on by one: j's is nn's now */
      at = slot_after(at, 1);
      tensor_job *const done = j;
      j = n;
      jc = nc;
      staged = prefetch;
      nc = nnc;
      n = nn;
      nn = done;
      other = cur;
      cur = cur ^ (ws->buffers - 1);
    }
    u = after;
  }
}

/* To the warp's next walk: every lane reads, then every lane writes the
 * same value. */
IBP_DEV void advance(walk_state *ws) {
  const uint64_t next = ws->next + ws->warps;
  ibp_dev_syncwarp();
  ws->next = next;
}

/* Dynamic shared memory: every warp's IBP_KERNEL_JOB_BYTES of job slots
 * (the jobs of a walk and the walk state live there, not in registers),
 * then every warp's staging buffers, `per_warp` bytes each.  Walks the
 * warp's walks of a launch of `units` units. */
template <typename Units>
IBP_DEV void warp_walks_all(Units &units, uint64_t nunits, uint32_t walk_len,
                            uint32_t stage_bytes, unsigned buffers) {
  tensor_job *slots = warp_slots();
  walk_state *ws = warp_walks(slots);
  const uint32_t walk = walk_len ? walk_len : 1;
  const uint32_t per_warp = buffers * stage_bytes;
  ibp_dev_syncwarp();
  ws->next = ibp_dev_warp_global();
  ws->warps = ibp_dev_warps_total();
  ws->units = nunits;
  ws->walk = walk;
  ws->stage0 = IBP_KERNEL_JOB_BYTES * ibp_dev_warps_per_block() +
               ibp_dev_warp_in_block() * per_warp;
  ws->stage_bytes = stage_bytes;
  ws->buffers = (uint8_t)buffers;
  units_begin(units, ws);
  for (uint64_t w; (w = ws->next) * ws->walk < ws->units;) { /* no division */
    const uint64_t u0 = w * ws->walk, u1 = min_u64(u0 + ws->walk, ws->units);
    IBP_MARK(MARK_WALK);
    ibp_dev_syncwarp();
    ws->u = u0;
    ws->end = u1;
    ws->slot = 0;
    ibp_dev_compiler_fence(); /* walk_units reads it back */
    walk_units(units, ws, slots);
    IBP_MARK(MARK_WALK_END);
    ibp_dev_syncwarp();
    advance(ws);
  }
}

/* Every unit of a launch of `nunits` decoded or copied by a whole block,
 * blocks grid-stride (docs/ARCHITECTURE.md "Large tensors").  Warp 0
 * makes the unit's job in its first slot and decides, for the block, to
 * decode it or copy it raw (one answer: the dirty bits may change while
 * the kernel runs, and warps that disagreed would miss each other's
 * barriers); every warp reads that job. */
template <typename Units>
IBP_DEV void block_units_all(Units &units, uint64_t nunits) {
  IBP_MARK(MARK_BLOCKS);
  tensor_job *j = (tensor_job *)ibp_dev_shared(); /* warp 0's slot */
  walk_state *ws = warp_walks(warp_slots());
  uint32_t *coded =
      (uint32_t *)(ibp_dev_shared() +
                   IBP_KERNEL_JOB_BYTES * ibp_dev_warps_per_block());
  for (uint64_t u = ibp_dev_block(); u < nunits;) {
    IBP_MARK(MARK_BUNIT);
    if (ibp_dev_warp_in_block() == 0) {
      const int c = unit_of_block(units, u, (uint8_t *)coded, j);
      IBP_MARK(MARK_BUNIT_JOB);
      if (ibp_dev_lane() == 0)
        *coded = (uint32_t)c;
    }
    ibp_dev_syncwarp(); /* every lane of the warp has read ws */
    ws->u = u;
    ws->units = nunits;
    units_save(units, ws);
    ibp_dev_syncthreads(); /* the job and the answer */
    if (*coded && !j->stage)
      block_decode_tensor(j);
    else /* (a tensor with a stage: ibp_kernels_plan_batch's fallback) */
      block_copy_raw(j);
    IBP_MARK(MARK_BUNIT_END);
    ibp_dev_syncthreads(); /* the job and the round buffer are free */
    ibp_dev_compiler_fence();
    u = ws->u + ibp_dev_grid_blocks();
    nunits = ws->units;
    units_restore(units, ws);
  }
}

/* x / d, in 32 bits where x fits (every copy below 4 GiB of its region);
 * the 64-bit division is a path of its own. */
IBP_DEV uint64_t div_u64(uint64_t x, uint32_t d) {
  if ((x >> 32) == 0)
    return (uint32_t)x / d;
  IBP_MARK(MARK_DIV64);
  return x / d;
}

/* The units of one copy: its tensors from a.first_tensor on. */
struct single_units {
  const ibp_decompress_args *a; /* the launch's (IBP_GRID_CONSTANT) */
  uint32_t group_lo, group_hi;  /* group_units' range (units_begin) */
};

/* The units that group_lookup may group, [lo, hi): tensors wholly inside
 * the copy, in a region of one cluster and no coding stage, R a multiple
 * of 16, their destination 16-byte aligned (docs/ARCHITECTURE.md "Groups
 * of small tensors"); none when the region allows none.  Decided once per
 * launch (at: the unit of the copy's last byte, (g1 - 1) / R). */
IBP_DEV single_units group_units(const ibp_decompress_args &a, uint64_t g1,
                                 uint64_t at) {
  const uint64_t R = a.tensor_bytes;
  const uint64_t t_hi = min_u64(at + (g1 - at * R == R), a.tensors);
  uint32_t hi = 0;
  if (a.clusters <= 1 && !a.stages && R % BLOCK == 0 &&
      (((uintptr_t)a.dst - a.first_offset) & (BLOCK - 1)) == 0 &&
      t_hi > a.first_tensor)
    hi = (uint32_t)min_u64(t_hi - a.first_tensor, 0xFFFFFFFFu);
  return single_units{&a, a.first_offset != 0, hi};
}

/* Its range to the warp's walk state: read back where unit_of needs it. */
IBP_DEV void units_begin(single_units &s, walk_state *ws) {
  ws->group_lo = s.group_lo;
  ws->group_hi = s.group_hi;
}

/* The job of unit u, a group of up to `most` units where it can be (cap:
 * the bytes of a staging buffer). */
template <bool G = true>
IBP_DEV int unit_of(single_units &s, uint64_t u, uint64_t most, uint32_t cap,
                    uint8_t *stage, tensor_job *j) {
  most = min_u64(most, 32);
  const ibp_decompress_args &a = *s.a;
  const copy_range c = {a.first_tensor, a.length, a.first_offset, a.dst};
  uint32_t whole = 0;
  if (G) {
    const walk_state *ws = warp_walks(warp_slots());
    const uint32_t lo = ws->group_lo, hi = ws->group_hi;
    whole = u >= lo && u < hi ? hi - (uint32_t)u : 0;
  }
  return unit_job(a, c, a.first_tensor + u, (uint32_t)most, cap, stage, j,
                  whole);
}
/* unit_of for a block decode: no group. */
IBP_DEV int unit_of_block(single_units &s, uint64_t u, uint8_t *stage,
                          tensor_job *j) {
  return unit_of<false>(s, u, 1, 0, stage, j);
}
IBP_DEV int unit_of_plain(single_units &s, uint64_t u, uint64_t most,
                          uint32_t cap, uint8_t *stage, tensor_job *j) {
  return unit_of<false>(s, u, most, cap, stage, j);
}
/* The launch's arguments are the kernel's parameter: addressed as
 * constants, nothing to keep -- but on sm_120, where ptxas spilled
 * ibp_decompress so (bench/README.md, decode-plan-13), their pointer is
 * kept in the walk state, not live in registers across the decode. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 1200
IBP_DEV void units_save(single_units &, walk_state *) {}
IBP_DEV void units_restore(single_units &, const walk_state *) {}
#else
IBP_DEV void units_save(single_units &s, walk_state *ws) {
  ws->regions = s.a;
}
IBP_DEV void units_restore(single_units &s, const walk_state *ws) {
  s.a = ws->regions;
}
#endif

/* At most 64 registers per thread (32 warps per SM), no spills, no stack:
 * the walk's and the round's state in shared memory and the launch's
 * arguments read in place leave the decode loop the rest.  The bound holds
 * on every architecture (sm_120 too: unbounded, ptxas now takes 66 for
 * the batch kernel; bounded, it spills nothing).  The build fails on a
 * spill or more than 64 registers (cmake/kernel_registers.cmake; docs/
 * ARCHITECTURE.md "The decode plan"). */
#if defined(__CUDA_ARCH__)
#define DECODE_BOUNDS __maxnreg__(64)
#else
#define DECODE_BOUNDS
#endif

IBP_KERNEL void DECODE_BOUNDS
ibp_decompress(IBP_GRID_CONSTANT const ibp_decompress_args a) {
  IBP_MARK(MARK_ENTRY);
  const uint64_t R = a.tensor_bytes;
  const uint64_t g0 = a.first_tensor * R + a.first_offset, g1 = g0 + a.length;
  if (a.length == 0)
    return;
  const uint64_t at = div_u64(g1 - 1, (uint32_t)R);
  const uint64_t last = at < a.tensors ? at : a.tensors;
  single_units su = group_units(a, g1, at);
  if (a.tensor_bytes >= IBP_KERNEL_BLOCK_R)
    block_units_all(su, last - a.first_tensor + 1);
  else
    warp_walks_all(su, last - a.first_tensor + 1, a.walk, a.stage_bytes,
                   a.stage_buffers == 2 ? 2 : 1);
}

/* The units of a batch: each job's tensors (a region's) or pieces of
 * IBP_BATCH_RAW_UNIT bytes (a raw host range), jobs in order.  `k` caches
 * the job of the last unit asked for: a walk asks in increasing order. */
struct batch_units {
  const walk_state *ws; /* the job list (read only) */
  uint32_t k;
};

IBP_DEV uint64_t job_first_unit(const batch_units &b, uint32_t i) {
  return ibp_dev_ldg_u64((const uint8_t *)&b.ws->jobs[i].first_unit);
}

/* Points b.k at the job of unit u. */
IBP_DEV void find_job(batch_units &b, uint64_t u) {
  const uint32_t k = b.k;
  if (u >= job_first_unit(b, k) &&
      (k + 1 == b.ws->count || u < job_first_unit(b, k + 1)))
    return;
  if (k + 1 < b.ws->count && u >= job_first_unit(b, k + 1) &&
      (k + 2 == b.ws->count || u < job_first_unit(b, k + 2))) {
    b.k = k + 1;
    return;
  }
  uint32_t lo = 0, hi = b.ws->count; /* the last job whose first unit <= u */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (job_first_unit(b, mid) <= u)
      lo = mid;
    else
      hi = mid;
  }
  b.k = lo;
}

IBP_DEV void units_save(batch_units &b, walk_state *ws) {
  ws->k = b.k;
}
IBP_DEV void units_begin(batch_units &, walk_state *) {}
IBP_DEV void units_restore(batch_units &b, const walk_state *ws) {
  b.k = ws->k;
  b.ws = ws; /* (the pointer not live in registers across the decode) */
}

IBP_DEV int unit_of(batch_units &b, uint64_t u, uint64_t most, uint32_t cap,
                    uint8_t *stage, tensor_job *j) {
  find_job(b, u);
  const ibp_batch_job *job = &b.ws->jobs[b.k];
  const uint64_t src = ibp_dev_ldg_u64((const uint8_t *)&job->src);
  uint8_t *dst = (uint8_t *)ibp_dev_ldg_u64((const uint8_t *)&job->dst);
  const uint32_t len = ibp_dev_ldg_u32(&job->length);
  const uint32_t region = ibp_dev_ldg_u32(&job->region);
  const uint64_t piece = u - job_first_unit(b, b.k);
  if (region == IBP_BATCH_RAW) {
    const uint64_t at = piece * IBP_BATCH_RAW_UNIT;
    const uint8_t *from = (const uint8_t *)src;
    ibp_dev_syncwarp(); /* no lane still reads the slot */
    *j = tensor_job{};
    j->orig = from + at;
    j->dst = dst + at;
    j->w0 = 0;
    j->w1 = (uint32_t)min_u64(IBP_BATCH_RAW_UNIT, len - at);
    j->raw_lo = from;
    j->raw_hi = from + len;
    j->count = 1;
    return 0;
  }
  const ibp_decompress_args &a = b.ws->regions[region];
  const uint32_t R = a.tensor_bytes;
  const copy_range c = {src / R, len, (uint32_t)(src % R), dst};
  /* a group stays inside its job */
  const uint64_t job_end =
      b.k + 1 < b.ws->count ? job_first_unit(b, b.k + 1) : b.ws->units;
  return unit_job(a, c, c.first_tensor + piece,
                  (uint32_t)min_u64(min_u64(most, job_end - u), 32), cap, stage,
                  j);
}

IBP_DEV int unit_of_block(batch_units &b, uint64_t u, uint8_t *stage,
                          tensor_job *j) {
  return unit_of(b, u, 1, 0, stage, j);
}
IBP_DEV int unit_of_plain(batch_units &b, uint64_t u, uint64_t most,
                          uint32_t cap, uint8_t *stage, tensor_job *j) {
  return unit_of(b, u, most, cap, stage, j);
}

IBP_KERNEL void DECODE_BOUNDS ibp_decompress_batch(ibp_batch_args b) {
  if (b.count == 0 || b.units == 0)
    return;
  walk_state *ws = warp_walks(warp_slots());
  ws->count = b.count;
  ws->jobs = b.jobs;
  ws->regions = b.regions;
  batch_units bu = {ws, 0};
  if (b.stage_buffers == 0) /* a block per unit */
    block_units_all(bu, b.units);
  else
    warp_walks_all(bu, b.units, b.walk, b.stage_bytes,
                   b.stage_buffers == 2 ? 2 : 1);
}

IBP_KERNEL void ibp_gather(ibp_gather_args a) {
  for (uint64_t r = ibp_dev_warp_global(); r < a.count;
       r += ibp_dev_warps_total()) {
    ibp_gather_range g = a.ranges[r];
    warp_copy_raw(a.dst + g.dst_offset, a.src + g.src_offset, g.length,
                  a.src + g.src_offset, a.src + g.src_offset + g.length);
  }
}

/* ---- the exponent stage on its own (ibp_kernels.h; docs/FORMAT.md §9.6)
 * -------------------------------------------------------------------------
 */

/* Tensor t of the launch, its cluster's table at tables. */
IBP_DEV void stage_exp_tensor(const ibp_stage_exp_args &a, uint64_t t,
                              const uint16_t *tables) {
  const uint32_t id = a.ids ? a.ids[t] : 0u;
  const ibp_kernel_stage *k = a.stages + id;
  const uint32_t dtype = ibp_dev_ldg_u32(&k->dtype);
  const uint8_t *s = a.streams + a.offsets[t];
  const uint32_t mis = (uint32_t)((uintptr_t)s & 3u);
  stage_exp_job j;
  j.sw = (const uint32_t *)(s - mis);
  j.table = tables + id * IBP_KERNEL_STAGE_TABLE;
  j.counts = k->counts; /* (L1-cached global memory) */
  j.dst = a.dst + t * (a.w1 - a.w0);
  j.bit0 = 8 * mis + a.first_bits[t];
  j.end = 8 * (mis + a.lengths[t]);
  j.w0 = a.w0;
  j.w1 = a.w1;
  j.values = ibp_dev_ldg_u32(&k->values);
  j.segment_log2 = ibp_dev_ldg_u32(&k->segment_log2);
  j.length_bits = ibp_dev_ldg_u32(&k->length_bits);
  stage_exp_warp(j, dtype);
}

IBP_KERNEL void DECODE_BOUNDS
ibp_stage_exp(IBP_GRID_CONSTANT const ibp_stage_exp_args a) {
  IBP_MARK(MARK_ENTRY);
  uint32_t *tw = (uint32_t *)ibp_dev_shared();
  const uint32_t per = IBP_KERNEL_STAGE_TABLE / 2u; /* words per table */
  for (uint32_t i = ibp_dev_thread(); i < a.k * per;
       i += ibp_dev_block_threads()) {
    IBP_MARK(MARK_EXP_TABLE);
    tw[i] =
        ibp_dev_ldg_u32((const uint32_t *)a.stages[i / per].table + i % per);
  }
  ibp_dev_syncthreads();
  for (uint64_t t = ibp_dev_warp_global(); t < a.tensors;
       t += ibp_dev_warps_total()) {
    IBP_MARK(MARK_EXP_TENSOR);
    stage_exp_tensor(a, t, (const uint16_t *)tw);
  }
}
