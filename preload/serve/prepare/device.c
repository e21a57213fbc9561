/* Per-device work on the worker thread (serve/prepare/device.h): loading the
 * kernels, the built-in self-test, and uploading a region's metadata.
 *
 * The kernels come from the embedded fatbin, loaded once per process with
 * cuLibraryLoadData (context-independent; cuModuleLoadData per context when
 * the driver lacks it).  Before the first region is served on a device, a
 * built-in vector is compressed on the CPU, decompressed by the kernel on
 * that device (whole and a partial range) and compared byte for byte; a
 * mismatch disables substitution on the device for good.  Before the first
 * region stored with the exponent stage, a second vector stored so checks
 * the stage's decoder the same way; a mismatch makes every such region
 * pass through on the device (the others are still served). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "serve/prepare/device.h"

#include "base/driver.h"
#include "base/log.h"
#include "kernels/ibp_fatbin.h"
#include "serve/choose/gate.h"
#include "serve/choose/streams.h"
#include "serve/compact.h"
#include "serve/region.h"

#define MAX_CONTEXTS 64
#define SHARED_DEFAULT_LIMIT (48 * 1024)

/* The kernels libibp launches: ibp_decompress, ibp_decompress_batch. */
enum { KERNEL_DECOMPRESS, KERNEL_BATCH, KERNELS };
static const char *const kernel_names[KERNELS] = {IBP_KERNEL_DECOMPRESS,
                                                  IBP_KERNEL_BATCH};

static CUfunction cached_function(const ibp_driver *d, unsigned k);
static CUlibrary library;
static CUkernel kernel[KERNELS];
static int library_tried;
static int load_failed; /* no kernels in any context: give up for good */
static int warned;      /* one warning per process */
static int selftest[IBP_MAX_DEVICES];       /* 0 not run, 1 ok, -1 bad */
static int stage_selftest[IBP_MAX_DEVICES]; /* the same, the stage's */
static struct {
  CUcontext ctx;
  CUfunction fn[KERNELS];
} functions[MAX_CONTEXTS];

/* ---- kernels ------------------------------------------------------------- */

static int module_functions(const ibp_driver *d, CUfunction *fn) {
  CUmodule m;
  if (!d->cuModuleLoadData ||
      d->cuModuleLoadData(&m, ibp_kernels_fatbin) != CUDA_SUCCESS)
    return -1;
  for (unsigned k = 0; k < KERNELS; k++)
    if (d->cuModuleGetFunction(&fn[k], m, kernel_names[k]) != CUDA_SUCCESS)
      return -1;
  return 0;
}

/* Guards `functions` (the worker fills it, a context's end empties it). */
static pthread_mutex_t functions_lock = PTHREAD_MUTEX_INITIALIZER;

void ibp__device_forget_contexts(void) {
  pthread_mutex_lock(&functions_lock);
  memset(functions, 0, sizeof functions);
  pthread_mutex_unlock(&functions_lock);
}

/* ibp_decompress in the current context (cached per context). */
static CUfunction decompress_function(const ibp_driver *d) {
  pthread_mutex_lock(&functions_lock);
  CUfunction fn = cached_function(d, KERNEL_DECOMPRESS);
  pthread_mutex_unlock(&functions_lock);
  return fn;
}

CUfunction ibp__device_batch_function(void) {
  const ibp_driver *d = ibp__driver();
  if (!d)
    return NULL;
  pthread_mutex_lock(&functions_lock);
  CUfunction fn = cached_function(d, KERNEL_BATCH);
  pthread_mutex_unlock(&functions_lock);
  return fn;
}

/* Loads both kernels in the current context (the library's, else a module
 * of its own). */
