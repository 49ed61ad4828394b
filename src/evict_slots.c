/*
 * evict_slots.c - the runtime's evict calls: to the instance's own share
 * (pb_kvcache_evict_to_share), and with each victim's slot in the held
 * order (pb_kvcache_evict_slots). Both go through pb_kvcache_evict; the
 * slots come from the rank query of policy_rank.c.
 */
#include "pyramidkv/pyramidkv.h"
#include "runtime_internal.h"

PB_API pb_status pb_kvcache_evict_to_share(pb_kvcache *policy,
                                           uint32_t *victims,
                                           size_t victims_cap,
                                           size_t *n_victims) {
    return pb_kvcache_evict(policy, PB_KVCACHE_BUDGET_SHARE, victims,
                            victims_cap, n_victims);
}

PB_API pb_status pb_kvcache_evict_slots(pb_kvcache *policy, uint32_t budget,
                                        uint32_t *victims, uint32_t *slots,
                                        size_t victims_cap,
                                        size_t *n_victims) {
    if (policy == NULL || slots == NULL || n_victims == NULL)
        return PB_ERR_NULL;
    /* The victims' positions land in slots[] first (a buffer of the same
     * size the caller has given us), then each becomes its old rank: the
     * victims before it (j) plus the survivors below it. */
    size_t n = 0;
    const pb_status st =
        pb_kvcache_evict(policy, budget, slots, victims_cap, &n);
    *n_victims = n;
    if (st != PB_OK) return st;
    for (size_t j = 0; j < n; ++j) {
        const uint32_t pos = slots[j];
        if (victims != NULL) victims[j] = pos;
        slots[j] = (uint32_t)(j + pb__kvcache_rank_below(policy, pos));
    }
    return PB_OK;
}
