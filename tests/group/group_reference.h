/*
 * group_reference.h - a naive model of the layer group (docs/spec.md §16)
 * over the reference model's instances (tests/reference_model.c), for the
 * differential test and the fuzz target: every evictable position of every
 * head scored from scratch, one global sort, the floors applied by a walk.
 * It shares no code with src/head_group*.c.
 */
#ifndef PB_TESTS_GROUP_REFERENCE_H
#define PB_TESTS_GROUP_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

typedef struct ref_group {
    uint32_t num_heads;
    uint32_t floor;
    uint64_t layer_total;
    ref_policy *heads; /* [num_heads] */
} ref_group;

/* Creates the model of pb_kvcache_group_create(head, params): the plan is
 * recomputed here from docs/spec.md §16.1. min_capacity raises each head's
 * capacity (and share), so a whole prompt can be fed as decode steps. Returns PB_OK or the status
 * create returns for invalid arguments (PB_ERR_PARAM, PB_ERR_TOO_LARGE). */
pb_status ref_group_create(ref_group *g, const pb_kvcache_config *head,
                           uint32_t num_heads, uint32_t floor_permille,
                           uint32_t slack, uint32_t min_capacity);
void ref_group_destroy(ref_group *g);

/* The group evict's victims, counts and total, by the naive rule. */
pb_status ref_group_evict(ref_group *g, uint64_t budget, uint32_t *victims,
                          size_t victims_cap, size_t *counts,
                          size_t *n_victims);

#endif
