/*
 * pyramidkv_profile.h - measuring a model's per-layer attention profile:
 * an accumulator fed attention rows layer by layer (prefill observation-
 * window rows or decode rows, one head or a reduced group) that reports each
 * layer's mean entropy, effective support and mass curve, and derives from
 * them the weights of a profile schedule and the arithmetic pyramid ratio
 * that fits best. Included by <pyramidkv/pyramidkv.h> (including it
 * directly works too: it includes the umbrella header first).
 *
 * It owns the declarations of the profile accumulator and its derivations;
 * reading attention from a model or a trace file is the caller's business
 * (the pyramidkv program's `calibrate` does it from a trace file). The
 * definitions are normative in docs/spec.md §14.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_PROFILE_H
#define PYRAMIDKV_PYRAMIDKV_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest num_layers and max_len a profile accepts. */
#define PB_PROFILE_MAX_LAYERS 65536u
#define PB_PROFILE_MAX_LEN 16777216u /* 2^24 */

/* The largest max_ratio pb_profile_fit_ratio accepts. */
#define PB_PROFILE_MAX_FIT_RATIO 4096u

/* One accumulator over the layers of one model. Opaque. */
typedef struct pb_profile pb_profile;

/* The first released size of pb_profile_params (0.2.0). */
#define PB_PROFILE_PARAMS_SIZE_0_2 12u

/* Parameters of pb_profile_create. The struct may grow (docs/abi.md):
 * struct_size first (the caller sets sizeof(pb_profile_params) as its
 * header knew it, as PB_PROFILE_PARAMS_DEFAULT does); a size below
 * PB_PROFILE_PARAMS_SIZE_0_2 is refused; the library reads only the bytes
 * struct_size covers and takes the default for the rest; bytes beyond the
 * fields this library knows must be zero, else PB_ERR_PARAM. Defaults in
 * brackets. */
typedef struct pb_profile_params {
    uint32_t struct_size; /* sizeof(pb_profile_params); >= 12 */
    uint32_t num_layers;  /* [32] layers, 1 .. PB_PROFILE_MAX_LAYERS */
    uint32_t max_len;     /* [4096] the longest row accepted, and the last k
                             of the mass curve; 1 .. PB_PROFILE_MAX_LEN */
} pb_profile_params;

#define PB_PROFILE_PARAMS_DEFAULT \
    { (uint32_t)sizeof(pb_profile_params), 32u, 4096u }

/* The exact bytes pb_profile_create would allocate for these params (NULL:
 * the defaults), written to *bytes on PB_OK: about 16 x num_layers x max_len
 * + 4 x max_len (a double sum and a row count per layer and k, one sorting
 * row); docs/spec.md §14.1 gives the exact formula. Returns PB_OK;
 * PB_ERR_NULL if bytes is NULL; PB_ERR_PARAM if a parameter is refused; PB_ERR_TOO_LARGE if the size does
 * not fit in size_t. Pure, no allocation, thread-safe. */
PB_API pb_status pb_profile_size(const pb_profile_params *params,
                                 size_t *bytes);

/* Creates an empty profile: every layer has seen no row. params NULL: the
 * defaults; allocator NULL: malloc/free. Everything the profile will ever
 * use is allocated here, in one block of pb_profile_size bytes; no later
 * call allocates.
 *
 * Returns PB_OK and sets *out; PB_ERR_NULL if out is NULL; PB_ERR_PARAM if a
 * parameter is refused or the allocator lacks a function; PB_ERR_TOO_LARGE
 * if the size does not fit in size_t; PB_ERR_NOMEM if the allocator fails.
 * Checked in that order, all before the allocator is called. On error *out
 * is NULL (when out is not NULL) and nothing is left allocated.
 * Thread-safe. */
PB_API pb_status pb_profile_create(const pb_profile_params *params,
                                   const pb_allocator *allocator,
                                   pb_profile **out);

/* Frees the profile. Accepts NULL. */
PB_API void pb_profile_destroy(pb_profile *profile);

/* The bytes the profile allocated, exactly (pb_profile_size of its params).
 * 0 if profile is NULL. */
PB_API size_t pb_profile_memory_bytes(const pb_profile *profile);

/* Forgets every row: the profile is as right after create. PB_ERR_NULL if
 * profile is NULL. No allocation. */
PB_API pb_status pb_profile_reset(pb_profile *profile);

/* Adds one attention row of layer `layer`: row[0 .. len-1] are the weights
 * one query (one head, or a group reduced with pb_kvcache_head_reduce) gave
 * to len key positions. The row need not sum to 1: it is divided by its sum
 * S (double, ascending index order) first, so a row scaled by any positive
 * factor counts the same. Zero entries are allowed (0 log 0 = 0).
 *
 * Per row, with p_i = row[i] / S (double):
 *   entropy H = -sum over i with row[i] > 0 of p_i * log2(p_i), summed in
 *     ascending i;
 *   mass m(k) = (the sum, in double, of the k largest entries taken in
 *     descending order) / S for k < len, and exactly 1 for k >= len.
 * The layer keeps the sums of H and of m(k) over its rows (in the order the
 * rows were added); docs/spec.md §14.4 gives the exact summation.
 *
 * Returns PB_OK; PB_ERR_NULL if profile or row is NULL; PB_ERR_PARAM if
 * layer >= num_layers or len is 0; PB_ERR_LENGTH if len > max_len;
 * PB_ERR_WEIGHT if an entry is NaN, infinite or negative, or every entry is
 * 0. Checked in that order; on error the profile is unchanged. Cost
 * O(len log len), no allocation. Not thread-safe on one profile. */
