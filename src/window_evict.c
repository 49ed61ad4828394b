/*
 * window_evict.c - the window scorer's evict: the choice among its three
 * paths, which give identical victims, and the compactions they leave:
 *   - the full path: every window score, pooled, a radix selection, one
 *     compaction of the ring; O(held * obs_window);
 *   - for at most PB__FILTER_MAX_NEEDED victims (score_filter.c), the
 *     filtered path when the quantised sums are current: O(held) plus exact
 *     scores for the few undecided candidates;
 *   - for as few victims otherwise, the streaming path (score_stream.c):
 *     exact scores a block at a time and a bounded heap, O(held *
 *     obs_window) but no scratch array (finishing the prefix folds when
 *     they are current).
 * After the last two the victims' ring columns become holes that a later
 * compaction removes, at once or lazily (window_internal.h). It also
 * answers the peek of the lowest-ranked evictable positions, which changes
 * nothing. The rules of what is evictable are policy.c's.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "lowest_select.h"
#include "window_internal.h"

/* Marks columns 0 .. n_cols-1 alive in p->alive except the holes and
 * dead[0 .. n_dead-1]. */
static void mark_alive(pb__window *p, size_t n_cols, const size_t *dead,
                       size_t n_dead) {
    const size_t words = (n_cols + 63u) / 64u;
    memset(p->alive, 0xFF, words * sizeof *p->alive);
    if (n_cols % 64u != 0u)
        p->alive[words - 1u] = (UINT64_C(1) << (n_cols % 64u)) - 1u;
    for (size_t t = 0; t < p->n_holes; ++t)
        p->alive[p->holes[t] / 64u] &= ~(UINT64_C(1) << (p->holes[t] % 64u));
    for (size_t t = 0; t < n_dead; ++t)
        p->alive[dead[t] / 64u] &= ~(UINT64_C(1) << (dead[t] % 64u));
}

/* Moves the alive columns (p->alive) of the ring, pos[] and, when they are
 * wanted, the sums to the front; afterwards there is no hole. p->c.kept must
 * be the survivors' count already. */
static void compact_all(pb__window *p, size_t n_cols, int with_sums) {
    pb__ring_compact(p->ring, p->row_stride, p->obs_window, p->alive, n_cols);
    pb__compact_columns(p->c.pos, sizeof *p->c.pos, p->alive, n_cols);
    if (with_sums)
        pb__compact_columns(p->scores, sizeof *p->scores, p->alive, n_cols);
    p->n_holes = 0u;
    /* The columns given up are stale. Zero them while their lines are at
     * hand when they are few (the usual, cheap evicts); after a big evict
     * just forget which columns were zero. */
    const size_t freed = n_cols - p->c.kept;
    if (freed <= p->max_holes + PB__FILTER_MAX_NEEDED) {
        pb__ring_clear_columns(p->ring, p->row_stride, p->obs_window, p->c.kept,
                               freed);
        if (p->zero_upto < n_cols) p->zero_upto = n_cols;
    } else {
        p->zero_upto = p->c.kept;
    }
}

/* Drops ranks[0 .. k-1] (ascending) after a cheap selection: writes their
 * positions to victims[] and turns their columns into holes, compacting
 * when too many have gathered or when long_gap is set. Nothing else
 * moves. */
