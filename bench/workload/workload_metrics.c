/*
 * workload_metrics.c - top-k with the registry's tie rule, entropy, round6
 * (see workload_metrics.h).
 */
#include "workload_metrics.h"

#include <math.h>

double pb_wl_round6(double v) { return floor(v * 1e6 + 0.5) / 1e6; }

uint32_t pb_wl_top_positions(const float *w, uint32_t t, uint32_t k,
                             uint32_t *out) {
    if (k > PB_WL_TOPK) k = PB_WL_TOPK;
    if (k > t) k = t;
    if (k == 0u) return 0u;
    /* The k largest values as a multiset: an unsorted array and the index
     * of its minimum, refreshed only when a larger value replaces it. */
    float best[PB_WL_TOPK] = {0.0f};
    uint32_t n = 0, min_at = 0;
    for (uint32_t i = 0; i < t; ++i) {
        const float x = w[i];
        if (n < k) {
            best[n] = x;
            if (n == 0u || x < best[min_at]) min_at = n;
            ++n;
            continue;
        }
        if (!(x > best[min_at])) continue;
        best[min_at] = x;
        for (uint32_t j = 0; j < k; ++j)
            if (best[j] < best[min_at]) min_at = j;
    }
    const float kth = best[min_at];
    uint32_t above = 0;
    for (uint32_t j = 0; j < k; ++j)
        if (best[j] > kth) ++above;
    uint32_t ties = k - above, m = 0;
    for (uint32_t i = 0; i < t && m < k; ++i) {
        if (w[i] > kth) {
            out[m++] = i;
        } else if (w[i] == kth && ties > 0u) {
            out[m++] = i;
            --ties;
        }
    }
    return m;
}

double pb_wl_entropy(const float *w, uint32_t t) {
    /* Runs of equal weights (the noise floor) are common: reuse the last
     * logarithm instead of recomputing it. */
    double h = 0.0, last_log = 0.0;
    float last = -1.0f;
    for (uint32_t i = 0; i < t; ++i) {
        const float x = w[i];
        if (!(x > 0.0f)) continue;
        if (x != last) {
            last = x;
            last_log = log((double)x);
        }
        h -= (double)x * last_log;
    }
    return h;
}
