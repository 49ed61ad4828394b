/*
 * window_lowest.c - the window scorer's lowest entry (pb__scorer_ops.lowest)
 * for a caller of many instances, the layer group: the k lowest-ranked
 * evictable positions with their pooled scores, as the peek answers them,
 * found by the filter over the kept quantised sums (score_filter.c) when
 * they are kept and k is small, so a decode step's group evict costs what
 * a head's own evict of k costs; else from every pooled score, as the
 * peek, many keys by the evict's cut. Only the filter's hints and scratch
 * change; the sums, the ring and the held positions do not; the keys are
 * the pooled scores the filter's decision computed.
 */
#include <assert.h>

#include "lowest_select.h"
#include "window_internal.h"

/* From this many keys on, the full path selects by a cut and a sort of
 * the k it takes rather than by a bounded heap over every rank. */
#define PB__LOWEST_CUT_FROM ((size_t)8)

void pb__window_lowest(pb_kvcache *inst, size_t first, size_t end, size_t k,
                       uint32_t *positions, double *scores, void *work) {
    pb__window *p = (pb__window *)(void *)inst;
    size_t ranks[PB__FILTER_MAX_NEEDED];
    double known[PB__FILTER_MAX_NEEDED];
    if (k == 0u || k > PB__FILTER_MAX_NEEDED || first != 0u ||
        !p->filter_ok || !p->sums_valid ||
        !pb__filter_select(p, end, k, ranks, known)) {
        if (k < PB__LOWEST_CUT_FROM) {
            pb__window_peek_lowest(inst, first, end, k, positions, scores,
                                   work);
            return;
        }
        /* Many keys: the peek's pooled scores, and the k least by the
         * evict's cut (in its histogram, the filter's scratch) and a sort
         * of the k it takes: the peek's pairs in the peek's order. */
        const double *x = pb__window_pooled_all(p, work);
        pb__lowest_ranks_cut(x, 8u, first, end, k, p->hist, positions);
        for (size_t t = 0; t < k; ++t) {
            const size_t r = positions[t];
            scores[t] = x[r];
            positions[t] =
                p->c.pos[pb__ring_column_of(p->holes, p->n_holes, r)];
        }
        return;
    }
    /* The filter chose the k lowest by (pooled, rank); their order by
     * (score bits, rank), as the peek gives it: an insertion sort of at
     * most PB__FILTER_MAX_NEEDED. */
    double x[PB__FILTER_MAX_NEEDED];
    for (size_t t = 0; t < k; ++t) {
        const size_t r = ranks[t];
        /* The decision's own exact pooled score: the bits the ring's fold
         * gives, as the peek computes them. */
        const double v = known[t];
        const uint64_t key = pb__key_bits(v);
        size_t u = t;
        while (u > 0u && (pb__key_bits(x[u - 1u]) > key ||
                          (pb__key_bits(x[u - 1u]) == key &&
                           ranks[u - 1u] > r))) {
            x[u] = x[u - 1u];
            ranks[u] = ranks[u - 1u];
            --u;
        }
        x[u] = v;
        ranks[u] = r;
    }
    for (size_t t = 0; t < k; ++t) {
        scores[t] = x[t];
        positions[t] =
            p->c.pos[pb__ring_column_of(p->holes, p->n_holes, ranks[t])];
    }
}