static int load_functions(const ibp_driver *d, CUfunction *fn) {
  if (!library_tried) {
    library_tried = 1;
    int ok = d->cuLibraryLoadData &&
             d->cuLibraryLoadData(&library, ibp_kernels_fatbin, NULL, NULL, 0,
                                  NULL, NULL, 0) == CUDA_SUCCESS;
    for (unsigned k = 0; k < KERNELS; k++)
      if (!ok || d->cuLibraryGetKernel(&kernel[k], library, kernel_names[k]) !=
                     CUDA_SUCCESS)
        kernel[k] = NULL;
  }
  unsigned k = 0;
  for (; k < KERNELS && kernel[k] && d->cuKernelGetFunction; k++)
    if (d->cuKernelGetFunction(&fn[k], kernel[k]) != CUDA_SUCCESS)
      break;
  return k == KERNELS ? 0 : module_functions(d, fn);
}

static CUfunction cached_function(const ibp_driver *d, unsigned k) {
  CUcontext ctx = NULL;
  if (d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return NULL;
  unsigned i = 0;
  for (; i < MAX_CONTEXTS && functions[i].ctx; i++)
    if (functions[i].ctx == ctx)
      return functions[i].fn[k];
  if (i == MAX_CONTEXTS)
    return NULL;
  CUfunction fn[KERNELS] = {NULL};
  if (load_functions(d, fn) != 0)
    return NULL;
  functions[i].ctx = ctx;
  memcpy(functions[i].fn, fn, sizeof fn);
  return fn[k];
}

/* ---- memory helpers ------------------------------------------------------ */

/* Device copy of `bytes` host bytes, zero-padded to `padded`; 0 on error. */
static CUdeviceptr upload(const ibp_driver *d, CUstream s, const void *host,
                          size_t bytes, size_t padded) {
  CUdeviceptr p = 0;
  uint8_t *tmp = calloc(1, padded);
  if (!tmp || d->cuMemAlloc(&p, padded) != CUDA_SUCCESS) {
    free(tmp);
    return 0;
  }
  memcpy(tmp, host, bytes);
  if (d->cuMemcpyHtoDAsync(p, tmp, padded, s) != CUDA_SUCCESS ||
      d->cuStreamSynchronize(s) != CUDA_SUCCESS) {
    d->cuMemFree(p);
    p = 0;
  }
  free(tmp);
  return p;
}

static CUdeviceptr mapped(const ibp_driver *d, const void *host) {
  CUdeviceptr p = 0;
  if (d->cuMemHostGetDevicePointer(&p, (void *)host, 0) != CUDA_SUCCESS)
    return 0;
  return p;
}

static size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

/* The decode plans of the region's K pairs (docs/ARCHITECTURE.md "The
 * decode plan"), cluster k's at k * ibp_kernels_plan_bytes(R, 1, S), with
 * one S for all, on the device; *stages gets S.  0 on error. */
static CUdeviceptr upload_plan(const ibp_driver *d, CUstream s,
                               const ibp_params *p, uint32_t K,
                               unsigned *stages) {
  const uint32_t R = p->tensor_bytes, c = p->chunk_bytes;
  unsigned S = 0;
  for (uint32_t k = 0; k < K; k++) {
    unsigned sk = ibp_kernels_plan_stages(p[k].mask, R, 1, R, c);
    S = sk > S ? sk : S;
  }
  *stages = S;
  const size_t one = ibp_kernels_plan_bytes(R, 1, S);
  uint32_t *plan = malloc(one * K);
  int ok = plan != NULL;
  for (uint32_t k = 0; ok && k < K; k++)
    ok = ibp_kernels_decode_plan(p[k].mask, p[k].bitval, R, 1, R, c, S,
                                 plan + k * (one / 4)) == 0;
  CUdeviceptr dp = ok ? upload(d, s, plan, one * K, one * K) : 0;
  free(plan);
  return dp;
}

/* What the kernel needs of the region's K exponent stages (docs/FORMAT.md
 * §9; ibp_kernels_stage_exp), on the device; 0 on error. */
static CUdeviceptr upload_stages(const ibp_driver *d, CUstream s,
                                 const ibp_params *p, const ibp_stage *st,
                                 uint32_t K) {
  ibp_kernel_stage *ks = calloc(K, sizeof *ks);
  int ok = ks != NULL;
  for (uint32_t k = 0; ok && k < K; k++)
    ok = ibp_kernels_stage_exp(&st[k], p[k].mask, p[k].tensor_bytes, &ks[k]) ==
         0;
  CUdeviceptr dp = ok ? upload(d, s, ks, K * sizeof *ks, K * sizeof *ks) : 0;
  free(ks);
  return dp;
}

/* ---- launch template ----------------------------------------------------- */

void ibp__device_memory_free(const ibp_driver *d, ibp_device_memory *m) {
  const CUdeviceptr ptrs[] = {m->plan,    m->flags, m->offsets,
                              m->lengths, m->ids,   m->stages};
  for (size_t k = 0; k < sizeof ptrs / sizeof ptrs[0]; k++)
    if (ptrs[k])
      d->cuMemFree(ptrs[k]);
  for (size_t k = 0; k < 2; k++)
    if (m->probe[k])
      d->cuEventDestroy(m->probe[k]);
  for (size_t k = 0; k < IBP_TIMING_EVENTS * IBP_TIMING_SAMPLES; k++)
    if (m->timing[k])
      d->cuEventDestroy(m->timing[k]);
  for (size_t k = 0; k < 2 * IBP_TIMING_BESIDE; k++)
    if (m->beside[k])
      d->cuEventDestroy(m->beside[k]);
  if (m->mark)
    d->cuStreamDestroy(m->mark);
  *m = (ibp_device_memory){0};
}

/* What a region's metadata is made of on the host (its layout, or the
 * self-test's). */
typedef struct host_metadata {
  const ibp_params *params; /* K pairs */
  const ibp_stage *stages;  /* their K exponent stages, or NULL */
  uint32_t K;
  const uint8_t *ids; /* K > 1: padded to whole 32-bit words */
  const uint8_t *flags;
  const uint64_t *offsets;
  const uint32_t *lengths;
  uint64_t bytes; /* the region's */
} host_metadata;

/* Bytes of the ids as uploaded: whole 32-bit words (0 when K = 1). */
static size_t id_upload_bytes(uint32_t K, uint64_t n) {
  return K > 1 ? round_up(ibp_cluster_id_bytes(K, n), 4) : 0;
}

static int upload_metadata(const ibp_driver *d, CUstream s,
                           const host_metadata *h, ibp_device_memory *m) {
  const ibp_params *p = h->params;
  const uint64_t n = h->bytes / p->tensor_bytes;
  size_t flag_bytes = ibp_region_flag_bytes(p, h->bytes);
  size_t id_bytes = id_upload_bytes(h->K, n);
  m->plan = upload_plan(d, s, p, h->K, &m->plan_stages);
  m->flags = upload(d, s, h->flags, flag_bytes, round_up(flag_bytes + 1, 4));
  m->offsets = upload(d, s, h->offsets, n * sizeof *h->offsets,
                      (n + 1) * sizeof *h->offsets);
  m->lengths = upload(d, s, h->lengths, n * sizeof *h->lengths,
                      (n + 1) * sizeof *h->lengths);
  m->ids = id_bytes ? upload(d, s, h->ids, id_bytes, id_bytes) : 0;
  m->stages = h->stages ? upload_stages(d, s, p, h->stages, h->K) : 0;
  if (m->plan && m->flags && m->offsets && m->lengths &&
      (m->ids || !id_bytes) && (m->stages || !h->stages))
    return 0;
  ibp__device_memory_free(d, m);
  return -1;
}

/* Fills the launch template of a region in the current context. */
static int plan(const ibp_driver *d, int dev, CUfunction fn,
                const host_metadata *h, const ibp_device_memory *m,
                const void *packed, const void *original, const void *dirty,
                ibp_device_slot *out) {
  const ibp_params *p = h->params;
  const uint64_t bytes = h->bytes;
  int sms = 0, smem = 0;
  if (d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                              dev) != CUDA_SUCCESS ||
      d->cuDeviceGetAttribute(
          &smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) !=
          CUDA_SUCCESS)
    return -1;
  ibp_decompress_args *a = &out->args;
  *a = (ibp_decompress_args){
      .packed = (const uint8_t *)(uintptr_t)mapped(d, packed),
      .original = (const uint8_t *)(uintptr_t)mapped(d, original),
      .offsets = (const uint64_t *)(uintptr_t)m->offsets,
      .lengths = (const uint32_t *)(uintptr_t)m->lengths,
      .flags = (const uint32_t *)(uintptr_t)m->flags,
      .dirty = dirty ? (const uint32_t *)(uintptr_t)mapped(d, dirty) : NULL,
      .plan = (const uint8_t *)(uintptr_t)m->plan,
      .plan_stages = m->plan_stages,
      .cluster_ids = (const uint32_t *)(uintptr_t)m->ids,
      .stages = (const ibp_kernel_stage *)(uintptr_t)m->stages,
      .clusters = h->K,
      .tensors = bytes / p->tensor_bytes,
      .length = bytes,
      .tensor_bytes = p->tensor_bytes,
      .chunk_bytes = p->chunk_bytes,
      .tail_bytes = (uint32_t)(bytes % p->tensor_bytes),
  };
  if (!a->packed || !a->original || (dirty && !a->dirty))
    return -1;
  if (ibp_kernels_plan_decompress(a, (unsigned)smem, (unsigned)sms,
                                  &out->plan) != 0)
    return -1;
  /* the staged path's launches: wider blocks (docs/ARCHITECTURE.md,
   * "Staged copies"); the region's own shape where they cannot be planned */
  out->staged_args = *a;
  out->staged_plan = out->plan;
  ibp_decompress_args wide = *a;
  ibp_kernel_plan wide_plan;
  if (ibp_kernels_plan_decompress_warps(&wide, (unsigned)smem, (unsigned)sms,
                                        IBP_STAGED_WARPS, &wide_plan) == 0) {
    out->staged_args = wide;
    out->staged_plan = wide_plan;
  }
  /* The function is shared by every region of the context: its limit is
   * the device's, so that no region's plan lowers another's. */
  if ((out->plan.dynamic_shared > SHARED_DEFAULT_LIMIT ||
       out->staged_plan.dynamic_shared > SHARED_DEFAULT_LIMIT) &&
      d->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            smem) != CUDA_SUCCESS)
    return -1;
  CUcontext ctx = NULL;
  d->cuCtxGetCurrent(&ctx);
  out->ctx = ctx;
  out->fn = fn;
  out->sms = (unsigned)sms;
  out->mem = *m;
  return 0;
}

