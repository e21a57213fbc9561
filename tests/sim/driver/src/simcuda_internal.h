/*
 * Simulated libcuda.so.1: what the driver's files share (prefix scu_, hidden
 * by the version script; only cu* and simt_* leave the library).
 *
 * Objects.  Contexts, streams, events, libraries, kernels, modules,
 * functions, the memory pool, graphs and graph execs are reference-counted
 * objects (scu_obj) reached from the API through opaque handles: a handle is
 * a number (0x5c.. | type << 48 | id) looked up in one table, never a
 * pointer, so a stale or made-up handle is CUDA_ERROR_INVALID_HANDLE and ids
 * are never reused.  An object owned by a context (its streams, events,
 * modules) is destroyed with that context.
 *
 * Streams.  Every stream has a FIFO of operations (scu_op) executed in order
 * by the stream's own worker thread, started at its first operation.  An
 * operation may carry dependencies (stream, sequence number): the worker
 * waits until those streams have completed that far.  Legacy-default-stream
 * semantics, cuStreamWaitEvent and events are all expressed with these.
 * A failed operation (a kernel that trapped) leaves a sticky error on its
 * stream and its context; later operations on that stream are skipped.
 *
 * Locks, always taken in this order, never held while waiting for a stream:
 *   event->m  ->  g_lock (scu_handle.c: handle table, context list)
 *             ->  ctx->sched (stream list, enqueue order)  ->  stream->m
 *   the memory tables' rwlock is a leaf.
 * Worker threads take no lock of another stream except to wait for a
 * dependency (stream->m of that stream alone).
 */
#ifndef SIMCUDA_INTERNAL_H
#define SIMCUDA_INTERNAL_H

/* Every ABI's declaration, under its exported name. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "simt.h"

#define SCU_HIDDEN __attribute__((visibility("hidden")))
#define SCU_PRINTF(f, a) __attribute__((format(printf, f, a)))

#define SCU_DRIVER_VERSION 13000
#define SCU_DEVICE_NAME "libibp simulated GPU (sm_90)"
#define SCU_PCI_DOMAIN 0
#define SCU_PCI_BUS 0x5a
#define SCU_PCI_DEVICE 0
#define SCU_MAX_DYN_SHARED_DEFAULT (48u * 1024u)
#define SCU_MAX_SHARED_OPTIN (227u * 1024u)
#define SCU_PRIORITY_LEAST 0
#define SCU_PRIORITY_GREATEST (-5)

/* ---- logging, tracing, fault injection (simcuda_log.c) ------------------ */

/* One line on stderr, prefixed "[simcuda] ". */
SCU_HIDDEN void scu_log(const char *fmt, ...) SCU_PRINTF(1, 2);
/* The same, only when SIMCUDA_LOG is set. */
SCU_HIDDEN void scu_trace(const char *fmt, ...) SCU_PRINTF(1, 2);
SCU_HIDDEN extern int scu_trace_on;

/* Every exported entry point starts with one of these.  `base` is the name
 * callers look up ("cuMemcpyHtoDAsync"); fault injection counts per base, so
 * all variants of a name share one count.  scu_enter returns nonzero (the
 * injected error, CUDA_ERROR_NOT_PERMITTED from a stream worker -- a host
 * callback, need_init only --, CUDA_ERROR_NOT_INITIALIZED after fork, or
 * before cuInit when need_init) and then the entry returns it untouched. */
SCU_HIDDEN CUresult scu_enter(const char *base, const char *sym,
                              bool need_init);
SCU_HIDDEN CUresult scu_leave(const char *sym, CUresult r);

#define SCU_API_ENTER(base, need_init)                                         \
  do {                                                                         \
    CUresult scu__r = scu_enter(base, __func__, need_init);                    \
    if (scu__r != CUDA_SUCCESS)                                                \
      return scu__r;                                                           \
  } while (0)
