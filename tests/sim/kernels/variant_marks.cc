// The kernels built with their count marks (IBP_MARK, kernels/ibp_dev.h)
// for count_marks (bench/kernel_sass.sh's all-in count): each mark counts,
// per warp and lane, the passes through it.
#define IBP_KERNEL_SASS_MARKS 1
#include "ibp_dev.h"
#define ibp_decompress ibp_decompress_marks
#define ibp_gather ibp_gather_marks
#define ibp_decompress_batch ibp_decompress_batch_marks
#define ibp_stage_exp ibp_stage_exp_marks
#include "ibp_decompress.cu"

#include <vector>

#include "count_marks.h"
#include "simt.h"

namespace {
// passes[(warp * MARK_COUNT + id) * 32 + lane]; a launch runs on one host
// thread, and count_marks runs one at a time
std::vector<uint32_t> passes;

void entry(const void *args) {
  ibp_decompress_marks(*static_cast<const ibp_decompress_args *>(args));
}
const simt_kernel kernel = {"ibp_decompress_marks",
                            entry,
                            sizeof(ibp_decompress_args),
                            nullptr,
                            nullptr,
                            nullptr};
__attribute__((constructor)) void register_variant() {
  simt_kernel_register(&kernel);
}
} // namespace

extern "C" void ibp_emu_mark(unsigned id) {
  const uint64_t warp = ibp_dev_warp_global();
  const size_t at = ((size_t)warp * MARK_COUNT + id) * 32 + ibp_dev_lane();
  if (at >= passes.size())
    passes.resize((at / 4096 + 1) * 4096 * 2);
  passes[at]++;
}

extern "C" unsigned count_marks_ids(void) {
  return MARK_COUNT;
}

extern "C" unsigned count_marks_group_step(void) {
  return MARK_GROUP_STEP;
}

extern "C" unsigned count_marks_group_tensor(void) {
  return MARK_GROUP_TENSOR;
}

extern "C" void count_marks_reset(void) {
  passes.clear();
}

extern "C" uint64_t count_marks_warp_passes(unsigned id) {
  uint64_t sum = 0;
  for (size_t w = 0; (w * MARK_COUNT + id) * 32 < passes.size(); w++) {
    uint32_t most = 0;
    for (unsigned l = 0; l < 32; l++) {
      const size_t at = (w * MARK_COUNT + id) * 32 + l;
      if (at < passes.size() && passes[at] > most)
        most = passes[at];
    }
    sum += most;
  }
  return sum;
}