/* Runs the template over [off, off+len) into dst and waits. */
static CUresult run_range(const ibp_driver *d, CUstream s,
                          const ibp_device_slot *rd, uint64_t off, uint64_t len,
                          CUdeviceptr dst) {
  ibp_decompress_args a = rd->args;
  a.first_tensor = off / a.tensor_bytes;
  a.first_offset = (uint32_t)(off % a.tensor_bytes);
  a.length = len;
  a.dst = (uint8_t *)(uintptr_t)dst;
  ibp_kernel_plan pl = rd->plan;
  ibp_kernels_plan_range(&a, rd->sms, &pl);
  void *params[] = {&a};
  CUresult e = d->cuLaunchKernel(rd->fn, pl.grid, 1, 1, pl.block, 1, 1,
                                 pl.dynamic_shared, s, params, NULL);
  return e == CUDA_SUCCESS ? d->cuStreamSynchronize(s) : e;
}

/* ---- the self-test ------------------------------------------------------- */

/* A vector that exercises what regions use: R not a multiple of 16, two
 * clusters (float32 words of two kinds, tensor by tensor, each compressed
 * with its own pair: a kernel that ignored the ids would decode half of
 * them wrong), a raw (incompressible) tensor, a raw tail, a range with
 * partial tensors. */
#define ST_R 200u
#define ST_N 24u
#define ST_TAIL 56u
#define ST_BYTES (ST_R * ST_N + ST_TAIL)
#define ST_K 2u
static const uint32_t st_high[ST_K] = {0x3f800000u, 0xc0400000u};

