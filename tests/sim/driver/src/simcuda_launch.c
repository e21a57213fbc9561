/*
 * Kernel launches and occupancy.
 *
 * An emulated kernel takes one parameter, its argument struct of
 * simt_kernel.args_bytes bytes: kernelParams[0] points to it (or extra
 * holds CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE with exactly that size).
 * The launch copies it, checks the configuration as the driver would
 * (CUDA_ERROR_INVALID_VALUE for a bad one) and queues simt_run on the
 * stream.  When the emulation stops (a trap, an out-of-range host read, a
 * strictness violation) the message goes to stderr prefixed "[simcuda]" and
 * the stream and its context get the sticky error CUDA_ERROR_LAUNCH_FAILED,
 * reported by the next synchronize or query.
 */
#include "simcuda_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct launch_cfg {
  unsigned grid[3], block[3], shared;
  CUstream stream;
  const CUlaunchAttribute *attrs;
  unsigned nattrs;
} launch_cfg;

static CUresult check_dims(const launch_cfg *c, unsigned max_shared) {
  const unsigned *g = c->grid, *b = c->block;
  if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
    return CUDA_ERROR_INVALID_VALUE;
  if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 ||
      (uint64_t)b[0] * b[1] * b[2] > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->shared > max_shared)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult check_attrs(const launch_cfg *c) {
  if (c->nattrs && !c->attrs)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < c->nattrs; i++) {
    const CUlaunchAttribute *a = &c->attrs[i];
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
      if (a->value.cooperative)
        return CUDA_ERROR_NOT_SUPPORTED;
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
      if (a->value.clusterDim.x > 1 || a->value.clusterDim.y > 1 ||
          a->value.clusterDim.z > 1)
        return CUDA_ERROR_NOT_SUPPORTED;
      break;
    default: /* hints: nothing to do in an emulator */
      break;
    }
  }
  return CUDA_SUCCESS;
}

/* The parameter block: where it is and its size. */
static CUresult params_source(void **params, void **extra, size_t want,
                              const void **src) {
  *src = NULL;
  if (params && extra)
    return CUDA_ERROR_INVALID_VALUE;
  if (want == 0)
    return CUDA_SUCCESS;
  if (params) {
    *src = params[0];
  } else if (extra) {
    size_t have = 0;
    bool sized = false;
    for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (i >= 64)
        return CUDA_ERROR_INVALID_VALUE;
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        *src = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        if (!extra[i + 1])
          return CUDA_ERROR_INVALID_VALUE;
        have = *(const size_t *)extra[i + 1];
        sized = true;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (!sized || have != want)
      return CUDA_ERROR_INVALID_VALUE;
  }
  scu_span sp;
  if (!*src || scu_mem_check((uintptr_t)*src, want, false, &sp) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult launch(CUfunction hf, const launch_cfg *cfg, void **params,
                       void **extra, bool ptds) {
  scu_func *f;
  CUresult r = scu_func_resolve(hf, &f);
  if (r != CUDA_SUCCESS)
    return r;
  const simt_kernel *k = f->k;
  const void *src = NULL;
  if ((r = check_dims(cfg, atomic_load(&f->max_dyn_shared))) == CUDA_SUCCESS &&
      (r = check_attrs(cfg)) == CUDA_SUCCESS)
    r = params_source(params, extra, k->args_bytes, &src);
  scu_obj_put(&f->hdr);
  if (r != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(SCU_OP_LAUNCH);
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (k->args_bytes) {
    if (!(op->owned = malloc(k->args_bytes))) {
      scu_op_free(op);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(op->owned, src, k->args_bytes);
    op->owned_bytes = k->args_bytes;
  }
  simt_launch *l = &op->u.launch.l;
  l->entry = k->entry;
  l->args = op->owned;
  l->grid = (simt_dim3){cfg->grid[0], cfg->grid[1], cfg->grid[2]};
  l->block = (simt_dim3){cfg->block[0], cfg->block[1], cfg->block[2]};
  l->dynamic_shared = cfg->shared;
  op->u.launch.name =
      k->name; /* the registry's: lives as long as the process */
  op->u.launch.out_bytes = k->out_bytes;
  op->u.launch.decodes = k->units != NULL;
  op->u.launch.units = k->units ? k->units(op->owned) : 0;
  op->u.launch.stage_bytes = k->stage_bytes;
  op->u.launch.func = hf;
  scu_stream *s;
  if ((r = scu_stream_resolve(cfg->stream, ptds, &s)) != CUDA_SUCCESS) {
    scu_op_free(op);
    return r;
  }
  uint64_t seq;
  r = scu_stream_submit(s, op, &seq);
  scu_stream_put(s);
  return r;
}

#define LAUNCH_KERNEL(sym, ptds)                                               \
  CUresult CUDAAPI sym(CUfunction f, unsigned int gridDimX,                    \
                       unsigned int gridDimY, unsigned int gridDimZ,           \
                       unsigned int blockDimX, unsigned int blockDimY,         \
                       unsigned int blockDimZ, unsigned int sharedMemBytes,    \
                       CUstream hStream, void **kernelParams, void **extra) {  \
    SCU_API("cuLaunchKernel");                                                 \
    launch_cfg c = {{gridDimX, gridDimY, gridDimZ},                            \
                    {blockDimX, blockDimY, blockDimZ},                         \
                    sharedMemBytes,                                            \
                    hStream,                                                   \
                    NULL,                                                      \
                    0};                                                        \
    SCU_RETURN(launch(f, &c, kernelParams, extra, ptds));                      \
  }

LAUNCH_KERNEL(cuLaunchKernel, false)
LAUNCH_KERNEL(cuLaunchKernel_ptsz, true)

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f,
                          void **params, void **extra, bool ptds) {
  if (!config)
    return CUDA_ERROR_INVALID_VALUE;
  launch_cfg c = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                  {config->blockDimX, config->blockDimY, config->blockDimZ},
                  config->sharedMemBytes,
                  config->hStream,
                  config->attrs,
                  config->numAttrs};
  return launch(f, &c, params, extra, ptds);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                  void **kernelParams, void **extra) {
  SCU_API("cuLaunchKernelEx");
  SCU_RETURN(launch_ex(config, f, kernelParams, extra, false));
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config,
                                       CUfunction f, void **kernelParams,
                                       void **extra) {
  SCU_API("cuLaunchKernelEx");
  SCU_RETURN(launch_ex(config, f, kernelParams, extra, true));
}

/* sm_90 limits: 2048 threads, 32 blocks, 64K registers (32 per thread
 * assumed) and 228 KiB of shared memory (1 KiB reserved per block) per SM. */
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize,
    unsigned int flags) {
  SCU_API("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  if (!numBlocks || blockSize <= 0 ||
      flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_func *f;
  CUresult r = scu_func_resolve(func, &f);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  unsigned max_shared = atomic_load(&f->max_dyn_shared);
  scu_obj_put(&f->hdr);
  if (blockSize > 1024 || dynamicSMemSize > max_shared) {
    *numBlocks = 0;
    SCU_RETURN(CUDA_SUCCESS);
  }
  unsigned warps = ((unsigned)blockSize + 31) / 32;
  unsigned n = 32;
  if (64 / warps < n)
    n = 64 / warps; /* threads, and registers at 32 per thread */
  size_t per_block = dynamicSMemSize + 1024;
  if (233472 / per_block < n)
    n = (unsigned)(233472 / per_block);
  *numBlocks = (int)n;
  SCU_RETURN(CUDA_SUCCESS);
}
