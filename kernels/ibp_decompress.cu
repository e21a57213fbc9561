/*
 * libibp's GPU kernels (launch ABI: ibp_kernels.h; format: docs/FORMAT.md).
 * Kernel bodies use only the ibp_dev_* helpers (ibp_dev.h), so this file
 * also compiles for the CPU against the SIMT emulator.
 *
 * Layers: warp routines (aligned copy, staging, decode of one tensor) /
 * kernels (a warp per unit, grid-stride) / host planning (plan.c).
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

typedef unsigned long long ull;

IBP_DEV uint64_t min_u64(uint64_t a, uint64_t b) {
  return a < b ? a : b;
}
IBP_DEV uint64_t max_u64(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}

/* ---- raw copy: host [src, src+len) -> device dst ------------------------ */

/* Stores the bytes [lo, hi) of the 16-byte piece at host address p. */
IBP_DEV void store_piece(uint8_t *dst, uintptr_t src, uintptr_t p, uintptr_t lo,
                         uintptr_t hi, ibp_dev_u128 v) {
  for (uintptr_t a = lo; a < hi; a++) {
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
      for (uintptr_t a = lo; a < hi; a++)
        dst[a - src] = ibp_dev_ld_host_u8((const uint8_t *)a);
    }
  }
  ibp_dev_syncwarp();
}

/* ---- staging a compressed slot into shared memory ------------------------ */

/* Stages host bytes [s + lo, s + hi) into stage (stage[0] holds host
 * address floor16(s)) with 16-byte cp.async pieces, line-aligned requests,
 * never reading at or past s + hi.  A piece that would start below
 * lo_ok (the readable host range) is read byte by byte.  Commits one
 * group. */
IBP_DEV void warp_stage(uint8_t *stage, const uint8_t *s_p, uint32_t lo,
                        uint32_t hi, const uint8_t *lo_ok_p) {
  const uintptr_t s = (uintptr_t)s_p, s16 = s & ~(uintptr_t)(PIECE - 1);
  const uintptr_t from = s + lo, end = s + hi;
  const unsigned lane = ibp_dev_lane();
  if (hi > lo) {
    const uintptr_t first = from & ~(uintptr_t)(PIECE - 1);
    const uintptr_t last = (end - 1) & ~(uintptr_t)(PIECE - 1);
    for (uintptr_t step = from & ~(uintptr_t)(LINE - 1); step <= last;
         step += SPAN) {
      uintptr_t p = step + PIECE * lane;
      if (p < first)
        p = first;
      if (p > last)
        p = last;
      unsigned n = (unsigned)min_u64(PIECE, end - p);
      if (p >= (uintptr_t)lo_ok_p) {
        ibp_dev_cp_async16(stage + (p - s16), (const void *)p, n);
      } else { /* the region starts inside this piece: from >= lo_ok */
        for (uintptr_t a = from; a < p + n; a++)
          stage[a - s16] = ibp_dev_ld_host_u8((const uint8_t *)a);
      }
    }
  }
  ibp_dev_cp_async_commit();
}

/* ---- decoding one compressed tensor -------------------------------------- */

typedef struct tensor_job {
  const uint8_t *mask, *bitval; /* device, from the launch */
  uint32_t R, c;                /* from the launch */
  const uint8_t *stream;        /* the tensor's stream (packed or staged) */
  const uint8_t *orig;          /* host: the tensor in the original */
  const uint8_t *lo_ok; /* lowest readable address (packed or staged start) */
  uint8_t *stage;       /* this tensor's staging buffer; stage[0] holds
                           host address floor16(stream) */
  uint8_t *dst;         /* where window byte w0 goes */
  uint32_t w0, w1;      /* window of the tensor */
  uint32_t len;         /* stream bytes */
  uint32_t from, to;    /* stream bytes [from, to) its fetch stages; to may
                           pass len (into the next stream, see below) */
  const uint8_t *raw_lo, *raw_hi; /* host range a raw copy may read */
} tensor_job;

