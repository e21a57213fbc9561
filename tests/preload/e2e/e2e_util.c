/* What the end-to-end programs share: reporting, PRNG, data, pinned
 * regions, verified copies (e2e_util.h). */
#include "e2e_util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define BUILD_STREAM "per-thread default stream"
#else
#define BUILD_STREAM "legacy default stream"
#endif

static const char *prog = "e2e";
static uint64_t seed = E2E_DEFAULT_SEED;
static atomic_uint failures;

/* ---- reporting ----------------------------------------------------------- */

static uint64_t parse_u64(const char *s, int *ok) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  *ok = *s && !*end && !errno;
  return v;
}

void e2e_begin(const char *name) {
  prog = name;
  const char *s = getenv("IBP_E2E_SEED");
  if (s && *s) {
    int ok;
    uint64_t v = parse_u64(s, &ok);
    if (!ok)
      e2e_die("IBP_E2E_SEED='%s' is not a number", s);
    seed = v;
  }
  const char *disable = getenv("IBP_DISABLE");
  fprintf(stderr, "%s: seed 0x%" PRIx64 " (IBP_E2E_SEED), %s%s\n", prog, seed,
          BUILD_STREAM,
          disable && strcmp(disable, "1") == 0 ? ", IBP_DISABLE=1" : "");
}

uint64_t e2e_seed(void) {
  return seed;
}

const char *e2e_prog(void) {
  return prog;
}

unsigned long e2e_env_count(const char *name, unsigned long dflt) {
  const char *s = getenv(name);
  if (!s || !*s)
    return dflt;
  int ok;
  uint64_t v = parse_u64(s, &ok);
  if (!ok)
    e2e_die("%s='%s' is not a number", name, s);
  return (unsigned long)v;
}

/* Under IBP_TEST_REDUCE > 1 three tenths, whatever N: the stats checks
 * want every region served, which 1000 / 8 random copies do not give
 * e2e_random_staged's r1000 (every one of its 25 copies left to the
 * driver). */
unsigned long e2e_default_copies(unsigned long full) {
  return e2e_env_count("IBP_TEST_REDUCE", 1) > 1 ? full * 3 / 10 : full;
}

static void vreport(const char *tag, const char *fmt, va_list ap) {
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  fprintf(stderr, "%s: %s%s\n", prog, tag, line);
}

void e2e_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("", fmt, ap);
  va_end(ap);
}

void e2e_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("setup error: ", fmt, ap);
  va_end(ap);
  exit(E2E_EXIT_SETUP);
}

void e2e_die_errno(const char *what) {
  e2e_die("%s: %s", what, strerror(errno));
}

void e2e_fail(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  atomic_fetch_add(&failures, 1);
  fprintf(stderr, "%s: FAIL: %s (IBP_E2E_SEED=0x%" PRIx64 ")\n", prog, line,
          seed);
}

unsigned e2e_failures(void) {
  return atomic_load(&failures);
}

int e2e_end(void) {
  unsigned n = e2e_failures();
  if (n) {
    fprintf(stderr, "%s: %u check(s) failed (IBP_E2E_SEED=0x%" PRIx64 ")\n",
            prog, n, seed);
    return E2E_EXIT_MISMATCH;
  }
  fprintf(stderr, "%s: all bytes verified\n", prog);
  return E2E_EXIT_OK;
}

void e2e_ck_(cudaError_t e, const char *what, const char *file, int line) {
  if (e == cudaSuccess)
    return;
  fprintf(stderr, "%s: CUDA call failed: %s -> %s (%s:%d)\n", prog, what,
          cudaGetErrorName(e), file, line);
  exit(E2E_EXIT_CUDA);
}

/* ---- PRNG ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void e2e_rng_seed(e2e_rng *r, uint64_t base, uint64_t stream) {
  uint64_t x = base ^ (stream * 0xD1B54A32D192ED03ull);
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t e2e_rng_next(e2e_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

uint64_t e2e_rng_below(e2e_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)e2e_rng_next(r) * n) >> 64);
}

int e2e_rng_pct(e2e_rng *r, unsigned percent) {
  return e2e_rng_below(r, 100) < percent;
}

size_t e2e_rng_len(e2e_rng *r, size_t max) {
  double u = (double)(e2e_rng_next(r) >> 11) / 9007199254740992.0;
  size_t n = (size_t)exp(u * log((double)max + 1.0));
  return n < 1 ? 1 : n > max ? max : n;
}

void e2e_rng_bytes(e2e_rng *r, void *buf, size_t n) {
  unsigned char *p = buf;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = e2e_rng_next(r);
    memcpy(p + i, &v, n - i < 8 ? n - i : 8);
  }
}

/* ---- data ---------------------------------------------------------------- */

