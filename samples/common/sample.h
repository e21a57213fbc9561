/*
 * What the samples share: command-line options, generated data, the
 * checksum, pinned buffers, gathers, the copy-back check and the result
 * lines.
 *
 * The samples are ordinary CUDA host programs: they use only the CUDA
 * runtime API (cuda_runtime_api.h) and know nothing of libibp.  Every CUDA
 * call is checked; a failure ends the program (exit 2) with one line on
 * stderr naming the call and cudaGetErrorString's text.  The helpers here
 * may exit: they serve small single-purpose programs, not a library.
 *
 * sample_cuda.c calls copies, so it is compiled once per build variant
 * (legacy or per-thread default stream) together with the sample.
 */
#ifndef IBP_SAMPLES_SAMPLE_H
#define IBP_SAMPLES_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* Exit codes of every sample. */
enum {
  SAMPLE_EXIT_OK = 0,
  SAMPLE_EXIT_MISMATCH = 1, /* a byte on the device differs from the host */
  SAMPLE_EXIT_CUDA = 2,     /* a CUDA call failed */
  SAMPLE_EXIT_USAGE = 3,    /* bad command line, unreadable --data, no memory */
};

/* The program name used in every message ("weight_stream"). */
extern const char *sample_prog;

/* ---- options ------------------------------------------------------------ */

typedef enum sample_opt_kind {
  SAMPLE_OPT_FLAG, /* no value: *(int *)value = 1 */
  SAMPLE_OPT_U64,  /* decimal number: *(uint64_t *)value */
  SAMPLE_OPT_SIZE, /* number with optional K/M/G (1024-based) suffix */
  SAMPLE_OPT_STR,  /* *(const char **)value */
} sample_opt_kind;

/* One option "--name" (or "--name=VALUE"); a table ends with name NULL. */
typedef struct sample_opt {
  const char *name;
  sample_opt_kind kind;
  void *value;
  const char *metavar; /* shown in --help, NULL for flags */
  const char *help;
  int given; /* set by sample_parse */
} sample_opt;

/* Parses argv[1..] against opts.  "--help" prints `synopsis` and the
 * table on stdout and exits 0; any error prints one line on stderr and
 * exits SAMPLE_EXIT_USAGE.  Positional arguments are errors. */
void sample_parse(int argc, char **argv, const char *synopsis,
                  sample_opt *opts);

/* The entry of `opts` called name (which must exist). */
const sample_opt *sample_opt_find(const sample_opt *opts, const char *name);

/* The rules of the table options shared by the gather samples: --data
 * excludes --rows/--dim and needs --row-bytes, which applies to --data
 * only.  Exits SAMPLE_EXIT_USAGE when one is broken. */
void sample_check_table_opts(const sample_opt *opts, const char *data,
                             uint64_t row_bytes);

/* Prints "PROG: MESSAGE" on stderr and exits SAMPLE_EXIT_USAGE. */
void sample_usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* ---- data --------------------------------------------------------------- */

/* IEEE float32, bfloat16, IEEE float16 ("fp16": kv_blocks only). */
typedef enum sample_dtype { SAMPLE_F32, SAMPLE_BF16, SAMPLE_F16 } sample_dtype;

/* "f32" / "bf16" -> dtype; exits with a usage error otherwise. */
sample_dtype sample_dtype_parse(const char *s);
const char *sample_dtype_name(sample_dtype t);
size_t sample_dtype_size(sample_dtype t);

/* How generated values are distributed within a row. */
typedef enum sample_dist {
  /* Normal values with mean 0 and a standard deviation drawn log-uniformly
   * from [sd_min, sd_max] per row -- like trained weights and embeddings,
   * whose sign and top exponent bits repeat. */
  SAMPLE_DIST_NORMAL,
  /* Bag-of-words features (TF-IDF, like PubMed's or Cora's node features):
   * a document of 1 to 2 * density * (values per row) words, uniformly,
   * drawn from a Zipf-like vocabulary (word w with probability ~ w^(-2/3),
   * so a little under `density` of the values are non-zero), value
   * (1 + ln tf) * idf(w) per distinct word, idf growing with the word's
   * rarity, the row scaled to unit L2 norm; every other value 0.  Values
   * are non-negative and most are zero. */
  SAMPLE_DIST_TFIDF,
} sample_dist;

