/* Simulated CUDA runtime: what its source files share.
 *
 * The runtime reaches the driver only through cudartsim__drv, a table filled
 * at first use by loader.c exactly the way NVIDIA's cudart 13 fills its own:
 * dlopen("libcuda.so.1"), one dlsym(handle, "cuGetProcAddress_v2"), then one
 * cuGetProcAddress_v2(name, version, flags) lookup per entry of
 * driver_table.def.  Each slot holds two pointers: [CUDARTSIM_LEGACY] was
 * resolved with flags 0, [CUDARTSIM_PTDS] with flags 2 (the _ptds / _ptsz
 * variant; NULL for entry points that have none).
 *
 * Threading: the table is written once under pthread_once and read-only
 * afterwards.  Each thread has its own current device and its own last error
 * (errors.c, device.c).  Internal names carry the cudartsim__ prefix so the
 * static archive cannot collide with an application's symbols; in the shared
 * library they are hidden and only the CUDA API is exported
 * (libcudart.map). */
#ifndef CUDART_SIM_INTERNAL_H
#define CUDART_SIM_INTERNAL_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <stddef.h>

/* Marks the functions the library exports (it is built -fvisibility=hidden). */
#define CUDARTSIM_API __attribute__((visibility("default")))

enum { CUDARTSIM_LEGACY = 0, CUDARTSIM_PTDS = 1 };

/* Upper bound on the devices the runtime tracks state for. */
#define CUDARTSIM_MAX_DEVICES 64

struct cudartsim__driver {
#define X(slot, pfn, name, version, ptds_version) pfn slot[2];
#include "driver_table.def"
#undef X
};

extern struct cudartsim__driver cudartsim__drv;

/* Calls driver entry point `fn` (a table slot) and maps its CUresult to a
 * cudaError_t; a slot the driver could not resolve yields
 * cudaErrorCallRequiresNewerDriver instead of a call through NULL. */
#define CUDARTSIM_CALL(fn, ...)                                                \
  ((fn) ? cudartsim__from_cu((fn)(__VA_ARGS__))                                \
        : cudaErrorCallRequiresNewerDriver)

/* The flags-0 (legacy) and the per-thread variant of a slot. */
#define DRV(slot) (cudartsim__drv.slot[CUDARTSIM_LEGACY])
#define DRV_PT(slot, pt) (cudartsim__drv.slot[(pt)])

/* ---- loader.c ------------------------------------------------------------ */

/* Loads the driver and fills cudartsim__drv, once per process.  Returns
 * cudaSuccess, or cudaErrorInsufficientDriver when libcuda.so.1 or
 * cuGetProcAddress_v2 is missing. */
cudaError_t cudartsim__load_driver(void);

/* cudartsim__load_driver, then cuInit(0), the driver version check and the
 * device count, once per process.  Returns the (process-wide, permanent)
 * initialization status: cudaSuccess, cudaErrorInsufficientDriver,
 * cudaErrorNoDevice, or the mapped cuInit error. */
cudaError_t cudartsim__init(void);

/* The number of devices found by cudartsim__init (0 before it succeeded). */
int cudartsim__device_count(void);

/* Writes a "[cudart-sim] ..." line on stderr when CUDARTSIM_LOG is set. */
void cudartsim__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- errors.c ------------------------------------------------------------ */

/* Maps a driver result to the runtime's code (curesult_map.def). */
cudaError_t cudartsim__from_cu(CUresult r);

/* The exit of every API function: records a failure as the calling thread's
 * last error (cudaErrorNotReady is a status, never recorded), marks a sticky
 * error on the current device, and returns `e`. */
cudaError_t cudartsim__ret(cudaError_t e);

/* 1 when `e` corrupts the device context (cudart_errors.def), else 0. */
int cudartsim__is_sticky(cudaError_t e);

/* ---- device.c ------------------------------------------------------------ */

/* The entry of every API function that needs a context: initializes the
 * runtime, returns the current device's sticky error if there is one, and
 * makes the device's primary context current on this thread unless the
 * application made a context of its own current through the driver API. */
cudaError_t cudartsim__enter(void);

/* vclock.c: charges the calling thread the runtime's share of a queued
 * call's CPU cost on the simulated GPU's virtual clock (runtime_call_us of
 * the profile; the driver charges its own share). */
void cudartsim__charge_call(void);

/* The calling thread's current device (0 until cudaSetDevice). */
int cudartsim__current_device(void);

/* The primary context of device `dev` (retained on first use), or
 * cudaErrorInvalidDevice. */
cudaError_t cudartsim__primary_of(int dev, CUcontext *out);

/* Records sticky error `e` on device `dev` (first one wins). */
void cudartsim__set_sticky(int dev, cudaError_t e);

/* The sticky error of device `dev`, or cudaSuccess. */
cudaError_t cudartsim__sticky(int dev);

/* ---- copies, sets, streams, events: shared by the legacy exports and the
 * per-thread (_ptds/_ptsz) exports in ptds.c; `pt` picks the driver variant
 * (CUDARTSIM_LEGACY or CUDARTSIM_PTDS).  The stream handle is passed to the
 * driver unchanged, so stream 0 means the legacy default stream to a flags-0
 * variant and the calling thread's default stream to a _ptsz variant. */

cudaError_t cudartsim__memcpy(void *dst, const void *src, size_t count,
                              enum cudaMemcpyKind kind, cudaStream_t stream,
                              int async, int pt);
cudaError_t cudartsim__memset(void *dst, int value, size_t count,
                              cudaStream_t stream, int async, int pt);
cudaError_t cudartsim__memcpy_2d(void *dst, size_t dpitch, const void *src,
                                 size_t spitch, size_t width, size_t height,
                                 enum cudaMemcpyKind kind, cudaStream_t stream,
                                 int async, int pt);
cudaError_t cudartsim__memcpy_batch(void *const *dsts, const void *const *srcs,
                                    const size_t *sizes, size_t count,
                                    struct cudaMemcpyAttributes *attrs,
                                    size_t *attrs_idxs, size_t num_attrs,
                                    cudaStream_t stream, int pt);
cudaError_t cudartsim__stream_synchronize(cudaStream_t stream, int pt);
cudaError_t cudartsim__stream_query(cudaStream_t stream, int pt);
cudaError_t cudartsim__stream_wait_event(cudaStream_t stream, cudaEvent_t event,
                                         unsigned int flags, int pt);
cudaError_t cudartsim__stream_get_flags(cudaStream_t stream,
                                        unsigned int *flags, int pt);
cudaError_t cudartsim__stream_get_priority(cudaStream_t stream, int *priority,
                                           int pt);
cudaError_t cudartsim__launch_host_func(cudaStream_t stream, cudaHostFn_t fn,
                                        void *user_data, int pt);
cudaError_t cudartsim__event_record(cudaEvent_t event, cudaStream_t stream,
                                    unsigned int flags, int with_flags, int pt);

/* launch.c: a launch of the kernel whose host stub is `func` (both
 * cudaLaunchKernel exports): the simulated GPU runs no program's kernels, so
 * cudaErrorNoKernelImageForDevice for a registered one (explained once on
 * stderr), cudaErrorInvalidDeviceFunction for anything else; recorded as the
 * last error. */
cudaError_t cudartsim__launch_stub(const void *func);

#endif
