/*
 * The codec options shared by `ibp analyze`, `ibp compress` and `ibp bench`
 * (--tensor-bytes, --chunk, --threshold, --sample, --threads) and the
 * parameter search they drive.
 */
#ifndef IBP_TOOLS_CODEC_OPTS_H
#define IBP_TOOLS_CODEC_OPTS_H

#include <stdint.h>

#include "ibp/codec.h"

typedef struct codec_opts {
  uint32_t tensor_bytes; /* R; 0 = not given */
  uint32_t chunk_bytes;  /* 0 = auto */
  double threshold;      /* < 0 = auto */
  double sample;         /* 0 = every tensor */
  unsigned threads;      /* 0 = one per CPU */
  uint32_t clusters;     /* Mask/Bitval pairs: 0 = auto, else K (default 1) */
  int stage;             /* --stage: 1 auto (default), 0 none */
  uint32_t dtype;        /* --dtype: 0 = auto, else an ibp_dtype */
} codec_opts;

/* Table entries for the options above (inside a cli_option table). */
#define CODEC_CLI_OPTIONS                                                      \
  {"tensor-bytes", 0, 1}, {"chunk", 0, 1}, {"threshold", 0, 1},                \
      {"sample", 0, 1}, {                                                      \
    "threads", 0, 1                                                            \
  }

/* --clusters, for the commands that use codec_opts_cluster. */
#define CODEC_CLUSTER_OPTION                                                   \
  { "clusters", 0, 1 }
#define CODEC_CLUSTER_HELP                                                     \
  "  --clusters auto|K  Mask/Bitval pairs, each tensor stored with the one\n"  \
  "                     that stores it best: K in [1, 256], or auto (the K\n"  \
  "                     of 1, 2, 4 .. 16 that saves most, metadata\n"          \
  "                     included); default 1\n"

/* --stage and --dtype, for the commands that choose a coding stage. */
#define CODEC_STAGE_OPTIONS                                                    \
  {"stage", 0, 1}, {                                                           \
    "dtype", 0, 1                                                              \
  }
#define CODEC_STAGE_HELP                                                       \
  "  --stage auto|none  the exponent stage after IBP (docs/FORMAT.md §9):\n"  \
  "                     auto (default) uses it where it stores the file in\n"  \
  "                     fewer bytes than IBP alone\n"                          \
  "  --dtype auto|bf16|f16|f32\n"                                              \
  "                     the values whose sign+exponent it codes (default\n"    \
  "                     auto: the type that saves most)\n"

/* Help lines for the options above. */
#define CODEC_OPTIONS_HELP                                                     \
  "  --tensor-bytes R   size of one tensor: 1 B .. 1 MiB; K/M suffixes\n"      \
  "                     (powers of 1024), e.g. 4096 or 4K\n"                   \
  "  --chunk " IBP_CHUNK_WIDTHS_AUTO_BARS "\n"                                 \
  "                     chunk width in bytes (default auto: the one that\n"    \
  "                     saves most)\n"                                         \
  "  --threshold auto|T agreement share for a bit to be invariant, T in\n"     \
  "                     [0.5, 1.0] (default auto: searched)\n"                 \
  "  --sample F         share of tensors counted for the statistics, F in\n"   \
  "                     (0, 1] (default 1: every tensor)\n"                    \
  "  --threads N        worker threads (default 0: one per CPU)\n"

void codec_opts_init(codec_opts *o);

/* Applies option `name` (without "--") with `value`.  Returns 1 when it was
 * one of the codec options and the value is valid, 0 when `name` is not a
 * codec option, and -1 after printing a usage error. */
int codec_opts_take(codec_opts *o, const char *name, const char *value);

/* Checks that R fits the `bytes` bytes at `data` (printing "ibp CMD: ..."
 * when not), then searches Mask/Bitval and chunk width over them, showing
 * that it is at work on a terminal when `show_progress`.  `report` may be
 * NULL.  Returns a CLI exit code; on success `p` must be freed. */
int codec_opts_search(const char *cmd, const codec_opts *o, const void *data,
                      uint64_t bytes, int show_progress, ibp_params *p,
                      ibp_search_report *report);

/* Learns o->clusters Mask/Bitval pairs (auto: the best K) from `base`, the
 * result of codec_opts_search, over the same data.  `report` may be NULL.
 * Returns a CLI exit code; on success `out` must be freed
 * (ibp_clusters_free). */
int codec_opts_cluster(const char *cmd, const codec_opts *o, const void *data,
                       uint64_t bytes, const ibp_params *base,
                       int show_progress, ibp_clusters *out,
                       ibp_cluster_report *report);

#endif /* IBP_TOOLS_CODEC_OPTS_H */
