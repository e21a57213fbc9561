/*
 * Device cost profiles (profile/): the named parameters of profile.def,
 * read from a small text format, and the time model built on them
 * (docs/PROFILE.md).  One profile drives both the simulated driver's
 * virtual clock (tests/sim/driver) and libibp's choice of a transfer path,
 * so a modelled speedup charges every per-operation cost to both sides.
 *
 * Text format: one `key = value` per line (at most IBP_PROFILE_LINE_MAX
 * bytes); `#` starts a comment (to the end of the line); blank lines are
 * ignored.  Keys: `name` (1..63 printable ASCII characters, no spaces) and
 * every parameter of profile.def, each exactly once (ce_batch_setup_us may
 * be missing: then ce_setup_us's value), and optionally
 * `decoder_build` and `stage_decoder_build` (names likewise; absent:
 * "unknown"); values are decimal
 * numbers whatever the program's locale (e.g. 25.5, 2e-3), within the
 * parameter's range, and whole for a size ("B") or a count.
 *
 * Built-in profiles (ibp_profile_builtin_names): `a100-pcie4`,
 * `h100-pcie5`; their text cites a published source for every value or
 * marks it as an assumption with its reasoning.
 *
 * No function here prints, allocates beyond the call, exits or touches
 * global state (the calling thread's locale is C during a parse or format,
 * then restored); all are thread-safe.  Depends on nothing of the
 * project's.
 */
#ifndef IBP_PROFILE_H
#define IBP_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define IBP_PROFILE_NAME_MAX 64          /* name: up to 63 characters + NUL */
#define IBP_PROFILE_FILE_MAX (64 * 1024) /* a profile file is at most this */
#define IBP_PROFILE_LINE_MAX 1024 /* bytes of one line, without its '\n' */

/* decoder_build of a profile that does not say which decoder its decode
 * terms were measured with (a file without the key). */
#define IBP_PROFILE_DECODER_UNKNOWN "unknown"

typedef struct ibp_profile {
  char name[IBP_PROFILE_NAME_MAX];
  /* The decompress kernels' build (kernels/ibp_kernels.h,
   * IBP_DECODER_BUILD) that the decode terms -- decode_gbps_per_sm,
   * decode_tensor_us, decode_h2d_gbps -- were measured with; a name like
   * `name`, IBP_PROFILE_DECODER_UNKNOWN when the text gives none. */
  char decoder_build[IBP_PROFILE_NAME_MAX];
  /* Likewise the build the exponent stage's decode terms --
   * stage_decode_gbps_per_sm, stage_tensor_us -- were measured with;
   * IBP_PROFILE_DECODER_UNKNOWN when the text gives none (every built-in
   * today: no GPU has timed the stage, docs/PROFILE.md "The stage's decode
   * terms"). */
  char stage_decoder_build[IBP_PROFILE_NAME_MAX];
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what) double key;
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
} ibp_profile;

/* ---- reading ------------------------------------------------------------ */

/* Parses profile text (`len` bytes, NUL not needed).  `origin` names it in
 * messages (a path or "built-in a100-pcie4").  Returns 0 with *out filled,
 * or -1 with a one-line message in err (origin, line number, key, what is
 * wrong: unknown key, repeated key, missing key, bad number, out of range,
 * NUL byte, line too long) and *out unspecified. */
int ibp_profile_parse(const char *text, size_t len, const char *origin,
                      ibp_profile *out, char *err, size_t errlen);

/* The text of built-in profile `name`, or NULL when there is none. */
const char *ibp_profile_builtin_text(const char *name);

/* The built-in profiles' names, NULL-terminated. */
const char *const *ibp_profile_builtin_names(void);

/* The built-in whose GPU a device's name (cuDeviceGetName) names: an H100,
 * H200 or GH200 (the same SM, a PCIe Gen5 host link) -> h100-pcie5; an
 * A100 -> a100-pcie4; NULL for any other. */
