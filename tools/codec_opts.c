/* Codec options of the ibp tool and the search they drive (codec_opts.h). */
#include "codec_opts.h"

#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "ibp/stage.h"
#include "progress.h"

#define MAX_THREADS 4096u

void codec_opts_init(codec_opts *o) {
  o->tensor_bytes = 0;
  o->chunk_bytes = 0;
  o->threshold = -1.0;
  o->sample = 0.0;
  o->threads = 0;
  o->clusters = 1;
  o->stage = 1;
  o->dtype = 0;
}

static int take_stage(codec_opts *o, const char *v) {
  if (strcmp(v, "auto") == 0 || strcmp(v, "exp") == 0)
    o->stage = 1;
  else if (strcmp(v, "none") == 0)
    o->stage = 0;
  else {
    cli_usage_error("--stage must be auto or none (got %s)", v);
    return -1;
  }
  return 1;
}

static int take_dtype(codec_opts *o, const char *v) {
  static const uint32_t types[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                   IBP_DTYPE_F32};
  if (strcmp(v, "auto") == 0) {
    o->dtype = 0;
    return 1;
  }
  for (unsigned i = 0; i < 3; i++)
    if (strcmp(v, ibp_dtype_name(types[i])) == 0) {
      o->dtype = types[i];
      return 1;
    }
  cli_usage_error("--dtype must be auto, bf16, f16 or f32 (got %s)", v);
  return -1;
}

static int take_tensor_bytes(codec_opts *o, const char *v) {
  uint64_t r;
  cli_num st = cli_parse_size(v, &r);
  if (st == CLI_NUM_SYNTAX) {
    cli_usage_error("--tensor-bytes must be a whole number of bytes, "
                    "e.g. 4096 or 4K (got %s)",
                    v);
    return -1;
  }
  if (st == CLI_NUM_OVERFLOW || r > IBP_MAX_TENSOR_BYTES) {
    cli_usage_error("--tensor-bytes must be at most %u (1 MiB) (got %s)",
                    IBP_MAX_TENSOR_BYTES, v);
    return -1;
  }
  if (r == 0) {
    cli_usage_error("--tensor-bytes must be at least 1 (got %s)", v);
    return -1;
  }
  o->tensor_bytes = (uint32_t)r;
  return 1;
}

static int take_chunk(codec_opts *o, const char *v) {
  uint64_t c;
  if (strcmp(v, "auto") == 0) {
    o->chunk_bytes = 0;
    return 1;
  }
  if (cli_parse_u64(v, &c) != CLI_NUM_OK || c > UINT32_MAX ||
      !ibp_chunk_width_valid((uint32_t)c)) {
    cli_usage_error("--chunk must be auto, " IBP_CHUNK_WIDTHS_TEXT " (got %s)",
                    v);
    return -1;
  }
  o->chunk_bytes = (uint32_t)c;
  return 1;
}

static int take_threshold(codec_opts *o, const char *v) {
  double t;
  if (strcmp(v, "auto") == 0) {
    o->threshold = -1.0;
    return 1;
  }
  if (cli_parse_double(v, &t) != CLI_NUM_OK || t < 0.5 || t > 1.0) {
    cli_usage_error("--threshold must be auto or a number in "
                    "[0.5, 1.0] (got %s)",
                    v);
    return -1;
  }
  o->threshold = t;
  return 1;
}

static int take_sample(codec_opts *o, const char *v) {
  double f;
  if (cli_parse_double(v, &f) != CLI_NUM_OK || !(f > 0.0) || f > 1.0) {
    cli_usage_error("--sample must be a fraction in (0, 1] (got %s)", v);
    return -1;
  }
  o->sample = f;
  return 1;
}

static int take_threads(codec_opts *o, const char *v) {
  uint64_t n;
  if (strcmp(v, "auto") == 0) {
    o->threads = 0;
    return 1;
  }
  if (cli_parse_u64(v, &n) != CLI_NUM_OK || n > MAX_THREADS) {
    cli_usage_error("--threads must be auto or a whole number from "
                    "0 to %u (got %s)",
                    MAX_THREADS, v);
    return -1;
  }
  o->threads = (unsigned)n;
  return 1;
}

static int take_clusters(codec_opts *o, const char *v) {
  uint64_t k;
  if (strcmp(v, "auto") == 0) {
    o->clusters = 0;
    return 1;
  }
  if (cli_parse_u64(v, &k) != CLI_NUM_OK || k < 1 || k > IBP_MAX_CLUSTERS) {
    cli_usage_error("--clusters must be auto or a whole number from 1 to "
                    "%u (got %s)",
                    IBP_MAX_CLUSTERS, v);
    return -1;
  }
  o->clusters = (uint32_t)k;
  return 1;
}

int codec_opts_take(codec_opts *o, const char *name, const char *value) {
  if (strcmp(name, "tensor-bytes") == 0)
    return take_tensor_bytes(o, value);
  if (strcmp(name, "chunk") == 0)
    return take_chunk(o, value);
  if (strcmp(name, "threshold") == 0)
    return take_threshold(o, value);
  if (strcmp(name, "sample") == 0)
    return take_sample(o, value);
  if (strcmp(name, "threads") == 0)
    return take_threads(o, value);
  if (strcmp(name, "clusters") == 0)
    return take_clusters(o, value);
  if (strcmp(name, "stage") == 0)
    return take_stage(o, value);
  if (strcmp(name, "dtype") == 0)
    return take_dtype(o, value);
  return 0;
}

int codec_opts_search(const char *cmd, const codec_opts *o, const void *data,
                      uint64_t bytes, int show_progress, ibp_params *p,
                      ibp_search_report *report) {
  if (o->tensor_bytes > bytes) {
    cli_error(cmd, "tensor size %u B is larger than the file (%llu B)",
              o->tensor_bytes, (unsigned long long)bytes);
    return CLI_EXIT_DATA;
  }
  ibp_search_options so;
  memset(&so, 0, sizeof so);
  so.chunk_bytes = o->chunk_bytes;
  so.threshold = o->threshold;
  so.sampling.fraction = o->sample;
  so.threads = o->threads;
  progress_ticker ticker;
  progress_ticker_start(&ticker, "searching parameters", show_progress);
  ibp_status st = ibp_search(data, bytes / o->tensor_bytes, o->tensor_bytes,
                             &so, p, report);
  progress_ticker_stop(&ticker);
  if (st != IBP_OK) {
    cli_error(cmd, "parameter search failed: %s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  return CLI_EXIT_OK;
}

int codec_opts_cluster(const char *cmd, const codec_opts *o, const void *data,
                       uint64_t bytes, const ibp_params *base,
                       int show_progress, ibp_clusters *out,
                       ibp_cluster_report *report) {
  ibp_cluster_options co;
  memset(&co, 0, sizeof co);
  co.clusters = o->clusters;
  co.threads = o->threads;
  progress_ticker ticker;
  progress_ticker_start(&ticker, "clustering", show_progress);
  ibp_status st = ibp_cluster_search(data, bytes / base->tensor_bytes, base,
                                     &co, out, report);
  progress_ticker_stop(&ticker);
  if (st != IBP_OK) {
    cli_error(cmd, "cluster search failed: %s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  return CLI_EXIT_OK;
}
