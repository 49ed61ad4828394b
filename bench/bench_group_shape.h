/*
 * bench_group_shape.h - the layer-group rows of bench_model_shape: one
 * layer's KV heads driven as one head-adaptive group (pyramidkv_group.h)
 * against the same heads as separate uniform instances.
 */
#ifndef PB_BENCH_GROUP_SHAPE_H
#define PB_BENCH_GROUP_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"

/* Prints the header of the rows below (a markdown table). */
void bench_group_header(void);

/* Prints one row per cadence: us per token of a group decode step (observe
 * on every head, a group evict every `cadence` steps) and of the same
 * heads as separate instances of share `share` (observe each, evict each
 * to its share), medians over opt->reps alternating repetitions, their
 * ratio and both sides' memory. scorer: PB_SCORER_WINDOW or CUMULATIVE.
 * Returns 0, or an exit status after printing the failure. */
int bench_group_rows(const bench_options *opt, uint32_t heads, uint32_t share,
                     uint32_t scorer, uint32_t tokens,
                     const uint32_t *cadences, size_t n_cadences);

/* One row: a group prefill of a 4 x share prompt (window scorer, 16 rows
 * per head) against the heads' separate prefills to share, and memory. */
int bench_group_prefill(const bench_options *opt, uint32_t heads,
                        uint32_t share);

#endif
