/* Report file names with %p and %r (stats/path.h). */
#include "stats/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* $RANK, else $LOCAL_RANK, when it is 1 to 9 digits; else "0". */
static const char *rank(void) {
  static const char *const vars[] = {"RANK", "LOCAL_RANK"};
  for (size_t i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    size_t n = v ? strlen(v) : 0;
    if (n >= 1 && n <= 9 && strspn(v, "0123456789") == n)
      return v;
  }
  return "0";
}

int ibp__stats_path_expand(const char *in, char *out, size_t cap) {
  size_t o = 0;
  char pid[24];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  for (const char *p = in; *p; p++) {
    const char *piece = NULL;
    char one[2] = {*p, '\0'};
    if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == '%')) {
      piece = p[1] == 'p' ? pid : p[1] == 'r' ? rank() : "%";
      p++;
    } else {
      piece = one;
    }
    size_t n = strlen(piece);
    if (o + n >= cap) {
      snprintf(out, cap, "%s", in);
      return -1;
    }
    memcpy(out + o, piece, n);
    o += n;
  }
  if (cap > 0)
    out[o] = '\0';
  return 0;
}
