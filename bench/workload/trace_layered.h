/*
 * trace_layered.h - the layered workload: the shape of every layer of the
 * funnel, flat and inverted profiles (and of decode-4096 used as a profile),
 * and the seed of each layer's heavy-hitter stream. docs/traces.md writes
 * the same functions down in prose and formulas; change both together.
 *
 * Owns the shape and seed functions only; trace_decode.h generates the
 * weights of a shape.
 */
#ifndef PB_WORKLOAD_TRACE_LAYERED_H
#define PB_WORKLOAD_TRACE_LAYERED_H

#include <stdint.h>

#include "trace_decode.h"

typedef enum pb_wl_profile {
    PB_WL_DECODE4096 = 0, /* every layer is decode-4096 itself (seed 7) */
    PB_WL_FUNNEL = 1,     /* broad shallow layers, concentrated deep ones */
    PB_WL_FLAT = 2,       /* every layer shaped like decode-4096 */
    PB_WL_INVERTED = 3    /* deep layers broad, shallow ones concentrated */
} pb_wl_profile;

#define PB_WL_PROFILE_COUNT 4

/* The most layers a layered workload has (the seeds of layers 0 .. this-1
 * give pairwise non-overlapping xoshiro seeding sequences). */
#define PB_WL_MAX_LAYERS 4096u

/* "decode-4096", "funnel", "flat", "inverted"; NULL for another value. */
const char *pb_wl_profile_name(pb_wl_profile profile);

/* Sets *out to the profile called `name`; returns 0, or -1 if none is. */
int pb_wl_profile_parse(const char *name, pb_wl_profile *out);

/* The heavy-hitter seed of layer `layer`: 7 + 0x85EBCA6B * layer, modulo
 * 2^32 (7 for layer 0). */
uint32_t pb_wl_layer_seed(uint32_t layer);

/* The signed concentration of layer `layer` of `layers`, as the exact
 * fraction num / den with den = max(layers - 1, 1): funnel +layer,
 * inverted -layer, flat and decode-4096 0. 0 means decode-4096's own
 * mixture, +den the concentrated anchor, -den the broad anchor. */
void pb_wl_layer_concentration(pb_wl_profile profile, uint32_t layer,
                               uint32_t layers, int64_t *num, int64_t *den);

/* The shape of layer `layer` of `layers` (1 .. PB_WL_MAX_LAYERS) in
 * `profile`. Layer 0 is decode-4096 in every profile. Returns 0, or -1 for
 * an unknown profile or layer >= layers. */
int pb_wl_layer_shape(pb_wl_profile profile, uint32_t layer, uint32_t layers,
                      pb_wl_shape *out);

#endif /* PB_WORKLOAD_TRACE_LAYERED_H */
