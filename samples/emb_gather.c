/*
 * emb_gather: an embedding lookup served from host memory.  A table of
 * `rows` float32 vectors of `dim` values sits in pinned host memory; each of
 * B batches draws K random row ids and copies every row on its own with
 * cudaMemcpyAsync(dev + k * row_bytes, table + id * row_bytes, row_bytes)
 * into one device batch buffer.  After each batch the buffer is copied back
 * and compared with the rows of the table.
 *
 * Output (stdout): "emb_gather: ok bytes=... copies=... checksum=0x..."
 * (over all batches; the checksum is FNV-1a of every byte that arrived),
 * then key=value lines, the last one "throughput_gbps=...".  Exit 0, 1 on a
 * mismatch (first differing offset printed), 2 on a CUDA error, 3 on a bad
 * command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

static const char synopsis[] =
    "Gathers random rows of an embedding table in pinned host memory onto\n"
    "the GPU: --batches batches of --batch-rows row ids (uniform, from\n"
    "--seed), one cudaMemcpyAsync per row into a device batch buffer, on the\n"
    "default stream (or --stream own: a created stream).  Each batch is\n"
    "checked by copying it back and comparing it with the table's rows.\n"
    "Generated table: float32 rows, normal values with mean 0 and a\n"
    "standard deviation drawn log-uniformly per row from [0.15, 0.6], like\n"
    "GloVe vectors (splitmix64 seeded from --seed and the row, Box-Muller).\n";

typedef struct args {
  uint64_t rows, dim, batches, warmup, batch_rows, seed, row_bytes, corrupt;
  const char *data, *save, *pin, *stream;
  int reg, quiet;
} args;

typedef struct run {
  args a;
  uint8_t *table;
  size_t table_bytes, rb, rows;
  sample_pin pin;
  uint64_t *ids;
  uint8_t *expected; /* the rows of a batch, gathered on the host */
  uint8_t *dev;
  cudaStream_t stream; /* 0: the default stream of this build */
} run;

static void parse(int argc, char **argv, args *a) {
  *a = (args){.rows = 100000,
              .dim = 300,
              .batches = 64,
              .batch_rows = 4096,
              .seed = 1,
              .pin = "hostalloc",
              .stream = "default",
              .corrupt = UINT64_MAX};
  sample_opt opts[] = {
      {"rows", SAMPLE_OPT_U64, &a->rows, "N", "table rows (default 100000)", 0},
      {"dim", SAMPLE_OPT_U64, &a->dim, "N",
       "float32 values per row (default 300)", 0},
      {"batches", SAMPLE_OPT_U64, &a->batches, "N", "batches (default 64)", 0},
      {"warmup", SAMPLE_OPT_U64, &a->warmup, "N",
       "the first N batches are not timed (default 0)", 0},
      {"batch-rows", SAMPLE_OPT_U64, &a->batch_rows, "N",
       "row ids per batch (default 4096)", 0},
      {"seed", SAMPLE_OPT_U64, &a->seed, "N",
       "seed of the table and the ids (default 1)", 0},
      {"data", SAMPLE_OPT_STR, &a->data, "FILE",
       "load the table from FILE (needs --row-bytes)", 0},
      {"row-bytes", SAMPLE_OPT_SIZE, &a->row_bytes, "BYTES",
       "row size of --data (rows = file size / BYTES)", 0},
      {"save", SAMPLE_OPT_STR, &a->save, "FILE",
       "write the table to FILE before copying", 0},
      {"pin", SAMPLE_OPT_STR, &a->pin, "HOW",
       "hostalloc (default), mallochost or register", 0},
      {"register", SAMPLE_OPT_FLAG, &a->reg, NULL,
       "same as --pin register (mmap + cudaHostRegister)", 0},
      {"stream", SAMPLE_OPT_STR, &a->stream, "default|own",
       "stream of the copies (default: the default stream)", 0},
      {"corrupt", SAMPLE_OPT_U64, &a->corrupt, "OFFSET",
       "test of the check: change this byte of the last batch", 0},
      {"quiet", SAMPLE_OPT_FLAG, &a->quiet, NULL,
       "print only the result and throughput lines", 0},
      {NULL, 0, NULL, NULL, NULL, 0}};
  sample_parse(argc, argv, synopsis, opts);
  sample_check_table_opts(opts, a->data, a->row_bytes);
  if (a->reg)
    a->pin = "register";
}

static void check_args(run *r) {
  const args *a = &r->a;
  if (strcmp(a->stream, "default") != 0 && strcmp(a->stream, "own") != 0)
    sample_usage_error("--stream must be default or own (got '%s')", a->stream);
  if (a->data) {
    r->rb = (size_t)a->row_bytes;
    r->rows = sample_file_size(a->data) / r->rb;
    if (r->rows == 0)
      sample_usage_error("--row-bytes %zu is larger than %s", r->rb, a->data);
  } else {
    if (a->dim == 0 || a->dim > (1u << 20))
      sample_usage_error("--dim must be from 1 to %u", 1u << 20);
    if (a->rows == 0 || a->rows > (1ull << 40) / (a->dim * 4))
      sample_usage_error("--rows must be from 1 to %llu for --dim %llu",
                         (1ull << 40) / (a->dim * 4),
                         (unsigned long long)a->dim);
    r->rb = (size_t)a->dim * 4;
    r->rows = (size_t)a->rows;
  }
  if (a->batches == 0)
    sample_usage_error("--batches must be at least 1");
  if (a->warmup >= a->batches)
    sample_usage_error("--warmup must be below --batches");
  if (a->batch_rows == 0 || a->batch_rows > (1ull << 32) / r->rb)
    sample_usage_error("--batch-rows must be from 1 to %llu",
                       (1ull << 32) / r->rb);
  if (a->corrupt != UINT64_MAX && a->corrupt >= a->batch_rows * r->rb)
    sample_usage_error("--corrupt must be below the batch size %llu",
                       (unsigned long long)(a->batch_rows * r->rb));
  r->table_bytes = r->rows * r->rb;
}