PB_API pb_status pb_profile_add_row(pb_profile *profile, uint32_t layer,
                                    const float *row, size_t len);

/* The number of rows layer `layer` has seen, written to *rows. PB_OK;
 * PB_ERR_NULL if profile or rows is NULL; PB_ERR_PARAM if layer >=
 * num_layers. */
PB_API pb_status pb_profile_layer_rows(const pb_profile *profile,
                                       uint32_t layer, uint64_t *rows);

/* The layer's mean entropy in bits (the sum of its rows' H divided by their
 * count) and its effective support 2^H (exp2 of that mean), written to
 * *bits and *support (either may be NULL when not wanted). Uniform rows over
 * n positions give log2(n) bits and support n; one-hot rows give 0 and 1.
 * These use libm (log2, exp2) and may differ in the last bit between
 * platforms; nothing the library derives depends on them.
 *
 * PB_OK; PB_ERR_NULL if profile is NULL; PB_ERR_PARAM if layer >=
 * num_layers or the layer has no row. Nothing is written on error. */
PB_API pb_status pb_profile_entropy(const pb_profile *profile, uint32_t layer,
                                    double *bits, double *support);

/* The layer's mean mass curve at k: the mean over its rows of m(k), the
 * fraction of a row's mass held by its k largest entries; written to *mass.
 * The curve is defined on every k = 1 .. max_len (the grid is every
 * integer); it is non-decreasing and equals 1 at k = max_len.
 *
 * PB_OK; PB_ERR_NULL if profile or mass is NULL; PB_ERR_PARAM if layer >=
 * num_layers, the layer has no row, or k is 0 or above max_len. O(k). */
PB_API pb_status pb_profile_mass(const pb_profile *profile, uint32_t layer,
                                 uint32_t k, double *mass);

/* The whole curve at once: out[i] = the mean mass at k = i + 1 for i = 0 ..
 * n-1, exactly the values pb_profile_mass gives, in O(n).
 *
 * PB_OK; PB_ERR_NULL if profile or out is NULL; PB_ERR_PARAM if layer >=
 * num_layers, the layer has no row, or n is 0 or above max_len. Nothing is
 * written on error. */
PB_API pb_status pb_profile_mass_curve(const pb_profile *profile,
                                       uint32_t layer, double *out, size_t n);

/* The smallest k whose mean mass, quantised to millionths
 * (floor(mass * 10^6 + 0.5)), is at least fraction_ppm; written to *k.
 * fraction_ppm is the fraction in millionths: 900000 is 90 %. The
 * quantisation makes the answer the same on every platform whatever the
 * rounding of the last bits of the sums. Always found (the curve reaches 1
 * at max_len).
 *
 * PB_OK; PB_ERR_NULL if profile or k is NULL; PB_ERR_PARAM if layer >=
 * num_layers, the layer has no row, or fraction_ppm is 0 or above 1000000.
 * O(max_len). */
PB_API pb_status pb_profile_mass_k(const pb_profile *profile, uint32_t layer,
                                   uint32_t fraction_ppm, uint32_t *k);

/* The weights of the `profile` schedule derived from the profile, one per
 * layer, written to weights[0 .. num_layers-1]: layer l's weight is
 * max(k_l, floor_weight) where k_l = pb_profile_mass_k(l, fraction_ppm), the
 * positions layer l needs to hold fraction_ppm of its mean mass. A layer
 * that has seen no row (a trace of a subset of layers) takes k of the
 * nearest layer that has, the lower one when two are equally near. Integers
 * only after the quantisation, so every platform derives the same weights;
 * apportioning a budget by them is the schedule's business.
 *
 * PB_OK; PB_ERR_NULL if profile or weights is NULL; PB_ERR_PARAM if
 * fraction_ppm is 0 or above 1000000, floor_weight is 0, or no layer has
 * seen a row; PB_ERR_BUFFER if weights_len < num_layers. Nothing is written
 * on error. O(num_layers x max_len). */
PB_API pb_status pb_profile_weights(const pb_profile *profile,
                                    uint32_t fraction_ppm,
                                    uint32_t floor_weight, uint32_t *weights,
                                    size_t weights_len);

/* The arithmetic pyramid ratio r in 1 .. max_ratio whose shares
 * (pb_kvcache_pyramid_budget) are closest to `weights`, written to *ratio.
 * Both are normalised to 2^24 in integers, t_l = floor(w_l x 2^24 / sum w)
 * and s_l = floor(a_l x 2^24 / sum a) with a_l =
 * pb_kvcache_pyramid_budget(2^20, l, n, r), and r minimises
 * sum |t_l - s_l|; the smaller r wins a tie. A profile whose weights grow
 * with depth (inverted) therefore fits r = 1, uniform. If distance is not
 * NULL the minimal sum is written to it. Integer arithmetic only.
 *
 * PB_OK; PB_ERR_NULL if weights or ratio is NULL; PB_ERR_PARAM if n is 0 or
 * above PB_PROFILE_MAX_LAYERS, max_ratio is 0 or above
 * PB_PROFILE_MAX_FIT_RATIO, or every weight is 0. Nothing is written on
 * error. Pure, no allocation, thread-safe; O(max_ratio x n). */
PB_API pb_status pb_profile_fit_ratio(const uint32_t *weights, size_t n,
                                      uint32_t max_ratio, uint32_t *ratio,
                                      uint64_t *distance);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_PROFILE_H */
