/* Hooks of graph instantiation and launch, and of kernel launches
 * (hooks.def): device-side writes into regions that happen long after the
 * call that described them (serve/graph.h), or that no call describes
 * (serve/kernel_args.h).  Without any region they cost the guard check
 * and one relaxed load. */
#include "base/base.h"
#include "hooks/hooks.h"
#include "registry/registry.h"
#include "serve/batch/batch.h"
#include "serve/graph.h"
#include "serve/kernel_args.h"

static inline int quiet(void) {
  return ibp__guard || ibp_registry_empty();
}

/* ---- instantiation: record what the graph writes into regions ----------- */

static CUresult recorded(CUresult res, CUgraphExec *e, CUgraph g) {
  if (res == CUDA_SUCCESS && e && !quiet())
    ibp__graph_record(*e, g);
  return res;
}

CUresult ibp__hook_cuGraphInstantiate(CUgraphExec *e, CUgraph g,
                                      CUgraphNode *err, char *log, size_t n) {
  return recorded(ibp__real_cuGraphInstantiate(e, g, err, log, n), e, g);
}

CUresult ibp__hook_cuGraphInstantiate_v2(CUgraphExec *e, CUgraph g,
                                         CUgraphNode *err, char *log,
                                         size_t n) {
  return recorded(ibp__real_cuGraphInstantiate_v2(e, g, err, log, n), e, g);
}

CUresult ibp__hook_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
                                               unsigned long long flags) {
  return recorded(ibp__real_cuGraphInstantiateWithFlags(e, g, flags), e, g);
}

CUresult
ibp__hook_cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g,
                                       CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return recorded(ibp__real_cuGraphInstantiateWithParams(e, g, p), e, g);
}

CUresult
ibp__hook_cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g,
                                            CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return recorded(ibp__real_cuGraphInstantiateWithParams_ptsz(e, g, p), e, g);
}

CUresult ibp__hook_cuGraphExecMemcpyNodeSetParams(CUgraphExec e,
                                                  CUgraphNode node,
                                                  const CUDA_MEMCPY3D *p,
                                                  CUcontext ctx) {
  CUresult res = ibp__real_cuGraphExecMemcpyNodeSetParams(e, node, p, ctx);
  if (res == CUDA_SUCCESS && !quiet())
    ibp__graph_note_memcpy(e, p);
  return res;
}

CUresult
ibp__hook_cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode node,
                                         const CUDA_MEMSET_NODE_PARAMS *p,
                                         CUcontext ctx) {
  CUresult res = ibp__real_cuGraphExecMemsetNodeSetParams(e, node, p, ctx);
  if (res == CUDA_SUCCESS && !quiet())
    ibp__graph_note_memset(e, p);
  return res;
}

CUresult ibp__hook_cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node,
                                            CUgraphNodeParams *p) {
  CUresult res = ibp__real_cuGraphExecNodeSetParams(e, node, p);
  if (res == CUDA_SUCCESS && p && !quiet())
    ibp__graph_note_params(e, p);
  return res;
}

/* The executable graph now runs `g`'s nodes: what they write is recorded
 * on top of what was (a superset). */
CUresult ibp__hook_cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g,
                                        CUgraphExecUpdateResultInfo *info) {
  return recorded(ibp__real_cuGraphExecUpdate_v2(e, g, info), &e, g);
}

CUresult ibp__hook_cuGraphExecDestroy(CUgraphExec e) {
  if (!ibp__guard)
    ibp__graph_forget(e);
  return ibp__real_cuGraphExecDestroy(e);
}

/* ---- launch: invalidate first, an event after ---------------------------- */

static CUresult launched(size_t touched, CUresult res, CUstream s) {
  if (touched)
    ibp__graph_launch_end(touched, res == CUDA_SUCCESS ? s : NULL);
  return res;
}

CUresult ibp__hook_cuGraphLaunch(CUgraphExec e, CUstream s) {
  if (!ibp__guard)
    ibp__batch_order(s ? s : CU_STREAM_LEGACY);
  size_t t = quiet() ? 0 : ibp__graph_launch_begin(e);
  return launched(t, ibp__real_cuGraphLaunch(e, s), s ? s : CU_STREAM_LEGACY);
}

CUresult ibp__hook_cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) {
  if (!ibp__guard)
    ibp__batch_order(s ? s : CU_STREAM_PER_THREAD);
  size_t t = quiet() ? 0 : ibp__graph_launch_begin(e);
  return launched(t, ibp__real_cuGraphLaunch_ptsz(e, s),
                  s ? s : CU_STREAM_PER_THREAD);
}

/* ---- kernels: a region among the parameters passes through --------------- */

#define LAUNCH_KERNEL(sym, explicit_stream)                                    \
  CUresult ibp__hook_##sym(CUfunction f, unsigned gx, unsigned gy,             \
                           unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                           unsigned shared, CUstream s, void **params,         \
                           void **extra) {                                     \
    if (!ibp__guard)                                                           \
      ibp__batch_order(explicit_stream(s));                                    \
    if (!quiet())                                                              \
      ibp__kernel_args_scan(f, params, extra);                                 \
    return ibp__real_##sym(f, gx, gy, gz, bx, by, bz, shared, s, params,       \
                           extra);                                             \
  }
#define LAUNCH_KERNEL_EX(sym, explicit_stream)                                 \
  CUresult ibp__hook_##sym(const CUlaunchConfig *cfg, CUfunction f,            \
                           void **params, void **extra) {                      \
    if (!ibp__guard)                                                           \
      ibp__batch_order(cfg ? explicit_stream(cfg->hStream) : IBP_BATCH_ALL);   \
    if (!quiet())                                                              \
      ibp__kernel_args_scan(f, params, extra);                                 \
    return ibp__real_##sym(cfg, f, params, extra);                             \
  }

static inline CUstream legacy(CUstream s) {
  return s ? s : CU_STREAM_LEGACY;
}
static inline CUstream per_thread(CUstream s) {
  return s ? s : CU_STREAM_PER_THREAD;
}

LAUNCH_KERNEL(cuLaunchKernel, legacy)
LAUNCH_KERNEL(cuLaunchKernel_ptsz, per_thread)
LAUNCH_KERNEL_EX(cuLaunchKernelEx, legacy)
LAUNCH_KERNEL_EX(cuLaunchKernelEx_ptsz, per_thread)
