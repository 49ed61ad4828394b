/*
 * score_sources.c - the scores of the scorers other than the window
 * (docs/spec.md §13), and their evicts.
 *
 * One engine, one more axis: where the window scorer keeps an observation
 * ring and pools its sums, these keep one number per held position, in
 * rank order beside pos[]:
 *   - cumulative (H2O): a double, the attention received since admission,
 *     each step adding (double)attn[i] in index order;
 *   - last (TOVA): the bits of the float received at the latest observed
 *     step (-0.0 stored as +0.0, its equal). A step observes every held
 *     position, so the positions not observed yet are always the newest
 *     ones, admitted since the last observed step: a count says which;
 *   - votes (Scissorhands): a uint32, the steps whose weight was strictly
 *     above that step's fair share 1.0 / (double)attn_len (saturating at
 *     UINT32_MAX, which no real run reaches);
 *   - none (recency): nothing; the oldest evictable position goes first.
 * Selection is the radix cut of selection.c over the evictable range, and
 * one in-place pass reports the victims and closes the gaps, so nothing is
 * allocated and no scratch array is needed. An evict of one victim (after
 * every step) takes the first rank holding the least score instead; while
 * evicts go one victim at a time, each observe finds that rank as it
 * updates the scores (last: the kernel of simd_kernels.c; cumulative and
 * votes: through bounds per block of ranks, below), and the evict
 * uses it when its evictable range is the one the observe assumed.
 *
 * It validates nothing but the weights of the last and votes scorers,
 * which it checks in the pass that updates the scores (one read of a row
 * that usually comes from beyond the L1 cache) and undoes on a bad one
 * (the doors in policy.c check everything else, and these weights where
 * self_checks is 0, before any write). It knows nothing
 * of the ring, pooling or holes.
 */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "source_internal.h"

/* Moves pos[] and the score arrays (the spare too: its contents are dead)
 * by `by` ranks, up (> 0) or down, with the ranks 0 .. count-1 that
 * live. */
static void shift_arrays(pb__source *p, ptrdiff_t by, size_t count) {
    const size_t per = p->per;
    memmove(p->c.pos + by, p->c.pos, count * sizeof *p->c.pos);
    p->c.pos += by;
    if (per != 0u) {
        unsigned char *s = p->source;
        memmove(s + by * (ptrdiff_t)per, s, count * per);
        p->source = s + by * (ptrdiff_t)per;
    }
    if (p->source_spare != NULL)
        p->source_spare = (unsigned char *)p->source_spare +
                          by * (ptrdiff_t)per;
    p->source_shift = (size_t)((ptrdiff_t)p->source_shift + by);
}

/* The cumulative and votes scorers' bounds: for each block of
 * 2^bounds_shift ranks (32, or more where the capacity needs more than
 * the histogram holds), a lower bound of the scores its held ranks have
 * (a double's bit pattern, or a vote), kept in the selection histogram's
 * memory, which only an evict of several victims uses (and that drops
 * them). A step only raises these scores (weights are >= +0, votes only
 * grow, and a step refused for a bad weight leaves them as they were), so
 * a bound stays a bound; an admission brings a 0; closing a victim's gap
 * moves one rank of each later block into the block before it, whose
 * bound becomes the lower of its own and that rank's score. An observe
 * that wants the least then computes it only in the blocks whose bound
 * does not exceed the least found so far, the newest first: in a decode,
 * where the least is nearly always among the newest evictable ranks, one
 * or two blocks of the range (blocks of 32 measured faster than 16 or
 * 64). A floor of the bounds of the blocks before the range's newest
 * block (bounds_floor, lowered with them, made anew by a walk it did not
 * end) ends that walk as soon as it is above the least found so far: in
 * a decode, after the newest block alone. */
#define PB__BOUND_MIN_SHIFT 5u
#define PB__BOUND_BLOCKS (PB__HIST_BINS * sizeof(size_t) / sizeof(uint64_t))

static uint64_t *bounds(const pb__source *p) {
    return (uint64_t *)(void *)p->hist;
}

/* Rank n, admitted with score 0, lowers its block's bound to 0 (and the
 * floor, if the floor covers that block). */
static void bound_zero(pb__source *p, size_t n) {
    const size_t b = n >> p->bounds_shift;
    bounds(p)[b] = 0u;
    if (b < p->bounds_floor_end) p->bounds_floor = 0u;
}

