/*
 * weight_stream: weight offloading as in LLM inference.  The weights of L
 * layers live in one pinned host buffer; every pass (epoch) copies them to
 * the GPU layer by layer with cudaMemcpyAsync, alternating between two
 * streams, into one device buffer per layer.  After each pass the device
 * buffers are copied back and compared byte for byte with the host buffer.
 * With --repeat N each layer's copy is made N times back to back on its
 * stream into its buffer, as NVIDIA's bandwidthTest copies one buffer.
 *
 * Output (stdout): "weight_stream: ok bytes=... copies=... checksum=0x..."
 * (bytes and copies over all passes; the checksum is FNV-1a of every byte
 * that arrived, over all passes), then key=value lines, the last one
 * "throughput_gbps=...".  Exit 0, 1 on a mismatch (first differing offset
 * printed), 2 on a CUDA error, 3 on a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

#define ALIGN 256u         /* layer boundaries in the host buffer */
#define ROW_BYTES 8192u    /* one generated row: 4096 bf16 / 2048 f32 */
#define MAX_LAYERS 100000u /* one cudaMalloc each */

static const char synopsis[] =
    "Streams the weights of --layers layers from one pinned host buffer to\n"
    "the GPU, --epochs times: one cudaMemcpyAsync per layer, alternating\n"
    "between two streams, into one device buffer per layer (layer\n"
    "boundaries at multiples of 256 bytes).  Each pass is checked by copying\n"
    "the device buffers back and comparing them with the host buffer.\n"
    "Generated weights: rows of 8 KiB, normal values with mean 0 and a\n"
    "standard deviation drawn log-uniformly per row from [0.005, 0.05]\n"
    "(splitmix64 seeded from --seed and the row, Box-Muller).\n";

typedef struct args {
  uint64_t size, layers, epochs, warmup, seed, touch, corrupt, repeat;
  const char *dtype, *data, *save, *pin;
  int reg, quiet;
} args;

typedef struct run {
  args a;
  uint8_t *host;
  size_t bytes;
  sample_pin pin;
  size_t *off; /* layers + 1 boundaries */
  void **dev;  /* one device buffer per layer */
  cudaStream_t stream[2];
} run;

static void parse(int argc, char **argv, args *a) {
  *a = (args){.size = 256u << 20,
              .layers = 32,
              .epochs = 4,
              .repeat = 1,
              .seed = 1,
              .dtype = "bf16",
              .pin = "hostalloc",
              .corrupt = UINT64_MAX};
  sample_opt opts[] = {
      {"size", SAMPLE_OPT_SIZE, &a->size, "BYTES",
       "weight buffer size, K/M/G suffixes (default 256M)", 0},
      {"layers", SAMPLE_OPT_U64, &a->layers, "N", "layers (default 32)", 0},
      {"epochs", SAMPLE_OPT_U64, &a->epochs, "N",
       "passes over all layers (default 4)", 0},
      {"repeat", SAMPLE_OPT_U64, &a->repeat, "N",
       "copies of each layer a pass, back to back on its stream into its "
       "buffer (default 1; bandwidthTest copies one buffer so)",
       0},
      {"warmup", SAMPLE_OPT_U64, &a->warmup, "N",
       "the first N passes are not timed (default 0)", 0},
      {"dtype", SAMPLE_OPT_STR, &a->dtype, "bf16|f32",
       "generated element type (default bf16)", 0},
      {"seed", SAMPLE_OPT_U64, &a->seed, "N", "generator seed (default 1)", 0},
      {"data", SAMPLE_OPT_STR, &a->data, "FILE",
       "load the weights from FILE (its size) instead", 0},
      {"save", SAMPLE_OPT_STR, &a->save, "FILE",
       "write the weights to FILE before copying", 0},
      {"pin", SAMPLE_OPT_STR, &a->pin, "HOW",
       "hostalloc (default), mallochost or register", 0},
      {"register", SAMPLE_OPT_FLAG, &a->reg, NULL,
       "same as --pin register (mmap + cudaHostRegister)", 0},
      {"touch", SAMPLE_OPT_U64, &a->touch, "N",
       "between passes, change N random 4-byte words of the weights", 0},
      {"corrupt", SAMPLE_OPT_U64, &a->corrupt, "OFFSET",
       "test of the check: change this device byte after the last pass", 0},
      {"quiet", SAMPLE_OPT_FLAG, &a->quiet, NULL,
       "print only the result and throughput lines", 0},
      {NULL, 0, NULL, NULL, NULL, 0}};
  sample_parse(argc, argv, synopsis, opts);
  if (a->data && (sample_opt_find(opts, "size")->given ||
                  sample_opt_find(opts, "dtype")->given))
    sample_usage_error("--data takes the size and contents of the file; "
                       "drop --size and --dtype");
  if (a->reg)
    a->pin = "register";
}

