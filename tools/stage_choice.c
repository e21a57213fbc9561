/* The coding-stage choice (stage_choice.h). */
#include "stage_choice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const uint32_t candidates[] = {IBP_DTYPE_BF16, IBP_DTYPE_F16,
                                      IBP_DTYPE_F32};

/* A copy of the file with every tensor's field zeroed (the tail as is). */
static uint8_t *stripped_copy(const ibp_stage *st, const uint8_t *data,
                              uint64_t bytes, uint32_t R) {
  uint8_t *s = malloc(bytes ? bytes : 1);
  if (!s)
    return NULL;
  uint64_t n = bytes / R;
  for (uint64_t i = 0; i < n; i++)
    ibp_stage_strip(st, data + i * R, s + i * R, R);
  memcpy(s + n * R, data + n * R, bytes - n * R);
  return s;
}

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

/* One type: search, clusters (with o->clusters), stages, exact bytes.
 * clusters_too: 0 measures one pair only (the types' first round). */
static int measure_dtype(const char *cmd, const codec_opts *o,
                         const uint8_t *data, uint64_t bytes, uint32_t dtype,
                         int clusters_too, int show, stage_choice *c) {
  const uint32_t R = o->tensor_bytes;
  ibp_stage probe;
  memset(c, 0, sizeof *c);
  if (ibp_stage_init(&probe, IBP_STAGE_EXP, dtype, 0, R) != IBP_OK)
    return CLI_EXIT_OK; /* does not fit R: dtype stays NONE */
  uint8_t *s = stripped_copy(&probe, data, bytes, R);
  if (!s) {
    cli_error(cmd, "%s", ibp_status_message(IBP_ERR_NO_MEMORY));
    return CLI_EXIT_DATA;
  }
  ibp_params p;
  memset(&p, 0, sizeof p);
  int rc = codec_opts_search(cmd, o, s, bytes, show, &p, NULL);
  if (rc == CLI_EXIT_OK && clusters_too && o->clusters != 1)
    rc = codec_opts_cluster(cmd, o, s, bytes, &p, show, &c->clusters, NULL);
  free(s);
  if (rc == CLI_EXIT_OK && !c->clusters.count) { /* one pair: take p */
    c->clusters.params = malloc(sizeof p);
    if (c->clusters.params) {
      c->clusters.params[0] = p;
      c->clusters.count = 1;
      memset(&p, 0, sizeof p);
    }
  }
  ibp_params_free(&p);
  const uint32_t k = c->clusters.count;
  c->stages = k ? calloc(k, sizeof *c->stages) : NULL;
  ibp_status st = rc != CLI_EXIT_OK ? IBP_OK
                  : c->stages       ? IBP_OK
                                    : IBP_ERR_NO_MEMORY;
  for (uint32_t i = 0; i < k && st == IBP_OK; i++)
    ibp_stage_fit_params(&probe, &c->clusters.params[i]);
  if (rc == CLI_EXIT_OK && st == IBP_OK)
    st = ibp_stage_learn(c->clusters.params, k, IBP_STAGE_EXP, dtype, data,
                         bytes / R, 0, o->threads, c->stages);
  if (rc == CLI_EXIT_OK && st == IBP_OK)
    st = ibp_measure_region_staged(c->clusters.params, c->stages, k, data,
                                   bytes, cli_threads(o->threads), &c->exact);
  if (rc == CLI_EXIT_OK && st != IBP_OK) {
    cli_error(cmd, "exponent stage: %s", ibp_status_message(st));
    rc = CLI_EXIT_DATA;
  }
  if (rc == CLI_EXIT_OK) {
    c->dtype = dtype;
    c->total = c->exact.compressed_bytes + c->exact.metadata_bytes;
    figures(c);
  }
  return rc;
}

int stage_choice_measure(const char *cmd, const codec_opts *o, const void *data,
                         uint64_t bytes, int show, stage_choice *out) {
  memset(out, 0, sizeof *out);
  /* each type with one pair; then the best one with the clusters asked */
  for (unsigned i = 0; i < sizeof candidates / sizeof *candidates; i++) {
    if (o->dtype && o->dtype != candidates[i])
      continue;
    stage_choice c;
    int rc = measure_dtype(cmd, o, data, bytes, candidates[i], 0, show, &c);
    if (rc != CLI_EXIT_OK) {
      stage_choice_free(&c);
      stage_choice_free(out);
      return rc;
    }
    if (c.dtype && (!out->dtype || c.total < out->total)) {
      stage_choice_free(out);
      *out = c;
    } else {
      stage_choice_free(&c);
    }
  }
  if (!out->dtype || o->clusters == 1)
    return CLI_EXIT_OK;
  stage_choice k;
  int rc = measure_dtype(cmd, o, data, bytes, out->dtype, 1, show, &k);
  if (rc == CLI_EXIT_OK && k.total < out->total) {
    stage_choice_free(out);
    *out = k;
  } else {
    stage_choice_free(&k);
  }
  return rc;
}

void stage_choice_free(stage_choice *c) {
  ibp_clusters_free(&c->clusters);
  free(c->stages);
  memset(c, 0, sizeof *c);
}