/* The entry point requires cuInit. */
#define SCU_API(base) SCU_API_ENTER(base, true)
/* The entry point works before cuInit (versions, error strings, lookups). */
#define SCU_API_NOINIT(base) SCU_API_ENTER(base, false)
#define SCU_RETURN(expr) return scu_leave(__func__, (expr))

SCU_HIDDEN const char *scu_error_name(CUresult r);

/* Parses a size with an optional K/M/G suffix; 0 on error. */
SCU_HIDDEN uint64_t scu_parse_size(const char *s);

/* ---- initialization (simcuda_device.c) ----------------------------------- */

SCU_HIDDEN bool scu_initialized(void);
SCU_HIDDEN bool scu_forked(void);
/* 1 on a stream's worker thread (where API calls are not permitted). */
SCU_HIDDEN extern _Thread_local int scu_tls_worker;
SCU_HIDDEN CUresult scu_check_device(CUdevice dev);
/* Devices exposed: SIMCUDA_DEVICES (1 .. SCU_MAX_DEVICES, default 1), read
 * at cuInit.  They share the one address space (unified addressing); each
 * has its own contexts, streams and allocations. */
#define SCU_MAX_DEVICES 8
SCU_HIDDEN int scu_device_count(void);
SCU_HIDDEN uint64_t scu_now_ns(void);

/* ---- handles (simcuda_handle.c) ------------------------------------------ */

typedef enum scu_type {
  SCU_T_CTX = 1,
  SCU_T_STREAM,
  SCU_T_EVENT,
  SCU_T_LIBRARY,
  SCU_T_KERNEL, /* a CUkernel; the same object answers as a CUfunction */
  SCU_T_MODULE,
  SCU_T_FUNC,
  SCU_T_POOL,
  SCU_T_GRAPH,
  SCU_T_GRAPHEXEC,
  SCU_T_COUNT
} scu_type;
#define SCU_MASK(t) (1u << (t))

typedef struct scu_ctx scu_ctx;
typedef struct scu_obj scu_obj;

struct scu_obj {
  scu_type type;
  uint64_t id;
  atomic_int refs;
  void (*destroy)(scu_obj *); /* frees the object; called at refs == 0 */
  /* Ownership by a context (NULL: none); the links belong to g_lock. */
  scu_ctx *owner;
  scu_obj *onext, *oprev;
  bool published;
  void *hh_next; /* the handle table's chain */
};

/* refs = 1 (the caller's). */
SCU_HIDDEN void scu_obj_init(scu_obj *o, scu_type t,
                             void (*destroy)(scu_obj *));
/* Enters o in the handle table (taking a reference) and, with an owner,
 * in the owner's list.  Returns the handle. */
SCU_HIDDEN void *scu_obj_publish(scu_obj *o, scu_ctx *owner);
/* The object behind a handle if its type is in `mask`, with a reference;
 * NULL otherwise. */
SCU_HIDDEN scu_obj *scu_obj_get(const void *handle, unsigned mask);
/* Removes o from the table (dropping the table's reference) unless it is
 * already gone; returns true when this call removed it. */
SCU_HIDDEN bool scu_obj_unpublish(scu_obj *o);
/* scu_obj_get + scu_obj_unpublish under one lock (destroy entry points):
 * the object with the caller's reference, or NULL. */
SCU_HIDDEN scu_obj *scu_obj_take(const void *handle, unsigned mask);
SCU_HIDDEN void scu_obj_ref(scu_obj *o);
SCU_HIDDEN void scu_obj_put(scu_obj *o);
SCU_HIDDEN void *scu_obj_handle(const scu_obj *o);
/* Unpublishes every object `owner` owns whose type is in mask; calls
 * `each` (may be NULL) on each with a reference held, before dropping it. */
SCU_HIDDEN void scu_obj_release_owned(scu_ctx *owner, unsigned mask,
                                      void (*each)(scu_obj *));
/* The global lock (handle table, context list). */
SCU_HIDDEN void scu_glock(void);
SCU_HIDDEN void scu_gunlock(void);

/* ---- contexts (simcuda_context.c) ---------------------------------------- */

typedef struct scu_stream scu_stream;

