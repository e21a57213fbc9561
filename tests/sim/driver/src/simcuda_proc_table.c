/*
 * The entry-point table: one row per SIM_PROC line of simcuda_entries.def.
 * Built without cuda.h (see simcuda_proc.h); with -Bsymbolic the addresses
 * taken here are the library's own definitions, the ones dlsym returns.
 */
#include "simcuda_proc.h"

#define SIM_PROC(name, version, variant, symbol, kind) extern void symbol(void);
#include "simcuda_entries.def"
#undef SIM_PROC

#define SCU_VARIANT_D 'D'
#define SCU_VARIANT_P 'P'
#define SCU_IMPL_IMPL 1
#define SCU_IMPL_STUB 0
#define SIM_PROC(name, version, variant, symbol, kind)                         \
  {#name, #symbol, version, SCU_VARIANT_##variant, SCU_IMPL_##kind, symbol},

const scu_proc_entry scu_proc_table[] = {
#include "simcuda_entries.def"
};
#undef SIM_PROC

const size_t scu_proc_count = sizeof scu_proc_table / sizeof scu_proc_table[0];
