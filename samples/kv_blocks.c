/*
 * kv_blocks: a KV-cache block loader, as vLLM's CPU offloading and LMCache
 * load cached prefixes back into the GPU's paged KV cache.  A pool of B KV
 * blocks sits in pinned host memory; the device holds a paged cache of S
 * slots.  Each step picks W blocks -- the W before a position that
 * advances one block per step (--fetch window), W random ones (--fetch
 * random) or half of each (--fetch mixed) -- gives each the next free slot
 * (round robin), and loads them all with ONE cudaMemcpyBatchAsync on a
 * created stream, then synchronizes.  Every slot written is copied back and
 * compared with the pool.
 *
 * Layouts.  A host block is contiguous, layer by layer: [layer][K|V]
 * [token][head][head_dim] (LMCache keeps a chunk's layers together the same
 * way).  The device cache is layer-major like vLLM's, one paged tensor per
 * layer -- FlashInfer's [num_blocks][K|V][block_size][heads][head_dim] --
 * so the K and V of one block in one layer form one contiguous run on both
 * sides.  vLLM's swap_blocks issues one cudaMemcpyAsync per block per layer
 * (a call per layer's tensor, looping over the blocks); LMCache batches the
 * transfers of a request.  This sample keeps vLLM's unit, one copy per
 * block per layer (block_tokens x 2 x heads x head_dim values), and issues
 * all of a step's units -- W blocks x L layers entries -- in one batch, as
 * LMCache would.
 *
 * Generated blocks: 16-bit floats (bf16 or fp16), one generated row per
 * head of one token (head_dim values), normal with mean 0 and a standard
 * deviation drawn log-uniformly from [0.25, 4] that belongs to the (layer,
 * K|V, head) and stays the same from token to token and block to block.
 *
 * Output (stdout): "kv_blocks: ok bytes=... copies=... checksum=0x..."
 * (bytes and entries of the batches, over all steps; the checksum is
 * FNV-1a of every byte that arrived, entry by entry), then key=value
 * lines, the last one "throughput_gbps=...".  Exit 0, 1 on a mismatch
 * (first differing byte printed), 2 on a CUDA error, 3 on a bad command
 * line or input file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

#define SD_MIN 0.25 /* the scale of each head's values, log-uniform */
#define SD_MAX 4.0
#define MAX_POOL (1ull << 40)
#define MAX_UNIT (1ull << 30)

static const char synopsis[] =
    "KV-cache block loading (vLLM / LMCache): a pool of --blocks KV blocks\n"
    "in pinned host memory, a paged KV cache of --slots slots on the device,\n"
    "one tensor per layer.  Each of --steps steps picks --window blocks\n"
    "(the most recent: --fetch window; random: --fetch random; half each:\n"
    "--fetch mixed), gives each the next slot and loads them with one\n"
    "cudaMemcpyBatchAsync on a created stream -- one entry per block per\n"
    "layer -- then synchronizes.  Every slot loaded is copied back and\n"
    "checked.  A block holds --block-tokens tokens x --layers layers x K and\n"
    "V x --heads heads x --head-dim values in bf16 or fp16, normal with mean\n"
    "0 and a standard deviation per (layer, K|V, head) drawn log-uniformly\n"
    "from [0.25, 4] (splitmix64 seeded from --seed).\n";

typedef struct args {
  uint64_t blocks, slots, tokens, layers, heads, head_dim, steps, window;
  uint64_t warmup, seed, corrupt;
  const char *dtype, *fetch, *pin, *data, *save;
  int reg, quiet;
} args;

typedef enum fetch_kind { FETCH_WINDOW, FETCH_RANDOM, FETCH_MIXED } fetch_kind;

