/*
 * hardening_state.c - capture and comparison of an instance's observable
 * state (see the header). Only public functions are used, so the capture is
 * exactly what a caller could notice.
 */
#include "hardening_state.h"

#include <string.h>

int hs_capture(const pb_kvcache *policy, hs_state *s) {
    /* Zeroed first so that the unused tails compare equal. */
    memset(s, 0, sizeof *s);
    s->kept = pb_kvcache_kept_count(policy);
    s->capacity = pb_kvcache_capacity(policy);
    s->memory = pb_kvcache_memory_bytes(policy);
    s->effective = pb_kvcache_effective_budget(policy);
    s->sinks = pb_kvcache_sink_count(policy);
    if (s->kept > HS_MAX_HELD) return -1;
    size_t n = 0;
    if (pb_kvcache_kept_positions(policy, s->pos, HS_MAX_HELD, &n) != PB_OK ||
        n != s->kept)
        return -1;
    for (size_t i = 0; i < n; ++i)
        if (pb_kvcache_score(policy, s->pos[i], &s->score[i]) != PB_OK)
            return -1;
    return 0;
}

int hs_equal(const hs_state *a, const hs_state *b) {
    return a->kept == b->kept && a->capacity == b->capacity &&
           a->memory == b->memory && a->effective == b->effective &&
           a->sinks == b->sinks &&
           memcmp(a->pos, b->pos, sizeof a->pos) == 0 &&
           memcmp(a->score, b->score, sizeof a->score) == 0;
}
