/*
 * source_internal.h - the state of the scorers other than the window, the
 * score sources (cumulative, last, votes, none), and what one tells the
 * engine they share: each scorer's file defines its kind (the width of a
 * score, its update and its value) and its table entry; the shared
 * engine is score_sources.c (scores kept, evicts) and source_scorers.c
 * (layout, set-up, peek). A new score source is a new file and a line in
 * the table of scorer_table.c. Private to these files and the white-box
 * tests. Not installed.
 *
 * Such an instance keeps pos[] dense (no holes, no lazy state, column ==
 * rank) and one score per rank in `source`, beside pos[] in rank order.
 */
#ifndef PB_SRC_SOURCE_INTERNAL_H
#define PB_SRC_SOURCE_INTERNAL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scorer_ops.h"
#include "selection.h"

typedef struct pb__source pb__source;

/*
 * What tells one score source from another: its file (score_cumulative.c,
 * score_last.c, score_votes.c, score_none.c) defines one of these and its
 * table entry (PB__SOURCE_ENTRY); the engine of score_sources.c and
 * source_scorers.c reads nothing else of the scorer.
 */
typedef struct pb__source_kind {
    size_t per;           /* bytes of one score: a double (8, its bit
                             pattern the key), a uint32 (4) or none (0: the
                             oldest evictable goes first) */
    int spare;            /* a second score array, which the update writes
                             and the observe swaps in */
    unsigned slack_div;   /* room before the arrays' starts: capacity /
                             slack_div ranks (0: none) */
    int protects_unobserved; /* positions no step has observed yet are
                             never victims */
    int self_checks;      /* the update checks the weights (after reset) */
    /* The update of the scores of ranks 0 .. n-1 by a step's weights, and
     * when `at` is not NULL the least new score among ranks lo .. hi-1 (in
     * *least; a key as above) and the first rank holding it (in *at; lo <=
     * hi <= n). Returns PB__WEIGHT_BAD where the scorer checks the weights
     * and one was bad, the scores left as they were. NULL: no score. */
    unsigned (*update)(pb__source *p, const float *attn, size_t n,
                       size_t lo, size_t hi, uint64_t *least, size_t *at);
    /* The score pb_kvcache_score reports for held rank `rank`. */
    double (*score)(const pb__source *p, size_t rank);
    /* The scorer's own part of a reset (after the shared part), and of an
     * admission (after pos is held); NULL: none. */
    void (*reset)(pb__source *p);
    void (*admit)(pb__source *p);
} pb__source_kind;

struct pb__source {
    pb_kvcache c;         /* the common part (first: an instance is this) */
    const pb__source_kind *kind; /* the scorer's, chosen at create */
    size_t per;           /* bytes of one score: 8 (cumulative), 4 (last,
                             votes) or 0 (none) */
    size_t slack;         /* ranks of room before the arrays' starts (the
                             last scorer: score_sources.c, source_slack) */
    void *source;         /* one score per rank (double for cumulative, the
                             float bits of the record for last, uint32
                             votes), NULL for none */
    void *source_spare;   /* last scorer: a second array of records, where
                             a step writes its record before the two swap
                             (a bad weight found on the way leaves the
                             scores as they were); else NULL */
    size_t source_shift;  /* ranks pos[] and the score arrays have moved up
                             from their starts, at most slack, closing a
                             victim's gap from the shorter side */
    size_t *hist;         /* [PB__HIST_BINS] selection histogram, and the
                             cumulative and votes scorers' bounds (which a
                             selection drops); NULL for none */
    uint64_t least;       /* cumulative, last, votes: the least score (bit
                             pattern) among ranks least_first ..
                             least_end-1 and the first rank holding it,
                             least_at, found by the last observe while it
                             updated the scores; valid while least_ok */
    size_t least_first, least_end, least_at;
    int least_ok;
    int least_wanted;     /* the last evict chose one victim, so the
                             observes look for the least score */
    int bounds_ok;        /* cumulative and votes scorers: hist holds,
                             per block of 2^bounds_shift ranks, a lower
                             bound of the scores the block holds
                             (score_sources.c) */
    unsigned bounds_shift;
    uint64_t bounds_floor; /* while bounds_ok: at or below the bound of
                             every block before block bounds_floor_end
                             (UINT64_MAX when that is none) */
    size_t bounds_floor_end;
};

/* The state of an instance whose scorer is not the window. */
static inline pb__source *pb__source_of(pb_kvcache *p) {
    assert(p->ops != &pb__window_ops);
    return (pb__source *)(void *)p;
}

/* The last scorer's state (score_last.c): the shared part and the
 * positions it has not observed. Here for the white-box tests. */
typedef struct pb__last {
    pb__source s;
    size_t unobserved;    /* the newest positions protected because no
                             step has observed them */
} pb__last;

/* The votes scorer's state (score_votes.c). Here for the white-box
 * tests. */
typedef struct pb__votes {
    pb__source s;
    size_t bar_n;         /* the held count bar is for (0: none yet) */
    float bar;            /* the vote's bar for bar_n held (vote_bar) */
    uint32_t gap;         /* steps with weights since reset, saturating
                             (no vote is above it) */
} pb__votes;

