/*
 * libibp's own threads (base/thread.c): the worker, the batch timer, the
 * batch flusher and the scanners, started detached on first need.
 */
#ifndef IBP_PRELOAD_THREAD_H
#define IBP_PRELOAD_THREAD_H

/* Starts fn(NULL) on a detached thread; nonzero when it runs. */
int ibp__thread_start(void *(*fn)(void *));

#endif /* IBP_PRELOAD_THREAD_H */
