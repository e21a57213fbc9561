/*
 * Stream capture and the smallest useful graphs.
 *
 * cuStreamBeginCapture turns a stream into a recorder: copies, sets, kernel
 * launches and host functions queued on it go into a graph (a list, in
 * order) instead of running.  cuStreamEndCapture hands the graph out;
 * cuGraphInstantiate* makes an executable copy and cuGraphLaunch queues its
 * operations on a stream (operands re-checked: memory freed since is
 * CUDA_ERROR_INVALID_VALUE).  What a single-stream recorder cannot express
 * is refused with the driver's capture errors and invalidates the capture:
 * events, callbacks, stream-ordered frees and cross-stream waits
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED / _ISOLATION), pageable memory,
 * synchronizing or querying the capturing stream, work on the legacy stream
 * of the same context (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
 *
 * Capture modes: while a GLOBAL capture is active anywhere (or a
 * THREAD_LOCAL one begun by the calling thread), calls that may synchronize
 * or allocate -- cuMemAlloc/Free, cuMemHostAlloc/Register/..., synchronous
 * copies and sets, cuCtxSynchronize -- fail with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate that capture, unless
 * the thread chose CU_STREAM_CAPTURE_MODE_RELAXED with
 * cuThreadExchangeStreamCaptureMode.
 */
#include "simcuda_internal.h"

#include <stdlib.h>
#include <string.h>

struct scu_graph {
  scu_obj hdr;
  pthread_mutex_t m;
  scu_op **ops;
  size_t n, cap;
};

typedef struct scu_graphexec {
  scu_obj hdr;
  pthread_mutex_t m; /* ops against cuGraphExec*NodeSetParams */
  scu_op **ops;
  const scu_op **nodes; /* the graph's node each op was made from */
  size_t n;
} scu_graphexec;

typedef struct active_capture {
  scu_stream *s; /* not referenced: removed before the stream can go */
  CUstreamCaptureMode mode;
  uint64_t thread;
} active_capture;

#define MAX_CAPTURES 256

atomic_int scu_global_captures; /* active captures of any mode */
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static active_capture active[MAX_CAPTURES];
static int nactive;
static atomic_ullong next_capture_id = 1;
static atomic_ullong next_thread_serial = 1;
static _Thread_local uint64_t tls_serial;
static _Thread_local int tls_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static uint64_t thread_serial(void) {
  if (!tls_serial)
    tls_serial = atomic_fetch_add(&next_thread_serial, 1);
  return tls_serial;
}

/* ---- graphs ---------------------------------------------------------- */

static void graph_free(scu_obj *o) {
  scu_graph *g = (scu_graph *)o;
  for (size_t i = 0; i < g->n; i++)
    scu_op_free(g->ops[i]);
  free(g->ops);
  pthread_mutex_destroy(&g->m);
  free(g);
}

void scu_graph_put(scu_graph *g) {
  if (g)
    scu_obj_put(&g->hdr);
}

scu_op *scu_op_clone(const scu_op *op) {
  scu_op *c = scu_op_new(op->kind);
  if (!c)
    return NULL;
  *c = *op;
  c->next = NULL;
  c->is_inline = false;
  c->seq = 0;
  c->deps = NULL;
  c->ndeps = c->capdeps = 0;
  c->owned = NULL;
  if (op->owned_bytes) {
    if (!(c->owned = malloc(op->owned_bytes))) {
      free(c);
      return NULL;
    }
    memcpy(c->owned, op->owned, op->owned_bytes);
    if (c->kind == SCU_OP_LAUNCH)
      c->u.launch.l.args = c->owned;
  }
  return c;
}

/* ---- the list of active captures ----------------------------------------- */

static void active_add(scu_stream *s) {
  pthread_mutex_lock(&cap_lock);
  active[nactive++] = (active_capture){s, s->cap_mode, s->cap_thread};
  atomic_fetch_add(&scu_global_captures, 1);
  pthread_mutex_unlock(&cap_lock);
}

