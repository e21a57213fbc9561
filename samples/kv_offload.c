/*
 * kv_offload: KV-cache offloading in LLM inference.  The KV cache lives in
 * pinned host memory as B blocks of the same size (paged attention's
 * blocks), block b in slot b % B.  Each block is produced on the device and
 * offloaded: the host generates it into a pageable buffer (this program
 * launches no kernels), copies it to the device with cudaMemcpyAsync, and
 * the device copies it into its slot of the pinned cache (device to host).
 * A prefill offloads the prompt's blocks; then every decode step appends
 * one block and brings W earlier blocks back to the device, one
 * cudaMemcpyAsync per block into a device work buffer: the last W (a
 * sliding window) or W random ones still in the cache -- or, as an engine
 * restoring a prompt's cached KV does, the first --prefill slots in one
 * cudaMemcpyAsync (--fetch prefix: a bulk copy).  The host keeps its
 * own copy of every block: each offloaded slot is compared with it, and
 * each step's work buffer is copied back and compared.
 *
 * Output (stdout): "kv_offload: ok bytes=... copies=... checksum=0x..."
 * (the blocks brought back, over all steps; the checksum is FNV-1a of every
 * byte that arrived), then key=value lines, the last one
 * "throughput_gbps=...".  Exit 0, 1 on a mismatch (first differing offset
 * printed), 2 on a CUDA error, 3 on a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

#define HEAD_DIM 128u /* values of one head for one token: a generated row */
#define KV_HEADS 8u   /* K and V of 8 heads: 16 rows per token */
#define SD_MIN 0.25   /* the scale of each head's values, log-uniform */
#define SD_MAX 4.0
#define MAX_CACHE (1ull << 40)

static const char synopsis[] =
    "KV-cache offloading: a cache of --blocks blocks of --block-bytes in\n"
    "pinned host memory.  A block is made on the device (generated on the\n"
    "host, copied there from pageable memory) and offloaded into its slot of\n"
    "the cache with a device-to-host cudaMemcpyAsync: first --prefill blocks\n"
    "(the prompt), then one per decode step, for --steps steps, the cache\n"
    "used as a ring.  Each step then copies --window earlier blocks back to\n"
    "the device, one cudaMemcpyAsync per block, on the default stream:\n"
    "the most recent ones (--fetch window) or random ones (--fetch random),\n"
    "or the prompt's --prefill slots in one copy (--fetch prefix).\n"
    "Every offloaded block and every block brought back is checked against\n"
    "the host's own copy.  Generated blocks: tokens of K and V for 8 heads\n"
    "of 128 values, normal with mean 0 and a standard deviation per head\n"
    "drawn log-uniformly from [0.25, 4] (splitmix64 seeded from --seed).\n";

typedef struct args {
  uint64_t blocks, block_bytes, prefill, steps, window, warmup, seed, corrupt;
  const char *dtype, *fetch, *pin;
  int reg, quiet;
} args;

typedef struct run {
  args a;
  sample_dtype dtype;
  int random;     /* --fetch random */
  int prefix;     /* --fetch prefix */
  size_t bb;      /* block bytes */
  size_t nblocks; /* slots of the cache */
  size_t kv_bytes;
  uint8_t *kv; /* the pinned cache */
  sample_pin pin;
  uint8_t *mirror;   /* the host's copy of every slot; a new block's staging */
  uint64_t appended; /* blocks made so far; block b is in slot b % nblocks */
  uint64_t *ids;     /* the blocks of this step's fetch */
  sample_gather fetch;
  uint8_t *expected; /* the fetch gathered from the mirror */
  uint8_t *dev_new;  /* the block a step makes */
  uint8_t *dev_work; /* the blocks it brings back */
} run;

