/*
 * What the end-to-end programs of libibp.so share (tests/preload/e2e/).
 *
 * Every program is an ordinary CUDA host program: it uses only the runtime
 * API (cuda_runtime_api.h), knows nothing of libibp, and checks every byte
 * that reaches the device against bytes it computed on the host.  A copy is
 * checked by copying it into a device buffer that was filled with random
 * "canary" bytes first, reading the whole used part of that buffer back into
 * pageable memory and comparing it with the expected image: the copied
 * bytes must be the source's, every other byte must still be the canary.
 *
 * Knobs (environment):
 *   IBP_E2E_SEED    base seed, decimal or 0x hex (default E2E_DEFAULT_SEED)
 *   IBP_E2E_COPIES  number of random copies, where a program makes them
 * Exit codes: 0 pass, 1 wrong bytes, 2 setup error (C library), 3 a CUDA
 * call of the program failed, 77 skip.  Every message starts with the
 * program's name; a mismatch names the seed that reproduces it.
 *
 * Threading: the PRNG, regions and batches belong to one thread each; the
 * reporting functions may be called from any thread.
 */
#ifndef IBP_E2E_UTIL_H
#define IBP_E2E_UTIL_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

enum {
  E2E_EXIT_OK = 0,
  E2E_EXIT_MISMATCH = 1,
  E2E_EXIT_SETUP = 2,
  E2E_EXIT_CUDA = 3,
  E2E_EXIT_SKIP = 77
};

#define E2E_DEFAULT_SEED 0x1B9C0DEC5EEDull
/* IBP_E2E_COPIES when unset: 1000, 300 under IBP_TEST_REDUCE (the
 * sanitizer builds; tests/README.md, "Under the sanitizers"). */
#define E2E_DEFAULT_COPIES e2e_default_copies(1000)
unsigned long e2e_default_copies(unsigned long full);
#define E2E_MAX_COPY ((size_t)256 << 10) /* longest random copy */

/* ---- reporting ----------------------------------------------------------- */

/* Remembers the program name and reads IBP_E2E_SEED; prints one line with
 * the name, the seed, the build (shared/static is not known here; legacy or
 * per-thread default stream is) and whether IBP_DISABLE is set. */
void e2e_begin(const char *prog);
uint64_t e2e_seed(void);
const char *e2e_prog(void);
/* The value of environment variable `name` as a count, or `dflt`. */
unsigned long e2e_env_count(const char *name, unsigned long dflt);

/* "prog: message" on stderr. */
void e2e_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A C library failure: message (+ strerror(errno) when errno_too), exit 2. */
_Noreturn void e2e_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
_Noreturn void e2e_die_errno(const char *what);
/* Records a failed check: prints "prog: FAIL: message (seed ...)"; the
 * program goes on and e2e_end() returns 1. */
void e2e_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Number of e2e_fail calls so far. */
unsigned e2e_failures(void);
/* Prints the summary; returns the exit code (0, or 1 after a failure). */
int e2e_end(void);

/* A CUDA call of the program: on error prints the call, the error's name
 * and where, then exits 3. */
