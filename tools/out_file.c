/* All-or-nothing output through a temporary file (see out_file.h). */
#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary file to remove if a signal ends the process. */
static char pending_path[PATH_MAX];
static volatile sig_atomic_t pending;

static void on_signal(int sig) {
  if (pending)
    unlink(pending_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void arm_cleanup(const char *tmp_path) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  snprintf(pending_path, sizeof pending_path, "%s", tmp_path);
  pending = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
}

/* "<dir>/.<name>.XXXXXX" for path "<dir>/<name>" (dir "." when none). */
static char *temp_template(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  int dir_len = slash ? (int)(slash - path) : 1;
  const char *dir = slash ? path : ".";
  if (slash == path) /* "/name" */
    dir_len = 0;
  size_t cap = strlen(path) + 32;
  char *t = malloc(cap);
  if (t != NULL) /* keep the name short enough for NAME_MAX */
    snprintf(t, cap, "%.*s/.%.200s.XXXXXX", dir_len, dir, name);
  return t;
}

int out_file_would_replace(const char *path) {
  struct stat st;
  return strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* An unnamed temporary file: nothing to remove, whatever happens. */
static int open_unnamed(out_file *of) {
  const char *dir = getenv("TMPDIR");
  of->to_stdout = 1;
  of->fd =
      open(dir && dir[0] ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  return of->fd < 0 ? errno : 0;
}

int out_file_open(out_file *of, const char *path) {
  of->fd = -1;
  of->tmp_path = NULL;
  of->path = NULL;
  of->to_stdout = 0;
  if (strcmp(path, "-") == 0)
    return open_unnamed(of);
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return EISDIR;
    if (!S_ISREG(st.st_mode)) { /* /dev/null, a device: write in place */
      of->fd = open(path, O_WRONLY | O_CLOEXEC);
      return of->fd < 0 ? errno : 0;
    }
  }
  of->path = strdup(path);
  of->tmp_path = temp_template(path);
  if (of->path == NULL || of->tmp_path == NULL) {
    out_file_abort(of);
    return ENOMEM;
  }
  of->fd = mkostemp(of->tmp_path, O_CLOEXEC);
  if (of->fd < 0) {
    int err = errno;
    free(of->tmp_path); /* nothing was created: do not unlink */
    of->tmp_path = NULL;
    out_file_abort(of);
    return err;
  }
  arm_cleanup(of->tmp_path);
  return 0;
}

int out_file_pwrite(void *ctx, uint64_t offset, const void *buf, size_t len) {
  out_file *of = ctx;
  const char *p = buf;
  while (len > 0) {
    ssize_t n = pwrite(of->fd, p, len, (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return -1;
    }
    p += n;
    len -= (size_t)n;
    offset += (uint64_t)n;
  }
  return 0;
}

static int finish(out_file *of, uint64_t size) {
  mode_t mask = umask(0);
  umask(mask);
  if (ftruncate(of->fd, (off_t)size) != 0 ||
      fchmod(of->fd, 0666 & ~mask) != 0 || fsync(of->fd) != 0)
    return errno;
  int fd = of->fd;
  of->fd = -1;
  if (close(fd) != 0)
    return errno;
  if (rename(of->tmp_path, of->path) != 0)
    return errno;
  return 0;
}

/* The first `size` bytes of the unnamed file, in order, to stdout. */
static int copy_to_stdout(int fd, uint64_t size) {
  char buf[1 << 16];
  for (uint64_t off = 0; off < size;) {
    size_t want = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
    ssize_t n = pread(fd, buf, want, (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n == 0 ? EIO : errno;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(STDOUT_FILENO, buf + done, (size_t)(n - done));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return w == 0 ? EIO : errno;
      done += w;
    }
    off += (uint64_t)n;
  }
  return 0;
}

int out_file_commit(out_file *of, uint64_t size) {
  if (of->to_stdout) {
    int err = copy_to_stdout(of->fd, size);
    out_file_abort(of);
    return err;
  }
  if (of->tmp_path == NULL) { /* written directly */
    int err = close(of->fd) != 0 ? errno : 0;
    of->fd = -1;
    return err;
  }
  int err = finish(of, size);
  if (err != 0) {
    out_file_abort(of);
    return err;
  }
  pending = 0;
  free(of->tmp_path);
  free(of->path);
  of->tmp_path = NULL;
  of->path = NULL;
  return 0;
}

void out_file_abort(out_file *of) {
  if (of->fd >= 0)
    close(of->fd);
  of->fd = -1;
  if (of->tmp_path != NULL)
    unlink(of->tmp_path);
  pending = 0;
  free(of->tmp_path);
  free(of->path);
  of->tmp_path = NULL;
  of->path = NULL;
}