static void active_remove(scu_stream *s) {
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < nactive; i++) {
    if (active[i].s == s) {
      active[i] = active[--nactive];
      atomic_fetch_sub(&scu_global_captures, 1);
      break;
    }
  }
  pthread_mutex_unlock(&cap_lock);
}

/* s->m held: ACTIVE -> INVALIDATED. */
static void invalidate_locked(scu_stream *s) {
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    return;
  s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  active_remove(s);
  atomic_fetch_sub(&s->ctx->captures, 1);
}

void scu_capture_invalidate(scu_stream *s) {
  pthread_mutex_lock(&s->m);
  invalidate_locked(s);
  pthread_mutex_unlock(&s->m);
}

CUresult scu_capture_check_unsafe(void) {
  if (atomic_load(&scu_global_captures) == 0 ||
      tls_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_SUCCESS;
  uint64_t me = thread_serial();
  scu_stream *hit[MAX_CAPTURES];
  int n = 0;
  pthread_mutex_lock(&cap_lock);
  for (int i = 0; i < nactive; i++) {
    const active_capture *a = &active[i];
    if (a->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (a->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && a->thread == me)) {
      scu_obj_ref(&a->s->hdr);
      hit[n++] = a->s;
    }
  }
  pthread_mutex_unlock(&cap_lock);
  for (int i = 0; i < n; i++) {
    scu_capture_invalidate(hit[i]);
    scu_stream_put(hit[i]);
  }
  return n ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Appends *op to g (g->m held); on success the graph owns it and *op is
 * NULL. */
static CUresult graph_append_locked(scu_graph *g, scu_op **op) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    scu_op **v = realloc(g->ops, cap * sizeof *v);
    if (!v)
      return CUDA_ERROR_OUT_OF_MEMORY;
    g->ops = v, g->cap = cap;
  }
  g->ops[g->n++] = *op;
  *op = NULL;
  return CUDA_SUCCESS;
}

/* ---- recording ---------------------------------------------------------- */