static void selftest_data(uint8_t *data) {
  uint32_t x = 0x9e3779b9u;
  for (unsigned i = 0; i < ST_BYTES / 4; i++) {
    x = x * 1664525u + 1013904223u;
    const unsigned t = i / (ST_R / 4);
    uint32_t w = t == 5 ? x : st_high[t % ST_K] | (x >> 16);
    memcpy(data + 4 * i, &w, 4);
  }
}

/* Cluster k's pair: the high 16 bits of every word are st_high[k]'s. */
static int selftest_params(ibp_params *p) {
  uint8_t mask[ST_R], bitval[ST_R];
  for (uint32_t k = 0; k < ST_K; k++) {
    for (unsigned b = 0; b < ST_R; b++) {
      mask[b] = b % 4 >= 2 ? 0xFF : 0;
      bitval[b] = (uint8_t)(mask[b] & (st_high[k] >> (8 * (b % 4))));
    }
    if (ibp_params_from_masks(ST_R, 4, mask, bitval, &p[k]) != IBP_OK)
      return -1;
  }
  return 0;
}

typedef struct selftest_mem {
  uint8_t *orig, *slots, *shadow, *back;
  CUdeviceptr dst;
  ibp_device_memory m;
} selftest_mem;

/* A vector compressed on the CPU: the kernel must give orig back. */
typedef struct selftest_vector {
  const ibp_params *p; /* K pairs */
  const ibp_stage *st; /* their stages, or NULL */
  uint32_t K;
} selftest_vector;

