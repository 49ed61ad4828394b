/*
 * policy_rank.c - the one query of an instance's internal state that the
 * runtime helpers need: the rank of a position in the held order, for the
 * slot indices of pb_kvcache_evict_slots. It reads pos[] and the holes of
 * struct pb_kvcache (policy_internal.h) and changes nothing.
 */
#include "policy_internal.h"
#include "runtime_internal.h"

size_t pb__kvcache_rank_below(const pb_kvcache *p, uint32_t pos) {
    /* pos[] ascends over every column, holes included; a hole's column
     * keeps its old position but is not held. */
    const size_t n_cols = p->kept + p->n_holes;
    size_t lo = 0, hi = n_cols;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (p->pos[mid] < pos)
            lo = mid + 1u;
        else
            hi = mid;
    }
    /* lo columns hold positions below pos; take away the holes among
     * them (holes[] ascends). */
    size_t hl = 0, hh = p->n_holes;
    while (hl < hh) {
        const size_t mid = hl + (hh - hl) / 2u;
        if (p->holes[mid] < lo)
            hl = mid + 1u;
        else
            hh = mid;
    }
    return lo - hl;
}
