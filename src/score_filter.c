/*
 * score_filter.c - evicts of a few victims: exact victims without exact
 * sums for most positions (the filtered path), and, where that cannot
 * decide, exact sums streamed a block at a time (the streaming path).
 *
 * Owns the quantised window sums (one per held position, kept current by
 * every decode step while they are wanted), the filtered selection that
 * uses them and the streaming selection. It does not own the exact window
 * score, which stays the ring's (window_ring.c), nor the decision which
 * path an evict takes (policy.c).
 *
 * Why: the window score is defined as a fold in ring-slot order, so it
 * changes completely whenever one slot is rewritten, and a running sum
 * rounds differently. Recomputing every held position's fold at every evict
 * costs obs_window reads per position. Instead, each weight w (a float) is
 * mapped to the integer q(w) = round(w * 2^K), and the sum S of a position's
 * q values is kept exactly: S is an integer below 2^53, so adding the new
 * step's q and subtracting the overwritten one never rounds. From S the
 * exact score E is bounded on both sides:
 *   |S - 2^K T| < W           (T the real sum; each rounding is below 1)
 *   |E - T| <= g T            (g = (W-1)u/(1-(W-1)u): a fold of W
 *                              non-negative terms, u = 2^-52 covers every
 *                              rounding mode)
 * and the pooled score max_j E_j lies within the same bounds of the window
 * max M of the sums, because the bounds are monotone in S. Let m* be the
 * needed-th smallest M among the evictable ranks. A rank whose M exceeds
 *   T*(m*) = m* + 2W + 2 + W m* 2^-49
 * has a pooled score strictly above the pooled scores of at least `needed`
 * other ranks (those with M <= m*), so it cannot be a victim: with
 * (1+g)/(1-g) <= 1 + 2.1g and W <= 2^16 the bound holds with room to spare
 * for the rounding of T* itself. Only the ranks with M <= T*(m*), usually a
 * handful, have their pooled score computed exactly from the ring, and the
 * victims are chosen among them by exact (pooled, rank) order. The result
 * is exactly the full computation's, on every input; when too many ranks
 * are undecided (exact ties, all-zero windows) the caller takes the full
 * path instead.
 *
 * Weights at or above 2^PB__Q_LIMIT_LOG2 (16) are not quantised: one of
 * them makes the sums invalid until the next rebuild finds none left.
 *
 * The streaming path is the plain definition computed in blocks of
 * PB__FILTER_BLOCK ranks: exact window scores of the block and its pooling
 * halo (the ring is slot-major, so they vectorise across positions), the
 * window max, and a bounded heap of the best `needed` (pooled, rank) pairs.
 * It needs no array the size of the instance, so the sums survive it; it is
 * what decides when many positions tie exactly (every position that saw the
 * same weights), which no bound can separate.
 *
 * When evicts come often and the filter cannot decide (it has backed off),
 * the same per-column array holds prefix folds instead of sums: each
 * decode step adds the slot it wrote to its column's running fold (0.0 +
 * slot 0 + slot 1 + ..., restarting at slot 0), which is exactly how the
 * window score begins, so the streaming path finishes each fold with only
 * the slots not yet rewritten in this turn of the ring: about half the
 * work, the same bits.
 */
#include <assert.h>
#include <string.h>

#include "policy_internal.h"

/* Weights below 2^4 are quantised; attention weights are at most 1. */
#define PB__Q_LIMIT_LOG2 4
#define PB__Q_LIMIT_BITS UINT32_C(0x41800000) /* 16.0f */
/* The largest obs_window the bound above is checked for. */
#define PB__FILTER_MAX_OBS UINT32_C(65536)
/* Ranks whose window max is computed together. */
#define PB__FILTER_BLOCK ((size_t)256)

/* The quantiser (simd_kernels.c) is q(w) = round(w * scale) computed as
 * ((double)w * scale + 2^52) - 2^52 for 0 <= w * scale < 2^51: adding 2^52
 * leaves no fraction bits, so the sum rounds to an integer (within 1 in any
 * rounding mode), and subtracting 2^52 is exact. The product is exact
 * (scale is a power of two), so contracting it into an FMA changes
 * nothing. */

