/* `ibp bench`: codec throughput on one core and on all cores. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "codec_opts.h"
#include "ibp/codec.h"
#include "json_out.h"
#include "mapped_file.h"
#include "synth_data.h"

#define DEFAULT_TENSOR_BYTES 1024u
#define DEFAULT_MIB 256u
#define MAX_MIB (1u << 20)
#define DEFAULT_SECONDS 0.5
#define MAX_SECONDS 3600.0

static const char help[] =
    "Usage: ibp bench [FILE] [options]\n"
    "\n"
    "Measures the host codec in GB/s (1e9 bytes per second of ORIGINAL bytes)\n"
    "on one core (threads = 1 in the codec call) and on all cores:\n"
    "  statistics   per-bit counters over every tensor (ibp_bitstats_add)\n"
    "  search       threshold and chunk-width search (ibp_search)\n"
    "  compress     the whole region into slots + flags (ibp_compress_region)\n"
    "  decompress   the whole region back (ibp_decompress_range; on all cores\n"
    "               one contiguous range per thread)\n"
    "Each measurement is repeated until --seconds have passed and the best\n"
    "run is reported.  The decompressed bytes are compared with the original;\n"
    "a difference fails the run.  Also prints the space saved and the chunk\n"
    "width and threshold chosen.\n"
    "\n"
    "Without FILE the data is generated: rows of 256 float32 values, each row\n"
    "normal with mean 0 and a standard deviation drawn log-uniformly from\n"
    "[0.05, 0.5], like trained embeddings and weights (splitmix64 seeded per\n"
    "row, Box-Muller; the same seed gives the same bytes).  The input, the\n"
    "compressed slots and the decoded copy are all held in memory.\n"
    "\n"
    "Options:\n" CODEC_OPTIONS_HELP
    "                     (default --tensor-bytes 1024: one row; all cores =\n"
    "                     --threads, or one thread per CPU)\n"
    "  --mb N             size of the generated data in MiB (default 256)\n"
    "  --seed N           seed of the generated data (default 1)\n"
    "  --seconds S        minimum time per measurement (default 0.5)\n"
    "  --impl auto|portable|bmi2\n"
    "                     codec implementation (default auto: CPUID choice)\n"
    "  --json             print one JSON object instead of the table\n"
    "  -h, --help         show this help\n";

static const cli_option options[] = {
    CODEC_CLI_OPTIONS, {"mb", 0, 1},   {"seed", 0, 1},   {"seconds", 0, 1},
    {"impl", 0, 1},    {"json", 0, 0}, {"help", 'h', 0}, {NULL, 0, 0}};

enum { STATS, SEARCH, COMPRESS, DECOMPRESS, STAGES };
static const char *const stage_names[STAGES] = {"statistics", "search",
                                                "compress", "decompress"};

typedef struct bench_args {
  const char *path; /* NULL = generated data */
  codec_opts codec;
  uint64_t mib;
  int mib_given;
  uint64_t seed;
  double seconds;
  ibp_impl impl;
  int json;
} bench_args;

typedef struct bench_data {
  const uint8_t *src;
  uint64_t bytes;
  uint32_t r;
  uint64_t n;
  ibp_params params;
  uint8_t *slots;
  uint8_t *flags;
  uint8_t *dst;
  ibp_region_summary summary;
} bench_data;

typedef struct bench_result {
  unsigned threads[2]; /* one core, all cores */
  double best_s[STAGES][2];
} bench_result;

/* ---- arguments ---------------------------------------------------------- */

