/* Graph memcpy and memset nodes into regions (serve/graph.h).
 *
 * A graph cannot be read back from its executable form, so the source
 * graph is walked once, when it is instantiated (cuGraphGetNodes,
 * cuGraphNodeGetType, the nodes' parameters, child graphs recursively),
 * and each executable graph keeps the list of its destinations that lie in
 * a region; kernel nodes have their parameters scanned as a launch's are
 * (serve/kernel_args.c).  Setting a node's parameters in the executable
 * graph, or updating it from another graph, adds the new destinations.  At each
 * launch every recorded destination is invalidated before the graph is queued
 * (serve/dtoh.c), and one event follows the launch.  Executable graphs that
 * write into no region have no record; while no graph has one, a launch costs
 * one relaxed load. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "serve/graph.h"

#include "base/base.h"
#include "base/driver.h"
#include "registry/registry.h"
#include "serve/dtoh.h"
#include "serve/kernel_args.h"

#define MAX_DEPTH 8 /* child graphs nested deeper are not walked */

typedef struct span {
  uintptr_t p;
  size_t bytes;
} span;

typedef struct exec_rec {
  CUgraphExec exec;
  span *v;
  size_t n, cap;
  struct exec_rec *next;
} exec_rec;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static exec_rec *recs;       /* lock */
static _Atomic size_t nrecs; /* records in `recs` */

/* lock held: exec's record, created when `make`. */
static exec_rec *find(CUgraphExec exec, int make) {
  for (exec_rec *e = recs; e; e = e->next)
    if (e->exec == exec)
      return e;
  exec_rec *e = make ? calloc(1, sizeof *e) : NULL;
  if (e) {
    e->exec = exec;
    e->next = recs;
    recs = e;
    atomic_fetch_add_explicit(&nrecs, 1, memory_order_relaxed);
  }
  return e;
}

static int in_region(const void *p, size_t bytes) {
  ibp_region_rec *r = NULL;
  if (ibp_registry_find(p, bytes, &r) == IBP_FIND_NONE)
    return 0;
  ibp_region_release(r);
  return 1;
}

void ibp__graph_note(CUgraphExec exec, const void *dst, size_t bytes) {
  if (!exec || !bytes || !in_region(dst, bytes))
    return;
  pthread_mutex_lock(&lock);
  exec_rec *e = find(exec, 1);
  if (e && e->n == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 4;
    span *v = realloc(e->v, cap * sizeof *v);
    if (v)
      e->v = v, e->cap = cap;
  }
  if (e && e->n < e->cap) /* else out of memory: see graph_launch_begin */
    e->v[e->n++] = (span){(uintptr_t)dst, bytes};
  pthread_mutex_unlock(&lock);
}

