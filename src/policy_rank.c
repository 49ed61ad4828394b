/*
 * policy_rank.c - the one query of an instance's internal state that the
 * runtime helpers need: the rank of a position in the held order, for the
 * slot indices of pb_kvcache_evict_slots. It reads pos[] and the holes
 * the instance's scorer reports (policy_internal.h) and changes nothing.
 */
#include "scorer_ops.h"
#include "runtime_internal.h"

size_t pb__kvcache_rank_below(const pb_kvcache *p, uint32_t pos) {
    /* The columns below the first at least pos, less the holes among
     * them (a hole keeps its old position but is not held). */
    const pb__holes h = pb__holes_of(p);
    const size_t col = pb__column_at_least(p, h, pos);
    return col - pb__holes_below(h, col);
}