static void drop_ranks(pb__window *p, const size_t *ranks, size_t k,
                       uint32_t *victims, int filtered, int long_gap) {
    size_t cols[PB__FILTER_MAX_NEEDED];
    assert(k >= 1u && k <= PB__FILTER_MAX_NEEDED);
    /* While the sums are kept a compaction is lazy (no row moves on its
     * own), so the holes, which cost every step, are let gather only to
     * half the allowance, or PB__HOLES_MIN. */
    const size_t half =
        p->max_holes / 2u > PB__HOLES_MIN ? p->max_holes / 2u : PB__HOLES_MIN;
    const size_t allowed =
        p->sums_valid && p->lazy_ok && half < p->max_holes ? half
                                                           : p->max_holes;
    const int compact_due = p->n_holes + k > allowed || long_gap;
    const size_t room = pb__lazy_room(p->c.capacity);
    /* A lazy state gains holes until a compaction is due, while the old
     * layout stays within the ring (n_holes + n_lazy <= room) and the
     * newest column stays held (a trimmed hole would leave a stale cell
     * in a different column of each layout). */
    if (p->n_lazy > 0u &&
        (compact_due || p->n_holes + k + p->n_lazy > room ||
         ranks[k - 1u] + 1u == p->c.kept))
        pb__window_finish_lazy(p);
    for (size_t t = 0; t < k; ++t) {
        cols[t] = pb__ring_column_of(p->holes, p->n_holes, ranks[t]);
        victims[t] = p->c.pos[cols[t]];
    }
    const size_t n_cols = p->c.kept + p->n_holes;
    p->c.kept -= k;

    /* When a compaction is due, compact pos[] (and the sums) now and let
     * each ring row be compacted by its next step's rewrite (the lazy
     * state): when evicts come far apart (every step until the next one
     * then copies its row in one piece, not one run between each pair of
     * holes), and while the sums are kept (each step rewrites its row and
     * its sums anyway, so no row is moved on its own). Where rows cannot
     * be tracked, compact everything now. */
    if (compact_due && p->lazy_ok && !p->prefix_valid &&
        (long_gap ? !p->sums_valid : p->sums_valid) &&
        p->n_holes + k <= room) {
        mark_alive(p, n_cols, cols, k);
        pb__compact_columns(p->c.pos, sizeof *p->c.pos, p->alive, n_cols);
        if (p->sums_valid)
            pb__compact_columns(p->scores, sizeof *p->scores, p->alive,
                                n_cols);
        size_t a = p->n_holes, b = k, out = p->n_holes + k;
        while (b > 0u) { /* lazy_holes = holes + cols, sorted */
            if (a > 0u && p->holes[a - 1u] > cols[b - 1u])
                p->lazy_holes[--out] = p->holes[--a];
            else
                p->lazy_holes[--out] = cols[--b];
        }
        while (a > 0u) {
            --a;
            p->lazy_holes[a] = p->holes[a];
        }
        p->n_lazy = p->n_holes + k;
        p->n_holes = 0u;
        p->dense_rows = 0u;
        p->last_path = filtered ? PB__PATH_FILTERED_COMPACTED
                                : PB__PATH_STREAMED_COMPACTED;
        return;
    }
    if (compact_due) {
        mark_alive(p, n_cols, cols, k);
        compact_all(p, n_cols, p->sums_valid || p->prefix_valid);
        p->last_path = filtered ? PB__PATH_FILTERED_COMPACTED
                                : PB__PATH_STREAMED_COMPACTED;
        return;
    }
    /* A hole's sum is 0 while the sums are kept: the filter's scan reads
     * it as a bound (score_filter.c). */
    if (p->sums_valid)
        for (size_t t = 0; t < k; ++t) p->scores[cols[t]] = 0.0;
    /* Merge the new dead columns into the sorted holes, from the back. */
    size_t a = p->n_holes, b = k, out = p->n_holes + k;
    while (b > 0u) {
        if (a > 0u && p->holes[a - 1u] > cols[b - 1u])
            p->holes[--out] = p->holes[--a];
        else
            p->holes[--out] = cols[--b];
    }
    p->n_holes += k;
    /* Holes after the last held column are no holes: the next position is
     * admitted there. Trimming them also keeps pos[] ascending, as a new
     * position may be below a dropped newest one. */
    while (p->n_holes > 0u &&
           p->holes[p->n_holes - 1u] == p->c.kept + p->n_holes - 1u) {
        p->n_holes -= 1u;
        p->zero_upto = p->c.kept + p->n_holes; /* that column is stale */
    }
    p->last_path = filtered ? PB__PATH_FILTERED : PB__PATH_STREAMED;
}

/* The full path's drop: one pass reports the victims in rank (=
 * position) order and marks the surviving columns (holes stay unmarked),
 * then one compaction of the ring and pos[]. The victims are the ranks
 * first .. end-1 the cut takes by their keys x[] or, with ranks != NULL,
 * ranks[0 .. needed-1] (ascending). */
