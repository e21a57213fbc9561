/* CPU cost of the driver calls libibp makes per copy (not part of the
 * project: a device probe of stop 50). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 200000
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e9 * t.tv_sec + t.tv_nsec;
}
#define OK(x)                                                                  \
  do {                                                                         \
    CUresult e_ = (x);                                                         \
    if (e_) {                                                                  \
      printf("%s failed %d\n", #x, e_);                                        \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define TIME(name, stmt)                                                       \
  do {                                                                         \
    double t0 = now();                                                         \
    for (int i = 0; i < N; i++) {                                              \
      stmt;                                                                    \
    }                                                                          \
    printf("%-34s %8.1f ns\n", name, (now() - t0) / N);                        \
  } while (0)

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  CUdeviceptr d;
  void *h;
  OK(cuInit(0));
  OK(cuDeviceGet(&dev, 0));
  OK(cuDevicePrimaryCtxRetain(&ctx, dev));
  OK(cuCtxSetCurrent(ctx));
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(cuMemAlloc(&d, 1 << 20));
  OK(cuMemHostAlloc(&h, 1 << 20, CU_MEMHOSTALLOC_DEVICEMAP));
  unsigned type;
  CUdeviceptr base;
  size_t size;
  CUpointer_attribute what[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *out[] = {&type, &base, &size};
  CUstreamCaptureStatus cs;
  CUcontext c2;
  CUdevice d2;
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  CUevent ev;
  OK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
  struct timespec ts;
  TIME("clock_gettime(MONOTONIC)", clock_gettime(CLOCK_MONOTONIC, &ts));
  TIME("clock_gettime(THREAD_CPUTIME)",
       clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts));
  TIME("cuCtxGetCurrent", cuCtxGetCurrent(&c2));
  TIME("cuCtxGetDevice", cuCtxGetDevice(&d2));
  TIME("cuPointerGetAttributes(3)",
       cuPointerGetAttributes(3, what, out, d + 4096));
  TIME("cuStreamIsCapturing", cuStreamIsCapturing(s, &cs));
  TIME("cuThreadExchangeStreamCaptureMode x2",
       cuThreadExchangeStreamCaptureMode(&m);
       cuThreadExchangeStreamCaptureMode(&m));
  TIME("cuStreamQuery (idle)", cuStreamQuery(s));
  TIME("cuEventQuery (done)", cuEventQuery(ev));
  TIME("cuMemcpyHtoDAsync 400 B", cuMemcpyHtoDAsync(d, h, 400, s);
       if ((i & 1023) == 1023) cuStreamSynchronize(s));
  OK(cuStreamSynchronize(s));
  TIME("cuEventRecord", cuEventRecord(ev, s);
       if ((i & 1023) == 1023) cuStreamSynchronize(s));
  OK(cuStreamSynchronize(s));
  FILE *f = fopen(
      "/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  char buf[64] = "?";
  if (f && fgets(buf, sizeof buf, f))
    printf("clocksource %s", buf);
  return 0;
}
