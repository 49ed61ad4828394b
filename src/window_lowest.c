/*
 * window_lowest.c - the window scorer's lowest entry (pb__scorer_ops.lowest)
 * for a caller of many instances, the layer group: the k lowest-ranked
 * evictable positions with their pooled scores, as the peek answers them,
 * found by the filter over the kept quantised sums (score_filter.c) when
 * they are kept and k is small, so a decode step's group evict costs what
 * a head's own evict of k costs. Only the filter's hints change; the
 * sums, the ring and the held positions do not.
 */
#include <assert.h>

#include "window_internal.h"

/* The exact pooled (max) score of rank i: the greatest exact window score
 * of ranks i - h .. i + h that are held, each folded as the full path does
 * (pb__ring_window_score, through either layout of the lazy state). A
 * window score is never -0.0 (the fold starts at +0.0), so the max is
 * the same bits whichever equal member it comes from. */
static double pooled_exact(const pb__window *p, size_t i) {
    const size_t h = p->half_kernel;
    const size_t lo = i >= h ? i - h : 0u;
    const size_t hi = p->c.kept - 1u - i > h ? i + h : p->c.kept - 1u;
    double best = -1.0;
    pb__runs it = pb__runs_at(p->holes, p->n_holes, lo);
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, hi + 1u, &run))
        for (size_t j = 0; j < run.len; ++j) {
            const double e = pb__ring_window_score(
                p->ring, p->row_stride, p->obs_window, run.col + j,
                p->lazy_holes, p->n_lazy, p->dense_rows);
            if (e > best) best = e;
        }
    return best;
}

void pb__window_lowest(pb_kvcache *inst, size_t first, size_t end, size_t k,
                       uint32_t *positions, double *scores, void *work) {
    pb__window *p = (pb__window *)(void *)inst;
    size_t ranks[PB__FILTER_MAX_NEEDED];
    double known[PB__FILTER_MAX_NEEDED];
    if (k == 0u || k > PB__FILTER_MAX_NEEDED || first != 0u ||
        !p->filter_ok || !p->sums_valid ||
        !pb__filter_select(p, end, k, ranks, known)) {
        pb__window_peek_lowest(inst, first, end, k, positions, scores, work);
        return;
    }
    /* The filter chose the k lowest by (pooled, rank); their order by
     * (score bits, rank), as the peek gives it: an insertion sort of at
     * most PB__FILTER_MAX_NEEDED. */
    double x[PB__FILTER_MAX_NEEDED];
    for (size_t t = 0; t < k; ++t) {
        const size_t r = ranks[t];
        /* The decision's own exact pooled score where it computed one
         * (the same fold, the same bits), else the ring's. */
        const double v = known[t] >= 0.0 ? known[t] : pooled_exact(p, r);
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
