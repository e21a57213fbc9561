/*
 * Events: an event remembers the (stream, sequence number) of its last
 * record; it is complete when that stream has completed that far.  The
 * record operation stamps the virtual time at which the stream reaches it
 * (simcuda_vclock.c), so cuEventElapsedTime measures the modelled time of
 * the work between two records.  Like cuEventQuery, it answers in virtual
 * time: an event whose stream's workers have not run it yet in real time
 * (an emulated kernel ahead of it) is waited for, and one stamped after
 * the caller's virtual time is not ready -- unless a host thread
 * synchronised with it (a thread that learns of that by other means reads
 * it as CUDA would) -- what a GPU running as the model says would answer,
 * whatever the machine's load (libibp reads its timed copies so; answered
 * in real time, the same run of libibp read them at different moments
 * from run to run).  Not ready so, it charges driver_call_us, as a query
 * does, so that a loop polling it reaches the stamp.
 * cuStreamWaitEvent is an operation whose dependency is the event's last
 * record.  An event never recorded is complete.
 */
#include "simcuda_internal.h"

#include "simclock.h"

#include <stdlib.h>

static void event_free(scu_obj *o) {
  scu_event *ev = (scu_event *)o;
  scu_stream_put(ev->s);
  pthread_mutex_destroy(&ev->m);
  free(ev);
}

void scu_event_put(scu_event *ev) {
  if (ev)
    scu_obj_put(&ev->hdr);
}

void scu_event_fire(scu_event *ev, uint64_t gen, double t) {
  pthread_mutex_lock(&ev->m);
  if (gen > ev->time_gen) {
    ev->time_gen = gen;
    ev->time_ns = t;
  }
  pthread_mutex_unlock(&ev->m);
}

double scu_event_time(scu_event *ev) {
  pthread_mutex_lock(&ev->m);
  double t = ev->time_ns;
  pthread_mutex_unlock(&ev->m);
  return t;
}

static scu_event *get_event(CUevent h) {
  return (scu_event *)scu_obj_get(h, SCU_MASK(SCU_T_EVENT));
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  SCU_API("cuEventCreate");
  const unsigned known =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (Flags & ~known) ||
      ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    SCU_RETURN(r);
  scu_event *ev = calloc(1, sizeof *ev);
  if (!ev) {
    scu_ctx_put(c);
    SCU_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  }
  scu_obj_init(&ev->hdr, SCU_T_EVENT, event_free);
  ev->flags = Flags;
  pthread_mutex_init(&ev->m, NULL);
  void *h = scu_obj_publish(&ev->hdr, c);
  scu_ctx_put(c);
  scu_event_put(ev); /* the table's reference remains */
  if (!h)
    SCU_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
  *phEvent = h;
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  SCU_API("cuEventDestroy");
  scu_event *ev = (scu_event *)scu_obj_take(hEvent, SCU_MASK(SCU_T_EVENT));
  if (!ev)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_event_put(ev); /* a pending record keeps it alive until it runs */
  SCU_RETURN(CUDA_SUCCESS);
}

static CUresult record(CUevent h, CUstream hs, unsigned flags, bool ptds) {
  if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  scu_event *ev = get_event(h);
  if (!ev)
    return CUDA_ERROR_INVALID_HANDLE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(hs, ptds, &s);
  if (r != CUDA_SUCCESS) {
    scu_event_put(ev);
    return r;
  }
  scu_op *op = scu_op_new(SCU_OP_EVENT);
  pthread_mutex_lock(&ev->m);
  uint64_t gen = ev->gen + 1, seq = 0;
  if (op) {
    scu_obj_ref(&ev->hdr);
    op->u.event.ev = ev;
    op->u.event.gen = gen;
  }
  r = scu_stream_submit(s, op, &seq);
  if (r == CUDA_SUCCESS) {
    ev->gen = gen;
    scu_stream_put(ev->s);
    ev->s = s; /* our reference moves to the event */
    ev->seq = seq;
    s = NULL;
  }
  pthread_mutex_unlock(&ev->m);
  scu_stream_put(s);
  scu_event_put(ev);
  return r;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  SCU_API("cuEventRecord");
  SCU_RETURN(record(hEvent, hStream, 0, false));
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  SCU_API("cuEventRecord");
  SCU_RETURN(record(hEvent, hStream, 0, true));
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream,
                                        unsigned int flags) {
  SCU_API("cuEventRecordWithFlags");
  SCU_RETURN(record(hEvent, hStream, flags, false));
}

CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                             unsigned int flags) {
  SCU_API("cuEventRecordWithFlags");
  SCU_RETURN(record(hEvent, hStream, flags, true));
}