struct scu_ctx {
  scu_obj hdr;
  bool primary;
  CUdevice device;    /* its device, 0 .. scu_device_count() - 1 */
  unsigned peers;     /* devices whose contexts it may access; g_lock */
  atomic_bool active; /* taking work (primary: retained since last reset) */
  unsigned retains;   /* primary only; g_lock */
  unsigned flags;
  uint64_t uid;      /* cuCtxGetId */
  scu_ctx *next_ctx; /* the context list; g_lock */
  scu_obj *owned;    /* objects this context owns; g_lock */
  /* Stream list and enqueue order. */
  pthread_mutex_t sched;
  scu_stream *streams; /* every stream of the context, legacy included */
  scu_stream *legacy;
  atomic_int captures; /* streams of this context capturing now */
  /* Sticky error (first failed operation); reset by context reset. */
  _Atomic CUresult sticky;
  size_t limits[16];
  CUfunc_cache cache_config;
};

/* The current context with a reference: CUDA_ERROR_INVALID_CONTEXT when
 * the thread has none, CUDA_ERROR_CONTEXT_IS_DESTROYED when it was. */
SCU_HIDDEN CUresult scu_ctx_current(scu_ctx **out);
/* The context behind a handle (NULL handle: the current context). */
SCU_HIDDEN CUresult scu_ctx_resolve(CUcontext h, scu_ctx **out);
SCU_HIDDEN void scu_ctx_put(scu_ctx *c);
SCU_HIDDEN void scu_ctx_set_sticky(scu_ctx *c, CUresult r);
/* Waits for all work of every context; CUDA_SUCCESS or nothing better to
 * report (sticky errors are reported by the synchronize calls). */
SCU_HIDDEN void scu_sync_all(void);

/* ---- memory (simcuda_memory.c) ------------------------------------------ */

typedef enum scu_memkind {
  SCU_MEM_PAGEABLE = 0, /* ordinary host memory (checked to be mapped) */
  SCU_MEM_DEVICE,       /* a device (or managed) allocation */
  SCU_MEM_PINNED,       /* cuMemHostAlloc'd or cuMemHostRegister'ed */
} scu_memkind;

/* A checked operand of a copy or set: the memory kind and the address the
 * driver accesses it through (pinned memory from cuMemHostAlloc is reached
 * through a second, always-writable mapping of the same pages, as DMA
 * would, so an application's mprotect does not affect transfers). */
typedef struct scu_span {
  scu_memkind kind;
  char *access;
} scu_span;

/* Checks [p, p+n) for a transfer: a range that touches the simulated device
 * address space must lie inside one live allocation; host memory must be
 * mapped.  `device_side`: the operand must be device-accessible (a device
 * allocation or pinned host memory).  CUDA_ERROR_INVALID_VALUE otherwise. */
SCU_HIDDEN CUresult scu_mem_check(uintptr_t p, size_t n, bool device_side,
                                  scu_span *out);
SCU_HIDDEN void scu_mem_release_ctx(scu_ctx *c);
/* cuMemFreeAsync's operation: frees without unmapping (the pages stay
 * readable until the next full synchronization). */
SCU_HIDDEN void scu_mem_free_deferred(uintptr_t base);
SCU_HIDDEN void scu_mem_trim_deferred(void);
SCU_HIDDEN CUresult scu_mem_alloc_device(scu_ctx *c, size_t bytes,
                                         unsigned kind_flags, CUdeviceptr *out);
#define SCU_ALLOC_MANAGED 1u
#define SCU_ALLOC_ASYNC 2u
SCU_HIDDEN size_t scu_mem_total(void);

/* ---- copies and sets (simcuda_copy.c) ---------------------------------- */

typedef struct scu_op scu_op;
/* The operation of a graph's memcpy or memset node, its operands checked
 * (pinned or device memory only); *out NULL on error. */
SCU_HIDDEN CUresult scu_copy3d_op(const CUDA_MEMCPY3D *p, scu_op **out);
SCU_HIDDEN CUresult scu_memset_op(const CUDA_MEMSET_NODE_PARAMS *p,
                                  scu_op **out);