CUresult scu_capture_append(scu_stream *s, scu_op *op) {
  CUresult r = CUDA_SUCCESS;
  switch (op->kind) {
  case SCU_OP_COPY:
  case SCU_OP_COPY2D:
  case SCU_OP_SET:
  case SCU_OP_LAUNCH:
  case SCU_OP_HOSTFN:
  case SCU_OP_NOP:
    if (op->ndeps)
      r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION; /* waits on outside work */
    break;
  default:
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    break;
  }
  scu_graph *g = s->cap_graph;
  if (r == CUDA_SUCCESS && op->kind != SCU_OP_NOP) {
    pthread_mutex_lock(&g->m);
    r = graph_append_locked(g, &op);
    pthread_mutex_unlock(&g->m);
  }
  if (r != CUDA_SUCCESS)
    invalidate_locked(s);
  scu_op_free(op);
  return r;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptds) {
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  if (s->kind == SCU_STREAM_LEGACY) {
    scu_stream_put(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  scu_graph *g = calloc(1, sizeof *g);
  if (!g) {
    scu_stream_put(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  scu_obj_init(&g->hdr, SCU_T_GRAPH, graph_free);
  pthread_mutex_init(&g->m, NULL);
  /* Published now: cuStreamGetCaptureInfo hands out its handle. */
  if (!scu_obj_publish(&g->hdr, NULL)) {
    scu_graph_put(g);
    scu_stream_put(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&s->ctx->sched);
  pthread_mutex_lock(&s->m);
  if (s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (nactive >= MAX_CAPTURES) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->cap_mode = mode;
    s->cap_id = atomic_fetch_add(&next_capture_id, 1);
    s->cap_thread = thread_serial();
    s->cap_graph = g;
    g = NULL;
    active_add(s);
    atomic_fetch_add(&s->ctx->captures, 1);
  }
  pthread_mutex_unlock(&s->m);
  pthread_mutex_unlock(&s->ctx->sched);
  if (g) {
    scu_obj_unpublish(&g->hdr);
    scu_graph_put(g);
  }
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) {
  SCU_API("cuStreamBeginCapture");
  SCU_RETURN(begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false));
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) {
  SCU_API("cuStreamBeginCapture");
  SCU_RETURN(begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true));
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream,
                                         CUstreamCaptureMode mode) {
  SCU_API("cuStreamBeginCapture");
  SCU_RETURN(begin_capture(hStream, mode, false));
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                              CUstreamCaptureMode mode) {
  SCU_API("cuStreamBeginCapture");
  SCU_RETURN(begin_capture(hStream, mode, true));
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, bool ptds) {
  if (!phGraph)
    return CUDA_ERROR_INVALID_VALUE;
  *phGraph = NULL;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  scu_graph *g = NULL;
  pthread_mutex_lock(&s->ctx->sched);
  pthread_mutex_lock(&s->m);
  if (s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
             s->cap_thread != thread_serial()) {
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else {
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
      active_remove(s);
      atomic_fetch_sub(&s->ctx->captures, 1);
    } else {
      r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    s->cap_status = CU_STREAM_CAPTURE_STATUS_NONE;
    g = s->cap_graph;
    s->cap_graph = NULL;
  }
  pthread_mutex_unlock(&s->m);
  pthread_mutex_unlock(&s->ctx->sched);
  scu_stream_put(s);
  if (g && r == CUDA_SUCCESS && !g->hdr.published)
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* destroyed meanwhile */
  if (g && r == CUDA_SUCCESS)
    *phGraph = scu_obj_handle(&g->hdr);
  else if (g)
    scu_obj_unpublish(&g->hdr);
  scu_graph_put(g);
  return r;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  SCU_API("cuStreamEndCapture");
  SCU_RETURN(end_capture(hStream, phGraph, false));
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  SCU_API("cuStreamEndCapture");
  SCU_RETURN(end_capture(hStream, phGraph, true));
}

/* ---- capture queries --------------------------------------------------- */

typedef struct capture_info {
  CUstreamCaptureStatus status;
  uint64_t id;
  CUgraph graph;
} capture_info;

/* Is a blocking stream of c capturing (so the legacy stream is tied to
 * it)? */
static bool blocking_capture(scu_ctx *c) {
  if (atomic_load(&c->captures) == 0)
    return false;
  bool found = false;
  pthread_mutex_lock(&c->sched);
  for (scu_stream *b = c->streams; b && !found; b = b->next_in_ctx) {
    if (b->flags & CU_STREAM_NON_BLOCKING)
      continue;
    pthread_mutex_lock(&b->m);
    found = b->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&b->m);
  }
  pthread_mutex_unlock(&c->sched);
  return found;
}

static CUresult capture_info_of(CUstream h, bool ptds, capture_info *ci) {
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  if (s->kind == SCU_STREAM_LEGACY && blocking_capture(s->ctx)) {
    scu_stream_put(s); /* the legacy stream would wait for a capture */
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  pthread_mutex_lock(&s->m);
  ci->status = s->cap_status;
  ci->id = s->cap_status == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : s->cap_id;
  ci->graph = s->cap_graph && s->cap_status == CU_STREAM_CAPTURE_STATUS_ACTIVE
                  ? (CUgraph)scu_obj_handle(&s->cap_graph->hdr)
                  : NULL;
  pthread_mutex_unlock(&s->m);
  scu_stream_put(s);
  return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, bool ptds) {
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  capture_info ci;
  CUresult r = capture_info_of(h, ptds, &ci);
  if (r == CUDA_SUCCESS)
    *st = ci.status;
  return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                     CUstreamCaptureStatus *captureStatus) {
  SCU_API("cuStreamIsCapturing");
  SCU_RETURN(is_capturing(hStream, captureStatus, false));
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  SCU_API("cuStreamIsCapturing");
  SCU_RETURN(is_capturing(hStream, captureStatus, true));
}

/* v1, v2 and v3 share this; the graph's nodes are not modelled, so the
 * dependency set is always empty. */
static CUresult get_info(CUstream h, bool ptds, CUstreamCaptureStatus *st,
                         cuuint64_t *id, CUgraph *graph,
                         const CUgraphNode **deps,
                         const CUgraphEdgeData **edges, size_t *ndeps) {
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  capture_info ci;
  CUresult r = capture_info_of(h, ptds, &ci);
  if (r != CUDA_SUCCESS)
    return r;
  *st = ci.status;
  bool act = ci.status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id && act)
    *id = ci.id;
  if (graph && act)
    *graph = ci.graph;
  if (deps && act)
    *deps = NULL;
  if (edges && act)
    *edges = NULL;
  if (ndeps && act)
    *ndeps = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, false, captureStatus_out, id_out, NULL, NULL,
                      NULL, NULL));
}

CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, true, captureStatus_out, id_out, NULL, NULL,
                      NULL, NULL));
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, false, captureStatus_out, id_out, graph_out,
                      dependencies_out, NULL, numDependencies_out));
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, size_t *numDependencies_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, true, captureStatus_out, id_out, graph_out,
                      dependencies_out, NULL, numDependencies_out));
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, false, captureStatus_out, id_out, graph_out,
                      dependencies_out, edgeData_out, numDependencies_out));
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(
    CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    cuuint64_t *id_out, CUgraph *graph_out,
    const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
    size_t *numDependencies_out) {
  SCU_API("cuStreamGetCaptureInfo");
  SCU_RETURN(get_info(hStream, true, captureStatus_out, id_out, graph_out,
                      dependencies_out, edgeData_out, numDependencies_out));
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  SCU_API("cuThreadExchangeStreamCaptureMode");
  if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUstreamCaptureMode old = (CUstreamCaptureMode)tls_mode;
  tls_mode = *mode;
  *mode = old;
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- graphs: instantiate, launch, destroy -------------------------------- */

static void exec_free(scu_obj *o) {
  scu_graphexec *e = (scu_graphexec *)o;
  for (size_t i = 0; i < e->n; i++)
    scu_op_free(e->ops[i]);
  free(e->ops);
  free(e->nodes);
  pthread_mutex_destroy(&e->m);
  free(e);
}

static CUresult instantiate(CUgraphExec *pexec, CUgraph hgraph) {
  if (!pexec)
    return CUDA_ERROR_INVALID_VALUE;
  scu_graph *g = (scu_graph *)scu_obj_get(hgraph, SCU_MASK(SCU_T_GRAPH));
  if (!g)
    return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  scu_graphexec *e = calloc(1, sizeof *e);
  pthread_mutex_lock(&g->m);
  if (e && g->n &&
      (!(e->ops = calloc(g->n, sizeof *e->ops)) ||
       !(e->nodes = calloc(g->n, sizeof *e->nodes))))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (!e)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
    if (!(e->ops[i] = scu_op_clone(g->ops[i])))
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else
      e->nodes[e->n++] = g->ops[i];
  }
  pthread_mutex_unlock(&g->m);
  scu_graph_put(g);
  if (!e)
    return r;
  scu_obj_init(&e->hdr, SCU_T_GRAPHEXEC, exec_free);
  pthread_mutex_init(&e->m, NULL);
  void *h = r == CUDA_SUCCESS ? scu_obj_publish(&e->hdr, NULL) : NULL;
  scu_obj_put(&e->hdr);
  if (!h)
    return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
  *pexec = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    CUgraphNode *phErrorNode, char *logBuffer,
                                    size_t bufferSize) {
  SCU_API("cuGraphInstantiate");
  if (phErrorNode)
    *phErrorNode = NULL;
  if (logBuffer && bufferSize)
    logBuffer[0] = 0;
  SCU_RETURN(instantiate(phGraphExec, hGraph));
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize) {
  SCU_API("cuGraphInstantiate");
  if (phErrorNode)
    *phErrorNode = NULL;
  if (logBuffer && bufferSize)
    logBuffer[0] = 0;
  SCU_RETURN(instantiate(phGraphExec, hGraph));
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec,
                                             CUgraph hGraph,
                                             unsigned long long flags) {
  SCU_API("cuGraphInstantiateWithFlags");
  (void)flags;
  SCU_RETURN(instantiate(phGraphExec, hGraph));
}

