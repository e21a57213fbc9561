/* `ibp calibrate`'s measurements on a device (calibrate.h): every time is
 * the elapsed time between two CUDA events, the median of several
 * repetitions, so the same code measures a GPU and the simulated one
 * (whose events report the virtual clock).  The method, step by step, is
 * docs/PROFILE.md, "Calibration". */
#include "calibrate.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate_decode.h"
#include "cuda_api.h"
#include "ibp_fatbin.h"
#include "ibp_kernels.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)
#define SECTOR 32u         /* bytes of one host-read request (and simt's) */
#define TINY_COPY 4u       /* bytes of the copies that time the setup */
#define BATCH_STRIDE 4096u /* apart, a batch's tiny entries (none merged) */
#define LINE 128u          /* dense ranges start on a line */
#define BLOCKS_PER_SM 4u   /* the whole-GPU grid: this many blocks per SM */

/* What one run moves; the simulated GPU emulates kernels at 10-20 MB/s. */
typedef struct sizes {
  size_t copy;       /* each copy-engine copy (H2D, D2H, D2D) */
  size_t dense_all;  /* SM reads, whole GPU, contiguous */
  size_t sparse_all; /* SM reads, whole GPU, one byte per sector */
  size_t dense_one;  /* SM reads, one block, contiguous */
  size_t sparse_one; /* SM reads, one block, one byte per sector */
  size_t decode;     /* the decompress kernel's output */
  unsigned calls;    /* operations per timing of a per-call cost (few
                        enough to queue behind a held stream) */
  unsigned reps;     /* timings per value (the median is kept) */
} sizes;

static const sizes full_sizes = {256 * MIB, 64 * MIB, 8 * MIB, 8 * MIB,
                                 1 * MIB,   64 * MIB, 100,     7};
static const sizes quick_sizes = {16 * MIB,  2 * MIB, 1 * MIB, 512 * KIB,
                                  256 * KIB, 1 * MIB, 50,      3};

typedef struct gpu {
  cuda_api cu;
  const sizes *sz;
  char *err;
  size_t errlen;
  CUdevice dev;
  CUcontext ctx;
  CUstream idle, work; /* idle: host-time stamps only; work: the rest */
  CUevent e0, e1, scratch;
  uint8_t *host; /* pinned, device-mapped: sz->copy bytes */
  CUdeviceptr host_dev;
  CUdeviceptr d0, d1; /* device: sz->copy bytes each */
  CUdeviceptr ranges; /* device: max_ranges */
  size_t max_ranges;
  CUlibrary lib;
  CUfunction gather, decompress;
  unsigned sms, block, max_shared;
  CUevent h0, h1;            /* on idle: the host time of a gpu_time's calls */
  atomic_int gate;           /* 0: the work stream is held (hold()) */
  _Atomic double held_since; /* when hold() began (real seconds); 0: not */
} gpu;

/* ---- errors -------------------------------------------------------------- */

/* "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY" into g->err (`what`: the call as
 * written, its arguments left out); returns -1. */
static int fail_cuda(gpu *g, CUresult r, const char *what) {
  char name[64];
  snprintf(g->err, g->errlen, "%.*s: %s", (int)strcspn(what, "("), what,
           cuda_api_error(&g->cu, r, name, sizeof name));
  return -1;
}

/* Evaluates a driver call of g; on failure, fills g->err and returns -1
 * from the calling function. */
#define CU(g, call)                                                            \
  do {                                                                         \
    CUresult r_ = (g)->cu.call;                                                \
    if (r_ != CUDA_SUCCESS)                                                    \
      return fail_cuda((g), r_, #call);                                        \
  } while (0)

#define TRY(expr)                                                              \
  do {                                                                         \
    if ((expr) != 0)                                                           \
      return -1;                                                               \
  } while (0)

/* ---- setting up and tearing down ----------------------------------------- */

static int open_device(gpu *g, int ordinal, calibrate_result *out) {
  int count = 0, sms = 0;
  CU(g, cuInit(0));
  CU(g, cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    snprintf(g->err, g->errlen, "no device %d (the driver sees %d)", ordinal,
             count);
    return -1;
  }
  CU(g, cuDeviceGet(&g->dev, ordinal));
  CU(g,
     cuDeviceGetName(out->device_name, (int)sizeof out->device_name, g->dev));
  CU(g, cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                             g->dev));
  g->sms = sms > 0 ? (unsigned)sms : 1;
  CU(g, cuDevicePrimaryCtxRetain(&g->ctx, g->dev));
  CU(g, cuCtxSetCurrent(g->ctx));
  return 0;
}

static int load_kernels(gpu *g) {
  CUkernel k;
  ibp_kernel_plan plan;
  int smem = 0;
  CU(g, cuLibraryLoadData(&g->lib, ibp_kernels_fatbin, NULL, NULL, 0, NULL,
                          NULL, 0));
  CU(g, cuLibraryGetKernel(&k, g->lib, IBP_KERNEL_GATHER));
  CU(g, cuKernelGetFunction(&g->gather, k));
  CU(g, cuLibraryGetKernel(&k, g->lib, IBP_KERNEL_DECOMPRESS));
  CU(g, cuKernelGetFunction(&g->decompress, k));
  CU(g,
     cuDeviceGetAttribute(
         &smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g->dev));
  g->max_shared = smem > 0 ? (unsigned)smem : 0;
  ibp_kernels_plan_gather(1, g->sms, &plan);
  g->block = plan.block;
  return 0;
}

