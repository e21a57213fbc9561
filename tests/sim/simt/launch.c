/*
 * simt_run: checks a launch, then runs its blocks one after another on the
 * calling host thread (sched.c runs one block).  Also the lane-order seed
 * and the thread-geometry queries.
 */
#include "simt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SEED 0x1bd11bdaa9fc1a22ULL

static _Thread_local uint64_t thread_seed;

void simt_set_seed(uint64_t seed) {
  thread_seed = seed;
}

static uint64_t launch_seed(void) {
  if (thread_seed)
    return thread_seed;
  const char *env = getenv("SIMT_SEED");
  if (env && *env) {
    char *end;
    unsigned long long v = strtoull(env, &end, 0);
    if (*end == 0 && v != 0)
      return v;
  }
  return DEFAULT_SEED;
}

/* splitmix64: spreads any seed (1, 2, 3, ...) into a non-zero xorshift
 * state. */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x ? x : 1;
}

/* CUDA's limits for the geometry of a launch. */
static const char *check_shape(const simt_launch *l) {
  if (!l || !l->entry)
    return "no kernel entry";
  const simt_dim3 b = l->block, g = l->grid;
  if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z)
    return "a zero grid or block dimension";
  if (b.x > 1024 || b.y > 1024 || b.z > 64)
    return "block dimensions over (1024, 1024, 64)";
  if ((uint64_t)b.x * b.y * b.z > SIMT_MAX_THREADS)
    return "more than 1024 threads per block";
  if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    return "grid dimensions over (2^31-1, 65535, 65535)";
  if (l->dynamic_shared > SIMT_MAX_SHARED)
    return "more dynamic shared memory than a block may have (227 KiB)";
  return NULL;
}

static void report(const struct simt_run *r, char *err, size_t errlen) {
  if (err && errlen)
    snprintf(err, errlen, "%s", r->msg);
}

static int run_grid(struct simt_run *r) {
  const simt_dim3 g = r->l->grid;
  r->started = 1;
  for (unsigned z = 0; z < g.z; z++)
    for (unsigned y = 0; y < g.y; y++)
      for (unsigned x = 0; x < g.x; x++) {
        r->block_idx = (simt_dim3){x, y, z};
        if (simt__run_block(r) != 0)
          return -1;
      }
  return 0;
}

int simt_run(const simt_launch *l, simt_pcie *pcie, char *err, size_t errlen) {
  struct simt_run r;
  memset(&r, 0, sizeof r);
  r.l = l;
  r.seed = launch_seed();
  r.rng = mix(r.seed);
  if (pcie)
    memset(pcie, 0, sizeof *pcie);
  const char *bad =
      simt__cur ? "simt_run called from inside a kernel" : check_shape(l);
  if (bad) {
    simt__run_fail(&r, "refused: %s", bad);
    report(&r, err, errlen);
    return -1;
  }
  simt__hostmap_init(&r.hosts);
  r.nthreads = l->block.x * l->block.y * l->block.z;
  r.nwarps = (r.nthreads + SIMT_WARP - 1) / SIMT_WARP;
  r.ws = simt__ws_get(r.nthreads);
  if (!r.ws || simt__shmem_init(&r.shm, l->dynamic_shared) != 0) {
    simt__run_fail(&r, "refused: out of memory");
  } else {
    (void)run_grid(&r);
  }
  if (r.ws)
    simt__ws_put(r.ws);
  simt__shmem_free(&r.shm);
  simt__hostmap_free(&r.hosts);
  simt__pcie_add_total(&r.pcie);
  if (pcie)
    *pcie = r.pcie;
  report(&r, err, errlen);
  return r.failed ? -1 : 0;
}

/* ---- geometry ------------------------------------------------------------ */

static unsigned axis_of(simt_dim3 d, int axis) {
  return axis == 0 ? d.x : axis == 1 ? d.y : axis == 2 ? d.z : 0;
}

unsigned simt_thread_idx(int axis) {
  struct simt_fiber *f = simt__self();
  return axis >= 0 && axis < 3 ? f->idx[axis] : 0;
}

unsigned simt_block_idx(int axis) {
  return axis_of(simt__self()->run->block_idx, axis);
}

unsigned simt_block_dim(int axis) {
  return axis_of(simt__self()->run->l->block, axis);
}

unsigned simt_grid_dim(int axis) {
  return axis_of(simt__self()->run->l->grid, axis);
}
