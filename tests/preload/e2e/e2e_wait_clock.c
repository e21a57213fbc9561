/*
 * e2e_wait_clock: the first copy from a region waits for libibp's worker
 * (IBP_WAIT_READY=1: its compression and its uploads to the device), and
 * the gate's first timed span after that wait is believed -- on the
 * simulated GPU's clock as in real time, the wait comes before the copy,
 * so the copy does not share the link with uploads that ended before it
 * was made (serve/worker.c, ibp__worker_wait).  Two copies, checked byte
 * for byte; check_timed.cmake then wants a timed copy in the report.
 */
#include "e2e_util.h"

static e2e_region regions[] = {
    {.name = "wait",
     .size = (size_t)4 << 20,
     .tensor = 4096,
     .alloc = E2E_HOST_ALLOC,
     .data = E2E_F32},
};

int main(void) {
  e2e_begin("e2e_wait_clock");
  e2e_regions_env(regions, 1);
  e2e_region *R = &regions[0];
  e2e_region_alloc(R);
  e2e_rng rng;
  e2e_rng_seed(&rng, e2e_seed(), 1);
  e2e_region_fill(R, &rng);
  e2e_batch batch;
  e2e_batch_init(&batch, (size_t)1 << 20, 2);
  /* the first waits, is timed, and its span is read at the second */
  e2e_batch_copy(&batch, R, 0, 4096, E2E_SYNC_H2D, 0);
  e2e_batch_copy(&batch, R, 4096, 4096, E2E_SYNC_H2D, 0);
  e2e_batch_verify(&batch, NULL, 0);
  e2e_region_check_host(R, "at the end");
  e2e_batch_destroy(&batch);
  e2e_region_free(R);
  return e2e_end();
}
