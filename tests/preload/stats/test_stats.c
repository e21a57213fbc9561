/* Unit test of the exit report of IBP_STATS (preload/stats/report.c, rows
 * from preload/serve/figures.c).
 *
 * Builds those without the rest of libibp.so, fills the registry with
 * served regions whose counters, summary and parameters are set by hand (the
 * addresses are never touched), retires one and removes it, then runs each
 * report mode in a child process (ibp__figures_report runs once per process)
 * with stderr captured in a file:
 *
 *   test_stats text DIR        text table: columns, sizes, order, totals,
 *                              retired marker, once only; the devices'
 *                              profiles: one line when some device's
 *                              decode terms are unmeasured, none else
 *   test_stats json DIR        JSON file: present, no temporary left behind,
 *                              second call does nothing; DIR/stats.json is
 *                              then checked by check_stats.py
 *   test_stats errors DIR      unwritable paths: one warning each, no abort
 *   test_stats all DIR         text, errors, and json without the Python check
 *
 * With LOCALE=<name> in the environment the report runs under that locale
 * (numbers must still use '.').  Exit 0 = pass, 1 = fail. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "kernels/ibp_kernels.h"
#include "serve/figures.h"
#include "serve/region.h"
#include "stats/stats.h"

/* Normally defined in preload/base/config.c. */
ibp_config ibp__cfg;
__thread int ibp__guard;
int ibp__loaded(void) {
  return 1;
}
int ibp__config_load(void) { /* for stats/discover.c, never started here */
  return 0;
}

/* Normally preload/serve/choose/chooser.c: the regions here have no
 * chooser (their slots' pointers are NULL), so no route figures. */
void ibp__chooser_figures(struct ibp_chooser *ch,
                          ibp_stat_route out[IBP_STAT_ROUTES]) {
  (void)ch;
  (void)out;
}

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define MiB (UINT64_C(1) << 20)

/* ---- the regions --------------------------------------------------------- */

typedef struct fake {
  uintptr_t base;
  uint64_t bytes;
  const char *name;
  uint32_t rule_tensor;
  uint32_t R, chunk;
  double threshold;
  uint64_t tensors, compressed_bytes;
  ibp_region_state state;
  uint64_t served, passed, fallback, requested, pcie, compress_ns;
  uint64_t faults, dirty, recompressed;
} fake;

/* ids follow this order: gone = 1, emb = 2, unnamed = 3, weird = 4.
 * check_stats.py holds the same figures. */
static const fake regions[] = {
    {0x100000000000, 8 * MiB, "gone", 4096, 4096, 4, 0.75, 2048, 2 * MiB,
     IBP_REGION_READY, 10, 2, 1, 10 * MiB, 3 * MiB, 1500000000, 3, 4, 6},
    {0x200000000000, 64 * MiB, "emb", 1024, 1024, 2, 0.875, 65536, 48 * MiB,
     IBP_REGION_READY, 100, 0, 0, 640 * MiB, 480 * MiB, 250000000, 0, 0, 0},
    {0x300000000000, 1 * MiB, "", 4096, 0, 0, 0, 0, 0, IBP_REGION_CANDIDATE, 0,
     5, 0, 5 * MiB, 5 * MiB, 0, 0, 0, 0},
    {0x400000000000, 2 * MiB, "we\"ird\\na\tme\x01", 512, 512, 8, 0.5, 4096,
     1 * MiB, IBP_REGION_COMPRESSING, 0, 7, 0, 0, 0, 0, 0, 0, 0},
};

/* The exponent stage of each of regions[] (why, and on how many of its one
 * cluster): reported as "stage", "stage_pick" and "stage_clusters"
 * (check_stats.py); weird's is not, still compressing. */
static const struct {
  ibp_stage_pick pick;
  uint32_t on;
} stage_of[] = {{IBP_STAGE_PICK_TIME, 0},
                {IBP_STAGE_PICK_EXP, 1},
                {IBP_STAGE_PICK_UNTRIED, 0},
                {IBP_STAGE_PICK_EXP, 1}};

static ibp_region_rec *lookup(uintptr_t base) {
  ibp_region_rec *r = NULL;
  if (ibp_registry_find((const void *)base, 1, &r) != IBP_FIND_FOUND) {
    fprintf(stderr, "FAIL: region at %#lx not found\n", (unsigned long)base);
    exit(1);
  }
  ibp_region_release(r); /* the registry keeps its own reference */
  return r;
}

