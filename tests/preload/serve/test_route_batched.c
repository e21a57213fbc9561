/* The batched route's prior (serve/route/route_batched.c): what an
 * exploration of it takes -- the smallest batch alike the one expected
 * whose copies the model costs nearly as little each -- and what that
 * batch costs (ibp_route_cost.explores, .once_ns); a timed batch's model;
 * the exponent stage's term in a batch's decode. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "serve/route/batch_model.h"
#include "serve/route/route.h"
#include "serve/route/route_batched.h"

/* the route's row of the table (serve/route/table.c) */
extern const ibp_route_ops ibp__route_batched;

/* The model's cost of one copy in a batch of n, ns, before the margin. */
static double per_copy(const ibp_profile *p, const ibp_gate_copy *g, double n,
                       int own_call) {
  double cpu, gpu;
  ibp__route_batched_split(p, g, n, own_call, &cpu, &gpu);
  return cpu + gpu;
}

/* Entries of an application's call (own_call 0) or held copies of
 * `bytes` in tensors of R bytes, batches of `expected` expected, of a
 * region stored with the exponent stage or not (`stage`). */
static ibp_route_cost prior_of_stage(const ibp_profile *p, uint64_t bytes,
                                     uint32_t R, uint32_t expected, int entries,
                                     int stage, ibp_gate_copy *g) {
  static ibp_copy c;
  memset(&c, 0, sizeof c);
  c.hold_only = 1;
  c.entries = entries ? expected : 0;
  *g = (ibp_gate_copy){.bytes = bytes,
                       .host_bytes = bytes * 8 / 10,
                       .sms = 1,
                       .units = bytes / R,
                       .tensor_bytes = R,
                       .stage = stage};
  ibp_route_copy x;
  memset(&x, 0, sizeof x);
  x.c = &c;
  x.p = p;
  x.g = *g;
  x.mode = IBP_CLASS_APP_BATCH;
  x.batch_n = expected;
  return ibp__route_batched.prior(&x);
}

static ibp_route_cost prior_of(const ibp_profile *p, uint64_t bytes, uint32_t R,
                               uint32_t expected, int entries,
                               ibp_gate_copy *g) {
  return prior_of_stage(p, bytes, R, expected, entries, 0, g);
}

/* explores: at least a quarter of the batch expected, its copies' cost
 * within IBP_BATCH_EXPLORE_SPREAD of the expected batch's, the smallest
 * such of the doublings; once_ns: that batch's cost over the margin. */
static void check_explores(const ibp_profile *p, uint64_t bytes, uint32_t R,
                           uint32_t expected, int entries) {
  ibp_gate_copy g;
  const ibp_route_cost c = prior_of(p, bytes, R, expected, entries, &g);
  const double per = per_copy(p, &g, expected, 0);
  const uint32_t n = c.explores;
  CHECK(n >= 1 && n <= expected);
  CHECK(n * IBP_CHOOSE_LIKE >= expected);
  CHECK(n == expected ||
        per_copy(p, &g, n, 0) <= per * IBP_BATCH_EXPLORE_SPREAD * (1 + 1e-9));
  const uint32_t half = n / 2;
  CHECK(half * IBP_CHOOSE_LIKE < expected ||
        per_copy(p, &g, half, 0) > per * IBP_BATCH_EXPLORE_SPREAD ||
        !ibp__batch_stands_for(p, &g, half, expected, 0));
  CHECK(ibp__batch_stands_for(p, &g, n, expected, 0));
  CHECK(fabs(c.once_ns - n * per_copy(p, &g, n, 0) / IBP_BATCH_MARGIN) <
        1e-6 * c.once_ns);
  fprintf(stderr, "%s: %u copies of %llu B, tensors of %u: explored %u\n",
          p->name, expected, (unsigned long long)bytes, R, n);
}

/* The GPU's time of a batch of n copies on profile p, ns per copy. */
static double gpu_per_copy(const ibp_profile *p, const ibp_gate_copy *g,
                           double n, int own_call) {
  double cpu, gpu;
  ibp__route_batched_split(p, g, n, own_call, &cpu, &gpu);
  return gpu;
}