static void drop_all(pb__window *p, pb__cut *cut, const double *x,
                     size_t first, size_t end, const size_t *ranks,
                     size_t needed, uint32_t *victims) {
    const size_t n = p->c.kept, n_cols = n + p->n_holes;
    const size_t words = (n_cols + 63u) / 64u;
    memset(p->alive, 0, words * sizeof *p->alive);
    size_t nv = 0;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, n, &run)) {
        for (size_t j = 0; j < run.len; ++j) {
            const size_t i = run.rank + j, col = run.col + j;
            const int victim =
                ranks != NULL
                    ? nv < needed && ranks[nv] == i
                    : i >= first && i < end &&
                          pb__cut_takes(cut, pb__key_bits(x[i]));
            if (victim)
                victims[nv++] = p->c.pos[col];
            else
                p->alive[col / 64u] |= UINT64_C(1) << (col % 64u);
        }
    }
    assert(nv == needed);
    p->c.kept = n - nv;
    compact_all(p, n_cols, 0);
    p->last_path = PB__PATH_FULL;
}

/* The full path: every window score, pooled, selected among the evictable
 * ranks first .. end-1; the victims' positions to victims[], one
 * compaction of the ring and pos[]. */
static void evict_full(pb__window *p, size_t first, size_t end,
                       size_t needed, uint32_t *victims) {
    const size_t n = p->c.kept;
    double *x = p->scores; /* scratch by rank: the sums are dropped */
    pb__ring_window_scores(p->c.k, p->ring, p->row_stride, p->obs_window, n,
                           p->holes, p->n_holes, x);
    if (p->c.cfg.pool == (uint32_t)PB_POOL_AVG)
        pb__pool_avg(x, n, p->half_kernel, p->c.cfg.pool_kernel, p->work,
                     p->work_bytes);
    else
        pb__pool_max(x, n, p->half_kernel, p->work, p->work_bytes);

    /* The `needed` lowest pooled scores among the evictable ranks. */
    pb__cut cut;
    pb__select_lowest(x + first, end - first, needed, p->hist, &cut);

    drop_all(p, &cut, x, first, end, NULL, needed, victims);
}

/* After an evict: what the per-column array should hold until the next.
 * Evicts far apart: nothing (a step is a plain copy). Otherwise the sums
 * while the filter decides or once its backoff has run out, else the
 * prefix folds for the streaming path. */
static void keep_up(pb__window *p, int short_gap) {
    if (!short_gap || !p->stream_ok) {
        p->sums_valid = 0;
        p->prefix_valid = 0;
        return;
    }
    if (p->sums_valid) return;
    if (p->filter_wait > 0u) {
        p->filter_wait -= 1u;
    } else if (p->filter_ok) {
        p->prefix_valid = 0;
        p->sums_valid = pb__filter_rebuild(p);
        if (p->sums_valid) return;
    }
    if (!p->prefix_valid) pb__prefix_rebuild(p);
}

/* What every evict of `needed` does first: one layout for every row
 * before any score, except for the filter, which reads the sums and the
 * few exact scores it needs through either layout; the steps since the
 * last evict to *gap. Returns 1 if a cheap path (filtered, streaming, a
 * few given ranks) may serve. */
static int evict_begin(pb__window *p, size_t needed, uint32_t *gap) {
    const int cheap = needed <= PB__FILTER_MAX_NEEDED && p->stream_ok;
    if (!cheap || !p->sums_valid) pb__window_finish_lazy(p);
    *gap = p->gap;
    p->gap = 0u;
    return cheap;
}

