/*
 * Handles: the one table from handle to object, reference counts, and the
 * per-context lists of owned objects.
 *
 * A handle is 0x5c00'0000'0000'0000 | type << 48 | id with ids counting up
 * from 1 and never reused, so it cannot be mistaken for CU_STREAM_LEGACY
 * (0x1) or CU_STREAM_PER_THREAD (0x2), and a destroyed object's handle stays
 * invalid forever.  The type in the handle is informational: a lookup finds
 * the object by id and checks the object's own type against the caller's
 * mask.
 */
#include "simcuda_internal.h"

#include <stdlib.h>

#define HANDLE_TAG 0x5c00000000000000ull
#define ID_MASK 0x0000ffffffffffffull

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static scu_obj **buckets;
static size_t nbuckets, count;
static uint64_t next_id = 1;

void scu_glock(void) {
  pthread_mutex_lock(&g_lock);
}
void scu_gunlock(void) {
  pthread_mutex_unlock(&g_lock);
}

void scu_obj_init(scu_obj *o, scu_type t, void (*destroy)(scu_obj *)) {
  o->type = t;
  o->id = 0;
  atomic_init(&o->refs, 1);
  o->destroy = destroy;
  o->owner = NULL;
  o->onext = o->oprev = NULL;
  o->published = false;
  o->hh_next = NULL;
}

void scu_obj_ref(scu_obj *o) {
  atomic_fetch_add(&o->refs, 1);
}

void scu_obj_put(scu_obj *o) {
  if (o && atomic_fetch_sub(&o->refs, 1) == 1)
    o->destroy(o);
}

void *scu_obj_handle(const scu_obj *o) {
  return (void *)(uintptr_t)(HANDLE_TAG | ((uint64_t)o->type << 48) | o->id);
}

/* ---- the table (g_lock held) ------------------------------------------- */

static bool grow(void) {
  size_t n = nbuckets ? nbuckets * 2 : 256;
  scu_obj **b = calloc(n, sizeof *b);
  if (!b)
    return false;
  for (size_t i = 0; i < nbuckets; i++) {
    for (scu_obj *o = buckets[i], *next; o; o = next) {
      next = o->hh_next;
      o->hh_next = b[o->id & (n - 1)];
      b[o->id & (n - 1)] = o;
    }
  }
  free(buckets);
  buckets = b;
  nbuckets = n;
  return true;
}

static scu_obj *lookup(uint64_t id) {
  if (!nbuckets)
    return NULL;
  for (scu_obj *o = buckets[id & (nbuckets - 1)]; o; o = o->hh_next)
    if (o->id == id)
      return o;
  return NULL;
}

static void unlink_owner(scu_obj *o) {
  scu_ctx *c = o->owner;
  if (!c)
    return;
  scu_obj **head = &c->owned;
  if (o->oprev)
    o->oprev->onext = o->onext;
  else
    *head = o->onext;
  if (o->onext)
    o->onext->oprev = o->oprev;
  o->onext = o->oprev = NULL;
  o->owner = NULL;
}

static void remove_locked(scu_obj *o) {
  scu_obj **p = &buckets[o->id & (nbuckets - 1)];
  while (*p != o)
    p = (scu_obj **)&(*p)->hh_next;
  *p = o->hh_next;
  o->hh_next = NULL;
  o->published = false;
  count--;
  unlink_owner(o);
}

/* ---- public ------------------------------------------------------------ */

void *scu_obj_publish(scu_obj *o, scu_ctx *owner) {
  scu_glock();
  if (count + 1 > nbuckets * 2 && !grow()) {
    scu_gunlock();
    return NULL;
  }
  o->id = next_id++ & ID_MASK;
  o->hh_next = buckets[o->id & (nbuckets - 1)];
  buckets[o->id & (nbuckets - 1)] = o;
  count++;
  o->published = true;
  scu_obj_ref(o);
  if (owner) {
    scu_obj **head = &owner->owned;
    o->owner = owner;
    o->oprev = NULL;
    o->onext = *head;
    if (*head)
      (*head)->oprev = o;
    *head = o;
  }
  scu_gunlock();
  return scu_obj_handle(o);
}

static scu_obj *get_locked(const void *handle, unsigned mask) {
  uint64_t h = (uint64_t)(uintptr_t)handle;
  if ((h & 0xff00000000000000ull) != HANDLE_TAG)
    return NULL;
  scu_obj *o = lookup(h & ID_MASK);
  if (!o || !(mask & SCU_MASK(o->type)))
    return NULL;
  return o;
}

scu_obj *scu_obj_get(const void *handle, unsigned mask) {
  scu_glock();
  scu_obj *o = get_locked(handle, mask);
  if (o)
    scu_obj_ref(o);
  scu_gunlock();
  return o;
}

scu_obj *scu_obj_take(const void *handle, unsigned mask) {
  scu_glock();
  scu_obj *o = get_locked(handle, mask);
  if (o)
    remove_locked(o); /* the table's reference becomes the caller's */
  scu_gunlock();
  return o;
}

bool scu_obj_unpublish(scu_obj *o) {
  scu_glock();
  bool was = o->published;
  if (was)
    remove_locked(o);
  scu_gunlock();
  if (was)
    scu_obj_put(o);
  return was;
}

void scu_obj_release_owned(scu_ctx *owner, unsigned mask,
                           void (*each)(scu_obj *)) {
  for (;;) {
    scu_glock();
    scu_obj *o = owner->owned;
    while (o && !(mask & SCU_MASK(o->type)))
      o = o->onext;
    if (o)
      remove_locked(o); /* keeps the table's reference for us */
    scu_gunlock();
    if (!o)
      return;
    if (each)
      each(o);
    scu_obj_put(o);
  }
}
