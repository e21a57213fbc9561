/* NVTX ranges around served copies (serve/nvtx.h). */
#include "serve/nvtx.h"

#ifdef IBP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain;

/* Without a tool, NVTX answers NULL: the ranges then go nowhere. */
static void create_domain(void) {
  domain = nvtxDomainCreateA("libibp");
}

void ibp__nvtx_copy_begin(const char *name, uint64_t bytes) {
  pthread_once(&once, create_domain);
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff3cb371; /* one colour for every served copy */
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = bytes;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx(domain, &a);
}

void ibp__nvtx_copy_end(void) {
  nvtxDomainRangePop(domain);
}
#else
typedef int ibp__nvtx_none; /* ISO C wants something in every file */
#endif