void pb__filter_configure(pb_kvcache *p) {
    const uint32_t obs = p->obs_window;
    p->stream_ok = p->cfg.pool == (uint32_t)PB_POOL_MAX &&
                   p->half_kernel <= PB__DOUBLING_MAX_HALF;
    p->filter_ok = p->stream_ok && obs <= PB__FILTER_MAX_OBS;
    /* K = 53 - 4 - ceil(log2(W + 2)) - 1: then W + 1 quantised weights,
     * each at most 2^(K+4) + 1, add up to less than 2^53, and every
     * w * 2^K is below 2^51. For W <= 2^16, K >= 30. */
    unsigned lg = 0;
    while (((uint64_t)1 << lg) < (uint64_t)obs + 2u) ++lg;
    const int shift = 53 - PB__Q_LIMIT_LOG2 - (int)lg - 1;
    double scale = 1.0;
    for (int i = 0; i < shift; ++i) scale *= 2.0;
    p->q_scale = scale;
    p->q_limit_bits = PB__Q_LIMIT_BITS;
}

int pb__filter_rebuild(pb_kvcache *p) {
    double *sums = p->scores; /* by column */
    const size_t n = p->kept;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, n, &run))
        memset(sums + run.col, 0, run.len * sizeof *sums);
    unsigned big = 0u;
    for (uint32_t s = 0; s < p->obs_window; ++s) {
        const float *row = p->ring + (size_t)s * p->row_stride;
        pb__runs rit = {0, 0, 0};
        while (pb__run_next(&rit, p->holes, p->n_holes, n, &run))
            big |= p->k->quantise_add(row + run.col, sums + run.col, run.len,
                                      p->q_scale, p->q_limit_bits);
    }
    return big == 0u;
}

void pb__filter_store_row(pb_kvcache *p, const float *weights, size_t n) {
    p->k->store_sums(p->ring + (size_t)p->slot * p->row_stride, weights,
                     p->scores, p->holes, p->n_holes, n, p->q_scale);
}

/* ------------------------------------------------------------------------ */
/* Selection                                                                */

/* T*(m): no rank whose window max of sums exceeds it can be a victim. */
static double threshold(double m, double obs) {
    return m + (2.0 * obs + 2.0) + (obs * m) * 0x1p-49;
}