/* Non-fit byte mask of a word from its k fit bits (padding chunks fit). */
IBP_DEV uint64_t nonfit_bytes(uint32_t fit, uint32_t c) {
  uint64_t nf = 0;
  uint32_t k = 8 / c;
  for (uint32_t j = 0; j < k; j++)
    if (!((fit >> j) & 1))
      nf |= (c == 8 ? ~0ull : ((1ull << (8 * c)) - 1)) << (8 * c * j);
  return nf;
}

/* keep (the bits that travel) of word w, from the staged bitmap. */
IBP_DEV uint64_t word_keep(const tensor_job *j, const uint8_t *bm, uint32_t w) {
  const uint32_t R = j->R, c = j->c, k = 8 / c;
  const uint32_t bytes = R - 8 * w < 8 ? R - 8 * w : 8;
  const uint32_t have = (bytes + c - 1) / c;
  uint32_t fit = (bm[(w * k) >> 3] >> ((w * k) & 7)) & ((1u << k) - 1);
  fit |= ((1u << k) - 1) & ~((1u << have) - 1);
  uint64_t valid = bytes == 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
  uint64_t m = *(const ull *)(j->mask + 8 * w); /* shared or global */
  return (~m | nonfit_bytes(fit, c)) & valid;
}

/* Payload bits of words [from, to), summed over the warp (all lanes). */
IBP_DEV uint64_t payload_bits(const tensor_job *j, const uint8_t *bm,
                              uint32_t from, uint32_t to) {
  uint64_t sum = 0;
  for (uint32_t g = from; g < to; g += 32) {
    uint32_t w = g + ibp_dev_lane();
    unsigned cnt = w < to ? (unsigned)ibp_dev_popc64(word_keep(j, bm, w)) : 0;
    unsigned total;
    ibp_dev_warp_exclusive_scan(cnt, &total);
    sum += total;
  }
  return sum;
}

/* 64 bits of the staged stream starting at stream bit pos. */
IBP_DEV uint64_t stream_bits(const uint8_t *stage, uint32_t off0,
                             uint64_t pos) {
  uint64_t q = off0 + (pos >> 3), qa = q & ~7ull;
  uint64_t lo = *(const ull *)(stage + qa), hi = *(const ull *)(stage + qa + 8);
  unsigned sh = (unsigned)(((q & 7) << 3) + (pos & 7));
  return sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
}

IBP_DEV void store_word(uint8_t *dst, uint64_t out, uint32_t b, uint32_t w0,
                        uint32_t w1) {
  uint32_t lo = b > w0 ? b : w0, hi = b + 8 < w1 ? b + 8 : w1;
  uint8_t *d = dst + (lo - w0);
  if (lo == b && hi == b + 8 && ((uintptr_t)d & 7) == 0) {
    *(ull *)d = out;
    return;
  }
  for (uint32_t i = lo; i < hi; i++)
    dst[i - w0] = (uint8_t)(out >> (8 * (i - b)));
}

