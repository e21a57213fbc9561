/* The batched route's prior (serve/route/route_batched.c): what an
 * exploration of it takes -- the smallest batch alike the one expected
 * whose copies the model costs nearly as little each -- and what that
 * batch costs (ibp_route_cost.explores, .once_ns). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "serve/route/route.h"
#include "serve/route/route_batched.h"

/* the route's row of the table (serve/route/table.c) */
extern const ibp_route_ops ibp__route_batched;

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* The model's cost of one copy in a batch of n, ns, before the margin. */
static double per_copy(const ibp_profile *p, const ibp_gate_copy *g, double n,
                       int own_call) {
  double cpu, gpu;
  ibp__route_batched_split(p, g, n, own_call, &cpu, &gpu);
  return cpu + gpu;
}

/* Entries of an application's call (own_call 0) or held copies of
 * `bytes` in tensors of R bytes, batches of `expected` expected. */
static ibp_route_cost prior_of(const ibp_profile *p, uint64_t bytes, uint32_t R,
                               uint32_t expected, int entries,
                               ibp_gate_copy *g) {
  static ibp_copy c;
  memset(&c, 0, sizeof c);
  c.hold_only = 1;
  c.entries = entries ? expected : 0;
  *g = (ibp_gate_copy){.bytes = bytes,
                       .host_bytes = bytes * 8 / 10,
                       .sms = 1,
                       .units = bytes / R,
                       .tensor_bytes = R};
  ibp_route_copy x;
  memset(&x, 0, sizeof x);
  x.c = &c;
  x.p = p;
  x.g = *g;
  x.mode = IBP_CLASS_APP_BATCH;
  x.batch_n = expected;
  return ibp__route_batched.prior(&x);
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
        per_copy(p, &g, half, 0) > per * IBP_BATCH_EXPLORE_SPREAD);
  CHECK(fabs(c.once_ns - n * per_copy(p, &g, n, 0) / IBP_BATCH_MARGIN) <
        1e-6 * c.once_ns);
  fprintf(stderr, "%s: %u copies of %llu B, tensors of %u: explored %u\n",
          p->name, expected, (unsigned long long)bytes, R, n);
}

int main(void) {
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
  }
  /* kv_blocks: a quarter of a call is more than twice as dear a copy as
   * the call (2.0x on a100-pcie4, 2.6x on h100-pcie5); half of it is not
   * (1.1x, 1.4x) */
  ibp_gate_copy g;
  for (int i = 0; i < 2; i++) {
    ibp_profile_load(i ? "h100-pcie5" : "a100-pcie4", &p, err, sizeof err);
    CHECK(prior_of(&p, 65536, 256, 64, 1, &g).explores == 32);
  }
  return failures ? 1 : 0;
}
