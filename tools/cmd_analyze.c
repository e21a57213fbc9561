/* `ibp analyze`: how much IBP saves on a file, exactly, and with which
 * chunk width and threshold. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "codec_opts.h"
#include "config/config.h"
#include "ibp/codec.h"
#include "ibp/container.h"
#include "json_out.h"
#include "kernels/ibp_kernels.h"
#include "mapped_file.h"
#include "profile/profile.h"
#include "progress.h"
#include "region_measure.h"
#include "stage_choice.h"

static const char help[] =
    "Usage: ibp analyze FILE --tensor-bytes R [options]\n"
    "\n"
    "Reports how much Invariant Bit Packing saves on FILE, taken as tensors\n"
    "of R bytes (a tail shorter than R is kept raw): the share of bits that\n"
    "are invariant in >= 80% of the tensors, the chunk width and threshold\n"
    "chosen, the exact space saved -- the container `ibp compress` writes,\n"
    "header and metadata (Mask + Bitval + one flag bit per tensor)\n"
    "included, against FILE -- and the saved share for each chunk width and\n"
    "threshold the search evaluated.  Fewer than 64 tensors are too few for\n"
    "the statistics: a warning says so.\n"
    "With --clusters, also the same figures with K Mask/Bitval pairs and\n"
    "the saved share against K; with --entropy, the per-bit entropy limit\n"
    "(every bit position coded at its own empirical entropy).\n"
    "\n"
    "With the exponent stage (--stage auto, the default), also the figures\n"
    "with the stage after IBP, the modelled cost of one copy of the file\n"
    "per GiB with and without it under a device cost profile (the stored\n"
    "bytes over the host link plus the GPU's decode, docs/PROFILE.md), and\n"
    "the pick: the stage when it stores the file in fewer bytes than IBP\n"
    "alone, metadata included, that copy costs less with it, and libibp's\n"
    "device decoder decodes it (tensors under 16 KiB); else why not.\n"
    "\n"
    "Options:\n" CODEC_OPTIONS_HELP CODEC_CLUSTER_HELP CODEC_STAGE_HELP
    "  --profile NAME|FILE  the device cost profile of the pick (default\n"
    "                     h100-pcie5)\n"
    "  --entropy          also report the per-bit entropy limit\n"
    "  --json             print one JSON object instead of the report\n"
    "  -h, --help         show this help\n";

static const cli_option options[] = {CODEC_CLI_OPTIONS,   CODEC_CLUSTER_OPTION,
                                     CODEC_STAGE_OPTIONS, {"entropy", 0, 0},
                                     {"json", 0, 0},      {"profile", 0, 1},
                                     {"help", 'h', 0},    {NULL, 0, 0}};

/* The profile of the stage's pick without --profile. */
#define DEFAULT_PROFILE "h100-pcie5"

typedef struct analyze_args {
  const char *path;
  codec_opts codec;
  int json;
  int entropy;
  ibp_profile profile; /* --profile's, else DEFAULT_PROFILE */
} analyze_args;

/* Fewer tensors than this are too few for the invariant-bit statistics:
 * every bit of one tensor agrees with itself, and the Mask/Bitval weigh
 * two tensors (tools/README.md, "Figures"). */
#define MIN_TRUSTED_TENSORS 64u