static void move_to(ibp_region_rec *r, ibp_region_state to) {
  static const ibp_region_state path[] = {
      IBP_REGION_CANDIDATE, IBP_REGION_COMPRESSING, IBP_REGION_READY};
  for (int i = 0; i < 2 && ibp_region_state_get(r) != to; i++)
    ibp_region_transition(r, path[i], path[i + 1]);
}

static void set_stage(ibp_layout *l, size_t i) {
  l->stage_pick = stage_of[i].pick;
  if (!stage_of[i].on)
    return;
  l->stages = calloc(1, sizeof *l->stages);
  if (!l->stages) {
    fprintf(stderr, "FAIL: out of memory\n");
    exit(1);
  }
  l->stages[0].kind = IBP_STAGE_EXP;
}

static void set_codec(ibp_region_rec *r, const fake *f) {
  if (f->R == 0)
    return;
  ibp_layout *l = &ibp__served(r)->layout;
  uint8_t *mask = calloc(f->R, 1), *bitval = calloc(f->R, 1);
  l->clusters.params = calloc(1, sizeof *l->clusters.params);
  l->clusters.count = 1;
  if (!mask || !bitval || !l->clusters.params ||
      ibp_params_from_masks(f->R, f->chunk, mask, bitval,
                            &l->clusters.params[0]) != IBP_OK) {
    fprintf(stderr, "FAIL: ibp_params_from_masks\n");
    exit(1);
  }
  free(mask);
  free(bitval);
  l->clusters.params[0].threshold = f->threshold;
  l->summary.tensors = f->tensors;
  l->summary.tensors_compressed = f->tensors;
  l->summary.compressed_bytes = f->compressed_bytes;
  l->summary.metadata_bytes = 2 * f->R;
  set_stage(l, (size_t)(f - regions));
}

static void set_counters(ibp_region_rec *r, const fake *f, uint64_t served) {
  ibp_served_region *s = ibp__served(r);
  atomic_store(&s->counters.copies_served, served);
  atomic_store(&s->counters.copies_passthrough, f->passed);
  atomic_store(&s->counters.copies_fallback, f->fallback);
  atomic_store(&s->counters.passed[IBP_PASSED_NOT_READY], f->passed);
  atomic_store(&s->counters.passed[IBP_PASSED_FAILED], f->fallback);
  atomic_store(&s->counters.bytes_requested, f->requested);
  atomic_store(&s->counters.bytes_read_pcie, f->pcie);
  atomic_store(&s->counters.compress_seconds, f->compress_ns);
  atomic_store(&s->track.write_faults, f->faults);
  atomic_store(&s->track.dirty_tensors, f->dirty);
  atomic_store(&s->counters.tensors_recompressed, f->recompressed);
  /* which tracker held it: reported by name (check_stats.py) */
  atomic_store(&s->track.kind, f->faults ? IBP_TRACKER_KIND_MPROTECT
                               : served  ? IBP_TRACKER_KIND_UFFD
                                         : IBP_TRACKER_NONE);
}

static void add_region(const fake *f) {
  ibp_region_rule rule = {.tensor_bytes = f->rule_tensor};
  int64_t id =
      ibp_registry_add((const void *)f->base, f->bytes, &rule, f->name);
  if (id < 1) {
    fprintf(stderr, "FAIL: ibp_registry_add %s: %lld\n", f->name,
            (long long)id);
    exit(1);
  }
  ibp_region_rec *r = lookup(f->base);
  ibp_served_region *s = ibp__served_new(r);
  if (!s) {
    fprintf(stderr, "FAIL: ibp__served_new %s\n", f->name);
    exit(1);
  }
  ibp_region_set_owner(r, s);
  set_codec(r, f);
  move_to(r, f->state);
  set_counters(r, f, f->served);
}

/* What libibp's release hook does for host memory. */
static void release_owner(ibp_region_rec *r, void *ctx) {
  (void)ctx;
  ibp__served_free(ibp__served(r));
}

/* "gone" is retired twice (the later figures count) and removed; "emb" is
 * retired while still live (its live figures count). */
static void setup(void) {
  ibp_registry_init(release_owner, NULL);
  for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
    add_region(&regions[i]);
  ibp_region_rec *gone = lookup(regions[0].base);
  set_counters(gone, &regions[0], 9);
  ibp__figures_retire(gone, 0);
  set_counters(gone, &regions[0], regions[0].served);
  ibp__figures_retire(gone, 0);
  CHECK(ibp_registry_remove((const void *)regions[0].base) == 0, "remove");
  ibp_region_rec *emb = lookup(regions[1].base);
  set_counters(emb, &regions[1], 50);
  ibp__figures_retire(emb, 0);
  set_counters(emb, &regions[1], regions[1].served);
  CHECK(ibp_registry_count() == 3, "3 live regions, got %zu",
        ibp_registry_count());
}

