/*
 * Kernel registry: name -> emulated kernel.  Kernel libraries register from
 * constructors; the simulated driver looks names up when a module loads.
 * Registering a name again replaces the earlier entry.  The registry keeps
 * the caller's pointer: a registered kernel must outlive its registration.
 */
#include "simt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const simt_kernel **table;
static unsigned count, cap;

static long find(const char *name) {
  for (unsigned i = 0; i < count; i++)
    if (strcmp(table[i]->name, name) == 0)
      return (long)i;
  return -1;
}

void simt_kernel_register(const simt_kernel *k) {
  if (!k || !k->name || !k->entry)
    return;
  pthread_mutex_lock(&lock);
  long i = find(k->name);
  if (i >= 0) {
    table[i] = k;
  } else {
    if (count == cap) {
      unsigned n = cap ? cap * 2 : 16;
      const simt_kernel **t = realloc(table, n * sizeof *t);
      if (t) {
        table = t;
        cap = n;
      }
    }
    if (count < cap)
      table[count++] = k;
  }
  pthread_mutex_unlock(&lock);
}

const simt_kernel *simt_kernel_find(const char *name) {
  if (!name)
    return NULL;
  pthread_mutex_lock(&lock);
  long i = find(name);
  const simt_kernel *k = i >= 0 ? table[i] : NULL;
  pthread_mutex_unlock(&lock);
  return k;
}
