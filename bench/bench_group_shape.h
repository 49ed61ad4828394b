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

/* Prints one row per cadence: us per token of a group decode step (observe
 * on every head, a group evict every `cadence` steps) and of the same
 * heads as separate instances of share `share` (observe each, evict each
 * to its share), medians over opt->reps alternating repetitions, and their
 * ratio. Returns 0, or an exit status after printing the failure. */
int bench_group_rows(const bench_options *opt, uint32_t heads, uint32_t share,
                     uint32_t tokens, const uint32_t *cadences,
                     size_t n_cadences);

#endif