static void parse(int argc, char **argv, args *a) {
  *a = (args){.blocks = 1024,
              .block_bytes = 64u << 10,
              .steps = 256,
              .window = 32,
              .seed = 1,
              .dtype = "bf16",
              .fetch = "window",
              .pin = "hostalloc",
              .corrupt = UINT64_MAX};
  sample_opt opts[] = {
      {"blocks", SAMPLE_OPT_U64, &a->blocks, "N",
       "blocks of the cache (default 1024)", 0},
      {"block-bytes", SAMPLE_OPT_SIZE, &a->block_bytes, "BYTES",
       "bytes per block, K/M/G suffixes (default 64K: 16 tokens in bf16)", 0},
      {"prefill", SAMPLE_OPT_U64, &a->prefill, "N",
       "blocks offloaded before the first step (default blocks / 2)", 0},
      {"steps", SAMPLE_OPT_U64, &a->steps, "N",
       "decode steps, one new block each (default 256)", 0},
      {"window", SAMPLE_OPT_U64, &a->window, "N",
       "earlier blocks brought back per step (default 32)", 0},
      {"fetch", SAMPLE_OPT_STR, &a->fetch, "window|random|prefix",
       "the most recent blocks (default), random ones, or the first "
       "--prefill slots in one copy",
       0},
      {"warmup", SAMPLE_OPT_U64, &a->warmup, "N",
       "the first N steps are not timed (default 0)", 0},
      {"dtype", SAMPLE_OPT_STR, &a->dtype, "bf16|f32",
       "generated element type (default bf16)", 0},
      {"seed", SAMPLE_OPT_U64, &a->seed, "N",
       "seed of the blocks and of --fetch random (default 1)", 0},
      {"pin", SAMPLE_OPT_STR, &a->pin, "HOW",
       "hostalloc (default), mallochost or register", 0},
      {"register", SAMPLE_OPT_FLAG, &a->reg, NULL,
       "same as --pin register (mmap + cudaHostRegister)", 0},
      {"corrupt", SAMPLE_OPT_U64, &a->corrupt, "OFFSET",
       "test of the check: change this byte of the last step's fetch", 0},
      {"quiet", SAMPLE_OPT_FLAG, &a->quiet, NULL,
       "print only the result and throughput lines", 0},
      {NULL, 0, NULL, NULL, NULL, 0}};
  sample_parse(argc, argv, synopsis, opts);
  if (!sample_opt_find(opts, "prefill")->given)
    a->prefill = a->blocks / 2;
  if (a->reg)
    a->pin = "register";
}

/* Blocks a step brings back: the prompt's (--fetch prefix), or `window`, fewer
 * while the cache holds fewer earlier blocks (the slot being refilled does not
 * count). */
static uint64_t fetch_blocks(const run *r, uint64_t made) {
  if (r->prefix)
    return r->a.prefill;
  uint64_t held = made - 1 < r->nblocks - 1 ? made - 1 : r->nblocks - 1;
  return held < r->a.window ? held : r->a.window;
}

static void check_args(run *r) {
  const args *a = &r->a;
  r->dtype = sample_dtype_parse(a->dtype);
  if (strcmp(a->fetch, "window") != 0 && strcmp(a->fetch, "random") != 0 &&
      strcmp(a->fetch, "prefix") != 0)
    sample_usage_error("--fetch must be window, random or prefix (got '%s')",
                       a->fetch);
  r->random = a->fetch[0] == 'r';
  r->prefix = a->fetch[0] == 'p';
  if (r->prefix && a->prefill == 0)
    sample_usage_error("--fetch prefix needs --prefill of at least 1");
  size_t row = HEAD_DIM * sample_dtype_size(r->dtype);
  if (a->block_bytes == 0 || a->block_bytes % row != 0 ||
      a->block_bytes > (1u << 30))
    sample_usage_error("--block-bytes must be a multiple of %zu (a head of "
                       "%u %s values), at most 1G",
                       row, HEAD_DIM, a->dtype);
  r->bb = (size_t)a->block_bytes;
  if (a->blocks < 2 || a->blocks > MAX_CACHE / r->bb)
    sample_usage_error("--blocks must be from 2 to %llu for --block-bytes %zu",
                       MAX_CACHE / r->bb, r->bb);
  r->nblocks = (size_t)a->blocks;
  r->kv_bytes = r->nblocks * r->bb;
  if (a->prefill > a->blocks)
    sample_usage_error("--prefill must be at most --blocks");
  if (a->steps == 0)
    sample_usage_error("--steps must be at least 1");
  if (a->warmup >= a->steps)
    sample_usage_error("--warmup must be below --steps");
  if (a->window == 0 || a->window >= a->blocks)
    sample_usage_error("--window must be from 1 to %llu (below --blocks)",
                       (unsigned long long)(a->blocks - 1));
  uint64_t last = fetch_blocks(r, a->prefill + a->steps) * r->bb;
  if (a->corrupt != UINT64_MAX && a->corrupt >= last)
    sample_usage_error("--corrupt must be below the last step's fetch of "
                       "%llu bytes",
                       (unsigned long long)last);
}