/* Decodes words [wa, wb) whose payload starts at stream bit pos. */
IBP_DEV void decode_words(const tensor_job *j, uint32_t off0, uint32_t wa,
                          uint32_t wb, uint64_t pos) {
  const uint8_t *bm = j->stage + off0;
  for (uint32_t g = wa; g < wb; g += 32) {
    uint32_t w = g + ibp_dev_lane();
    int live = w < wb;
    uint64_t keep = live ? word_keep(j, bm, w) : 0;
    unsigned total;
    unsigned before =
        ibp_dev_warp_exclusive_scan((unsigned)ibp_dev_popc64(keep), &total);
    if (live) {
      uint64_t bits = stream_bits(j->stage, off0, pos + before);
      uint64_t v = *(const ull *)(j->bitval + 8 * w);
      uint64_t out = ibp_dev_pdep64(bits, keep) | (v & ~keep);
      store_word(j->dst, out, 8 * w, j->w0, j->w1);
    }
    pos += total;
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
  warp_stage(j->stage, j->stream, j->from, j->to + IBP_KERNEL_STAGE_EXTRA,
             j->lo_ok);
}

/* Moves the bytes of next's stream that j's fetch staged (the first
 * next->from bytes) into next's buffer.  The buffers may be the same: all
 * lanes read before any writes. */
IBP_DEV void take_carry(const tensor_job *j, const tensor_job *next) {
  const unsigned lane = ibp_dev_lane();
  const uint32_t off_j = (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  const uint32_t off_n = (uint32_t)((uintptr_t)next->stream & (PIECE - 1));
  uint8_t v = lane < next->from ? j->stage[off_j + j->len + lane] : 0;
  ibp_dev_syncwarp();
  if (lane < next->from)
    next->stage[off_n + lane] = v;
}

/* Decodes the window [w0, w1) of a compressed tensor whose whole stream is
 * staged (its group waited for, the other lanes synchronised). */
IBP_DEV void warp_decode_tensor(const tensor_job *j) {
  const uint32_t nch = (j->R + j->c - 1) / j->c;
  const uint32_t off0 = (uint32_t)((uintptr_t)j->stream & (PIECE - 1));
  const uint8_t *bm = j->stage + off0;
  const uint32_t wa = j->w0 / 8, wb = (j->w1 + 7) / 8;
  decode_words(j, off0, wa, wb, nch + payload_bits(j, bm, 0, wa));
}

/* ---- the kernels
 * --------------------------------------------------------------- */

IBP_DEV int bit_set(const uint32_t *bits, uint64_t i) {
  return bits && ((ibp_dev_ldg_u32(bits + (i >> 5)) >> (i & 31)) & 1);
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

/* The job for unit t of the region (t == tensors: the tail); returns 1
 * when it is a compressed tensor the warp decodes, 0 when it is copied
 * raw from the original.  (The launch's arguments pass by value: taking
 * the address of a kernel parameter would copy it to local memory.) */
IBP_DEV int unit_job(ibp_decompress_args a, uint64_t t, uint8_t *stage,
                     tensor_job *j) {
  const uint64_t R = a.tensor_bytes;
  const uint64_t g0 = a.first_tensor * R + a.first_offset, g1 = g0 + a.length;
  const uint64_t start = t * R;
  const uint64_t size = t < a.tensors ? R : a.tail_bytes;
  const uint64_t lo = max_u64(g0, start), hi = min_u64(g1, start + size);
  uint64_t off = 0, len = 0, mo = 0;
  if (t < a.tensors) {
    off = ibp_dev_ldg_u64((const uint8_t *)(a.offsets + t));
    len = ibp_dev_ldg_u32(a.lengths + t);
    mo = (uint64_t)cluster_of(a.cluster_ids, a.clusters, t) * a.mask_stride;
  }
  /* a stream the copy engine staged is read from device memory */
  const int in_window =
      a.staged && off >= a.staged_lo && off + len <= a.staged_hi;
  const uint8_t *stream =
      in_window ? a.staged + (off - a.staged_lo) : a.packed + off;
  *j = (tensor_job){a.mask + mo,
                    a.bitval + mo,
                    a.tensor_bytes,
                    a.chunk_bytes,
                    stream,
                    a.original + start,
                    in_window ? a.staged : a.packed,
                    stage,
                    a.dst + (lo - g0),
                    (uint32_t)(lo - start),
                    (uint32_t)(hi - start),
                    (uint32_t)len,
                    0,
                    (uint32_t)len,
                    a.original,
                    a.original + a.tensors * R + a.tail_bytes};
  /* One answer per warp: the dirty bits may change while the kernel runs
   * (libibp recompresses written tensors and clears them), and lanes that
   * disagreed would diverge around the warp collectives. */
  unsigned c = t < a.tensors && len && bit_set(a.flags, t) &&
               !bit_set(a.dirty, t) && !bit_set(a.busy, t);
  return (int)ibp_dev_shfl(c, 0);
}

/* Decodes units [u0, u1) of a launch in one warp: in a walk, unit u+1's
 * fetch is issued (buffers == 2) before unit u is decoded, and decisions
 * are made one unit further ahead, for fetch_end.  `units` maps a unit to
 * its job (single_units, batch_units below); stage0 is the warp's first
 * staging buffer. */
template <typename Units>
IBP_DEV void walk_units(Units &units, uint64_t u0, uint64_t u1, uint8_t *stage0,
                        uint32_t stage_bytes, unsigned buffers) {
  unsigned cur = 0, other = buffers - 1;
  tensor_job j, n, nn;
  int jc = unit_of(units, u0, stage0, &j), nc = 0, staged = 0;
  for (uint64_t u = u0; u < u1; u++) {
    if (!jc) {
      warp_copy_raw(j.dst, j.orig + j.w0, j.w1 - j.w0, j.raw_lo, j.raw_hi);
      if (u + 1 < u1)
        jc = unit_of(units, u + 1, stage0 + cur * stage_bytes, &j);
      staged = 0;
      continue;
    }
    if (!staged) { /* j's fetch (nothing of it prefetched) */
      nc =
          u + 1 < u1 && unit_of(units, u + 1, stage0 + other * stage_bytes, &n);
      j.to = fetch_end(&j, nc, &n);
      stage_job(&j);
    }
    if (nc)
      n.from = j.to - j.len; /* carried over from j's fetch */
    int prefetch = nc && buffers == 2, nnc = 0;
    if (prefetch) {
      nnc =
          u + 2 < u1 && unit_of(units, u + 2, stage0 + cur * stage_bytes, &nn);
      n.to = fetch_end(&n, nnc, &nn);
      stage_job(&n);
    }
    ibp_dev_cp_async_wait(prefetch ? 1 : 0); /* j's fetch */
    ibp_dev_syncwarp(); /* ... and the other lanes' pieces of it */
    warp_decode_tensor(&j);
    ibp_dev_syncwarp(); /* j's buffer is free: the next fetch reuses it */
    if (nc && n.from)
      take_carry(&j, &n);
    if (u + 1 < u1) {
      j = n;
      jc = nc;
      staged = prefetch;
      nc = nnc;
      n = nn;
      cur = other;
      other = cur ^ (buffers - 1);
    }
  }
}

/* The units of one copy: its tensors from a.first_tensor on. */
struct single_units {
  ibp_decompress_args a;
};

IBP_DEV int unit_of(single_units &s, uint64_t u, uint8_t *stage,
                    tensor_job *j) {
  return unit_job(s.a, s.a.first_tensor + u, stage, j);
}

IBP_KERNEL void ibp_decompress(ibp_decompress_args a) {
  const uint64_t R = a.tensor_bytes;
  const uint64_t g0 = a.first_tensor * R + a.first_offset, g1 = g0 + a.length;
  if (a.length == 0)
    return;
  const uint64_t last = (g1 - 1) / R < a.tensors ? (g1 - 1) / R : a.tensors;
  const uint64_t units = last - a.first_tensor + 1;
  const uint64_t step = ibp_dev_warps_total();
  const unsigned buffers = a.stage_buffers == 2 ? 2 : 1;
  uint8_t *smem = ibp_dev_shared();
  if (a.mask_shared_bytes) { /* Mask and Bitval into shared memory */
    uint8_t *m = smem, *v = smem + a.mask_shared_bytes;
    for (uint32_t i = 8 * ibp_dev_thread(); i < a.mask_shared_bytes;
         i += 8 * ibp_dev_block_threads()) {
      *(ull *)(m + i) = ibp_dev_ldg_u64(a.mask + i);
      *(ull *)(v + i) = ibp_dev_ldg_u64(a.bitval + i);
    }
    ibp_dev_syncthreads();
    a.mask = m;
    a.bitval = v;
    smem += 2 * a.mask_shared_bytes;
  }
  uint8_t *stage0 =
      smem + (uint64_t)ibp_dev_warp_in_block() * buffers * a.stage_bytes;
  const uint32_t walk = a.walk ? a.walk : 1;
  const uint64_t walks = (units + walk - 1) / walk;
  single_units su = {a};
  for (uint64_t w = ibp_dev_warp_global(); w < walks; w += step)
    walk_units(su, w * walk, min_u64(w * walk + walk, units), stage0,
               a.stage_bytes, buffers);
}

/* The units of a batch: each job's tensors (a region's) or pieces of
 * IBP_BATCH_RAW_UNIT bytes (a raw host range), jobs in order.  `k` caches
 * the job of the last unit asked for: a walk asks in increasing order. */
struct batch_units {
  const ibp_decompress_args *regions;
  const ibp_batch_job *jobs;
  uint32_t count, k;
};

IBP_DEV uint64_t job_first_unit(const batch_units &b, uint32_t i) {
  return ibp_dev_ldg_u64((const uint8_t *)&b.jobs[i].first_unit);
}

/* Points b.k at the job of unit u. */
IBP_DEV void find_job(batch_units &b, uint64_t u) {
  const uint32_t k = b.k;
  if (u >= job_first_unit(b, k) &&
      (k + 1 == b.count || u < job_first_unit(b, k + 1)))
    return;
  if (k + 1 < b.count && u >= job_first_unit(b, k + 1) &&
      (k + 2 == b.count || u < job_first_unit(b, k + 2))) {
    b.k = k + 1;
    return;
  }
  uint32_t lo = 0, hi = b.count; /* the last job whose first unit <= u */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (job_first_unit(b, mid) <= u)
      lo = mid;
    else
      hi = mid;
  }
  b.k = lo;
}

IBP_DEV int unit_of(batch_units &b, uint64_t u, uint8_t *stage, tensor_job *j) {
  find_job(b, u);
  const ibp_batch_job *job = &b.jobs[b.k];
  const uint64_t src = ibp_dev_ldg_u64((const uint8_t *)&job->src);
  uint8_t *dst = (uint8_t *)ibp_dev_ldg_u64((const uint8_t *)&job->dst);
  const uint32_t len = ibp_dev_ldg_u32(&job->length);
  const uint32_t region = ibp_dev_ldg_u32(&job->region);
  const uint64_t piece = u - job_first_unit(b, b.k);
  if (region == IBP_BATCH_RAW) {
    const uint64_t at = piece * IBP_BATCH_RAW_UNIT;
    const uint8_t *from = (const uint8_t *)src;
    *j = tensor_job{};
    j->orig = from + at;
    j->dst = dst + at;
    j->w0 = 0;
    j->w1 = (uint32_t)min_u64(IBP_BATCH_RAW_UNIT, len - at);
    j->raw_lo = from;
    j->raw_hi = from + len;
    return 0;
  }
  ibp_decompress_args a = b.regions[region];
  a.first_tensor = src / a.tensor_bytes;
  a.first_offset = (uint32_t)(src % a.tensor_bytes);
  a.length = len;
  a.dst = dst;
  return unit_job(a, a.first_tensor + piece, stage, j);
}

IBP_KERNEL void ibp_decompress_batch(ibp_batch_args b) {
  if (b.count == 0 || b.units == 0)
    return;
  const unsigned buffers = b.stage_buffers == 2 ? 2 : 1;
  uint8_t *stage0 = ibp_dev_shared() +
                    (uint64_t)ibp_dev_warp_in_block() * buffers * b.stage_bytes;
  const uint32_t walk = b.walk ? b.walk : 1;
  const uint64_t walks = (b.units + walk - 1) / walk;
  batch_units bu = {b.regions, b.jobs, b.count, 0};
  for (uint64_t w = ibp_dev_warp_global(); w < walks;
       w += ibp_dev_warps_total())
    walk_units(bu, w * walk, min_u64(w * walk + walk, b.units), stage0,
               b.stage_bytes, buffers);
}

IBP_KERNEL void ibp_gather(ibp_gather_args a) {
  for (uint64_t r = ibp_dev_warp_global(); r < a.count;
       r += ibp_dev_warps_total()) {
    ibp_gather_range g = a.ranges[r];
    warp_copy_raw(a.dst + g.dst_offset, a.src + g.src_offset, g.length,
                  a.src + g.src_offset, a.src + g.src_offset + g.length);
  }
}
