/* Opens a dataset with the installed C ABI and prints the sample count, the first key and the
 * first image's decoded size (tests/install/test_install.py). */
#include <stdio.h>
#include <stdlib.h>

#include "read/c_api.h"

int main(int argc, char** argv) {
  tarmac_dataset* ds;
  const char* key;
  size_t len;
  int32_t w, h;
  if (argc != 2) {
    fprintf(stderr, "usage: read_dataset_c DIR\n");
    return 2;
  }
  if (tarmac_open(argv[1], &ds) != TARMAC_OK || tarmac_key(ds, 0, &key, &len) != TARMAC_OK ||
      tarmac_decoded_size(ds, 0, &w, &h) != TARMAC_OK) {
    fprintf(stderr, "read_dataset_c: %s\n", tarmac_last_error());
    return 1;
  }
  unsigned char* rgb = malloc((size_t)w * h * 3);
  if (rgb == NULL || tarmac_decode(ds, 0, rgb, (size_t)w * h * 3, w, h, 0) != TARMAC_OK) {
    fprintf(stderr, "read_dataset_c: %s\n", rgb == NULL ? "out of memory" : tarmac_last_error());
    return 1;
  }
  printf("%lld %.*s %dx%d\n", (long long)tarmac_size(ds), (int)len, key, (int)w, (int)h);
  free(rgb);
  tarmac_close(ds);
  return 0;
}