static int selftest_compare(const ibp_driver *d, CUstream s,
                            const ibp_device_slot *rd, const selftest_mem *t,
                            uint64_t off, uint64_t len) {
  memset(t->back, 0xa5, ST_BYTES);
  return run_range(d, s, rd, off, len, t->dst) == CUDA_SUCCESS &&
                 d->cuMemcpyDtoH(t->back, t->dst, len) == CUDA_SUCCESS &&
                 memcmp(t->back, t->orig + off, len) == 0
             ? 0
             : -1;
}

/* Compresses t->orig (ST_BYTES) with v, uploads it and runs the kernel
 * over all of it and over a range with partial tensors. */
static int selftest_decode(const ibp_driver *d, CUstream s, int dev,
                           CUfunction fn, selftest_mem *t,
                           const selftest_vector *v) {
  uint8_t flags[ST_N / 8 + 1], ids[4] = {0};
  uint64_t offsets[ST_N + 1];
  uint32_t lengths[ST_N];
  ibp_device_slot rd;
  ibp_region reg = {v->p, t->slots, ST_BYTES, flags};
  int ok =
      ibp_compress_region_staged(v->p, v->st, v->K, t->orig, ST_BYTES, t->slots,
                                 flags, ids, 1, NULL) == IBP_OK &&
      ibp_region_pack_offsets_staged(&reg, ids, v->K, v->st, offsets) ==
          IBP_OK &&
      /* the shadow has room for every tensor stored compressed */
      ibp_region_pack(&reg, offsets, t->shadow) == IBP_OK;
  for (unsigned i = 0; ok && i < ST_N; i++)
    lengths[i] = (uint32_t)(offsets[i + 1] - offsets[i]);
  const host_metadata h = {.params = v->p,
                           .stages = v->st,
                           .K = v->K,
                           .ids = ids,
                           .flags = flags,
                           .offsets = offsets,
                           .lengths = lengths,
                           .bytes = ST_BYTES};
  ok = ok && upload_metadata(d, s, &h, &t->m) == 0;
  ok = ok && plan(d, dev, fn, &h, &t->m, t->shadow, t->orig, NULL, &rd) == 0;
  return ok && selftest_compare(d, s, &rd, t, 0, ST_BYTES) == 0 &&
                 selftest_compare(d, s, &rd, t, 333, 3000) == 0
             ? 0
             : -1;
}

