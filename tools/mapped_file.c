/* Read-only mmap of an input file (see mapped_file.h). */
#include "mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads fd to its end into a growing heap buffer. */
static int read_whole(mapped_file *mf, int fd) {
  uint8_t *buf = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len == cap) {
      size_t next = cap ? 2 * cap : (size_t)1 << 20;
      uint8_t *p = next > cap ? realloc(buf, next) : NULL;
      if (p == NULL) {
        free(buf);
        return ENOMEM;
      }
      buf = p;
      cap = next;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      free(buf);
      return err;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  if (len == 0) {
    free(buf);
    return MAPPED_FILE_EMPTY;
  }
  mf->data = buf;
  mf->size = len;
  mf->heap_cap = cap;
  return 0;
}

int mapped_file_open(mapped_file *mf, const char *path) {
  mf->data = NULL;
  mf->size = 0;
  mf->heap_cap = 0;
  int from_stdin = strcmp(path, "-") == 0;
  int fd = from_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  struct stat st;
  int err = 0;
  if (from_stdin && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)))
    return read_whole(mf, fd);
  if (fstat(fd, &st) != 0)
    err = errno;
  else if (S_ISDIR(st.st_mode))
    err = EISDIR;
  else if (!S_ISREG(st.st_mode))
    err = MAPPED_FILE_NOT_REGULAR;
  else if (st.st_size == 0)
    err = MAPPED_FILE_EMPTY;
  else if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX)
    err = EFBIG;
  if (err == 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      err = errno;
    } else {
      (void)madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
      mf->data = p;
      mf->size = (uint64_t)st.st_size;
    }
  }
  if (!from_stdin)
    close(fd); /* the mapping keeps the file */
  return err;
}

void mapped_file_close(mapped_file *mf) {
  if (mf->data != NULL && mf->heap_cap != 0)
    free((void *)mf->data);
  else if (mf->data != NULL)
    munmap((void *)mf->data, (size_t)mf->size);
  mf->data = NULL;
  mf->size = 0;
}

const char *mapped_file_strerror(int code) {
  switch (code) {
  case MAPPED_FILE_EMPTY:
    return "file is empty";
  case MAPPED_FILE_NOT_REGULAR:
    return "not a regular file";
  default:
    return strerror(code);
  }
}
