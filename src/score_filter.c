/*
 * score_filter.c - evicts of a few victims: exact victims without exact
 * sums for most positions (the filtered path). Where that cannot decide,
 * exact sums are streamed a block at a time (the streaming path,
 * score_stream.c).
 *
 * Owns the filtered selection's scan (its decision among the candidates
 * is filter_decide.c), which reads the quantised window sums (one
 * per held position, kept current by every decode step while they are
 * wanted: window_sums.c). It does not own the exact window score, which
 * stays the ring's (window_ring.c), nor the decision which path an evict
 * takes (window_evict.c).
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
 * Finding those ranks costs one pass over the sums: a rank with M <= T*
 * has every sum of its window at most T*, so a bit per column (sum <= T*,
 * one vectorised compare) ANDed over each window on whole words leaves only
 * the columns whose window can pass, and only those get their window max
 * from the sums. A hole's sum is kept at 0 (below every sum, so no window
 * max notices it), which lets the column windows stand for the rank
 * windows. With one victim asked, the runner-up of the last scan seeds T*
 * before the pass; with a few asked, a guess (the last scan of as many's
 * needed-th least window max and a margin), checked after it, bounds it
 * tighter still (scan). When the
 * one member whose bound can reach the top is the same rank for every
 * candidate, the candidates' pooled scores are all its window score: a
 * tie, which the ranks break, so nothing is read from the ring.
 *
 * When q rounded no weight a held position has in the ring (each row's
 * store says whether it rounded one), the sums need no bound at all: every
 * weight is an integer multiple of 2^-K, so is every partial sum of a
 * window score's fold, and each is exact in a double (below 2^(53-K)); the
 * fold never rounds, the window score is exactly S * 2^-K and a pooled
 * score exactly M * 2^-K. Then the victims are simply the least (M, rank)
 * pairs, however many ranks tie (select_exact), which is what lets the
 * filter serve inputs whose exact ties used to send it back to the
 * streaming path. Any weight of at least 2^(23-K) (2^-20 at obs_window 16)
 * is such a multiple, as is 0.
 *
 * Weights at or above 2^PB__Q_LIMIT_LOG2 (16, window_sums.c) are not
 * quantised: one of
 * them makes the sums invalid until the next rebuild finds none left.
 *
 * The streaming path (score_stream.c) is the plain definition computed in
 * blocks of PB__FILTER_BLOCK ranks: exact window scores of the block and its pooling
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
#include <math.h>
#include <string.h>

#include "window_internal.h"

/* ------------------------------------------------------------------------ */
/* Selection                                                                */


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


