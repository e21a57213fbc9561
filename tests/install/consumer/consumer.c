/* A program outside libibp that uses the installed codec: it searches
 * parameters for generated float32 tensors, compresses and decodes each
 * one, and checks the bytes (tests/install/install.sh). */
#include <ibp/codec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R 1024
#define N 64

int main(void) {
  static float data[N * R / 4];
  static unsigned char slot[R], back[R];
  for (size_t i = 0; i < sizeof data / sizeof data[0]; i++)
    data[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
  ibp_search_options opt;
  memset(&opt, 0, sizeof opt);
  opt.threshold = -1;
  ibp_params p;
  ibp_status s = ibp_search(data, N, R, &opt, &p, NULL);
  if (s != IBP_OK) {
    fprintf(stderr, "consumer: ibp_search: %s\n", ibp_status_message(s));
    return 1;
  }
  size_t stored = 0;
  for (int t = 0; t < N; t++) {
    const unsigned char *tensor = (const unsigned char *)data + (size_t)t * R;
    int compressed = 0;
    size_t len = ibp_compress_tensor(&p, tensor, slot, &compressed);
    stored += len;
    if (ibp_decompress_tensor(&p, slot, R, compressed, back) != IBP_OK ||
        memcmp(back, tensor, R) != 0) {
      fprintf(stderr, "consumer: tensor %d differs\n", t);
      return 1;
    }
  }
  ibp_params_free(&p);
  printf("consumer: ok %zu of %d bytes (%s)\n", stored, N * R,
         ibp_impl_name(ibp_impl_active()));
  return 0;
}