static size_t max_size(size_t a, size_t b) {
  return a > b ? a : b;
}

static int allocate(gpu *g) {
  const sizes *sz = g->sz;
  size_t warps = (size_t)BLOCKS_PER_SM * g->sms * (g->block / 32);
  g->max_ranges = max_size(sz->sparse_all / SECTOR, warps);
  CU(g, cuStreamCreate(&g->idle, CU_STREAM_NON_BLOCKING));
  CU(g, cuStreamCreate(&g->work, CU_STREAM_NON_BLOCKING));
  CU(g, cuEventCreate(&g->e0, CU_EVENT_DEFAULT));
  CU(g, cuEventCreate(&g->e1, CU_EVENT_DEFAULT));
  CU(g, cuEventCreate(&g->scratch, CU_EVENT_DEFAULT));
  CU(g, cuEventCreate(&g->h0, CU_EVENT_DEFAULT));
  CU(g, cuEventCreate(&g->h1, CU_EVENT_DEFAULT));
  CU(g, cuMemHostAlloc((void **)&g->host, sz->copy,
                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memset(g->host, 0x5a, sz->copy);
  CU(g, cuMemHostGetDevicePointer(&g->host_dev, g->host, 0));
  CU(g, cuMemAlloc(&g->d0, sz->copy));
  CU(g, cuMemAlloc(&g->d1, sz->copy));
  CU(g, cuMemAlloc(&g->ranges, g->max_ranges * sizeof(ibp_gather_range)));
  return 0;
}

static void release(gpu *g) {
  const cuda_api *cu = &g->cu;
  if (g->ctx == NULL)
    return;
  if (g->work)
    cu->cuStreamSynchronize(g->work);
  if (g->idle)
    cu->cuStreamSynchronize(g->idle);
  const CUdeviceptr mem[] = {g->d0, g->d1, g->ranges};
  for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
    if (mem[i])
      cu->cuMemFree(mem[i]);
  if (g->host)
    cu->cuMemFreeHost(g->host);
  const CUevent ev[] = {g->e0, g->e1, g->scratch, g->h0, g->h1};
  for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
    if (ev[i])
      cu->cuEventDestroy(ev[i]);
  if (g->work)
    cu->cuStreamDestroy(g->work);
  if (g->idle)
    cu->cuStreamDestroy(g->idle);
  if (g->lib)
    cu->cuLibraryUnload(g->lib);
  cu->cuDevicePrimaryCtxRelease(g->dev);
}

/* ---- operations ---------------------------------------------------------- */

/* Queues one operation (on g->work unless it says otherwise). */
typedef int (*queue_fn)(gpu *g, const void *job);

typedef enum copy_kind { COPY_H2D, COPY_D2H, COPY_D2D } copy_kind;

typedef struct copy_job {
  copy_kind kind;
  size_t bytes;
} copy_job;

typedef struct kernel_job {
  ibp_gather_args args;
  unsigned grid;
} kernel_job;

static int queue_record(gpu *g, const void *job) {
  (void)job;
  CU(g, cuEventRecord(g->scratch, g->idle));
  return 0;
}

static int queue_copy(gpu *g, const void *job) {
  const copy_job *c = job;
  if (c->kind == COPY_H2D)
    CU(g, cuMemcpyHtoDAsync(g->d0, g->host, c->bytes, g->work));
  else if (c->kind == COPY_D2H)
    CU(g, cuMemcpyDtoHAsync(g->host, g->d0, c->bytes, g->work));
  else
    CU(g, cuMemcpyDtoDAsync(g->d1, g->d0, c->bytes, g->work));
  return 0;
}

/* One cuMemcpyBatchAsync: `count` entries, one attribute for all. */
typedef struct batch_job {
  CUdeviceptr *dsts, *srcs;
  size_t *sizes;
  size_t count;
} batch_job;

static int queue_batch(gpu *g, const void *job) {
  const batch_job *b = job;
  CUmemcpyAttributes attr = {.srcAccessOrder =
                                 CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
  size_t first = 0, fail = 0;
  CU(g, cuMemcpyBatchAsync(b->dsts, b->srcs, b->sizes, b->count, &attr, &first,
                           1, &fail, g->work));
  return 0;
}

static int queue_kernel(gpu *g, const void *job) {
  const kernel_job *k = job;
  void *params[] = {(void *)&k->args};
  CU(g, cuLaunchKernel(g->gather, k->grid, 1, 1, g->block, 1, 1, 0, g->work,
                       params, NULL));
  return 0;
}

/* ---- timings ------------------------------------------------------------- */

static int elapsed_us(gpu *g, double *us) {
  float ms = 0;
  CU(g, cuEventSynchronize(g->e1));
  CU(g, cuEventElapsedTime(&ms, g->e0, g->e1));
  *us = (double)ms * 1e3;
  return 0;
}

static double real_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A host function that holds its stream until g->gate opens. */
static void CUDA_CB hold(void *arg) {
  gpu *g = arg;
  atomic_store_explicit(&g->held_since, real_seconds(), memory_order_release);
  while (!atomic_load_explicit(&g->gate, memory_order_acquire))
    sched_yield();
}

static int queue_n(gpu *g, queue_fn f, const void *job, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    TRY(f(g, job));
  return 0;
}

/* Queues hold(), e0, the n operations and e1 on the work stream, between
 * h0 and h1 on the idle stream; 0 or -1. */
static int queue_held(gpu *g, queue_fn f, const void *job, unsigned n) {
  CU(g, cuEventRecord(g->h0, g->idle));
  CU(g, cuLaunchHostFunc(g->work, hold, g));
  CU(g, cuEventRecord(g->e0, g->work));
  TRY(queue_n(g, f, job, n));
  CU(g, cuEventRecord(g->e1, g->work));
  CU(g, cuEventRecord(g->h1, g->idle));
  return 0;
}

/* Opens the gate once hold() has lasted as long as the calls behind it
 * took the host to make (h0 to h1).  On a GPU that time has passed
 * already; the simulated GPU times a host function by its real duration
 * but a call by its modelled cost, so the hold must outlast the calls in
 * real time for them to start only once all are queued. */
static int open_gate(gpu *g, int queued) {
  float ms = 0;
  CUresult r = CUDA_SUCCESS;
  if (queued && (r = g->cu.cuEventSynchronize(g->h1)) == CUDA_SUCCESS)
    r = g->cu.cuEventElapsedTime(&ms, g->h0, g->h1);
  if (r == CUDA_SUCCESS && queued) {
    double since;
    while ((since = atomic_load_explicit(&g->held_since,
                                         memory_order_acquire)) == 0)
      sched_yield();
    while (real_seconds() - since < 1.25e-3 * ms + 1e-4)
      sched_yield();
  }
  atomic_store_explicit(&g->gate, 1, memory_order_release);
  return r == CUDA_SUCCESS ? 0 : fail_cuda(g, r, "timing the held calls");
}

/* GPU time of n operations run back to back: queued behind a host
 * function that holds the stream until all are queued, so no host cost is
 * in it.  The gate opens whatever happens. */
static int gpu_time(gpu *g, queue_fn f, const void *job, unsigned n,
                    double *us) {
  atomic_store_explicit(&g->gate, 0, memory_order_release);
  atomic_store_explicit(&g->held_since, 0.0, memory_order_release);
  int rc = queue_held(g, f, job, n);
  if (open_gate(g, rc == 0) != 0 || rc != 0) {
    g->cu.cuStreamSynchronize(g->work);
    return -1;
  }
  return elapsed_us(g, us);
}

/* Host time of n calls: an event recorded on an idle stream is stamped
 * when the host submits it, so two of them around the calls time the
 * calls (and one event record). */
static int host_time(gpu *g, queue_fn f, const void *job, unsigned n,
                     double *us) {
  CU(g, cuStreamSynchronize(g->work));
  CU(g, cuEventRecord(g->e0, g->idle));
  TRY(queue_n(g, f, job, n));
  CU(g, cuEventRecord(g->e1, g->idle));
  TRY(elapsed_us(g, us));
  CU(g, cuStreamSynchronize(g->work));
  return 0;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of g->sz->reps timings (host_time or gpu_time). */
static int median_us(gpu *g, int host, queue_fn f, const void *job, unsigned n,
                     double *us) {
  double t[16];
  unsigned reps = g->sz->reps < 16 ? g->sz->reps : 16;
  for (unsigned i = 0; i < reps; i++)
    TRY(host ? host_time(g, f, job, n, &t[i]) : gpu_time(g, f, job, n, &t[i]));
  qsort(t, reps, sizeof t[0], by_value);
  *us = t[reps / 2];
  return 0;
}

/* ---- the gather kernel's range lists ------------------------------------- */

/* Uploads `count` ranges: `len` bytes each, `stride` apart in host memory
 * (from the mapped buffer's start) and `len` apart on the device. */
static int upload_ranges(gpu *g, size_t count, uint64_t len, uint64_t stride,
                         kernel_job *k, unsigned grid) {
  ibp_gather_range *r = calloc(count ? count : 1, sizeof *r);
  if (r == NULL) {
    snprintf(g->err, g->errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < count; i++)
    r[i] = (ibp_gather_range){i * stride, i * len, len};
  CUresult rc = CUDA_SUCCESS;
  if (count)
    rc = g->cu.cuMemcpyHtoD(g->ranges, r, count * sizeof *r);
  free(r);
  if (rc != CUDA_SUCCESS)
    return fail_cuda(g, rc, "cuMemcpyHtoD");
  k->args = (ibp_gather_args){
      (const uint8_t *)(uintptr_t)g->host_dev, (uint8_t *)(uintptr_t)g->d0,
      (const ibp_gather_range *)(uintptr_t)g->ranges, count};
  k->grid = grid;
  return 0;
}

/* GPU time (us) of one gather over `bytes` of host memory with `grid`
 * blocks, and the bytes it reads (whole sectors): dense, contiguous ranges
 * (one per warp, starting on lines) -- how SMs read best; or sparse, one
 * byte of every sector -- the kernel writes 1/32 of what it reads, so in
 * the model neither its output rate nor its device-memory writes bound it
 * (docs/PROFILE.md, "Calibration"). */
static int time_gather(gpu *g, size_t bytes, unsigned grid, int sparse,
                       double *us, double *read) {
  kernel_job k;
  if (sparse) {
    size_t count = bytes / SECTOR;
    TRY(upload_ranges(g, count, 1, SECTOR, &k, grid));
    *read = (double)count * SECTOR;
  } else {
    size_t warps = (size_t)grid * (g->block / 32);
    uint64_t len = bytes / warps / LINE * LINE;
    if (len == 0)
      len = LINE;
    TRY(upload_ranges(g, warps, len, len, &k, grid));
    *read = (double)warps * (double)len;
  }
  return median_us(g, 0, queue_kernel, &k, 1, us);
}

/* Bytes per us (= 1e-3 GB/s) of the faster pattern over `grid` blocks:
 * (bytes read - fixed_bytes) / (time - fixed_us), where a kernel reading
 * fixed_bytes takes fixed_us. */
static int read_rate(gpu *g, size_t dense, size_t sparse, unsigned grid,
                     double fixed_us, double fixed_bytes, double *rate) {
  double best = 0;
  for (int s = 0; s < 2; s++) {
    double us, bytes;
    TRY(time_gather(g, s ? sparse : dense, grid, s, &us, &bytes));
    double r = (bytes - fixed_bytes) / (us - fixed_us);
    if (us > fixed_us && r > best)
      best = r;
  }
  *rate = best;
  return 0;
}

/* ---- the measurements ---------------------------------------------------- */

typedef struct measured {
  double driver_call_us, driver_copy_call_us, driver_launch_call_us;
  double ce_setup_us, ce_batch_setup_us, launch_latency_us;
  double ce_h2d_gbps, ce_d2h_gbps, dram_gbps;
  double sm_h2d_gbps, sm_read_rtt_us, sm_inflight_bytes;
  double decode_gbps_per_sm, decode_tensor_us, decode_h2d_gbps;
  char decode_note[256];
  char batch_note[160]; /* why ce_batch_setup_us was not measured; "" */
} measured;

/* n TINY_COPY host-to-device entries, BATCH_STRIDE apart on both sides:
 * separate copies, none the driver could merge.  0 or -1. */
static int batch_build(gpu *g, size_t n, batch_job *b) {
  b->dsts = calloc(n, sizeof *b->dsts);
  b->srcs = calloc(n, sizeof *b->srcs);
  b->sizes = calloc(n, sizeof *b->sizes);
  b->count = n;
  if (b->dsts == NULL || b->srcs == NULL || b->sizes == NULL) {
    snprintf(g->err, g->errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    b->dsts[i] = g->d0 + i * BATCH_STRIDE;
    b->srcs[i] = (CUdeviceptr)(uintptr_t)(g->host + i * BATCH_STRIDE);
    b->sizes[i] = TINY_COPY;
  }
  return 0;
}

static void batch_free(batch_job *b) {
  free(b->dsts);
  free(b->srcs);
  free(b->sizes);
}

/* ce_batch_setup_us, after ce_setup_us (measure_calls): the GPU time of
 * one cuMemcpyBatchAsync of n tiny entries back to back -- its first set
 * up as a copy of its own, each later one in ce_batch_setup_us, each
 * moving its bytes -- less one tiny copy's time, / (n - 1); the bytes come
 * off below (measure_copies).  Without the call in the driver, or when it
 * fails, it is not measured: ce_setup_us's value, and a note says why. */
static int measure_batch(gpu *g, measured *m) {
  const unsigned n = g->sz->calls;
  batch_job b = {0};
  double us = 0;
  if (g->cu.cuMemcpyBatchAsync == NULL) {
    snprintf(m->batch_note, sizeof m->batch_note,
             "the driver has no cuMemcpyBatchAsync");
    return 0;
  }
  if (batch_build(g, n, &b) != 0) {
    batch_free(&b);
    return -1;
  }
  int rc = gpu_time(g, queue_batch, &b, 1, &us) || /* warm-up */
           median_us(g, 0, queue_batch, &b, 1, &us);
  batch_free(&b);
  if (rc != 0) { /* g->err: the failed call */
    snprintf(m->batch_note, sizeof m->batch_note, "%s", g->err);
    g->err[0] = '\0';
    return 0;
  }
  m->ce_batch_setup_us = (us - m->ce_setup_us) / (n - 1);
  return 0;
}

static int measure_calls(gpu *g, measured *m) {
  const unsigned n = g->sz->calls;
  const copy_job tiny = {COPY_H2D, TINY_COPY};
  const kernel_job empty = {{(const uint8_t *)(uintptr_t)g->host_dev,
                             (uint8_t *)(uintptr_t)g->d0,
                             (const ibp_gather_range *)(uintptr_t)g->ranges, 0},
                            1};
  double us;
  /* warm-up: the kernel's first launch may load it */
  TRY(gpu_time(g, queue_kernel, &empty, 1, &us));
  TRY(gpu_time(g, queue_copy, &tiny, 1, &us));
  /* host: n + 2 event records are n + 1 gaps */
  TRY(median_us(g, 1, queue_record, NULL, n, &us));
  m->driver_call_us = us / (n + 1);
  TRY(median_us(g, 1, queue_copy, &tiny, n, &us));
  m->driver_copy_call_us = (us - m->driver_call_us) / n;
  TRY(median_us(g, 1, queue_kernel, &empty, n, &us));
  m->driver_launch_call_us = (us - m->driver_call_us) / n;
  /* GPU: back to back */
  TRY(median_us(g, 0, queue_copy, &tiny, n, &us));
  m->ce_setup_us = us / n; /* the 4 bytes' own time comes off below */
  TRY(median_us(g, 0, queue_kernel, &empty, n, &us));
  m->launch_latency_us = us / n;
  return measure_batch(g, m);
}

static int measure_copies(gpu *g, measured *m) {
  const size_t b = g->sz->copy;
  const copy_job h2d = {COPY_H2D, b}, d2h = {COPY_D2H, b}, d2d = {COPY_D2D, b};
  double us;
  TRY(median_us(g, 0, queue_copy, &h2d, 1, &us));
  m->ce_h2d_gbps = (double)b / (us - m->ce_setup_us) / 1e3;
  TRY(median_us(g, 0, queue_copy, &d2h, 1, &us));
  m->ce_d2h_gbps = (double)b / (us - m->ce_setup_us) / 1e3;
  TRY(median_us(g, 0, queue_copy, &d2d, 1, &us));
  m->dram_gbps = 2.0 * (double)b / (us - m->ce_setup_us) / 1e3;
  m->ce_setup_us -= TINY_COPY / (m->ce_h2d_gbps * 1e3);
  if (m->batch_note[0])
    m->ce_batch_setup_us = m->ce_setup_us;
  else
    m->ce_batch_setup_us -= TINY_COPY / (m->ce_h2d_gbps * 1e3);
  return 0;
}

/* One block: a kernel reading one sector takes latency + round trip (+ the
 * sector at one SM's rate); the same with many sectors gives that rate
 * from the difference.  All SMs: the whole GPU's rate. */
static int measure_sm_reads(gpu *g, measured *m) {
  const sizes *sz = g->sz;
  kernel_job one;
  double tiny, one_rate, all_rate;
  TRY(upload_ranges(g, 1, 1, SECTOR, &one, 1));
  TRY(median_us(g, 0, queue_kernel, &one, sz->calls, &tiny));
  tiny /= sz->calls;
  TRY(read_rate(g, sz->dense_one, sz->sparse_one, 1, tiny, SECTOR, &one_rate));
  double rtt = tiny - m->launch_latency_us - SECTOR / one_rate;
  if (!(one_rate > 0) || !(rtt > 0)) {
    snprintf(g->err, g->errlen,
             "SM reads: a one-block kernel over one sector took %.3f us, no "
             "more than the launch latency (%.3f us)",
             tiny, m->launch_latency_us);
    return -1;
  }
  unsigned grid = BLOCKS_PER_SM * g->sms;
  TRY(read_rate(g, sz->dense_all, sz->sparse_all, grid,
                m->launch_latency_us + rtt, 0, &all_rate));
  m->sm_read_rtt_us = rtt;
  m->sm_inflight_bytes = one_rate * rtt;
  m->sm_h2d_gbps = all_rate / 1e3;
  return 0;
}

/* ---- the decompress kernel's output rate --------------------------------- */

/* Tensor sizes timed: a weight or KV block, a CNN filter, an embedding row
 * (the fit of decode_gbps_per_sm and decode_tensor_us spans them). */
static const uint32_t decode_tensor_bytes[] = {4096, 1024, 400};

typedef struct decode_job {
  ibp_decompress_args args;
  ibp_kernel_plan plan;
} decode_job;

/* A case's device memory: its streams as one staged window (as the staged
 * path decodes them: no host reads), its metadata, the output. */
typedef struct decode_mem {
  CUdeviceptr packed, plan, flags, offsets, lengths, out;
  unsigned plan_stages;
  uint8_t *original; /* pinned, mapped: where raw tensors are read */
  CUdeviceptr original_dev;
  uint8_t *shadow; /* pinned, mapped: the streams, as zero-copy reads them */
  CUdeviceptr shadow_dev;
} decode_mem;

/* How a timing launches the decode: the streams in device memory (a
 * staged window) or host memory (zero-copy); blocks of up to `warps` warps
 * on the grid planned for the whole GPU, or cut to max_grid blocks as the
 * staged path cuts it (IBP_MAX_SMS: one block per SM). */
typedef struct decode_way {
  int host;
  unsigned warps;
  unsigned max_grid; /* 0: the plan's */
} decode_way;

#define STAGED_MAX_SMS 32u /* IBP_MAX_SMS's default (docs/CONFIG.md) */

static int queue_decode(gpu *g, const void *job) {
  const decode_job *k = job;
  void *params[] = {(void *)&k->args};
  CU(g, cuLaunchKernel(g->decompress, k->plan.grid, 1, 1, k->plan.block, 1, 1,
                       k->plan.dynamic_shared, g->work, params, NULL));
  return 0;
}

/* `bytes` at host into a new device buffer of `alloc` bytes, zero after. */
static int upload_padded(gpu *g, CUdeviceptr *d, const void *host, size_t bytes,
                         size_t alloc) {
  uint8_t *tmp = calloc(1, alloc);
  if (tmp == NULL) {
    snprintf(g->err, g->errlen, "out of memory");
    return -1;
  }
  memcpy(tmp, host, bytes);
  CUresult r = g->cu.cuMemAlloc(d, alloc);
  if (r == CUDA_SUCCESS)
    r = g->cu.cuMemcpyHtoD(*d, tmp, alloc);
  free(tmp);
  return r == CUDA_SUCCESS ? 0 : fail_cuda(g, r, "uploading the decode case");
}

/* The decode plan of the case's Mask/Bitval (docs/ARCHITECTURE.md "The
 * decode plan"), as libibp uploads it. */
static int upload_plan(gpu *g, const ibp_params *p, decode_mem *d) {
  const uint32_t R = p->tensor_bytes, c = p->chunk_bytes;
  d->plan_stages = ibp_kernels_plan_stages(p->mask, R, 1, R, c);
  const size_t bytes = ibp_kernels_plan_bytes(R, 1, d->plan_stages);
  uint32_t *plan = malloc(bytes);
  if (plan == NULL || ibp_kernels_decode_plan(p->mask, p->bitval, R, 1, R, c,
                                              d->plan_stages, plan) != 0) {
    free(plan);
    snprintf(g->err, g->errlen, "building the decode plan");
    return -1;
  }
  int rc = upload_padded(g, &d->plan, plan, bytes, bytes);
  free(plan);
  return rc;
}

static int decode_upload(gpu *g, const decode_case *c, decode_mem *d) {
  const size_t R = c->tensor_bytes, n = c->tensors;
  const size_t packed = c->offsets[n];
  TRY(upload_padded(g, &d->packed, c->packed, packed,
                    (packed + IBP_STAGED_PAD + 127) & ~(size_t)127));
  TRY(upload_plan(g, &c->params, d));
  TRY(upload_padded(g, &d->flags, c->flags, c->flag_bytes, c->flag_bytes));
  TRY(upload_padded(g, &d->offsets, c->offsets, (n + 1) * sizeof(uint64_t),
                    (n + 1) * sizeof(uint64_t)));
  TRY(upload_padded(g, &d->lengths, c->lengths, n * sizeof(uint32_t),
                    (n + 1) * sizeof(uint32_t)));
  CU(g, cuMemAlloc(&d->out, n * R));
  CU(g, cuMemHostAlloc((void **)&d->original, n * R,
                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memcpy(d->original, c->original, n * R);
  CU(g, cuMemHostGetDevicePointer(&d->original_dev, d->original, 0));
  CU(g, cuMemHostAlloc((void **)&d->shadow, packed + IBP_STAGED_PAD,
                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  memcpy(d->shadow, c->packed, packed);
  CU(g, cuMemHostGetDevicePointer(&d->shadow_dev, d->shadow, 0));
  return 0;
}

static void decode_mem_free(gpu *g, decode_mem *d) {
  const CUdeviceptr mem[] = {d->packed,  d->plan,    d->flags,
                             d->offsets, d->lengths, d->out};
  for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
    if (mem[i])
      g->cu.cuMemFree(mem[i]);
  if (d->original)
    g->cu.cuMemFreeHost(d->original);
  if (d->shadow)
    g->cu.cuMemFreeHost(d->shadow);
}

#define DEV(p) ((const void *)(uintptr_t)(p))

/* Times the whole case decoded on the whole GPU, after checking that the
 * kernel gives back the original bytes. */
static int decode_time(gpu *g, const measured *m, const decode_case *c,
                       decode_mem *d, decode_way way, double *us_out,
                       unsigned *used) {
  const uint64_t bytes = c->tensors * c->tensor_bytes;
  decode_job k = {.args = {
                      .packed = DEV(way.host ? d->shadow_dev : d->packed),
                      .original = DEV(d->original_dev),
                      .offsets = DEV(d->offsets),
                      .lengths = DEV(d->lengths),
                      .flags = DEV(d->flags),
                      .plan = DEV(d->plan),
                      .plan_stages = d->plan_stages,
                      .dst = (uint8_t *)(uintptr_t)d->out,
                      .tensors = c->tensors,
                      .length = bytes,
                      .tensor_bytes = c->tensor_bytes,
                      .chunk_bytes = c->params.chunk_bytes,
                      .staged = way.host ? NULL : DEV(d->packed),
                      .staged_lo = 0,
                      .staged_hi = c->offsets[c->tensors],
                  }};
  if (ibp_kernels_plan_decompress_warps(&k.args, g->max_shared, g->sms,
                                        way.warps, &k.plan) != 0) {
    snprintf(g->err, g->errlen,
             "no launch plan for the decode of %u-byte "
             "tensors",
             c->tensor_bytes);
    return -1;
  }
  if (way.max_grid && k.plan.grid > way.max_grid)
    k.plan.grid = way.max_grid;
  if (k.plan.dynamic_shared > 48 * KIB)
    CU(g, cuFuncSetAttribute(g->decompress,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             (int)k.plan.dynamic_shared));
  double us;
  TRY(gpu_time(g, queue_decode, &k, 1, &us)); /* warm-up */
  uint8_t *back = d->original; /* the original is in c: reuse the buffer */
  memset(back, 0xa5, bytes);
  CU(g, cuMemcpyDtoHAsync(back, d->out, bytes, g->work));
  CU(g, cuStreamSynchronize(g->work));
  int same = memcmp(back, c->original, bytes) == 0;
  memcpy(d->original, c->original, bytes);
  if (!same) {
    snprintf(g->err, g->errlen,
             "the decompress kernel's output differs from "
             "the original (%u-byte tensors): this GPU must not be used with "
             "libibp",
             c->tensor_bytes);
    return -1;
  }
  TRY(median_us(g, 0, queue_decode, &k, 1, &us));
  /* the SMs the model counts it as (its warps over IBP_STAGED_WARPS) */
  *used = ibp_kernels_decode_sms(k.plan.grid, k.plan.block, g->sms);
  if (!(us > m->launch_latency_us)) {
    snprintf(g->err, g->errlen,
             "decode: a kernel took %.3f us, no more "
             "than the launch latency (%.3f us)",
             us, m->launch_latency_us);
    return -1;
  }
  *us_out = us;
  return 0;
}

/* Appends to the decode note (what the profile's header says). */
static void decode_note(measured *m, const char *fmt, double a, double b) {
  size_t used = strlen(m->decode_note);
  snprintf(m->decode_note + used, sizeof m->decode_note - used, fmt, a, b);
}

/* Host bytes a zero-copy decode of the whole case reads: the streams and
 * the tensors stored raw. */
static double case_host_bytes(const decode_case *c) {
  double bytes = (double)c->offsets[c->tensors];
  for (uint64_t i = 0; i < c->tensors; i++)
    if (c->lengths[i] == 0)
      bytes += c->tensor_bytes;
  return bytes;
}

#define DECODE_SIZES (sizeof decode_tensor_bytes / sizeof(uint32_t))

/* Least squares of one SM's time per tensor, T = t0 + R / d (us, bytes,
 * GB/s = bytes per ns), over the tensor sizes R; t0 >= 0 (a line through
 * zero when the fit gives less). */
static void fit_decode(const double *T, measured *m) {
  double sr = 0, st = 0, srr = 0, srt = 0;
  const double k = DECODE_SIZES;
  for (size_t i = 0; i < DECODE_SIZES; i++) {
    double R = decode_tensor_bytes[i];
    sr += R, st += T[i], srr += R * R, srt += R * T[i];
  }
  double slope = (k * srt - sr * st) / (k * srr - sr * sr); /* us per byte */
  double t0 = (st - slope * sr) / k;
  if (!(slope > 0) || t0 < 0) {
    slope = srt / srr;
    t0 = 0;
  }
  m->decode_gbps_per_sm = 1.0 / (slope * 1e3);
  m->decode_tensor_us = t0;
}

/* decode_gbps_per_sm and decode_tensor_us: the streams in device memory,
 * launched as the staged path launches (IBP_STAGED_WARPS warps per block,
 * at most IBP_MAX_SMS's default blocks, one per SM), one SM's time per
 * tensor at each tensor size, fitted to a time per byte and one per tensor.
 * decode_h2d_gbps, from the first size: the whole GPU decoding with its
 * streams in host memory (zero-copy), host bytes over the time beyond
 * latency and round trip -- where the same decode from device memory takes
 * under 90 % of that time, so the reads are what it waits for; else the
 * reads are hidden and sm_h2d_gbps stands.  The note gives each size's
 * rate and both whole-GPU rates (docs/PROFILE.md, "Calibration"). */
static int measure_decode(gpu *g, measured *m) {
  static const decode_way staged = {0, IBP_STAGED_WARPS, STAGED_MAX_SMS};
  static const decode_way whole[] = {{0, 4, 0}, {1, 4, 0}};
  const double lat = m->launch_latency_us;
  double T[DECODE_SIZES];
  m->decode_h2d_gbps = m->sm_h2d_gbps;
  m->decode_note[0] = '\0';
  for (size_t i = 0; i < DECODE_SIZES; i++) {
    decode_case c;
    decode_mem d = {0};
    double us = 0, w_us[2] = {0, 0};
    unsigned sms = 0, w_sms[2] = {0, 0};
    if (decode_case_build(&c, g->sz->decode, decode_tensor_bytes[i], g->err,
                          g->errlen) != 0)
      return -1;
    const double out = (double)(c.tensors * c.tensor_bytes);
    const double host = case_host_bytes(&c), tensors = (double)c.tensors;
    int rc = decode_upload(g, &c, &d) ||
             decode_time(g, m, &c, &d, staged, &us, &sms);
    for (size_t x = 0; rc == 0 && i == 0 && x < 2; x++)
      rc = decode_time(g, m, &c, &d, whole[x], &w_us[x], &w_sms[x]);
    g->cu.cuStreamSynchronize(g->work);
    decode_mem_free(g, &d);
    decode_case_free(&c);
    if (rc != 0)
      return -1;
    T[i] = (us - lat) * sms / tensors;
    decode_note(m, i ? ", %g B %.3g" : "%g B %.3g", decode_tensor_bytes[i],
                out / ((us - lat) * 1e3) / sms);
    if (i != 0)
      continue;
    double reads_us = w_us[1] - lat - m->sm_read_rtt_us;
    if (reads_us > 0 && w_us[0] - lat < 0.9 * reads_us &&
        host / (reads_us * 1e3) < m->sm_h2d_gbps)
      m->decode_h2d_gbps = host / (reads_us * 1e3);
    decode_note(m, " (whole GPU: %.4g GB/s; zero-copy %.4g GB/s)",
                out / ((w_us[0] - lat) * 1e3), out / ((w_us[1] - lat) * 1e3));
  }
  fit_decode(T, m);
  return 0;
}

/* ---- the result ---------------------------------------------------------- */

typedef struct param_info {
  const char *key, *unit;
  double lo, hi;
  size_t offset;
} param_info;

static const param_info params[CALIBRATE_PARAMS] = {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what)                             \
  {#key, unit, lo, hi, offsetof(ibp_profile, key)},
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
};

/* v to 4 significant digits (no measurement here is finer), as the double
 * nearest that decimal, so the profile shows "25.5" rather than
 * "25.500001372". */
static double four_digits(double v) {
  if (v == 0 || !isfinite(v))
    return v;
  int e = (int)floor(log10(fabs(v))) - 3;
  if (e < -22 || e > 22) /* 10^|e| no longer exact: leave it */
    return v;
  double scale = pow(10, abs(e)); /* exact */
  return e < 0 ? round(v * scale) / scale : round(v / scale) * scale;
}

/* Stores parameter i's measured value: whole where its unit asks, else to
 * 4 significant digits; within its range (a value outside is brought to the
 * nearest end, with a note). */
static int store(calibrate_result *out, int i, double v, char *err,
                 size_t errlen) {
  const param_info *p = &params[i];
  if (!isfinite(v)) {
    snprintf(err, errlen, "%s: the timings give no value (%g)", p->key, v);
    return -1;
  }
  int whole = strcmp(p->unit, "B") == 0 || p->unit[0] == '\0';
  v = whole ? round(v) : four_digits(v);
  double kept = v < p->lo ? p->lo : v > p->hi ? p->hi : v;
  if (kept != v) {
    size_t used = strlen(out->notes);
    snprintf(out->notes + used, sizeof out->notes - used,
             "%s: measured %g, outside its range: %g written\n", p->key, v,
             kept);
  }
  memcpy((char *)&out->values + p->offset, &kept, sizeof kept);
  out->measured[i] = 1;
  return 0;
}

static int store_all(const measured *m, unsigned sms, calibrate_result *out,
                     char *err, size_t errlen) {
  const struct {
    int i;
    double v;
  } rows[] = {
      {CALIBRATE_ce_h2d_gbps, m->ce_h2d_gbps},
      {CALIBRATE_ce_d2h_gbps, m->ce_d2h_gbps},
      {CALIBRATE_ce_setup_us, m->ce_setup_us},
      {CALIBRATE_ce_batch_setup_us, m->ce_batch_setup_us},
      {CALIBRATE_driver_copy_call_us, m->driver_copy_call_us},
      {CALIBRATE_driver_launch_call_us, m->driver_launch_call_us},
      {CALIBRATE_driver_call_us, m->driver_call_us},
      {CALIBRATE_launch_latency_us, m->launch_latency_us},
      {CALIBRATE_sm_h2d_gbps, m->sm_h2d_gbps},
      {CALIBRATE_sm_read_rtt_us, m->sm_read_rtt_us},
      {CALIBRATE_sm_inflight_bytes, m->sm_inflight_bytes},
      {CALIBRATE_dram_gbps, m->dram_gbps},
      {CALIBRATE_decode_gbps_per_sm, m->decode_gbps_per_sm},
      {CALIBRATE_decode_tensor_us, m->decode_tensor_us},
      {CALIBRATE_decode_h2d_gbps, m->decode_h2d_gbps},
      {CALIBRATE_sms, (double)sms},
  };
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
    TRY(store(out, rows[k].i, rows[k].v, err, errlen));
  size_t used = strlen(out->notes);
  if (m->batch_note[0])
    snprintf(out->notes + used, sizeof out->notes - used,
             "ce_batch_setup_us: batch entries not measured (%s): "
             "ce_setup_us's value written\n",
             m->batch_note);
  used = strlen(out->notes);
  snprintf(out->notes + used, sizeof out->notes - used,
           "decode: GB/s per SM by tensor bytes (decode_gbps_per_sm and "
           "decode_tensor_us fitted to them) "
           "%s\n",
           m->decode_note);
  return 0;
}

/* One line on stderr as each step starts: a full run takes minutes (on the
 * simulated GPU, whose kernels run on the CPU emulator, over two). */
static int step(const gpu *g, unsigned i, const char *what) {
  fprintf(stderr, "ibp calibrate: [%u/4] %s%s\n", i, what,
          i == 1 && g->cu.simulated
              ? " (simulated GPU: its kernels run on the CPU, minutes)"
              : "");
  return 0;
}

/* The caller's look at the device, before anything is measured. */
static int call_opened(gpu *g, calibrate_opened_fn opened, void *ctx,
                       const calibrate_result *out) {
  return opened ? opened(out->device_name, ctx, g->err, g->errlen) : 0;
}

int calibrate_measure(int device, int quick, calibrate_opened_fn opened,
                      void *ctx, calibrate_result *out, char *err,
                      size_t errlen) {
  gpu g;
  measured m = {0};
  memset(&g, 0, sizeof g);
  memset(out, 0, sizeof *out);
  atomic_init(&g.gate, 1);
  g.sz = quick ? &quick_sizes : &full_sizes;
  g.err = err;
  g.errlen = errlen;
  if (cuda_api_open(&g.cu, err, errlen) != 0)
    return -1;
  out->simulated = g.cu.simulated;
  int rc = open_device(&g, device, out) || call_opened(&g, opened, ctx, out) ||
                   load_kernels(&g) || allocate(&g) ||
                   step(&g, 1, "the driver's calls") || measure_calls(&g, &m) ||
                   step(&g, 2, "the copy engine's copies") ||
                   measure_copies(&g, &m) ||
                   step(&g, 3, "SM reads of host memory") ||
                   measure_sm_reads(&g, &m) ||
                   step(&g, 4, "the decompress kernel") ||
                   measure_decode(&g, &m)
               ? -1
               : 0;
  release(&g);
  return rc == 0 ? store_all(&m, g.sms, out, err, errlen) : -1;
}
