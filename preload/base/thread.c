/* libibp's own threads (base/thread.h). */
#include <pthread.h>

#include "base/thread.h"

int ibp__thread_start(void *(*fn)(void *)) {
  pthread_attr_t attr;
  pthread_t t;
  if (pthread_attr_init(&attr) != 0)
    return 0;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int ok = pthread_create(&t, &attr, fn, NULL) == 0;
  pthread_attr_destroy(&attr);
  return ok;
}