static CUresult instantiate_params(CUgraphExec *pexec, CUgraph hgraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = instantiate(pexec, hgraph);
  p->hErrNode_out = NULL;
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                    : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}

CUresult CUDAAPI
cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  SCU_API("cuGraphInstantiateWithParams");
  SCU_RETURN(instantiate_params(phGraphExec, hGraph, instantiateParams));
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
    CUgraphExec *phGraphExec, CUgraph hGraph,
    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  SCU_API("cuGraphInstantiateWithParams");
  SCU_RETURN(instantiate_params(phGraphExec, hGraph, instantiateParams));
}

/* The operands must still be what they were when captured. */
static CUresult recheck(const scu_op *op) {
  for (unsigned i = 0; i < op->nranges; i++) {
    const scu_range *rg = &op->ranges[i];
    scu_span sp;
    if (scu_mem_check(rg->p, rg->bytes, rg->device_side, &sp) != CUDA_SUCCESS ||
        sp.access != rg->access || sp.kind == SCU_MEM_PAGEABLE)
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hexec, CUstream h, bool ptds) {
  scu_graphexec *e =
      (scu_graphexec *)scu_obj_get(hexec, SCU_MASK(SCU_T_GRAPHEXEC));
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  scu_stream *s = NULL;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  pthread_mutex_lock(&e->m);
  for (size_t i = 0; r == CUDA_SUCCESS && i < e->n; i++)
    r = recheck(e->ops[i]);
  for (size_t i = 0; r == CUDA_SUCCESS && i < e->n; i++) {
    uint64_t seq;
    scu_op *op = scu_op_clone(e->ops[i]);
    r = op ? scu_stream_submit(s, op, &seq) : CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_unlock(&e->m);
  scu_stream_put(s);
  scu_obj_put(&e->hdr);
  return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  SCU_API("cuGraphLaunch");
  SCU_RETURN(graph_launch(hGraphExec, hStream, false));
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  SCU_API("cuGraphLaunch");
  SCU_RETURN(graph_launch(hGraphExec, hStream, true));
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SCU_API("cuGraphExecDestroy");
  scu_obj *e = scu_obj_take(hGraphExec, SCU_MASK(SCU_T_GRAPHEXEC));
  if (!e)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_obj_put(e);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  SCU_API("cuGraphDestroy");
  scu_obj *g = scu_obj_take(hGraph, SCU_MASK(SCU_T_GRAPH));
  if (!g)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_obj_put(g);
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- graphs built node by node -------------------------------------------
 *
 * A graph is a list run in order; a node is its operation (the handle is
 * the operation's address, valid while its graph lives: a made-up node
 * handle is not caught).  Dependencies name nodes already in the graph, so
 * the list order honours them. */

static scu_graph *graph_new(void) {
  scu_graph *g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  scu_obj_init(&g->hdr, SCU_T_GRAPH, graph_free);
  pthread_mutex_init(&g->m, NULL);
  return g;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  SCU_API("cuGraphCreate");
  if (!phGraph || flags)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_graph *g = graph_new();
  void *h = g ? scu_obj_publish(&g->hdr, NULL) : NULL;
  scu_graph_put(g);
  if (!h)
    SCU_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  *phGraph = h;
  SCU_RETURN(CUDA_SUCCESS);
}

/* Appends op (owned whatever the result) to the graph behind hgraph. */
static CUresult add_node(CUgraphNode *pnode, CUgraph hgraph,
                         const CUgraphNode *deps, size_t ndeps, scu_op *op) {
  if (!pnode || (ndeps && !deps)) {
    scu_op_free(op);
    return CUDA_ERROR_INVALID_VALUE;
  }
  scu_graph *g = (scu_graph *)scu_obj_get(hgraph, SCU_MASK(SCU_T_GRAPH));
  if (!g) {
    scu_op_free(op);
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&g->m);
  for (size_t d = 0; d < ndeps && r == CUDA_SUCCESS; d++) {
    bool found = false;
    for (size_t i = 0; i < g->n && !found; i++)
      found = (CUgraphNode)g->ops[i] == deps[d];
    if (!found)
      r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS) {
    *pnode = (CUgraphNode)op;
    r = graph_append_locked(g, &op);
  }
  pthread_mutex_unlock(&g->m);
  scu_graph_put(g);
  scu_op_free(op);
  return r;
}

/* The node's context must be live (NULL: the current one). */
static CUresult node_ctx(CUcontext c) {
  scu_ctx *x;
  CUresult r = scu_ctx_resolve(c, &x);
  if (r == CUDA_SUCCESS)
    scu_ctx_put(x);
  return r;
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies,
                                      size_t numDependencies,
                                      const CUDA_MEMCPY3D *copyParams,
                                      CUcontext ctx) {
  SCU_API("cuGraphAddMemcpyNode");
  scu_op *op = NULL;
  CUresult r = node_ctx(ctx);
  if (r == CUDA_SUCCESS)
    r = scu_copy3d_op(copyParams, &op);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  SCU_RETURN(add_node(phGraphNode, hGraph, dependencies, numDependencies, op));
}

CUresult CUDAAPI cuGraphAddMemsetNode(
    CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
    size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
    CUcontext ctx) {
  SCU_API("cuGraphAddMemsetNode");
  scu_op *op = NULL;
  CUresult r = node_ctx(ctx);
  if (r == CUDA_SUCCESS)
    r = scu_memset_op(memsetParams, &op);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  SCU_RETURN(add_node(phGraphNode, hGraph, dependencies, numDependencies, op));
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes,
                                 size_t *numNodes) {
  SCU_API("cuGraphGetNodes");
  if (!numNodes)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_graph *g = (scu_graph *)scu_obj_get(hGraph, SCU_MASK(SCU_T_GRAPH));
  if (!g)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  pthread_mutex_lock(&g->m);
  if (nodes) {
    size_t n = *numNodes < g->n ? *numNodes : g->n;
    for (size_t i = 0; i < n; i++)
      nodes[i] = (CUgraphNode)g->ops[i];
    for (size_t i = n; i < *numNodes; i++)
      nodes[i] = NULL;
    *numNodes = n;
  } else {
    *numNodes = g->n;
  }
  pthread_mutex_unlock(&g->m);
  scu_graph_put(g);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  SCU_API("cuGraphNodeGetType");
  const scu_op *op = (const scu_op *)hNode;
  if (!op || !type)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  switch (op->kind) {
  case SCU_OP_COPY:
  case SCU_OP_COPY2D:
    *type = CU_GRAPH_NODE_TYPE_MEMCPY;
    break;
  case SCU_OP_SET:
    *type = CU_GRAPH_NODE_TYPE_MEMSET;
    break;
  case SCU_OP_LAUNCH:
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
    break;
  case SCU_OP_HOSTFN:
    *type = CU_GRAPH_NODE_TYPE_HOST;
    break;
  default:
    *type = CU_GRAPH_NODE_TYPE_EMPTY;
    break;
  }
  SCU_RETURN(CUDA_SUCCESS);
}

/* A memcpy node's parameters, both operands as unified pointers (what the
 * operation was checked with). */
static void memcpy_params(const scu_op *op, CUDA_MEMCPY3D *p) {
  memset(p, 0, sizeof *p);
  p->dstMemoryType = p->srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  p->dstDevice = op->ranges[0].p;
  p->srcDevice = op->ranges[1].p;
  if (op->kind == SCU_OP_COPY) {
    p->WidthInBytes = p->dstPitch = p->srcPitch = op->u.copy.bytes;
    p->Height = p->Depth = p->dstHeight = p->srcHeight = 1;
    return;
  }
  p->WidthInBytes = op->u.copy2d.width;
  p->Height = op->u.copy2d.height;
  p->Depth = op->u.copy2d.depth;
  p->dstPitch = op->u.copy2d.dpitch;
  p->srcPitch = op->u.copy2d.spitch;
  p->dstHeight = op->u.copy2d.dpitch && op->u.copy2d.dslice
                     ? op->u.copy2d.dslice / op->u.copy2d.dpitch
                     : op->u.copy2d.height;
  p->srcHeight = op->u.copy2d.spitch && op->u.copy2d.sslice
                     ? op->u.copy2d.sslice / op->u.copy2d.spitch
                     : op->u.copy2d.height;
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode,
                                            CUDA_MEMCPY3D *nodeParams) {
  SCU_API("cuGraphMemcpyNodeGetParams");
  const scu_op *op = (const scu_op *)hNode;
  if (!op || !nodeParams ||
      (op->kind != SCU_OP_COPY && op->kind != SCU_OP_COPY2D))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  memcpy_params(op, nodeParams);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(
    CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams) {
  SCU_API("cuGraphMemsetNodeGetParams");
  const scu_op *op = (const scu_op *)hNode;
  if (!op || !nodeParams || op->kind != SCU_OP_SET)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *nodeParams = (CUDA_MEMSET_NODE_PARAMS){
      .dst = op->ranges[0].p,
      .pitch = op->u.set.pitch,
      .value = op->u.set.value,
      .elementSize = op->u.set.elem,
      .width = op->u.set.width,
      .height = op->u.set.height,
  };
  SCU_RETURN(CUDA_SUCCESS);
}

/* Replaces the operation an executable graph made from `node` by op
 * (owned whatever the result), which must be of the same kind of node. */
static CUresult exec_set(CUgraphExec hexec, CUgraphNode node, scu_op *op) {
  scu_graphexec *e =
      (scu_graphexec *)scu_obj_get(hexec, SCU_MASK(SCU_T_GRAPHEXEC));
  if (!e) {
    scu_op_free(op);
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&e->m);
  for (size_t i = 0; i < e->n; i++) {
    if ((CUgraphNode)e->nodes[i] != node)
      continue;
    bool copy = op->kind == SCU_OP_COPY2D || op->kind == SCU_OP_NOP;
    bool was_copy =
        e->ops[i]->kind == SCU_OP_COPY || e->ops[i]->kind == SCU_OP_COPY2D;
    if ((copy && was_copy) ||
        (op->kind == SCU_OP_SET && e->ops[i]->kind == SCU_OP_SET)) {
      scu_op_free(e->ops[i]);
      e->ops[i] = op;
      op = NULL;
      r = CUDA_SUCCESS;
    }
    break;
  }
  pthread_mutex_unlock(&e->m);
  scu_obj_put(&e->hdr);
  scu_op_free(op);
  return r;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *copyParams,
                                                CUcontext ctx) {
  SCU_API("cuGraphExecMemcpyNodeSetParams");
  scu_op *op = NULL;
  CUresult r = node_ctx(ctx);
  if (r == CUDA_SUCCESS)
    r = scu_copy3d_op(copyParams, &op);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  SCU_RETURN(exec_set(hGraphExec, hNode, op));
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode,
    const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx) {
  SCU_API("cuGraphExecMemsetNodeSetParams");
  scu_op *op = NULL;
  CUresult r = node_ctx(ctx);
  if (r == CUDA_SUCCESS)
    r = scu_memset_op(memsetParams, &op);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  SCU_RETURN(exec_set(hGraphExec, hNode, op));
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(
    CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  SCU_API("cuGraphKernelNodeGetParams");
  scu_op *op = (scu_op *)hNode;
  if (!op || !nodeParams || op->kind != SCU_OP_LAUNCH)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  const simt_launch *l = &op->u.launch.l;
  memset(nodeParams, 0, sizeof *nodeParams);
  nodeParams->func = op->u.launch.func;
  nodeParams->gridDimX = l->grid.x;
  nodeParams->gridDimY = l->grid.y;
  nodeParams->gridDimZ = l->grid.z;
  nodeParams->blockDimX = l->block.x;
  nodeParams->blockDimY = l->block.y;
  nodeParams->blockDimZ = l->block.z;
  nodeParams->sharedMemBytes = (unsigned)l->dynamic_shared;
  /* the one parameter, the argument struct the node keeps */
  nodeParams->kernelParams = (void **)&op->u.launch.l.args;
  SCU_RETURN(CUDA_SUCCESS);
}

/* The generic form: memcpy and memset nodes (others: not simulated). */
CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec,
                                          CUgraphNode hNode,
                                          CUgraphNodeParams *nodeParams) {
  SCU_API("cuGraphExecNodeSetParams");
  if (!nodeParams)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_op *op = NULL;
  CUresult r;
  if (nodeParams->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    r = nodeParams->memcpy.flags ? CUDA_ERROR_INVALID_VALUE
                                 : node_ctx(nodeParams->memcpy.copyCtx);
    if (r == CUDA_SUCCESS)
      r = scu_copy3d_op(&nodeParams->memcpy.copyParams, &op);
  } else if (nodeParams->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    const CUDA_MEMSET_NODE_PARAMS_v2 *m = &nodeParams->memset;
    CUDA_MEMSET_NODE_PARAMS v1 = {m->dst,         m->pitch, m->value,
                                  m->elementSize, m->width, m->height};
    r = node_ctx(m->ctx);
    if (r == CUDA_SUCCESS)
      r = scu_memset_op(&v1, &op);
  } else {
    r = CUDA_ERROR_NOT_SUPPORTED;
  }
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  SCU_RETURN(exec_set(hGraphExec, hNode, op));
}

/* Same topology (as many nodes, each of the same kind): the executable
 * graph takes the graph's operations. */
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                      CUgraphExecUpdateResultInfo *resultInfo) {
  SCU_API("cuGraphExecUpdate");
  if (!resultInfo)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  memset(resultInfo, 0, sizeof *resultInfo);
  scu_graphexec *e =
      (scu_graphexec *)scu_obj_get(hGraphExec, SCU_MASK(SCU_T_GRAPHEXEC));
  scu_graph *g = (scu_graph *)scu_obj_get(hGraph, SCU_MASK(SCU_T_GRAPH));
  CUresult r = e && g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&g->m);
    pthread_mutex_lock(&e->m);
    bool same = g->n == e->n;
    for (size_t i = 0; same && i < g->n; i++)
      same = g->ops[i]->kind == e->ops[i]->kind;
    scu_op **fresh = same && g->n ? calloc(g->n, sizeof *fresh) : NULL;
    for (size_t i = 0; fresh && i < g->n; i++)
      if (!(fresh[i] = scu_op_clone(g->ops[i]))) {
        for (size_t j = 0; j < i; j++)
          scu_op_free(fresh[j]);
        free(fresh);
        fresh = NULL;
        r = CUDA_ERROR_OUT_OF_MEMORY;
      }
    if (!same) {
      r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
      resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    } else if (fresh) {
      for (size_t i = 0; i < e->n; i++) {
        scu_op_free(e->ops[i]);
        e->ops[i] = fresh[i];
        e->nodes[i] = g->ops[i];
      }
      free(fresh);
      resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
    pthread_mutex_unlock(&e->m);
    pthread_mutex_unlock(&g->m);
  }
  if (e)
    scu_obj_put(&e->hdr);
  scu_graph_put(g);
  SCU_RETURN(r);
}