static void setup(run *r) {
  check_args(r);
  r->pin = sample_pin_parse(r->a.pin);
  r->kv = sample_pinned_alloc(r->kv_bytes, r->pin);
  r->mirror = sample_alloc(r->kv_bytes);
  size_t w = (size_t)fetch_blocks(r, r->nblocks + 1);
  w = w > r->a.window ? w : (size_t)r->a.window;
  r->ids = sample_alloc(w * sizeof *r->ids);
  r->expected = sample_alloc(w * r->bb);
  sample_gather_init(&r->fetch, w);
  CK(cudaMalloc((void **)&r->dev_new, r->bb));
  CK(cudaMalloc((void **)&r->dev_work, w * r->bb));
}

/* Makes the next block: generated into its mirror slot, copied to the
 * device, offloaded into its slot of the cache.  Enqueued only. */
static void make_block(run *r) {
  uint64_t b = r->appended++;
  size_t off = (size_t)(b % r->nblocks) * r->bb;
  size_t row = HEAD_DIM * sample_dtype_size(r->dtype);
  sample_gen g = {r->dtype, r->a.seed, row, SD_MIN, SD_MAX};
  sample_gen_ext x = {.first_row = b * (r->bb / row),
                      .sd_period = 2 * KV_HEADS};
  sample_generate_ext(r->mirror + off, r->bb, &g, &x);
  CK(cudaMemcpyAsync(r->dev_new, r->mirror + off, r->bb, cudaMemcpyHostToDevice,
                     0));
  CK(cudaMemcpyAsync(r->kv + off, r->dev_new, r->bb, cudaMemcpyDeviceToHost,
                     0));
}

/* The cache slot of block b must hold the host's bytes; else exit 1. */
static void check_offload(const run *r, uint64_t b) {
  size_t off = (size_t)(b % r->nblocks) * r->bb;
  const uint8_t *got = r->kv + off, *want = r->mirror + off;
  if (memcmp(got, want, r->bb) == 0)
    return;
  size_t i = 0;
  while (got[i] == want[i])
    i++;
  printf("kv_offload: mismatch offload block=%llu offset=%zu expected=0x%02x "
         "got=0x%02x\n",
         (unsigned long long)b, off + i, want[i], got[i]);
  exit(SAMPLE_EXIT_MISMATCH);
}

/* Makes `n` blocks, waits for them and checks their slots. */
static void make_blocks(run *r, uint64_t n) {
  uint64_t first = r->appended;
  for (uint64_t i = 0; i < n; i++)
    make_block(r);
  CK(cudaStreamSynchronize(0));
  for (uint64_t b = first; b < r->appended; b++)
    check_offload(r, b);
}

/* The blocks this step brings back, oldest first for a window. */
static void plan_fetch(run *r, uint64_t *state) {
  uint64_t cur = r->appended - 1, n = fetch_blocks(r, r->appended);
  uint64_t held = cur < r->nblocks - 1 ? cur : r->nblocks - 1;
  sample_gather_reset(&r->fetch);
  if (r->prefix) { /* slots [0, prefill) are contiguous: one copy */
    r->ids[0] = 0;
    sample_gather_add(&r->fetch, 0, (size_t)n * r->bb);
    n = 0;
  }
  for (uint64_t k = 0; k < n; k++) {
    uint64_t back = r->random ? 1 + sample_rand(state) % held : n - k;
    r->ids[k] = cur - back;
    sample_gather_add(&r->fetch, (size_t)(r->ids[k] % r->nblocks) * r->bb,
                      r->bb);
  }
  sample_gather_host(&r->fetch, r->mirror, r->expected);
}