static void setup(run *r) {
  const args *a = &r->a;
  check_args(r);
  r->pin = sample_pin_parse(a->pin);
  r->table = sample_pinned_alloc(r->table_bytes, r->pin);
  if (a->data) {
    sample_file_read(a->data, r->table, r->table_bytes);
  } else {
    sample_gen g = {SAMPLE_F32, a->seed, r->rb, 0.15, 0.6};
    sample_generate(r->table, r->table_bytes, &g);
  }
  if (a->save)
    sample_file_write(a->save, r->table, r->table_bytes);
  size_t k = (size_t)a->batch_rows;
  r->ids = malloc(k * sizeof *r->ids);
  r->expected = malloc(k * r->rb);
  if (r->ids == NULL || r->expected == NULL)
    sample_usage_error("out of memory for a batch of %zu rows", k);
  CK(cudaMalloc((void **)&r->dev, k * r->rb));
  if (strcmp(a->stream, "own") == 0)
    CK(cudaStreamCreate(&r->stream));
}

/* One batch: scrub the device buffer (so that a missing copy shows), draw
 * the ids, then the timed copies.  Returns the copies' seconds. */
static double copy_batch(run *r, uint64_t *state) {
  size_t k = (size_t)r->a.batch_rows, rb = r->rb;
  CK(cudaMemset(r->dev, 0xa5, k * rb));
  CK(cudaDeviceSynchronize());
  for (size_t j = 0; j < k; j++) {
    r->ids[j] = sample_rand(state) % r->rows;
    memcpy(r->expected + j * rb, r->table + r->ids[j] * rb, rb);
  }
  sample_timer t;
  sample_timer_begin(&t, &r->stream, 1);
  for (size_t j = 0; j < k; j++)
    CK(cudaMemcpyAsync(r->dev + j * rb, r->table + r->ids[j] * rb, rb,
                       cudaMemcpyHostToDevice, r->stream));
  return sample_timer_end(&t, &r->stream, 1);
}

/* Copies the batch back; on a difference prints it and exits 1. */
static void check_batch(run *r, uint64_t batch, uint64_t *fnv) {
  size_t k = (size_t)r->a.batch_rows, rb = r->rb;
  uint8_t got;
  size_t at = sample_check_device(r->dev, r->expected, k * rb, fnv, &got);
  if (at == SIZE_MAX)
    return;
  size_t slot = at / rb, id = (size_t)r->ids[slot];
  printf("emb_gather: mismatch batch=%llu slot=%zu row=%zu offset=%zu "
         "expected=0x%02x got=0x%02x\n",
         (unsigned long long)batch, slot, id, id * rb + at % rb,
         r->expected[at], got);
  exit(SAMPLE_EXIT_MISMATCH);
}

static void report(const run *r, uint64_t fnv, double seconds) {
  const args *a = &r->a;
  uint64_t copies = a->batches * a->batch_rows;
  int q = a->quiet;
  sample_print_ok(copies * r->rb, copies, fnv);
  sample_print_kv(q, "table_bytes", "%zu", r->table_bytes);
  sample_print_kv(q, "rows", "%zu", r->rows);
  sample_print_kv(q, "row_bytes", "%zu", r->rb);
  sample_print_kv(q, "batches", "%llu", (unsigned long long)a->batches);
  sample_print_kv(q, "warmup", "%llu", (unsigned long long)a->warmup);
  sample_print_kv(q, "batch_rows", "%llu", (unsigned long long)a->batch_rows);
  sample_print_kv(q, "data", "%s", a->data ? a->data : "generated");
  sample_print_kv(q, "seed", "%llu", (unsigned long long)a->seed);
  sample_print_kv(q, "pin", "%s", sample_pin_name(r->pin));
  sample_print_kv(q, "stream", "%s", a->stream);
  sample_print_device(q);
  sample_print_throughput(q, (a->batches - a->warmup) * a->batch_rows * r->rb,
                          seconds);
}

int main(int argc, char **argv) {
  run r = {0};
  sample_prog = "emb_gather";
  parse(argc, argv, &r.a);
  setup(&r);

  uint64_t fnv = SAMPLE_FNV_INIT, state = r.a.seed ^ 0x1d5ull;
  double seconds = 0.0;
  for (uint64_t b = 0; b < r.a.batches; b++) {
    double s = copy_batch(&r, &state);
    if (b >= r.a.warmup)
      seconds += s;
    if (b + 1 == r.a.batches && r.a.corrupt != UINT64_MAX) {
      size_t at = (size_t)r.a.corrupt;
      CK(cudaMemset(r.dev + at, r.expected[at] ^ 0xff, 1));
      CK(cudaDeviceSynchronize());
    }
    check_batch(&r, b, &fnv);
  }
  report(&r, fnv, seconds);

  if (r.stream != 0)
    CK(cudaStreamDestroy(r.stream));
  CK(cudaFree(r.dev));
  sample_pinned_free(r.table, r.table_bytes, r.pin);
  free(r.ids);
  free(r.expected);
  return SAMPLE_EXIT_OK;
}