typedef struct analysis {
  uint64_t file_bytes;
  uint64_t container_bytes; /* what `ibp compress` writes */
  double saved_container;   /* the headline: 1 - container / original */
  ibp_params params;
  ibp_search_report report;
  region_measure exact;
  uint64_t metadata_bytes;
  double saved_fraction;      /* 1 - compressed / original */
  double saved_with_metadata; /* the same, metadata counted */
  /* with --clusters other than 1 */
  int clustered;
  ibp_clusters clusters;
  ibp_cluster_report cluster_report;
  ibp_region_summary cluster_exact;
  double cluster_saved;               /* 1 - compressed / original */
  double cluster_saved_with_metadata; /* the same, metadata counted */
  /* with --entropy */
  double entropy_saved; /* per-bit entropy limit, share of the file */
  /* the exponent stage (--stage auto) */
  stage_choice stage;
  uint64_t ibp_total;   /* IBP alone: stored + metadata, the best K */
  int stage_smaller;    /* the stage stores fewer bytes than IBP alone */
  int stage_pays;       /* ... and a copy costs less with it (the profile) */
  int stage_picked;     /* ... and libibp's device decoder decodes it */
  const char *why_none; /* why the pick is IBP alone; NULL: the stage */
  char why_block[160];  /* why_none's text for a block-path size */
  ibp_profile_region_cost cost_ibp, cost_stage; /* per GiB of the file */
} analysis;

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, analyze_args *a) {
  cli_parser ps;
  cli_item it;
  char err[256];
  memset(a, 0, sizeof *a);
  codec_opts_init(&a->codec);
  cli_parser_init(&ps, argc, argv, 1, options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    if (it.kind == CLI_ERROR)
      return cli_syntax_error("analyze", "%s", err);
    if (it.kind == CLI_POSITIONAL) {
      if (a->path != NULL)
        return cli_syntax_error("analyze", "unexpected argument '%s'",
                                it.value);
      a->path = it.value;
      continue;
    }
    const char *name = options[it.option].name;
    if (strcmp(name, "help") == 0) {
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(name, "json") == 0) {
      a->json = 1;
    } else if (strcmp(name, "entropy") == 0) {
      a->entropy = 1;
    } else if (strcmp(name, "profile") == 0) {
      char err[512];
      if (ibp_profile_load(it.value, &a->profile, err, sizeof err) != 0)
        return cli_syntax_error("analyze", "--profile: %s", err);
    } else if (codec_opts_take(&a->codec, name, it.value) < 0) {
      return CLI_EXIT_USAGE;
    }
  }
  if (a->profile.name[0] == '\0') {
    char err[512];
    if (ibp_profile_load(DEFAULT_PROFILE, &a->profile, err, sizeof err) != 0)
      return cli_syntax_error("analyze", "%s", err);
  }
  if (a->path == NULL)
    return cli_syntax_error("analyze", "missing FILE");
  if (a->codec.tensor_bytes == 0)
    return cli_syntax_error("analyze", "--tensor-bytes R is required");
  return -1;
}

static void on_progress(void *ctx, uint64_t done) {
  progress_update(ctx, done);
}

/* The headline: the container of `stored` bytes after its header. */
static void set_container(analysis *an, uint64_t stored) {
  an->container_bytes = IBP_CONTAINER_HEADER_BYTES + stored;
  an->saved_container =
      1.0 - (double)an->container_bytes / (double)an->file_bytes;
}

