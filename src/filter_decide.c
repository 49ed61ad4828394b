/*
 * filter_decide.c - the filtered selection's decision (pb__filter_select,
 * window_internal.h): from the candidates the scan over the quantised
 * sums leaves (score_filter.c, whose header comment gives the bounds),
 * each candidate's pooled score computed exactly from the ring where its
 * bound cannot rule a member out, and the `needed` least by (pooled,
 * rank). It owns neither the sums (window_sums.c) nor the scan.
 */
#include <assert.h>
#include <string.h>

#include "window_internal.h"

/* The exact window score of rank j, through a small cache: a candidate's
 * window overlaps its neighbour's. */
typedef struct score_cache {
    size_t rank[32]; /* > 2 * PB__DOUBLING_MAX_HALF + 1 */
    double score[32];
} score_cache;

static double exact_score(const pb__window *p, score_cache *c, size_t j) {
    const size_t k = j % 32u;
    if (c->rank[k] != j) {
        const size_t col = pb__ring_column_of(p->holes, p->n_holes, j);
        c->rank[k] = j;
        c->score[k] =
            pb__ring_window_score(p->ring, p->row_stride, p->obs_window, col,
                                  p->lazy_holes, p->n_lazy, p->dense_rows);
    }
    return c->score[k];
}

int pb__filter_select(pb__window *p, size_t evictable, size_t needed,
                      size_t *ranks, double *pooled) {
    assert(p->filter_ok && p->sums_valid);
    assert(needed >= 1u && needed <= PB__FILTER_MAX_NEEDED);
    assert(needed <= evictable && evictable <= p->c.kept);
    const double obs = (double)p->obs_window;
    const size_t h = p->half_kernel;
#ifndef NDEBUG
    for (size_t t = 0; t < p->n_holes; ++t)
        assert(p->scores[p->holes[t]] == 0.0);
#endif

    if (p->obs_window <= 64u && p->rounded_rows == 0u)
        return pb__filter_select_exact(p, evictable, needed, ranks, pooled);
    size_t nc = pb__filter_scan(p, evictable, needed, -1.0, 0);
    const double thr = pb__filter_threshold(p->heap[0], obs); /* the heap is full */
    if (nc == SIZE_MAX) {
        nc = pb__filter_scan(p, evictable, needed, thr, 0);
        if (nc == SIZE_MAX) return 0;
    } else {
        size_t w = 0;
        for (size_t c = 0; c < nc; ++c)
            if (p->cands[c].value <= thr) p->cands[w++] = p->cands[c];
        nc = w;
    }
    assert(nc >= needed);
    /* Each candidate costs its window of exact scores; past a quarter of
     * the held positions the full path is as cheap. */
    const size_t budget = p->c.kept / 4u > 64u ? p->c.kept / 4u : 64u;
    if (nc * (2u * h + 1u) > budget) return 0;

    /* A candidate's pooled score is the max of exact scores over its
     * window, and only members whose sum's bound can reach the window's
     * top sum M can hold that max: a member j with M > T*(S_j) scores
     * strictly below the member holding M. Usually that leaves one. */
    const double *sums = p->scores;
    /* When that one is the same rank for every candidate, they all score
     * exactly its window score: a tie, which the ranks break, so no exact
     * score is needed (each would read obs_window ring rows). */
    size_t shared = SIZE_MAX;
    for (size_t c = 0; c < nc && shared != SIZE_MAX - 1u; ++c) {
        const size_t i = p->cands[c].rank;
        const double top = p->cands[c].value;
        const size_t lo = i >= h ? i - h : 0u;
        const size_t hi = p->c.kept - 1u - i > h ? i + h : p->c.kept - 1u;
        size_t reach = SIZE_MAX, count = 0;
        pb__runs it = pb__runs_at(p->holes, p->n_holes, lo);
        pb__run run;
        while (pb__run_next(&it, p->holes, p->n_holes, hi + 1u, &run))
            for (size_t j = 0; j < run.len; ++j)
                if (top <= pb__filter_threshold(sums[run.col + j], obs)) {
                    reach = run.rank + j;
                    count += 1u;
                }
        if (count != 1u || (c > 0u && reach != shared))
            shared = SIZE_MAX - 1u; /* not shared: exact scores below */
        else
            shared = reach;
    }
    score_cache cache;
    for (size_t k = 0; k < 32u; ++k) cache.rank[k] = SIZE_MAX;
    for (size_t c = 0; c < nc && shared == SIZE_MAX - 1u; ++c) {
        const size_t i = p->cands[c].rank;
        const double top = p->cands[c].value;
        const size_t lo = i >= h ? i - h : 0u;
        const size_t hi = p->c.kept - 1u - i > h ? i + h : p->c.kept - 1u;
        double best = -1.0;
        pb__runs it = pb__runs_at(p->holes, p->n_holes, lo);
        pb__run run;
        while (pb__run_next(&it, p->holes, p->n_holes, hi + 1u, &run)) {
            for (size_t j = 0; j < run.len; ++j) {
                if (top > pb__filter_threshold(sums[run.col + j], obs)) continue;
                const double e = exact_score(p, &cache, run.rank + j);
                if (e > best) best = e;
            }
        }
        assert(best >= 0.0);
        p->cands[c].value = best;
    }
    /* Shared: every candidate's pooled score is the shared rank's window
     * score, read once when the caller wants the scores. */
    if (shared != SIZE_MAX - 1u) {
        const double e =
            pooled != NULL
                ? pb__ring_window_score(
                      p->ring, p->row_stride, p->obs_window,
                      pb__ring_column_of(p->holes, p->n_holes, shared),
                      p->lazy_holes, p->n_lazy, p->dense_rows)
                : 0.0;
        for (size_t c = 0; c < nc; ++c) p->cands[c].value = e;
    }

    /* The `needed` smallest by (pooled, rank): candidates are in rank
     * order, so a strict comparison keeps the lower rank on ties. */
    unsigned char chosen[PB__FILTER_MAX_CANDIDATES];
    memset(chosen, 0, nc);
    for (size_t v = 0; v < needed; ++v) {
        size_t best = nc;
        for (size_t c = 0; c < nc; ++c) {
            if (chosen[c]) continue;
            if (best == nc || p->cands[c].value < p->cands[best].value)
                best = c;
        }
        chosen[best] = 1u;
    }
    size_t w = 0, runner = nc;
    for (size_t c = 0; c < nc; ++c) {
        if (chosen[c]) {
            if (pooled != NULL) pooled[w] = p->cands[c].value;
            ranks[w++] = p->cands[c].rank;
        } else if (runner == nc || p->cands[c].value < p->cands[runner].value)
            runner = c;
    }
    assert(w == needed);
    p->seed_col = runner == nc ? SIZE_MAX
                               : pb__ring_column_of(p->holes, p->n_holes,
                                                    p->cands[runner].rank);
    return 1;
}

