/*
 * score_last.c - the last scorer (TOVA): a position's score is the weight
 * it received at the latest observed step, kept as the float's bits (-0.0
 * as +0.0, its equal), which order as the values do. A step observes
 * every held position, so the positions not observed yet are always the
 * newest ones, admitted since the last observed step; they are never
 * victims. The step writes its records to a spare array, checking the
 * weights as it reads them and finding the least record of the range on
 * the way (a kernel of simd_kernels.c), and the two arrays swap only when
 * no weight was bad. Its arrays have room before their start (a
 * sixteenth of the capacity) so a victim's gap closes from the shorter
 * side: its victims lie anywhere. The rest is the score sources' shared
 * engine.
 */
#include <stdint.h>
#include <string.h>

#include "source_internal.h"

static unsigned last_update(pb__source *p, const float *attn, size_t n,
                            size_t lo, size_t hi, uint64_t *least,
                            size_t *at) {
    unsigned bad = 0u;
    *least = p->c.k->record_least(p->source_spare, attn, lo, hi, n, at, &bad);
    if (bad) return bad;
    void *t = p->source; /* the new records become the scores */
    p->source = p->source_spare;
    p->source_spare = t;
    ((pb__last *)(void *)p)->unobserved = 0u; /* every held one observed */
    return 0u;
}

/* Position 0, held after a reset, has not been observed. */
static void last_reset(pb__source *p) {
    ((pb__last *)(void *)p)->unobserved = 1u;
}

/* Nor has a position just admitted. */
static void last_admit(pb__source *p) {
    ((pb__last *)(void *)p)->unobserved += 1u;
}

/* The door's protection of them (pb__scorer_ops.unobserved). */
static size_t last_unobserved(const pb_kvcache *p) {
    return ((const pb__last *)(const void *)p)->unobserved;
}

/* -1.0 while not observed. */
static double last_score(const pb__source *p, size_t rank) {
    if (rank >= p->c.kept - ((const pb__last *)(const void *)p)->unobserved)
        return -1.0;
    float f;
    memcpy(&f, (const uint32_t *)p->source + rank, sizeof f);
    return (double)f;
}

_Static_assert(sizeof(pb__last) <= PB__STATE_BYTES,
               "the last scorer's state fits its reserve");

static const pb__source_kind last_kind = {
    .per = sizeof(uint32_t),
    .spare = 1,
    .slack_div = 16u,
    .protects_unobserved = 1,
    .self_checks = 1,
    .update = last_update,
    .score = last_score,
    .reset = last_reset,
    .admit = last_admit,
};

PB__SOURCE_ENTRY(pb__last_ops, "last", last_kind, last_unobserved)
