/* fuzz_stage's second decoder: the exponent stage's device decoder
 * (kernels/stage_exp_dev.cuh, the ibp_stage_exp kernel) on the SIMT
 * emulator (tests/sim), where the build has it (IBP_FUZZ_DEVICE). */
#ifndef IBP_FUZZ_STAGE_DEVICE_H
#define IBP_FUZZ_STAGE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ibp/stage.h"

/* Runs the device decoder over the stream src[0, len) of one tensor that
 * the CPU decoder accepted and decoded to `want` (R bytes), the stream
 * placed at byte `lead` (0 .. 3) of a word in a buffer of exactly the
 * bytes the decoder may read (its words and the word after them): 1 when
 * it gives the same bytes and writes nothing outside the tensor, 0 when
 * not (a message on stderr), -1 when it cannot be asked (no emulator in
 * this build, or a stage the device decoder refuses:
 * ibp_kernels_stage_exp). */
int stage_device_agrees(const ibp_params *p, const ibp_stage *st,
                        const uint8_t *src, size_t len, unsigned lead,
                        const uint8_t *want);

/* Runs the device decoder over a stream the CPU decoder rejected (or any
 * stream) of one tensor, placed as above: 1 when it writes nothing
 * outside the tensor (its reads stay in the stream's words and the word
 * after them: ASan builds check), 0 when it does, -1 when it cannot be
 * asked (as above, or the stream ends before its IBP part does: a
 * launch's first bits come from the stream's own IBP part, which the
 * kernel has decoded). */
int stage_device_bounded(const ibp_params *p, const ibp_stage *st,
                         const uint8_t *src, size_t len, unsigned lead);

#endif
