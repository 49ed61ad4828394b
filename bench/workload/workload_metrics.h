/*
 * workload_metrics.h - the measures the workload reports about a trace
 * step and a policy: the registry's top-k (heavy-hitter) set with its tie
 * rule, attention entropy, and round6. The per-step retained mass is a
 * plain float64 sum done by the harness (workload_harness.h).
 *
 * Owns no state; every function is pure.
 */
#ifndef PB_WORKLOAD_METRICS_H
#define PB_WORKLOAD_METRICS_H

#include <stdint.h>

/* The registry's k: heavy-hitter recall looks at the top min(32, t). */
#define PB_WL_TOPK 32u

/* round6(v) = floor(v * 10^6 + 0.5) / 10^6. */
double pb_wl_round6(double v);

/* Writes to out[] the positions of the top min(k, t) weights of w[0..t-1],
 * ascending, and returns their count. k <= PB_WL_TOPK. Every weight above
 * the k-th largest is in the set; weights equal to it fill the remaining
 * slots in ascending position order. O(t). */
uint32_t pb_wl_top_positions(const float *w, uint32_t t, uint32_t k,
                             uint32_t *out);

/* The Shannon entropy -sum w ln w of w[0..t-1] in nats (zero weights
 * contribute nothing), summed in float64 in ascending position order. */
double pb_wl_entropy(const float *w, uint32_t t);

#endif /* PB_WORKLOAD_METRICS_H */
