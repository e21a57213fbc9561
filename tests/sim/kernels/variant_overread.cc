// Strictness variant of ibp_decompress: staging 16 bytes past the stream's end.
// The emulator must expose it (tests/sim/kernels/test_kernel_strict.c).
#include "ibp_dev.h"
#define IBP_KERNEL_STAGE_EXTRA 16u /* the bug */
#define ibp_decompress ibp_decompress_overread
#define ibp_gather ibp_gather_overread
#define ibp_decompress_batch ibp_decompress_batch_overread
#define ibp_stage_exp ibp_stage_exp_overread
#include "ibp_decompress.cu"

#include "simt.h"

namespace {
void entry(const void *args) {
  ibp_decompress_overread(*static_cast<const ibp_decompress_args *>(args));
}
const simt_kernel kernel = {"ibp_decompress_overread",
                            entry,
                            sizeof(ibp_decompress_args),
                            nullptr,
                            nullptr,
                            nullptr};
__attribute__((constructor)) void register_variant() {
  simt_kernel_register(&kernel);
}
} // namespace
