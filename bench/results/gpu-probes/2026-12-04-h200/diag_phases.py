import sys,re
root=sys.argv[1]
p=root+'/preload/serve/substitute.c'
s=open(p).read()
hdr='''#include <x86intrin.h>
#include <stdio.h>
/* DIAG (not committed): CPU cycles per phase of a copy's way */
static unsigned long long ph_c[16], ph_n[16];
static __thread unsigned long long ph_last;
#define PH(i) do { unsigned long long n_ = __rdtsc(); ph_c[i] += n_ - ph_last; ph_n[i]++; ph_last = n_; } while (0)
static const char *ph_name[16] = {"find","hold_more","locate","estimate","batch_offer","look+decide","driver_copy","sync+prepare","submit","end_rest","held_exit","","","","",""};
__attribute__((destructor)) static void ph_dump(void) {
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); unsigned long long c0 = __rdtsc();
  for (volatile int i = 0; i < 2000000; i++) ;
  clock_gettime(CLOCK_MONOTONIC, &b); unsigned long long c1 = __rdtsc();
  double ns_per_c = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)(c1 - c0);
  FILE *f = fopen(getenv("IBP_DIAG_OUT") ? getenv("IBP_DIAG_OUT") : "/dev/stderr", "a");
  if (!f) return;
  for (int i = 0; i < 16; i++) if (ph_n[i]) fprintf(f, "DIAG %-14s n=%10llu ns_each=%8.1f total_ms=%9.3f\\n", ph_name[i], ph_n[i], ph_c[i] * ns_per_c / ph_n[i], ph_c[i] * ns_per_c / 1e6);
  fclose(f);
}
'''
# after includes: put after the last #include line
idx=[m.end() for m in re.finditer(r'^#include .*$', s, re.M)][-1]
s=s[:idx]+'\n'+hdr+s[idx:]
def rep(old,new,cnt=1):
    global s
    assert old in s, old
    s=s.replace(old,new,cnt)
rep('''int ibp__serve_htod(const ibp_copy *c) {
  if (c->bytes == 0 || c->bytes < ibp__cfg.min_copy_bytes)
    return 1;
  ibp_region_rec *r = NULL;
  ibp_find_result f = ibp_registry_find(c->src, c->bytes, &r);
  if (f == IBP_FIND_NONE)
    return 1;''','''int ibp__serve_htod(const ibp_copy *c) {
  if (c->bytes == 0 || c->bytes < ibp__cfg.min_copy_bytes)
    return 1;
  ph_last = __rdtsc();
  ibp_region_rec *r = NULL;
  ibp_find_result f = ibp_registry_find(c->src, c->bytes, &r);
  PH(0);
  if (f == IBP_FIND_NONE)
    return 1;''')
rep('''  ibp__guard--;
  ibp_region_release(r);
  return rc;''','''  ibp__guard--;
  ibp_region_release(r);
  PH(9);
  return rc;''')
rep('''  int offer = hold_more ? ibp__batch_hold_more(x) : IBP_BATCH_ALONE;
  if (offer == IBP_BATCH_HELD)
    return 0; /* held, like the batch's earlier copies */''','''  int offer = hold_more ? ibp__batch_hold_more(x) : IBP_BATCH_ALONE;
  PH(1);
  if (offer == IBP_BATCH_HELD)
    return 0; /* held, like the batch's earlier copies */''')
rep('''  const int why = locate(x, &alloc, &alloc_bytes);
  if (why >= 0) {''','''  const int why = locate(x, &alloc, &alloc_bytes);
  PH(2);
  if (why >= 0) {''')
rep('''  if (offer != IBP_BATCH_ALONE)
    offer = ibp__batch_offer(x, pcie, alloc, alloc_bytes);''','''  PH(3);
  if (offer != IBP_BATCH_ALONE)
    offer = ibp__batch_offer(x, pcie, alloc, alloc_bytes);
  PH(4);''')
rep('''      if (choose(x, &d, 1, 1) == IBP_ROUTE_DRIVER)
        return driver_copy(x, &d, d.choice.timed);''','''      if (choose(x, &d, 1, 1) == IBP_ROUTE_DRIVER) {
        PH(5);
        int rc_ = driver_copy(x, &d, d.choice.timed);
        PH(6);
        return rc_;
      }''')
rep('''  if (!decided)
    return submit_by(x, &d, choose(x, &d, 1, 0));''','''  PH(7);
  if (!decided) {
    int rc_ = submit_by(x, &d, choose(x, &d, 1, 0));
    PH(8);
    return rc_;
  }''')
open(p,'w').write(s)
