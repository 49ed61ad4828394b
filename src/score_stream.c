/*
 * score_stream.c - the window scorer's streaming path: the exact victims
 * of an evict of a few, from exact window scores computed a block at a
 * time (the ring is slot-major, so they vectorise across positions), the
 * window max, and a bounded heap of the best `needed` (pooled, rank)
 * pairs. It needs no array the size of the instance, so the quantised sums
 * survive it; it is what decides when many positions tie exactly (every
 * position that saw the same weights), which no bound can separate.
 *
 * When evicts come often and the filter (score_filter.c) cannot decide,
 * the per-column array holds prefix folds instead of sums: each decode
 * step adds the slot it wrote to its column's running fold (0.0 + slot 0
 * + slot 1 + ..., restarting at slot 0), which is exactly how the window
 * score begins, so this path finishes each fold with only the slots not
 * yet rewritten in this turn of the ring: about half the work, the same
 * bits. It owns those folds' rebuild too.
 */
#include <assert.h>
#include <string.h>

#include "window_internal.h"

/* Ranks whose window max is computed together. */
#define PB__FILTER_BLOCK ((size_t)256)

void pb__prefix_rebuild(pb__window *p) {
    /* The fold of slots 0 .. slot-1, or of every slot when slot is 0 (the
     * last step wrote the last slot). */
    const uint32_t upto = p->slot == 0u ? p->obs_window : p->slot;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, p->c.kept, &run))
        p->c.k->fold_rows(p->ring, p->row_stride, 0u, upto, run.col, run.len,
                        NULL, p->row_stride - run.col, p->scores + run.col);
    p->prefix_valid = 1;
}

void pb__stream_select(pb__window *p, size_t evictable, size_t needed,
                       size_t *ranks) {
    assert(needed >= 1u && needed <= PB__FILTER_MAX_NEEDED);
    assert(needed <= evictable && evictable <= p->c.kept);
    assert(p->c.cfg.pool == (uint32_t)PB_POOL_MAX &&
           p->half_kernel <= PB__DOUBLING_MAX_HALF);
    const size_t n = p->c.kept, h = p->half_kernel;
    double scores[PB__FILTER_BLOCK + 2u * PB__DOUBLING_MAX_HALF];
    double pooled[PB__FILTER_BLOCK];
    struct pb__candidate *heap = p->cands;
    size_t heap_n = 0;
    /* Ranks only grow, so once the heap is full a newcomer displaces the
     * worst kept one exactly when its pooled score is strictly lower. */
    double worst = 0.0;
    for (size_t i0 = 0; i0 < evictable; i0 += PB__FILTER_BLOCK) {
        const size_t m = evictable - i0 < PB__FILTER_BLOCK ? evictable - i0
                                                           : PB__FILTER_BLOCK;
        const size_t lo = i0 >= h ? i0 - h : 0u;
        const size_t hi = n - (i0 + m) > h ? i0 + m + h : n;
        if (p->prefix_valid) /* finish the folds the steps began */
            pb__ring_window_scores_range(
                p->c.k, p->ring, p->row_stride, p->obs_window, p->holes,
                p->n_holes, lo, hi - lo, p->scores, p->columns,
                p->slot == 0u ? p->obs_window : p->slot, scores);
        else
            pb__ring_window_scores_range(p->c.k, p->ring, p->row_stride,
                                         p->obs_window, p->holes, p->n_holes,
                                         lo, hi - lo, NULL, 0u, 0u, scores);
        pb__window_max_span(p->c.k, scores, hi - lo, h, i0 - lo, m, pooled);
        size_t k = 0;
        for (; k < m && heap_n < needed; ++k) {
            const struct pb__candidate c = {i0 + k, pooled[k]};
            pb__cand_push(heap, heap_n++, c);
            worst = heap[0].value;
        }
        /* Usually nothing beats the worst kept: skip to each that does. */
        for (; (k = pb__next_below(p->c.k, pooled, k, m, worst)) < m; ++k) {
            heap[0].rank = i0 + k;
            heap[0].value = pooled[k];
            pb__cand_sift_down(heap, heap_n, 0u);
            worst = heap[0].value;
        }
    }
    assert(heap_n == needed);
    for (size_t k = 0; k < needed; ++k) ranks[k] = heap[k].rank;
    pb__sort_ranks(ranks, needed);
}
