/*
 * layer_preference.c - calibration for adaptive allocation
 * (pyramidkv_preference.h, docs/spec.md §17): CAKE's layer preference from
 * a window of attention rows and its integer weights for the `cake`
 * schedule kind, and per-head shares of a layer from a profile measured
 * per (layer, KV head). It keeps no state; the apportionment is the
 * schedule family's (schedule.c).
 */
#include <math.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "weight_check.h"

/* Finite and not negative (-0.0 is valid), read by bits. */
static int weight_valid(float w) {
    uint32_t u;
    memcpy(&u, &w, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) return 0;
    return (u & 0x80000000u) == 0u || (u & 0x7fffffffu) == 0u;
}

static int tau_valid(double t) { return isfinite(t) && t > 0.0; }

pb_status pb_cake_layer_preference(const float *attn, size_t heads,
                                   size_t head_stride, size_t rows,
                                   size_t len, double tau1, double tau2,
                                   double *entropy, double *variance,
                                   double *preference) {
    if (attn == NULL || preference == NULL) return PB_ERR_NULL;
    if (heads == 0u || rows == 0u || len == 0u || rows > len ||
        !tau_valid(tau1) || !tau_valid(tau2))
        return PB_ERR_PARAM;
    if (len > SIZE_MAX / rows) return PB_ERR_TOO_LARGE;
    const size_t block = rows * len;
    if (heads > 1u && head_stride < block) return PB_ERR_PARAM;
    if (heads > 1u && (heads - 1u) > (SIZE_MAX - block) / head_stride)
        return PB_ERR_TOO_LARGE;
    for (size_t h = 0; h < heads; h++) {
        const float *a = attn + h * head_stride;
        for (size_t i = 0; i < block; i++)
            if (!weight_valid(a[i])) return PB_ERR_WEIGHT;
    }
    const size_t prefix = len - rows;
    double hsum = 0.0, vsum = 0.0;
    for (size_t h = 0; h < heads; h++) {
        const float *a = attn + h * head_stride;
        for (size_t j = 0; j < rows; j++)
            for (size_t p = 0; p < prefix; p++) {
                const double x = (double)a[j * len + p];
                hsum -= x * log(x + 1e-10);
            }
    }
    if (rows > 1u) {
        for (size_t h = 0; h < heads; h++) {
            const float *a = attn + h * head_stride;
            for (size_t p = 0; p < prefix; p++) {
                double mean = 0.0;
                for (size_t j = 0; j < rows; j++) mean += (double)a[j * len + p];
                mean /= (double)rows;
                double ss = 0.0;
                for (size_t j = 0; j < rows; j++) {
                    const double d = (double)a[j * len + p] - mean;
                    ss += d * d;
                }
                vsum += ss / (double)(rows - 1u);
            }
        }
    }
    if (!(hsum > 0.0)) hsum = 0.0;
    if (entropy != NULL) *entropy = hsum;
    if (variance != NULL) *variance = vsum;
    *preference = pow(hsum, 1.0 / tau1) * pow(vsum, 1.0 / tau2);
    return PB_OK;
}

pb_status pb_cake_weights(const double *preference, size_t n,
                          uint32_t *weights, size_t weights_len) {
    if (preference == NULL || weights == NULL) return PB_ERR_NULL;
    if (n == 0u) return PB_ERR_PARAM;
    double mx = 0.0;
    for (size_t l = 0; l < n; l++) {
        if (pb__weight_bad_double(preference[l])) return PB_ERR_PARAM;
        if (preference[l] > mx) mx = preference[l];
    }
    if (!(mx > 0.0)) return PB_ERR_PARAM;
    if (weights_len < n) return PB_ERR_BUFFER;
    for (size_t l = 0; l < n; l++)
        weights[l] = (uint32_t)floor(preference[l] / mx * 16777216.0);
    return PB_OK;
}

pb_status pb_profile_head_shares(const pb_profile *profile, uint32_t layer,
                                 uint32_t num_heads, uint32_t share,
                                 uint32_t min_share, uint32_t fraction_ppm,
                                 uint32_t *shares, size_t shares_len) {
    if (profile == NULL || shares == NULL) return PB_ERR_NULL;
    if (num_heads == 0u || min_share > share || fraction_ppm == 0u ||
        fraction_ppm > 1000000u)
        return PB_ERR_PARAM;
    const uint64_t first = (uint64_t)layer * num_heads;
    if (first + num_heads > UINT32_MAX) return PB_ERR_PARAM;
    uint32_t k = 0;
    for (uint32_t h = 0; h < num_heads; h++)
        if (pb_profile_mass_k(profile, (uint32_t)first + h, fraction_ppm,
                              &k) != PB_OK)
            return PB_ERR_PARAM;
    if (shares_len < num_heads) return PB_ERR_BUFFER;
    if ((uint64_t)min_share + (uint64_t)num_heads * (share - min_share) >
        UINT32_MAX)
        return PB_ERR_TOO_LARGE;
    /* The weights go to shares[], which the apportionment then overwrites
     * layer by layer after reading each (schedule.c allows it). */
    for (uint32_t h = 0; h < num_heads; h++) {
        (void)pb_profile_mass_k(profile, (uint32_t)first + h, fraction_ppm,
                                &k);
        shares[h] = k > 0u ? k : 1u;
    }
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = PB_SCHEDULE_PROFILE;
    s.num_layers = num_heads;
    s.budget = share;
    s.min_share = min_share;
    s.weights = shares;
    const pb_status st = pb_kvcache_schedule_shares(&s, shares, num_heads,
                                                    NULL);
    return st;
}
