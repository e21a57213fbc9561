/* `ibp compress`, `ibp decompress` and `ibp verify`: files in the ibp
 * container format (include/ibp/container.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "codec_opts.h"
#include "ibp/container.h"
#include "mapped_file.h"
#include "out_file.h"
#include "progress.h"
#include "stage_choice.h"

static const char compress_help[] =
    "Usage: ibp compress IN OUT --tensor-bytes R [options]\n"
    "\n"
    "Searches the chunk width and threshold that save most on IN (taken as\n"
    "tensors of R bytes; a tail shorter than R is kept raw) and writes IN\n"
    "compressed into the ibp container OUT.  OUT appears only when complete:\n"
    "on any error nothing is left behind.  An existing OUT is replaced only\n"
    "with -f.  IN '-' is standard input, OUT '-' standard output (the\n"
    "summary then goes to standard error).\n"
    "\n"
    "Options:\n" CODEC_OPTIONS_HELP CODEC_CLUSTER_HELP CODEC_STAGE_HELP
    "  -f, --force        replace OUT if it exists\n"
    "  -q, --quiet        print nothing on success\n"
    "  -h, --help         show this help\n";

static const char decompress_help[] =
    "Usage: ibp decompress IN OUT [options]\n"
    "\n"
    "Decodes the ibp container IN into OUT, checking every tensor and the\n"
    "checksum of the original bytes.  OUT appears only when complete: on any\n"
    "error nothing is left behind.  An existing OUT is replaced only with\n"
    "-f.  IN '-' is standard input, OUT '-' standard output (the summary\n"
    "then goes to standard error).\n"
    "\n"
    "Options:\n"
    "  -f, --force        replace OUT if it exists\n"
    "  -q, --quiet        print nothing on success\n"
    "  -h, --help         show this help\n";

static const char verify_help[] =
    "Usage: ibp verify IN [--original FILE]\n"
    "\n"
    "Checks the ibp container IN: header, metadata, every tensor and the\n"
    "checksum of the original bytes.  With --original, also compares every\n"
    "decoded byte with FILE.  Prints \"OK ...\" and exits 0 when all is well.\n"
    "IN '-' is standard input.\n"
    "\n"
    "Options:\n"
    "  --original FILE    compare the decoded bytes with FILE\n"
    "  -q, --quiet        print nothing on success\n"
    "  -h, --help         show this help\n";

static const cli_option compress_options[] = {
    CODEC_CLI_OPTIONS, CODEC_CLUSTER_OPTION, CODEC_STAGE_OPTIONS,
    {"force", 'f', 0}, {"quiet", 'q', 0},    {"help", 'h', 0},
    {NULL, 0, 0}};
static const cli_option decompress_options[] = {
    {"force", 'f', 0}, {"quiet", 'q', 0}, {"help", 'h', 0}, {NULL, 0, 0}};
static const cli_option verify_options[] = {
    {"original", 0, 1}, {"quiet", 'q', 0}, {"help", 'h', 0}, {NULL, 0, 0}};

typedef struct container_args {
  const char *cmd;
  const char *help;
  const cli_option *options;
  int want_out;   /* takes OUT after IN */
  int want_codec; /* needs --tensor-bytes */
  const char *in;
  const char *out;      /* compress, decompress */
  const char *original; /* verify */
  int quiet;
  int force; /* replace an existing OUT */
  codec_opts codec;
} container_args;

/* Where decoded or encoded bytes go: a file (out != NULL) or a comparison
 * with the original bytes. */
typedef struct sink {
  out_file *out;
  const uint8_t *original;
  uint64_t original_bytes;
  uint64_t mismatch_at; /* first differing byte; UINT64_MAX = none */
  int err;              /* errno of a failed write */
  progress pg;
  uint64_t done; /* furthest byte written */
} sink;

/* ---- arguments ---------------------------------------------------------- */

static int take_option(container_args *a, const char *name, const char *v) {
  if (strcmp(name, "help") == 0) {
    fputs(a->help, stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "quiet") == 0)
    a->quiet = 1;
  else if (strcmp(name, "force") == 0)
    a->force = 1;
  else if (strcmp(name, "original") == 0)
    a->original = v;
  else if (codec_opts_take(&a->codec, name, v) < 0)
    return CLI_EXIT_USAGE;
  return -1;
}