/* Copies held for batches of `expected`, explored by their prior on p and
 * timed on the truth -- a profile wrong in ways the probes of
 * ibp__batch_stands_for do not name as well: the explored batch is off
 * its model by at least the expected batch's factor over
 * IBP_BATCH_STANDS_LIKE (the class takes the factor for its batches, and
 * a smaller one would make them look cheaper than they are).  Returns the
 * one factor over the other. */
static double check_stands_for(const ibp_profile *p, const ibp_profile *truth,
                               uint64_t bytes, uint32_t R, uint32_t expected,
                               int entries, int stage) {
  ibp_gate_copy g;
  const uint32_t n =
      prior_of_stage(p, bytes, R, expected, entries, stage, &g).explores;
  const int own_call = 0;
  const double at_n = gpu_per_copy(truth, &g, n, own_call) /
                      gpu_per_copy(p, &g, n, own_call),
               at_expected = gpu_per_copy(truth, &g, expected, own_call) /
                             gpu_per_copy(p, &g, expected, own_call);
  const double moved = at_n / at_expected;
  if (moved * IBP_BATCH_STANDS_LIKE < 1)
    fprintf(stderr,
            "%s on %s: %u of %u copies of %llu B (tensors of %u%s) "
            "off the model %.3fx, the batch expected %.3fx\n",
            p->name, truth->name, n, expected, (unsigned long long)bytes, R,
            stage ? ", the stage" : "", at_n, at_expected);
  CHECK(moved * IBP_BATCH_STANDS_LIKE >= 1);
  return moved;
}

/* A timed batch's model (ibp__batch_timed_model): the flush's calls the
 * span's CPU, its copies' runtime calls (own call), holds and the flush's
 * scan (7 us) libibp's own beside them, the batch's GPU time whole,
 * serial. */
static void check_timed_model(const ibp_profile *p) {
  const ibp_gate_copy g = {.bytes = 65536,
                           .host_bytes = 40000,
                           .sms = 1,
                           .units = 16,
                           .tensor_bytes = 4096};
  const double calls = 1e3 * (p->driver_copy_call_us +
                              p->driver_launch_call_us + p->driver_call_us);
  for (int own_call = 0; own_call < 2; own_call++) {
    const ibp_route_cost m = ibp__batch_timed_model(p, &g, 16, own_call, 7000);
    const double held =
        16e3 * ((own_call ? p->runtime_call_us : 0) + p->ibp_hold_us) + 7000;
    double cpu, gpu;
    ibp__route_batched_split(p, &g, 16, own_call, &cpu, &gpu);
    CHECK(m.serial == 1 && m.copies == 16);
    CHECK(fabs(m.own_ns - held) < 1e-6 * held);
    CHECK(fabs(m.cpu_ns - (calls + held)) < 1e-6 * (calls + held));
    CHECK(fabs(m.gpu_ns - 16 * gpu) < 1e-6 * m.gpu_ns);
  }
}

/* A copy of a region stored with the exponent stage: its decode holds
 * the stage's term (ibp__gate_decode_us), which on a profile whose stage
 * decodes at 10 MB/s per SM bounds a batch's copies from below -- a copy
 * of a region without it is not charged it. */
static void check_stage(const ibp_profile *p) {
  ibp_profile q = *p;
  q.stage_decode_gbps_per_sm = 0.01;
  ibp_gate_copy g = {.bytes = 65536,
                     .host_bytes = 40000,
                     .sms = 1,
                     .units = 64,
                     .tensor_bytes = 1024,
                     .stage = 1};
  const double stage_ns =
      (double)g.bytes / (q.stage_decode_gbps_per_sm * q.sms);
  CHECK(gpu_per_copy(&q, &g, 16, 1) >= stage_ns);
  g.stage = 0;
  CHECK(gpu_per_copy(&q, &g, 16, 1) < stage_ns);
  CHECK(gpu_per_copy(&q, &g, 16, 1) == gpu_per_copy(p, &g, 16, 1));
}

