/*
 * policy_config.c - what an instance is before it exists: reading a
 * versioned config by the growth rule of docs/abi.md, validating it in the
 * order pyramidkv.h documents, resolving the share, the capacity and the
 * sinks, and the size of the one block an instance lives in (its scorer
 * lays it out), which pb_kvcache_size reports and create allocates. The
 * table of scorers is scorer_table.c.
 *
 * It does not create, drive or free instances (policy.c) and knows no
 * scorer's state.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "scorer_ops.h"
#include "struct_growth.h"
/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

/* The full config a caller's versioned one describes (pb__config_load). */
static pb_status config_read(const pb_kvcache_config *user,
                             pb_kvcache_config *out) {
    const pb_kvcache_config defaults = PB_KVCACHE_CONFIG_DEFAULT;
    *out = defaults;
    return pb__struct_read(user, PB__CONFIG_SIZE_0_2, sizeof *out, out);
}

void pb__config_from_params(const pb_kvcache_pyramidkv_params *params,
                            const pb_kvcache_options *options,
                            pb_kvcache_config *out) {
    const pb_kvcache_pyramidkv_params default_params =
        PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_options default_options = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_pyramidkv_params p = params ? *params : default_params;
    const pb_kvcache_options o = options ? *options : default_options;
    const pb_kvcache_config defaults = PB_KVCACHE_CONFIG_DEFAULT;
    *out = defaults;
    out->budget = p.budget;
    out->layer = p.layer;
    out->num_layers = p.num_layers;
    out->pyramid_ratio = p.pyramid_ratio;
    out->recent_window = p.recent_window;
    out->obs_window = p.obs_window;
    out->pool_kernel = p.pool_kernel;
    out->pool = o.pool;
    out->capacity = o.capacity;
    out->prefill_scope = o.prefill_scope;
    out->prefill_max_len = o.prefill_max_len;
}

/* Validates a full config and resolves it (pb__config_load). */
static pb_status config_resolve(const pb_kvcache_config *c, pb__config *out) {
    if (c->budget == 0u || c->budget == UINT32_MAX) return PB_ERR_PARAM;
    if (c->num_layers == 0u || c->layer >= c->num_layers) return PB_ERR_PARAM;
    if (c->pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (c->recent_window >= c->budget) return PB_ERR_PARAM;
    if (c->obs_window == 0u) return PB_ERR_PARAM;
    if (c->pool_kernel == 0u || c->pool_kernel % 2u == 0u) return PB_ERR_PARAM;
    if (c->pool > (uint32_t)PB_POOL_AVG) return PB_ERR_PARAM;
    const pb__scorer_ops *ops = pb__scorer_ops_of(c->scorer);
    if (ops == NULL) return PB_ERR_PARAM;
    if (c->prefill_scope > (uint32_t)PB_PREFILL_REFERENCE) return PB_ERR_PARAM;
    if (c->row_stores > (uint32_t)PB_ROW_STORES_STREAMED) return PB_ERR_PARAM;
    /* Prefill scratch serves a scorer with a prefill entry, and the prefill
     * door knows no sinks (docs/prefill.md). */
    if (c->prefill_max_len != 0u && (ops->prefill == NULL || c->sinks != 0u))
        return PB_ERR_PARAM;
    if (c->capacity != 0u &&
        (uint64_t)c->capacity < (uint64_t)c->recent_window + 2u)
        return PB_ERR_PARAM;

    const uint32_t share =
        c->share != 0u ? c->share
                       : pb_kvcache_pyramid_budget(c->budget, c->layer,
                                                   c->num_layers,
                                                   c->pyramid_ratio);
    /* recent_window < budget < UINT32_MAX, so recent_window + 1 fits. */
    const uint32_t effective =
        share > c->recent_window ? share : c->recent_window + 1u;
    uint64_t capacity = c->capacity;
    if (capacity == 0u)
        capacity = (uint64_t)(effective > c->budget ? effective : c->budget) + 1u;
    /* A full instance must always have a position to give up: at most
     * `sinks` sinks and recent_window protected ones may be held. */
    if ((uint64_t)c->sinks + c->recent_window >= capacity) return PB_ERR_PARAM;

    out->recent_window = c->recent_window;
    out->obs_window = c->obs_window;
    out->pool_kernel = c->pool_kernel;
    out->share = c->share;
    out->scorer = c->scorer;
    out->sinks = c->sinks;
    out->pool = c->pool;
    out->prefill_scope = c->prefill_scope;
    out->prefill_max_len = c->prefill_max_len;
    out->row_stores = c->row_stores;
    out->effective = effective;
    out->capacity = capacity;
    return PB_OK;
}

pb_status pb__config_load(const pb_kvcache_config *user, pb__config *out) {
    pb_kvcache_config c;
    const pb_status st = config_read(user, &c);
    return st != PB_OK ? st : config_resolve(&c, out);
}

pb_status pb_kvcache_size(const pb_kvcache_config *config, size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    pb__config cfg;
    pb_status st = pb__config_load(config, &cfg);
    if (st != PB_OK) return st;
    size_t total = 0;
    st = pb__scorer_ops_of(cfg.scorer)->size(&cfg, &total);
    if (st != PB_OK) return st;
    *bytes = total;
    return PB_OK;
}

pb_status pb_kvcache_pyramidkv_size(const pb_kvcache_pyramidkv_params *params,
                                    const pb_kvcache_options *options,
                                    size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    pb_kvcache_config c;
    pb__config_from_params(params, options, &c);
    return pb_kvcache_size(&c, bytes);
}