/* ---- running one report in a child --------------------------------------- */

static char dir[1024];

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strdup(buf);
}

/* What the gate notes of its devices' profiles (serve/choose/gate.c), in
 * the report's child: */
typedef enum notes {
  NO_NOTES,       /* no device set up */
  MEASURED_NOTES, /* one device, its decode terms of this decoder */
  MIXED_NOTES,    /* device 0 unmeasured (noted twice: the first counts),
                     device 2 measured, device 5 unmeasured */
} notes;

static void note_profiles(notes n) {
  if (n == MEASURED_NOTES)
    ibp__stats_note_profile(1, "mine", IBP_DECODER_BUILD, 1);
  if (n != MIXED_NOTES)
    return;
  ibp__stats_note_profile(0, "h100-pcie5", "word-pdep", 0);
  ibp__stats_note_profile(0, "other", IBP_DECODER_BUILD, 1); /* ignored */
  ibp__stats_note_profile(2, "mine", IBP_DECODER_BUILD, 1);
  ibp__stats_note_profile(5, "we\"ird", "unknown", 0);
  ibp__stats_note_profile(-1, "bad", "unknown", 0);                /* none */
  ibp__stats_note_profile(IBP_STATS_DEVICES, "bad", "unknown", 0); /* none */
}

static char *report_noted(ibp_stats_mode mode, const char *path, int calls,
                          notes n);

/* Runs ibp__figures_report `calls` times in a child with IBP_STATS = mode and
 * path; returns what it wrote on stderr (malloc'd). */
static char *report(ibp_stats_mode mode, const char *path, int calls) {
  return report_noted(mode, path, calls, NO_NOTES);
}

/* The same, with the devices' profiles `n` noted first. */
static char *report_noted(ibp_stats_mode mode, const char *path, int calls,
                          notes n) {
  char err_path[1100];
  snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
      _exit(2);
    const char *loc = getenv("LOCALE");
    if (loc && *loc && !setlocale(LC_ALL, loc))
      _exit(3);
    ibp_config_init(&ibp__cfg);
    ibp__cfg.stats = mode;
    snprintf(ibp__cfg.stats_path, sizeof ibp__cfg.stats_path, "%s", path);
    note_profiles(n);
    for (int i = 0; i < calls; i++)
      ibp__figures_report();
    _exit(ibp__guard == 0 ? 0 : 4);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "report child exited with status %#x", status);
  char *out = read_file(err_path);
  unlink(err_path);
  return out ? out : strdup("");
}

static int count_lines_starting(const char *text, const char *prefix) {
  int n = 0;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
    if (strncmp(p, prefix, strlen(prefix)) == 0)
      n++;
  return n;
}

/* The line of text containing needle, copied into out; 0 if none. */
static int line_with(const char *text, const char *needle, char *out,
                     size_t cap) {
  const char *hit = strstr(text, needle);
  if (!hit)
    return 0;
  const char *start = hit;
  while (start > text && start[-1] != '\n')
    start--;
  const char *end = strchr(hit, '\n');
  size_t n = end ? (size_t)(end - start) : strlen(start);
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), start);
  return 1;
}

/* ---- the cases ----------------------------------------------------------- */

static void test_off(void) {
  char path[1100];
  snprintf(path, sizeof path, "%s/off.json", dir);
  char *out = report(IBP_STATS_OFF, path, 1);
  CHECK(out[0] == '\0', "stats off printed: %s", out);
  CHECK(access(path, F_OK) != 0, "stats off wrote %s", path);
  free(out);
}

static void check_row(const char *out, const char *name, const char *a,
                      const char *b) {
  char line[512];
  if (!line_with(out, name, line, sizeof line)) {
    CHECK(0, "no row for %s in:\n%s", name, out);
    return;
  }
  CHECK(strncmp(line, "[ibp]", 5) == 0, "row without prefix: %s", line);
  CHECK(strstr(line, a) != NULL, "row %s lacks '%s': %s", name, a, line);
  CHECK(strstr(line, b) != NULL, "row %s lacks '%s': %s", name, b, line);
}