typedef struct run {
  args a;
  sample_dtype dtype;
  fetch_kind fetch;
  size_t unit; /* bytes of one block in one layer: a batch entry */
  size_t bb;   /* block bytes: layers x unit */
  size_t nblocks, nslots, layers;
  size_t pool_bytes;
  uint8_t *pool; /* pinned: block b, layer l at (b * layers + l) * unit */
  sample_pin pin;
  uint8_t *cache; /* device: layer l, slot s at (l * nslots + s) * unit */
  cudaStream_t stream;
  size_t next_slot; /* round robin */
  uint64_t *ids;    /* this step's blocks */
  size_t *slots;    /* and their slots */
  size_t n;         /* entries of this step's batch */
  void **dsts;      /* the batch: n entries */
  const void **srcs;
  size_t *sizes;
} run;

static void parse(int argc, char **argv, args *a) {
  *a = (args){.blocks = 256,
              .slots = 64,
              .tokens = 16,
              .layers = 4,
              .heads = 8,
              .head_dim = 128,
              .steps = 64,
              .window = 16,
              .seed = 1,
              .dtype = "bf16",
              .fetch = "window",
              .pin = "hostalloc",
              .corrupt = UINT64_MAX};
  sample_opt opts[] = {
      {"blocks", SAMPLE_OPT_U64, &a->blocks, "N",
       "blocks of the host pool (default 256)", 0},
      {"slots", SAMPLE_OPT_U64, &a->slots, "N",
       "blocks of the device cache (default 64)", 0},
      {"block-tokens", SAMPLE_OPT_U64, &a->tokens, "N",
       "tokens per block (default 16)", 0},
      {"layers", SAMPLE_OPT_U64, &a->layers, "N", "layers (default 4)", 0},
      {"heads", SAMPLE_OPT_U64, &a->heads, "N", "KV heads (default 8)", 0},
      {"head-dim", SAMPLE_OPT_U64, &a->head_dim, "N",
       "values per head (default 128)", 0},
      {"steps", SAMPLE_OPT_U64, &a->steps, "N",
       "steps, one batch each (default 64)", 0},
      {"window", SAMPLE_OPT_U64, &a->window, "N",
       "blocks loaded per step (default 16)", 0},
      {"fetch", SAMPLE_OPT_STR, &a->fetch, "window|random|mixed",
       "the most recent blocks (default), random ones, or half each", 0},
      {"warmup", SAMPLE_OPT_U64, &a->warmup, "N",
       "the first N steps are not timed (default 0)", 0},
      {"dtype", SAMPLE_OPT_STR, &a->dtype, "bf16|fp16",
       "generated element type (default bf16)", 0},
      {"seed", SAMPLE_OPT_U64, &a->seed, "N",
       "seed of the blocks and of the random picks (default 1)", 0},
      {"data", SAMPLE_OPT_STR, &a->data, "FILE",
       "load the pool from FILE (blocks = file size / block bytes)", 0},
      {"save", SAMPLE_OPT_STR, &a->save, "FILE",
       "write the pool to FILE before loading", 0},
      {"pin", SAMPLE_OPT_STR, &a->pin, "HOW",
       "hostalloc (default), mallochost or register", 0},
      {"register", SAMPLE_OPT_FLAG, &a->reg, NULL,
       "same as --pin register (mmap + cudaHostRegister)", 0},
      {"corrupt", SAMPLE_OPT_U64, &a->corrupt, "OFFSET",
       "test of the check: change this byte of the last step's batch", 0},
      {"quiet", SAMPLE_OPT_FLAG, &a->quiet, NULL,
       "print only the result and throughput lines", 0},
      {NULL, 0, NULL, NULL, NULL, 0}};
  sample_parse(argc, argv, synopsis, opts);
  if (a->data && sample_opt_find(opts, "blocks")->given)
    sample_usage_error("--data takes its blocks from the file; drop --blocks");
  if (a->reg)
    a->pin = "register";
}

static sample_dtype parse_dtype(const char *s) {
  if (strcmp(s, "bf16") == 0)
    return SAMPLE_BF16;
  if (strcmp(s, "fp16") == 0)
    return SAMPLE_F16;
  sample_usage_error("--dtype must be bf16 or fp16 (got '%s')", s);
}

