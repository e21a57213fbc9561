/* CPU path selection (decided once by CPUID), the lookup tables the paths
 * share, and the small thread helpers of the codec. */
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

/* ---- CPUID --------------------------------------------------------------- */

static int cpu_has_bmi2(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return 0;
  return (b >> 8) & 1;
}

/* AMD before Zen 3 (family 0x19) runs pext/pdep in microcode, slower than
 * the table path. */
static int cpu_bmi2_is_slow(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return 0;
  int amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;
  if (!amd || !__get_cpuid(1, &a, &b, &c, &d))
    return 0;
  unsigned family = (a >> 8) & 0xF;
  if (family == 0xF)
    family += (a >> 20) & 0xFF;
  return family < 0x19;
}

static const ibp__pack_ops *active_pack;
static ibp_impl active_impl;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static void select_default(void) {
  int fast = cpu_has_bmi2() && !cpu_bmi2_is_slow();
  active_impl = fast ? IBP_IMPL_BMI2 : IBP_IMPL_PORTABLE;
  active_pack = fast ? &ibp__pack_bmi2 : &ibp__pack_portable;
}

const ibp__pack_ops *ibp__pack(void) {
  pthread_once(&select_once, select_default);
  return active_pack;
}

ibp_impl ibp_impl_active(void) {
  pthread_once(&select_once, select_default);
  return active_impl;
}

int ibp_impl_available(ibp_impl impl) {
  switch (impl) {
  case IBP_IMPL_AUTO:
  case IBP_IMPL_PORTABLE:
    return 1;
  case IBP_IMPL_BMI2:
    return cpu_has_bmi2();
  }
  return 0;
}

ibp_status ibp_impl_select(ibp_impl impl) {
  pthread_once(&select_once, select_default);
  if (!ibp_impl_available(impl))
    return impl == IBP_IMPL_BMI2 ? IBP_ERR_UNSUPPORTED
                                 : IBP_ERR_INVALID_ARGUMENT;
  if (impl == IBP_IMPL_AUTO) {
    select_default();
  } else {
    active_impl = impl;
    active_pack = impl == IBP_IMPL_BMI2 ? &ibp__pack_bmi2 : &ibp__pack_portable;
  }
  return IBP_OK;
}

const char *ibp_impl_name(ibp_impl impl) {
  switch (impl) {
  case IBP_IMPL_AUTO:
    return "auto";
  case IBP_IMPL_PORTABLE:
    return "portable";
  case IBP_IMPL_BMI2:
    return "bmi2";
  }
  return "unknown";
}

/* ---- tables -------------------------------------------------------------- */

static uint64_t nonfit[IBP_CHUNK_WIDTH_MAX + 1][256]; /* [c][fit bits] */
static uint8_t pext8[256][256];
static uint8_t pdep8[256][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_nonfit(uint32_t c) {
  uint32_t k = 8 / c;
  for (uint32_t f = 0; f < (1u << k); f++) {
    uint64_t nf = 0;
    for (uint32_t j = 0; j < k; j++)
      if (!((f >> j) & 1))
        for (uint32_t byte = j * c; byte < (j + 1) * c; byte++)
          nf |= 0xFFULL << (8 * byte);
    nonfit[c][f] = nf;
  }
}

static void build_byte_tables(void) {
  for (unsigned m = 0; m < 256; m++) {
    for (unsigned v = 0; v < 256; v++) {
      unsigned ext = 0, dep = 0, n = 0;
      for (unsigned bit = 0; bit < 8; bit++) {
        if (!((m >> bit) & 1))
          continue;
        ext |= ((v >> bit) & 1) << n;
        dep |= ((v >> n) & 1) << bit;
        n++;
      }
      pext8[m][v] = (uint8_t)ext;
      pdep8[m][v] = (uint8_t)dep;
    }
  }
}

static void build_tables(void) {
  for (unsigned i = 0; i < IBP_CHUNK_WIDTH_COUNT; i++)
    build_nonfit(ibp_chunk_width(i));
  build_byte_tables();
}

const uint64_t *ibp__nonfit_table(uint32_t c) {
  pthread_once(&tables_once, build_tables);
  return nonfit[c];
}

const uint8_t (*ibp__pext8_table(void))[256] {
  pthread_once(&tables_once, build_tables);
  return (const uint8_t(*)[256])pext8;
}

const uint8_t (*ibp__pdep8_table(void))[256] {
  pthread_once(&tables_once, build_tables);
  return (const uint8_t(*)[256])pdep8;
}

/* ---- threads ------------------------------------------------------------- */

unsigned ibp__threads(unsigned requested) {
  if (requested)
    return requested > 256 ? 256 : requested;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
}

typedef struct task {
  ibp__task_fn fn;
  void *arg;
} task;

static void *task_main(void *p) {
  task *t = p;
  t->fn(t->arg);
  return NULL;
}

/* A thread that cannot start runs its share in the caller instead, so the
 * work always completes. */
ibp_status ibp__run_parallel(ibp__task_fn fn, void *args, size_t arg_size,
                             unsigned n) {
  if (n <= 1) {
    if (n == 1)
      fn(args);
    return IBP_OK;
  }
  pthread_t *tid = calloc(n, sizeof *tid);
  task *tasks = calloc(n, sizeof *tasks);
  unsigned char *started = calloc(n, 1);
  if (!tid || !tasks || !started) {
    free(tid);
    free(tasks);
    free(started);
    for (unsigned i = 0; i < n; i++)
      fn((char *)args + i * arg_size);
    return IBP_OK;
  }
  for (unsigned i = 1; i < n; i++) {
    tasks[i] = (task){fn, (char *)args + i * arg_size};
    started[i] = pthread_create(&tid[i], NULL, task_main, &tasks[i]) == 0;
  }
  fn(args);
  for (unsigned i = 1; i < n; i++) {
    if (started[i])
      pthread_join(tid[i], NULL);
    else
      fn(tasks[i].arg);
  }
  free(tid);
  free(tasks);
  free(started);
  return IBP_OK;
}
