/*
 * Contexts: each device's primary context (retain / release / reset /
 * flags), contexts made by cuCtxCreate, the per-thread stack of current
 * contexts, and peer access between contexts of different devices.
 *
 * A primary context is one object for the life of the process, so its
 * handle stays valid across resets; it is "active" between its first retain
 * and its last release (or a reset).  Deactivating or destroying a context
 * drains and closes its streams, destroys the objects it owns (streams,
 * events, modules) and frees its memory.
 */
#include "simcuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define STACK_MAX 128

static _Thread_local void *tls_stack[STACK_MAX];
static _Thread_local int tls_depth;

static scu_ctx *primaries[SCU_MAX_DEVICES];
static void *primary_handles[SCU_MAX_DEVICES];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static scu_ctx *contexts; /* g_lock */
static atomic_ullong next_ctx_uid = 1;

static const size_t default_limits[] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};
#define NLIMITS (sizeof default_limits / sizeof default_limits[0])

static void ctx_destroy(scu_obj *o) {
  scu_ctx *c = (scu_ctx *)o;
  pthread_mutex_destroy(&c->sched);
  free(c);
}

static scu_ctx *ctx_new(bool is_primary, unsigned flags, CUdevice dev) {
  scu_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  scu_obj_init(&c->hdr, SCU_T_CTX, ctx_destroy);
  c->primary = is_primary;
  c->device = dev;
  c->flags = flags;
  c->uid = atomic_fetch_add(&next_ctx_uid, 1);
  pthread_mutex_init(&c->sched, NULL);
  atomic_init(&c->captures, 0);
  atomic_init(&c->sticky, CUDA_SUCCESS);
  memcpy(c->limits, default_limits, sizeof default_limits);
  c->cache_config = CU_FUNC_CACHE_PREFER_NONE;
  return c;
}

/* A context starting to take work: fresh state and a legacy stream. */
static CUresult activate(scu_ctx *c) {
  atomic_store(&c->sticky, CUDA_SUCCESS);
  memcpy(c->limits, default_limits, sizeof default_limits);
  c->cache_config = CU_FUNC_CACHE_PREFER_NONE;
  scu_stream *legacy;
  CUresult r = scu_stream_create_internal(c, SCU_STREAM_LEGACY, 0, 0, &legacy);
  if (r != CUDA_SUCCESS)
    return r;
  c->legacy = legacy;
  c->active = true;
  return CUDA_SUCCESS;
}

/* Drains and drops everything the context holds.  No lock held. */
static void deactivate(scu_ctx *c) {
  c->active = false;
  scu_glock();
  c->peers = 0;
  scu_gunlock();
  scu_obj_release_owned(c, ~0u, NULL); /* user streams, events, modules... */
  scu_ctx_close_streams(c);            /* ... and waits for their work */
  scu_stream *legacy = c->legacy;
  c->legacy = NULL;
  if (legacy)
    scu_stream_put(legacy);
  scu_mem_release_ctx(c);
}

CUresult scu_ctx_init(void) {
  for (int d = 0; d < scu_device_count(); d++) {
    scu_ctx *p = primaries[d] = ctx_new(true, 0, d);
    if (!p)
      return CUDA_ERROR_OUT_OF_MEMORY;
    primary_handles[d] = scu_obj_publish(&p->hdr, NULL);
    if (!primary_handles[d])
      return CUDA_ERROR_OUT_OF_MEMORY;
    scu_glock();
    p->next_ctx = contexts;
    contexts = p;
    scu_gunlock();
  }
  return CUDA_SUCCESS;
}

static void list_remove(scu_ctx *c) {
  scu_glock();
  for (scu_ctx **p = &contexts; *p; p = &(*p)->next_ctx) {
    if (*p == c) {
      *p = c->next_ctx;
      break;
    }
  }
  scu_gunlock();
}

void scu_ctx_put(scu_ctx *c) {
  if (c)
    scu_obj_put(&c->hdr);
}

void scu_ctx_set_sticky(scu_ctx *c, CUresult r) {
  CUresult expected = CUDA_SUCCESS;
  atomic_compare_exchange_strong(&c->sticky, &expected, r);
}