/* The least double above v >= 0 (v finite). */
static double next_up(double v) {
    uint64_t b = pb__key_bits(v) + 1u;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* Appends a candidate; 0 if there is no room. */
static int record(pb__window *p, size_t *nc, size_t rank, double value) {
    if (*nc == PB__FILTER_MAX_CANDIDATES) return 0;
    p->cands[*nc].rank = rank;
    p->cands[*nc].value = value;
    *nc += 1u;
    return 1;
}

/* The window max of the sums of the rank held in column c, hp holes
 * before it. Hole columns hold 0 while the sums are kept (drop_ranks,
 * pb__filter_rebuild) and sums are >= 0, so the max may run over the whole
 * column range from rank i-h's column to rank i+h's. */
static double window_max_at(const pb__window *p, size_t c, size_t hp) {
    const size_t h = p->half_kernel, n_cols = p->c.kept + p->n_holes;
    size_t lo = c, hi = c, k = h, j = hp;
    while (k > 0u && lo > 0u) {
        --lo;
        if (j > 0u && p->holes[j - 1u] == lo)
            --j;
        else
            --k;
    }
    for (k = h, j = hp; k > 0u && hi + 1u < n_cols;) {
        ++hi;
        if (j < p->n_holes && p->holes[j] == hi)
            ++j;
        else
            --k;
    }
    const double *sums = p->scores;
    double m = sums[lo];
    for (size_t t = lo + 1u; t <= hi; ++t) m = m < sums[t] ? sums[t] : m;
    return m;
}

/* The state of one scan of the window maxima. */
typedef struct scan_state {
    size_t needed, heap_n, nc, hp; /* hp: holes before the column visited */
    double thr, obs;
    int fixed, overflow;
    int exact; /* window maxima are the pooled scores: see select_exact */
    size_t taken; /* columns whose window max was taken */
} scan_state;

/* take() of an exact scan: a max-heap in cands[] of the `needed` least
 * (window max, rank) pairs, ranks ascending over calls, so a later rank
 * with an equal max never displaces a kept one. */
static void take_exact(pb__window *p, scan_state *st, size_t rank,
                       double v) {
    struct pb__candidate *heap = p->cands;
    const struct pb__candidate c = {rank, v};
    if (st->heap_n < st->needed) {
        pb__cand_push(heap, st->heap_n++, c);
        if (st->heap_n == st->needed) st->thr = heap[0].value;
    } else if (v < heap[0].value) {
        heap[0] = c;
        pb__cand_sift_down(heap, st->heap_n, 0u);
        st->thr = heap[0].value;
    }
}

/* A held rank's exact window max v: updates the heap and the threshold
 * and records the rank while it may still be a candidate. */
static void take(pb__window *p, scan_state *st, size_t rank, double v) {
    st->taken += 1u;
    if (st->exact) {
        take_exact(p, st, rank, v);
        return;
    }
    if (!st->fixed && st->heap_n < st->needed) {
        heap_push(p->heap, st->heap_n++, v);
        if (st->heap_n == st->needed) st->thr = pb__filter_threshold(p->heap[0], st->obs);
        st->overflow |= !record(p, &st->nc, rank, v);
        return;
    }
    if (!st->fixed && v < p->heap[0]) {
        p->heap[0] = v;
        heap_sift_down(p->heap, st->heap_n, 0u);
        st->thr = pb__filter_threshold(p->heap[0], st->obs);
    }
    if (v <= st->thr) st->overflow |= !record(p, &st->nc, rank, v);
}

/* Visits column c (ascending over calls): a hole is passed over, a held
 * rank taken with its exact window max. */
static void visit(pb__window *p, scan_state *st, size_t c) {
    while (st->hp < p->n_holes && p->holes[st->hp] < c) st->hp += 1u;
    if (st->hp < p->n_holes && p->holes[st->hp] == c) return;
    take(p, st, c - st->hp, window_max_at(p, c, st->hp));
}

/* Columns whose bits one pass of the scan tests: few in the first pass,
 * whose threshold comes from the first ranks only, more afterwards. */
#define PB__SCAN_FIRST ((size_t)64)
#define PB__SCAN_COLS ((size_t)512)
#define PB__SCAN_WORDS                                                        \
    ((PB__SCAN_COLS + 2u * PB__DOUBLING_MAX_HALF + 63u) / 64u)

/* bits[] holds a bit array of nw words: bit j <- bit j AND bit j+s
 * (0 < s < 64), the bits past the array counting as set. */
static void and_shift(uint64_t *bits, size_t nw, unsigned s) {
    for (size_t i = 0; i < nw; ++i) {
        const uint64_t next = i + 1u < nw ? bits[i + 1u] : ~UINT64_C(0);
        bits[i] &= (bits[i] >> s) | (next << (64u - s));
    }
}

/* Scans the window maxima of ranks 0 .. evictable-1. With thr < 0 it also
 * keeps the heap of the `needed` smallest and records every rank that may
 * still turn out a candidate; with thr >= 0 it records the ranks at or
 * below thr. Returns the number recorded, or SIZE_MAX on overflow, and
 * leaves its final state in *out. A guess >= 0 bounds the columns looked
 * at as a seed would, without being one (scan checks it).
 *
 * Only a rank whose window max is at most thr matters (with the heap full,
 * one below the heap's top is below thr too, and thr only falls). Such a
 * rank, in column c, has every sum of the columns c-h .. c+h at most thr:
 * the held ones among them are its neighbours, the holes hold 0. So the
 * columns are tested a pass at a time on bits (sum <= thr, one vectorised
 * compare each), the bits of each window are ANDed on whole words, and
 * only the columns whose window passes get their exact window max. */
static size_t scan_pass(pb__window *p, size_t evictable, size_t needed,
                        double thr, int exact, double guess,
                        scan_state *out) {
    const size_t h = p->half_kernel, w = 2u * h + 1u;
    const size_t n_cols = p->c.kept + p->n_holes;
    const size_t ce =
        pb__ring_column_of(p->holes, p->n_holes, evictable - 1u) + 1u;
    scan_state st = {needed, 0u, 0u, 0u, thr, (double)p->obs_window,
                     thr >= 0.0, 0, exact, 0u};
    /* One victim: the runner-up of the last scan, if it is still an
     * evictable held column, bounds this one's minimum from above, so no
     * column whose window max exceeds T*(its max) can matter. */
    double seed_thr = -1.0;
    if (!st.fixed && needed == 1u + (size_t)exact && p->seed_col < ce) {
        size_t a = 0, b = p->n_holes; /* holes before seed_col */
        while (a < b) {
            const size_t mid = a + (b - a) / 2u;
            if (p->holes[mid] < p->seed_col)
                a = mid + 1u;
            else
                b = mid;
        }
        if (a == p->n_holes || p->holes[a] != p->seed_col) {
            const double m = window_max_at(p, p->seed_col, a);
            seed_thr = exact ? m : pb__filter_threshold(m, st.obs);
        }
    }
    /* A guessed bound (see scan) stands in for the seed when it is lower;
     * the caller checks afterwards that it held. */
    if (guess >= 0.0) {
        const double g = exact ? guess : pb__filter_threshold(guess, st.obs);
        if (seed_thr < 0.0 || g < seed_thr) seed_thr = g;
    }
    size_t c = 0;
    for (; c < ce && (c < h || (!st.fixed && st.heap_n < needed)); ++c)
        visit(p, &st, c);
    uint64_t bits[PB__SCAN_WORDS];
    size_t hq = 0; /* holes before the column last taken */
    while (c < ce) {
        /* Columns c .. c+m-1, their windows lo .. lo+nb-1; the bits past
         * the held columns count as set (the windows end there). */
        const size_t cols = c < h + PB__SCAN_FIRST && seed_thr < 0.0
                                ? PB__SCAN_FIRST
                                : PB__SCAN_COLS;
        const size_t m = ce - c < cols ? ce - c : cols;
        const size_t lo = c - h, nb = m + 2u * h;
        const size_t have = n_cols - lo < nb ? n_cols - lo : nb;
        const size_t nw = (nb + 63u) / 64u;
        /* Bits of sum <= bound. An exact scan that bounds by its heap's top
         * wants sum < top only: a later rank whose window max equals the
         * top cannot displace it (with many exact ties at the least
         * score, that skips them all). */
        const int by_seed = seed_thr >= 0.0 && seed_thr < st.thr;
        const double bound = by_seed ? seed_thr : st.thr;
        p->c.k->below_bits(p->scores + lo, have,
                         st.exact && !by_seed ? bound : next_up(bound),
                         bits);
        if (have % 64u != 0u) bits[have / 64u] |= ~UINT64_C(0) << (have % 64u);
        for (size_t i = (have + 63u) / 64u; i < nw; ++i) bits[i] = ~UINT64_C(0);
        unsigned cover = 1u;
        while (2u * cover <= w) {
            and_shift(bits, nw, cover);
            cover *= 2u;
        }
        if (cover < w) and_shift(bits, nw, (unsigned)w - cover);
        /* Bit j now says whether columns lo+j .. lo+j+w-1, the window of
         * column c+j, all passed. The passing columns come in ascending
         * order over the whole scan, so one pointer into the holes gives
         * each its rank and says whether a hole lies within h columns of
         * it; a column with none there has just the columns c-h .. c+h as
         * its window. */
        for (size_t i = 0; i * 64u < m; ++i) {
            uint64_t word = bits[i];
            if (m - i * 64u < 64u)
                word &= (UINT64_C(1) << (m - i * 64u)) - 1u;
            while (word != 0u) {
                const size_t col = c + i * 64u + pb__lowest_bit(word);
                word &= word - 1u;
                /* The bits may come from a bound the heap has since
                 * lowered: a column whose own sum already rules it out
                 * (its window max is at least that sum) is passed over. */
                const double own = p->scores[col];
                if (st.exact ? own >= st.thr : own > st.thr) continue;
                while (hq < p->n_holes && p->holes[hq] < col) ++hq;
                if (hq < p->n_holes && p->holes[hq] == col) continue;
                double v;
                if ((hq == 0u || p->holes[hq - 1u] + h < col) &&
                    (hq == p->n_holes || p->holes[hq] > col + h)) {
                    const double *x = p->scores;
                    const size_t end =
                        col + h < n_cols ? col + h : n_cols - 1u;
                    v = x[col - h];
                    for (size_t t = col - h + 1u; t <= end; ++t)
                        v = v < x[t] ? x[t] : v;
                } else {
                    v = window_max_at(p, col, hq);
                }
                take(p, &st, col - hq, v);
            }
        }
        c += m;
    }
    *out = st;
    return st.overflow ? SIZE_MAX : st.nc;
}

/* The needed-th least window max a full scan state holds (its heap's
 * top). */
static double scan_top(const pb__window *p, const scan_state *st) {
    return st->exact ? p->cands[0].value : p->heap[0];
}

/* The columns a guessed scan aims to take. */
#define PB__GUESS_FEW ((size_t)4)
#define PB__GUESS_MANY ((size_t)16)

/* scan_pass, with the scan's heap filled from its own columns, bounded
 * first by a guess when it asks for at most PB__GUESS_SLOTS least (one
 * victim, the exact scan's runner-up besides, or a layer group's few
 * lowest keys of a head): the last such scan's needed-th least window max
 * m, times 1 + 2^-guess_step, each `needed` with its own m and margin.
 * From one step to the next the sums move little as a whole although
 * which column is least changes often, so the bound usually passes a few
 * columns where the runner-up's window max, when there is one, passes
 * dozens. A guess is only a hint: columns above it are passed over, which
 * is exact only if the needed-th least window max the scan finds is at
 * most the guess (then every column above could not matter, as with a
 * seed); when it is not, the scan runs again without the guess. The
 * margin adapts to how many columns the guessed scans take: it halves
 * above PB__GUESS_MANY, doubles below PB__GUESS_FEW and grows fourfold
 * after a miss. Only the time depends on it. */
size_t pb__filter_scan(pb__window *p, size_t evictable, size_t needed,
                       double thr, int exact) {
    scan_state st;
    const int guessed = thr < 0.0 && needed <= PB__GUESS_SLOTS;
    double *gm = guessed ? &p->guess_m[needed - 1u] : NULL;
    unsigned *gs = guessed ? &p->guess_step[needed - 1u] : NULL;
    if (guessed && *gm >= 0.0) {
        const double guess = *gm + ldexp(*gm, -(int)*gs);
        const size_t nc =
            scan_pass(p, evictable, needed, thr, exact, guess, &st);
        if (st.heap_n == needed && scan_top(p, &st) <= guess) {
            if (st.taken > PB__GUESS_MANY && *gs < PB__GUESS_STEPS)
                *gs += 1u;
            else if (st.taken < PB__GUESS_FEW && *gs > 0u)
                *gs -= 1u;
            *gm = scan_top(p, &st);
            return nc;
        }
        *gs = *gs > 2u ? *gs - 2u : 0u;
    }
    const size_t nc = scan_pass(p, evictable, needed, thr, exact, -1.0, &st);
    if (guessed && st.heap_n == needed) *gm = scan_top(p, &st);
    return nc;
}

/* The filtered selection when no held cell's q rounded (rounded_rows 0):
 * then every weight of a window is an integer multiple of 2^-K, so every
 * partial sum of the window score's fold is one too, below 2^(53-K)
 * (the sums are below 2^53), and is exact in a double: the fold never
 * rounds and the window score is exactly sum * 2^-K. The pooled score of
 * a rank is then exactly its window max of sums times 2^-K, so the
 * victims are the `needed` least (window max, rank) pairs, with no bound,
 * no exact score and no limit on ties. The heap keeps one pair more when
 * there is one: the runner-up, the next scan's seed. pooled, when not
 * NULL, gets each victim's pooled score beside its rank. */
int pb__filter_select_exact(pb__window *p, size_t evictable, size_t needed,
                            size_t *ranks, double *pooled) {
    const size_t keep = needed < evictable ? needed + 1u : needed;
    pb__filter_scan(p, evictable, keep, -1.0, 1);
    struct pb__candidate *heap = p->cands;
    size_t n = keep;
    p->seed_col = SIZE_MAX;
    if (keep > needed) { /* the top is the runner-up */
        p->seed_col = pb__ring_column_of(p->holes, p->n_holes, heap[0].rank);
        heap[0] = heap[--n];
        pb__cand_sift_down(heap, n, 0u);
    }
    if (pooled == NULL) {
        for (size_t k = 0; k < needed; ++k) ranks[k] = heap[k].rank;
        pb__sort_ranks(ranks, needed);
        return 1;
    }
    /* With the pooled scores: each is its window max times 2^-K exactly
     * (a power of two), kept beside its rank through an insertion sort
     * by rank. */
    for (size_t k = 0; k < needed; ++k) {
        const size_t r = heap[k].rank;
        const double v = heap[k].value / p->q_scale;
        size_t u = k;
        while (u > 0u && ranks[u - 1u] > r) {
            ranks[u] = ranks[u - 1u];
            pooled[u] = pooled[u - 1u];
            --u;
        }
        ranks[u] = r;
        pooled[u] = v;
    }
    return 1;
}