void pb__source_reset(pb_kvcache *inst) {
    pb__source *p = pb__source_of(inst);
    shift_arrays(p, -(ptrdiff_t)p->source_shift, 0u);
    unsigned shift = PB__BOUND_MIN_SHIFT;
    while (((p->c.capacity - 1u) >> shift) >= PB__BOUND_BLOCKS) ++shift;
    p->bounds_shift = shift;
    p->bounds_ok = 0;
    p->bar_n = 0u;
    /* No weight is too large to quantise here (nothing is quantised), so
     * the observe's weight check looks for bad weights only. */
    p->c.q_limit_bits = UINT32_MAX;
    p->c.fresh = 1;
    p->least_ok = 0;
    p->least_wanted = 0;
    p->gap = 0u;
    /* The last scorer checks every step's weights as it reads them, the
     * votes scorer while no vote can saturate (see undo_votes). */
    p->c.self_checks = p->c.cfg.scorer == (uint32_t)PB_SCORER_LAST ||
                       p->c.cfg.scorer == (uint32_t)PB_SCORER_VOTES;
    p->c.kept = 1u;
    p->c.sinks_kept = p->c.cfg.sinks != 0u; /* position 0 */
    p->c.pos[0] = 0u;
    /* Only the last scorer spares what it has not observed, position 0
     * among them. */
    p->c.unobserved = p->c.cfg.scorer == (uint32_t)PB_SCORER_LAST ? 1u : 0u;
    switch (p->c.cfg.scorer) {
    case PB_SCORER_CUMULATIVE: ((double *)p->source)[0] = 0.0; break;
    case PB_SCORER_LAST:
    case PB_SCORER_VOTES: ((uint32_t *)p->source)[0] = 0u; break;
    default: break;
    }
}

/* The largest float not above 1.0 / (double)n, n > 0: for a float w,
 * (double)w > 1.0 / (double)n exactly when w > bar (no float lies
 * strictly between bar and 1.0 / n, and the next float above bar is
 * above 1.0 / n), so the vote needs no conversion to double. */
static float vote_bar(size_t n) {
    const double share = 1.0 / (double)n;
    float bar = (float)share;
    if ((double)bar > share) { /* rounded up: the float just below */
        uint32_t b;
        memcpy(&b, &bar, sizeof b);
        b -= 1u;
        memcpy(&bar, &b, sizeof bar);
    }
    return bar;
}

/* The evictable ranks [*first, *end) of the instance after pos is
 * admitted, as pb_kvcache_evict will compute them (no protection by
 * budget: that is the caller's). */
static void range_after(const pb__source *p, uint32_t pos, size_t *first,
                        size_t *end) {
    const size_t kept = p->c.kept + 1u;
    const size_t window = (size_t)p->c.cfg.params.recent_window;
    size_t recent = window < kept ? window : kept;
    /* After a step with weights only pos is unobserved. */
    if (p->c.cfg.scorer == (uint32_t)PB_SCORER_LAST && recent < 1u) recent = 1u;
    *end = kept - recent;
    const size_t sinks = p->c.sinks_kept + (pos < p->c.cfg.sinks);
    *first = sinks < *end ? sinks : *end;
}

/* Takes back the votes of a step whose weights held a bad one. No vote
 * saturated in that step (self_checks: each is at most
 * gap < UINT32_MAX), so each went up by exactly (w > bar). */
static void undo_votes(uint32_t *v, const float *attn, size_t n, float bar) {
    for (size_t i = 0; i < n; ++i) v[i] -= (uint32_t)(attn[i] > bar);
}

/* The least score of ranks from .. from+len-1 (len >= 1; a double's bit
 * pattern, or a vote) and, with at not NULL, the first of them holding it
 * (*at, from `from`). */
PB__ALWAYS_INLINE uint64_t block_least(const pb__source *p, size_t from,
                                        size_t len, size_t *at) {
    if (len <= 8u) { /* a short block: no kernel call */
        uint64_t m = UINT64_MAX;
        size_t r = 0;
        for (size_t i = 0; i < len; ++i) {
            uint64_t b;
            if (p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE)
                memcpy(&b, (const double *)p->source + from + i, sizeof b);
            else
                b = ((const uint32_t *)p->source)[from + i];
            if (b < m) {
                m = b;
                r = i;
            }
        }
        if (at != NULL) *at = r;
        return m;
    }
    if (p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE)
        return p->c.k->least_bits((const double *)p->source + from, len, at);
    return p->c.k->least_u32((const uint32_t *)p->source + from, len, at);
}