static fetch_kind parse_fetch(const char *s) {
  if (strcmp(s, "window") == 0)
    return FETCH_WINDOW;
  if (strcmp(s, "random") == 0)
    return FETCH_RANDOM;
  if (strcmp(s, "mixed") == 0)
    return FETCH_MIXED;
  sample_usage_error("--fetch must be window, random or mixed (got '%s')", s);
}

/* The block shape: unit = tokens x 2 x heads x head_dim values. */
static void check_shape(run *r) {
  const args *a = &r->a;
  uint64_t dims[] = {a->tokens, a->layers, a->heads, a->head_dim};
  const char *names[] = {"--block-tokens", "--layers", "--heads", "--head-dim"};
  for (int i = 0; i < 4; i++) {
    if (dims[i] == 0 || dims[i] > (1u << 20))
      sample_usage_error("%s must be from 1 to %u", names[i], 1u << 20);
  }
  uint64_t unit = a->tokens * 2 * a->heads;
  if (unit > MAX_UNIT / 2 || unit * a->head_dim > MAX_UNIT / 2 ||
      a->layers > MAX_POOL / (unit * a->head_dim * 2))
    sample_usage_error("a block of one layer must be at most 1G and a block "
                       "at most 1T");
  r->unit = (size_t)(unit * a->head_dim * 2);
  r->layers = (size_t)a->layers;
  r->bb = r->layers * r->unit;
}

static void check_args(run *r) {
  const args *a = &r->a;
  r->dtype = parse_dtype(a->dtype);
  r->fetch = parse_fetch(a->fetch);
  check_shape(r);
  if (a->data) {
    r->nblocks = sample_file_size(a->data) / r->bb;
    if (r->nblocks == 0)
      sample_usage_error("a block of %zu bytes is larger than %s", r->bb,
                         a->data);
  } else {
    if (a->blocks == 0 || a->blocks > MAX_POOL / r->bb)
      sample_usage_error("--blocks must be from 1 to %llu for blocks of %zu "
                         "bytes",
                         MAX_POOL / r->bb, r->bb);
    r->nblocks = (size_t)a->blocks;
  }
  r->pool_bytes = r->nblocks * r->bb;
  if (a->steps == 0)
    sample_usage_error("--steps must be at least 1");
  if (a->warmup >= a->steps)
    sample_usage_error("--warmup must be below --steps");
  if (a->window == 0 || a->window > r->nblocks)
    sample_usage_error("--window must be from 1 to %zu (the pool's blocks)",
                       r->nblocks);
  if (a->slots < a->window || a->slots > MAX_POOL / r->bb)
    sample_usage_error("--slots must be from --window (%llu) to %llu",
                       (unsigned long long)a->window, MAX_POOL / r->bb);
  r->nslots = (size_t)a->slots;
  uint64_t last = a->window * r->bb;
  if (a->corrupt != UINT64_MAX && a->corrupt >= last)
    sample_usage_error("--corrupt must be below the batch size %llu",
                       (unsigned long long)last);
}

/* Generates the pool: each (block, layer, K|V) part is T x H rows of one
 * head of one token; the rows of one (layer, K|V) share a seed and take
 * their scale from their head (sd_period H). */
static void generate(run *r) {
  const args *a = &r->a;
  size_t row = (size_t)a->head_dim * 2, part = r->unit / 2;
  uint64_t rows_per_part = a->tokens * a->heads;
  for (size_t b = 0; b < r->nblocks; b++) {
    for (size_t l = 0; l < r->layers; l++) {
      for (size_t kv = 0; kv < 2; kv++) {
        uint64_t seed = a->seed ^ ((2 * l + kv + 1) * 0x9e3779b97f4a7c15ull);
        sample_gen g = {r->dtype, seed, row, SD_MIN, SD_MAX};
        sample_gen_ext x = {.first_row = b * rows_per_part,
                            .sd_period = a->heads};
        size_t off = (b * r->layers + l) * r->unit + kv * part;
        sample_generate_ext(r->pool + off, part, &g, &x);
      }
    }
  }
}