static int measure(const analyze_args *a, const mapped_file *in, analysis *an) {
  progress pg;
  progress_start(&pg, "analyze", in->size, !a->json);
  ibp_status st =
      region_measure_run(&an->params, in->data, in->size, a->codec.threads,
                         on_progress, &pg, &an->exact);
  progress_finish(&pg);
  if (st != IBP_OK) {
    cli_error("ibp analyze", "%s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  uint64_t n = an->exact.tensors;
  an->file_bytes = in->size;
  an->metadata_bytes = 2ull * an->params.tensor_bytes + (n + 7) / 8;
  an->saved_fraction =
      1.0 - (double)an->exact.compressed_bytes / (double)in->size;
  an->saved_with_metadata =
      1.0 - (double)(an->exact.compressed_bytes + an->metadata_bytes) /
                (double)in->size;
  set_container(an, an->exact.compressed_bytes + an->metadata_bytes);
  return CLI_EXIT_OK;
}

/* The same figures with K clusters, exact over the whole file. */
static int measure_clusters(const analyze_args *a, const mapped_file *in,
                            analysis *an) {
  int rc = codec_opts_cluster("ibp analyze", &a->codec, in->data, in->size,
                              &an->params, !a->json, &an->clusters,
                              &an->cluster_report);
  if (rc != CLI_EXIT_OK)
    return rc;
  ibp_region_summary *x = &an->cluster_exact;
  ibp_status st =
      ibp_measure_region_clustered(an->clusters.params, an->clusters.count,
                                   in->data, in->size, a->codec.threads, x);
  if (st != IBP_OK) {
    cli_error("ibp analyze", "%s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  an->clustered = 1;
  an->cluster_saved = 1.0 - (double)x->compressed_bytes / (double)in->size;
  an->cluster_saved_with_metadata =
      1.0 -
      (double)(x->compressed_bytes + x->metadata_bytes) / (double)in->size;
  if (an->clusters.count > 1) /* compress writes the clustered container */
    set_container(an, x->compressed_bytes + x->metadata_bytes);
  return CLI_EXIT_OK;
}

/* Why the pick is IBP alone, NULL when it is the stage: the rule libibp's
 * region preparation follows (docs/FORMAT.md §9.5, §9.6). */
static const char *why_no_stage(analysis *an, uint32_t R) {
  if (!an->stage.dtype)
    return "no value type fits the tensors";
  if (!an->stage_smaller)
    return "the stage stores no fewer bytes than IBP alone";
  if (!an->stage_pays)
    return "the stage stores fewer bytes but a copy takes longer with its "
           "decode (the profile)";
  if (R < IBP_KERNEL_BLOCK_R) /* kernels/ibp_kernels.h */
    return NULL;
  snprintf(an->why_block, sizeof an->why_block,
           "tensors of %u B or more: libibp's device decoder has no stage "
           "on its block path",
           IBP_KERNEL_BLOCK_R);
  return an->why_block;
}

/* The staged route's SMs in the model: libibp's default IBP_MAX_SMS blocks
 * of IBP_STAGED_WARPS warps, each worth one SM (docs/PROFILE.md). */
#define STAGED_SMS IBP_MAX_SMS_DEFAULT

static void per_gib(ibp_profile_region_cost *c, double gib) {
  c->link_us *= gib;
  c->decode_us *= gib;
  c->zerocopy_us *= gib;
  c->staged_us *= gib;
}

/* The stage's figures and the pick (stage_choice.h). */
static int measure_stage(const analyze_args *a, const mapped_file *in,
                         analysis *an) {
  /* IBP alone's pairs, those of an->ibp_total (set_container) */
  ibp_clusters one = {1, &an->params};
  const ibp_clusters *alone =
      an->clustered && an->clusters.count > 1 ? &an->clusters : &one;
  int rc = stage_choice_measure("ibp analyze", &a->codec, alone, in->data,
                                in->size, !a->json, &an->stage);
  if (rc != CLI_EXIT_OK)
    return rc;
  an->ibp_total = an->container_bytes - IBP_CONTAINER_HEADER_BYTES;
  an->stage_smaller = an->stage.dtype && an->stage.total < an->ibp_total;
  /* the pick by the model (docs/PROFILE.md "Whether the stage pays"), the
   * rule libibp's region preparation follows */
  const ibp_profile *p = &a->profile;
  const uint32_t R = a->codec.tensor_bytes;
  const uint64_t stage_total = an->stage.dtype ? an->stage.total : 0;
  /* its decode charged on the tensors it codes alone (docs/PROFILE.md) */
  const uint64_t coded = an->stage.exact.tensors_staged;
  an->stage_pays = an->stage_smaller &&
                   ibp_profile_stage_pays(p, in->size, R, an->ibp_total,
                                          stage_total, coded, STAGED_SMS);
  an->why_none = why_no_stage(an, R);
  an->stage_picked = !an->why_none;
  /* the costs per GiB of the file */
  const double gib = (double)(1ull << 30) / (double)in->size;
  an->cost_ibp =
      ibp_profile_region_copy(p, in->size, R, an->ibp_total, 0, STAGED_SMS);
  an->cost_stage = ibp_profile_region_copy(
      p, in->size, R, stage_total ? stage_total : an->ibp_total, coded,
      STAGED_SMS);
  per_gib(&an->cost_ibp, gib);
  per_gib(&an->cost_stage, gib);
  return CLI_EXIT_OK; /* the headline stays IBP alone (--stage none) */
}

/* The per-bit entropy limit over every tensor of the file (the tail is
 * stored raw in every case). */
static int measure_entropy(const analyze_args *a, const mapped_file *in,
                           analysis *an) {
  const uint32_t r = an->params.tensor_bytes;
  const uint64_t n = in->size / r;
  ibp_bitstats st;
  ibp_status s = ibp_bitstats_init(&st, r);
  if (s == IBP_OK)
    s = ibp_bitstats_add(&st, in->data, n, NULL, a->codec.threads);
  if (s == IBP_OK)
    an->entropy_saved = (8.0 * r - ibp_bitstats_entropy_bits(&st)) * (double)n /
                        8.0 / (double)in->size;
  ibp_bitstats_free(&st);
  if (s != IBP_OK) {
    cli_error("ibp analyze", "%s", ibp_status_message(s));
    return CLI_EXIT_DATA;
  }
  return CLI_EXIT_OK;
}

/* Saved share against K from the cluster search (estimates on its
 * evaluation sample, metadata counted). */
static double step_saved(const analysis *an, uint32_t i) {
  const ibp_cluster_report *r = &an->cluster_report;
  return 1.0 - (double)(r->stored[i] + an->exact.tail_bytes + r->metadata[i]) /
                   (double)an->file_bytes;
}

/* Whether the sample is too small for the statistics to be trusted. */
static int too_few(const analysis *an) {
  return an->exact.tensors < MIN_TRUSTED_TENSORS;
}

/* ---- JSON --------------------------------------------------------------- */

static void json_clusters(json_out *j, const analysis *an) {
  const ibp_region_summary *x = &an->cluster_exact;
  json_object_begin(j, "clusters");
  json_u64(j, "k", an->clusters.count);
  json_u64(j, "compressed_bytes", x->compressed_bytes);
  json_double(j, "saved_fraction", an->cluster_saved);
  json_u64(j, "metadata_bytes", x->metadata_bytes);
  json_double(j, "saved_fraction_with_metadata",
              an->cluster_saved_with_metadata);
  json_u64(j, "tensors_compressed", x->tensors_compressed);
  json_u64(j, "eval_tensors", an->cluster_report.eval_tensors);
  json_array_begin(j, "by_k");
  for (uint32_t i = 0; i < an->cluster_report.steps; i++) {
    json_object_begin(j, NULL);
    json_u64(j, "k", an->cluster_report.k[i]);
    json_u64(j, "metadata_bytes", an->cluster_report.metadata[i]);
    json_double(j, "saved_fraction_with_metadata", step_saved(an, i));
    json_object_end(j);
  }
  json_array_end(j);
  json_object_end(j);
}

static void json_saved(json_out *j, const char *key, double v) {
  if (v < 0.0)
    json_null(j, key);
  else
    json_double(j, key, v);
}

static void json_table(json_out *j, const ibp_search_report *r) {
  json_inline_array_begin(j, "table_thresholds");
  for (int t = 0; t < IBP_REPORT_THRESHOLDS; t++)
    json_double(j, NULL, r->table_thresholds[t]);
  json_array_end(j);
  json_array_begin(j, "table");
  for (unsigned c = 0; c < IBP_CHUNK_WIDTH_COUNT; c++) {
    json_object_begin(j, NULL);
    json_u64(j, "chunk_bytes", ibp_chunk_width(c));
    json_inline_array_begin(j, "saved");
    for (int t = 0; t < IBP_REPORT_THRESHOLDS; t++)
      json_saved(j, NULL, r->table_saved[c][t]);
    json_array_end(j);
    json_saved(j, "best_threshold", r->best_threshold[c]);
    json_saved(j, "best_saved", r->best_saved[c]);
    json_object_end(j);
  }
  json_array_end(j);
}

static double share(const analysis *an, uint64_t stored) {
  return 1.0 - (double)stored / (double)an->file_bytes;
}

/* The modelled costs of the pick (ms per GiB of the file). */
static void json_cost(json_out *j, const analyze_args *a, const analysis *an) {
  json_object_begin(j, "cost");
  json_string(j, "profile", a->profile.name);
  json_bool(j, "stage_terms_measured",
            ibp_profile_stage_measured(&a->profile, IBP_STAGE_BUILD));
  json_double(j, "ibp_link_ms_per_gib", an->cost_ibp.link_us / 1e3);
  json_double(j, "ibp_decode_ms_per_gib", an->cost_ibp.decode_us / 1e3);
  json_double(j, "stage_link_ms_per_gib", an->cost_stage.link_us / 1e3);
  json_double(j, "stage_decode_ms_per_gib", an->cost_stage.decode_us / 1e3);
  json_double(j, "ibp_zerocopy_ms_per_gib", an->cost_ibp.zerocopy_us / 1e3);
  json_double(j, "ibp_staged_ms_per_gib", an->cost_ibp.staged_us / 1e3);
  json_double(j, "stage_zerocopy_ms_per_gib", an->cost_stage.zerocopy_us / 1e3);
  json_double(j, "stage_staged_ms_per_gib", an->cost_stage.staged_us / 1e3);
  json_object_end(j);
}

static void json_stage(json_out *j, const analyze_args *a, const analysis *an) {
  const stage_choice *c = &an->stage;
  json_object_begin(j, "stage");
  json_string(j, "pick", an->stage_picked ? "exp" : "none");
  if (an->why_none)
    json_string(j, "why_none", an->why_none);
  else
    json_null(j, "why_none");
  json_bool(j, "stage_stores_fewer_bytes", an->stage_smaller);
  json_bool(j, "stage_costs_less", an->stage_pays);
  json_double(j, "ibp_saved_fraction_with_metadata", share(an, an->ibp_total));
  if (c->dtype) {
    /* the values the stage codes: none when it is on no cluster (IBP
     * alone's pairs every one, docs/FORMAT.md §9.5) */
    if (c->stage_clusters)
      json_string(j, "dtype", ibp_dtype_name(c->dtype));
    else
      json_null(j, "dtype");
    json_u64(j, "pairs", c->clusters.count);
    json_u64(j, "stage_pairs", c->stage_clusters);
    json_u64(j, "stage_tensors", c->exact.tensors_staged);
    json_u64(j, "pair_chunk_bytes", c->clusters.params[0].chunk_bytes);
    json_u64(j, "stored_bytes", c->exact.compressed_bytes);
    json_u64(j, "stage_metadata_bytes", c->exact.metadata_bytes);
    json_double(j, "stage_saved_fraction_with_metadata", share(an, c->total));
    json_double(j, "field_entropy_bits", c->entropy_bits);
    json_double(j, "code_bits", c->code_bits);
  } else {
    json_null(j, "dtype");
  }
  json_double(j, "picked_saved_fraction_with_metadata",
              share(an, an->stage_picked ? c->total : an->ibp_total));
  json_u64(j, "picked_container_bytes",
           IBP_CONTAINER_HEADER_BYTES +
               (an->stage_picked ? c->total : an->ibp_total));
  json_cost(j, a, an); /* last: readers that stop at its '}' */
  json_object_end(j);
}

static void print_json(const analyze_args *a, const analysis *an) {
  json_out j;
  json_init(&j, stdout);
  json_object_begin(&j, NULL);
  json_string(&j, "file", a->path);
  json_u64(&j, "original_bytes", an->file_bytes);
  json_u64(&j, "tensor_bytes", an->params.tensor_bytes);
  json_u64(&j, "tensors", an->exact.tensors);
  json_u64(&j, "tail_bytes", an->exact.tail_bytes);
  json_u64(&j, "chunk_bytes", an->params.chunk_bytes);
  json_bool(&j, "chunk_searched", a->codec.chunk_bytes == 0);
  json_double(&j, "threshold", an->params.threshold);
  json_bool(&j, "threshold_searched", a->codec.threshold < 0);
  json_double(&j, "invariant80_fraction", an->report.invariant80_fraction);
  json_u64(&j, "compressed_bytes", an->exact.compressed_bytes);
  json_double(&j, "saved_fraction", an->saved_fraction);
  json_u64(&j, "metadata_bytes", an->metadata_bytes);
  json_double(&j, "saved_fraction_with_metadata", an->saved_with_metadata);
  json_u64(&j, "container_bytes", an->container_bytes);
  json_double(&j, "saved_fraction_container", an->saved_container);
  json_bool(&j, "too_few_tensors", too_few(an));
  json_u64(&j, "tensors_compressed", an->exact.tensors_compressed);
  json_u64(&j, "stat_tensors", an->report.stat_tensors);
  json_u64(&j, "eval_tensors", an->report.eval_tensors);
  json_u64(&j, "table_tensors", an->report.table_tensors);
  json_string(&j, "impl", ibp_impl_name(ibp_impl_active()));
  if (an->clustered)
    json_clusters(&j, an);
  if (a->entropy)
    json_double(&j, "entropy_limit_saved_fraction", an->entropy_saved);
  if (a->codec.stage)
    json_stage(&j, a, an);
  json_table(&j, &an->report);
  json_object_end(&j);
}

/* ---- text --------------------------------------------------------------- */

static void print_table(const ibp_search_report *r) {
  printf("\nsaved share by chunk width and threshold, metadata not counted "
         "(measured on %llu tensors; best on %llu):\n",
         (unsigned long long)r->table_tensors,
         (unsigned long long)r->eval_tensors);
  printf("  chunk");
  for (int t = 0; t < IBP_REPORT_THRESHOLDS; t++)
    printf("  %6.3f", r->table_thresholds[t]);
  printf("   best\n");
  for (unsigned c = 0; c < IBP_CHUNK_WIDTH_COUNT; c++) {
    printf("  %3u B", ibp_chunk_width(c));
    for (int t = 0; t < IBP_REPORT_THRESHOLDS; t++) {
      double v = r->table_saved[c][t];
      if (v < 0.0)
        printf("  %6s", "-");
      else
        printf("  %5.1f%%", 100.0 * v);
    }
    if (r->best_saved[c] < 0.0)
      printf("   not evaluated\n");
    else
      printf("   %5.1f%% at %.3f\n", 100.0 * r->best_saved[c],
             r->best_threshold[c]);
  }
}

static void print_clusters(const analyze_args *a, const analysis *an) {
  const ibp_region_summary *x = &an->cluster_exact;
  const ibp_cluster_report *r = &an->cluster_report;
  printf("clusters            %u (%s)\n", an->clusters.count,
         a->codec.clusters == 0 ? "searched" : "given");
  printf("clustered saved     %.2f%% (exact; %.2f%% counting metadata: "
         "%llu B)\n",
         100.0 * an->cluster_saved, 100.0 * an->cluster_saved_with_metadata,
         (unsigned long long)x->metadata_bytes);
  printf("\nsaved share against K (metadata counted; measured on %llu "
         "tensors):\n",
         (unsigned long long)r->eval_tensors);
  for (uint32_t i = 0; i < r->steps; i++)
    printf("  K = %3u  %6.2f%%  metadata %llu B\n", r->k[i],
           100.0 * step_saved(an, i), (unsigned long long)r->metadata[i]);
}

/* The modelled cost of a copy, with and without the stage. */
static void print_cost(const analyze_args *a, const analysis *an) {
  const ibp_profile_region_cost *i = &an->cost_ibp, *s = &an->cost_stage;
  printf("modelled cost       per GiB copied, %s (zero-copy, staged; "
         "link, decode; stage terms %s):\n",
         a->profile.name,
         ibp_profile_stage_measured(&a->profile, IBP_STAGE_BUILD)
             ? "measured"
             : "an unmeasured estimate");
  printf("  IBP alone         %.2f, %.2f ms (%.2f, %.2f)\n",
         i->zerocopy_us / 1e3, i->staged_us / 1e3, i->link_us / 1e3,
         i->decode_us / 1e3);
  if (an->stage.dtype)
    printf("  with the stage    %.2f, %.2f ms (%.2f, %.2f)\n",
           s->zerocopy_us / 1e3, s->staged_us / 1e3, s->link_us / 1e3,
           s->decode_us / 1e3);
}

static void print_stage(const analyze_args *a, const analysis *an) {
  const stage_choice *c = &an->stage;
  printf("\nexponent stage      ");
  if (!c->dtype) {
    printf("no value type fits %u B tensors\n", an->params.tensor_bytes);
  } else {
    printf("%s values, %u cluster%s", ibp_dtype_name(c->dtype),
           c->clusters.count, c->clusters.count == 1 ? "" : "s");
    if (c->stage_clusters != c->clusters.count) /* docs/FORMAT.md §9.5 */
      printf(" (the stage on %u: %llu of %llu tensors)", c->stage_clusters,
             (unsigned long long)c->exact.tensors_staged,
             (unsigned long long)c->exact.tensors);
    printf(", chunk %u B: %.2f%% saved counting metadata (%llu B)\n",
           c->clusters.params[0].chunk_bytes, 100.0 * share(an, c->total),
           (unsigned long long)c->exact.metadata_bytes);
    printf("sign+exponent       %.3f bits per value coded in %.3f "
           "(order-0 entropy vs code)\n",
           c->entropy_bits, c->code_bits);
  }
  printf("IBP alone           %.2f%% saved counting metadata\n",
         100.0 * share(an, an->ibp_total));
  print_cost(a, an);
  if (an->stage_picked)
    printf("pick                exp (IBP + exponent stage)\n");
  else
    printf("pick                none (IBP alone: %s)\n", an->why_none);
}

/* What the figures do not say: too few tensors, a raw tail.  After the
 * report's figures, or on stderr (`pre` "ibp analyze: ") with --json. */
static void print_notes(FILE *f, const char *pre, const analysis *an) {
  const region_measure *m = &an->exact;
  uint32_t r = an->params.tensor_bytes;
  if (too_few(an))
    fprintf(f,
            "%swarning: only %llu tensor%s of %u B: too few for the "
            "statistics (at least %u): every bit looks invariant in so few "
            "tensors, and the Mask and Bitval alone weigh 2 tensors -- try a "
            "smaller --tensor-bytes or more of the data\n",
            pre, (unsigned long long)m->tensors, m->tensors == 1 ? "" : "s", r,
            MIN_TRUSTED_TENSORS);
  if (m->tail_bytes != 0)
    fprintf(f,
            "%snote: the file size is not a multiple of %u B: the last %llu B "
            "(a partial tensor) are kept raw\n",
            pre, r, (unsigned long long)m->tail_bytes);
}

static void print_text(const analyze_args *a, const analysis *an) {
  char h[32];
  const region_measure *m = &an->exact;
  uint32_t r = an->params.tensor_bytes;
  printf("file                %s\n", a->path);
  printf("size                %llu B (%s)\n",
         (unsigned long long)an->file_bytes,
         cli_human_bytes(an->file_bytes, h, sizeof h));
  printf("tensors             %llu x %u B\n", (unsigned long long)m->tensors,
         r);
  printf("80%%-invariant bits  %.2f%% of all bits\n",
         100.0 * an->report.invariant80_fraction);
  printf("chunk width         %u B (%s)\n", an->params.chunk_bytes,
         a->codec.chunk_bytes == 0 ? "searched" : "given");
  printf("threshold           %.3f (%s)\n", an->params.threshold,
         a->codec.threshold < 0 ? "searched" : "given");
  printf("compressed          %llu B (%s), %llu of %llu tensors compressed\n",
         (unsigned long long)m->compressed_bytes,
         cli_human_bytes(m->compressed_bytes, h, sizeof h),
         (unsigned long long)m->tensors_compressed,
         (unsigned long long)m->tensors);
  printf("space saved         %.2f%% (exact: the %s container `ibp "
         "compress` writes, header and metadata included)\n",
         100.0 * an->saved_container,
         cli_human_bytes(an->container_bytes, h, sizeof h));
  printf("metadata            %llu B (Mask + Bitval 2 x %u B, flags %llu B)\n",
         (unsigned long long)an->metadata_bytes, r,
         (unsigned long long)(m->tensors + 7) / 8);
  if (a->entropy)
    printf("entropy limit       %.2f%% (each bit position at its own "
           "entropy)\n",
           100.0 * an->entropy_saved);
  printf("implementation      %s\n", ibp_impl_name(ibp_impl_active()));
  if (an->clustered)
    print_clusters(a, an);
  if (a->codec.stage)
    print_stage(a, an);
  if (too_few(an) || m->tail_bytes != 0) {
    printf("\n");
    print_notes(stdout, "", an);
  }
  print_table(&an->report);
}

int cmd_analyze(int argc, char **argv) {
  analyze_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  mapped_file in;
  int err = mapped_file_open(&in, a.path);
  if (err != 0)
    return cli_file_error(a.path, mapped_file_strerror(err));
  analysis an;
  memset(&an, 0, sizeof an);
  rc = codec_opts_search("ibp analyze", &a.codec, in.data, in.size, !a.json,
                         &an.params, &an.report);
  if (rc == CLI_EXIT_OK)
    rc = measure(&a, &in, &an);
  if (rc == CLI_EXIT_OK && a.codec.clusters != 1)
    rc = measure_clusters(&a, &in, &an);
  if (rc == CLI_EXIT_OK && a.entropy)
    rc = measure_entropy(&a, &in, &an);
  if (rc == CLI_EXIT_OK && a.codec.stage)
    rc = measure_stage(&a, &in, &an);
  if (rc == CLI_EXIT_OK) {
    if (a.json) {
      print_json(&a, &an);
      print_notes(stderr, "ibp analyze: ", &an);
    } else
      print_text(&a, &an);
  }
  ibp_params_free(&an.params);
  ibp_clusters_free(&an.clusters);
  stage_choice_free(&an.stage);
  mapped_file_close(&in);
  return rc;
}