static int take_positional(container_args *a, const char *v) {
  if (a->in == NULL)
    a->in = v;
  else if (a->want_out && a->out == NULL)
    a->out = v;
  else
    return cli_syntax_error(a->cmd, "unexpected argument '%s'", v);
  return -1;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, container_args *a) {
  cli_parser ps;
  cli_item it;
  char err[256];
  codec_opts_init(&a->codec);
  cli_parser_init(&ps, argc, argv, 1, a->options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    int rc;
    if (it.kind == CLI_ERROR)
      return cli_syntax_error(a->cmd, "%s", err);
    if (it.kind == CLI_POSITIONAL)
      rc = take_positional(a, it.value);
    else
      rc = take_option(a, a->options[it.option].name, it.value);
    if (rc >= 0)
      return rc;
  }
  if (a->in == NULL)
    return cli_syntax_error(a->cmd, "missing IN");
  if (a->want_out && a->out == NULL)
    return cli_syntax_error(a->cmd, "missing OUT");
  if (a->want_codec && a->codec.tensor_bytes == 0)
    return cli_syntax_error(a->cmd, "--tensor-bytes R is required");
  /* before any work: a long search must not end in a refusal */
  if (a->want_out && !a->force && out_file_would_replace(a->out))
    return cli_file_error(a->out, "exists (-f replaces it)");
  return -1;
}

static void args_init(container_args *a, const char *cmd, const char *help,
                      const cli_option *options) {
  memset(a, 0, sizeof *a);
  a->cmd = cmd;
  a->help = help;
  a->options = options;
  a->want_out = options != verify_options;
  a->want_codec = options == compress_options;
}

/* ---- sinks -------------------------------------------------------------- */

static void sink_init(sink *s, out_file *out, const char *label, uint64_t total,
                      int quiet) {
  memset(s, 0, sizeof *s);
  s->out = out;
  s->mismatch_at = UINT64_MAX;
  progress_start(&s->pg, label, total, !quiet);
}

static void sink_advance(sink *s, uint64_t offset, size_t len) {
  if (offset + len > s->done)
    s->done = offset + len;
  progress_update(&s->pg, s->done);
}

static int sink_write(void *ctx, uint64_t offset, const void *buf, size_t len) {
  sink *s = ctx;
  if (s->err != 0)
    return -1;
  if (out_file_pwrite(s->out, offset, buf, len) != 0) {
    s->err = errno;
    return -1;
  }
  sink_advance(s, offset, len);
  return 0;
}

static int sink_compare(void *ctx, uint64_t offset, const void *buf,
                        size_t len) {
  sink *s = ctx;
  const uint8_t *b = buf;
  if (s->mismatch_at != UINT64_MAX) /* keep the first difference */
    return -1;
  if (offset > s->original_bytes || len > s->original_bytes - offset) {
    s->mismatch_at = offset;
    return -1;
  }
  const uint8_t *o = s->original + offset;
  if (memcmp(o, b, len) != 0) {
    size_t i = 0;
    while (o[i] == b[i])
      i++;
    s->mismatch_at = offset + i;
    return -1;
  }
  sink_advance(s, offset, len);
  return 0;
}

/* ---- shared steps ------------------------------------------------------- */

/* Maps a container and reads its header; prints the error. */
static int open_container(const char *path, mapped_file *mf,
                          ibp_container_info *info) {
  int err = mapped_file_open(mf, path);
  if (err != 0)
    return cli_file_error(path, mapped_file_strerror(err));
  ibp_status st = ibp_container_read_info(mf->data, mf->size, info);
  if (st != IBP_OK) {
    mapped_file_close(mf);
    return cli_container_error(path, st);
  }
  return CLI_EXIT_OK;
}

static int open_output(const char *path, out_file *of) {
  int err = out_file_open(of, path);
  if (err != 0)
    return cli_file_error(path, strerror(err));
  return CLI_EXIT_OK;
}

/* Commits the output after `st`; on any failure removes it and prints why:
 * a write error names `out`, a codec error the container `in` (compress:
 * NULL, the command).  Returns the exit code. */
