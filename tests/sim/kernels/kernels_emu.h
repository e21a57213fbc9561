/* The emulated kernels (kernels_emu.cc) and the strictness variants. */
#ifndef IBP_KERNELS_EMU_H
#define IBP_KERNELS_EMU_H

#include "simt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Entry point of a registered kernel by name ("ibp_decompress",
 * "ibp_gather"), or of a strictness variant ("ibp_decompress_nowait",
 * "ibp_decompress_nosync", "ibp_decompress_overread"); NULL if unknown. */
simt_entry ibp_emu_entry(const char *name);

#ifdef __cplusplus
}
#endif
#endif