/* The least score (a double's bit pattern, or a vote) among ranks lo ..
 * hi-1 (lo < hi <= n, the scores of ranks 0 .. n-1 updated) and the first
 * rank holding it (*at), through the cumulative or votes scorer's bounds
 * (made first if they are not there). */
PB__ALWAYS_INLINE uint64_t least_in_bounds(pb__source *p, size_t n,
                                            size_t lo, size_t hi,
                                            size_t *at) {
    uint64_t *lb = bounds(p);
    const unsigned shift = p->bounds_shift;
    const size_t width = (size_t)1 << shift;
    if (!p->bounds_ok) {
        for (size_t b = 0; (b << shift) < n; ++b) {
            const size_t start = b << shift;
            lb[b] = block_least(p, start,
                                n - start < width ? n - start : width, NULL);
        }
        p->bounds_ok = 1;
        p->bounds_floor = UINT64_MAX;
        p->bounds_floor_end = 0u;
    }
    const size_t top = (hi - 1u) >> shift; /* the range's newest block */
    uint64_t best = UINT64_MAX;
    size_t found = lo;
    int floored = 0;
    for (size_t b = top + 1u; b-- > (lo >> shift);) {
        if (b < p->bounds_floor_end && p->bounds_floor > best) {
            floored = 1; /* no score before block b + 1 is at or below */
            break;
        }
        if (lb[b] > best) continue; /* no score there is at or below best */
        const size_t start = b << shift;
        const size_t end = n - start < width ? n : start + width;
        const size_t from = start > lo ? start : lo;
        const size_t to = end < hi ? end : hi;
        uint64_t m;
        size_t r = 0;
        if (to < end) {
            /* The block of the recent window's first ranks (they move
             * into the range as victims go): its bound stays as it was,
             * which an admission or a merge soon lowers again anyway. */
            m = block_least(p, from, to - from, &r);
        } else {
            const uint64_t all =
                block_least(p, start, end - start, from == start ? &r : NULL);
            lb[b] = all; /* exact now */
            if (all > best) continue;
            m = from == start ? all : block_least(p, from, to - from, &r);
        }
        if (m > best) continue; /* on a tie the earlier block wins */
        found = from + r;
        best = m;
    }
    /* The floor then covers the blocks before top again: extended over
     * the blocks the range gained, or made anew after a walk it did not
     * end (which left the bounds it passed exact). */
    if (!floored || p->bounds_floor_end < top) {
        size_t b = floored ? p->bounds_floor_end : 0u;
        uint64_t f = floored ? p->bounds_floor : UINT64_MAX;
        for (; b < top; ++b) f = lb[b] < f ? lb[b] : f;
        p->bounds_floor = f;
        p->bounds_floor_end = top;
    }
    *at = found;
    return best;
}

/* The update of the scores of ranks 0 .. n-1 by a step's weights, and
 * when `at` is not NULL the least new score among ranks lo .. hi-1 (in
 * *least) and the first rank holding it (in *at; lo <= hi <= n). The last
 * scorer's record goes to the spare array, made the scores by the caller.
 * Returns PB__WEIGHT_BAD where the scorer checks the weights and one was
 * bad (the votes then taken back, the records not swapped in). */
static unsigned update_scores(pb__source *p, const float *attn, size_t n,
                              size_t lo, size_t hi, uint64_t *least,
                              size_t *at) {
    const pb__kernels *k = p->c.k;
    unsigned bad = 0u;
    switch (p->c.cfg.scorer) {
    case PB_SCORER_CUMULATIVE:
        /* The door checked the weights. */
        k->add_weights(p->source, attn, n);
        if (at != NULL) {
            *at = lo;
            *least = hi > lo ? least_in_bounds(p, n, lo, hi, at)
                             : (uint64_t)INT64_MAX;
        }
        break;
    case PB_SCORER_LAST:
        *least = k->record_least(p->source_spare, attn, lo, hi, n, at, &bad);
        break;
    default: { /* votes: their least through the bounds, as cumulative */
        uint32_t *v = p->source;
        if (p->bar_n != n) { /* a division: not at every step */
            p->bar = vote_bar(n);
            p->bar_n = n;
        }
        const float bar = p->bar;
        k->votes(v, attn, n, bar, &bad);
        if (bad) {
            undo_votes(v, attn, n, bar);
        } else if (at != NULL) {
            *at = lo;
            *least = hi > lo ? least_in_bounds(p, n, lo, hi, at)
                             : (uint64_t)UINT32_MAX;
        }
        break;
    }
    }
    return bad;
}