void pb__window_evict(pb_kvcache *inst, size_t first, size_t end,
                      size_t needed, uint32_t *victims) {
    pb__window *p = (pb__window *)(void *)inst;
    uint32_t gap;
    const int cheap = evict_begin(p, needed, &gap);
    const int short_gap = gap <= PB__FILTER_MAX_GAP;
    if (cheap) {
        assert(first == 0u); /* no sinks on these paths */
        const size_t evictable = end;
        size_t ranks[PB__FILTER_MAX_NEEDED];
        int filtered = 0;
        if (p->sums_valid) {
            filtered = pb__filter_select(p, evictable, needed, ranks, NULL);
            if (filtered) {
                p->filter_backoff = 0u;
            } else {
                /* Exact ties (or a run of zeros) the bounds cannot split:
                 * stop paying for the sums for a while, longer after each
                 * miss in a row. */
                p->filter_backoff = p->filter_backoff == 0u ? 4u
                                    : p->filter_backoff < 4096u
                                        ? 2u * p->filter_backoff
                                        : p->filter_backoff;
                p->filter_wait = p->filter_backoff;
                p->sums_valid = 0; /* the array is not prefix folds either */
            }
        }
        if (!filtered) {
            pb__window_finish_lazy(p);
            pb__stream_select(p, evictable, needed, ranks);
        }
        drop_ranks(p, ranks, needed, victims, filtered,
                   gap > PB__FILTER_MAX_GAP);
        keep_up(p, short_gap);
        return;
    }
    evict_full(p, first, end, needed, victims);
    /* The full path used the per-column array as scratch. */
    p->sums_valid = 0;
    p->prefix_valid = 0;
    keep_up(p, short_gap);
}

void pb__window_evict_ranks(pb_kvcache *inst, const size_t *ranks, size_t k,
                            uint32_t *victims) {
    pb__window *p = (pb__window *)(void *)inst;
    /* The evict's paths with the choice made: a few ranks become holes
     * as the cheap paths leave them (the sums, where kept, stay kept),
     * more take the full path's one compaction. */
    uint32_t gap;
    const int cheap = evict_begin(p, k, &gap);
    const int short_gap = gap <= PB__FILTER_MAX_GAP;
    if (cheap) {
        drop_ranks(p, ranks, k, victims, p->sums_valid,
                   gap > PB__FILTER_MAX_GAP);
        keep_up(p, short_gap);
        return;
    }
    drop_all(p, NULL, NULL, 0u, 0u, ranks, k, victims);
    p->sums_valid = 0;
    p->prefix_valid = 0;
    keep_up(p, short_gap);
}

/* ------------------------------------------------------------------------ */
/* Peek                                                                     */

size_t pb__window_peek_work_bytes(const pb_kvcache *inst) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    return p->c.capacity * sizeof(double) + p->work_bytes;
}

/* The pooled window scores of every held rank, as the full path computes
 * them (all columns folded at once; through either layout of the lazy
 * state one column at a time: the same bits), into the caller's work
 * area, which it returns. */
double *pb__window_pooled_all(const pb__window *p, void *work) {
    const size_t n = p->c.kept;
    double *x = work;
    void *pool_work = p->work_bytes ? (void *)(x + p->c.capacity) : NULL;
    if (p->n_lazy == 0u) {
        pb__ring_window_scores(p->c.k, p->ring, p->row_stride, p->obs_window,
                               n, p->holes, p->n_holes, x);
    } else {
        pb__runs it = {0, 0, 0};
        pb__run run;
        while (pb__run_next(&it, p->holes, p->n_holes, n, &run))
            for (size_t j = 0; j < run.len; ++j)
                x[run.rank + j] = pb__ring_window_score(
                    p->ring, p->row_stride, p->obs_window, run.col + j,
                    p->lazy_holes, p->n_lazy, p->dense_rows);
    }
    if (p->c.cfg.pool == (uint32_t)PB_POOL_AVG)
        pb__pool_avg(x, n, p->half_kernel, p->c.cfg.pool_kernel,
                     pool_work, p->work_bytes);
    else
        pb__pool_max(x, n, p->half_kernel, pool_work, p->work_bytes);
    return x;
}

/* The pooled scores of every held rank (pb__window_pooled_all), then the
 * k least (score, rank) pairs in one pass (lowest_select.h), their ranks
 * held in positions[] until mapped. */
void pb__window_peek_lowest(const pb_kvcache *inst, size_t first, size_t end,
                            size_t k, uint32_t *positions, double *scores,
                            void *work) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    assert(first <= end && end <= p->c.kept && k <= end - first);
    const double *x = pb__window_pooled_all(p, work);
    if (k == 0u) return;
    pb__lowest_ranks(x, 8u, first, end, k, positions);
    for (size_t t = 0; t < k; ++t) {
        const size_t r = positions[t];
        scores[t] = x[r];
        positions[t] =
            p->c.pos[pb__ring_column_of(p->holes, p->n_holes, r)];
    }
}