static void setup(run *r) {
  args *a = &r->a;
  r->pin = sample_pin_parse(a->pin);
  sample_dtype dtype = sample_dtype_parse(a->dtype);
  r->bytes = a->data ? sample_file_size(a->data) : (size_t)a->size;
  if (r->bytes == 0)
    sample_usage_error("--size must be at least 1");
  size_t max_layers =
      r->bytes / ALIGN < MAX_LAYERS ? r->bytes / ALIGN : MAX_LAYERS;
  if (a->layers == 0 || a->layers > max_layers)
    sample_usage_error("--layers must be from 1 to %zu for %zu bytes "
                       "(layers of at least %u bytes)",
                       max_layers, r->bytes, ALIGN);
  if (a->epochs == 0)
    sample_usage_error("--epochs must be at least 1");
  if (a->repeat == 0 || a->repeat > 1000000)
    sample_usage_error("--repeat must be from 1 to 1000000");
  if (a->warmup >= a->epochs)
    sample_usage_error("--warmup must be below --epochs");
  if (a->corrupt != UINT64_MAX && a->corrupt >= r->bytes)
    sample_usage_error("--corrupt must be below the buffer size %zu", r->bytes);

  r->host = sample_pinned_alloc(r->bytes, r->pin);
  if (a->data) {
    sample_file_read(a->data, r->host, r->bytes);
  } else {
    sample_gen g = {dtype, a->seed, ROW_BYTES, 0.005, 0.05};
    sample_generate(r->host, r->bytes, &g);
  }
  if (a->save)
    sample_file_write(a->save, r->host, r->bytes);

  size_t n = (size_t)a->layers;
  r->off = malloc((n + 1) * sizeof *r->off);
  r->dev = calloc(n, sizeof *r->dev);
  if (r->off == NULL || r->dev == NULL)
    sample_usage_error("out of memory for %zu layers", n);
  for (size_t i = 0; i < n; i++)
    r->off[i] = (size_t)((uint64_t)r->bytes * i / n) & ~(size_t)(ALIGN - 1);
  r->off[n] = r->bytes;
  for (size_t i = 0; i < n; i++)
    CK(cudaMalloc(&r->dev[i], r->off[i + 1] - r->off[i]));
  CK(cudaStreamCreate(&r->stream[0]));
  CK(cudaStreamCreate(&r->stream[1]));
}

/* Fills every device buffer with 0xa5, so that a copy that did not happen
 * shows in the next check. */
static void scrub(run *r) {
  for (size_t i = 0; i < r->a.layers; i++)
    CK(cudaMemset(r->dev[i], 0xa5, r->off[i + 1] - r->off[i]));
  CK(cudaDeviceSynchronize());
}

/* One pass: every layer (--repeat times), streams alternating.  Returns
 * its seconds. */
static double copy_pass(run *r) {
  sample_timer t;
  sample_timer_begin(&t, r->stream, 2);
  for (size_t i = 0; i < r->a.layers; i++)
    for (uint64_t k = 0; k < r->a.repeat; k++)
      CK(cudaMemcpyAsync(r->dev[i], r->host + r->off[i],
                         r->off[i + 1] - r->off[i], cudaMemcpyHostToDevice,
                         r->stream[i % 2]));
  return sample_timer_end(&t, r->stream, 2);
}

