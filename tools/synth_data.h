/*
 * Synthetic "trained weights" for `ibp bench`: rows of 256 float32 values
 * drawn from a normal distribution with mean 0 and a per-row standard
 * deviation drawn log-uniformly from [0.05, 0.5] -- what embedding tables
 * and weight matrices of trained networks look like.  Deterministic: row r
 * depends only on (seed, r), so the bytes do not depend on the thread count.
 * Generator: splitmix64 seeded per row, Box-Muller for the normal values.
 */
#ifndef IBP_TOOLS_SYNTH_DATA_H
#define IBP_TOOLS_SYNTH_DATA_H

#include <stdint.h>

#define SYNTH_ROW_FLOATS 256
#define SYNTH_STD_MIN 0.05
#define SYNTH_STD_MAX 0.5

/* Fills `bytes` bytes at dst (little-endian float32 rows; a partial last
 * row or float is cut) using `threads` threads (0 = one per CPU); work
 * that finds no thread is done by the calling thread. */
void synth_floats(void *dst, uint64_t bytes, uint64_t seed, unsigned threads);

#endif /* IBP_TOOLS_SYNTH_DATA_H */
