/*
 * source_internal.h - the state of the scorers other than the window
 * (cumulative, last, votes, none: their table entries, layout and peek in
 * source_scorers.c, their scores and evicts in score_sources.c), private
 * to those files and the white-box tests. Not installed.
 *
 * Such an instance keeps pos[] dense (no holes, no lazy state, column ==
 * rank) and one score per rank in `source`, beside pos[] in rank order.
 */
#ifndef PB_SRC_SOURCE_INTERNAL_H
#define PB_SRC_SOURCE_INTERNAL_H

#include "policy_internal.h"

typedef struct pb__source {
    pb_kvcache c;         /* the common part (first: an instance is this) */
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
    size_t bar_n;         /* votes: the held count bar is for (0: none
                             yet) */
    float bar;            /* votes: the vote's bar for bar_n held
                             (score_sources.c, vote_bar) */
    uint32_t gap;         /* votes: steps with weights since reset,
                             saturating (no vote is above it) */
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
} pb__source;

/* The state of an instance whose scorer is not the window. */
static inline pb__source *pb__source_of(pb_kvcache *p) {
    assert(p->ops != &pb__window_ops);
    return (pb__source *)(void *)p;
}

/* The operations of these scorers (pb__scorer_ops), shared by the four
 * entries of source_scorers.c: score_sources.c. */
void pb__source_reset(pb_kvcache *p);
pb_status pb__source_observe(pb_kvcache *p, uint32_t pos, const float *attn,
                             size_t attn_len, unsigned flags);
void pb__source_evict(pb_kvcache *p, size_t first, size_t end, size_t needed,
                      uint32_t *victims);
double pb__source_score(const pb_kvcache *p, size_t rank);

#endif /* PB_SRC_SOURCE_INTERNAL_H */