/* Generated data: rows of `row_bytes` bytes, SAMPLE_DIST_NORMAL values
 * (sample_generate_ext: others).  Each row has its own splitmix64 stream
 * seeded from (seed, row number), Box-Muller for normal values, so the
 * bytes depend only on these parameters (not on the number of threads).
 * row_bytes must be a multiple of the element size; the last row may be
 * cut short. */
typedef struct sample_gen {
  sample_dtype dtype;
  uint64_t seed;
  size_t row_bytes;
  double sd_min, sd_max; /* SAMPLE_DIST_NORMAL */
} sample_gen;

/* Fills dst[0, bytes) on up to one thread per CPU. */
void sample_generate(void *dst, size_t bytes, const sample_gen *g);

/* More shapes of generated data; all 0 is sample_generate's. */
typedef struct sample_gen_ext {
  sample_dist dist;
  double density; /* SAMPLE_DIST_TFIDF: in (0, 1] */
  /* The row number of dst[0]: a buffer generated from row first_row on
   * holds the same bytes as that part of one generated from row 0. */
  uint64_t first_row;
  /* SAMPLE_DIST_NORMAL: when > 0, the standard deviation of row r is that
   * of row r % sd_period (the heads of a KV cache keep their scale from
   * token to token); the values stay the row's own. */
  uint64_t sd_period;
} sample_gen_ext;

/* sample_generate with the shape `x`. */
void sample_generate_ext(void *dst, size_t bytes, const sample_gen *g,
                         const sample_gen_ext *x);

/* splitmix64: the samples' only random number generator. */
uint64_t sample_rand(uint64_t *state);
/* Uniform in (0, 1] from sample_rand (never 0, so log() is finite). */
double sample_uniform(uint64_t *state);

/* malloc(bytes), or a message and exit SAMPLE_EXIT_USAGE when there is no
 * memory (bytes 0 allocates 1). */
void *sample_alloc(size_t bytes);

/* Size of a regular, non-empty file; exits with a usage error otherwise. */
size_t sample_file_size(const char *path);
/* Reads exactly `bytes` bytes of `path` into dst; exits on error. */
void sample_file_read(const char *path, void *dst, size_t bytes);
/* Writes src[0, bytes) to `path` (created or truncated); exits on error. */
void sample_file_write(const char *path, const void *src, size_t bytes);

/* 64-bit FNV-1a over bytes, continued from h (start with SAMPLE_FNV_INIT). */
#define SAMPLE_FNV_INIT 0xcbf29ce484222325ull
uint64_t sample_fnv1a(uint64_t h, const void *p, size_t n);

/* ---- CUDA --------------------------------------------------------------- */

/* Checks a CUDA call: on failure prints
 *   "PROG: FUNCTION failed: <cudaGetErrorString> (<cudaGetErrorName>)"
 * and exits SAMPLE_EXIT_CUDA. */
#define CK(call) sample_check((call), #call)
void sample_check(cudaError_t err, const char *call);

/* How the host buffer is pinned. */
typedef enum sample_pin {
  SAMPLE_PIN_HOSTALLOC,  /* cudaHostAlloc(.., cudaHostAllocDefault) */
  SAMPLE_PIN_MALLOCHOST, /* cudaMallocHost */
  SAMPLE_PIN_REGISTER,   /* mmap + cudaHostRegister */
} sample_pin;

/* "hostalloc" / "mallochost" / "register"; exits on anything else. */
sample_pin sample_pin_parse(const char *s);
const char *sample_pin_name(sample_pin p);

/* A pinned host buffer of `bytes` (> 0) bytes, page-aligned. */
void *sample_pinned_alloc(size_t bytes, sample_pin how);
void sample_pinned_free(void *p, size_t bytes, sample_pin how);

