/*
 * What the files of libibp.so (preload/) share.  Internal: nothing here is
 * exported (the library's exports are listed in libibp.map).
 *
 * Data path (DESIGN.md section 4): the application's dlsym / cuGetProcAddress
 * lookups reach resolve.c, which hands out the hooks of hooks_copy.c and
 * hooks_pinned.c for exactly the driver variants it recognises.  Pinned
 * allocations matching an IBP_REGIONS rule become registry regions; the first
 * host-to-device copy from one queues it on the background worker
 * (worker.c), which compresses it, starts write tracking (track.c) and sets
 * up each device (device.c); ready regions are then served by the kernel
 * launch in substitute.c.  Stats (stats.c) are written at exit.
 *
 * Rules every file follows:
 *   - fail open: an error returns to the caller's real driver function; it
 *     is logged once (ibp__warn_once) and never aborts;
 *   - no CUDA call before the application's own first driver call, none in
 *     constructors or in the exit path;
 *   - every hook runs its body under the thread-local recursion guard, so
 *     driver calls libibp makes itself are never intercepted again.
 */
#ifndef IBP_PRELOAD_H
#define IBP_PRELOAD_H

#include <cuda.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "kernels/ibp_kernels.h"
#include "registry/registry.h"

#define IBP_HIDDEN __attribute__((visibility("hidden")))
#define IBP_EXPORT __attribute__((visibility("default")))
/* For code an ASan runtime may call before it is initialised (it resolves
 * its interceptors through our dlsym hook): no sanitizer instrumentation. */
#define IBP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* ---- init.c: configuration and lifetime -----------------------------------
 */

/* The configuration, loaded at the first hook call (pthread_once).  Read-only
 * afterwards. */
extern ibp_config ibp__cfg;

/* Loads the configuration once (idempotent, thread-safe, no CUDA call). */
void ibp__init(void);

/* Nonzero when interception is on: configuration loaded, not disabled, at
 * least one rule.  Loads the configuration on first use. */
int ibp__active(void);

/* Nonzero once the configuration is loaded (ibp__cfg valid). */
int ibp__loaded(void);

/* Nonzero when IBP_WAIT_READY=1: the first copy from a region waits until
 * the worker made it ready (tests, benchmarks). */
int ibp__wait_ready(void);

/* Thread-local recursion guard: nonzero while this thread runs libibp code
 * that may call the driver or the C library. */
extern __thread int ibp__guard;

/* ---- log.c ------------------------------------------------------------------
 */

/* Writes "[ibp] <message>\n" to stderr when level <= IBP_LOG (default
 * warn).  Usable before the configuration is loaded (then: warn).  Does not
 * allocate; messages longer than 511 bytes are truncated. */
