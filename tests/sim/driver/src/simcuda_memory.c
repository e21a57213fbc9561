/*
 * Memory: the simulated device's address space, pinned host memory, pointer
 * classification for copies, and the allocation / pointer-query entry
 * points.
 *
 * Device memory lives in one large PROT_NONE reservation made at cuInit;
 * an allocation commits whole pages (read-write) followed by one PROT_NONE
 * guard page, and freeing maps PROT_NONE pages back over it (the memory is
 * returned to the system and any later touch faults instead of reading
 * stale data).  Host code can dereference device pointers -- they are
 * process addresses -- but the driver only accepts them inside a live
 * allocation.
 *
 * Pinned memory from cuMemHostAlloc / cuMemAllocHost is a shared mapping of
 * a memfd mapped twice: the application's address and a private alias the
 * driver copies through, which stays writable whatever the application
 * mprotects -- like a DMA engine, which ignores CPU page protection.  Both
 * are MADV_DONTFORK: a child of fork() does not inherit pinned memory.
 * Memory pinned with cuMemHostRegister is the caller's own and is accessed
 * directly.  Every pinned range is registered with the emulator
 * (simt_host_register) so kernels may read it; the device pointer of pinned
 * memory is its host address (unified addressing).
 *
 * Freeing or unpinning waits for all outstanding work first (cudaFree's
 * implicit synchronization), so no queued operation touches released memory.
 * cuMemFreeAsync frees in stream order but leaves the pages mapped until the
 * next full synchronization ("deferred"), so a kernel racing with it on
 * another stream reads stale memory rather than crashing the process.
 */
#include "simcuda_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFAULT_DEVICE_MEM (80ull << 30)
#define MIN_DEVICE_MEM (256ull << 20)
#define PITCH_ALIGN 512

typedef struct dalloc {
  uintptr_t base;
  size_t bytes;     /* requested */
  size_t committed; /* page-rounded */
  scu_ctx *ctx;     /* owner (compared only, not referenced) */
  uint64_t id;
  unsigned flags; /* SCU_ALLOC_* */
  bool deferred;  /* freed by cuMemFreeAsync, pages still mapped */
} dalloc;

typedef struct hrange {
  uintptr_t base;
  size_t bytes;
  char *alias;      /* driver's view of cuMemHostAlloc memory, or NULL */
  size_t map_bytes; /* mapping size (cuMemHostAlloc) */
  unsigned flags;   /* as passed to cuMemHostAlloc / cuMemHostRegister */
  bool registered;  /* cuMemHostRegister (else allocated here) */
  scu_ctx *ctx;
  uint64_t id;
} hrange;

static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;
static uintptr_t res_lo, res_hi; /* the reservation */
static size_t total_bytes, used_bytes;
static size_t page;
static dalloc *dev; /* sorted by base */
static size_t ndev, capdev;
static hrange *host; /* sorted by base */
static size_t nhost, caphost;
static atomic_ullong next_buffer_id = 1;

typedef struct scu_pool {
  scu_obj hdr;
} scu_pool;
static scu_pool the_pool;
static void *pool_handle;

static void pool_destroy(scu_obj *o) {
  (void)o;
}

