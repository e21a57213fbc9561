/*
 * Workspaces: the fibers, warps and stacks a launch needs, kept
 * in a small pool between launches.  Mapping 1024 guarded stacks costs a
 * thousand mprotect calls, far more than a short launch itself; the pool
 * also keeps each fiber's cp.async queue and each warp's request window,
 * so a launch in steady state allocates nothing.
 */
#include "simt_internal.h"

#include <pthread.h>
#include <stdlib.h>

#define POOL_MAX 4

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct simt_ws *pool;
static unsigned pool_len;

/* After a launch (ASan builds): before the stacks are used again or
 * unmapped, clear what the fibers' frames left poisoned. */
static void clean_stacks(struct simt_ws *ws) {
  if (!ws->stacks_dirty)
    return;
  for (unsigned i = 0; i < ws->cap; i++)
    simt__stack_unpoison(&ws->stacks, i, ws->fibers[i].ctx.sp);
  ws->stacks_dirty = 0;
}

static void ws_destroy(struct simt_ws *ws) {
  if (!ws)
    return;
  if (ws->fibers && ws->stacks.map)
    clean_stacks(ws);
  if (ws->fibers)
    for (unsigned i = 0; i < ws->cap; i++)
      simt__cpa_free(&ws->fibers[i].cpa);
  if (ws->warps)
    for (unsigned i = 0; i < ws->cap / SIMT_WARP; i++)
      simt__pcie_free_window(&ws->warps[i].reads);
  simt__stacks_unmap(&ws->stacks);
  free(ws->fibers);
  free(ws->warps);
  free(ws);
}

static struct simt_ws *ws_create(unsigned threads) {
  unsigned cap = SIMT_WARP;
  while (cap < threads)
    cap *= 2;
  struct simt_ws *ws = calloc(1, sizeof *ws);
  if (!ws)
    return NULL;
  ws->cap = cap;
  ws->fibers = calloc(cap, sizeof *ws->fibers);
  ws->warps = calloc(cap / SIMT_WARP, sizeof *ws->warps);
  if (!ws->fibers || !ws->warps || simt__stacks_map(&ws->stacks, cap) != 0) {
    ws_destroy(ws);
    return NULL;
  }
  return ws;
}

struct simt_ws *simt__ws_get(unsigned threads) {
  struct simt_ws *ws = NULL;
  pthread_mutex_lock(&pool_lock);
  for (struct simt_ws **p = &pool; *p; p = &(*p)->next) {
    if ((*p)->cap >= threads) {
      ws = *p;
      *p = ws->next;
      pool_len--;
      break;
    }
  }
  pthread_mutex_unlock(&pool_lock);
  if (!ws)
    return ws_create(threads);
  clean_stacks(ws);
  return ws;
}

void simt__ws_put(struct simt_ws *ws) {
  struct simt_ws *drop = ws;
  pthread_mutex_lock(&pool_lock);
  if (pool_len < POOL_MAX) {
    ws->next = pool;
    pool = ws;
    pool_len++;
    drop = NULL;
  }
  pthread_mutex_unlock(&pool_lock);
  ws_destroy(drop);
}