static int selftest_run(const ibp_driver *d, CUstream s, int dev, CUfunction fn,
                        selftest_mem *t) {
  ibp_params p[ST_K] = {{0}};
  selftest_data(t->orig);
  const selftest_vector v = {p, NULL, ST_K};
  int rc = selftest_params(p) == 0 ? selftest_decode(d, s, dev, fn, t, &v) : -1;
  for (uint32_t k = 0; k < ST_K; k++)
    ibp_params_free(&p[k]);
  return rc;
}

/* The exponent stage's vector (docs/FORMAT.md §9), of the same geometry:
 * bf16 values whose sign+exponent vary (codes of several lengths; two
 * exponents too rare for a code of their own, sent as the escape + raw
 * field), 16 values per segment (segment lengths in use), two clusters --
 * a Mask of the field alone (a stream without its bitmap) and one that
 * also takes the mantissas' low 4 bits (with its bitmap), tensors suiting
 * either in turn --, an incompressible tensor, a raw tail. */
#define ST_SEGMENT_LOG2 4u

static void stage_selftest_data(uint8_t *data) {
  uint32_t x = 0x7f4a7c15u;
  for (unsigned i = 0; i < ST_BYTES / 2; i++) {
    x = x * 1664525u + 1013904223u;
    const unsigned t = i / (ST_R / 2);
    uint32_t e = 124 + (x >> 30) - ((x >> 27) & 1u); /* 123 .. 127 */
    if (i == 77 || i == 1300)
      e = 3; /* rare: the escape */
    uint32_t mantissa = (x >> 9) & 0x7Fu;
    if (t % 2)
      mantissa &= 0x70u; /* cluster 1's tensors */
    uint32_t v = (x >> 31) << 15 | e << 7 | mantissa;
    if (t == 5)
      v = x >> 16; /* incompressible */
    data[2 * i] = (uint8_t)v;
    data[2 * i + 1] = (uint8_t)(v >> 8);
  }
}

static int stage_selftest_params(ibp_params *p, ibp_stage *st,
                                 const uint8_t *data) {
  uint8_t mask[ST_R], bitval[ST_R] = {0};
  for (uint32_t k = 0; k < ST_K; k++) {
    for (unsigned b = 0; b < ST_R; b++)
      mask[b] = b % 2 ? 0xFF : k ? 0x8F : 0x80; /* the field (+ 4 bits) */
    if (ibp_params_from_masks(ST_R, 2, mask, bitval, &p[k]) != IBP_OK)
      return -1;
  }
  if (ibp_stage_learn(p, ST_K, IBP_STAGE_EXP, IBP_DTYPE_BF16, data, ST_N, 0, 1,
                      st) != IBP_OK)
    return -1;
  for (uint32_t k = 0; k < ST_K; k++)
    st[k].segment_log2 = ST_SEGMENT_LOG2;
  return 0;
}

static int stage_selftest_run(const ibp_driver *d, CUstream s, int dev,
                              CUfunction fn, selftest_mem *t) {
  ibp_params p[ST_K] = {{0}};
  ibp_stage *st = calloc(ST_K, sizeof *st); /* ~12 KiB each */
  stage_selftest_data(t->orig);
  const selftest_vector v = {p, st, ST_K};
  int rc = st && stage_selftest_params(p, st, t->orig) == 0
               ? selftest_decode(d, s, dev, fn, t, &v)
               : -1;
  for (uint32_t k = 0; k < ST_K; k++)
    ibp_params_free(&p[k]);
  free(st);
  return rc;
}

typedef int (*selftest_fn)(const ibp_driver *d, CUstream s, int dev,
                           CUfunction fn, selftest_mem *t);

