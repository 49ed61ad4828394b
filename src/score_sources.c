/*
 * score_sources.c - the engine the score sources share (docs/spec.md §13):
 * where the window scorer keeps an observation ring and pools its sums,
 * these keep one number per held position (or none), in rank order beside
 * pos[], updated by each step through the scorer's kind (its file:
 * score_cumulative.c, score_last.c, score_votes.c, score_none.c) and
 * admitted at 0. It owns their reset, observe, evict and score.
 *
 * Selection is the radix cut of selection.c over the evictable range, and
 * one in-place pass reports the victims and closes the gaps, so nothing is
 * allocated and no scratch array is needed; a scorer without a score
 * gives up the oldest evictable positions. An evict of one victim (after
 * every step) takes the first rank holding the least score instead; while
 * evicts go one victim at a time, each observe has the scorer's update
 * find that rank as it updates the scores (last: the kernel of
 * simd_kernels.c; cumulative and votes: through the bounds per block of
 * ranks of source_internal.h), and the evict uses it when its evictable
 * range is the one the observe assumed.
 *
 * It validates nothing; a scorer whose kind says self_checks checks the
 * weights in the pass that updates the scores (one read of a row that
 * usually comes from beyond the L1 cache) and leaves them as they were on
 * a bad one (the doors in policy.c check everything else, and the weights
 * where self_checks is 0, before any write). It knows nothing of the
 * ring, pooling or holes.
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

/* Rank n, admitted with score 0, lowers its block's bound to 0 (and the
 * floor, if the floor covers that block). */
static void bound_zero(pb__source *p, size_t n) {
    const size_t b = n >> p->bounds_shift;
    pb__source_bounds(p)[b] = 0u;
    if (b < p->bounds_floor_end) p->bounds_floor = 0u;
}

void pb__source_reset(pb_kvcache *inst) {
    pb__source *p = pb__source_of(inst);
    shift_arrays(p, -(ptrdiff_t)p->source_shift, 0u);
    unsigned shift = PB__BOUND_MIN_SHIFT;
    while (((p->c.capacity - 1u) >> shift) >= PB__BOUND_BLOCKS) ++shift;
    p->bounds_shift = shift;
    p->bounds_ok = 0;
    /* No weight is too large to quantise here (nothing is quantised), so
     * the observe's weight check looks for bad weights only. */
    p->c.q_limit_bits = UINT32_MAX;
    p->c.fresh = 1;
    p->least_ok = 0;
    p->least_wanted = 0;
    /* The last scorer checks every step's weights as it reads them, the
     * votes scorer while no vote can saturate (score_votes.c). */
    p->c.self_checks = p->kind->self_checks;
    p->c.kept = 1u;
    p->c.sinks_kept = p->c.cfg.sinks != 0u; /* position 0 */
    p->c.pos[0] = 0u;
    if (p->per != 0u) memset(p->source, 0, p->per); /* 0.0 or 0 */
    if (p->kind->reset != NULL) p->kind->reset(p);
}

/* The evictable ranks [*first, *end) of the instance after pos is
 * admitted, as pb_kvcache_evict will compute them (no protection by
 * budget: that is the caller's). */
static void range_after(const pb__source *p, uint32_t pos, size_t *first,
                        size_t *end) {
    const size_t kept = p->c.kept + 1u;
    const size_t window = (size_t)p->c.cfg.recent_window;
    size_t recent = window < kept ? window : kept;
    /* After a step with weights only pos is unobserved. */
    if (p->kind->protects_unobserved && recent < 1u) recent = 1u;
    *end = kept - recent;
    const size_t sinks = p->c.sinks_kept + (pos < p->c.cfg.sinks);
    *first = sinks < *end ? sinks : *end;
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
    const pb__source_kind *kind = p->kind;
    int least_ok = 0; /* set when the weights are known to be good */
    if (attn != NULL && n > 0u && kind->update != NULL) {
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
        if (kind->update(p, attn, n, lo, hi, &least, find ? &at : NULL))
            return PB_ERR_WEIGHT;
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
    /* The admitted position's score is 0 (0.0 for a double). */
    if (p->per == sizeof(double))
        ((double *)p->source)[n] = 0.0;
    else if (p->per == sizeof(uint32_t))
        ((uint32_t *)p->source)[n] = 0u;
    if (p->bounds_ok) bound_zero(p, n);
    p->c.pos[n] = pos;
    p->c.kept = n + 1u;
    p->c.sinks_kept += pos < p->c.cfg.sinks;
    if (kind->admit != NULL) kind->admit(p);
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
        uint64_t *lb = pb__source_bounds(p);
        const unsigned shift = p->bounds_shift;
        const int wide = p->per == sizeof(double);
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
    if (p->per == 0u) { /* no score: the oldest go */
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
        } else if (p->per == sizeof(double)) {
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
    if (p->per == sizeof(double))
        pb__select_lowest((const double *)p->source + first, end - first,
                          needed, p->hist, &cut);
    else
        pb__select_lowest_u32((const uint32_t *)p->source + first,
                              end - first, needed, p->hist, &cut);

    /* One pass over the evictable ranks in order: victims out (ascending,
     * ties to the lower rank by the cut), survivors moved down in place. */
    size_t w = first, nv = 0;
    if (p->per == sizeof(double)) {
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

void pb__source_evict_ranks(pb_kvcache *inst, const size_t *ranks, size_t k,
                            uint32_t *victims) {
    pb__source *p = pb__source_of(inst);
    assert(k >= 1u && ranks[k - 1u] < p->c.kept);
    p->least_ok = 0;
    p->least_wanted = k == 1u;
    if (k == 1u && p->per != 0u) {
        /* One victim: the cheaper side moves, the bounds kept. */
        victims[0] = p->c.pos[ranks[0]];
        close_rank(p, ranks[0]);
        p->c.kept -= 1u;
        return;
    }
    p->bounds_ok = 0;
    /* One pass from the first victim: victims out, survivors moved down
     * in place, both in rank (= position) order. */
    const size_t per = p->per;
    unsigned char *s = p->source;
    size_t w = ranks[0], t = 0;
    for (size_t i = ranks[0]; i < p->c.kept; ++i) {
        if (t < k && ranks[t] == i) {
            victims[t++] = p->c.pos[i];
            continue;
        }
        p->c.pos[w] = p->c.pos[i];
        if (per != 0u) memmove(s + w * per, s + i * per, per);
        ++w;
    }
    assert(t == k);
    p->c.kept -= k;
}

double pb__source_score(const pb_kvcache *inst, size_t rank) {
    const pb__source *p = (const pb__source *)(const void *)inst;
    assert(rank < p->c.kept);
    return p->kind->score(p, rank);
}
