/*
 * Runs a fuzz target's LLVMFuzzerTestOneInput over files without libFuzzer
 * (like zstd's tests/fuzz/regression_driver.c), so every build replays the
 * checked-in corpus.  Arguments: files or directories (one level deep).
 * Exits 1 when no input was found; a failing input aborts.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap)
      buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "%s: out of memory\n", path);
    return -1;
  }
  /* an exact-size copy so that ASan sees reads past the input */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int run_dir(const char *dir, unsigned *count) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (is_dir(path))
      continue;
    if (run_file(path) != 0)
      rc = -1;
    else
      (*count)++;
  }
  closedir(d);
  return rc;
}

int main(int argc, char **argv) {
  unsigned count = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    if (is_dir(argv[i]))
      rc |= run_dir(argv[i], &count);
    else if (run_file(argv[i]) == 0)
      count++;
    else
      rc = -1;
  }
  printf("%s: replayed %u inputs\n", argv[0], count);
  return rc == 0 && count > 0 ? 0 : 1;
}