/* Copies dev[0, n) back with cudaMemcpy (device-to-host, the default
 * stream of this build) into host memory, compares it with `expected`
 * and folds the bytes that arrived into *fnv.  Returns the index of the
 * first differing byte, or SIZE_MAX when all n bytes match; *got is the
 * byte found there.  Works in pieces of at most 8 MiB. */
size_t sample_check_device(const void *dev, const void *expected, size_t n,
                           uint64_t *fnv, uint8_t *got);

/* Fills dev[0, n) with 0xa5 and waits for it, so that a copy that did not
 * happen shows in the next check. */
void sample_scrub_device(void *dev, size_t n);

/* Timing of GPU work by CUDA events, so that one program measures real
 * time on a GPU and modelled time on the simulated one (docs/PROFILE.md).
 * begin records `start` on streams[0] and makes the other n-1 streams wait
 * for it; end makes streams[0] wait for the others' work, records `stop`
 * there, waits for it and returns the seconds between the two events. */
typedef struct sample_timer {
  cudaEvent_t start, stop, join[2];
} sample_timer;
void sample_timer_begin(sample_timer *t, const cudaStream_t *streams, size_t n);
double sample_timer_end(sample_timer *t, const cudaStream_t *streams, size_t n);

/* ---- gathers -------------------------------------------------------------
 * A gather is a list of pieces of one host buffer -- piece k is `len[k]`
 * bytes at offset `src[k]` -- that land one after the other in one device
 * buffer, one cudaMemcpyAsync per piece (the way a program gathers rows or
 * blocks).  The host builds the same bytes with sample_gather_host to check
 * the device buffer against. */
typedef struct sample_gather {
  size_t n, cap; /* pieces held, room for */
  size_t *src;   /* offset of each piece in the host buffer */
  size_t *len;   /* its length in bytes */
  size_t bytes;  /* sum of len */
} sample_gather;

/* Room for `cap` (> 0) pieces; exits when there is no memory. */
void sample_gather_init(sample_gather *g, size_t cap);
void sample_gather_free(sample_gather *g);
/* Empties the list. */
void sample_gather_reset(sample_gather *g);
/* Appends a piece; there must be room for it. */
void sample_gather_add(sample_gather *g, size_t src, size_t len);
/* dst[0, g->bytes) = the pieces of host, in order (memcpy). */
void sample_gather_host(const sample_gather *g, const void *host, void *dst);
/* Enqueues one cudaMemcpyAsync host-to-device per piece of host into dev,
 * in order, on `stream` (0: the default stream of this build); does not
 * wait for them. */
void sample_gather_copy(const sample_gather *g, void *dev, const void *host,
                        cudaStream_t stream);
/* The timed part of a gather step: scrubs dev[0, g->bytes) (so a missing
 * copy shows), then copies the pieces on the default stream and waits.
 * Returns the seconds of the copies (sample_timer). */
double sample_gather_timed(const sample_gather *g, void *dev, const void *host);
/* The piece holding byte `at` (< g->bytes) of the gathered bytes; *within
 * is the byte's offset in that piece. */
size_t sample_gather_piece(const sample_gather *g, size_t at, size_t *within);

/* ---- output ------------------------------------------------------------- */

/* The result line, first on stdout:
 *   "PROG: ok bytes=B copies=C checksum=0x%016x"
 * B = bytes copied host-to-device, C = number of copies. */
void sample_print_ok(uint64_t bytes, uint64_t copies, uint64_t checksum);
/* One "key=value" line unless quiet. */
void sample_print_kv(int quiet, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The device name line ("device=...") unless quiet. */
void sample_print_device(int quiet);
/* "timed_bytes=B" and "h2d_seconds=S" (unless quiet), and always
 * "throughput_gbps=G": 1e9 bytes per second of the timed host-to-device
 * copies (those of the passes or batches after the warm-up, each timed by
 * CUDA events from before its first copy to after its last: sample_timer). */
void sample_print_throughput(int quiet, uint64_t bytes, double seconds);

#endif /* IBP_SAMPLES_SAMPLE_H */