int main(int argc, char **argv) {
  ibp_profile p;
  char err[256];
  for (int i = 0; i < 2; i++) {
    const char *name = i ? "h100-pcie5" : "a100-pcie4";
    if (ibp_profile_load(name, &p, err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", name, err);
      return 1;
    }
    /* kv_blocks: calls of 64 entries of 64 KiB in tensors of 256 B,
     * whose launch's fixed costs make a quarter of a call dear */
    check_explores(&p, 65536, 256, 64, 1);
    /* rows held for a batch of 2048, a batch of one, of two */
    check_explores(&p, 400, 400, 2048, 0);
    check_explores(&p, 4096, 4096, 1, 0);
    check_explores(&p, 4096, 4096, 2, 0);
    check_explores(&p, 65536, 4096, 16, 0);
    check_timed_model(&p);
    check_stage(&p);
  }
  /* kv_blocks: a quarter of a call is more than twice as dear a copy as
   * the call (2.0x on a100-pcie4, 2.6x on h100-pcie5); half of it is not
   * (1.1x, 1.4x) -- but on h100-pcie5 half a call's decode is bound by the
   * SMs where the whole call's is by the link, and a link a third as fast
   * moves it 1.9x off the model, the call 2.9x: explored whole */
  ibp_gate_copy g;
  for (int i = 0; i < 2; i++) {
    ibp_profile_load(i ? "h100-pcie5" : "a100-pcie4", &p, err, sizeof err);
    CHECK(prior_of(&p, 65536, 256, 64, 1, &g).explores == (i ? 64u : 32u));
  }
  /* kv_offload's blocks of 64 KiB in 4 KiB tensors, batches of 16: half
   * a batch decodes on 4 SMs (a100-pcie4) and is bound by them, the batch
   * by the link -- a link a third as wide moves them 1.4x and 2.7x off the
   * model: explored whole */
  ibp_profile_load("a100-pcie4", &p, err, sizeof err);
  CHECK(prior_of(&p, 65536, 4096, 16, 0, &g).explores == 16);
  CHECK(!ibp__batch_stands_for(&p, &g, 8, 16, 0));
  CHECK(ibp__batch_stands_for(&p, &g, 16, 16, 0));
  /* every truth of profile/truth (argv[1]) on the prior it is apart
   * from, for copies of row gathers, KV blocks and weights, some of a
   * region stored with the exponent stage (a truth whose stage decodes
   * slower moves their batches: the probes weigh it with the decode) */
  static const struct {
    uint64_t bytes;
    uint32_t R, expected;
    int entries, stage;
  } shapes[] = {{65536, 256, 64, 1, 0},   {65536, 4096, 16, 0, 0},
                {65536, 4096, 8, 0, 0},   {400, 400, 2048, 0, 0},
                {400, 400, 64, 0, 0},     {4096, 4096, 2, 0, 0},
                {16384, 16384, 32, 0, 0}, {1 << 20, 4096, 4, 0, 0},
                {2048, 256, 128, 1, 0},   {4096, 4096, 2, 0, 1},
                {65536, 4096, 16, 0, 1},  {1024, 1024, 64, 0, 1},
                {1 << 20, 4096, 4, 0, 1}};
  DIR *dir = argc > 1 ? opendir(argv[1]) : NULL;
  CHECK(dir != NULL);
  int truths = 0;
  for (struct dirent *e; dir && (e = readdir(dir));) {
    const size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 5, ".prof") != 0)
      continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
    ibp_profile truth;
    CHECK(ibp_profile_load(path, &truth, err, sizeof err) == 0);
    const char *prior =
        strncmp(e->d_name, "h100", 4) == 0 ? "h100-pcie5" : "a100-pcie4";
    CHECK(ibp_profile_load(prior, &p, err, sizeof err) == 0);
    double worst = 2;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      const double m = check_stands_for(&p, &truth, shapes[i].bytes,
                                        shapes[i].R, shapes[i].expected,
                                        shapes[i].entries, shapes[i].stage);
      worst = m < worst ? m : worst;
    }
    fprintf(stderr,
            "%s: explored batches off the model >= %.3f of the "
            "expected's\n",
            truth.name, worst);
    truths++;
  }
  if (dir)
    closedir(dir);
  CHECK(truths >= 2);
  return failures ? 1 : 0;
}