static void setup(run *r) {
  const args *a = &r->a;
  check_args(r);
  r->pin = sample_pin_parse(a->pin);
  r->pool = sample_pinned_alloc(r->pool_bytes, r->pin);
  if (a->data)
    sample_file_read(a->data, r->pool, r->pool_bytes);
  else
    generate(r);
  if (a->save)
    sample_file_write(a->save, r->pool, r->pool_bytes);
  size_t w = (size_t)a->window, n = w * r->layers;
  r->ids = sample_alloc(w * sizeof *r->ids);
  r->slots = sample_alloc(w * sizeof *r->slots);
  r->dsts = sample_alloc(n * sizeof *r->dsts);
  r->srcs = sample_alloc(n * sizeof *r->srcs);
  r->sizes = sample_alloc(n * sizeof *r->sizes);
  CK(cudaMalloc((void **)&r->cache, r->layers * r->nslots * r->unit));
  CK(cudaStreamCreate(&r->stream));
}

static uint8_t *host_unit(const run *r, uint64_t block, size_t layer) {
  return r->pool + ((size_t)block * r->layers + layer) * r->unit;
}

static uint8_t *dev_unit(const run *r, size_t slot, size_t layer) {
  return r->cache + (layer * r->nslots + slot) * r->unit;
}

/* The blocks of step s and their slots, then the batch: for each block,
 * one entry per layer. */
static void plan(run *r, uint64_t s, uint64_t *state) {
  size_t w = (size_t)r->a.window, nb = r->nblocks;
  size_t recent = r->fetch == FETCH_WINDOW   ? w
                  : r->fetch == FETCH_RANDOM ? 0
                                             : (w + 1) / 2;
  for (size_t k = 0; k < w; k++) {
    if (k < recent) /* the `recent` blocks before position s + recent */
      r->ids[k] = (s + k) % nb;
    else
      r->ids[k] = sample_rand(state) % nb;
    r->slots[k] = r->next_slot;
    r->next_slot = (r->next_slot + 1) % r->nslots;
  }
  r->n = 0;
  for (size_t k = 0; k < w; k++) {
    for (size_t l = 0; l < r->layers; l++, r->n++) {
      r->dsts[r->n] = dev_unit(r, r->slots[k], l);
      r->srcs[r->n] = host_unit(r, r->ids[k], l);
      r->sizes[r->n] = r->unit;
    }
  }
}

/* The timed part of a step: the batch on the stream, then a synchronize.
 * Returns its seconds (sample_timer). */
static double load(run *r) {
  struct cudaMemcpyAttributes attr = {.srcAccessOrder =
                                          cudaMemcpySrcAccessOrderStream};
  size_t first = 0;
  sample_timer t;
  sample_timer_begin(&t, &r->stream, 1);
  CK(cudaMemcpyBatchAsync(r->dsts, r->srcs, r->sizes, r->n, &attr, &first, 1,
                          r->stream));
  double seconds = sample_timer_end(&t, &r->stream, 1);
  CK(cudaStreamSynchronize(r->stream));
  return seconds;
}

/* Byte `at` of the step's batch (entries in order) on the device. */
static uint8_t *batch_byte(const run *r, uint64_t at) {
  size_t k = (size_t)(at / r->unit);
  return (uint8_t *)r->dsts[k] + at % r->unit;
}

/* Copies every entry back; on a difference prints it and exits 1. */
static void check(const run *r, uint64_t step_no, uint64_t *fnv) {
  for (size_t e = 0; e < r->n; e++) {
    uint8_t got;
    size_t at =
        sample_check_device(r->dsts[e], r->srcs[e], r->sizes[e], fnv, &got);
    if (at == SIZE_MAX)
      continue;
    size_t k = e / r->layers, l = e % r->layers;
    const uint8_t *want = r->srcs[e];
    printf("kv_blocks: mismatch step=%llu block=%llu layer=%zu slot=%zu "
           "offset=%zu expected=0x%02x got=0x%02x\n",
           (unsigned long long)step_no, (unsigned long long)r->ids[k], l,
           r->slots[k], (size_t)(want - r->pool) + at, want[at], got);
    exit(SAMPLE_EXIT_MISMATCH);
  }
}