#define E2E_CK(call) e2e_ck_((call), #call, __FILE__, __LINE__)
void e2e_ck_(cudaError_t e, const char *what, const char *file, int line);
/* A C library call that returns -1 (or NULL) on error: exits 2. */
#define E2E_SYS(cond)                                                          \
  do {                                                                         \
    if (!(cond))                                                               \
      e2e_die_errno(#cond);                                                    \
  } while (0)

/* ---- PRNG: xoshiro256** seeded with splitmix64 --------------------------- */

typedef struct e2e_rng {
  uint64_t s[4];
} e2e_rng;

/* Seeds r from the base seed and a stream number (threads, phases). */
void e2e_rng_seed(e2e_rng *r, uint64_t seed, uint64_t stream);
uint64_t e2e_rng_next(e2e_rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t e2e_rng_below(e2e_rng *r, uint64_t n);
/* 1 with probability percent/100. */
int e2e_rng_pct(e2e_rng *r, unsigned percent);
/* Log-uniform in [1, max], max >= 1. */
size_t e2e_rng_len(e2e_rng *r, size_t max);
void e2e_rng_bytes(e2e_rng *r, void *buf, size_t n);

/* ---- data ---------------------------------------------------------------- */

typedef enum e2e_data {
  E2E_F32, /* float32 ~ N(0,1): sign random, exponent mostly 0x7x */
  E2E_BF16 /* bfloat16 ~ N(0,1): the upper halves of such floats */
} e2e_data;

/* Fills buf[0, n) tensor by tensor (each `tensor` bytes, the last one may be
 * shorter), every tensor starting with a whole element: about 2% of the
 * tensors get random bytes (incompressible), 1% zeros, the rest `kind`. */
void e2e_fill(e2e_rng *r, void *buf, size_t n, size_t tensor, e2e_data kind);

/* ---- pinned allocations (regions) ---------------------------------------- */

typedef enum e2e_alloc {
  E2E_MALLOC_HOST, /* cudaMallocHost */
  E2E_HOST_ALLOC,  /* cudaHostAlloc(flags) */
  E2E_REGISTER     /* mmap, then cudaHostRegister(map + misalign, size) */
} e2e_alloc;

typedef struct e2e_region {
  /* set by the caller */
  const char *name; /* rule name=; NULL: no rule selects it */
  size_t size, tensor;
  const char *keys; /* more keys of its rule ("clusters=1"), or NULL */
  e2e_alloc alloc;
  unsigned flags;  /* cudaHostAlloc / cudaHostRegister flags */
  size_t misalign; /* E2E_REGISTER: offset of the region in its mapping */
  e2e_data data;
  /* set by e2e_region_alloc */
  unsigned char *host;   /* the application's bytes */
  unsigned char *mirror; /* what they must be (malloc) */
  unsigned char *map;    /* E2E_REGISTER: the mapping */
  size_t map_len;
} e2e_region;

/* Allocates (and for E2E_REGISTER maps and registers) r; the mirror is
 * allocated too.  Contents are not set. */
void e2e_region_alloc(e2e_region *r);
/* Frees (unregisters and unmaps) r, and its mirror. */
void e2e_region_free(e2e_region *r);
/* Fills r->host with e2e_fill data and copies it to the mirror. */
void e2e_region_fill(e2e_region *r, e2e_rng *rng);
/* The bytes expected at [off, off+len) of an E2E_REGISTER region's mapping
 * (the region's mirror inside it, a fixed pattern in the slack around it). */
void e2e_region_expect_map(const e2e_region *r, size_t off, size_t len,
                           unsigned char *out);
/* Checks r->host == r->mirror (the application's bytes were not changed
 * behind its back); e2e_fail on a difference.  Returns 0 when equal. */
int e2e_region_check_host(const e2e_region *r, const char *when);

/* The IBP_REGIONS value that selects the named regions of regs (one rule
 * "size=S,tensor=T,name=N" each, in order).  If IBP_REGIONS is unset it is
 * set to that (before the first CUDA call, when libibp reads it); if it is
 * set to something else a note says so.  Returns the static string. */
const char *e2e_regions_env(const e2e_region *regs, int n);

/* ---- copies -------------------------------------------------------------- */

typedef enum e2e_api {
  E2E_SYNC_H2D,      /* cudaMemcpy(cudaMemcpyHostToDevice) */
  E2E_SYNC_DEFAULT,  /* cudaMemcpy(cudaMemcpyDefault) */
  E2E_ASYNC_H2D,     /* cudaMemcpyAsync(cudaMemcpyHostToDevice, stream) */
  E2E_ASYNC_DEFAULT, /* cudaMemcpyAsync(cudaMemcpyDefault, stream) */
  E2E_API_COUNT
} e2e_api;

const char *e2e_api_name(e2e_api api);
/* Describes a stream handle: "0", "legacy", "per-thread", "s<n>". */
const char *e2e_stream_name(cudaStream_t s, char buf[24]);

/* A device buffer, its expected image and the copies made into it since it
 * was last verified. */
typedef struct e2e_copy {
  const e2e_region *src; /* where the source lies (NULL: buffer `what`) */
  const char *what;      /* a label when src is NULL */
  size_t src_off, len, dst_off;
  e2e_api api;
  cudaStream_t stream;
  unsigned long serial; /* copy number within the program (or thread) */
} e2e_copy;

typedef struct e2e_batch {
  unsigned char *dev;      /* device buffer of cap bytes */
  unsigned char *image;    /* expected content (pageable) */
  unsigned char *readback; /* what came back (pageable) */
  size_t cap, used;
  e2e_copy *copies;
  int ncopies, maxcopies;
  unsigned long serial; /* copies issued so far */
  int device_sync_only; /* synchronize with cudaDeviceSynchronize only */
  e2e_rng rng;          /* canary bytes, gaps */
  const char *label;    /* e.g. a thread's name, in messages */
} e2e_batch;

/* Allocates a device buffer of cap bytes and fills it with a canary. */
void e2e_batch_init(e2e_batch *b, size_t cap, uint64_t stream_no);
void e2e_batch_destroy(e2e_batch *b);
/* Room for a copy of len bytes (after a gap of up to 63 bytes)? */
int e2e_batch_fits(const e2e_batch *b, size_t len);
/* Copies src->host[off, off+len) (or `from`, described as `what` at offset
 * `off`) into the buffer at the next free offset (plus a random gap, so
 * destinations are unaligned) with `api` on `stream`; the expected bytes
 * are src->mirror's (or `expect`'s), taken now.  The copy must fit.  A
 * failing call exits 3. */
void e2e_batch_copy(e2e_batch *b, const e2e_region *src, size_t off, size_t len,
                    e2e_api api, cudaStream_t stream);
void e2e_batch_copy_buf(e2e_batch *b, const char *what, size_t off,
                        const void *from, const void *expect, size_t len,
                        e2e_api api, cudaStream_t stream);
/* Synchronizes (every stream in streams[0, nstreams), or the device), reads
 * the used part back and compares it with the image; on a difference
 * reports the first wrong byte (the copy it belongs to, its region offset,
 * tensor, expected and actual byte, the seed) with e2e_fail.  Then starts a
 * new batch with a fresh canary.  Returns 0, or 1 on a mismatch. */
int e2e_batch_verify(e2e_batch *b, const cudaStream_t *streams, int nstreams);

/* ---- random copies ------------------------------------------------------- */

typedef struct e2e_random_plan {
  e2e_region *regions; /* sources; entries with name NULL are not regions */
  int nregions;
  const void *pageable; /* extra source outside any pinned memory, or NULL */
  size_t pageable_len;
  const cudaStream_t *streams; /* candidates for async copies */
  int nstreams;
  int default_kind_only; /* only cudaMemcpyDefault copies */
  int writes;            /* verify every 4th copy too, and after each
                            verification store new bytes over an eighth of
                            a random region (tensors that libibp must serve
                            raw, then recompress) */
  unsigned long copies;  /* how many */
  size_t max_copy;       /* longest copy; 0: E2E_MAX_COPY */
} e2e_random_plan;

/* Makes plan->copies random copies into b, each from a random source at a
 * random offset (tensor-aligned, ending at the region's end, or anywhere;
 * for registered regions also 3% straddling the region's start or end into
 * the rest of its mapping) of 1 B .. plan->max_copy (256 KiB), with a random
 * API and stream, verifying whenever b is full and at the end.  Returns the
 * number of failed verifications (the caller may stop at the first). */
int e2e_random_copies(e2e_batch *b, const e2e_random_plan *plan, e2e_rng *rng);

/* ---- files --------------------------------------------------------------- */

/* A temporary file (already unlinked) holding data[0, n), offset 0. */
int e2e_temp_file(const void *data, size_t n);

#endif /* IBP_E2E_UTIL_H */