/* --corrupt: one device byte made to differ from the host's. */
static void corrupt(run *r, size_t at) {
  size_t i = 0;
  while (r->off[i + 1] <= at)
    i++;
  CK(cudaMemset((uint8_t *)r->dev[i] + (at - r->off[i]), r->host[at] ^ 0xff,
                1));
  CK(cudaDeviceSynchronize());
}

/* Copies every layer back; on a difference prints it and exits 1. */
static void check_pass(run *r, uint64_t epoch, uint64_t *fnv) {
  for (size_t i = 0; i < r->a.layers; i++) {
    size_t len = r->off[i + 1] - r->off[i];
    uint8_t got;
    size_t at =
        sample_check_device(r->dev[i], r->host + r->off[i], len, fnv, &got);
    if (at != SIZE_MAX) {
      at += r->off[i];
      printf("weight_stream: mismatch epoch=%llu layer=%zu offset=%zu "
             "expected=0x%02x got=0x%02x\n",
             (unsigned long long)epoch, i, at, r->host[at], got);
      exit(SAMPLE_EXIT_MISMATCH);
    }
  }
}

/* --touch: the host changes some weights between passes (the lowest bit
 * of 4-byte words), as a training step would. */
static void touch(run *r, uint64_t *state) {
  size_t words = r->bytes / 4;
  for (uint64_t k = 0; k < r->a.touch && words > 0; k++)
    r->host[4 * (size_t)(sample_rand(state) % words)] ^= 1;
}

static void report(const run *r, uint64_t fnv, double seconds) {
  const args *a = &r->a;
  uint64_t total = (uint64_t)r->bytes * a->epochs * a->repeat;
  int q = a->quiet;
  sample_print_ok(total, a->layers * a->epochs * a->repeat, fnv);
  sample_print_kv(q, "buffer_bytes", "%zu", r->bytes);
  sample_print_kv(q, "layers", "%llu", (unsigned long long)a->layers);
  sample_print_kv(q, "epochs", "%llu", (unsigned long long)a->epochs);
  sample_print_kv(q, "warmup", "%llu", (unsigned long long)a->warmup);
  sample_print_kv(q, "repeat", "%llu", (unsigned long long)a->repeat);
  sample_print_kv(q, "data", "%s", a->data ? a->data : "generated");
  if (!a->data) {
    sample_print_kv(q, "dtype", "%s", a->dtype);
    sample_print_kv(q, "seed", "%llu", (unsigned long long)a->seed);
  }
  sample_print_kv(q, "pin", "%s", sample_pin_name(r->pin));
  sample_print_kv(q, "touch", "%llu", (unsigned long long)a->touch);
  sample_print_device(q);
  sample_print_throughput(
      q, (uint64_t)r->bytes * (a->epochs - a->warmup) * a->repeat, seconds);
}

int main(int argc, char **argv) {
  run r = {0};
  sample_prog = "weight_stream";
  parse(argc, argv, &r.a);
  setup(&r);

  uint64_t fnv = SAMPLE_FNV_INIT, touch_state = r.a.seed ^ 0x70c4ull;
  double seconds = 0.0;
  for (uint64_t e = 0; e < r.a.epochs; e++) {
    scrub(&r);
    double s = copy_pass(&r);
    if (e >= r.a.warmup)
      seconds += s;
    if (e + 1 == r.a.epochs && r.a.corrupt != UINT64_MAX)
      corrupt(&r, (size_t)r.a.corrupt);
    check_pass(&r, e, &fnv);
    if (e + 1 < r.a.epochs)
      touch(&r, &touch_state);
  }
  report(&r, fnv, seconds);

  for (size_t i = 0; i < r.a.layers; i++)
    CK(cudaFree(r.dev[i]));
  CK(cudaStreamDestroy(r.stream[0]));
  CK(cudaStreamDestroy(r.stream[1]));
  sample_pinned_free(r.host, r.bytes, r.pin);
  free(r.off);
  free(r.dev);
  return SAMPLE_EXIT_OK;
}
