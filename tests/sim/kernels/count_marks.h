/* The emulated kernels' count marks (variant_marks.cc; bench/kernel_sass.sh).
 */
#ifndef IBP_COUNT_MARKS_H
#define IBP_COUNT_MARKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mark ids are 1 .. count_marks_ids() - 1. */
unsigned count_marks_ids(void);
/* The id of a group's decode step (MARK_GROUP_STEP). */
unsigned count_marks_group_step(void);
/* The id of a tensor of a group of whole steps (MARK_GROUP_TENSOR: R a
 * multiple of 512). */
unsigned count_marks_group_tensor(void);
/* Forgets every pass counted so far. */
void count_marks_reset(void);
/* Passes through mark `id` since the reset: per warp, the most passes of
 * any one of its lanes (what the warp executes), summed over the warps. */
uint64_t count_marks_warp_passes(unsigned id);

#ifdef __cplusplus
}
#endif
#endif