static void report(const run *r, uint64_t bytes, uint64_t copies, uint64_t fnv,
                   uint64_t timed, double seconds) {
  const args *a = &r->a;
  int q = a->quiet;
  sample_print_ok(bytes, copies, fnv);
  sample_print_kv(q, "pool_bytes", "%zu", r->pool_bytes);
  sample_print_kv(q, "blocks", "%zu", r->nblocks);
  sample_print_kv(q, "block_bytes", "%zu", r->bb);
  sample_print_kv(q, "entry_bytes", "%zu", r->unit);
  sample_print_kv(q, "block_tokens", "%llu", (unsigned long long)a->tokens);
  sample_print_kv(q, "layers", "%zu", r->layers);
  sample_print_kv(q, "heads", "%llu", (unsigned long long)a->heads);
  sample_print_kv(q, "head_dim", "%llu", (unsigned long long)a->head_dim);
  sample_print_kv(q, "slots", "%zu", r->nslots);
  sample_print_kv(q, "steps", "%llu", (unsigned long long)a->steps);
  sample_print_kv(q, "warmup", "%llu", (unsigned long long)a->warmup);
  sample_print_kv(q, "window", "%llu", (unsigned long long)a->window);
  sample_print_kv(q, "fetch", "%s", a->fetch);
  sample_print_kv(q, "batches", "%llu", (unsigned long long)a->steps);
  sample_print_kv(q, "dtype", "%s", sample_dtype_name(r->dtype));
  sample_print_kv(q, "data", "%s", a->data ? a->data : "generated");
  sample_print_kv(q, "seed", "%llu", (unsigned long long)a->seed);
  sample_print_kv(q, "pin", "%s", sample_pin_name(r->pin));
  sample_print_device(q);
  sample_print_throughput(q, timed, seconds);
}

int main(int argc, char **argv) {
  run r = {0};
  sample_prog = "kv_blocks";
  parse(argc, argv, &r.a);
  setup(&r);

  size_t cache_bytes = r.layers * r.nslots * r.unit;
  uint64_t fnv = SAMPLE_FNV_INIT, state = r.a.seed ^ 0x6b76626cull;
  uint64_t bytes = 0, copies = 0, timed = 0;
  double seconds = 0.0;
  for (uint64_t s = 0; s < r.a.steps; s++) {
    plan(&r, s, &state);
    sample_scrub_device(r.cache, cache_bytes); /* a missing copy shows */
    double t = load(&r);
    uint64_t step_bytes = (uint64_t)r.n * r.unit;
    bytes += step_bytes;
    copies += r.n;
    if (s >= r.a.warmup) {
      seconds += t;
      timed += step_bytes;
    }
    if (s + 1 == r.a.steps && r.a.corrupt != UINT64_MAX) {
      uint8_t *p = batch_byte(&r, r.a.corrupt);
      const uint8_t *want =
          (const uint8_t *)r.srcs[r.a.corrupt / r.unit] + r.a.corrupt % r.unit;
      CK(cudaMemset(p, *want ^ 0xff, 1));
      CK(cudaDeviceSynchronize());
    }
    check(&r, s, &fnv);
  }
  report(&r, bytes, copies, fnv, timed, seconds);

  CK(cudaStreamDestroy(r.stream));
  CK(cudaFree(r.cache));
  sample_pinned_free(r.pool, r.pool_bytes, r.pin);
  free(r.ids);
  free(r.slots);
  free(r.dsts);
  free(r.srcs);
  free(r.sizes);
  return SAMPLE_EXIT_OK;
}
