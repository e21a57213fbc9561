/* The kernels' fatbin (SASS sm_75/80/86/89/90/100/120 + PTX compute_90),
 * embedded by the build (kernels/CMakeLists.txt, target ibp_fatbin).  Load it
 * with cuLibraryLoadData / cuModuleLoadData. */
#ifndef IBP_FATBIN_H
#define IBP_FATBIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

extern const unsigned char ibp_kernels_fatbin[];
extern const size_t ibp_kernels_fatbin_size;

#ifdef __cplusplus
}
#endif
#endif