pb_status pb__source_observe(pb_kvcache *inst, uint32_t pos,
                             const float *attn, size_t attn_len,
                             unsigned flags) {
    pb__source *p = pb__source_of(inst);
    (void)flags; /* nothing is quantised */
    const size_t n = p->c.kept;
    assert(attn == NULL || attn_len == n);
    assert(n < p->c.capacity);
    (void)attn_len;
    const uint32_t scorer = p->c.cfg.scorer;
    int least_ok = 0; /* set when the weights are known to be good */
    if (attn != NULL && n > 0u && scorer != (uint32_t)PB_SCORER_NONE) {
        /* While evicts take one victim at a time, the least new score of
         * the ranks the next evict will choose from, found on the way. */
        const int find = p->least_wanted;
        size_t first = 0, end = 0, lo = 0, hi = n, at = 0;
        uint64_t least = 0u;
        if (find) {
            range_after(p, pos, &first, &end);
            /* Ranks first .. hi-1 exist now; rank n (pos, score 0) is
             * evictable too when end is n + 1 (no recent window). */
            hi = end < n ? end : n;
            lo = first < hi ? first : hi;
        }
        if (update_scores(p, attn, n, lo, hi, &least, find ? &at : NULL))
            return PB_ERR_WEIGHT;
        if (scorer == (uint32_t)PB_SCORER_LAST) {
            void *t = p->source;
            p->source = p->source_spare;
            p->source_spare = t;
            p->c.unobserved = 0u;
        }
        if (scorer == (uint32_t)PB_SCORER_VOTES && p->gap < UINT32_MAX) {
            p->gap += 1u;
            p->c.self_checks = p->gap < UINT32_MAX;
        }
        if (find) {
            if (end > n && (hi == lo || least != 0u)) {
                /* The admitted position's score, 0, is the least only if
                 * no earlier rank holds 0 too. */
                least = 0u;
                at = n;
            }
            p->least = least;
            p->least_at = at;
            p->least_first = first;
            p->least_end = end;
            least_ok = first < end;
        }
    }
    p->least_ok = least_ok;
    switch (scorer) {
    case PB_SCORER_CUMULATIVE:
        ((double *)p->source)[n] = 0.0;
        if (p->bounds_ok) bound_zero(p, n);
        break;
    case PB_SCORER_LAST:
        ((uint32_t *)p->source)[n] = 0u;
        p->c.unobserved += 1u;
        break;
    case PB_SCORER_VOTES:
        ((uint32_t *)p->source)[n] = 0u;
        if (p->bounds_ok) bound_zero(p, n);
        break;
    default: break;
    }
    p->c.pos[n] = pos;
    p->c.kept = n + 1u;
    p->c.sinks_kept += pos < p->c.cfg.sinks;
    return PB_OK;
}

/* Moves ranks from .. kept-1 of pos[] and of the scores to start at rank
 * `to` (to <= from). */
static void close_tail(pb__source *p, size_t from, size_t to) {
    const size_t count = p->c.kept - from;
    memmove(p->c.pos + to, p->c.pos + from, count * sizeof *p->c.pos);
    const size_t per = p->per;
    if (per != 0u) {
        unsigned char *s = p->source;
        memmove(s + to * per, s + from * per, count * per);
    }
}

/* Drops rank r of pos[] and of the scores, moving the shorter side: the
 * ranks before it up by one where the arrays have room before their
 * start (making room, by moving every rank back to the start, when that
 * is used up), else the ranks after it down. */
