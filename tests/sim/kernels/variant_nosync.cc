// Strictness variant of ibp_decompress: missing __syncwarp after the async
// copies land. The emulator must expose it
// (tests/sim/kernels/test_kernel_strict.c).
#include "ibp_dev.h"
#define ibp_dev_syncwarp() ((void)0) /* the bug */
#define ibp_decompress ibp_decompress_nosync
#define ibp_gather ibp_gather_nosync
#define ibp_decompress_batch ibp_decompress_batch_nosync
#define ibp_stage_exp ibp_stage_exp_nosync
#include "ibp_decompress.cu"

#include "simt.h"

namespace {
void entry(const void *args) {
  ibp_decompress_nosync(*static_cast<const ibp_decompress_args *>(args));
}
const simt_kernel kernel = {"ibp_decompress_nosync",
                            entry,
                            sizeof(ibp_decompress_args),
                            nullptr,
                            nullptr,
                            nullptr};
__attribute__((constructor)) void register_variant() {
  simt_kernel_register(&kernel);
}
} // namespace