void ibp__graph_note_memcpy(CUgraphExec exec, const CUDA_MEMCPY3D *p) {
  const void *dst = NULL;
  if (!p || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return;
  uintptr_t base = p->dstMemoryType == CU_MEMORYTYPE_HOST
                       ? (uintptr_t)p->dstHost
                       : (uintptr_t)p->dstDevice;
  size_t bytes =
      ibp__span_rows(base, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                     p->dstHeight, p->WidthInBytes, p->Height, p->Depth, &dst);
  ibp__graph_note(exec, dst, bytes);
}

void ibp__graph_note_memset(CUgraphExec exec,
                            const CUDA_MEMSET_NODE_PARAMS *p) {
  const void *dst = NULL;
  size_t width;
  if (!p || __builtin_mul_overflow(p->width, (size_t)p->elementSize, &width))
    return;
  size_t bytes =
      ibp__span_rows(p->dst, 0, 0, 0, p->pitch, 0, width, p->height, 1, &dst);
  ibp__graph_note(exec, dst, bytes);
}

void ibp__graph_note_params(CUgraphExec exec, const CUgraphNodeParams *p) {
  if (p->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    ibp__graph_note_memcpy(exec, &p->memcpy.copyParams);
  } else if (p->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
    CUDA_MEMSET_NODE_PARAMS v1 = {m->dst,         m->pitch, m->value,
                                  m->elementSize, m->width, m->height};
    ibp__graph_note_memset(exec, &v1);
  } else if (p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    ibp__kernel_args_scan(p->kernel.func ? p->kernel.func
                                         : (CUfunction)p->kernel.kern,
                          p->kernel.kernelParams, p->kernel.extra);
  }
}

/* Records what the nodes of g write into regions (guard set). */
static void walk(const ibp_driver *d, CUgraphExec exec, CUgraph g, int depth) {
  size_t n = 0;
  if (depth > MAX_DEPTH || d->cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS ||
      !n)
    return;
  CUgraphNode *nodes = malloc(n * sizeof *nodes);
  if (!nodes || d->cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS)
    n = 0;
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType type;
    CUDA_MEMCPY3D cp;
    CUDA_MEMSET_NODE_PARAMS ms;
    CUDA_KERNEL_NODE_PARAMS kp;
    CUgraph child;
    if (d->cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
      continue;
    if (type == CU_GRAPH_NODE_TYPE_MEMCPY && d->cuGraphMemcpyNodeGetParams &&
        d->cuGraphMemcpyNodeGetParams(nodes[i], &cp) == CUDA_SUCCESS)
      ibp__graph_note_memcpy(exec, &cp);
    else if (type == CU_GRAPH_NODE_TYPE_MEMSET &&
             d->cuGraphMemsetNodeGetParams &&
             d->cuGraphMemsetNodeGetParams(nodes[i], &ms) == CUDA_SUCCESS)
      ibp__graph_note_memset(exec, &ms);
    else if (type == CU_GRAPH_NODE_TYPE_KERNEL &&
             d->cuGraphKernelNodeGetParams &&
             d->cuGraphKernelNodeGetParams(nodes[i], &kp) == CUDA_SUCCESS)
      ibp__kernel_args_scan(kp.func ? kp.func : (CUfunction)kp.kern,
                            kp.kernelParams, kp.extra);
    else if (type == CU_GRAPH_NODE_TYPE_GRAPH &&
             d->cuGraphChildGraphNodeGetGraph &&
             d->cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS)
      walk(d, exec, child, depth + 1);
  }
  free(nodes);
}

void ibp__graph_record(CUgraphExec exec, CUgraph graph) {
  const ibp_driver *d = ibp__driver();
  if (!d || !d->cuGraphGetNodes || !d->cuGraphNodeGetType)
    return;
  ibp__guard++;
  walk(d, exec, graph, 0);
  ibp__guard--;
}

size_t ibp__graph_launch_begin(CUgraphExec exec) {
  if (atomic_load_explicit(&nrecs, memory_order_relaxed) == 0)
    return 0;
  size_t touched = 0;
  pthread_mutex_lock(&lock);
  exec_rec *e = find(exec, 0);
  for (size_t i = 0; e && i < e->n; i++)
    touched += ibp__dtoh_begin((const void *)e->v[i].p, e->v[i].bytes);
  pthread_mutex_unlock(&lock);
  return touched;
}

void ibp__graph_launch_end(size_t touched, CUstream stream) {
  for (size_t i = 0; i < touched; i++)
    ibp__dtoh_end(i == 0 ? stream : NULL, i == 0);
}

void ibp__graph_forget(CUgraphExec exec) {
  if (atomic_load_explicit(&nrecs, memory_order_relaxed) == 0)
    return;
  pthread_mutex_lock(&lock);
  for (exec_rec **pp = &recs; *pp; pp = &(*pp)->next) {
    if ((*pp)->exec != exec)
      continue;
    exec_rec *e = *pp;
    *pp = e->next;
    atomic_fetch_sub_explicit(&nrecs, 1, memory_order_relaxed);
    free(e->v);
    free(e);
    break;
  }
  pthread_mutex_unlock(&lock);
}

void ibp__graph_after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
}
