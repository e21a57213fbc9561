/*
 * feature_gather: the feature gather of GNN minibatch training.  A table of
 * node features (`rows` float32 vectors of `dim` values) sits in pinned
 * host memory.  Each of B minibatches samples a node set on a synthetic
 * power-law graph -- random seed nodes and up to `fanout` random neighbours
 * of each, duplicates removed -- sorts it, coalesces consecutive row ids
 * into runs and copies each run with one cudaMemcpyAsync into a device
 * batch buffer, so the copies vary in length.  After each minibatch the
 * buffer is copied back and compared with the rows of the table.
 *
 * Output (stdout): "feature_gather: ok bytes=... copies=... checksum=0x..."
 * (over all minibatches; the checksum is FNV-1a of every byte that
 * arrived), then key=value lines, the last one "throughput_gbps=...".
 * Exit 0, 1 on a mismatch (first differing offset printed), 2 on a CUDA
 * error, 3 on a bad command line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

#define DENSITY 0.05     /* generated rows: share of non-zero values */
#define MAX_FANOUT 1000u /* also the largest degree of the graph */
#define DEGREE_MIN 4.0   /* degrees: Pareto with this scale, shape 1.5 */
#define LOCAL_SPAN 16.0  /* mean id distance of a neighbour in v's community */

static const char synopsis[] =
    "Gathers the node features of GNN minibatches from a table in pinned\n"
    "host memory onto the GPU: --batches minibatches, each --batch-nodes\n"
    "random seed nodes and up to --fanout random neighbours of each on a\n"
    "synthetic power-law graph (from --seed; degrees Pareto with mean 12,\n"
    "half of the neighbours in the node's community -- nearby ids -- and\n"
    "half popular nodes -- low ids), duplicates removed.  The sorted row ids\n"
    "are coalesced into runs of consecutive ids, one cudaMemcpyAsync per run\n"
    "into a device batch buffer, on the default stream.  Each minibatch is\n"
    "checked by copying it back and comparing it with the table's rows.\n"
    "Generated table: float32 bag-of-words features (TF-IDF, about 5% of\n"
    "the values non-zero, each row of unit L2 norm, splitmix64 seeded from\n"
    "--seed and the row).\n";

typedef struct args {
  uint64_t rows, dim, batches, warmup, batch_nodes, fanout, seed, row_bytes,
      corrupt;
  const char *data, *save, *pin;
  int reg, quiet;
} args;

typedef struct run {
  args a;
  uint8_t *table;
  size_t table_bytes, rb, rows;
  sample_pin pin;
  uint64_t *ids;      /* the node set of a minibatch, sorted */
  size_t nodes;       /* its size */
  size_t max_nodes;   /* batch_nodes * (1 + fanout) */
  sample_gather runs; /* its runs of consecutive ids */
  uint8_t *expected;  /* its rows, gathered on the host */
  uint8_t *dev;
} run;

static void parse(int argc, char **argv, args *a) {
  *a = (args){.rows = 100000,
              .dim = 256,
              .batches = 32,
              .batch_nodes = 1024,
              .fanout = 10,
              .seed = 1,
              .pin = "hostalloc",
              .corrupt = UINT64_MAX};
  sample_opt opts[] = {
      {"rows", SAMPLE_OPT_U64, &a->rows, "N",
       "nodes: table rows (default 100000)", 0},
      {"dim", SAMPLE_OPT_U64, &a->dim, "N",
       "float32 features per node (default 256)", 0},
      {"batches", SAMPLE_OPT_U64, &a->batches, "N", "minibatches (default 32)",
       0},
      {"warmup", SAMPLE_OPT_U64, &a->warmup, "N",
       "the first N minibatches are not timed (default 0)", 0},
      {"batch-nodes", SAMPLE_OPT_U64, &a->batch_nodes, "N",
       "seed nodes per minibatch (default 1024)", 0},
      {"fanout", SAMPLE_OPT_U64, &a->fanout, "N",
       "neighbours sampled per seed node (default 10)", 0},
      {"seed", SAMPLE_OPT_U64, &a->seed, "N",
       "seed of the table, the graph and the samples (default 1)", 0},
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
      {"corrupt", SAMPLE_OPT_U64, &a->corrupt, "OFFSET",
       "test of the check: change this byte of the last minibatch", 0},
      {"quiet", SAMPLE_OPT_FLAG, &a->quiet, NULL,
       "print only the result and throughput lines", 0},
      {NULL, 0, NULL, NULL, NULL, 0}};
  sample_parse(argc, argv, synopsis, opts);
  sample_check_table_opts(opts, a->data, a->row_bytes);
  if (a->reg)
    a->pin = "register";
}

