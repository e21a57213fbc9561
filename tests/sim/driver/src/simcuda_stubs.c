/*
 * The STUB entries of simcuda_entries.def: exported under their real names
 * (so a driver-shaped lookup or dlsym finds them, as on NVIDIA's driver),
 * each returning CUDA_ERROR_NOT_SUPPORTED.  Their real prototypes differ;
 * a stub ignores its arguments, which is safe for any prototype under the
 * x86-64 and AArch64 calling conventions.  No cuda.h here (simcuda_proc.h).
 */
#include "simcuda_proc.h"

#define SCU_STUB_IMPL(name, symbol)
#define SCU_STUB_STUB(name, symbol)                                            \
  int symbol(void);                                                            \
  int symbol(void) {                                                           \
    static int warned;                                                         \
    return scu_stub_called(#name, #symbol, &warned);                           \
  }
#define SIM_PROC(name, version, variant, symbol, kind)                         \
  SCU_STUB_##kind(name, symbol)
#include "simcuda_entries.def"
#undef SIM_PROC