static int take_bench_option(bench_args *a, const char *name, const char *v) {
  uint64_t u;
  if (strcmp(name, "json") == 0) {
    a->json = 1;
  } else if (strcmp(name, "mb") == 0) {
    if (cli_parse_u64(v, &u) != CLI_NUM_OK || u == 0 || u > MAX_MIB)
      return cli_usage_error("--mb must be a whole number from 1 to %u "
                             "(got %s)",
                             MAX_MIB, v);
    a->mib = u;
    a->mib_given = 1;
  } else if (strcmp(name, "seed") == 0) {
    if (cli_parse_u64(v, &a->seed) != CLI_NUM_OK)
      return cli_usage_error("--seed must be a whole number (got %s)", v);
  } else if (strcmp(name, "seconds") == 0) {
    if (cli_parse_double(v, &a->seconds) != CLI_NUM_OK || !(a->seconds > 0.0) ||
        a->seconds > MAX_SECONDS)
      return cli_usage_error("--seconds must be a number in (0, %.0f] "
                             "(got %s)",
                             MAX_SECONDS, v);
  } else if (strcmp(name, "impl") == 0) {
    if (strcmp(v, "auto") == 0)
      a->impl = IBP_IMPL_AUTO;
    else if (strcmp(v, "portable") == 0)
      a->impl = IBP_IMPL_PORTABLE;
    else if (strcmp(v, "bmi2") == 0)
      a->impl = IBP_IMPL_BMI2;
    else
      return cli_usage_error("--impl must be auto, portable or bmi2 (got %s)",
                             v);
  } else if (codec_opts_take(&a->codec, name, v) < 0) {
    return CLI_EXIT_USAGE;
  }
  return -1;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, bench_args *a) {
  cli_parser ps;
  cli_item it;
  char err[256];
  memset(a, 0, sizeof *a);
  codec_opts_init(&a->codec);
  a->codec.tensor_bytes = DEFAULT_TENSOR_BYTES;
  a->mib = DEFAULT_MIB;
  a->seed = 1;
  a->seconds = DEFAULT_SECONDS;
  cli_parser_init(&ps, argc, argv, 1, options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    if (it.kind == CLI_ERROR)
      return cli_syntax_error("bench", "%s", err);
    if (it.kind == CLI_POSITIONAL) {
      if (a->path != NULL)
        return cli_syntax_error("bench", "unexpected argument '%s'", it.value);
      a->path = it.value;
      continue;
    }
    if (strcmp(options[it.option].name, "help") == 0) {
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    int rc = take_bench_option(a, options[it.option].name, it.value);
    if (rc >= 0)
      return rc;
  }
  if (a->path != NULL && a->mib_given)
    return cli_syntax_error("bench", "--mb applies to generated data only, "
                                     "not to FILE");
  return -1;
}

/* ---- stages ------------------------------------------------------------- */

typedef struct dec_part {
  const ibp_region *region;
  uint8_t *dst;
  uint64_t off, len;
  ibp_status st;
} dec_part;

static void *dec_worker(void *arg) {
  dec_part *d = arg;
  d->st = ibp_decompress_range(d->region, d->off, d->len, d->dst + d->off);
  return NULL;
}

/* One contiguous range of whole tensors per thread (the last takes the
 * tail). */
static ibp_status decompress_parallel(bench_data *d, const ibp_region *reg,
                                      unsigned threads) {
  dec_part *parts = calloc(threads, sizeof *parts);
  pthread_t *tids = calloc(threads, sizeof *tids);
  ibp_status st = parts && tids ? IBP_OK : IBP_ERR_NO_MEMORY;
  unsigned started = 0;
  for (unsigned t = 0; st == IBP_OK && t < threads; t++) {
    uint64_t first = d->n * t / threads, end = d->n * (t + 1) / threads;
    uint64_t stop = t + 1 == threads ? d->bytes : end * d->r;
    parts[t] =
        (dec_part){reg, d->dst, first * d->r, stop - first * d->r, IBP_OK};
    if (pthread_create(&tids[t], NULL, dec_worker, &parts[t]) != 0)
      st = IBP_ERR_THREAD;
    else
      started++;
  }
  for (unsigned t = 0; t < started; t++) {
    pthread_join(tids[t], NULL);
    if (parts[t].st != IBP_OK && st == IBP_OK)
      st = parts[t].st;
  }
  free(parts);
  free(tids);
  return st;
}

/* One run of a stage with `threads`; *secs is the time of the codec call
 * alone (set-up excluded). */
typedef ibp_status (*stage_fn)(bench_data *d, const bench_args *a,
                               unsigned threads, double *secs);

static ibp_status stage_stats(bench_data *d, const bench_args *a,
                              unsigned threads, double *secs) {
  ibp_bitstats bs;
  (void)a;
  ibp_status st = ibp_bitstats_init(&bs, d->r);
  if (st != IBP_OK)
    return st;
  double t0 = cli_now();
  st = ibp_bitstats_add(&bs, d->src, d->n, NULL, threads);
  *secs = cli_now() - t0;
  ibp_bitstats_free(&bs);
  return st;
}

static ibp_status stage_search(bench_data *d, const bench_args *a,
                               unsigned threads, double *secs) {
  ibp_params p;
  ibp_search_options so = {.chunk_bytes = a->codec.chunk_bytes,
                           .threshold = a->codec.threshold,
                           .sampling = {.fraction = a->codec.sample},
                           .threads = threads};
  memset(&p, 0, sizeof p);
  double t0 = cli_now();
  ibp_status st = ibp_search(d->src, d->n, d->r, &so, &p, NULL);
  *secs = cli_now() - t0;
  ibp_params_free(&p);
  return st;
}

static ibp_status stage_compress(bench_data *d, const bench_args *a,
                                 unsigned threads, double *secs) {
  (void)a;
  double t0 = cli_now();
  ibp_status st = ibp_compress_region(&d->params, d->src, d->bytes, d->slots,
                                      d->flags, threads, &d->summary);
  *secs = cli_now() - t0;
  return st;
}

static ibp_status stage_decompress(bench_data *d, const bench_args *a,
                                   unsigned threads, double *secs) {
  ibp_region reg = {.params = &d->params,
                    .slots = d->slots,
                    .bytes = d->bytes,
                    .flags = d->flags};
  ibp_status st;
  (void)a;
  double t0 = cli_now();
  if (threads == 1)
    st = ibp_decompress_range(&reg, 0, d->bytes, d->dst);
  else
    st = decompress_parallel(d, &reg, threads);
  *secs = cli_now() - t0;
  return st;
}

static const stage_fn stage_run[STAGES] = {stage_stats, stage_search,
                                           stage_compress, stage_decompress};

/* Repeats stage `s` until `seconds` have passed; keeps the best time. */
static ibp_status run_stage(bench_data *d, const bench_args *a, int s,
                            unsigned threads, double *best) {
  double start = cli_now();
  *best = INFINITY;
  do {
    double secs;
    ibp_status st = stage_run[s](d, a, threads, &secs);
    if (st != IBP_OK)
      return st;
    if (secs < *best)
      *best = secs;
  } while (cli_now() - start < a->seconds);
  return IBP_OK;
}

/* Index of the first byte where the decoded copy differs; bytes if none. */
static uint64_t first_difference(const bench_data *d) {
  if (memcmp(d->src, d->dst, d->bytes) == 0)
    return d->bytes;
  uint64_t i = 0;
  while (d->src[i] == d->dst[i])
    i++;
  return i;
}

static int run_all(bench_data *d, const bench_args *a, bench_result *res) {
  for (int s = 0; s < STAGES; s++) {
    for (int k = 0; k < 2; k++) {
      if (s == DECOMPRESS)
        memset(d->dst, 0, d->bytes);
      ibp_status st = run_stage(d, a, s, res->threads[k], &res->best_s[s][k]);
      if (st != IBP_OK) {
        cli_error("ibp bench", "%s on %u thread(s) failed: %s", stage_names[s],
                  res->threads[k], ibp_status_message(st));
        return CLI_EXIT_DATA;
      }
      uint64_t diff = s == DECOMPRESS ? first_difference(d) : d->bytes;
      if (diff != d->bytes) {
        cli_error("ibp bench",
                  "decompressed bytes differ from the original "
                  "at byte %llu (%u thread(s))",
                  (unsigned long long)diff, res->threads[k]);
        return CLI_EXIT_DATA;
      }
    }
  }
  return CLI_EXIT_OK;
}

/* ---- output ------------------------------------------------------------- */

/* GB/s of original bytes for stage s, column k. */
static double rate(const bench_data *d, const bench_result *res, int s, int k) {
  uint64_t bytes = s == STATS ? d->n * d->r : d->bytes;
  return (double)bytes / res->best_s[s][k] / 1e9;
}

static double saved_fraction(const bench_data *d) {
  return 1.0 - (double)d->summary.compressed_bytes / (double)d->bytes;
}

static void print_text(const bench_args *a, const bench_data *d,
                       const bench_result *res) {
  char h[32];
  if (a->path != NULL)
    printf("data          %s, %s\n", a->path,
           cli_human_bytes(d->bytes, h, sizeof h));
  else
    printf("data          generated float32 rows, %s, seed %llu\n",
           cli_human_bytes(d->bytes, h, sizeof h), (unsigned long long)a->seed);
  printf("tensors       %llu x %u B", (unsigned long long)d->n, d->r);
  if (d->bytes % d->r != 0)
    printf(" + %llu B raw tail", (unsigned long long)(d->bytes % d->r));
  printf("\nimpl          %s\n", ibp_impl_name(ibp_impl_active()));
  printf("chunk width   %u B, threshold %.3f\n", d->params.chunk_bytes,
         d->params.threshold);
  printf("space saved   %.2f%%\n\n", 100.0 * saved_fraction(d));
  printf("GB/s (1e9 B/s of original bytes, best of runs over %.2f s)\n",
         a->seconds);
  char all[32];
  snprintf(all, sizeof all, "%u threads", res->threads[1]);
  printf("  %-12s %12s %12s\n", "stage", "1 thread", all);
  for (int s = 0; s < STAGES; s++)
    printf("  %-12s %12.3f %12.3f\n", stage_names[s], rate(d, res, s, 0),
           rate(d, res, s, 1));
  printf("decoded bytes identical to the original\n");
}

static void json_stages(json_out *j, const char *key, const bench_data *d,
                        const bench_result *res, int k) {
  json_object_begin(j, key);
  json_u64(j, "threads", res->threads[k]);
  for (int s = 0; s < STAGES; s++)
    json_double(j, stage_names[s], rate(d, res, s, k));
  json_object_end(j);
}

static void print_json(const bench_args *a, const bench_data *d,
                       const bench_result *res) {
  json_out j;
  json_init(&j, stdout);
  json_object_begin(&j, NULL);
  if (a->path != NULL)
    json_string(&j, "file", a->path);
  else
    json_string(&j, "data", "generated");
  json_u64(&j, "original_bytes", d->bytes);
  json_u64(&j, "tensor_bytes", d->r);
  json_u64(&j, "tensors", d->n);
  json_u64(&j, "tail_bytes", d->bytes % d->r);
  json_string(&j, "impl", ibp_impl_name(ibp_impl_active()));
  json_u64(&j, "chunk_bytes", d->params.chunk_bytes);
  json_double(&j, "threshold", d->params.threshold);
  json_u64(&j, "compressed_bytes", d->summary.compressed_bytes);
  json_double(&j, "saved_fraction", saved_fraction(d));
  json_double(&j, "seconds", a->seconds);
  json_string(&j, "unit", "GB/s of original bytes (1e9 B/s)");
  json_stages(&j, "one_core", d, res, 0);
  json_stages(&j, "all_cores", d, res, 1);
  json_bool(&j, "verified", 1);
  json_object_end(&j);
}

/* ---- setup -------------------------------------------------------------- */

/* Allocates the buffers (and the generated input); prints on failure. */
static int alloc_buffers(bench_data *d, uint8_t **generated) {
  uint64_t flag_bytes = (d->n + 7) / 8 + 1;
  int gen = generated != NULL;
  if (gen)
    *generated = malloc(d->bytes);
  d->slots = malloc(d->bytes);
  d->dst = malloc(d->bytes);
  d->flags = malloc(flag_bytes);
  if ((gen && *generated == NULL) || !d->slots || !d->dst || !d->flags) {
    char h[32];
    cli_error("ibp bench", "out of memory (need %s)",
              cli_human_bytes((gen ? 3 : 2) * d->bytes, h, sizeof h));
    return CLI_EXIT_DATA;
  }
  /* touch the pages now so that no stage pays for first-use page faults */
  memset(d->slots, 0, d->bytes);
  memset(d->dst, 0, d->bytes);
  return CLI_EXIT_OK;
}

static int select_impl(ibp_impl impl) {
  if (!ibp_impl_available(impl) || ibp_impl_select(impl) != IBP_OK) {
    cli_error("ibp bench",
              "the %s implementation is not available on this "
              "CPU or build",
              ibp_impl_name(impl));
    return CLI_EXIT_DATA;
  }
  return CLI_EXIT_OK;
}

static int bench_on(const bench_args *a, bench_data *d, uint8_t **generated) {
  int rc = alloc_buffers(d, generated);
  if (rc != CLI_EXIT_OK)
    return rc;
  if (generated != NULL) {
    synth_floats(*generated, d->bytes, a->seed, a->codec.threads);
    d->src = *generated;
  }
  rc = codec_opts_search("ibp bench", &a->codec, d->src, d->bytes, 0,
                         &d->params, NULL);
  if (rc != CLI_EXIT_OK)
    return rc;
  bench_result res;
  res.threads[0] = 1;
  res.threads[1] = cli_threads(a->codec.threads);
  rc = run_all(d, a, &res);
  if (rc == CLI_EXIT_OK && a->json)
    print_json(a, d, &res);
  else if (rc == CLI_EXIT_OK)
    print_text(a, d, &res);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  bench_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if ((rc = select_impl(a.impl)) != CLI_EXIT_OK)
    return rc;
  bench_data d;
  memset(&d, 0, sizeof d);
  mapped_file in = {.data = NULL};
  uint8_t *generated = NULL;
  if (a.path != NULL) {
    int err = mapped_file_open(&in, a.path);
    if (err != 0)
      return cli_file_error(a.path, mapped_file_strerror(err));
    d.src = in.data;
    d.bytes = in.size;
  } else {
    d.bytes = a.mib << 20;
  }
  d.r = a.codec.tensor_bytes;
  d.n = d.bytes / d.r;
  rc = bench_on(&a, &d, a.path != NULL ? NULL : &generated);
  ibp_params_free(&d.params);
  free(d.slots);
  free(d.dst);
  free(d.flags);
  free(generated);
  mapped_file_close(&in);
  return rc;
}
