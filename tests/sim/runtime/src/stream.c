/* Streams and events, and their legacy-default-stream exports.
 *
 * cudaStream_t and cudaEvent_t are the driver's CUstream and CUevent; the
 * special handles cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2) equal
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, so every handle is passed on
 * unchanged.  Stream and event flags share their values with the driver's
 * (cudaStreamNonBlocking = CU_STREAM_NON_BLOCKING, cudaEvent* = CU_EVENT_*,
 * cudaEventWaitExternal = CU_EVENT_WAIT_EXTERNAL,
 * cudaEventRecordExternal = CU_EVENT_RECORD_EXTERNAL). */
#include "cudart_internal.h"

#define STREAM_FLAGS (cudaStreamNonBlocking)
#define EVENT_FLAGS                                                            \
  (cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)

static int is_builtin_stream(cudaStream_t s) {
  return s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

static cudaError_t stream_create(cudaStream_t *stream, unsigned int flags,
                                 int priority, int with_priority) {
  if (!stream || (flags & ~(unsigned)STREAM_FLAGS))
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  CUstream s = NULL;
  if (with_priority)
    e = CUDARTSIM_CALL(DRV(StreamCreateWithPriority), &s, flags, priority);
  else
    e = CUDARTSIM_CALL(DRV(StreamCreate), &s, flags);
  if (e == cudaSuccess)
    *stream = (cudaStream_t)s;
  return e;
}

CUDARTSIM_API cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  return cudartsim__ret(stream_create(pStream, cudaStreamDefault, 0, 0));
}

CUDARTSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
                                                    unsigned int flags) {
  return cudartsim__ret(stream_create(pStream, flags, 0, 0));
}

CUDARTSIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream,
                                                       unsigned int flags,
                                                       int priority) {
  return cudartsim__ret(stream_create(pStream, flags, priority, 1));
}

CUDARTSIM_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (is_builtin_stream(stream))
    return cudartsim__ret(cudaErrorInvalidResourceHandle);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(StreamDestroy), (CUstream)stream);
  return cudartsim__ret(e);
}

cudaError_t cudartsim__stream_synchronize(cudaStream_t stream, int pt) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  return CUDARTSIM_CALL(DRV_PT(StreamSynchronize, pt), (CUstream)stream);
}

cudaError_t cudartsim__stream_query(cudaStream_t stream, int pt) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  return CUDARTSIM_CALL(DRV_PT(StreamQuery, pt), (CUstream)stream);
}

cudaError_t cudartsim__stream_wait_event(cudaStream_t stream, cudaEvent_t event,
                                         unsigned int flags, int pt) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  cudartsim__charge_call();
  return CUDARTSIM_CALL(DRV_PT(StreamWaitEvent, pt), (CUstream)stream,
                        (CUevent)event, flags);
}

cudaError_t cudartsim__stream_get_flags(cudaStream_t stream,
                                        unsigned int *flags, int pt) {
  if (!flags)
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  return CUDARTSIM_CALL(DRV_PT(StreamGetFlags, pt), (CUstream)stream, flags);
}

cudaError_t cudartsim__stream_get_priority(cudaStream_t stream, int *priority,
                                           int pt) {
  if (!priority)
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  return CUDARTSIM_CALL(DRV_PT(StreamGetPriority, pt), (CUstream)stream,
                        priority);
}

cudaError_t cudartsim__launch_host_func(cudaStream_t stream, cudaHostFn_t fn,
                                        void *user_data, int pt) {
  if (!fn)
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  cudartsim__charge_call();
  return CUDARTSIM_CALL(DRV_PT(LaunchHostFunc, pt), (CUstream)stream,
                        (CUhostFn)fn, user_data);
}

cudaError_t cudartsim__event_record(cudaEvent_t event, cudaStream_t stream,
                                    unsigned int flags, int with_flags,
                                    int pt) {
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  cudartsim__charge_call();
  if (with_flags)
    return CUDARTSIM_CALL(DRV_PT(EventRecordWithFlags, pt), (CUevent)event,
                          (CUstream)stream, flags);
  return CUDARTSIM_CALL(DRV_PT(EventRecord, pt), (CUevent)event,
                        (CUstream)stream);
}

CUDARTSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return cudartsim__ret(
      cudartsim__stream_synchronize(stream, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudartsim__ret(cudartsim__stream_query(stream, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream,
                                              cudaEvent_t event,
                                              unsigned int flags) {
  return cudartsim__ret(
      cudartsim__stream_wait_event(stream, event, flags, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t hStream,
                                             unsigned int *flags) {
  return cudartsim__ret(
      cudartsim__stream_get_flags(hStream, flags, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaStreamGetPriority(cudaStream_t hStream,
                                                int *priority) {
  return cudartsim__ret(
      cudartsim__stream_get_priority(hStream, priority, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream,
                                             cudaHostFn_t fn, void *userData) {
  return cudartsim__ret(
      cudartsim__launch_host_func(stream, fn, userData, CUDARTSIM_LEGACY));
}

/* ---- events ------------------------------------------------------------- */

static cudaError_t event_create(cudaEvent_t *event, unsigned int flags) {
  if (!event || (flags & ~(unsigned)EVENT_FLAGS))
    return cudaErrorInvalidValue;
  cudaError_t e = cudartsim__enter();
  if (e != cudaSuccess)
    return e;
  CUevent ev = NULL;
  e = CUDARTSIM_CALL(DRV(EventCreate), &ev, flags);
  if (e == cudaSuccess)
    *event = (cudaEvent_t)ev;
  return e;
}

CUDARTSIM_API cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudartsim__ret(event_create(event, cudaEventDefault));
}

CUDARTSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event,
                                                   unsigned int flags) {
  return cudartsim__ret(event_create(event, flags));
}

CUDARTSIM_API cudaError_t cudaEventRecord(cudaEvent_t event,
                                          cudaStream_t stream) {
  return cudartsim__ret(
      cudartsim__event_record(event, stream, 0, 0, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event,
                                                   cudaStream_t stream,
                                                   unsigned int flags) {
  return cudartsim__ret(
      cudartsim__event_record(event, stream, flags, 1, CUDARTSIM_LEGACY));
}

CUDARTSIM_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(EventQuery), (CUevent)event);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(EventSynchronize), (CUevent)event);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(EventDestroy), (CUevent)event);
  return cudartsim__ret(e);
}

CUDARTSIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                               cudaEvent_t end) {
  if (!ms)
    return cudartsim__ret(cudaErrorInvalidValue);
  cudaError_t e = cudartsim__enter();
  if (e == cudaSuccess)
    e = CUDARTSIM_CALL(DRV(EventElapsedTime), ms, (CUevent)start, (CUevent)end);
  return cudartsim__ret(e);
}
