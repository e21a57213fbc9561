/*
 * The coding-stage choice of `ibp analyze` and `ibp compress`
 * (docs/FORMAT.md §9): for each value type the stage could follow (or the
 * one given), IBP's search and clusters on the tensors with the stage's
 * field zeroed, a stage per cluster learned on the tensors, and the exact
 * stored bytes, metadata included; the type that stores the file in the
 * fewest bytes is the stage's figure, the stage kept on the clusters
 * where it saves bytes; it is picked over IBP alone when it stores fewer
 * bytes than IBP alone does.  The measuring is the codec's
 * (ibp_stage_choose, the choice libibp makes too); this adds the CLI's
 * options, errors, progress and the figures.  Nothing here prints but the
 * errors and the progress.
 */
#ifndef IBP_TOOLS_STAGE_CHOICE_H
#define IBP_TOOLS_STAGE_CHOICE_H

#include <stdint.h>

#include "codec_opts.h"
#include "ibp/stage.h"

typedef struct stage_choice {
  uint32_t dtype;           /* the field measured; IBP_DTYPE_NONE: none fits */
  ibp_clusters clusters;    /* the stage's Mask/Bitval pairs (count K) */
  ibp_stage *stages;        /* K stages, heap */
  ibp_region_summary exact; /* exact, over the whole file */
  uint64_t total;           /* exact.compressed_bytes + exact.metadata_bytes */
  uint64_t versus_total;    /* IBP alone's pairs (versus): the same figure */
  uint32_t stage_clusters;  /* clusters with the stage on (the rest: none) */
  double entropy_bits;      /* order-0 entropy of the field, bits per value */
  double code_bits;         /* the codes' mean bits per value (counted) */
} stage_choice;

/* Measures the stage as above (o->dtype: 0 = every type whose value size
 * divides R), the stage kept per cluster where it stores fewer bytes than
 * IBP alone's pairs `versus` (docs/FORMAT.md §9.5): never more bytes than
 * versus stores.  Returns a CLI exit code; *out is filled (dtype NONE when
 * no type fits R) and must be freed with stage_choice_free. */
int stage_choice_measure(const char *cmd, const codec_opts *o,
                         const ibp_clusters *versus, const void *data,
                         uint64_t bytes, int show_progress, stage_choice *out);

void stage_choice_free(stage_choice *c);

#endif /* IBP_TOOLS_STAGE_CHOICE_H */