static void test_text(void) {
  char *out = report(IBP_STATS_STDERR, "", 2);
  CHECK(count_lines_starting(out, "[ibp] stats: 4 regions") == 1 &&
            count_lines_starting(out, "[ibp] stats: requested") == 1,
        "want the header and the summary line once each:\n%s", out);
  /* each copy once: served by route, passed by reason */
  CHECK(count_lines_starting(out, "[ibp] stats: region 'emb': 100 copies: "
                                  "100 served (zerocopy 100), 0 to the "
                                  "driver\n") == 1,
        "emb's copies line:\n%s", out);
  CHECK(count_lines_starting(out, "[ibp] stats: region 'region@0x300000000000'"
                                  ": 5 copies: 0 served, 5 to the driver "
                                  "(not-ready 5)\n") == 1,
        "the unnamed region's copies line:\n%s", out);
  CHECK(strncmp(out, "[ibp] stats:", 12) == 0, "header first:\n%s", out);
  size_t row_len = 0;
  int rows = 0;
  for (const char *p = out, *nl; *p; p = nl + 1) {
    nl = strchr(p, '\n');
    if (!nl) {
      CHECK(0, "last line without newline: %s", p);
      break;
    }
    CHECK(strncmp(p, "[ibp]", 5) == 0, "line without [ibp]: %s", p);
    if (strncmp(p, "[ibp]  ", 7) != 0)
      continue; /* table rows are indented; all as long as the header */
    if (rows++ == 0)
      row_len = (size_t)(nl - p);
    CHECK((size_t)(nl - p) == row_len, "ragged table row: %.*s", (int)(nl - p),
          p);
  }
  CHECK(rows == 6, "header + 4 regions + total, got %d rows", rows);
  check_row(out, " gone ", "ready*", "8.0 MiB");
  check_row(out, " gone ", "75.0%", "3.0 MiB");
  check_row(out, " emb ", "64.0 MiB", "1.0 KiB");
  check_row(out, " emb ", "25.0%", "0.875");
  check_row(out, "region@0x300000000000", "candidate", "auto");
  check_row(out, "we\"ird\\na?me?", "compressing", "2.0 MiB");
  check_row(out, "total (4)", "75.0 MiB", "655.0 MiB");
  check_row(out, "total (4)", "488.0 MiB", "1.750 s");
  check_row(out, "read over PCIe", "655.0 MiB", "488.0 MiB");
  check_row(out, "read over PCIe", "25.5%", "requested");
  const char *g = strstr(out, " gone "), *e = strstr(out, " emb "),
             *u = strstr(out, "region@0x3"), *w = strstr(out, "we\"ird"),
             *t = strstr(out, "total (4)");
  CHECK(g && e && u && w && t && g < e && e < u && u < w && w < t,
        "rows in registration order, totals last:\n%s", out);
  /* served: gone's second retire (10), emb's live figures (100) */
  check_row(out, " gone ", " 10 ", " 2 ");
  check_row(out, " emb ", " 100 ", "480.0 MiB");
  char head[512];
  CHECK(line_with(out, "  region ", head, sizeof head), "column header");
  CHECK(strstr(head, "over PCIe") && strstr(head, "served"), "header: %s",
        head);
  fputs(out, stdout);
  free(out);
}

/* The devices' profiles: one line, once, when some device's decode terms
 * are unmeasured for this decoder; none when every device's are measured
 * or none was set up (test_text). */
static void test_text_decoder(void) {
  char *out = report_noted(IBP_STATS_STDERR, "", 2, MEASURED_NOTES);
  const int lines = count_lines_starting(out, "[ibp] stats:");
  CHECK(!strstr(out, "decode terms"), "measured: %s", out);
  free(out);
  out = report_noted(IBP_STATS_STDERR, "", 2, MIXED_NOTES);
  CHECK(count_lines_starting(out, "[ibp] stats:") == lines + 1 &&
            count_lines_starting(out, "[ibp] stats: decode terms") == 1,
        "unmeasured: one more line:\n%s", out);
  char line[512], want[512];
  snprintf(want, sizeof want,
           "[ibp] stats: decode terms unmeasured for this decoder (%s): "
           "device 0's profile h100-pcie5 has them of decoder_build "
           "word-pdep (and other devices' too), a guess until 'ibp "
           "calibrate' measures them (docs/PROFILE.md)",
           IBP_DECODER_BUILD);
  CHECK(line_with(out, "decode terms", line, sizeof line) &&
            strcmp(line, want) == 0,
        "the line:\n%s\nwant\n%s", line, want);
  fputs(out, stdout);
  free(out);
}

