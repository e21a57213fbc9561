/*
 * e2e_random: random host-to-device copies from pinned regions, every byte
 * that arrives on the device checked (README.md).
 *
 *   e2e_random [copies] [--faults]
 *
 * Five regions selected by IBP_REGIONS size= rules, with tensor sizes 256,
 * 1K, 4K, 4099 (odd, registered at an unaligned address) and 1000, none a
 * multiple of its tensor size, allocated with cudaMallocHost, cudaHostAlloc
 * (default, mapped|portable, write-combined) and cudaHostRegister; plus a
 * pinned buffer no rule selects and a pageable buffer.  Copies: 1 B to
 * 256 KiB at random offsets (whole tensors, the region's tail, anything),
 * cudaMemcpy / cudaMemcpyAsync, HostToDevice or Default, on the default
 * stream, four created streams, cudaStreamPerThread and cudaStreamLegacy.
 * The count is argv[1], else IBP_E2E_COPIES, else 1000 (300 in sanitizer
 * builds).
 *
 * --faults: the shape used under driver fault injection (run_faults.sh):
 * regions an eighth of the size, every pinned buffer registered (no
 * cudaHostAlloc), every copy is a cudaMemcpyDefault one and synchronization is
 * cudaDeviceSynchronize only, so the program itself never calls cuMemHostAlloc,
 * cuMemcpyHtoD*, cuStreamSynchronize or cuStreamCreate (its streams are created
 * with a priority), and the injected failures of those land in libibp's calls.
 * Between batches it also writes an eighth of a region, so that libibp
 * serves written tensors raw and recompresses them
 * (preload/serve/prepare/refresh.c) under the injected failures too.
 */
#include "e2e_util.h"

#include <stdlib.h>
#include <string.h>

#define NSTREAMS 7
#define DEV_BYTES ((size_t)1 << 20)

static e2e_region regions[] = {
    {.name = "r256",
     .size = (1 << 20) + 100,
     .tensor = 256,
     .alloc = E2E_MALLOC_HOST,
     .data = E2E_F32},
    {.name = "r1k",
     .size = (2 << 20) + 333,
     .tensor = 1024,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_BF16},
    {.name = "r4k",
     .size = (4 << 20) + 1234,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .flags = cudaHostAllocMapped | cudaHostAllocPortable,
     .data = E2E_F32},
    {.name = "r4099",
     .size = (3 << 20) + 77,
     .tensor = 4099,
     .alloc = E2E_REGISTER,
     .misalign = 100,
     .data = E2E_F32},
    {.name = "r1000",
     .size = (1 << 20) + 999,
     .tensor = 1000,
     .alloc = E2E_HOST_ALLOC,
     .flags = cudaHostAllocWriteCombined,
     .keys = "wc=yes", /* write-combined: served only when asked for */
     .data = E2E_BF16},
    /* no rule selects it: passes through */
    {.name = NULL,
     .size = (512 << 10) + 5,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
};
#define NREGIONS ((int)(sizeof regions / sizeof regions[0]))

int main(int argc, char **argv) {
  e2e_begin("e2e_random");
  int faults = 0;
  unsigned long copies = e2e_env_count("IBP_E2E_COPIES", E2E_DEFAULT_COPIES);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--faults") == 0)
      faults = 1;
    else if (strtoul(argv[i], NULL, 10) > 0)
      copies = strtoul(argv[i], NULL, 10);
    else
      e2e_die("usage: e2e_random [copies] [--faults]");
  }
  e2e_note("%lu copies (argv[1] or IBP_E2E_COPIES)%s", copies,
           faults ? ", fault-injection shape" : "");
  if (faults)
    for (int i = 0; i < NREGIONS; i++) {
      regions[i].size = regions[i].size / 8 + 7; /* many short runs */
      regions[i].alloc = E2E_REGISTER;
      regions[i].flags = 0;
    }
  e2e_regions_env(regions, NREGIONS);

  /* Device memory and streams first, then the pinned buffers. */
  e2e_batch batch;
  e2e_batch_init(&batch, DEV_BYTES, 0);
  batch.device_sync_only = faults;
  cudaStream_t streams[NSTREAMS] = {
      0, 0, 0, 0, 0, cudaStreamPerThread, cudaStreamLegacy};
  for (int i = 1; i <= 4; i++)
    E2E_CK(cudaStreamCreateWithPriority(
        &streams[i], i % 2 ? cudaStreamNonBlocking : cudaStreamDefault,
        -(i % 2)));

  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 1);
  for (int i = 0; i < NREGIONS; i++) {
    e2e_region_alloc(&regions[i]);
    e2e_region_fill(&regions[i], &rng);
  }
  size_t pageable_len = 512 << 10;
  unsigned char *pageable = malloc(pageable_len);
  E2E_SYS(pageable != NULL);
  e2e_fill(&rng, pageable, pageable_len, 4096, E2E_F32);

  e2e_random_plan plan = {.regions = regions,
                          .nregions = NREGIONS,
                          .pageable = pageable,
                          .pageable_len = pageable_len,
                          .streams = streams,
                          .nstreams = NSTREAMS,
                          .default_kind_only = faults,
                          .writes = faults,
                          .copies = copies};
  if (e2e_random_copies(&batch, &plan, &rng) == 0)
    for (int i = 0; i < NREGIONS; i++)
      e2e_region_check_host(&regions[i], "after the copies");

  for (int i = 0; i < NREGIONS; i++)
    e2e_region_free(&regions[i]);
  for (int i = 1; i <= 4; i++)
    E2E_CK(cudaStreamDestroy(streams[i]));
  e2e_batch_destroy(&batch);
  free(pageable);
  return e2e_end();
}