static float normal(e2e_rng *r) {
  double u1 = ((double)(e2e_rng_next(r) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(e2e_rng_next(r) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void fill_tensor(e2e_rng *r, unsigned char *p, size_t n, e2e_data kind) {
  size_t elem = kind == E2E_F32 ? 4 : 2, i = 0;
  for (; i + elem <= n; i += elem) {
    float f = normal(r);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (kind == E2E_F32) {
      memcpy(p + i, &bits, 4);
    } else {
      uint16_t h = (uint16_t)(bits >> 16);
      memcpy(p + i, &h, 2);
    }
  }
  e2e_rng_bytes(r, p + i, n - i);
}

void e2e_fill(e2e_rng *r, void *buf, size_t n, size_t tensor, e2e_data kind) {
  unsigned char *p = buf;
  for (size_t at = 0; at < n; at += tensor) {
    size_t len = n - at < tensor ? n - at : tensor;
    uint64_t roll = e2e_rng_below(r, 100);
    if (roll < 2)
      e2e_rng_bytes(r, p + at, len);
    else if (roll < 3)
      memset(p + at, 0, len);
    else
      fill_tensor(r, p + at, len, kind);
  }
}

/* ---- regions ------------------------------------------------------------- */

void e2e_region_alloc(e2e_region *r) {
  void *p = NULL;
  r->mirror = NULL;
  switch (r->alloc) {
  case E2E_MALLOC_HOST:
    E2E_CK(cudaMallocHost(&p, r->size));
    break;
  case E2E_HOST_ALLOC:
    E2E_CK(cudaHostAlloc(&p, r->size, r->flags));
    break;
  case E2E_REGISTER: {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    r->map_len = (r->misalign + r->size + page - 1) / page * page;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    E2E_SYS(r->map != MAP_FAILED);
    p = r->map + r->misalign;
    e2e_region_expect_map(r, 0, r->map_len, r->map); /* the slack's pattern */
    E2E_CK(cudaHostRegister(p, r->size, r->flags));
    break;
  }
  }
  r->host = p;
  r->mirror = malloc(r->size);
  E2E_SYS(r->mirror != NULL);
}

void e2e_region_free(e2e_region *r) {
  if (r->alloc == E2E_REGISTER) {
    E2E_CK(cudaHostUnregister(r->host));
    E2E_SYS(munmap(r->map, r->map_len) == 0);
    r->map = NULL;
  } else {
    E2E_CK(cudaFreeHost(r->host));
  }
  free(r->mirror);
  r->host = r->mirror = NULL;
}

void e2e_region_expect_map(const e2e_region *r, size_t off, size_t len,
                           unsigned char *out) {
  for (size_t i = 0; i < len; i++) {
    size_t at = off + i;
    out[i] = at >= r->misalign && at - r->misalign < r->size && r->mirror
                 ? r->mirror[at - r->misalign]
                 : (unsigned char)(at * 131 + 7);
  }
}

void e2e_region_fill(e2e_region *r, e2e_rng *rng) {
  e2e_fill(rng, r->mirror, r->size, r->tensor, r->data);
  memcpy(r->host, r->mirror, r->size);
}

int e2e_region_check_host(const e2e_region *r, const char *when) {
  if (memcmp(r->host, r->mirror, r->size) == 0)
    return 0;
  size_t i = 0;
  while (r->host[i] == r->mirror[i])
    i++;
  e2e_fail("%s: the host bytes of region '%s' changed behind the program's "
           "back: offset %zu is 0x%02x, the program wrote 0x%02x",
           when, r->name ? r->name : "(none)", i, r->host[i], r->mirror[i]);
  return 1;
}

const char *e2e_regions_env(const e2e_region *regs, int n) {
  static char spec[1024];
  size_t at = 0;
  spec[0] = 0;
  /* IBP_E2E_MODE=compact: every region in that mode (the compact twins) */
  const char *mode = getenv("IBP_E2E_MODE");
  for (int i = 0; i < n; i++) {
    if (!regs[i].name)
      continue;
    at += (size_t)snprintf(
        spec + at, sizeof spec - at, "%ssize=%zu,tensor=%zu,name=%s%s%s%s%s",
        at ? ";" : "", regs[i].size, regs[i].tensor, regs[i].name,
        mode ? ",mode=" : "", mode ? mode : "", regs[i].keys ? "," : "",
        regs[i].keys ? regs[i].keys : "");
    if (at >= sizeof spec)
      e2e_die("IBP_REGIONS value too long");
  }
  const char *cur = getenv("IBP_REGIONS");
  if (!cur) {
    E2E_SYS(setenv("IBP_REGIONS", spec, 1) == 0);
    e2e_note("IBP_REGIONS was unset; using '%s'", spec);
  } else if (strcmp(cur, spec) != 0) {
    e2e_note("note: IBP_REGIONS is '%s'; this program's regions want '%s'", cur,
             spec);
  }
  return spec;
}

/* ---- copies -------------------------------------------------------------- */

const char *e2e_api_name(e2e_api api) {
  static const char *const names[] = {"cudaMemcpy(H2D)", "cudaMemcpy(Default)",
                                      "cudaMemcpyAsync(H2D)",
                                      "cudaMemcpyAsync(Default)"};
  return api < E2E_API_COUNT ? names[api] : "?";
}

const char *e2e_stream_name(cudaStream_t s, char buf[24]) {
  if (s == 0)
    return "0";
  if (s == cudaStreamLegacy)
    return "cudaStreamLegacy";
  if (s == cudaStreamPerThread)
    return "cudaStreamPerThread";
  snprintf(buf, 24, "%p", (void *)s);
  return buf;
}

static cudaError_t h2d(void *dst, const void *src, size_t n, e2e_api api,
                       cudaStream_t s) {
  switch (api) {
  case E2E_SYNC_H2D:
    return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
  case E2E_SYNC_DEFAULT:
    return cudaMemcpy(dst, src, n, cudaMemcpyDefault);
  case E2E_ASYNC_H2D:
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s);
  default:
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s);
  }
}

/* New canary bytes over [0, n) of the buffer, uploaded from pageable
 * memory with a cudaMemcpyDefault copy (so the canary never adds an
 * application call of the H2D entry points). */
static void canary(e2e_batch *b, size_t n) {
  e2e_rng_bytes(&b->rng, b->image, n);
  E2E_CK(cudaMemcpy(b->dev, b->image, n, cudaMemcpyDefault));
  b->used = 0;
  b->ncopies = 0;
}

void e2e_batch_init(e2e_batch *b, size_t cap, uint64_t stream_no) {
  memset(b, 0, sizeof *b);
  b->cap = cap;
  b->maxcopies = 4096;
  E2E_CK(cudaMalloc((void **)&b->dev, cap));
  b->image = malloc(cap);
  b->readback = malloc(cap);
  b->copies = malloc(sizeof *b->copies * (size_t)b->maxcopies);
  E2E_SYS(b->image && b->readback && b->copies);
  e2e_rng_seed(&b->rng, e2e_seed(), 0xCA4A000 + stream_no);
  b->label = "";
  canary(b, cap);
}

void e2e_batch_destroy(e2e_batch *b) {
  E2E_CK(cudaFree(b->dev));
  free(b->image);
  free(b->readback);
  free(b->copies);
}

int e2e_batch_fits(const e2e_batch *b, size_t len) {
  return b->ncopies < b->maxcopies && b->used + 63 + len + 64 <= b->cap;
}

static void describe(const e2e_copy *c, char *buf, size_t cap) {
  char sb[24];
  snprintf(buf, cap, "copy #%lu %s of %s+%zu (%zu bytes) to device +%zu%s%s",
           c->serial, e2e_api_name(c->api),
           c->src ? c->src->name ? c->src->name : "(pinned, no rule)" : c->what,
           c->src_off, c->len, c->dst_off,
           c->api >= E2E_ASYNC_H2D ? " on stream " : "",
           c->api >= E2E_ASYNC_H2D ? e2e_stream_name(c->stream, sb) : "");
}

static void issue(e2e_batch *b, e2e_copy *c, const void *from,
                  const void *expect) {
  if (!e2e_batch_fits(b, c->len))
    e2e_die("%s: batch full (test bug)", b->label);
  c->dst_off = b->used + (size_t)e2e_rng_below(&b->rng, 64);
  c->serial = ++b->serial;
  cudaError_t e = h2d(b->dev + c->dst_off, from, c->len, c->api, c->stream);
  if (e != cudaSuccess) {
    char what[256];
    describe(c, what, sizeof what);
    fprintf(stderr, "%s: CUDA call failed: %s%s -> %s\n", prog, b->label, what,
            cudaGetErrorName(e));
    exit(E2E_EXIT_CUDA);
  }
  memcpy(b->image + c->dst_off, expect, c->len);
  b->used = c->dst_off + c->len;
  b->copies[b->ncopies++] = *c;
}

void e2e_batch_copy(e2e_batch *b, const e2e_region *src, size_t off, size_t len,
                    e2e_api api, cudaStream_t stream) {
  e2e_copy c = {
      .src = src, .src_off = off, .len = len, .api = api, .stream = stream};
  issue(b, &c, src->host + off, src->mirror + off);
}

void e2e_batch_copy_buf(e2e_batch *b, const char *what, size_t off,
                        const void *from, const void *expect, size_t len,
                        e2e_api api, cudaStream_t stream) {
  e2e_copy c = {
      .what = what, .src_off = off, .len = len, .api = api, .stream = stream};
  issue(b, &c, from, expect);
}

static void report(const e2e_batch *b, size_t at, size_t n) {
  size_t wrong = 0;
  for (size_t i = at; i < n; i++)
    wrong += b->readback[i] != b->image[i];
  const e2e_copy *c = NULL;
  for (int i = 0; i < b->ncopies; i++)
    if (at >= b->copies[i].dst_off &&
        at < b->copies[i].dst_off + b->copies[i].len)
      c = &b->copies[i];
  if (!c) {
    e2e_fail("%sdevice byte +%zu outside every copy was overwritten: "
             "expected canary 0x%02x, got 0x%02x; %zu wrong bytes in this "
             "batch of %d copies",
             b->label, at, b->image[at], b->readback[at], wrong, b->ncopies);
    return;
  }
  char what[256];
  describe(c, what, sizeof what);
  size_t k = at - c->dst_off, off = c->src_off + k;
  size_t tensor = c->src ? c->src->tensor : 0;
  char where[96] = "";
  if (tensor)
    snprintf(where, sizeof where, ", tensor %zu byte %zu of %zu", off / tensor,
             off % tensor, tensor);
  e2e_fail("%s%s: byte %zu of the copy (source offset %zu%s): expected 0x%02x, "
           "got 0x%02x; %zu wrong bytes in this batch of %d copies",
           b->label, what, k, off, where, b->image[at], b->readback[at], wrong,
           b->ncopies);
}

int e2e_batch_verify(e2e_batch *b, const cudaStream_t *streams, int nstreams) {
  if (b->device_sync_only || nstreams == 0 || e2e_rng_pct(&b->rng, 50)) {
    E2E_CK(cudaDeviceSynchronize());
  } else {
    for (int i = 0; i < nstreams; i++)
      E2E_CK(cudaStreamSynchronize(streams[i]));
  }
  size_t n = b->used + 64 < b->cap ? b->used + 64 : b->cap;
  E2E_CK(cudaMemcpy(b->readback, b->dev, n, cudaMemcpyDeviceToHost));
  int bad = memcmp(b->readback, b->image, n) != 0;
  if (bad) {
    size_t at = 0;
    while (b->readback[at] == b->image[at])
      at++;
    report(b, at, n);
  }
  canary(b, n);
  return bad;
}

/* ---- random copies ------------------------------------------------------- */

typedef struct pick {
  const e2e_region *src; /* NULL: the pageable buffer */
  size_t size, tensor, off, len;
  size_t max; /* longest copy */
} pick;

/* A range of src: whole tensors (may include the tail), one ending at the
 * end, or anything. */
static void pick_range(e2e_rng *r, pick *p) {
  size_t max = p->size < p->max ? p->size : p->max;
  uint64_t shape = e2e_rng_below(r, 100);
  size_t full = p->size / p->tensor;
  if (shape < 35 && full > 0) {
    size_t t = (size_t)e2e_rng_below(r, full + 1);
    size_t k = e2e_rng_len(r, max / p->tensor ? max / p->tensor : 1);
    p->off = t == full ? p->size - (p->size % p->tensor ? p->size % p->tensor
                                                        : p->tensor)
                       : t * p->tensor;
    p->len = k * p->tensor;
    if (p->len > p->size - p->off)
      p->len = p->size - p->off;
    if (p->len > max)
      p->len = max;
  } else if (shape < 50) {
    p->len = e2e_rng_len(r, max);
    p->off = p->size - p->len;
  } else {
    p->len = e2e_rng_len(r, max);
    p->off = (size_t)e2e_rng_below(r, p->size - p->len + 1);
  }
}

/* A range of r's mapping that straddles the start or the end of r (r is
 * registered and there is slack on that side); 0 when there is none. */
static int pick_straddle(e2e_rng *rng, const e2e_region *r, pick *p) {
  size_t after = r->map_len - r->misalign - r->size;
  size_t max = p->max / 2 < r->size ? p->max / 2 : r->size;
  if (r->alloc != E2E_REGISTER || (r->misalign == 0 && after == 0))
    return 0;
  if (r->misalign && (after == 0 || e2e_rng_pct(rng, 50))) {
    p->off = (size_t)e2e_rng_below(rng, r->misalign);
    p->len = r->misalign - p->off + e2e_rng_len(rng, max);
  } else {
    size_t in = e2e_rng_len(rng, max);
    p->off = r->misalign + r->size - in;
    p->len = in + 1 + (size_t)e2e_rng_below(rng, after);
  }
  return 1;
}

static void copy_straddle(e2e_batch *b, const e2e_region *r, const pick *p,
                          e2e_api api, cudaStream_t s) {
  unsigned char *expect = malloc(p->len);
  E2E_SYS(expect != NULL);
  e2e_region_expect_map(r, p->off, p->len, expect);
  e2e_batch_copy_buf(b, "the mapping around a registered region", p->off,
                     r->map + p->off, expect, p->len, api, s);
  free(expect);
}

/* Stores new bytes over an eighth of a random region of the plan (and its
 * mirror); no copy is in flight. */
static void random_write(const e2e_random_plan *plan, e2e_rng *rng) {
  e2e_region *r = &plan->regions[e2e_rng_below(rng, (uint64_t)plan->nregions)];
  size_t len = r->size / 8, off = (size_t)e2e_rng_below(rng, r->size - len);
  e2e_fill(rng, r->mirror + off, len, r->tensor, r->data);
  memcpy(r->host + off, r->mirror + off, len);
}

int e2e_random_copies(e2e_batch *b, const e2e_random_plan *plan, e2e_rng *rng) {
  for (unsigned long done = 0; done < plan->copies; done++) {
    pick p = {.max = plan->max_copy ? plan->max_copy : E2E_MAX_COPY};
    if (plan->pageable && e2e_rng_pct(rng, 5)) {
      p.size = plan->pageable_len;
      p.tensor = 4096;
    } else {
      p.src = &plan->regions[e2e_rng_below(rng, (uint64_t)plan->nregions)];
      p.size = p.src->size;
      p.tensor = p.src->tensor;
    }
    int straddle =
        p.src && e2e_rng_pct(rng, 3) && pick_straddle(rng, p.src, &p);
    if (!straddle)
      pick_range(rng, &p);
    e2e_api api =
        plan->default_kind_only
            ? (e2e_rng_pct(rng, 50) ? E2E_SYNC_DEFAULT : E2E_ASYNC_DEFAULT)
            : (e2e_api)e2e_rng_below(rng, E2E_API_COUNT);
    cudaStream_t s = 0;
    if ((api == E2E_ASYNC_H2D || api == E2E_ASYNC_DEFAULT) && plan->nstreams)
      s = plan->streams[e2e_rng_below(rng, (uint64_t)plan->nstreams)];
    /* with writes, also every 4th copy: they follow a verification */
    if (!e2e_batch_fits(b, p.len) || (plan->writes && done % 4 == 3)) {
      if (e2e_batch_verify(b, plan->streams, plan->nstreams))
        return 1;
      if (plan->writes)
        random_write(plan, rng);
    }
    if (straddle)
      copy_straddle(b, p.src, &p, api, s);
    else if (p.src)
      e2e_batch_copy(b, p.src, p.off, p.len, api, s);
    else
      e2e_batch_copy_buf(
          b, "pageable", p.off, (const unsigned char *)plan->pageable + p.off,
          (const unsigned char *)plan->pageable + p.off, p.len, api, s);
  }
  return e2e_batch_verify(b, plan->streams, plan->nstreams);
}

/* ---- files --------------------------------------------------------------- */

int e2e_temp_file(const void *data, size_t n) {
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/ibp-e2e-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  E2E_SYS(fd >= 0);
  E2E_SYS(unlink(path) == 0);
  const unsigned char *p = data;
  for (size_t at = 0; at < n;) {
    ssize_t w = write(fd, p + at, n - at);
    E2E_SYS(w > 0);
    at += (size_t)w;
  }
  E2E_SYS(lseek(fd, 0, SEEK_SET) == 0);
  return fd;
}
