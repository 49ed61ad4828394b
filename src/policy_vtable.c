/*
 * policy_vtable.c - the policybook-compatible door: pb_kvcache_pyramidkv and
 * pb_kvcache_snapkv, thin adapters onto the native functions of policy.c.
 *
 * It owns only the translation: SnapKV params become PyramidKV params of a
 * single layer, statuses become NULL or 0 (a call that fails changes
 * nothing, exactly as on the native surface), and the rng is ignored
 * because every decision is deterministic.
 */
#include <stddef.h>

#include "policy_internal.h"

static pb_kvcache *create_pyramidkv(const void *params,
                                    const pb_allocator *allocator,
                                    pb_rng *rng) {
    (void)rng;
    pb_kvcache *p = NULL;
    (void)pb_kvcache_pyramidkv_create(
        (const pb_kvcache_pyramidkv_params *)params, NULL, allocator, &p);
    return p;
}

static pb_kvcache *create_snapkv(const void *params,
                                 const pb_allocator *allocator, pb_rng *rng) {
    (void)rng;
    const pb_kvcache_snapkv_params defaults = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params *s =
        params ? (const pb_kvcache_snapkv_params *)params : &defaults;
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = s->budget;
    p.layer = 0u;
    p.num_layers = 1u; /* one layer: the share is the budget itself */
    p.recent_window = s->recent_window;
    p.obs_window = s->obs_window;
    p.pool_kernel = s->pool_kernel;
    pb_kvcache *out = NULL;
    (void)pb_kvcache_pyramidkv_create(&p, NULL, allocator, &out);
    return out;
}

static void on_decode_step(pb_kvcache *policy, uint32_t pos, const float *attn,
                           size_t attn_len) {
    (void)pb_kvcache_observe(policy, pos, attn, attn_len);
}

static size_t evict(pb_kvcache *policy, uint32_t budget, uint32_t *victims,
                    size_t capacity) {
    size_t n = 0;
    if (pb_kvcache_evict(policy, budget, victims, capacity, &n) != PB_OK)
        return 0u;
    return n;
}

static size_t memory_bytes(const pb_kvcache *policy) {
    return pb_kvcache_memory_bytes(policy);
}

static void destroy(pb_kvcache *policy) { pb_kvcache_destroy(policy); }

const pb_kvcache_vtable pb_kvcache_pyramidkv = {
    create_pyramidkv, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_snapkv = {
    create_snapkv, on_decode_step, evict, memory_bytes, destroy};
