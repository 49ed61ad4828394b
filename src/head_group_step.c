/*
 * head_group_step.c - the layer group's one-call decode step
 * (pb_kvcache_group_step): the group observe, then the group evict, for a
 * caller (a binding, a runtime loop) whose per-call cost is fixed. It owns
 * only the order of the checks that make the two calls one: everything
 * the evict could refuse is checked before the observe changes anything.
 * The step itself is the group's own observe and evict (head_group.c), so
 * whatever those do, the step does.
 */
#include "head_group_internal.h"

#include "pyramidkv/pyramidkv.h"

/* The most victims an evict right after admitting one position on every
 * head can take: the group evict takes max(k, the heads' cap musts) at
 * most (pb__group_merge), k the layer's excess over its target. */
static uint64_t step_victim_bound(const pb_kvcache_group *g,
                                  uint64_t budget) {
    const uint32_t nh = g->num_heads;
    uint64_t held = 0u, musts = 0u;
    for (uint32_t h = 0; h < nh; h++) {
        const uint64_t kept = pb_kvcache_kept_count(g->heads[h]) + 1u;
        held += kept;
        if (g->head_cap != 0u && kept > g->head_cap)
            musts += kept - g->head_cap;
    }
    const uint64_t target = budget < g->layer_total ? budget : g->layer_total;
    const uint64_t k = held > target ? held - target : 0u;
    return k > musts ? k : musts;
}

pb_status pb_kvcache_group_step(pb_kvcache_group *group, uint32_t pos,
                                const float *attn, size_t head_stride,
                                const size_t *attn_len, uint64_t budget,
                                uint32_t *victims, size_t victims_cap,
                                size_t *counts, size_t counts_len,
                                size_t *n_victims) {
    if (group == NULL || (attn != NULL && attn_len == NULL) ||
        counts == NULL || n_victims == NULL ||
        (victims == NULL && victims_cap > 0u))
        return PB_ERR_NULL;
    if (counts_len < group->num_heads) return PB_ERR_BUFFER;
    const uint64_t bound = step_victim_bound(group, budget);
    if (bound > victims_cap) {
        *n_victims = bound > SIZE_MAX ? SIZE_MAX : (size_t)bound;
        return PB_ERR_BUFFER;
    }
    const pb_status st =
        pb__group_observe(group, pos, attn, head_stride, attn_len);
    if (st != PB_OK) return st;
    /* Its arguments passed the checks above, and the victims fit. */
    return pb_kvcache_group_evict(group, budget, victims, victims_cap, counts,
                                  counts_len, n_victims);
}
