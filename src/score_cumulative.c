/*
 * score_cumulative.c - the cumulative scorer (H2O): a position's score is
 * the attention it received since admission, a double, each step adding
 * (double)attn[i] in index order (docs/spec.md §13). The weights are
 * checked by the door before the step. Scores only grow, so the least of
 * a range is found through the lower bounds by blocks of ranks
 * (source_internal.h). The rest is the score sources' shared engine.
 */
#include <stdint.h>

#include "source_internal.h"

static unsigned cumulative_update(pb__source *p, const float *attn,
                                  size_t n, size_t lo, size_t hi,
                                  uint64_t *least, size_t *at) {
    p->c.k->add_weights(p->source, attn, n);
    if (at != NULL) {
        *at = lo;
        *least = hi > lo ? pb__source_least_in_bounds(p, n, lo, hi, at, 1)
                         : (uint64_t)INT64_MAX;
    }
    return 0u;
}

static double cumulative_score(const pb__source *p, size_t rank) {
    return ((const double *)p->source)[rank];
}

static const pb__source_kind cumulative_kind = {
    .per = sizeof(double),
    .update = cumulative_update,
    .score = cumulative_score,
};

PB__SOURCE_ENTRY(pb__cumulative_ops, "cumulative", cumulative_kind, NULL)
