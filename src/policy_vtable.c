/*
 * policy_vtable.c - the policybook-compatible door: pb_kvcache_pyramidkv,
 * pb_kvcache_snapkv and the rest of the family (h2o, scissorhands, tova,
 * streaming_llm, sliding_window), thin adapters onto the native functions
 * of policy.c.
 *
 * It owns only the translation: each policy's params become a native
 * config of one layer whose share is the budget (and, for the rest of the
 * family, the scorer, recent window and sinks that policy means), statuses
 * become NULL or 0 (a call that fails changes nothing, exactly as on the
 * native surface), and the rng is ignored because every decision is
 * deterministic. The one rule of its own is TOVA's capacity check, which
 * counts the positions over budget before the unobserved ones are spared.
 */
#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

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

/* A native create for the rest of the family. These policies evict to
 * exactly the budget each evict is given, and their params' budget only
 * sizes the instance (budget + 1 positions): so the share caps nothing
 * (UINT32_MAX) and the capacity is explicit. The window fields keep their
 * defaults: they are validated and have no effect on these scorers. */
static pb_kvcache *create_family(uint32_t budget, uint32_t recent_window,
                                 pb_scorer scorer, uint32_t sinks,
                                 const pb_allocator *allocator) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = budget;
    c.share = UINT32_MAX;
    /* budget UINT32_MAX wraps to 0 (the default capacity) and is refused
     * as a budget anyway. */
    c.capacity = budget + 1u;
    c.recent_window = recent_window;
    c.scorer = (uint32_t)scorer;
    c.sinks = sinks;
    pb_kvcache *out = NULL;
    (void)pb_kvcache_create(&c, allocator, &out);
    return out;
}

static pb_kvcache *create_h2o(const void *params,
                              const pb_allocator *allocator, pb_rng *rng) {
    (void)rng;
    const pb_kvcache_h2o_params defaults = PB_KVCACHE_H2O_PARAMS_DEFAULT;
    const pb_kvcache_h2o_params *h =
        params ? (const pb_kvcache_h2o_params *)params : &defaults;
    return create_family(h->budget, h->recent_window, PB_SCORER_CUMULATIVE,
                         0u, allocator);
}

static pb_kvcache *create_scissorhands(const void *params,
                                       const pb_allocator *allocator,
                                       pb_rng *rng) {
    (void)rng;
    const pb_kvcache_scissorhands_params defaults =
        PB_KVCACHE_SCISSORHANDS_PARAMS_DEFAULT;
    const pb_kvcache_scissorhands_params *s =
        params ? (const pb_kvcache_scissorhands_params *)params : &defaults;
    return create_family(s->budget, s->recent_window, PB_SCORER_VOTES, 0u,
                         allocator);
}

static pb_kvcache *create_tova(const void *params,
                               const pb_allocator *allocator, pb_rng *rng) {
    (void)rng;
    const pb_kvcache_tova_params defaults = PB_KVCACHE_TOVA_PARAMS_DEFAULT;
    const pb_kvcache_tova_params *t =
        params ? (const pb_kvcache_tova_params *)params : &defaults;
    return create_family(t->budget, 0u, PB_SCORER_LAST, 0u, allocator);
}

static pb_kvcache *create_streaming_llm(const void *params,
                                        const pb_allocator *allocator,
                                        pb_rng *rng) {
    (void)rng;
    const pb_kvcache_streaming_llm_params defaults =
        PB_KVCACHE_STREAMING_LLM_PARAMS_DEFAULT;
    const pb_kvcache_streaming_llm_params *s =
        params ? (const pb_kvcache_streaming_llm_params *)params : &defaults;
    /* The native surface would take sinks == budget (capacity budget + 1
     * still leaves one position to give up); this interface refuses it. */
    if (s->sinks >= s->budget) return NULL;
    return create_family(s->budget, 0u, PB_SCORER_NONE, s->sinks, allocator);
}

static pb_kvcache *create_sliding_window(const void *params,
                                         const pb_allocator *allocator,
                                         pb_rng *rng) {
    (void)rng;
    const pb_kvcache_sliding_window_params defaults =
        PB_KVCACHE_SLIDING_WINDOW_PARAMS_DEFAULT;
    const pb_kvcache_sliding_window_params *s =
        params ? (const pb_kvcache_sliding_window_params *)params : &defaults;
    return create_family(s->budget, 0u, PB_SCORER_NONE, 0u, allocator);
}

/* TOVA checks the buffer against every position over the target, before
 * the unobserved ones (never victims) are spared: a smaller buffer is
 * refused even when fewer positions would go. */
static size_t evict_tova(pb_kvcache *policy, uint32_t budget,
                         uint32_t *victims, size_t capacity) {
    if (policy == NULL) return 0u;
    const size_t held = pb_kvcache_kept_count(policy);
    const uint32_t share = pb_kvcache_effective_budget(policy);
    const size_t target = budget < share ? (size_t)budget : (size_t)share;
    if (held > target && capacity < held - target) return 0u;
    return evict(policy, budget, victims, capacity);
}

const pb_kvcache_vtable pb_kvcache_pyramidkv = {
    create_pyramidkv, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_snapkv = {
    create_snapkv, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_h2o = {
    create_h2o, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_scissorhands = {
    create_scissorhands, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_tova = {
    create_tova, on_decode_step, evict_tova, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_streaming_llm = {
    create_streaming_llm, on_decode_step, evict, memory_bytes, destroy};

const pb_kvcache_vtable pb_kvcache_sliding_window = {
    create_sliding_window, on_decode_step, evict, memory_bytes, destroy};