static void check_table(run *r) {
  const args *a = &r->a;
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
  r->table_bytes = r->rows * r->rb;
}

static void check_args(run *r) {
  const args *a = &r->a;
  check_table(r);
  if (a->batches == 0)
    sample_usage_error("--batches must be at least 1");
  if (a->warmup >= a->batches)
    sample_usage_error("--warmup must be below --batches");
  if (a->fanout > MAX_FANOUT)
    sample_usage_error("--fanout must be at most %u", MAX_FANOUT);
  uint64_t most = (1ull << 32) / r->rb / (1 + a->fanout);
  if (a->batch_nodes == 0 || a->batch_nodes > most)
    sample_usage_error("--batch-nodes must be from 1 to %llu for --fanout "
                       "%llu",
                       (unsigned long long)most, (unsigned long long)a->fanout);
  r->max_nodes = (size_t)(a->batch_nodes * (1 + a->fanout));
  /* a minibatch has at least one node: the first row of the buffer */
  if (a->corrupt != UINT64_MAX && a->corrupt >= r->rb)
    sample_usage_error("--corrupt must be below the row size %zu", r->rb);
}

static void setup(run *r) {
  const args *a = &r->a;
  check_args(r);
  r->pin = sample_pin_parse(a->pin);
  r->table = sample_pinned_alloc(r->table_bytes, r->pin);
  if (a->data) {
    sample_file_read(a->data, r->table, r->table_bytes);
  } else {
    sample_gen g = {SAMPLE_F32, a->seed, r->rb, 0.0, 0.0};
    sample_gen_ext x = {.dist = SAMPLE_DIST_TFIDF, .density = DENSITY};
    sample_generate_ext(r->table, r->table_bytes, &g, &x);
  }
  if (a->save)
    sample_file_write(a->save, r->table, r->table_bytes);
  r->ids = sample_alloc(r->max_nodes * sizeof *r->ids);
  r->expected = sample_alloc(r->max_nodes * r->rb);
  sample_gather_init(&r->runs, r->max_nodes);
  CK(cudaMalloc((void **)&r->dev, r->max_nodes * r->rb));
}

/* ---- the graph ------------------------------------------------------------
 * Never stored: the degree of node v and its k-th neighbour are functions
 * of (seed, v, k).  Degrees follow a power law (Pareto, shape 1.5, mean 12,
 * at most MAX_FANOUT); half of the neighbours lie in v's community (ids at
 * an exponentially distributed distance, mean LOCAL_SPAN), half are popular
 * nodes, id ~ rows * u^3 (low ids are the hubs, as after a reordering by
 * degree). */

static uint64_t node_state(const run *r, uint64_t v, uint64_t k) {
  uint64_t state = (r->a.seed ^ 0x67726170ull) ^ (v * 0x9e3779b97f4a7c15ull) ^
                   (k * 0xc2b2ae3d27d4eb4full);
  sample_rand(&state);
  return state;
}

static uint64_t degree(const run *r, uint64_t v) {
  uint64_t state = node_state(r, v, UINT64_MAX);
  double d = DEGREE_MIN * pow(sample_uniform(&state), -1.0 / 1.5);
  return d < MAX_FANOUT ? (uint64_t)d : MAX_FANOUT;
}

static uint64_t neighbour(const run *r, uint64_t v, uint64_t k) {
  uint64_t state = node_state(r, v, k), n = r->rows;
  uint64_t pick = sample_rand(&state);
  double u = sample_uniform(&state);
  if (pick & 1) { /* a hub */
    uint64_t id = (uint64_t)((double)n * u * u * u);
    return id < n ? id : n - 1;
  }
  uint64_t dist = (1 + (uint64_t)(-log(u) * LOCAL_SPAN)) % n;
  return pick & 2 ? (v + dist) % n : (v + n - dist) % n;
}

/* ---- a minibatch ------------------------------------------------------- */