CUresult scu_mem_init(void) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t want = DEFAULT_DEVICE_MEM;
  const char *env = getenv("SIMCUDA_DEVICE_MEM");
  if (env && *env) {
    want = scu_parse_size(env);
    if (want < MIN_DEVICE_MEM) {
      scu_log("SIMCUDA_DEVICE_MEM='%s' is not a size >= 256M; using 80G", env);
      want = DEFAULT_DEVICE_MEM;
    }
  }
  /* Room for guard pages and fragmentation: a quarter more than the total. */
  for (uint64_t t = want; t >= MIN_DEVICE_MEM; t /= 2) {
    size_t res = (size_t)(t + t / 4);
    void *p = mmap(NULL, res, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      res_lo = (uintptr_t)p;
      res_hi = res_lo + res;
      total_bytes = (size_t)t;
      if (t != want)
        scu_log("device memory: reserved %zu MiB only", (size_t)(t >> 20));
      break;
    }
  }
  if (!res_lo) {
    scu_log("cannot reserve address space for device memory");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  scu_obj_init(&the_pool.hdr, SCU_T_POOL, pool_destroy);
  pool_handle = scu_obj_publish(&the_pool.hdr, NULL);
  return pool_handle ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

size_t scu_mem_total(void) {
  return total_bytes;
}

static size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

/* ---- the tables (mem_lock held) --------------------------------------- */

/* Index of the first device entry with base > p. */
static size_t dev_upper(uintptr_t p) {
  size_t lo = 0, hi = ndev;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (dev[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The live device allocation containing p, or NULL. */
static dalloc *dev_find(uintptr_t p) {
  size_t i = dev_upper(p);
  if (i == 0)
    return NULL;
  dalloc *a = &dev[i - 1];
  return !a->deferred && p < a->base + (a->bytes ? a->bytes : 1) ? a : NULL;
}

static size_t host_upper(uintptr_t p) {
  size_t lo = 0, hi = nhost;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (host[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static hrange *host_find(uintptr_t p) {
  size_t i = host_upper(p);
  if (i == 0)
    return NULL;
  hrange *h = &host[i - 1];
  return p < h->base + h->bytes ? h : NULL;
}

/* Does [p, p+n) overlap any pinned range? */
static bool host_overlaps(uintptr_t p, size_t n) {
  size_t i = host_upper(p + n - 1);
  return i > 0 && host[i - 1].base + host[i - 1].bytes > p;
}

static bool grow_array(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap)
    return true;
  size_t c = *cap ? *cap * 2 : 64;
  void *a = realloc(*arr, c * elem);
  if (!a)
    return false;
  *arr = a;
  *cap = c;
  return true;
}

/* A free stretch of `span` bytes in the reservation, or 0. */
static uintptr_t find_gap(size_t span) {
  uintptr_t at = res_lo;
  for (size_t i = 0; i <= ndev; i++) {
    uintptr_t end = i < ndev ? dev[i].base : res_hi;
    if (end >= at && end - at >= span)
      return at;
    if (i < ndev)
      at = dev[i].base + dev[i].committed + page; /* past the guard page */
  }
  return 0;
}

static void unmap_device(uintptr_t base, size_t committed) {
  /* Fresh PROT_NONE pages over the old ones: contents dropped. */
  if (mmap((void *)base, committed, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED)
    (void)mprotect((void *)base, committed, PROT_NONE);
}

static void dev_remove_at(size_t i) {
  memmove(&dev[i], &dev[i + 1], (ndev - i - 1) * sizeof *dev);
  ndev--;
}

/* ---- device allocations ------------------------------------------------ */

static CUresult alloc_locked(scu_ctx *c, size_t bytes, unsigned flags,
                             CUdeviceptr *out) {
  size_t committed = round_up(bytes, page);
  if (committed < bytes || committed > total_bytes - used_bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (!grow_array((void **)&dev, &capdev, ndev, sizeof *dev))
    return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t base = find_gap(committed + page);
  if (!base)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (mprotect((void *)base, committed, PROT_READ | PROT_WRITE) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t i = dev_upper(base);
  memmove(&dev[i + 1], &dev[i], (ndev - i) * sizeof *dev);
  dev[i] =
      (dalloc){base,  bytes, committed, c, atomic_fetch_add(&next_buffer_id, 1),
               flags, false};
  ndev++;
  used_bytes += committed;
  *out = (CUdeviceptr)base;
  return CUDA_SUCCESS;
}

CUresult scu_mem_alloc_device(scu_ctx *c, size_t bytes, unsigned flags,
                              CUdeviceptr *out) {
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_rwlock_wrlock(&mem_lock);
  CUresult r = alloc_locked(c, bytes, flags, out);
  bool has_deferred = false;
  for (size_t i = 0; i < ndev && !has_deferred; i++)
    has_deferred = dev[i].deferred;
  pthread_rwlock_unlock(&mem_lock);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && has_deferred) {
    /* Address space held by deferred frees: settle them and retry. */
    scu_sync_all();
    scu_mem_trim_deferred();
    pthread_rwlock_wrlock(&mem_lock);
    r = alloc_locked(c, bytes, flags, out);
    pthread_rwlock_unlock(&mem_lock);
  }
  return r;
}

/* Frees the allocation based at `base` now; false if there is none. */
static bool free_device(uintptr_t base) {
  pthread_rwlock_wrlock(&mem_lock);
  size_t i = dev_upper(base);
  bool ok = i > 0 && dev[i - 1].base == base && !dev[i - 1].deferred;
  if (ok) {
    used_bytes -= dev[i - 1].committed;
    unmap_device(base, dev[i - 1].committed);
    dev_remove_at(i - 1);
  }
  pthread_rwlock_unlock(&mem_lock);
  return ok;
}

void scu_mem_free_deferred(uintptr_t base) {
  pthread_rwlock_wrlock(&mem_lock);
  size_t i = dev_upper(base);
  if (i > 0 && dev[i - 1].base == base && !dev[i - 1].deferred) {
    dev[i - 1].deferred = true;
    used_bytes -= dev[i - 1].committed;
  }
  pthread_rwlock_unlock(&mem_lock);
}

void scu_mem_trim_deferred(void) {
  pthread_rwlock_wrlock(&mem_lock);
  for (size_t i = ndev; i-- > 0;) {
    if (dev[i].deferred) {
      unmap_device(dev[i].base, dev[i].committed);
      dev_remove_at(i);
    }
  }
  pthread_rwlock_unlock(&mem_lock);
}

/* ---- pinned host memory -------------------------------------------------- */

static void unmap_host(const hrange *h) {
  if (h->registered)
    return;
  munmap((void *)h->base, h->map_bytes);
  if (h->alias)
    munmap(h->alias, h->map_bytes);
}

static CUresult host_insert(const hrange *h) {
  pthread_rwlock_wrlock(&mem_lock);
  CUresult r = CUDA_SUCCESS;
  if (host_overlaps(h->base, h->bytes))
    r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  else if (!grow_array((void **)&host, &caphost, nhost, sizeof *host))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS &&
      simt_host_try_register((const void *)h->base, h->bytes) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;    /* the emulator's table */
  if (r == CUDA_SUCCESS && h->alias) /* kernels' stores land like DMA */
    (void)simt_host_set_alias((const void *)h->base, h->alias);
  if (r == CUDA_SUCCESS) {
    size_t i = host_upper(h->base);
    memmove(&host[i + 1], &host[i], (nhost - i) * sizeof *host);
    host[i] = *h;
    nhost++;
  }
  pthread_rwlock_unlock(&mem_lock);
  return r;
}

/* Removes the range based exactly at `base` whose `registered` matches. */
static bool host_remove(uintptr_t base, bool registered, hrange *out) {
  pthread_rwlock_wrlock(&mem_lock);
  size_t i = host_upper(base);
  bool ok =
      i > 0 && host[i - 1].base == base && host[i - 1].registered == registered;
  if (ok) {
    *out = host[i - 1];
    (void)simt_host_try_unregister((const void *)base);
    memmove(&host[i - 1], &host[i], (nhost - i) * sizeof *host);
    nhost--;
  }
  pthread_rwlock_unlock(&mem_lock);
  return ok;
}

static CUresult host_alloc(scu_ctx *c, void **pp, size_t bytes,
                           unsigned flags) {
  size_t len = round_up(bytes, page);
  if (len < bytes)
    return CUDA_ERROR_OUT_OF_MEMORY;
  char *user = MAP_FAILED, *alias = NULL;
  int fd = memfd_create("simcuda-pinned", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) {
    user = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (alias == MAP_FAILED)
      alias = NULL;
  }
  if (fd >= 0)
    close(fd);
  if (user == MAP_FAILED || !alias) {
    /* No memfd: plain pages, accessed directly. */
    if (user != MAP_FAILED)
      munmap(user, len);
    if (alias)
      munmap(alias, len);
    alias = NULL;
    user = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
    if (user == MAP_FAILED)
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* As with NVIDIA's driver, a forked child does not inherit pinned
   * memory (and could not share it with the parent by accident). */
  (void)madvise(user, len, MADV_DONTFORK);
  if (alias)
    (void)madvise(alias, len, MADV_DONTFORK);
  hrange h = {
      (uintptr_t)user, bytes, alias, len,
      flags,           false, c,     atomic_fetch_add(&next_buffer_id, 1)};
  CUresult r = host_insert(&h);
  if (r != CUDA_SUCCESS) {
    unmap_host(&h);
    return r;
  }
  *pp = user;
  return CUDA_SUCCESS;
}

/* Is every page of [p, p+n) mapped?  (Not the permissions.) */
static bool host_mapped(uintptr_t p, size_t n) {
  unsigned char vec[4096];
  uintptr_t lo = p & ~(uintptr_t)(page - 1);
  uintptr_t hi = p + n;
  while (lo < hi) {
    size_t chunk = hi - lo;
    if (chunk > sizeof vec * page)
      chunk = sizeof vec * page;
    if (mincore((void *)lo, chunk, vec) != 0)
      return false;
    lo += chunk;
  }
  return true;
}

/* ---- classification for transfers ---------------------------------------- */

CUresult scu_mem_check(uintptr_t p, size_t n, bool device_side, scu_span *out) {
  out->kind = SCU_MEM_PAGEABLE;
  out->access = (char *)p;
  if (n == 0)
    return CUDA_SUCCESS;
  if (p == 0 || p + n < p)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
  bool check_mapped = false;
  pthread_rwlock_rdlock(&mem_lock);
  if (p < res_hi && p + n > res_lo) {
    dalloc *a = dev_find(p);
    if (!a || p + n > a->base + a->bytes)
      r = CUDA_ERROR_INVALID_VALUE;
    else
      out->kind = SCU_MEM_DEVICE;
  } else {
    hrange *h = host_find(p);
    if (h && p + n <= h->base + h->bytes) {
      out->kind = SCU_MEM_PINNED;
      if (h->alias)
        out->access = h->alias + (p - h->base);
    } else if (device_side) {
      r = CUDA_ERROR_INVALID_VALUE;
    } else {
      check_mapped = true;
    }
  }
  pthread_rwlock_unlock(&mem_lock);
  if (check_mapped && !host_mapped(p, n))
    r = CUDA_ERROR_INVALID_VALUE;
  return r;
}

void scu_mem_release_ctx(scu_ctx *c) {
  pthread_rwlock_wrlock(&mem_lock);
  for (size_t i = ndev; i-- > 0;) {
    if (dev[i].ctx == c) {
      if (!dev[i].deferred)
        used_bytes -= dev[i].committed;
      unmap_device(dev[i].base, dev[i].committed);
      dev_remove_at(i);
    }
  }
  for (size_t i = nhost; i-- > 0;) {
    if (host[i].ctx == c) {
      (void)simt_host_try_unregister((const void *)host[i].base);
      unmap_host(&host[i]);
      memmove(&host[i], &host[i + 1], (nhost - i - 1) * sizeof *host);
      nhost--;
    }
  }
  pthread_rwlock_unlock(&mem_lock);
}

/* ---- entry points: device memory ----------------------------------------- */

/* The current context for an allocation-like call (and the capture rule). */
static CUresult alloc_ctx(scu_ctx **c) {
  CUresult r = scu_ctx_current(c);
  if (r == CUDA_SUCCESS && (r = scu_capture_check_unsafe()) != CUDA_SUCCESS)
    scu_ctx_put(*c);
  return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total) {
  SCU_API("cuMemGetInfo");
  if (!free || !total)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  scu_ctx_put(c);
  pthread_rwlock_rdlock(&mem_lock);
  *total = total_bytes;
  *free = total_bytes - used_bytes;
  pthread_rwlock_unlock(&mem_lock);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  SCU_API("cuMemAlloc");
  if (!dptr)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  r = scu_mem_alloc_device(c, bytesize, 0, dptr);
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                    size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  SCU_API("cuMemAllocPitch");
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
       ElementSizeBytes != 16))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  size_t pitch = round_up(WidthInBytes, PITCH_ALIGN);
  if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
    SCU_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  r = scu_mem_alloc_device(c, pitch * Height, 0, dptr);
  if (r == CUDA_SUCCESS)
    *pPitch = pitch;
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                   unsigned int flags) {
  SCU_API("cuMemAllocManaged");
  if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  r = scu_mem_alloc_device(c, bytesize, SCU_ALLOC_MANAGED, dptr);
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  SCU_API("cuMemFree");
  if (!dptr)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_capture_check_unsafe();
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  scu_span s;
  if (scu_mem_check(dptr, 1, true, &s) != CUDA_SUCCESS ||
      s.kind != SCU_MEM_DEVICE)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_sync_all();
  scu_mem_trim_deferred();
  SCU_RETURN(free_device(dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

static CUresult address_range(CUdeviceptr *pbase, size_t *psize,
                              CUdeviceptr dptr) {
  if (!pbase && !psize)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  pthread_rwlock_rdlock(&mem_lock);
  dalloc *a = dev_find(dptr);
  hrange *h = a ? NULL : host_find(dptr);
  if (a || h) {
    if (pbase)
      *pbase = a ? a->base : h->base;
    if (psize)
      *psize = a ? a->bytes : h->bytes;
    r = CUDA_SUCCESS;
  }
  pthread_rwlock_unlock(&mem_lock);
  return r;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                         CUdeviceptr dptr) {
  SCU_API("cuMemGetAddressRange");
  SCU_RETURN(address_range(pbase, psize, dptr));
}

/* ---- entry points: pinned host memory ------------------------------------ */

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
                                unsigned int Flags) {
  SCU_API("cuMemHostAlloc");
  const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED;
  if (!pp || bytesize == 0 || (Flags & ~known))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  r = host_alloc(c, pp, bytesize, Flags);
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize) {
  SCU_API("cuMemAllocHost");
  if (!pp || bytesize == 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  r = host_alloc(c, pp, bytesize, 0);
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  SCU_API("cuMemFreeHost");
  if (!p)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_capture_check_unsafe();
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  pthread_rwlock_rdlock(&mem_lock);
  hrange *h = host_find((uintptr_t)p);
  bool ok = h && h->base == (uintptr_t)p && !h->registered;
  pthread_rwlock_unlock(&mem_lock);
  if (!ok)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_sync_all();
  hrange gone;
  if (!host_remove((uintptr_t)p, false, &gone))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  unmap_host(&gone);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize,
                                      unsigned int Flags) {
  SCU_API("cuMemHostRegister");
  const unsigned known =
      CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
      CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  uintptr_t a = (uintptr_t)p;
  if (!p || bytesize == 0 || (Flags & ~known) || a + bytesize < a)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
    SCU_RETURN(CUDA_ERROR_NOT_SUPPORTED);
  if (a < res_hi && a + bytesize > res_lo)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE); /* device memory */
  if (!host_mapped(a, bytesize))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = alloc_ctx(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  hrange h = {a,     bytesize, NULL, 0,
              Flags, true,     c,    atomic_fetch_add(&next_buffer_id, 1)};
  r = host_insert(&h);
  scu_ctx_put(c);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuMemHostUnregister(void *p) {
  SCU_API("cuMemHostUnregister");
  if (!p)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  CUresult r = scu_capture_check_unsafe();
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  pthread_rwlock_rdlock(&mem_lock);
  hrange *h = host_find((uintptr_t)p);
  bool ok = h && h->base == (uintptr_t)p && h->registered;
  pthread_rwlock_unlock(&mem_lock);
  if (!ok)
    SCU_RETURN(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  scu_sync_all();
  hrange gone;
  SCU_RETURN(host_remove((uintptr_t)p, true, &gone)
                 ? CUDA_SUCCESS
                 : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p,
                                              unsigned int Flags) {
  SCU_API("cuMemHostGetDevicePointer");
  if (!pdptr || !p || Flags != 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  scu_ctx_put(c);
  pthread_rwlock_rdlock(&mem_lock);
  bool pinned = host_find((uintptr_t)p) != NULL;
  pthread_rwlock_unlock(&mem_lock);
  if (!pinned)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing */
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p) {
  SCU_API("cuMemHostGetFlags");
  if (!pFlags || !p)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  pthread_rwlock_rdlock(&mem_lock);
  hrange *h = host_find((uintptr_t)p);
  bool ok = h && !h->registered;
  if (ok)
    *pFlags = h->flags;
  pthread_rwlock_unlock(&mem_lock);
  SCU_RETURN(ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* ---- pointer attributes -------------------------------------------------- */

typedef struct ptr_info {
  bool known; /* device or pinned */
  bool device, managed, async;
  uintptr_t base;
  size_t bytes;
  scu_ctx *ctx;
  uint64_t id;
} ptr_info;

static ptr_info classify(uintptr_t p) {
  ptr_info pi = {0};
  pthread_rwlock_rdlock(&mem_lock);
  dalloc *a = dev_find(p);
  if (a) {
    pi = (ptr_info){true,
                    true,
                    (a->flags & SCU_ALLOC_MANAGED) != 0,
                    (a->flags & SCU_ALLOC_ASYNC) != 0,
                    a->base,
                    a->bytes,
                    a->ctx,
                    a->id};
  } else {
    hrange *h = host_find(p);
    if (h)
      pi = (ptr_info){true,    false,    false,  false,
                      h->base, h->bytes, h->ctx, h->id};
  }
  pthread_rwlock_unlock(&mem_lock);
  return pi;
}

/* One attribute; `strict`: unknown pointers are an error (the singular
 * call) rather than zeros (cuPointerGetAttributes). */
static CUresult attribute(void *data, CUpointer_attribute attr,
                          const ptr_info *pi, uintptr_t p, bool strict) {
  if (!pi->known && strict)
    return CUDA_ERROR_INVALID_VALUE;
  void *ctxh = pi->ctx ? scu_obj_handle(&pi->ctx->hdr) : NULL;
  switch (attr) {
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    *(CUcontext *)data = pi->known ? ctxh : NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    *(unsigned *)data = !pi->known   ? 0
                        : pi->device ? CU_MEMORYTYPE_DEVICE
                                     : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    *(CUdeviceptr *)data = pi->known ? p : 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    if (pi->known && pi->device && !pi->managed)
      return strict ? CUDA_ERROR_INVALID_VALUE
                    : (*(void **)data = NULL, CUDA_SUCCESS);
    *(void **)data = pi->known ? (void *)p : NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *(int *)data = pi->known ? 1 : 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
  case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    *(unsigned long long *)data = pi->known ? pi->id : 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    *(int *)data = pi->managed ? 1 : 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    *(int *)data = !pi->known ? -2 : pi->ctx ? (int)pi->ctx->device : 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
  case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
  case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
    *(int *)data = 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
  case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    *(CUdeviceptr *)data = pi->base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
  case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    *(size_t *)data = pi->bytes;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    *(unsigned long long *)data = 0;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    *(int *)data = pi->known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                             : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    *(CUmemoryPool *)data = pi->async ? pool_handle : NULL;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
    return CUDA_ERROR_NOT_SUPPORTED;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data,
                                       CUpointer_attribute attribute_,
                                       CUdeviceptr ptr) {
  SCU_API("cuPointerGetAttribute");
  if (!data || !ptr)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  ptr_info pi = classify(ptr);
  SCU_RETURN(attribute(data, attribute_, &pi, ptr, true));
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                        CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr) {
  SCU_API("cuPointerGetAttributes");
  if (numAttributes == 0 || !attributes || !data)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  ptr_info pi = classify(ptr);
  for (unsigned i = 0; i < numAttributes; i++) {
    if (!data[i])
      SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = attribute(data[i], attributes[i], &pi, ptr, false);
    if (r != CUDA_SUCCESS)
      SCU_RETURN(r);
  }
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- stream-ordered allocation and the memory pool ----------------------- */

static CUresult get_pool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = scu_check_device(dev);
  if (r == CUDA_SUCCESS)
    *pool = pool_handle;
  return r;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
                                           CUdevice dev) {
  SCU_API("cuDeviceGetDefaultMemPool");
  SCU_RETURN(get_pool(pool_out, dev));
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  SCU_API("cuDeviceGetMemPool");
  SCU_RETURN(get_pool(pool, dev));
}

/* Allocated at once (always a valid stream order), owned by the stream's
 * context; not allowed on a capturing stream. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream h,
                            bool ptds) {
  if (!dptr)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&s->m);
  bool capturing = s->cap_status != CU_STREAM_CAPTURE_STATUS_NONE;
  r = s->error;
  pthread_mutex_unlock(&s->m);
  if (r == CUDA_SUCCESS && capturing) {
    scu_capture_invalidate(s);
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (r == CUDA_SUCCESS)
    r = scu_mem_alloc_device(s->ctx, bytes, SCU_ALLOC_ASYNC, dptr);
  scu_stream_put(s);
  return r;
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytes,
                                CUmemoryPool pool, CUstream h, bool ptds) {
  if (pool != pool_handle)
    return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytes, h, ptds);
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUstream hStream) {
  SCU_API("cuMemAllocAsync");
  SCU_RETURN(alloc_async(dptr, bytesize, hStream, false));
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                      CUstream hStream) {
  SCU_API("cuMemAllocAsync");
  SCU_RETURN(alloc_async(dptr, bytesize, hStream, true));
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                         CUmemoryPool pool, CUstream hStream) {
  SCU_API("cuMemAllocFromPoolAsync");
  SCU_RETURN(alloc_from_pool(dptr, bytesize, pool, hStream, false));
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr,
                                              size_t bytesize,
                                              CUmemoryPool pool,
                                              CUstream hStream) {
  SCU_API("cuMemAllocFromPoolAsync");
  SCU_RETURN(alloc_from_pool(dptr, bytesize, pool, hStream, true));
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, bool ptds) {
  scu_span sp;
  if (!dptr || scu_mem_check(dptr, 1, true, &sp) != CUDA_SUCCESS ||
      sp.kind != SCU_MEM_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr base;
  if (address_range(&base, NULL, dptr) != CUDA_SUCCESS || base != dptr)
    return CUDA_ERROR_INVALID_VALUE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(h, ptds, &s);
  if (r != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(SCU_OP_FREE);
  if (!op) {
    scu_stream_put(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  op->u.free.base = dptr;
  uint64_t seq;
  r = scu_stream_submit(s, op, &seq);
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  SCU_API("cuMemFreeAsync");
  SCU_RETURN(free_async(dptr, hStream, false));
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  SCU_API("cuMemFreeAsync");
  SCU_RETURN(free_async(dptr, hStream, true));
}

/* ---- managed-memory hints: checked, then nothing to do ------------------- */

static CUresult check_managed(CUdeviceptr p, size_t count) {
  ptr_info pi = classify(p);
  if (!pi.known || !pi.managed || count == 0 || p + count > pi.base + pi.bytes)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count,
                             CUmem_advise advice, CUdevice device) {
  SCU_API("cuMemAdvise");
  (void)advice;
  if (device != CU_DEVICE_CPU && scu_check_device(device) != CUDA_SUCCESS)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  SCU_RETURN(check_managed(devPtr, count));
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count,
                                CUmem_advise advice, CUmemLocation location) {
  SCU_API("cuMemAdvise");
  (void)advice;
  (void)location;
  SCU_RETURN(check_managed(devPtr, count));
}

/* A prefetch is a no-op in the stream's order. */
static CUresult prefetch(CUdeviceptr p, size_t count, CUstream h, bool ptds) {
  CUresult r = check_managed(p, count);
  if (r != CUDA_SUCCESS)
    return r;
  scu_stream *s;
  if ((r = scu_stream_resolve(h, ptds, &s)) != CUDA_SUCCESS)
    return r;
  scu_op *op = scu_op_new(SCU_OP_NOP);
  uint64_t seq;
  r = op ? scu_stream_submit(s, op, &seq) : CUDA_ERROR_OUT_OF_MEMORY;
  scu_stream_put(s);
  return r;
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count,
                                    CUdevice dstDevice, CUstream hStream) {
  SCU_API("cuMemPrefetchAsync");
  if (dstDevice != CU_DEVICE_CPU && scu_check_device(dstDevice))
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  SCU_RETURN(prefetch(devPtr, count, hStream, false));
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count,
                                         CUdevice dstDevice, CUstream hStream) {
  SCU_API("cuMemPrefetchAsync");
  if (dstDevice != CU_DEVICE_CPU && scu_check_device(dstDevice))
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  SCU_RETURN(prefetch(devPtr, count, hStream, true));
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count,
                                       CUmemLocation location,
                                       unsigned int flags, CUstream hStream) {
  SCU_API("cuMemPrefetchAsync");
  (void)location;
  if (flags != 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  SCU_RETURN(prefetch(devPtr, count, hStream, false));
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                            CUmemLocation location,
                                            unsigned int flags,
                                            CUstream hStream) {
  SCU_API("cuMemPrefetchAsync");
  (void)location;
  if (flags != 0)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  SCU_RETURN(prefetch(devPtr, count, hStream, true));
}
