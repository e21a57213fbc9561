/* Unit test of preload/serve/region.c: a served region's geometry (the one
 * source of the tensor size), its tracking description and its device slot
 * states (moved here from the registry's test with the slots).  Exit 0 =
 * pass, 1 = fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "serve/region.h"

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);    \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static ibp_region_rec *add(uintptr_t base, uint64_t bytes, uint32_t R) {
  ibp_region_rule rule = {.tensor_bytes = R};
  CHECK(ibp_registry_add((void *)base, bytes, &rule, "emb") >= 1);
  ibp_region_rec *r = NULL;
  CHECK(ibp_registry_find((void *)base, 1, &r) == IBP_FIND_FOUND);
  return r;
}

static void geometry(void) {
  ibp_region_rec *r = add(0x10000, (1 << 20) + 100, 1000);
  ibp_served_region *s = ibp__served_new(r);
  CHECK(s && s->geometry.tensor_bytes == 1000);
  CHECK(s->geometry.tensors == ((1 << 20) + 100) / 1000);
  CHECK(s->track.base == r->base && s->track.bytes == r->bytes);
  CHECK(s->track.tensor_bytes == 1000 && strcmp(s->track.name, "emb") == 0);
  CHECK(s->track.dirty == NULL);
  ibp__served_free(s);
  ibp_region_release(r);
  CHECK(ibp_registry_remove((void *)0x10000) == 0);
  /* a rule without a tensor size (config/ always gives one) */
  r = add(0x200000, 4096 * 3, 0);
  s = ibp__served_new(r);
  CHECK(s && s->geometry.tensor_bytes == IBP_CONFIG_DEFAULT_TENSOR);
  CHECK(s->geometry.tensors == 3);
  ibp__served_free(s);
  ibp_region_release(r);
  CHECK(ibp_registry_remove((void *)0x200000) == 0);
}

static void device_slots(void) {
  ibp_region_rec *r = add(0x10000, 1 << 20, 4096);
  ibp_served_region *s = ibp__served_new(r);
  CHECK(s);
  CHECK(ibp__device_transition(s, 3, IBP_DEVICE_ABSENT, IBP_DEVICE_UPLOADING));
  CHECK(!ibp__device_transition(s, 3, IBP_DEVICE_ABSENT, IBP_DEVICE_UPLOADING));
  CHECK(!ibp__device_transition(s, IBP_MAX_DEVICES, IBP_DEVICE_ABSENT,
                                IBP_DEVICE_READY));
  CHECK(atomic_load(&s->dev[3].state) == IBP_DEVICE_UPLOADING);
  CHECK(ibp__device_state(s, 3) == IBP_DEVICE_UPLOADING);
  CHECK(ibp__device_state(s, 2) == IBP_DEVICE_ABSENT);
  CHECK(ibp__device_state(s, IBP_MAX_DEVICES) == IBP_DEVICE_FAILED);
  ibp__served_free(s);
  ibp__served_free(NULL);
  ibp_region_release(r);
  CHECK(ibp_registry_remove((void *)0x10000) == 0);
}

int main(void) {
  geometry();
  device_slots();
  puts("test_served_region: ok");
  return 0;
}