/* ---- operations and streams (simcuda_stream.c) ------------------------- */

typedef enum scu_opkind {
  SCU_OP_NOP,
  SCU_OP_COPY,   /* memmove */
  SCU_OP_COPY2D, /* rows, in one or more slices (3D) */
  SCU_OP_SET,    /* 1, 2 or 4-byte pattern, 2D */
  SCU_OP_LAUNCH,
  SCU_OP_HOSTFN,
  SCU_OP_CALLBACK,
  SCU_OP_EVENT,
  SCU_OP_FREE,
} scu_opkind;

typedef struct scu_dep {
  scu_stream *s; /* referenced */
  uint64_t seq;
} scu_dep;

typedef struct scu_event scu_event;

/* A user range an operation touches, re-checked when a graph replays it. */
typedef struct scu_range {
  uintptr_t p;
  size_t bytes;
  bool device_side;
  char *access; /* what scu_mem_check answered */
} scu_range;

typedef struct scu_op scu_op;
struct scu_op {
  scu_op *next;
  scu_opkind kind;
  uint64_t seq;
  bool is_inline; /* host-synchronous: run by the caller, not the worker */
  /* The virtual clock (simcuda_vclock.c): the submitting thread's time
   * once the call's cost is charged, and which PCIe direction a copy
   * crosses (SCU_LINK_NONE: none). */
  double vt_submit;
  uint8_t link;
  /* an entry after the first of one batch call (cuMemcpyBatchAsync): the
   * call was charged with the first; its copy engine sets it up at
   * ce_batch_setup_us */
  bool batch_entry;
  uint64_t turn; /* its turn on the link (simcuda_turns.c), 0: none */
  scu_dep *deps;
  unsigned ndeps, capdeps;
  /* Owned buffer freed with the op (kernel parameters). */
  void *owned;
  size_t owned_bytes;
  scu_range ranges[2];
  unsigned nranges;
  union {
    struct {
      char *dst;
      const char *src;
      size_t bytes;
    } copy;
    struct {
      char *dst;
      const char *src;
      size_t dpitch, spitch, width, height;
      size_t depth, dslice, sslice; /* slices of rows; depth 1 for 2D */
    } copy2d;
    struct {
      char *dst;
      size_t pitch, width, height; /* width in elements */
      uint64_t value;              /* the low `elem` bytes */
      unsigned elem;               /* 1, 2, 4 or 8 */
    } set;
    struct {
      simt_launch l;
      const char *name;
      CUfunction func; /* the handle it was launched with */
      int decodes;     /* a decompress kernel (simt_kernel.units) */
      uint64_t units;  /* the tensors it decodes */
      /* what the kernel writes, and of what it decodes what goes through
       * the exponent stage: the kernel's simt_kernel.out_bytes and
       * .stage_bytes, asked when it runs -- the job list or ranges they
       * read are device memory that a copy queued before it fills */
      uint64_t (*out_bytes)(const void *args);
      uint64_t (*stage_bytes)(const void *args, uint64_t *units);
      simt_pcie pcie; /* its host reads, filled when it ran */
    } launch;
    struct {
      CUhostFn fn;
      void *data;
    } hostfn;
    struct {
      CUstreamCallback fn;
      void *data;
      CUstream handle;
    } cb;
    struct {
      scu_event *ev; /* referenced */
      uint64_t gen;
    } event;
    struct {
      uintptr_t base;
    } free;
  } u;
};

#define SCU_LINK_NONE 0xff

/* The virtual end times of a stream's last operations, by sequence number
 * (simcuda_vclock.c). */
#define SCU_VT_RING 64
typedef struct scu_vt {
  double end; /* of the last completed operation */
  struct {
    uint64_t seq;
    double end;
  } ring[SCU_VT_RING];
} scu_vt;

typedef enum scu_streamkind {
  SCU_STREAM_USER,
  SCU_STREAM_LEGACY,
  SCU_STREAM_PER_THREAD,
} scu_streamkind;

