/*
 * NVTX ranges around served copies (serve/nvtx.c; docs/USING.md, "Checking
 * that it helped"): in an Nsight Systems timeline each copy libibp serves
 * with its kernel shows as a range named after its region, in the domain
 * "libibp", with the copy's bytes as payload -- and nsys projects it onto
 * the kernel on the GPU's row.
 *
 * Built where the CUDA Toolkit ships the header-only NVTX 3
 * (<nvtx3/nvToolsExt.h>; CMake defines IBP_HAVE_NVTX); compiled out
 * otherwise.  Without a tool attached (nsys sets NVTX_INJECTION64_PATH)
 * a range costs two calls of NVTX's no-op functions.
 */
#ifndef IBP_PRELOAD_SERVE_NVTX_H
#define IBP_PRELOAD_SERVE_NVTX_H

#include <stdint.h>

#ifdef IBP_HAVE_NVTX
/* Opens the range of a copy of `bytes` from region `name` (the string
 * must stay valid until the call returns). */
void ibp__nvtx_copy_begin(const char *name, uint64_t bytes);
/* Closes it, on the same thread. */
void ibp__nvtx_copy_end(void);
#else
static inline void ibp__nvtx_copy_begin(const char *name, uint64_t bytes) {
  (void)name;
  (void)bytes;
}
static inline void ibp__nvtx_copy_end(void) {}
#endif

#endif /* IBP_PRELOAD_SERVE_NVTX_H */