static CUresult ctx_from_handle(void *h, scu_ctx **out) {
  scu_ctx *c = (scu_ctx *)scu_obj_get(h, SCU_MASK(SCU_T_CTX));
  if (!c)
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (!c->active) {
    scu_ctx_put(c);
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  *out = c;
  return CUDA_SUCCESS;
}

CUresult scu_ctx_current(scu_ctx **out) {
  if (tls_depth == 0 || !tls_stack[tls_depth - 1])
    return CUDA_ERROR_INVALID_CONTEXT;
  return ctx_from_handle(tls_stack[tls_depth - 1], out);
}

CUresult scu_ctx_resolve(CUcontext h, scu_ctx **out) {
  if (!h)
    return scu_ctx_current(out);
  CUresult r = ctx_from_handle(h, out);
  return r == CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_CONTEXT;
}

void scu_sync_all(void) {
  scu_ctx *list[64];
  size_t n = 0;
  scu_glock();
  for (scu_ctx *c = contexts; c && n < 64; c = c->next_ctx) {
    scu_obj_ref(&c->hdr);
    list[n++] = c;
  }
  scu_gunlock();
  for (size_t i = 0; i < n; i++) {
    if (list[i]->active)
      (void)scu_ctx_sync(list[i]);
    scu_ctx_put(list[i]);
  }
}

/* ---- the primary context ---------------------------------------------- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  SCU_API("cuDevicePrimaryCtxRetain");
  if (!pctx)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  pthread_mutex_lock(&primary_lock);
  scu_ctx *primary = primaries[dev];
  if (!primary->active)
    r = activate(primary);
  if (r == CUDA_SUCCESS) {
    primary->retains++;
    *pctx = primary_handles[dev];
  }
  pthread_mutex_unlock(&primary_lock);
  SCU_RETURN(r);
}

static CUresult primary_release(CUdevice dev) {
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&primary_lock);
  scu_ctx *primary = primaries[dev];
  if (primary->retains == 0) {
    r = CUDA_ERROR_INVALID_CONTEXT;
  } else if (--primary->retains == 0) {
    deactivate(primary);
  }
  pthread_mutex_unlock(&primary_lock);
  return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  SCU_API("cuDevicePrimaryCtxRelease");
  SCU_RETURN(primary_release(dev));
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SCU_API("cuDevicePrimaryCtxRelease");
  SCU_RETURN(primary_release(dev));
}

static CUresult primary_reset(CUdevice dev) {
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&primary_lock);
  scu_ctx *primary = primaries[dev];
  if (primary->active)
    deactivate(primary);
  primary->retains = 0;
  primary->flags = 0;
  pthread_mutex_unlock(&primary_lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  SCU_API("cuDevicePrimaryCtxReset");
  SCU_RETURN(primary_reset(dev));
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SCU_API("cuDevicePrimaryCtxReset");
  SCU_RETURN(primary_reset(dev));
}

#define CTX_FLAGS_MASK 0xffu /* CU_CTX_SCHED_* ... CU_CTX_SYNC_MEMOPS */

static CUresult primary_set_flags(CUdevice dev, unsigned flags) {
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    return r;
  if ((flags & ~CTX_FLAGS_MASK) || (flags & CU_CTX_SCHED_MASK) == 3 ||
      (flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&primary_lock);
  primaries[dev]->flags = flags;
  pthread_mutex_unlock(&primary_lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  SCU_API("cuDevicePrimaryCtxSetFlags");
  SCU_RETURN(primary_set_flags(dev, flags));
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev,
                                               unsigned int flags) {
  SCU_API("cuDevicePrimaryCtxSetFlags");
  SCU_RETURN(primary_set_flags(dev, flags));
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags,
                                            int *active) {
  SCU_API("cuDevicePrimaryCtxGetState");
  if (!flags || !active)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  pthread_mutex_lock(&primary_lock);
  *flags = primaries[dev]->flags;
  *active = primaries[dev]->active ? 1 : 0;
  pthread_mutex_unlock(&primary_lock);
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- created contexts ------------------------------------------------- */

static CUresult push(void *h) {
  if (tls_depth == STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  tls_stack[tls_depth++] = h;
  return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev) {
  if (!pctx || (flags & ~CTX_FLAGS_MASK) || (flags & CU_CTX_SCHED_MASK) == 3 ||
      (flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = scu_check_device(dev);
  if (r != CUDA_SUCCESS)
    return r;
  if (tls_depth == STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  scu_ctx *c = ctx_new(false, flags, dev);
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = activate(c);
  void *h = r == CUDA_SUCCESS ? scu_obj_publish(&c->hdr, NULL) : NULL;
  if (!h) {
    deactivate(c);
    scu_ctx_put(c);
    return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
  }
  scu_glock();
  c->next_ctx = contexts;
  contexts = c;
  scu_gunlock();
  scu_ctx_put(c); /* the table holds it now */
  (void)push(h);
  *pctx = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags,
                                CUdevice dev) {
  SCU_API("cuCtxCreate");
  SCU_RETURN(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx,
                                CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev) {
  SCU_API("cuCtxCreate");
  if (numParams < 0 || (numParams > 0 && !paramsArray))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if (numParams > 0)
    SCU_RETURN(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
  SCU_RETURN(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx,
                                CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev) {
  SCU_API("cuCtxCreate");
  if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams > 0 ||
                          ctxCreateParams->cigParams))
    SCU_RETURN(CUDA_ERROR_NOT_SUPPORTED);
  SCU_RETURN(ctx_create(pctx, flags, dev));
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  SCU_API("cuCtxDestroy");
  scu_ctx *c = (scu_ctx *)scu_obj_get(ctx, SCU_MASK(SCU_T_CTX));
  if (!c)
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  if (c->primary || !scu_obj_unpublish(&c->hdr)) {
    scu_ctx_put(c);
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  }
  list_remove(c);
  deactivate(c);
  /* Popped from this thread's stack if current here (other threads find
   * the handle destroyed). */
  for (int i = tls_depth - 1; i >= 0; i--) {
    if (tls_stack[i] == ctx) {
      memmove(&tls_stack[i], &tls_stack[i + 1],
              (size_t)(tls_depth - i - 1) * sizeof tls_stack[0]);
      tls_depth--;
    }
  }
  scu_ctx_put(c);
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- the current-context stack ----------------------------------------- */

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SCU_API("cuCtxSetCurrent");
  if (!ctx) {
    if (tls_depth > 0)
      tls_depth--;
    SCU_RETURN(CUDA_SUCCESS);
  }
  scu_ctx *c = (scu_ctx *)scu_obj_get(ctx, SCU_MASK(SCU_T_CTX));
  if (!c)
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  scu_ctx_put(c);
  if (tls_depth == 0)
    SCU_RETURN(push(ctx));
  tls_stack[tls_depth - 1] = ctx;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx) {
  SCU_API("cuCtxGetCurrent");
  if (!pctx)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *pctx = tls_depth ? tls_stack[tls_depth - 1] : NULL;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  SCU_API("cuCtxPushCurrent");
  if (!ctx)
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  scu_ctx *c = (scu_ctx *)scu_obj_get(ctx, SCU_MASK(SCU_T_CTX));
  if (!c)
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  scu_ctx_put(c);
  SCU_RETURN(push(ctx));
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx) {
  SCU_API("cuCtxPopCurrent");
  if (tls_depth == 0)
    SCU_RETURN(CUDA_ERROR_INVALID_CONTEXT);
  void *h = tls_stack[--tls_depth];
  if (pctx)
    *pctx = h;
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- queries and settings of a context --------------------------------- */

static CUresult ctx_get_device(CUdevice *device, CUcontext ctx) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  scu_ctx *c;
  CUresult r = scu_ctx_resolve(ctx, &c);
  if (r != CUDA_SUCCESS)
    return r;
  *device = c->device;
  scu_ctx_put(c);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device) {
  SCU_API("cuCtxGetDevice");
  SCU_RETURN(ctx_get_device(device, NULL));
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  SCU_API("cuCtxGetDevice");
  SCU_RETURN(ctx_get_device(device, ctx));
}

static CUresult ctx_synchronize(CUcontext ctx) {
  scu_ctx *c;
  CUresult r = scu_ctx_resolve(ctx, &c);
  if (r != CUDA_SUCCESS)
    return r;
  r = scu_capture_check_unsafe();
  if (r == CUDA_SUCCESS)
    r = scu_ctx_sync(c);
  scu_ctx_put(c);
  return r;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  SCU_API("cuCtxSynchronize");
  SCU_RETURN(ctx_synchronize(NULL));
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  SCU_API("cuCtxSynchronize");
  SCU_RETURN(ctx_synchronize(ctx));
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags) {
  SCU_API("cuCtxGetFlags");
  if (!flags)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    *flags = c->flags;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags) {
  SCU_API("cuCtxSetFlags");
  if ((flags & ~CTX_FLAGS_MASK) || (flags & CU_CTX_SCHED_MASK) == 3 ||
      (flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    c->flags = flags;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId) {
  SCU_API("cuCtxGetId");
  if (!ctxId)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_resolve(ctx, &c);
  if (r == CUDA_SUCCESS) {
    *ctxId = c->uid;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  SCU_API("cuCtxGetApiVersion");
  if (!version)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_resolve(ctx, &c);
  if (r == CUDA_SUCCESS) {
    *version = 3020; /* contexts with 64-bit device pointers */
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit) {
  SCU_API("cuCtxGetLimit");
  if (!pvalue)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if ((unsigned)limit >= NLIMITS)
    SCU_RETURN(CUDA_ERROR_UNSUPPORTED_LIMIT);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    *pvalue = c->limits[limit];
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  SCU_API("cuCtxSetLimit");
  if ((unsigned)limit >= NLIMITS)
    SCU_RETURN(CUDA_ERROR_UNSUPPORTED_LIMIT);
  if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    value = 0; /* clamped to the device's maximum, which is 0 here */
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    c->limits[limit] = value;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig) {
  SCU_API("cuCtxGetCacheConfig");
  if (!pconfig)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    *pconfig = c->cache_config;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config) {
  SCU_API("cuCtxSetCacheConfig");
  if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    c->cache_config = config;
    scu_ctx_put(c);
  }
  SCU_RETURN(r);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority,
                                             int *greatestPriority) {
  SCU_API("cuCtxGetStreamPriorityRange");
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  scu_ctx_put(c);
  if (leastPriority)
    *leastPriority = SCU_PRIORITY_LEAST;
  if (greatestPriority)
    *greatestPriority = SCU_PRIORITY_GREATEST;
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- peer access ---------------------------------------------------------
 *
 * The current context may access the memory of another device's context
 * once it enabled it: one bit per peer device in `peers` (g_lock), cleared
 * when the context stops taking work.  Copies between devices work either
 * way (unified addressing); access governs what kernels may touch, which
 * the emulator cannot see, so it is bookkeeping with the driver's errors. */

static CUresult peer_access(CUcontext peer, unsigned flags, bool enable) {
  if (enable && flags)
    return CUDA_ERROR_INVALID_VALUE;
  scu_ctx *c, *p;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    return r;
  if (!peer || ctx_from_handle(peer, &p) != CUDA_SUCCESS) {
    scu_ctx_put(c);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  unsigned bit = 1u << p->device;
  if (p->device == c->device) {
    r = CUDA_ERROR_INVALID_DEVICE; /* not a peer: the same device */
  } else {
    scu_glock();
    if (enable && (c->peers & bit))
      r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else if (!enable && !(c->peers & bit))
      r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    else
      c->peers ^= bit;
    scu_gunlock();
  }
  scu_ctx_put(p);
  scu_ctx_put(c);
  return r;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext,
                                       unsigned int Flags) {
  SCU_API("cuCtxEnablePeerAccess");
  SCU_RETURN(peer_access(peerContext, Flags, true));
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
  SCU_API("cuCtxDisablePeerAccess");
  SCU_RETURN(peer_access(peerContext, 0, false));
}
