/* A stand-in for Nsight Systems' NVTX injection library (nvtx.sh): loaded
 * through NVTX_INJECTION64_PATH by the NVTX 3 code inside libibp.so, it
 * counts the ranges opened and closed in the domain "libibp" and prints,
 * at exit, one line on stderr:
 *   nvtx: domain libibp: R ranges, C closed, B bytes, first 'NAME'  */
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int domain_tag; /* the handle given for "libibp" */
static atomic_ulong ranges, closed;
static _Atomic unsigned long long bytes;
static char first[64];
static atomic_int have_first;

static nvtxDomainHandle_t create_a(const char *name) {
  return strcmp(name, "libibp") == 0 ? (nvtxDomainHandle_t)&domain_tag : NULL;
}

static int push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  if (d != (nvtxDomainHandle_t)&domain_tag)
    return -1;
  atomic_fetch_add(&ranges, 1);
  if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64)
    atomic_fetch_add(&bytes, a->payload.ullValue);
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII &&
      !atomic_exchange(&have_first, 1))
    snprintf(first, sizeof first, "%s", a->message.ascii);
  return 0;
}

static int pop(nvtxDomainHandle_t d) {
  if (d == (nvtxDomainHandle_t)&domain_tag)
    atomic_fetch_add(&closed, 1);
  return 0;
}

static void report(void) {
  fprintf(
      stderr,
      "nvtx: domain libibp: %lu ranges, %lu closed, %llu bytes, first '%s'\n",
      atomic_load(&ranges), atomic_load(&closed), atomic_load(&bytes), first);
}

__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable t = NULL;
  unsigned n = 0;
  if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) || !t)
    return 0;
  *t[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)create_a;
  *t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push_ex;
  *t[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop;
  atexit(report);
  return 1;
}
