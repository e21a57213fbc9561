/*
 * Read-only memory mapping of an input file.  Files of any size (tens of GB)
 * are mapped, never read into memory; the mapping is advised sequential.
 *
 * Only regular, non-empty files are accepted, and "-": standard input,
 * mapped when it is a regular file, else read whole into memory.  Nothing
 * here prints.
 */
#ifndef IBP_TOOLS_MAPPED_FILE_H
#define IBP_TOOLS_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct mapped_file {
  const uint8_t *data; /* NULL when closed */
  uint64_t size;
  size_t heap_cap; /* nonzero: data is malloc'd (standard input read whole) */
} mapped_file;

/* Error codes beyond errno values (returned negated errno-style). */
#define MAPPED_FILE_EMPTY (-1)       /* size 0 */
#define MAPPED_FILE_NOT_REGULAR (-2) /* a pipe, socket, device ... */

/* Maps `path`.  Returns 0, an errno value (ENOENT, EACCES, EISDIR, ...) or
 * one of the MAPPED_FILE_* codes; `mf` is left closed on failure. */
int mapped_file_open(mapped_file *mf, const char *path);

/* Unmaps; accepts a closed or zeroed mapping. */
void mapped_file_close(mapped_file *mf);

/* Text for a code returned by mapped_file_open. */
const char *mapped_file_strerror(int code);

#endif /* IBP_TOOLS_MAPPED_FILE_H */