const char *ibp_profile_builtin_for_device(const char *device_name);

/* Loads `spec`: a built-in name, else a file path (a regular file of at
 * most IBP_PROFILE_FILE_MAX bytes; a device, FIFO or directory is refused
 * without reading it).  Returns 0, or -1 with a one-line message. */
int ibp_profile_load(const char *spec, ibp_profile *out, char *err,
                     size_t errlen);

/* Writes p in the text format (every parameter, with its unit and meaning
 * as a comment, decoder_build and stage_decoder_build); returns the length it
 * needs (excluding the NUL), like snprintf.  ibp_profile_parse reads it back to
 * the same values. */
size_t ibp_profile_format(const ibp_profile *p, char *buf, size_t cap);

/* ---- which decoder the decode terms are of ------------------------------ */

/* 1 when p's decode terms (decode_gbps_per_sm, decode_tensor_us,
 * decode_h2d_gbps) were measured with the decoder build `running` (the
 * caller's IBP_DECODER_BUILD, kernels/ibp_kernels.h): p->decoder_build
 * equals it.  0 otherwise -- another build, "unknown", or p or running
 * NULL or empty, or running "unknown" -- the decode terms are then a prior
 * nobody measured for this decoder (docs/PROFILE.md "Which decoder the
 * decode terms are of").  This module names no build itself: it depends
 * on nothing of the project's. */
int ibp_profile_decode_measured(const ibp_profile *p, const char *running);

/* The same for the exponent stage's decode terms (stage_decode_gbps_per_sm,
 * stage_tensor_us): 1 when p->stage_decoder_build equals `running`, 0
 * otherwise (docs/PROFILE.md "The stage's decode terms"). */
int ibp_profile_stage_measured(const ibp_profile *p, const char *running);

/* ---- the model (microseconds) ------------------------------------------ */

/* p must be a profile ibp_profile_parse accepted.  GB/s = 1e9 bytes per
 * second. */

/* GPU-side time of a copy-engine copy of `bytes` (setup + bytes at the
 * direction's bandwidth; h2d nonzero: host to device). */
double ibp_profile_ce_copy_us(const ibp_profile *p, uint64_t bytes, int h2d);

/* Bandwidth (GB/s) of SM-initiated host reads by `sms` SMs at once
 * (1..p->sms; clamped): the bytes they keep in flight per round trip, at
 * most sm_h2d_gbps. */
double ibp_profile_sm_read_gbps(const ibp_profile *p, unsigned sms);

/* GPU-side time of a kernel on `sms` SMs (1..p->sms; clamped) that reads
 * `host_bytes` of pinned host memory (already rounded to sectors) and
 * writes `out_bytes` to device memory: launch latency, plus one host-read
 * round trip when it reads host memory at all, plus the slowest of its
 * host reads (ibp_profile_sm_read_gbps), its decode rate
 * (decode_gbps_per_sm x sms) and its device-memory writes (dram_gbps). */
double ibp_profile_kernel_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, unsigned sms);

/* Bandwidth (GB/s) of the decompress kernels' host reads on `sms` SMs:
 * ibp_profile_sm_read_gbps, at most decode_h2d_gbps (how the kernels stage
 * their streams, a warp fetching a stream and then decoding it, can read
 * less than a plain gather). */
double ibp_profile_decode_read_gbps(const ibp_profile *p, unsigned sms);

/* ibp_profile_kernel_us for the decompress kernels (ibp_decompress,
 * ibp_decompress_batch) over `units` tensors (and raw pieces): their host
 * reads at ibp_profile_decode_read_gbps, their decode out_bytes at
 * decode_gbps_per_sm plus decode_tensor_us per unit, on each of the sms. */
double ibp_profile_decode_us(const ibp_profile *p, uint64_t host_bytes,
                             uint64_t out_bytes, uint64_t units, unsigned sms);

