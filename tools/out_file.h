/*
 * All-or-nothing output file: bytes go to a temporary file created with
 * mkstemp beside the destination, which is renamed over the destination only
 * when everything succeeded.  On failure, and on SIGINT/SIGTERM/SIGHUP while
 * a temporary file exists, the temporary file is removed, so no partial
 * output is ever left behind.
 *
 * A destination that exists and is not a regular file (/dev/null, a
 * device) is written directly, since it cannot be replaced.  The path "-"
 * is standard output: the bytes go to an unnamed temporary file and are
 * copied to standard output, in order, at commit.
 *
 * One out_file may be open at a time per process.  Nothing here prints.
 */
#ifndef IBP_TOOLS_OUT_FILE_H
#define IBP_TOOLS_OUT_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct out_file {
  int fd;         /* -1 when closed */
  char *tmp_path; /* "<dir>/.<name>.XXXXXX"; NULL when writing directly */
  char *path;     /* destination */
  int to_stdout;  /* "-": copied to standard output at commit */
} out_file;

/* Fails up front with EISDIR when `path` is a directory.  Returns 0 or an
 * errno value. */
/* Nonzero when `path` names an existing regular file that OUT would
 * replace ("-" never does). */
int out_file_would_replace(const char *path);

int out_file_open(out_file *of, const char *path);

/* ibp_write_fn over the temporary file: ctx is the out_file.  Writes all of
 * buf at offset (retrying short writes); 0 or -1 with errno set. */
int out_file_pwrite(void *ctx, uint64_t offset, const void *buf, size_t len);

/* Sets the file to `size` bytes, applies the umask-derived mode, flushes it
 * to disk and renames it over the destination.  On failure the temporary
 * file is removed.  Returns 0 or an errno value. */
int out_file_commit(out_file *of, uint64_t size);

/* Closes and removes the temporary file; accepts a closed out_file. */
void out_file_abort(out_file *of);

#endif /* IBP_TOOLS_OUT_FILE_H */