typedef struct scu_graph scu_graph;

struct scu_stream {
  scu_obj hdr;
  scu_ctx *ctx; /* referenced */
  scu_streamkind kind;
  unsigned flags;
  int priority;
  uint64_t uid;
  scu_stream *next_in_ctx, *prev_in_ctx; /* ctx->sched */
  /* Everything below belongs to m. */
  pthread_mutex_t m;
  pthread_cond_t work_cv, done_cv;
  scu_op *head, *tail;
  uint64_t submitted, completed;
  uint64_t waited; /* the furthest any host thread waited for it to reach */
  scu_vt vt;
  CUresult error;
  uint64_t error_seq;
  bool worker_started, closing, worker_done;
  /* Capture (cuStreamBeginCapture): state and the graph being built. */
  CUstreamCaptureStatus cap_status;
  CUstreamCaptureMode cap_mode;
  uint64_t cap_id;
  uint64_t cap_thread;
  scu_graph *cap_graph;
};

/* The stream a handle names, with a reference.  NULL means the legacy
 * default stream, or the calling thread's per-thread default stream when
 * `ptds` (the _ptds/_ptsz entry points); CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD name those explicitly. */
SCU_HIDDEN CUresult scu_stream_resolve(CUstream h, bool ptds, scu_stream **out);
SCU_HIDDEN void scu_stream_put(scu_stream *s);
SCU_HIDDEN scu_op *scu_op_new(scu_opkind kind);
SCU_HIDDEN void scu_op_free(scu_op *op);
SCU_HIDDEN CUresult scu_op_add_dep(scu_op *op, scu_stream *s, uint64_t seq);
/* Queues op on s (taking ownership of op whatever the result) and returns
 * its sequence number.  Legacy-stream ordering is added here.  On a
 * capturing stream the op is appended to the capture graph instead
 * (*seq = 0).  Fails with the stream's sticky error, or a capture error. */
SCU_HIDDEN CUresult scu_stream_submit(scu_stream *s, scu_op *op, uint64_t *seq);
/* Blocks until s has completed `seq`; the stream's sticky error if it
 * arose at or before seq. */
SCU_HIDDEN CUresult scu_stream_wait(scu_stream *s, uint64_t seq);
SCU_HIDDEN bool scu_stream_is_capturing(scu_stream *s);
/* Submit, then wait for it: a host-synchronous operation (refused, and the
 * capture invalidated, on a capturing stream). */
SCU_HIDDEN CUresult scu_stream_run_sync(scu_stream *s, scu_op *op);
/* Waits for everything submitted to s so far. */
SCU_HIDDEN CUresult scu_stream_sync(scu_stream *s);
SCU_HIDDEN bool scu_stream_done(scu_stream *s, uint64_t seq, CUresult *err);
/* Lets s run its work up to `seq` (waits in real time) so that a query can
 * answer in virtual time; false when that work waits on a host thread
 * (a host function, callback or inline operation): the query then answers
 * from what has run. */
SCU_HIDDEN bool scu_stream_settle(scu_stream *s, uint64_t seq);
/* Whether a host thread waited for s to reach `seq` (a synchronisation:
 * then done for every thread, whatever its virtual time). */
SCU_HIDDEN bool scu_stream_waited(scu_stream *s, uint64_t seq);
/* Whether the work s has not run yet waits on a host thread. */
SCU_HIDDEN bool scu_stream_host_bound(scu_stream *s);
/* Legacy and per-thread default streams of a context being activated. */
SCU_HIDDEN CUresult scu_stream_create_internal(scu_ctx *c, scu_streamkind kind,
                                               unsigned flags, int priority,
                                               scu_stream **out);
/* Stops accepting work; the worker drains the queue and exits. */
SCU_HIDDEN void scu_stream_close(scu_stream *s);
/* Closes every stream of c and waits until their queues drained. */
SCU_HIDDEN void scu_ctx_close_streams(scu_ctx *c);
/* Waits for all work submitted to c so far. */
SCU_HIDDEN CUresult scu_ctx_sync(scu_ctx *c);
SCU_HIDDEN void scu_ptds_forget_thread(void);

