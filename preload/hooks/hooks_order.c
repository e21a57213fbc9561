/* Hooks of the driver entry points that matter to libibp only as ordering
 * points of batched launches (order.def): each launches what must run
 * before the call, then calls the driver's own function. */
#include "hooks/hooks.h"
#include "serve/batch/batch.h"
#include "serve/choose/streams.h"

#define IBP_LEGACY(s) ((s) ? (s) : CU_STREAM_LEGACY)
#define IBP_PER_THREAD(s) ((s) ? (s) : CU_STREAM_PER_THREAD)

#define IBP_ORDER(sym, params, args, stream)                                   \
  CUresult ibp__hook_##sym params {                                            \
    ibp__batch_order(stream);                                                  \
    return ibp__real_##sym args;                                               \
  }
#include "hooks/order.def"
#undef IBP_ORDER

CUresult ibp__hook_cuStreamDestroy_v2(CUstream s) {
  ibp__batch_stream_end(s);
  ibp__streams_forget(s);
  return ibp__real_cuStreamDestroy_v2(s);
}

/* order.def's rows that cuda.h renames by macro (see there) */
CUresult ibp__hook_cuStreamWaitValue32(CUstream s, CUdeviceptr a, cuuint32_t v,
                                       unsigned f) {
  ibp__batch_order(IBP_LEGACY(s));
  return ibp__real_cuStreamWaitValue32(s, a, v, f);
}

CUresult ibp__hook_cuStreamWaitValue64(CUstream s, CUdeviceptr a, cuuint64_t v,
                                       unsigned f) {
  ibp__batch_order(IBP_LEGACY(s));
  return ibp__real_cuStreamWaitValue64(s, a, v, f);
}

CUresult ibp__hook_cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dev,
                                      CUstream s) {
  ibp__batch_order(IBP_LEGACY(s));
  return ibp__real_cuMemPrefetchAsync(p, n, dev, s);
}