/* The last record's stream (referenced) and sequence, or NULL. */
static scu_stream *last_record(scu_event *ev, uint64_t *seq) {
  pthread_mutex_lock(&ev->m);
  scu_stream *s = ev->s;
  if (s)
    scu_obj_ref(&s->hdr);
  *seq = ev->seq;
  pthread_mutex_unlock(&ev->m);
  return s;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  SCU_API("cuEventQuery");
  scu_event *ev = get_event(hEvent);
  if (!ev)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  uint64_t seq;
  scu_stream *s = last_record(ev, &seq);
  CUresult r = CUDA_SUCCESS;
  if (s) { /* answered in virtual time, as stream queries are */
    CUresult err;
    simclock_charge_us(simclock_profile()->driver_call_us); /* the call */
    bool settled = scu_stream_settle(s, seq);
    bool done = scu_stream_done(s, seq, &err);
    double at = scu_event_time(ev);
    if (done && !settled) /* seen to happen in real time */
      simclock_reach(at);
    done = done && (!settled || at <= simclock_now());
    r = err != CUDA_SUCCESS ? err : done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    scu_stream_put(s);
  }
  scu_event_put(ev);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  SCU_API("cuEventSynchronize");
  scu_event *ev = get_event(hEvent);
  if (!ev)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  uint64_t seq;
  scu_stream *s = last_record(ev, &seq);
  CUresult r = CUDA_SUCCESS;
  if (s) {
    r = scu_stream_wait(s, seq);
    scu_stream_put(s);
  }
  scu_event_put(ev);
  SCU_RETURN(r);
}

/* The time of an event's last record: INVALID_HANDLE when it has no timing
 * or was never recorded, NOT_READY when that record has not run yet. */
static CUresult stamp(scu_event *ev, double *ns) {
  if (ev->flags & CU_EVENT_DISABLE_TIMING)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&ev->m);
  CUresult r = ev->gen == 0              ? CUDA_ERROR_INVALID_HANDLE
               : ev->time_gen != ev->gen ? CUDA_ERROR_NOT_READY
                                         : CUDA_SUCCESS;
  *ns = ev->time_ns;
  pthread_mutex_unlock(&ev->m);
  return r;
}

/* stamp(), the event's last record run first where its stream gets there
 * (settled: answered in virtual time -- not ready while stamped after the
 * caller's time). */
static CUresult stamp_settled(scu_event *ev, double *ns) {
  uint64_t seq;
  scu_stream *s = last_record(ev, &seq);
  bool ahead = false;
  CUresult r;
  if (s) {
    const bool settled = scu_stream_settle(s, seq);
    r = stamp(ev, ns);
    ahead = r == CUDA_SUCCESS && settled && *ns > simclock_now() &&
            !scu_stream_waited(s, seq);
    scu_stream_put(s);
  } else {
    r = stamp(ev, ns);
  }
  if (ahead) {
    simclock_charge_us(simclock_profile()->driver_call_us); /* a poll */
    r = CUDA_ERROR_NOT_READY;
  }
  return r;
}

static CUresult elapsed(float *ms, CUevent hstart, CUevent hend) {
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  scu_event *a = get_event(hstart), *b = get_event(hend);
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  double ta, tb;
  if (a && b) {
    CUresult ra = stamp_settled(a, &ta), rb = stamp_settled(b, &tb);
    r = ra == CUDA_ERROR_INVALID_HANDLE || rb == CUDA_ERROR_INVALID_HANDLE
            ? CUDA_ERROR_INVALID_HANDLE
        : ra != CUDA_SUCCESS ? ra
                             : rb;
  }
  if (r == CUDA_SUCCESS)
    *ms = (float)((tb - ta) / 1e6);
  scu_event_put(a);
  scu_event_put(b);
  return r;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                                    CUevent hEnd) {
  SCU_API("cuEventElapsedTime");
  SCU_RETURN(elapsed(pMilliseconds, hStart, hEnd));
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart,
                                       CUevent hEnd) {
  SCU_API("cuEventElapsedTime");
  SCU_RETURN(elapsed(pMilliseconds, hStart, hEnd));
}

static CUresult wait_event(CUstream hs, CUevent h, unsigned flags, bool ptds) {
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  scu_event *ev = get_event(h);
  if (!ev)
    return CUDA_ERROR_INVALID_HANDLE;
  scu_stream *s;
  CUresult r = scu_stream_resolve(hs, ptds, &s);
  if (r == CUDA_SUCCESS) {
    uint64_t seq;
    scu_stream *es = last_record(ev, &seq);
    if (es) { /* never recorded: nothing to wait for */
      scu_op *op = scu_op_new(SCU_OP_NOP);
      r = op ? scu_op_add_dep(op, es, seq) : CUDA_ERROR_OUT_OF_MEMORY;
      if (r == CUDA_SUCCESS)
        r = scu_stream_submit(s, op, &seq);
      else
        scu_op_free(op);
      scu_stream_put(es);
    }
    scu_stream_put(s);
  }
  scu_event_put(ev);
  return r;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                   unsigned int Flags) {
  SCU_API("cuStreamWaitEvent");
  SCU_RETURN(wait_event(hStream, hEvent, Flags, false));
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent,
                                        unsigned int Flags) {
  SCU_API("cuStreamWaitEvent");
  SCU_RETURN(wait_event(hStream, hEvent, Flags, true));
}
