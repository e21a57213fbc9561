/* Reference + library params from the same bytes (see fixture.h). */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>

void fixture_init(fixture *f, uint32_t R, uint32_t c) {
  memset(f, 0, sizeof *f);
  f->R = R;
  f->c = c;
  f->mask = xcalloc(R);
  f->bitval = xcalloc(R);
  f->ref = (ref_params){R, c, f->mask, f->bitval};
}

void fixture_commit(fixture *f) {
  ibp_params_free(&f->lib);
  CHECK_OK(ibp_params_from_masks(f->R, f->c, f->mask, f->bitval, &f->lib));
  CHECK_U64(f->lib.tensor_bytes, f->R);
  CHECK_U64(f->lib.chunk_bytes, f->c);
  CHECK_MEM(f->lib.mask, f->mask, f->R, "params mask");
  CHECK_MEM(f->lib.bitval, f->bitval, f->R, "params bitval");
}

void fixture_gen(fixture *f, rng *r, mask_kind kind, const uint8_t *data,
                 uint64_t n) {
  gen_masks(r, kind, f->R, f->c, data, n, f->mask, f->bitval);
  fixture_commit(f);
}

void fixture_free(fixture *f) {
  ibp_params_free(&f->lib);
  free(f->mask);
  free(f->bitval);
  memset(f, 0, sizeof *f);
}