/* Runs one vector in device memory of its own; 0 when the bytes match. */
static int device_selftest(const ibp_driver *d, CUstream s, int dev,
                           CUfunction fn, selftest_fn run) {
  selftest_mem t = {0};
  int rc = -1;
  void *o = NULL, *sh = NULL;
  unsigned fl = CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE;
  t.back = malloc(ST_BYTES);
  t.slots = malloc(ST_BYTES);
  if (t.back && t.slots &&
      d->cuMemHostAlloc(&o, ST_BYTES, fl) == CUDA_SUCCESS &&
      d->cuMemHostAlloc(&sh, ST_BYTES, fl) == CUDA_SUCCESS &&
      d->cuMemAlloc(&t.dst, ST_BYTES) == CUDA_SUCCESS) {
    t.orig = o;
    t.shadow = sh;
    rc = run(d, s, dev, fn, &t);
  }
  ibp__device_memory_free(d, &t.m);
  if (t.dst)
    d->cuMemFree(t.dst);
  if (sh)
    d->cuMemFreeHost(sh);
  if (o)
    d->cuMemFreeHost(o);
  free(t.back);
  free(t.slots);
  return rc;
}

/* The self-tests a region needs on dev (the stage's when it has stages),
 * each run once per device; 0 when they passed. */
static int selftests_pass(const ibp_driver *d, CUstream s, int dev,
                          CUfunction fn, const ibp_region_rec *r, int staged) {
  static int stage_warned;
  if (selftest[dev] == 0) {
    selftest[dev] = device_selftest(d, s, dev, fn, selftest_run) == 0 ? 1 : -1;
    if (selftest[dev] < 0)
      ibp__warn_first(&warned,
                      "device %d: the decompress self-test failed; "
                      "libibp passes every copy through on it",
                      dev);
  }
  if (selftest[dev] < 0)
    return -1;
  if (!staged)
    return 0;
  if (stage_selftest[dev] == 0)
    stage_selftest[dev] =
        device_selftest(d, s, dev, fn, stage_selftest_run) == 0 ? 1 : -1;
  if (stage_selftest[dev] < 0) {
    ibp__warn_first(&stage_warned,
                    "region '%s': the exponent stage's self-test failed on "
                    "device %d; regions stored with it pass through there",
                    r->name, dev);
    return -1;
  }
  return 0;
}

/* ---- regions ------------------------------------------------------------- */

static int setup_on(ibp_region_rec *r, int dev, CUstream s);

/* libibp's own uploads to the device, as the streams table counts them
 * (a span timed meanwhile is not believed: serve/choose/streams.h) */
int ibp__device_setup(ibp_region_rec *r, int dev, CUstream s) {
  ibp__streams_own_begin(dev);
  const int rc = setup_on(r, dev, s);
  ibp__streams_own_end(dev);
  return rc;
}

static int setup_on(ibp_region_rec *r, int dev, CUstream s) {
  const ibp_driver *d = ibp__driver();
  ibp_served_region *sr = ibp__served(r);
  const ibp_layout *l = &sr->layout;
  ibp_device_slot *slot = &sr->dev[dev];
  CUfunction fn = load_failed ? NULL : decompress_function(d);
  if (!fn) {
    if (!load_failed)
      ibp__warn_first(&warned,
                      "device %d: cannot load libibp's kernels; copies "
                      "pass through",
                      dev);
    load_failed = 1;
    return -1;
  }
  ibp__gate_setup_device(dev);
  if (selftests_pass(d, s, dev, fn, r, l->stages != NULL) != 0)
    return -1;
  ibp_device_memory m = {0};
  const host_metadata h = {.params = l->clusters.params,
                           .stages = l->stages,
                           .K = l->clusters.count,
                           .ids = l->ids,
                           .flags = l->flags,
                           .offsets = l->offsets,
                           .lengths = l->lengths,
                           .bytes = r->bytes};
  if (upload_metadata(d, s, &h, &m) != 0) {
    ibp__warn_first(&warned,
                    "region '%s': cannot upload its metadata to "
                    "device %d; it passes through there",
                    r->name, dev);
    return -1;
  }
  /* a compact region's memory is not the device's to read: its copies are
   * served only where every tensor is in the shadow (compact.h), and the
   * kernel is never sent to the original (its dirty and busy bits are not
   * given to it) */
  const void *original =
      ibp__compact_active(sr) ? l->shadow : (const void *)r->base;
  if (plan(d, dev, fn, &h, &m, l->shadow, original,
           (const void *)sr->track.dirty, slot) != 0) {
    ibp__device_memory_free(d, &m);
    ibp__warn_first(&warned,
                    "region '%s': cannot plan the kernel on device "
                    "%d; it passes through there",
                    r->name, dev);
    return -1;
  }
  /* busy lies right after dirty in the same mapped allocation */
  slot->busy = sr->refresh.busy
                   ? (const uint32_t *)((const uint8_t *)slot->args.dirty +
                                        ((uintptr_t)sr->refresh.busy -
                                         (uintptr_t)sr->track.dirty))
                   : NULL;
  ibp__log(IBP_LOG_INFO, "region '%s': ready on device %d", r->name, dev);
  return 0;
}