/* What the exponent stage adds to the decode of `stage_bytes` output bytes
 * in `stage_units` stage-coded tensors on `sms` SMs (clamped): their bytes
 * at stage_decode_gbps_per_sm plus stage_tensor_us per tensor, on each of
 * the sms; 0 when both are 0. */
double ibp_profile_stage_us(const ibp_profile *p, uint64_t stage_bytes,
                            uint64_t stage_units, unsigned sms);

/* ibp_profile_decode_us where `stage_bytes` of out_bytes, in `stage_units`
 * of the units, are stage-coded: their ibp_profile_stage_us is added to the
 * decode's term (before the slowest of reads, decode and writes is taken).
 * With both 0 it is ibp_profile_decode_us, bit for bit. */
double ibp_profile_decode_staged_us(const ibp_profile *p, uint64_t host_bytes,
                                    uint64_t out_bytes, uint64_t units,
                                    uint64_t stage_bytes, uint64_t stage_units,
                                    unsigned sms);

/* ---- whether a coding stage pays (docs/PROFILE.md "Whether the stage
 * pays") ------------------------------------------------------------------ */

/* The cost of one whole copy of a region of `bytes` bytes in tensors of
 * tensor_bytes R (> 0), stored in `stored` bytes, `stage_tensors` of its
 * whole tensors decoded with the coding stage (those stored compressed in a
 * cluster whose stage is on, ibp_region_summary.tensors_staged; clamped to
 * bytes / R; 0: IBP alone).  IBP's decode is charged on every byte and
 * unit, the stage's (ibp_profile_stage_us) on its tensors alone: the
 * kernel runs it on those, in the same pass as their IBP decode, so it
 * adds to the decode's term, not a second pass (docs/PROFILE.md "Whether
 * the stage pays"):
 *   - link_us: the stored bytes over the host link at the copy engine's
 *     rate (without its set-up), and decode_us: the SMs' decode on all
 *     p->sms of them (the bytes at decode_gbps_per_sm, decode_tensor_us per
 *     tensor and the tail, and the stage's term) -- the two resources the
 *     copy takes, as `ibp analyze` prints them;
 *   - zerocopy_us: the copy by the zero-copy kernel on all p->sms SMs
 *     (ibp_profile_decode_staged_us: its reads of host memory and its
 *     decode overlap, the slower counts);
 *   - staged_us: the copy by the staged route, the copy engine's copy and
 *     the decode from device memory on staged_sms SMs (what its launch is
 *     worth: IBP_MAX_SMS blocks of IBP_STAGED_WARPS warps, docs/CONFIG.md)
 *     overlapped chunk by chunk, the slower of the two. */
typedef struct ibp_profile_region_cost {
  double link_us;
  double decode_us;
  double zerocopy_us;
  double staged_us;
} ibp_profile_region_cost;

ibp_profile_region_cost
ibp_profile_region_copy(const ibp_profile *p, uint64_t bytes,
                        uint32_t tensor_bytes, uint64_t stored,
                        uint64_t stage_tensors, unsigned staged_sms);

/* The faster of c's two routes. */
double ibp_profile_region_best_us(const ibp_profile_region_cost *c);

/* The pick: 1 when a region stored in stage_stored bytes, stage_tensors of
 * its tensors decoded with the exponent stage (ibp_profile_region_copy),
 * copies faster on its faster route (ibp_profile_region_best_us) than the
 * same region stored by IBP alone in ibp_stored bytes on its own, and than
 * the driver's copy of the region's bytes; 0 otherwise, and when
 * stage_stored is 0 (no stage fits). */
int ibp_profile_stage_pays(const ibp_profile *p, uint64_t bytes,
                           uint32_t tensor_bytes, uint64_t ibp_stored,
                           uint64_t stage_stored, uint64_t stage_tensors,
                           unsigned staged_sms);

#endif /* IBP_PROFILE_H */
