/*
 * score_votes.c - the votes scorer (Scissorhands): a position's score is
 * a uint32, the steps whose weight was strictly above that step's fair
 * share 1.0 / (double)attn_len, saturating at UINT32_MAX (which no real
 * run reaches). The step checks the weights as it counts (one read of the
 * row) and takes its votes back on a bad one, as long as no vote can
 * saturate (gap, the steps counted, below UINT32_MAX); after that the
 * door checks first. Votes only grow, so the least of a range is found
 * through the lower bounds by blocks of ranks (source_internal.h). The
 * rest is the score sources' shared engine.
 */
#include <stdint.h>
#include <string.h>

#include "source_internal.h"

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

/* Takes back the votes of a step whose weights held a bad one. No vote
 * saturated in that step (self_checks: each is at most
 * gap < UINT32_MAX), so each went up by exactly (w > bar). */
static void undo_votes(uint32_t *v, const float *attn, size_t n, float bar) {
    for (size_t i = 0; i < n; ++i) v[i] -= (uint32_t)(attn[i] > bar);
}

static unsigned votes_update(pb__source *p, const float *attn, size_t n,
                             size_t lo, size_t hi, uint64_t *least,
                             size_t *at) {
    pb__votes *const vs = (pb__votes *)(void *)p;
    uint32_t *v = p->source;
    if (vs->bar_n != n) { /* a division: not at every step */
        vs->bar = vote_bar(n);
        vs->bar_n = n;
    }
    const float bar = vs->bar;
    unsigned bad = 0u;
    p->c.k->votes(v, attn, n, bar, &bad);
    if (bad) {
        undo_votes(v, attn, n, bar);
        return bad;
    }
    if (at != NULL) {
        *at = lo;
        *least = hi > lo ? pb__source_least_in_bounds(p, n, lo, hi, at, 0)
                         : (uint64_t)UINT32_MAX;
    }
    if (vs->gap < UINT32_MAX) {
        vs->gap += 1u;
        p->c.self_checks = vs->gap < UINT32_MAX;
    }
    return 0u;
}

static double votes_score(const pb__source *p, size_t rank) {
    return (double)((const uint32_t *)p->source)[rank];
}

static void votes_reset(pb__source *p) {
    pb__votes *const vs = (pb__votes *)(void *)p;
    vs->bar_n = 0u;
    vs->gap = 0u;
}

_Static_assert(sizeof(pb__votes) <= PB__STATE_BYTES,
               "the votes scorer's state fits its reserve");

static const pb__source_kind votes_kind = {
    .per = sizeof(uint32_t),
    .self_checks = 1,
    .update = votes_update,
    .score = votes_score,
    .reset = votes_reset,
};

PB__SOURCE_ENTRY(pb__votes_ops, "votes", votes_kind, NULL)