void ibp__device_after_fork_child(void) {
  library = NULL;
  memset(kernel, 0, sizeof kernel);
  library_tried = 0;
  memset(selftest, 0, sizeof selftest);
  memset(stage_selftest, 0, sizeof stage_selftest);
  memset(functions, 0, sizeof functions);
  pthread_mutex_init(&functions_lock, NULL);
  load_failed = 0;
}

/* ---- the fill's updates -------------------------------------------------- */

/* The cluster ids of tensors [t0, t1) (t0 a multiple of 32: whole bytes
 * of its own) to m; nothing when K = 1. */
static int publish_ids(const ibp_driver *d, const ibp_layout *l,
                       const ibp_device_memory *m, uint64_t t0, uint64_t t1) {
  const uint32_t bits = ibp_cluster_id_bits(l->clusters.count);
  if (!bits || !l->ids)
    return 0;
  const uint64_t b0 = t0 * bits / 8, b1 = (t1 * bits + 7) / 8;
  return d->cuMemcpyHtoD(m->ids + b0, l->ids + b0, b1 - b0) == CUDA_SUCCESS
             ? 0
             : -1;
}

/* One device: the slices of tensors [t0, t1), then its kernels finished. */
static int publish_on(const ibp_driver *d, const ibp_served_region *s,
                      const ibp_device_memory *m, uint64_t t0, uint64_t t1) {
  const ibp_layout *l = &s->layout;
  const uint64_t n = t1 - t0, f0 = t0 / 8, f1 = (t1 + 7) / 8;
  return d->cuMemcpyHtoD(m->offsets + t0 * sizeof *l->offsets, l->offsets + t0,
                         n * sizeof *l->offsets) == CUDA_SUCCESS &&
                 d->cuMemcpyHtoD(m->lengths + t0 * sizeof *l->lengths,
                                 l->lengths + t0,
                                 n * sizeof *l->lengths) == CUDA_SUCCESS &&
                 d->cuMemcpyHtoD(m->flags + f0, l->flags + f0, f1 - f0) ==
                     CUDA_SUCCESS &&
                 publish_ids(d, l, m, t0, t1) == 0 &&
                 d->cuCtxSynchronize() == CUDA_SUCCESS
             ? 0
             : -1;
}

int ibp__device_publish_range(ibp_served_region *s, uint64_t t0, uint64_t t1) {
  const ibp_driver *d = ibp__driver();
  int rc = d ? 0 : -1;
  for (unsigned i = 0; rc == 0 && i < IBP_MAX_DEVICES; i++) {
    if (ibp__device_state(s, i) != IBP_DEVICE_READY)
      continue;
    CUcontext ignored;
    if (d->cuCtxPushCurrent(s->dev[i].ctx) != CUDA_SUCCESS)
      return -1;
    ibp__streams_own_begin((int)i);
    rc = publish_on(d, s, &s->dev[i].mem, t0, t1);
    ibp__streams_own_end((int)i);
    d->cuCtxPopCurrent(&ignored);
  }
  return rc;
}