/* One decode step: a new block, then the timed fetch of earlier ones into
 * the scrubbed work buffer.  Returns the fetch's seconds. */
static double step(run *r, uint64_t *state) {
  make_blocks(r, 1);
  plan_fetch(r, state);
  if (r->fetch.n == 0)
    return 0.0;
  return sample_gather_timed(&r->fetch, r->dev_work, r->kv);
}

/* Copies the fetch back; on a difference prints it and exits 1. */
static void check_fetch(const run *r, uint64_t step_no, uint64_t *fnv) {
  uint8_t got;
  size_t at =
      sample_check_device(r->dev_work, r->expected, r->fetch.bytes, fnv, &got);
  if (at == SIZE_MAX)
    return;
  size_t within, k = sample_gather_piece(&r->fetch, at, &within);
  printf("kv_offload: mismatch step=%llu block=%llu offset=%zu "
         "expected=0x%02x got=0x%02x\n",
         (unsigned long long)step_no, (unsigned long long)r->ids[k],
         r->fetch.src[k] + within, r->expected[at], got);
  exit(SAMPLE_EXIT_MISMATCH);
}

static void report(const run *r, uint64_t bytes, uint64_t copies, uint64_t fnv,
                   uint64_t timed, double seconds) {
  const args *a = &r->a;
  int q = a->quiet;
  sample_print_ok(bytes, copies, fnv);
  sample_print_kv(q, "kv_bytes", "%zu", r->kv_bytes);
  sample_print_kv(q, "blocks", "%zu", r->nblocks);
  sample_print_kv(q, "block_bytes", "%zu", r->bb);
  sample_print_kv(q, "prefill", "%llu", (unsigned long long)a->prefill);
  sample_print_kv(q, "steps", "%llu", (unsigned long long)a->steps);
  sample_print_kv(q, "warmup", "%llu", (unsigned long long)a->warmup);
  sample_print_kv(q, "window", "%llu", (unsigned long long)a->window);
  sample_print_kv(q, "fetch", "%s", a->fetch);
  sample_print_kv(q, "offloads", "%llu", (unsigned long long)r->appended);
  sample_print_kv(q, "offloaded_bytes", "%llu",
                  (unsigned long long)(r->appended * r->bb));
  sample_print_kv(q, "dtype", "%s", a->dtype);
  sample_print_kv(q, "seed", "%llu", (unsigned long long)a->seed);
  sample_print_kv(q, "pin", "%s", sample_pin_name(r->pin));
  sample_print_device(q);
  sample_print_throughput(q, timed, seconds);
}

int main(int argc, char **argv) {
  run r = {0};
  sample_prog = "kv_offload";
  parse(argc, argv, &r.a);
  setup(&r);

  make_blocks(&r, r.a.prefill);
  uint64_t fnv = SAMPLE_FNV_INIT, state = r.a.seed ^ 0x6b76ull;
  uint64_t bytes = 0, copies = 0, timed = 0;
  double seconds = 0.0;
  for (uint64_t s = 0; s < r.a.steps; s++) {
    double t = step(&r, &state);
    bytes += r.fetch.bytes;
    copies += r.fetch.n;
    if (s >= r.a.warmup) {
      seconds += t;
      timed += r.fetch.bytes;
    }
    if (s + 1 == r.a.steps && r.a.corrupt != UINT64_MAX) {
      size_t at = (size_t)r.a.corrupt;
      CK(cudaMemset(r.dev_work + at, r.expected[at] ^ 0xff, 1));
      CK(cudaDeviceSynchronize());
    }
    check_fetch(&r, s, &fnv);
  }
  report(&r, bytes, copies, fnv, timed, seconds);

  CK(cudaFree(r.dev_new));
  CK(cudaFree(r.dev_work));
  sample_pinned_free(r.kv, r.kv_bytes, r.pin);
  sample_gather_free(&r.fetch);
  free(r.mirror);
  free(r.ids);
  free(r.expected);
  return SAMPLE_EXIT_OK;
}