void ibp__log(ibp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like ibp__log at warn level, but only the first time `*once` is 0 (sets it
 * atomically).  The "one warning" of fail-open paths. */
void ibp__warn_once(int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Warn level the first time `*once` is 0, info level afterwards: for
 * failures that may repeat per region or per copy, so a persistent fault
 * costs one warning (the rest show with IBP_LOG=info). */
void ibp__warn_first(int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- resolve.c: the real functions -----------------------------------------
 */

/* The C library's dlsym (found with dlvsym; never the public one). */
void *ibp__real_dlsym(void *handle, const char *name);

/* The real dlsym itself (for the RTLD_NEXT tail jump in resolve.c). */
void *ibp__real_dlsym_fn(void);

/* A C library function of the next object (RTLD_NEXT through the real
 * dlsym); NULL when absent.  For libc entry points only, never the driver. */
void *ibp__libc(const char *name);

/* The driver functions libibp calls itself, resolved through the real
 * driver's cuGetProcAddress_v2 (default-stream variants, flags 0). */
typedef struct ibp_driver {
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuPointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
  CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
  CUresult (*cuLibraryLoadData)(CUlibrary *, const void *, CUjit_option *,
                                void **, unsigned, CUlibraryOption *, void **,
                                unsigned);
  CUresult (*cuLibraryGetKernel)(CUkernel *, CUlibrary, const char *);
  CUresult (*cuKernelGetFunction)(CUfunction *, CUkernel);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
} ibp_driver;

/* The table above, filled once the application has loaded the driver and
 * looked up its first entry point; NULL before (callers then pass through).
 * Entries the driver lacks are NULL. */
const ibp_driver *ibp__driver(void);

/* Child after fork: re-initialises the lock guarding the lookup above. */
void ibp__resolve_after_fork_child(void);

/* ---- hooks.def: the substituted entry points ------------------------------
 */

/* For every row: the driver's function (set by resolve.c before the hook can
 * be handed out) and our hook. */
#define IBP_HOOK(sym, params, args)                                            \
  extern CUresult(*ibp__real_##sym) params;                                    \
  CUresult ibp__hook_##sym params;
#include "hooks.def"
#undef IBP_HOOK

/* ---- substitute.c / hooks_copy.c -------------------------------------------
 */

/* One host-to-device copy as the application asked for it.  `stream` is
 * already explicit: 0 was mapped to CU_STREAM_LEGACY or
 * CU_STREAM_PER_THREAD by the hook according to its variant. */
typedef struct ibp_copy {
  CUdeviceptr dst;
  const void *src;
  size_t bytes;
  CUstream stream;
  int sync;    /* host-synchronous entry point */
  int unified; /* cuMemcpy*: dst may be host memory; check it is device */
} ibp_copy;

/* Serves the copy from a ready region with the kernel.  Returns 0 when
 * served (the copy is done or queued on c->stream), 1 when the caller must
 * run the real copy (outside every region, not ready, capturing, error). */
int ibp__serve_htod(const ibp_copy *c);

/* A device-to-host copy (or anything not a CPU store) is about to write
 * [dst, dst+bytes): invalidates the tensors of any region it overlaps.
 * Returns the number of regions it overlaps. */
int ibp__note_write(const void *dst, size_t bytes);

/* ---- dtoh.c: device-to-host copies into regions ----------------------------
 */

/* Around a device-to-host copy into host memory: begin invalidates (as
 * ibp__note_write) and returns nonzero when a region was touched; end is
 * then called once the driver accepted (or refused) the copy, with the
 * stream of an asynchronous copy that was queued, else NULL. */
int ibp__dtoh_begin(const void *dst, size_t bytes);
void ibp__dtoh_end(CUstream stream, int async);

/* Worker: waits until every device-to-host copy into a region queued so
 * far has landed.  Returns 0, or -1 when that cannot be known. */
int ibp__dtoh_wait(void);

/* Child after fork. */
void ibp__dtoh_after_fork_child(void);

/* ---- refresh.c: recompressing written tensors ------------------------------
 */

/* From the copy path of a READY region: queues a recompression of its
 * dirty tensors when enough of them are dirty (at most one pending). */
void ibp__refresh_maybe(ibp_region_rec *r);

/* Worker: recompresses r's dirty tensors into their slots (protocol in
 * refresh.c). */
void ibp__refresh_region(ibp_region_rec *r);

/* Asks the worker for a refresh job (worker.c). */
void ibp__worker_refresh(ibp_region_rec *r);

/* ---- worker.c: the background thread ----------------------------------------
 */

/* Asks the worker to compress r (the caller moved it CANDIDATE ->
 * COMPRESSING) and then to set it up on the device of `ctx`.  Takes its own
 * reference on r. */
void ibp__worker_compress(ibp_region_rec *r, CUcontext ctx, int dev);

/* Asks the worker to set up READY region r on device `dev` of `ctx` (the
 * caller moved the device slot ABSENT -> UPLOADING). */
void ibp__worker_setup_device(ibp_region_rec *r, CUcontext ctx, int dev);

/* The registry's release hook: hands the pinned and device memory of r
 * (shadow, dirty bitmap, per-device metadata) and r->priv to the worker to
 * free, copying what it needs (r is freed when this returns). */
void ibp__worker_release(ibp_region_rec *r);

/* Waits (bounded) until r is no longer COMPRESSING and its slot for `dev`
 * is not UPLOADING.  For IBP_WAIT_READY. */
void ibp__worker_wait(ibp_region_rec *r, int dev);

/* Child after fork: the worker thread does not exist there. */
void ibp__worker_after_fork_child(void);

/* ---- compress.c
 * --------------------------------------------------------------- */

/* Compresses r (COMPRESSING, owned by the calling worker) in the current
 * context: dirty bitmap, write protection (track=protect), Mask/Bitval
 * search, the compressed streams packed into a pinned mapped shadow with
 * their offsets, flags, per-tensor prefix sums.
 * Returns 0, or -1 (logged; the caller degrades the region). */
int ibp__compress_region(ibp_region_rec *r);

/* ---- device.c: per-device state -------------------------------------------
 */

/* Per region and device: the launch template (region geometry filled,
 * range fields per copy) and where the metadata lives. */
typedef struct ibp_region_dev {
  CUcontext ctx; /* context the device arrays were allocated in */
  CUfunction fn; /* ibp_decompress in that context */
  unsigned sms;
  ibp_kernel_plan plan;
  ibp_decompress_args args;
  const uint32_t *busy; /* device address of r->busy */
} ibp_region_dev;

/* r->priv: what libibp keeps per region beyond the registry record. */
typedef struct ibp_region_priv {
  ibp_region_dev dev[IBP_REGISTRY_MAX_DEVICES];
  CUcontext ctx;                /* context the pinned shadow was made in */
  _Atomic int invalidated;      /* written by a copy while compressing */
  _Atomic unsigned failures;    /* substitution errors (degrade on repeat) */
  _Atomic int refresh_pending;  /* a refresh job is queued */
  _Atomic int refreshing;       /* busy bits may be set: kernels read them */
  _Atomic int launching;        /* copies between deciding and launching */
  _Atomic uint64_t refreshes;   /* refresh jobs run */
  _Atomic uint64_t dirty_floor; /* dirty_tensors after the last refresh */
  /* refresh.c, worker only: each tensor's place in the shadow (bytes; a
   * stream that no longer fits moves to the spill room after the packed
   * streams, from spill_top on) */
  uint32_t *room;
  uint64_t spill_top;
  int warned; /* ibp__warn_once flag */
} ibp_region_priv;

/* Sets up r (READY) on device `dev` in the current context: kernels
 * loaded, device self-test passed, Mask/Bitval/flags uploaded, launch
 * template planned.  Worker thread only.  Returns 0, or -1 (logged). */
int ibp__device_setup(ibp_region_rec *r, int dev, CUstream stream);

/* Child after fork: forgets loaded kernels and self-test results. */
void ibp__device_after_fork_child(void);

/* ---- track.c: write tracking (shadow mode, track=protect) ------------------
 */

/* Installs the SIGSEGV/SIGBUS handler through the real sigaction, once.
 * The handler chains to whatever was installed before and to what the
 * application installs later (hooks_signal.c).  Returns 0, or -1. */
int ibp__track_install(void);

/* Write-protects the pages of r (PROT_READ).  Precondition: r->dirty is set
 * and zero.  A write to a protected page marks the tensors of r on that
 * page dirty (r->dirty, r->dirty_tensors, r->write_faults) and makes the
 * page writable again.  Returns 0, or -1 with nothing protected. */
int ibp__track_protect(ibp_region_rec *r);

/* Refresh support (refresh.c): protects every page of tracked region r
 * again without a gap (pages still protected stay so); 0, or -1 when r is
 * not tracked, a kernel-side write is in progress, the application set
 * protections in r itself, or mprotect failed.  quiesce waits until no fault or
 * before_write pass is in flight.  still_protected: nonzero when every page
 * of r overlapping [a, a+len) is held read-only by the tracker. */
int ibp__track_reprotect(ibp_region_rec *r);
/* Around a libc call that writes caller memory from the kernel side:
 * begin (returns whether anything is tracked; then announce the buffers
 * with ibp__track_before_write) ... the real call ... end(began).  No
 * re-protection happens in between. */
int ibp__track_kwrite_begin(void);
void ibp__track_kwrite_end(int began);
/* The application's own mprotect of [addr, addr+len): announced like a
 * write, and the regions it touches are never re-protected. */
void ibp__track_app_protect(const void *addr, size_t len);
void ibp__track_quiesce(void);
int ibp__track_still_protected(ibp_region_rec *r, uintptr_t a, size_t len);

/* Makes every page of r writable again (remove, degrade).  Idempotent. */
void ibp__track_unprotect(ibp_region_rec *r);

/* Called before something other than a CPU store writes [addr, addr+len):
 * the C library or the kernel (read(2) into the buffer ...), or a
 * device-to-host copy.  Every tracked region overlapping the range gets the
 * overlapped tensors marked dirty and those pages made writable.  One
 * relaxed atomic load when nothing is protected; async-signal-safe. */
void ibp__track_before_write(const void *addr, size_t len);

/* Marks tensors of r overlapping [addr, addr+len) dirty without touching
 * page protection (device-to-host copies into a region). */
void ibp__track_mark_dirty(ibp_region_rec *r, uintptr_t addr, size_t len);

/* In the child after fork: the tracker's lock-free state stays valid; this
 * re-initialises anything lock-based. */
void ibp__track_after_fork_child(void);

/* ---- stats.c ----------------------------------------------------------------
 */

/* Keeps the final figures of a region about to leave the registry (freed,
 * unregistered) so the exit report still lists it.  Thread-safe. */
void ibp__stats_retire(const ibp_region_rec *r);

/* Writes the report IBP_STATS asks for (text table on stderr, or JSON to
 * the path): every retired region, then every live one.  Makes no CUDA
 * call.  Called once at exit (atexit from ibp__init). */
void ibp__stats_report(void);

/* In the child after fork: the exit report is the parent's; the child
 * writes none. */
void ibp__stats_after_fork_child(void);

#endif /* IBP_PRELOAD_H */