/* A max-heap of the `needed` smallest window maxima seen so far. */
static void heap_sift_down(double *heap, size_t n, size_t i) {
    const double v = heap[i];
    for (;;) {
        size_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && heap[c + 1u] > heap[c]) ++c;
        if (heap[c] <= v) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

static void heap_push(double *heap, size_t n, double v) {
    size_t i = n;
    while (i > 0u) {
        const size_t parent = (i - 1u) / 2u;
        if (heap[parent] >= v) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

/* The exact window score of rank j, through a small cache: a candidate's
 * window overlaps its neighbour's. */
typedef struct score_cache {
    size_t rank[32]; /* > 2 * PB__DOUBLING_MAX_HALF + 1 */
    double score[32];
} score_cache;

static double exact_score(const pb_kvcache *p, score_cache *c, size_t j) {
    const size_t k = j % 32u;
    if (c->rank[k] != j) {
        const size_t col = pb__ring_column_of(p->holes, p->n_holes, j);
        c->rank[k] = j;
        c->score[k] =
            pb__ring_window_score(p->ring, p->row_stride, p->obs_window, col);
    }
    return c->score[k];
}

/* The least double above v >= 0 (v finite). */
static double next_up(double v) {
    uint64_t b = pb__key_bits(v) + 1u;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* The scan shared by both selections: the first k' >= k below m with
 * v[k'] < bound, or m (a vectorised search, simd_kernels.c). */
static size_t next_below(const pb_kvcache *p, const double *v, size_t k,
                         size_t m, double bound) {
    return k >= m ? m : k + p->k->first_below(v + k, m - k, bound);
}

/* Appends a candidate; 0 if there is no room. */
static int record(pb_kvcache *p, size_t *nc, size_t rank, double value) {
    if (*nc == PB__FILTER_MAX_CANDIDATES) return 0;
    p->cands[*nc].rank = rank;
    p->cands[*nc].value = value;
    *nc += 1u;
    return 1;
}

/* Scans the window maxima of ranks 0 .. evictable-1. With thr < 0 it also
 * keeps the heap of the `needed` smallest and records every rank that may
 * still turn out a candidate; with thr >= 0 it records the ranks at or
 * below thr. Returns the number recorded, or SIZE_MAX on overflow. */
static size_t scan(pb_kvcache *p, size_t evictable, size_t needed,
                   double thr) {
    const double *sums = p->scores;
    const size_t n = p->kept, h = p->half_kernel;
    const double obs = (double)p->obs_window;
    const int fixed = thr >= 0.0;
    double buf[PB__FILTER_BLOCK + 2u * PB__DOUBLING_MAX_HALF];
    double wmax[PB__FILTER_BLOCK];
    size_t heap_n = 0, nc = 0;
    int overflow = 0;
    for (size_t i0 = 0; i0 < evictable; i0 += PB__FILTER_BLOCK) {
        const size_t m = evictable - i0 < PB__FILTER_BLOCK ? evictable - i0
                                                           : PB__FILTER_BLOCK;
        const size_t lo = i0 >= h ? i0 - h : 0u;
        const size_t hi = n - (i0 + m) > h ? i0 + m + h : n;
        /* The sums of ranks lo .. hi-1, gathered past the holes. */
        pb__runs it = pb__runs_at(p->holes, p->n_holes, lo);
        pb__run run;
        while (pb__run_next(&it, p->holes, p->n_holes, hi, &run))
            memcpy(buf + (run.rank - lo), sums + run.col,
                   run.len * sizeof *buf);
        pb__window_max_span(p->k, buf, hi - lo, h, i0 - lo, m, wmax);
        size_t k = 0;
        for (; !fixed && k < m && heap_n < needed; ++k) {
            heap_push(p->heap, heap_n++, wmax[k]);
            if (heap_n == needed) thr = threshold(p->heap[0], obs);
            overflow |= !record(p, &nc, i0 + k, wmax[k]);
        }
        /* With the heap full only values <= thr matter (one below the
         * heap's top is below thr too), and thr only falls: skip to each
         * in turn. */
        for (; (k = next_below(p, wmax, k, m, next_up(thr))) < m; ++k) {
            const double v = wmax[k];
            if (!fixed && v < p->heap[0]) {
                p->heap[0] = v;
                heap_sift_down(p->heap, heap_n, 0u);
                thr = threshold(p->heap[0], obs);
            }
            if (v <= thr) overflow |= !record(p, &nc, i0 + k, v);
        }
    }
    return overflow ? SIZE_MAX : nc;
}

int pb__filter_select(pb_kvcache *p, size_t evictable, size_t needed,
                      size_t *ranks) {
    assert(p->filter_ok && p->sums_valid);
    assert(needed >= 1u && needed <= PB__FILTER_MAX_NEEDED);
    assert(needed <= evictable && evictable <= p->kept);
    const double obs = (double)p->obs_window;
    const size_t h = p->half_kernel;

    size_t nc = scan(p, evictable, needed, -1.0);
    const double thr = threshold(p->heap[0], obs); /* the heap is full */
    if (nc == SIZE_MAX) {
        nc = scan(p, evictable, needed, thr);
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
    const size_t budget = p->kept / 4u > 64u ? p->kept / 4u : 64u;
    if (nc * (2u * h + 1u) > budget) return 0;

    /* A candidate's pooled score is the max of exact scores over its
     * window, and only members whose sum's bound can reach the window's
     * top sum M can hold that max: a member j with M > T*(S_j) scores
     * strictly below the member holding M. Usually that leaves one. */
    score_cache cache;
    for (size_t k = 0; k < 32u; ++k) cache.rank[k] = SIZE_MAX;
    const double *sums = p->scores;
    for (size_t c = 0; c < nc; ++c) {
        const size_t i = p->cands[c].rank;
        const double top = p->cands[c].value;
        const size_t lo = i >= h ? i - h : 0u;
        const size_t hi = p->kept - 1u - i > h ? i + h : p->kept - 1u;
        double best = -1.0;
        pb__runs it = pb__runs_at(p->holes, p->n_holes, lo);
        pb__run run;
        while (pb__run_next(&it, p->holes, p->n_holes, hi + 1u, &run)) {
            for (size_t j = 0; j < run.len; ++j) {
                if (top > threshold(sums[run.col + j], obs)) continue;
                const double e = exact_score(p, &cache, run.rank + j);
                if (e > best) best = e;
            }
        }
        assert(best >= 0.0);
        p->cands[c].value = best;
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
    size_t w = 0;
    for (size_t c = 0; c < nc; ++c)
        if (chosen[c]) ranks[w++] = p->cands[c].rank;
    assert(w == needed);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Streaming                                                                */

void pb__prefix_rebuild(pb_kvcache *p) {
    /* The fold of slots 0 .. slot-1, or of every slot when slot is 0 (the
     * last step wrote the last slot). */
    const uint32_t upto = p->slot == 0u ? p->obs_window : p->slot;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, p->kept, &run))
        p->k->fold_rows(p->ring, p->row_stride, 0u, upto, run.col, run.len,
                        NULL, p->row_stride - run.col, p->scores + run.col);
    p->prefix_valid = 1;
}

/* 1 if a goes after b in (pooled, rank) order. */
static int cand_after(const struct pb__candidate *a,
                      const struct pb__candidate *b) {
    return a->value > b->value || (a->value == b->value && a->rank > b->rank);
}

/* heap[0 .. n-1] is a max-heap in (pooled, rank) order; heap[i] may be
 * too small. */
static void cand_sift_down(struct pb__candidate *heap, size_t n, size_t i) {
    const struct pb__candidate v = heap[i];
    for (;;) {
        size_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && cand_after(&heap[c + 1u], &heap[c])) ++c;
        if (!cand_after(&heap[c], &v)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

static void cand_push(struct pb__candidate *heap, size_t n,
                      struct pb__candidate v) {
    size_t i = n;
    while (i > 0u) {
        const size_t parent = (i - 1u) / 2u;
        if (!cand_after(&v, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

static void sort_ranks(size_t *ranks, size_t n) {
    for (size_t i = 1; i < n; ++i) {
        const size_t v = ranks[i];
        size_t j = i;
        for (; j > 0u && ranks[j - 1u] > v; --j) ranks[j] = ranks[j - 1u];
        ranks[j] = v;
    }
}

void pb__stream_select(pb_kvcache *p, size_t evictable, size_t needed,
                       size_t *ranks) {
    assert(needed >= 1u && needed <= PB__FILTER_MAX_NEEDED);
    assert(needed <= evictable && evictable <= p->kept);
    assert(p->cfg.pool == (uint32_t)PB_POOL_MAX &&
           p->half_kernel <= PB__DOUBLING_MAX_HALF);
    const size_t n = p->kept, h = p->half_kernel;
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
                p->k, p->ring, p->row_stride, p->obs_window, p->holes,
                p->n_holes, lo, hi - lo, p->scores, p->columns,
                p->slot == 0u ? p->obs_window : p->slot, scores);
        else
            pb__ring_window_scores_range(p->k, p->ring, p->row_stride,
                                         p->obs_window, p->holes, p->n_holes,
                                         lo, hi - lo, NULL, 0u, 0u, scores);
        pb__window_max_span(p->k, scores, hi - lo, h, i0 - lo, m, pooled);
        size_t k = 0;
        for (; k < m && heap_n < needed; ++k) {
            const struct pb__candidate c = {i0 + k, pooled[k]};
            cand_push(heap, heap_n++, c);
            worst = heap[0].value;
        }
        /* Usually nothing beats the worst kept: skip to each that does. */
        for (; (k = next_below(p, pooled, k, m, worst)) < m; ++k) {
            heap[0].rank = i0 + k;
            heap[0].value = pooled[k];
            cand_sift_down(heap, heap_n, 0u);
            worst = heap[0].value;
        }
    }
    assert(heap_n == needed);
    for (size_t k = 0; k < needed; ++k) ranks[k] = heap[k].rank;
    sort_ranks(ranks, needed);
}