/* ---- the virtual clock (simcuda_vclock.c) ------------------------------ */

/* Charges the submitting thread the CPU cost of queuing op (by its kind,
 * profile/profile.def) and stamps op->vt_submit. */
SCU_HIDDEN void scu_vclock_submit(scu_op *op);
/* When op may start on s: after its submission, s's previous operation and
 * its dependencies (which have completed). */
SCU_HIDDEN double scu_vclock_start(scu_stream *s, const scu_op *op);
/* When op, queued on s, started at `start` and executed, ends (copies by
 * bytes and setup on the link, kernels on the SMs of s's device and by the
 * host reads the emulator counted, host functions by their real duration
 * `host_ns`). */
SCU_HIDDEN double scu_vclock_end(const scu_stream *s, const scu_op *op,
                                 double start, double host_ns);
/* Records that s completed seq at virtual time `end` (s->m held). */
SCU_HIDDEN void scu_vclock_complete(scu_stream *s, uint64_t seq, double end);
/* The virtual end of s's operation seq, which has completed (s->m held). */
SCU_HIDDEN double scu_vclock_end_of(const scu_stream *s, uint64_t seq);

/* ---- turns on the link and the SMs (simcuda_turns.c) ------------------- */

/* op, being queued on s, takes the next turn if it may use the link or
 * the SMs. */
SCU_HIDDEN void scu_turn_take(scu_stream *s, scu_op *op);
/* Waits until every earlier turn has passed (or waits on a host thread). */
SCU_HIDDEN void scu_turn_wait(const scu_op *op);
/* op has taken the link or will not: later turns may go. */
SCU_HIDDEN void scu_turn_pass(scu_op *op);

/* ---- events (simcuda_event.c) ------------------------------------------ */

struct scu_event {
  scu_obj hdr;
  unsigned flags;
  pthread_mutex_t m;
  scu_stream *s; /* last record's stream (referenced) or NULL */
  uint64_t seq;  /* ... and its sequence number */
  uint64_t gen;  /* records so far */
  uint64_t time_gen;
  double time_ns; /* virtual */
};
/* Executes an event operation: stamps virtual time `t` (ns). */
SCU_HIDDEN void scu_event_fire(scu_event *ev, uint64_t gen, double t);
/* The virtual time of ev's last record once it ran (0 before). */
SCU_HIDDEN double scu_event_time(scu_event *ev);
SCU_HIDDEN void scu_event_put(scu_event *ev);

/* ---- modules and kernels (simcuda_module.c) ---------------------------- */

typedef struct scu_func {
  scu_obj hdr;
  const simt_kernel *k;
  char *name;
  atomic_uint max_dyn_shared;
  atomic_int carveout;
  atomic_int cache_config;
  void *parent; /* handle of the library or module it came from */
} scu_func;

SCU_HIDDEN CUresult scu_func_resolve(CUfunction f, scu_func **out);

/* ---- capture and graphs (simcuda_capture.c) ---------------------------- */

/* Called by scu_stream_submit under s->m for a capturing stream: takes op
 * into the graph. */
SCU_HIDDEN CUresult scu_capture_append(scu_stream *s, scu_op *op);
/* An API that would synchronize or allocate: CUDA_ERROR_STREAM_CAPTURE_
 * UNSUPPORTED (and the offending captures invalidated) while a capture that
 * forbids it is active.  CUDA_SUCCESS otherwise. */
SCU_HIDDEN CUresult scu_capture_check_unsafe(void);
SCU_HIDDEN void scu_capture_invalidate(scu_stream *s);
SCU_HIDDEN void scu_graph_put(scu_graph *g);
/* Copies the kernel-parameter or similar buffer of op into a new op. */
SCU_HIDDEN scu_op *scu_op_clone(const scu_op *op);
SCU_HIDDEN extern atomic_int scu_global_captures;

#endif /* SIMCUDA_INTERNAL_H */
