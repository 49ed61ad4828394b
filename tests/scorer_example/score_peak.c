/*
 * score_peak.c - the worked example of docs/architecture.md, "Adding a
 * scorer": the peak scorer, a position's score the largest weight it has
 * received, a double (0.0 when admitted). The door checks the weights
 * before the step; peaks only grow, so the least of a range is found
 * through the bounds by blocks of ranks (source_internal.h). The rest is
 * the score sources' shared engine. Built only into the example's test,
 * with its entry in the test's copy of the scorer table.
 */
#include <stdint.h>

#include "source_internal.h"

static unsigned peak_update(pb__source *p, const float *attn, size_t n,
                            size_t lo, size_t hi, uint64_t *least,
                            size_t *at) {
    double *s = p->source;
    for (size_t i = 0; i < n; ++i)
        if ((double)attn[i] > s[i]) s[i] = (double)attn[i];
    if (at != NULL) {
        *at = lo;
        *least = hi > lo ? pb__source_least_in_bounds(p, n, lo, hi, at, 1)
                         : (uint64_t)INT64_MAX;
    }
    return 0u;
}

static double peak_score(const pb__source *p, size_t rank) {
    return ((const double *)p->source)[rank];
}

static const pb__source_kind peak_kind = {
    .per = sizeof(double),
    .update = peak_update,
    .score = peak_score,
};

PB__SOURCE_ENTRY(pb__peak_ops, "peak", peak_kind, NULL)