static int finish_output(sink *s, ibp_status st, const char *in,
                         const char *out, uint64_t size) {
  progress_finish(&s->pg);
  if (st != IBP_OK) {
    out_file_abort(s->out);
    if (st == IBP_ERR_IO && s->err != 0)
      return cli_file_error(out, strerror(s->err));
    if (in != NULL)
      return cli_container_error(in, st);
    cli_error("ibp compress", "%s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  int err = out_file_commit(s->out, size);
  if (err != 0)
    return cli_file_error(out, strerror(err));
  return CLI_EXIT_OK;
}

/* ---- compress ----------------------------------------------------------- */

/* Container size expected from the search, for the progress bar only. */
static uint64_t expected_size(const ibp_params *p, const ibp_search_report *r,
                              uint64_t bytes) {
  int c = ibp_chunk_width_index(p->chunk_bytes);
  double saved = c >= 0 && r->best_saved[c] > 0.0 ? r->best_saved[c] : 0.0;
  return IBP_CONTAINER_HEADER_BYTES + 2ull * p->tensor_bytes +
         (uint64_t)((double)bytes * (1.0 - saved));
}

/* Where the summary goes: standard error when OUT is standard output. */
static FILE *summary_stream(const container_args *a) {
  return strcmp(a->out, "-") == 0 ? stderr : stdout;
}

static void print_compress_summary(const container_args *a,
                                   const ibp_container_info *info) {
  double ratio = (double)info->original_bytes / (double)info->container_bytes;
  FILE *f = summary_stream(a);
  fprintf(f,
          "%s -> %s: %llu B -> %llu B (ratio %.3f, saved %.2f%%), "
          "chunk %u B, threshold %.3f\n",
          a->in, a->out, (unsigned long long)info->original_bytes,
          (unsigned long long)info->container_bytes, ratio,
          100.0 * (1.0 - 1.0 / ratio), info->chunk_bytes, info->threshold);
  if (info->clusters > 1)
    fprintf(f, "%s: %u clusters (Mask/Bitval pairs)\n", a->out, info->clusters);
  if (info->stage_bytes)
    fprintf(f, "%s: exponent stage after IBP (container version %u)\n", a->out,
            info->version);
  if (info->tail_bytes != 0)
    fprintf(f,
            "note: %s: size is not a multiple of %u B: the last %llu B are "
            "kept raw\n",
            a->in, info->tensor_bytes, (unsigned long long)info->tail_bytes);
}

/* The exponent stage when it stores IN in fewer bytes than IBP alone,
 * metadata included (`ibp analyze`'s stage.stage_stores_fewer_bytes, as
 * --stage auto says); else sc is emptied.  Bytes alone decide: a container
 * is decoded on the CPU (`ibp decompress`), so neither the profile's
 * decode cost nor the device decoder's tensor sizes, which analyze's pick
 * (stage.pick, libibp's rule: docs/FORMAT.md §9.5) also weighs, apply. */
static int pick_stage(const container_args *a, const mapped_file *in,
                      const ibp_params *p, const ibp_clusters *cl,
                      stage_choice *sc) {
  const ibp_clusters one = {1, (ibp_params *)p};
  int rc =
      stage_choice_measure("ibp compress", &a->codec, cl->count ? cl : &one,
                           in->data, in->size, !a->quiet, sc);
  if (rc == CLI_EXIT_OK && sc->dtype && sc->total >= sc->versus_total)
    stage_choice_free(sc); /* IBP alone (every cluster's stage none) */
  return rc;
}

static int compress_file(const container_args *a, const mapped_file *in) {
  ibp_params p;
  ibp_search_report report;
  ibp_clusters cl = {0};
  memset(&p, 0, sizeof p);
  int rc = codec_opts_search("ibp compress", &a->codec, in->data, in->size,
                             !a->quiet, &p, &report);
  if (rc == CLI_EXIT_OK && a->codec.clusters != 1)
    rc = codec_opts_cluster("ibp compress", &a->codec, in->data, in->size, &p,
                            !a->quiet, &cl, NULL);
  stage_choice sc;
  memset(&sc, 0, sizeof sc);
  if (rc == CLI_EXIT_OK && a->codec.stage)
    rc = pick_stage(a, in, &p, &cl, &sc);
  if (rc != CLI_EXIT_OK) {
    ibp_params_free(&p);
    ibp_clusters_free(&cl);
    stage_choice_free(&sc);
    return rc;
  }
  const ibp_clusters *use = sc.dtype ? &sc.clusters : &cl;
  out_file of;
  rc = open_output(a->out, &of);
  if (rc == CLI_EXIT_OK) {
    sink s;
    ibp_container_info info;
    memset(&info, 0, sizeof info);
    sink_init(&s, &of, "compress", expected_size(&p, &report, in->size),
              a->quiet);
    ibp_status st = ibp_container_write_staged(
        use->count ? use->params : &p, sc.dtype ? sc.stages : NULL,
        use->count ? use->count : 1, in->data, in->size,
        cli_threads(a->codec.threads), sink_write, &s, &info);
    rc = finish_output(&s, st, NULL, a->out, info.container_bytes);
    if (rc == CLI_EXIT_OK && !a->quiet)
      print_compress_summary(a, &info);
  }
  ibp_params_free(&p);
  ibp_clusters_free(&cl);
  stage_choice_free(&sc);
  return rc;
}

int cmd_compress(int argc, char **argv) {
  container_args a;
  args_init(&a, "compress", compress_help, compress_options);
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  mapped_file in;
  int err = mapped_file_open(&in, a.in);
  if (err != 0)
    return cli_file_error(a.in, mapped_file_strerror(err));
  rc = compress_file(&a, &in);
  mapped_file_close(&in);
  return rc;
}

/* ---- decompress --------------------------------------------------------- */

int cmd_decompress(int argc, char **argv) {
  container_args a;
  args_init(&a, "decompress", decompress_help, decompress_options);
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  mapped_file in;
  ibp_container_info info;
  rc = open_container(a.in, &in, &info);
  if (rc != CLI_EXIT_OK)
    return rc;
  out_file of;
  rc = open_output(a.out, &of);
  if (rc == CLI_EXIT_OK) {
    sink s;
    sink_init(&s, &of, "decompress", info.original_bytes, a.quiet);
    ibp_status st = ibp_container_decode(in.data, in.size, sink_write, &s);
    rc = finish_output(&s, st, a.in, a.out, info.original_bytes);
  }
  if (rc == CLI_EXIT_OK && !a.quiet)
    fprintf(summary_stream(&a), "%s -> %s: %llu B -> %llu B\n", a.in, a.out,
            (unsigned long long)in.size,
            (unsigned long long)info.original_bytes);
  mapped_file_close(&in);
  return rc;
}

/* ---- verify ------------------------------------------------------------- */

/* Decodes against the original; prints the error.  Returns the exit code. */
static int compare_with(const container_args *a, const mapped_file *in,
                        const ibp_container_info *info) {
  mapped_file orig;
  int err = mapped_file_open(&orig, a->original);
  if (err != 0)
    return cli_file_error(a->original, mapped_file_strerror(err));
  int rc = CLI_EXIT_OK;
  if (orig.size != info->original_bytes) {
    cli_error("ibp verify", "%s holds %llu B but %s has %llu B", a->in,
              (unsigned long long)info->original_bytes, a->original,
              (unsigned long long)orig.size);
    rc = CLI_EXIT_DATA;
  } else {
    sink s;
    sink_init(&s, NULL, "verify", orig.size, a->quiet);
    s.original = orig.data;
    s.original_bytes = orig.size;
    ibp_status st = ibp_container_decode(in->data, in->size, sink_compare, &s);
    progress_finish(&s.pg);
    /* A damaged container is reported as such, even though its bytes
     * also differ; a sound one that differs names the first byte. */
    if (st == IBP_ERR_IO && s.mismatch_at != UINT64_MAX) {
      cli_error("ibp verify", "%s differs from %s at byte %llu", a->in,
                a->original, (unsigned long long)s.mismatch_at);
      rc = CLI_EXIT_DATA;
    } else if (st != IBP_OK) {
      rc = cli_container_error(a->in, st);
    }
  }
  mapped_file_close(&orig);
  return rc;
}

static void print_verify_ok(const container_args *a,
                            const ibp_container_info *info) {
  printf("OK %s: %llu B of %u B tensors (%llu tensors, %llu compressed), "
         "chunk %u B, threshold %.3f; checksums match",
         a->in, (unsigned long long)info->original_bytes, info->tensor_bytes,
         (unsigned long long)info->tensors,
         (unsigned long long)info->tensors_compressed, info->chunk_bytes,
         info->threshold);
  if (a->original != NULL)
    printf("; identical to %s", a->original);
  printf("\n");
}

int cmd_verify(int argc, char **argv) {
  container_args a;
  args_init(&a, "verify", verify_help, verify_options);
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  mapped_file in;
  ibp_container_info info;
  rc = open_container(a.in, &in, &info);
  if (rc != CLI_EXIT_OK)
    return rc;
  if (a.original != NULL) {
    rc = compare_with(&a, &in, &info);
  } else {
    ibp_status st = ibp_container_decode(in.data, in.size, NULL, NULL);
    if (st != IBP_OK)
      rc = cli_container_error(a.in, st);
  }
  if (rc == CLI_EXIT_OK && !a.quiet)
    print_verify_ok(&a, &info);
  mapped_file_close(&in);
  return rc;
}
