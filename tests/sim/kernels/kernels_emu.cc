// The project's kernels (kernels/ibp_decompress.cu) compiled for the CPU
// against the SIMT emulator, and registered by name so that the simulated
// driver's module/library loads find them.
#include "ibp_decompress.cu"

#include "simt.h"

namespace {

void decompress_entry(const void *args) {
  ibp_decompress(*static_cast<const ibp_decompress_args *>(args));
}

void batch_entry(const void *args) {
  ibp_decompress_batch(*static_cast<const ibp_batch_args *>(args));
}

void stage_exp_entry(const void *args) {
  ibp_stage_exp(*static_cast<const ibp_stage_exp_args *>(args));
}

void gather_entry(const void *args) {
  ibp_gather(*static_cast<const ibp_gather_args *>(args));
}

// What each launch writes to device memory (the virtual clock's model).
uint64_t decompress_out(const void *args) {
  return static_cast<const ibp_decompress_args *>(args)->length;
}

// The jobs and ranges live in (simulated) device memory, which the host
// can read.
uint64_t batch_out(const void *args) {
  const ibp_batch_args *a = static_cast<const ibp_batch_args *>(args);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < a->count; i++)
    bytes += a->jobs[i].length;
  return bytes;
}

uint64_t decompress_units(const void *args) {
  return ibp_kernels_copy_units(static_cast<const ibp_decompress_args *>(args));
}

uint64_t batch_units(const void *args) {
  return static_cast<const ibp_batch_args *>(args)->units;
}

// Of a launch's output, what a region stored with the exponent stage
// decodes through it (its stage tables: `stages`), with its units.
uint64_t decompress_stage(const void *args, uint64_t *units) {
  const ibp_decompress_args *a = static_cast<const ibp_decompress_args *>(args);
  *units = a->stages ? ibp_kernels_copy_units(a) : 0;
  return a->stages ? a->length : 0;
}

// A job's units: up to the next job's first (jobs are in unit order).
// A launch whose units blocks decode (stage_buffers 0) copies a stage
// region's tensors from the original: no stage runs.
uint64_t batch_stage(const void *args, uint64_t *units) {
  const ibp_batch_args *a = static_cast<const ibp_batch_args *>(args);
  uint64_t bytes = 0;
  *units = 0;
  if (!a->stage_buffers)
    return 0;
  for (uint32_t i = 0; i < a->count; i++) {
    const ibp_batch_job &j = a->jobs[i];
    if (j.region == IBP_BATCH_RAW || !a->regions[j.region].stages)
      continue;
    const uint64_t end =
        i + 1 < a->count ? a->jobs[i + 1].first_unit : a->units;
    bytes += j.length;
    *units += end - j.first_unit;
  }
  return bytes;
}

uint64_t gather_out(const void *args) {
  const ibp_gather_args *a = static_cast<const ibp_gather_args *>(args);
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < a->count; i++)
    bytes += a->ranges[i].length;
  return bytes;
}

const simt_kernel kernels[] = {
    {IBP_KERNEL_DECOMPRESS, decompress_entry, sizeof(ibp_decompress_args),
     decompress_out, decompress_units, decompress_stage},
    {IBP_KERNEL_BATCH, batch_entry, sizeof(ibp_batch_args), batch_out,
     batch_units, batch_stage},
    {IBP_KERNEL_GATHER, gather_entry, sizeof(ibp_gather_args), gather_out,
     nullptr, nullptr},
    {IBP_KERNEL_STAGE_EXP, stage_exp_entry, sizeof(ibp_stage_exp_args), nullptr,
     nullptr, nullptr},
};

// Test infrastructure, not libibp: a constructor is the simplest way for a
// kernel library to announce itself to the emulator.
__attribute__((constructor)) void register_kernels() {
  for (const simt_kernel &k : kernels)
    simt_kernel_register(&k);
}

} // namespace

#include "kernels_emu.h"

extern "C" simt_entry ibp_emu_entry(const char *name) {
  const simt_kernel *k = simt_kernel_find(name);
  return k ? k->entry : nullptr;
}