static int count_entries(const char *path) {
  DIR *d = opendir(path);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static void test_json(void) {
  char sub[1100], path[1200];
  snprintf(sub, sizeof sub, "%s/json", dir);
  mkdir(sub, 0755);
  snprintf(path, sizeof path, "%s/stats.json", sub);
  char *out = report_noted(IBP_STATS_JSON, path, 1, MIXED_NOTES);
  CHECK(out[0] == '\0', "JSON mode printed: %s", out);
  free(out);
  char *doc = read_file(path);
  CHECK(doc != NULL, "no %s", path);
  CHECK(count_entries(sub) == 1, "temporary file left in %s", sub);
  if (doc) {
    CHECK(strncmp(doc, "{\n  \"version\": 1,", 17) == 0, "head: %.40s", doc);
    CHECK(strstr(doc, "\"name\": \"we\\\"ird\\\\na\\u0009me\\u0001\""),
          "escaped name in %s", doc);
    CHECK(strstr(doc, "\"name\": \"region@0x300000000000\""), "%s", doc);
    CHECK(strstr(doc, "\"threshold\": 0.875,"), "%s", doc);
    CHECK(!strstr(doc, "nan") && !strstr(doc, "inf"), "%s", doc);
    char want[512];
    snprintf(want, sizeof want,
             "  \"decoder\": {\"build\": \"%s\", \"devices\": ["
             "{\"device\": 0, \"profile\": \"h100-pcie5\", "
             "\"decoder_build\": \"word-pdep\", \"decode_measured\": false}, "
             "{\"device\": 2, \"profile\": \"mine\", "
             "\"decoder_build\": \"%s\", \"decode_measured\": true}, "
             "{\"device\": 5, \"profile\": \"we\\\"ird\", "
             "\"decoder_build\": \"unknown\", \"decode_measured\": false}]},\n",
             IBP_DECODER_BUILD, IBP_DECODER_BUILD);
    CHECK(strstr(doc, want), "no\n%s\nin\n%s", want, doc);
  }
  free(doc);
  /* the report runs once per process: a second call writes nothing */
  char again[1200];
  snprintf(again, sizeof again, "%s/again.json", sub);
  out = report(IBP_STATS_JSON, again, 2);
  CHECK(out[0] == '\0', "printed: %s", out);
  free(out);
  CHECK(count_entries(sub) == 2, "second call wrote again");
  /* an existing file is replaced (what check_stats.py reads) */
  out = report_noted(IBP_STATS_JSON, path, 1, MIXED_NOTES);
  free(out);
  CHECK(count_entries(sub) == 2, "replace left files in %s", sub);
  unlink(again);
}

static void expect_one_warning(const char *path, const char *why) {
  char *out = report(IBP_STATS_JSON, path, 2);
  CHECK(count_lines_starting(out, "[ibp]") == 1 &&
            strchr(out, '\n') == out + strlen(out) - 1,
        "%s: want exactly one [ibp] line, got:\n%s", why, out);
  CHECK(strstr(out, "IBP_STATS") && strstr(out, path),
        "%s: the warning names IBP_STATS and the path: %s", why, out);
  fputs(out, stdout);
  free(out);
}

static void test_errors(void) {
  char path[1200];
  snprintf(path, sizeof path, "%s/no-such-dir/stats.json", dir);
  expect_one_warning(path, "missing directory");
  expect_one_warning(dir, "path is a directory");
  snprintf(path, sizeof path, "%s/file/stats.json", dir);
  char file[1200];
  snprintf(file, sizeof file, "%s/file", dir);
  FILE *f = fopen(file, "w");
  if (f)
    fclose(f);
  expect_one_warning(path, "parent is a file");
  unlink(file);
  char *out = report(IBP_STATS_JSON, "/dev/null", 1);
  CHECK(out[0] == '\0', "/dev/null is written in place: %s", out);
  free(out);
}

/* mkdir -p */
static int make_dirs(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return -1;
      *s = '/';
    }
  return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s text|json|errors|all DIR\n", argv[0]);
    return 2;
  }
  snprintf(dir, sizeof dir, "%s", argv[2]);
  if (make_dirs(dir) != 0) {
    fprintf(stderr, "cannot create %s\n", dir);
    return 1;
  }
  const char *loc = getenv("LOCALE");
  if (loc && *loc) { /* make sure the locale really writes "0,5" */
    char half[16] = "";
    if (setlocale(LC_ALL, loc))
      snprintf(half, sizeof half, "%.1f", 0.5);
    CHECK(strcmp(half, "0,5") == 0, "locale %s prints 0.5 as '%s'", loc, half);
    setlocale(LC_ALL, "C");
  }
  setup();
  const char *what = argv[1];
  int all = strcmp(what, "all") == 0;
  if (all || strcmp(what, "text") == 0) {
    test_off();
    test_text();
    test_text_decoder();
  }
  if (all || strcmp(what, "json") == 0)
    test_json();
  if (all || strcmp(what, "errors") == 0)
    test_errors();
  ibp_registry_fini();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("test_stats %s: ok\n", what);
  return failures ? 1 : 0;
}