static int cmp_id(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* Seed nodes and their sampled neighbours, sorted, without duplicates. */
static void sample_nodes(run *r, uint64_t *state) {
  size_t n = 0;
  for (uint64_t i = 0; i < r->a.batch_nodes; i++) {
    uint64_t v = sample_rand(state) % r->rows, deg = degree(r, v);
    r->ids[n++] = v;
    for (uint64_t j = 0; j < r->a.fanout && j < deg; j++) {
      uint64_t k = deg <= r->a.fanout ? j : sample_rand(state) % deg;
      r->ids[n++] = neighbour(r, v, k);
    }
  }
  qsort(r->ids, n, sizeof *r->ids, cmp_id);
  size_t u = 0;
  for (size_t i = 0; i < n; i++) {
    if (u == 0 || r->ids[i] != r->ids[u - 1])
      r->ids[u++] = r->ids[i];
  }
  r->nodes = u;
}

/* The runs of consecutive ids, and their rows gathered on the host. */
static void plan_runs(run *r) {
  sample_gather_reset(&r->runs);
  for (size_t i = 0, j; i < r->nodes; i = j) {
    for (j = i + 1; j < r->nodes && r->ids[j] == r->ids[j - 1] + 1; j++)
      ;
    sample_gather_add(&r->runs, (size_t)r->ids[i] * r->rb, (j - i) * r->rb);
  }
  sample_gather_host(&r->runs, r->table, r->expected);
}

/* One minibatch: sample and plan it, scrub the device buffer (so that a
 * missing copy shows), then the timed copies.  Returns their seconds. */
static double copy_batch(run *r, uint64_t *state) {
  sample_nodes(r, state);
  plan_runs(r);
  return sample_gather_timed(&r->runs, r->dev, r->table);
}

/* Copies the minibatch back; on a difference prints it and exits 1. */
static void check_batch(const run *r, uint64_t batch, uint64_t *fnv) {
  uint8_t got;
  size_t at =
      sample_check_device(r->dev, r->expected, r->runs.bytes, fnv, &got);
  if (at == SIZE_MAX)
    return;
  size_t within, k = sample_gather_piece(&r->runs, at, &within);
  size_t offset = r->runs.src[k] + within;
  printf("feature_gather: mismatch batch=%llu run=%zu row=%zu offset=%zu "
         "expected=0x%02x got=0x%02x\n",
         (unsigned long long)batch, k, offset / r->rb, offset, r->expected[at],
         got);
  exit(SAMPLE_EXIT_MISMATCH);
}

static void report(const run *r, uint64_t bytes, uint64_t copies,
                   uint64_t nodes, uint64_t fnv, uint64_t timed,
                   double seconds) {
  const args *a = &r->a;
  int q = a->quiet;
  sample_print_ok(bytes, copies, fnv);
  sample_print_kv(q, "table_bytes", "%zu", r->table_bytes);
  sample_print_kv(q, "rows", "%zu", r->rows);
  sample_print_kv(q, "row_bytes", "%zu", r->rb);
  sample_print_kv(q, "batches", "%llu", (unsigned long long)a->batches);
  sample_print_kv(q, "warmup", "%llu", (unsigned long long)a->warmup);
  sample_print_kv(q, "batch_nodes", "%llu", (unsigned long long)a->batch_nodes);
  sample_print_kv(q, "fanout", "%llu", (unsigned long long)a->fanout);
  sample_print_kv(q, "nodes", "%llu", (unsigned long long)nodes);
  sample_print_kv(q, "rows_per_copy", "%.3f",
                  copies ? (double)nodes / (double)copies : 0.0);
  sample_print_kv(q, "data", "%s", a->data ? a->data : "generated");
  sample_print_kv(q, "seed", "%llu", (unsigned long long)a->seed);
  sample_print_kv(q, "pin", "%s", sample_pin_name(r->pin));
  sample_print_device(q);
  sample_print_throughput(q, timed, seconds);
}

int main(int argc, char **argv) {
  run r = {0};
  sample_prog = "feature_gather";
  parse(argc, argv, &r.a);
  setup(&r);

  uint64_t fnv = SAMPLE_FNV_INIT, state = r.a.seed ^ 0x6e6eull;
  uint64_t bytes = 0, copies = 0, nodes = 0, timed = 0;
  double seconds = 0.0;
  for (uint64_t b = 0; b < r.a.batches; b++) {
    double s = copy_batch(&r, &state);
    bytes += r.runs.bytes;
    copies += r.runs.n;
    nodes += r.nodes;
    if (b >= r.a.warmup) {
      seconds += s;
      timed += r.runs.bytes;
    }
    if (b + 1 == r.a.batches && r.a.corrupt != UINT64_MAX) {
      size_t at = (size_t)r.a.corrupt;
      CK(cudaMemset(r.dev + at, r.expected[at] ^ 0xff, 1));
      CK(cudaDeviceSynchronize());
    }
    check_batch(&r, b, &fnv);
  }
  report(&r, bytes, copies, nodes, fnv, timed, seconds);

  CK(cudaFree(r.dev));
  sample_pinned_free(r.table, r.table_bytes, r.pin);
  sample_gather_free(&r.runs);
  free(r.ids);
  free(r.expected);
  return SAMPLE_EXIT_OK;
}