static inline pb__votes *pb__votes_of(pb_kvcache *p) {
    assert(p->ops == &pb__votes_ops);
    return (pb__votes *)(void *)p;
}

/* ------------------------------------------------------------------------ */
/* Lower bounds of the scores by blocks of ranks                            */

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

static inline uint64_t *pb__source_bounds(const pb__source *p) {
    return (uint64_t *)(void *)p->hist;
}

/* The least score of ranks from .. from+len-1 (len >= 1; a double's bit
 * pattern when wide, else a uint32) and, with at not NULL, the first of
 * them holding it (*at, from `from`). */
PB__ALWAYS_INLINE uint64_t pb__source_block_least(const pb__source *p,
                                                  size_t from, size_t len,
                                                  size_t *at, int wide) {
    if (len <= 8u) { /* a short block: no kernel call */
        uint64_t m = UINT64_MAX;
        size_t r = 0;
        for (size_t i = 0; i < len; ++i) {
            uint64_t b;
            if (wide)
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
    if (wide)
        return p->c.k->least_bits((const double *)p->source + from, len, at);
    return p->c.k->least_u32((const uint32_t *)p->source + from, len, at);
}

/* The least score (a double's bit pattern when wide, else a uint32)
 * among ranks lo .. hi-1 (lo < hi <= n, the scores of ranks 0 .. n-1
 * updated) and the first rank holding it (*at), through the bounds (made
 * first if they are not there). A scorer whose scores only grow (the
 * cumulative and votes scorers) calls it from its update. */
PB__ALWAYS_INLINE uint64_t pb__source_least_in_bounds(pb__source *p,
                                                      size_t n, size_t lo,
                                                      size_t hi, size_t *at,
                                                      int wide) {
    uint64_t *lb = pb__source_bounds(p);
    const unsigned shift = p->bounds_shift;
    const size_t width = (size_t)1 << shift;
    if (!p->bounds_ok) {
        for (size_t b = 0; (b << shift) < n; ++b) {
            const size_t start = b << shift;
            lb[b] = pb__source_block_least(
                p, start, n - start < width ? n - start : width, NULL, wide);
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
            m = pb__source_block_least(p, from, to - from, &r, wide);
        } else {
            const uint64_t all = pb__source_block_least(
                p, start, end - start, from == start ? &r : NULL, wide);
            lb[b] = all; /* exact now */
            if (all > best) continue;
            m = from == start ? all
                              : pb__source_block_least(p, from, to - from,
                                                       &r, wide);
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

/* ------------------------------------------------------------------------ */
/* The operations every score source shares                                 */

/* The size and set-up of an instance of this kind (source_scorers.c). */
pb_status pb__source_size(const pb__config *cfg, const pb__source_kind *kind,
                          size_t *total);
void pb__source_init(pb_kvcache *p, const pb__source_kind *kind);
void pb__source_peek_lowest(const pb_kvcache *p, size_t first, size_t end,
                            size_t k, uint32_t *positions, double *scores,
                            void *work);
size_t pb__source_peek_work_bytes(const pb_kvcache *p);
/* Their lowest entry: the peek's answer, one key from the observe's hint
 * or one vectorised pass (source_scorers.c). */
void pb__source_lowest(pb_kvcache *p, size_t first, size_t end, size_t k,
                       uint32_t *positions, double *scores, void *work);

/* Reset, observe, evict (and of given ranks) and score of every score source
 * (score_sources.c). */
void pb__source_reset(pb_kvcache *p);
pb_status pb__source_observe(pb_kvcache *p, uint32_t pos, const float *attn,
                             size_t attn_len, unsigned flags);
void pb__source_evict(pb_kvcache *p, size_t first, size_t end, size_t needed,
                      uint32_t *victims);
void pb__source_evict_ranks(pb_kvcache *p, const size_t *ranks, size_t k,
                            uint32_t *victims);
double pb__source_score(const pb_kvcache *p, size_t rank);

/* The table entry `entry` of a score source whose kind is `kind` (a static
 * const pb__source_kind of the same file); `unobserved_fn` is its
 * pb__scorer_ops.unobserved (NULL: none). */
#define PB__SOURCE_ENTRY(entry, label, kind, unobserved_fn)                                   \
    static pb_status source_size_##entry(const pb__config *cfg,               \
                                        size_t *total) {                      \
        return pb__source_size(cfg, &(kind), total);                          \
    }                                                                         \
    static void source_init_##entry(pb_kvcache *p) {                          \
        pb__source_init(p, &(kind));                                          \
    }                                                                         \
    const pb__scorer_ops entry = {                                             \
        .name = label,                                                        \
        .size = source_size_##entry,                                           \
        .init = source_init_##entry,                                           \
        .reset = pb__source_reset,                                            \
        .observe = pb__source_observe,                                        \
        .evict = pb__source_evict,                                            \
        .evict_ranks = pb__source_evict_ranks,                                \
        .peek_lowest = pb__source_peek_lowest,                                \
        .peek_work_bytes = pb__source_peek_work_bytes,                        \
        .lowest = pb__source_lowest,                                          \
        .score = pb__source_score,                                            \
        .unobserved = (unobserved_fn),                                        \
    };

#endif /* PB_SRC_SOURCE_INTERNAL_H */
