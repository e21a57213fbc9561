/* The coding-stage choice (stage_choice.h). */
#include "stage_choice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"

static void figures(stage_choice *c) {
  uint64_t counts[IBP_STAGE_MAX_SYMBOLS] = {0}, total = 0, bits = 0;
  for (uint32_t k = 0; k < c->clusters.count; k++) {
    const ibp_stage *st = &c->stages[k];
    for (uint32_t s = 0; s < st->symbols; s++) {
      counts[s] += st->counts[s];
      bits += st->counts[s] * st->enc_len[s];
    }
  }
  double h = 0.0;
  for (uint32_t s = 0; s < IBP_STAGE_MAX_SYMBOLS; s++)
    total += counts[s];
  for (uint32_t s = 0; s < IBP_STAGE_MAX_SYMBOLS && total; s++)
    if (counts[s]) {
      double p = (double)counts[s] / (double)total;
      h -= p * log2(p);
    }
  c->entropy_bits = h;
  c->code_bits = total ? (double)bits / (double)total : 0.0;
}

int stage_choice_measure(const char *cmd, const codec_opts *o,
                         const ibp_clusters *versus, const void *data,
                         uint64_t bytes, int show, stage_choice *out) {
  memset(out, 0, sizeof *out);
  if (o->tensor_bytes > bytes) {
    cli_error(cmd, "tensor size %u B is larger than the file (%llu B)",
              o->tensor_bytes, (unsigned long long)bytes);
    return CLI_EXIT_DATA;
  }
  /* the options codec_opts_search and codec_opts_cluster pass; every
   * tensor measured (the codec's choice, ibp_stage_choose) */
  ibp_stage_choose_options so;
  memset(&so, 0, sizeof so);
  so.dtype = o->dtype;
  so.search.chunk_bytes = o->chunk_bytes;
  so.search.threshold = o->threshold;
  so.search.sampling.fraction = o->sample;
  so.search.threads = o->threads;
  so.cluster.clusters = o->clusters;
  so.cluster.threads = o->threads;
  so.versus = versus;
  so.threads = cli_threads(o->threads);
  progress_ticker ticker;
  progress_ticker_start(&ticker, "exponent stage", show);
  ibp_stage_choice c;
  ibp_status st = ibp_stage_choose(data, bytes, o->tensor_bytes, &so, &c);
  progress_ticker_stop(&ticker);
  if (st != IBP_OK) {
    cli_error(cmd, "exponent stage: %s", ibp_status_message(st));
    return CLI_EXIT_DATA;
  }
  out->dtype = c.dtype;
  out->clusters = c.clusters; /* taken over */
  out->stages = c.stages;
  out->exact = c.exact;
  out->total = c.total;
  out->versus_total = c.versus_total;
  for (uint32_t k = 0; c.stages && k < c.clusters.count; k++)
    out->stage_clusters += c.stages[k].kind != IBP_STAGE_NONE;
  if (out->dtype)
    figures(out);
  return CLI_EXIT_OK;
}

void stage_choice_free(stage_choice *c) {
  ibp_clusters_free(&c->clusters);
  free(c->stages);
  memset(c, 0, sizeof *c);
}
