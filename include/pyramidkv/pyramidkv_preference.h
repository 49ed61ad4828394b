/*
 * pyramidkv_preference.h - calibration for adaptive allocation: CAKE's
 * layer preference (Qin et al. 2025) measured from a layer's window
 * attention, turned into the integer weights of the `cake` schedule kind
 * (pyramidkv_schedule.h), and per-head shares of a layer from a profile
 * measured per (layer, KV head) (HeadKV-style, offline). Included by
 * <pyramidkv/pyramidkv.h> (including it directly works too).
 *
 * It owns these three pure functions. The definitions, to the last
 * operation, are in docs/spec.md §17.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_PREFERENCE_H
#define PYRAMIDKV_PYRAMIDKV_PREFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CAKE's preference of one layer from its window attention: heads blocks
 * (head h at attn + h * head_stride) of rows x len floats, row-major, row j
 * the attention of one of the last `rows` prompt tokens (the observation
 * window) over positions 0 .. len-1. Over the prefix columns p < len - rows:
 *   entropy    H = max(0, -sum over heads, rows, p of a * ln(a + 1e-10));
 *   variance   V = sum over heads and p of the rows' sample variance of
 *                  a (divided by rows - 1; 0 when rows is 1);
 *   preference H^(1/tau1) * V^(1/tau2),
 * each a double sum in ascending head, row, position order (docs/spec.md
 * §17.1). Any of entropy, variance may be NULL.
 *
 * Returns PB_OK; PB_ERR_NULL if attn or preference is NULL; PB_ERR_PARAM if
 * heads, rows or len is 0, rows > len, head_stride < rows * len with more
 * than one head, or tau1 or tau2 is not finite and positive;
 * PB_ERR_TOO_LARGE if the block does not fit in size_t; PB_ERR_WEIGHT if a
 * weight is NaN, infinite or negative. Checked in that order; on error
 * nothing is written. Pure (libm's log and pow: the last bits may differ
 * between platforms), no allocation, thread-safe. */
PB_API pb_status pb_cake_layer_preference(const float *attn, size_t heads,
                                          size_t head_stride, size_t rows,
                                          size_t len, double tau1,
                                          double tau2, double *entropy,
                                          double *variance,
                                          double *preference);

/* The integer weights of the `cake` schedule kind from n layers'
 * preferences: weights[l] = floor(preference[l] / max * 2^24) (max: the
 * largest preference), so the largest layer gets 2^24. Returns PB_OK;
 * PB_ERR_NULL if preference or weights is NULL; PB_ERR_PARAM if n is 0,
 * a preference is not finite or negative, or all are 0; PB_ERR_BUFFER if
 * weights_len < n. Nothing is written on error. Pure, thread-safe. */
PB_API pb_status pb_cake_weights(const double *preference, size_t n,
                                 uint32_t *weights, size_t weights_len);

/* Per-head shares of one layer from a profile measured per (layer, KV
 * head): profile layer `layer * num_heads + h` holds head h's rows (create
 * the profile with num_layers = L x H). Head h's weight is the smallest k
 * whose mean mass reaches fraction_ppm (pb_profile_mass_k), at least 1;
 * shares[h] = min_share plus the apportionment (docs/spec.md §12.6) of
 * num_heads x (share - min_share) positions by those weights, so the
 * shares add up to num_heads x share exactly: fixed per-head buffers for
 * a runtime that does not adapt at run time.
 *
 * Returns PB_OK; PB_ERR_NULL if profile or shares is NULL; PB_ERR_PARAM
 * if num_heads is 0, min_share > share, fraction_ppm is 0 or above
 * 1000000, a head's profile layer is out of range or has no row;
 * PB_ERR_BUFFER if shares_len < num_heads; PB_ERR_TOO_LARGE if min_share +
 * num_heads x (share - min_share) does not fit in uint32_t (one head could
 * get that much). Nothing is written on error. Pure, no allocation,
 * thread-safe (the profile is only read). */
PB_API pb_status pb_profile_head_shares(const pb_profile *profile,
                                        uint32_t layer, uint32_t num_heads,
                                        uint32_t share, uint32_t min_share,
                                        uint32_t fraction_ppm,
                                        uint32_t *shares, size_t shares_len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_PREFERENCE_H */
