/* `ibp calibrate` in a build without the CUDA toolkit (cuda.h) or the
 * kernels' fatbin (nvcc): nothing can be measured (calibrate.h). */
#include "calibrate.h"

#include <stdio.h>
#include <string.h>

int calibrate_measure(int device, int quick, calibrate_opened_fn opened,
                      void *ctx, calibrate_result *out, char *err,
                      size_t errlen) {
  (void)device;
  (void)quick;
  (void)opened;
  (void)ctx;
  memset(out, 0, sizeof *out);
  snprintf(err, errlen,
           "this ibp was built without the CUDA toolkit (cuda.h "
           "and nvcc for the kernels): it cannot calibrate");
  return -1;
}