static void close_rank(pb__source *p, size_t r) {
    const size_t after = p->c.kept - r - 1u;
    const size_t slack = p->slack;
    if (r < after && slack > 0u) {
        if (p->source_shift == slack)
            shift_arrays(p, -(ptrdiff_t)slack, p->c.kept);
        shift_arrays(p, 1, r);
        return;
    }
    close_tail(p, r + 1u, r);
    if (p->bounds_ok) {
        /* Each later block's first rank moves down to the end of the
         * block before it: that block's bound takes its score. */
        uint64_t *lb = bounds(p);
        const unsigned shift = p->bounds_shift;
        const int wide = p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE;
        for (size_t b = r >> shift; b < (p->c.kept - 1u) >> shift; ++b) {
            const size_t moved = ((b + 1u) << shift) - 1u;
            uint64_t key;
            if (wide)
                memcpy(&key, (const double *)p->source + moved, sizeof key);
            else
                key = ((const uint32_t *)p->source)[moved];
            lb[b] = key < lb[b] ? key : lb[b];
            if (b < p->bounds_floor_end && key < p->bounds_floor)
                p->bounds_floor = key;
        }
    }
}

void pb__source_evict(pb_kvcache *inst, size_t first, size_t end,
                      size_t needed, uint32_t *victims) {
    pb__source *p = pb__source_of(inst);
    assert(first <= end && end <= p->c.kept && needed <= end - first);
    assert(needed > 0u);
    /* The scores are about to move; the observes look for the least
     * again only while evicts take one victim at a time. */
    const int known = p->least_ok && p->least_first == first &&
                      p->least_end == end;
    p->least_ok = 0;
    p->least_wanted = needed == 1u;
    if (p->c.cfg.scorer == (uint32_t)PB_SCORER_NONE) {
        memcpy(victims, p->c.pos + first, needed * sizeof *victims);
        close_tail(p, first + needed, first);
        p->c.kept -= needed;
        return;
    }
    if (needed == 1u) {
        /* One victim (an evict after every step): the first lowest key,
         * which is what the cut would take: the least key in one
         * vectorised pass, then the first rank holding it. */
        size_t best;
        if (known) {
            best = p->least_at;
        } else if (p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE) {
            const double *s = (const double *)p->source + first;
            size_t r = 0;
            (void)p->c.k->least_bits(s, end - first, &r);
            best = first + r;
        } else {
            const uint32_t *s = (const uint32_t *)p->source + first;
            size_t r = 0;
            (void)p->c.k->least_u32(s, end - first, &r);
            best = first + r;
        }
        assert(best < end);
        victims[0] = p->c.pos[best];
        close_rank(p, best);
        p->c.kept -= 1u;
        return;
    }
    pb__cut cut;
    p->bounds_ok = 0; /* the cut's histogram is their memory */
    if (p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE)
        pb__select_lowest((const double *)p->source + first, end - first,
                          needed, p->hist, &cut);
    else
        pb__select_lowest_u32((const uint32_t *)p->source + first,
                              end - first, needed, p->hist, &cut);

    /* One pass over the evictable ranks in order: victims out (ascending,
     * ties to the lower rank by the cut), survivors moved down in place. */
    size_t w = first, nv = 0;
    if (p->c.cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE) {
        double *s = p->source;
        for (size_t i = first; i < end; ++i) {
            if (pb__cut_takes(&cut, pb__key_bits(s[i]))) {
                victims[nv++] = p->c.pos[i];
            } else {
                p->c.pos[w] = p->c.pos[i];
                s[w++] = s[i];
            }
        }
    } else {
        uint32_t *s = p->source;
        for (size_t i = first; i < end; ++i) {
            if (pb__cut_takes(&cut, (uint64_t)s[i])) {
                victims[nv++] = p->c.pos[i];
            } else {
                p->c.pos[w] = p->c.pos[i];
                s[w++] = s[i];
            }
        }
    }
    assert(nv == needed);
    (void)nv;
    close_tail(p, end, w);
    p->c.kept -= needed;
}

double pb__source_score(const pb_kvcache *inst, size_t rank) {
    const pb__source *p = (const pb__source *)(const void *)inst;
    assert(rank < p->c.kept);
    switch (p->c.cfg.scorer) {
    case PB_SCORER_CUMULATIVE: return ((const double *)p->source)[rank];
    case PB_SCORER_LAST: {
        if (rank >= p->c.kept - p->c.unobserved) return -1.0;
        float f;
        memcpy(&f, (const uint32_t *)p->source + rank, sizeof f);
        return (double)f;
    }
    case PB_SCORER_VOTES: return (double)((const uint32_t *)p->source)[rank];
    default: return 0.0;
    }
}
