/*
 * workload_metrics.c - top-k with the registry's tie rule, entropy, round6
 * (see workload_metrics.h).
 */
#include "workload_metrics.h"

#include <math.h>

double pb_wl_round6(double v) { return floor(v * 1e6 + 0.5) / 1e6; }

/* Restores the min-heap property below slot i of heap[0 .. n-1]. */
static void sift_down(float *heap, uint32_t n, uint32_t i) {
    const float x = heap[i];
    for (;;) {
        uint32_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && heap[c + 1u] < heap[c]) ++c;
        if (!(heap[c] < x)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = x;
}

#define BLOCK 16u

/* The largest of w[0 .. BLOCK-1] (weights are finite and non-negative). */
static float block_max(const float *w) {
    float m = w[0];
    for (uint32_t j = 1; j < BLOCK; ++j) m = w[j] > m ? w[j] : m;
    return m;
}

uint32_t pb_wl_top_positions(const float *w, uint32_t t, uint32_t k,
                             uint32_t *out) {
    if (k > PB_WL_TOPK) k = PB_WL_TOPK;
    if (k > t) k = t;
    if (k == 0u) return 0u;
    /* The k largest values as a multiset, in a min-heap whose root is the
     * k-th largest so far. */
    float heap[PB_WL_TOPK] = {0.0f};
    for (uint32_t i = 0; i < k; ++i) heap[i] = w[i];
    for (uint32_t i = k / 2u; i-- > 0u;) sift_down(heap, k, i);
    /* Most of a step is the noise floor: a block whose maximum cannot
     * enter the heap is skipped after one branch-free scan. */
    uint32_t i = k;
    for (; i + BLOCK <= t; i += BLOCK) {
        if (!(block_max(w + i) > heap[0])) continue;
        for (uint32_t j = i; j < i + BLOCK; ++j)
            if (w[j] > heap[0]) {
                heap[0] = w[j];
                sift_down(heap, k, 0);
            }
    }
    for (; i < t; ++i)
        if (w[i] > heap[0]) {
            heap[0] = w[i];
            sift_down(heap, k, 0);
        }
    const float kth = heap[0];
    uint32_t above = 0;
    for (uint32_t j = 0; j < k; ++j)
        if (heap[j] > kth) ++above;
    uint32_t ties = k - above, m = 0;
    for (i = 0; i < t && m < k; ++i) {
        if (i % BLOCK == 0u && i + BLOCK <= t && block_max(w + i) < kth) {
            i += BLOCK - 1u;
            continue;
        }
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
