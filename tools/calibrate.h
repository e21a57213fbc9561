/*
 * `ibp calibrate`'s measurements (docs/PROFILE.md, "Calibration"): the
 * device cost profile parameters that CUDA events can time on one device,
 * by the same code on a GPU and on the simulated one.
 *
 * calibrate_gpu.c measures (it needs the CUDA toolkit's cuda.h and the
 * kernels' fatbin); calibrate_none.c, built instead when they are missing,
 * only says so.  Nothing here prints; a failure is one line in err.
 */
#ifndef IBP_TOOLS_CALIBRATE_H
#define IBP_TOOLS_CALIBRATE_H

#include <stddef.h>

#include "profile/profile.h"

/* One index per parameter of profile.def. */
enum {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what) CALIBRATE_##key,
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
  CALIBRATE_PARAMS
};

typedef struct calibrate_result {
  char device_name[256]; /* cuDeviceGetName */
  int simulated;         /* the simulated driver (tests/sim) answered */
  ibp_profile values;    /* the measured parameters (the rest: zero) */
  unsigned char measured[CALIBRATE_PARAMS]; /* 1: in `values` */
  char notes[1024]; /* what the caller should know about a value ("" or
                       lines of text, each ending in '\n') */
} calibrate_result;

/* Called once the device is open, before anything is measured, with its
 * name (cuDeviceGetName); nonzero stops the calibration (the callback
 * put a one-line message in err). */
typedef int (*calibrate_opened_fn)(const char *device_name, void *ctx,
                                   char *err, size_t errlen);

/* Measures device `device` (its ordinal) through libcuda.so.1: with
 * `quick`, smaller transfers and fewer repetitions (the simulated GPU).
 * `opened` (NULL: none) is called as above.  Each measured value lies
 * within its parameter's range (profile.def), whole where it must be.
 * Returns 0, or -1 with a one-line message in err (no driver, no such
 * device, a CUDA call that failed, a timing that makes no sense, or what
 * `opened` said). */
int calibrate_measure(int device, int quick, calibrate_opened_fn opened,
                      void *ctx, calibrate_result *out, char *err,
                      size_t errlen);

#endif /* IBP_TOOLS_CALIBRATE_H */
