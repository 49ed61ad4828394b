/*
 * policy_config.c - what an instance is before it exists: reading a
 * versioned config by the growth rule of docs/abi.md, validating it in the
 * order pyramidkv.h documents, resolving the share, the capacity and the
 * sinks, and laying out the one block an instance lives in (its exact
 * size, which pb_kvcache_size reports and create allocates).
 *
 * It does not create, drive or free instances (policy.c) and knows the
 * score sources only by the bytes per position each needs.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"
/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

/* The full config a caller's versioned one describes (pb__config_load). */
static pb_status config_read(const pb_kvcache_config *user,
                             pb_kvcache_config *out) {
    const pb_kvcache_config defaults = PB_KVCACHE_CONFIG_DEFAULT;
    *out = defaults;
    if (user == NULL) return PB_OK;
    const size_t size = (size_t)user->struct_size;
    if (size < PB__CONFIG_MIN_SIZE) return PB_ERR_PARAM;
    /* A newer caller's fields this library does not know must be unset:
     * a zero is their default by the rule of docs/abi.md. */
    const unsigned char *bytes = (const unsigned char *)user;
    for (size_t i = sizeof *out; i < size; ++i)
        if (bytes[i] != 0u) return PB_ERR_PARAM;
    memcpy(out, user, size < sizeof *out ? size : sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    return PB_OK;
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
    if (c->scorer > (uint32_t)PB_SCORER_NONE) return PB_ERR_PARAM;
    if (c->prefill_scope > (uint32_t)PB_PREFILL_REFERENCE) return PB_ERR_PARAM;
    if (c->row_stores > (uint32_t)PB_ROW_STORES_STREAMED) return PB_ERR_PARAM;
    /* The prefill door scores a prompt by observation windows and knows no
     * sinks: it serves only the plain window scorer (docs/prefill.md). */
    if (c->prefill_max_len != 0u &&
        (c->scorer != (uint32_t)PB_SCORER_WINDOW || c->sinks != 0u))
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

    pb_kvcache_pyramidkv_params p;
    p.budget = c->budget;
    p.layer = c->layer;
    p.num_layers = c->num_layers;
    p.pyramid_ratio = c->pyramid_ratio;
    p.recent_window = c->recent_window;
    p.obs_window = c->obs_window;
    p.pool_kernel = c->pool_kernel;
    out->params = p;
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

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */

/* *a = a * b, or 0 if that overflows size_t. */
static int mul_ok(size_t *a, size_t b) {
    if (b != 0u && *a > SIZE_MAX / b) return 0;
    *a *= b;
    return 1;
}

pb_status pb__prefill_scratch_of(uint32_t pool_kernel, size_t work_bytes,
                                 size_t len, pb__prefill_scratch *out) {
    /* pb__pool_work_bytes is exact for len < SIZE_MAX / 16; the three parts
     * then add up without overflow. */
    if ((uint64_t)len > (uint64_t)UINT32_MAX || len > SIZE_MAX / 32u)
        return PB_ERR_TOO_LARGE;
    const size_t pool = pb__pool_work_bytes(pool_kernel, len);
    out->score_bytes = len * sizeof(double);
    out->pool_bytes = work_bytes >= pool ? 0u : pool;
    out->cand_bytes = (len / 4u) * sizeof(double);
    out->total = out->score_bytes + out->pool_bytes + out->cand_bytes;
    return PB_OK;
}

/* Appends a region of `bytes` at *cursor, rounded up to whole lines. */
static int region(size_t *cursor, size_t bytes, size_t *offset) {
    if (bytes > SIZE_MAX - (PB__ALIGN - 1u)) return 0;
    const size_t rounded = (bytes + PB__ALIGN - 1u) & ~(PB__ALIGN - 1u);
    if (rounded > SIZE_MAX - *cursor) return 0;
    *offset = *cursor;
    *cursor += rounded;
    return 1;
}

/* Dead columns tolerated before a cheap evict compacts: 1/64 of the
 * capacity (1.2 bytes per position at obs_window 16, besides the ring's
 * columns), so the compaction, which moves every ring row, pos[] and the
 * sums, is paid once per that many victims. Each hole also costs every
 * later step until then: it cuts each row a step writes into one more run,
 * and widens the windows the filter's scan must walk past it. Measured on
 * the model shape at cadence 1 (docs/performance.md), halving the allowance
 * from 1/32 saved more per step than the compactions twice as often cost.
 * While the sums are kept a compaction moves no ring row (the lazy state),
 * so drop_ranks lets only half this many gather then (at least
 * PB__HOLES_MIN: a small instance, whose rows the caches hold, pays
 * little for moving them at once). */
static size_t max_holes_of(size_t capacity) {
    return capacity / 64u > PB__HOLES_MIN ? capacity / 64u : PB__HOLES_MIN;
}

/* The block of an instance whose scorer is not the window: the positions,
 * one score per position (as wide as the scorer needs; the last scorer
 * two, its scores and the spare array a step writes its record to), each
 * with pb__source_slack ranks of room, and, when victims are chosen by
 * score, the selection histogram. No ring, no holes, no
 * pooling or prefill scratch. */
static pb_status source_layout_of(const pb__config *cfg, pb__layout *out) {
    if (cfg->capacity > (uint64_t)(SIZE_MAX / 64u)) return PB_ERR_TOO_LARGE;
    const size_t capacity = (size_t)cfg->capacity;
    const size_t per = pb__source_score_bytes(cfg->scorer);
    const int spare = cfg->scorer == (uint32_t)PB_SCORER_LAST;
    const size_t ranks = capacity + pb__source_slack(cfg->scorer, capacity);
    memset(out, 0, sizeof *out);
    size_t cursor = 0, off_struct = 0;
    if (!region(&cursor, sizeof(struct pb_kvcache), &off_struct) ||
        !region(&cursor, ranks * sizeof(uint32_t), &out->off_pos) ||
        !region(&cursor, ranks * per, &out->off_scores) ||
        !region(&cursor, spare ? ranks * per : 0u, &out->off_spare) ||
        !region(&cursor, per ? PB__HIST_BINS * sizeof(size_t) : 0u,
                &out->off_hist) ||
        cursor > SIZE_MAX - (PB__ALIGN - 1u))
        return PB_ERR_TOO_LARGE;
    assert(off_struct == 0u);
    (void)off_struct;
    out->span = cursor;
    out->total = cursor + (PB__ALIGN - 1u);
    return PB_OK;
}

pb_status pb__layout_of(const pb__config *cfg, pb__layout *out) {
    if (cfg->scorer != (uint32_t)PB_SCORER_WINDOW)
        return source_layout_of(cfg, out);
    if (cfg->capacity > (uint64_t)(SIZE_MAX / 64u)) return PB_ERR_TOO_LARGE;
    const size_t capacity = (size_t)cfg->capacity;
    const size_t max_holes = max_holes_of(capacity);
    /* pos[] and the sums hold at most max_holes dead columns; a ring row of
     * the lazy state's old layout at most pb__lazy_room(capacity). */
    const size_t columns = capacity + max_holes;
    const size_t ring_columns = capacity + pb__lazy_room(capacity);
    const size_t obs = (size_t)cfg->params.obs_window;
    const size_t floats_per_line = PB__ALIGN / sizeof(float);

    size_t row_stride = (ring_columns + floats_per_line - 1u) &
                        ~(floats_per_line - 1u); /* rows start on lines */
    size_t pos_bytes = columns, ring_bytes = row_stride;
    size_t score_bytes = columns, alive_bytes = (ring_columns + 63u) / 64u;
    size_t hole_bytes = max_holes;
    size_t lazy_bytes = pb__lazy_room(capacity);
    size_t hist_bytes = PB__HIST_BINS, prefill_bytes = 0;
    size_t cand_bytes = PB__FILTER_MAX_CANDIDATES;
    size_t heap_bytes = PB__FILTER_MAX_NEEDED;
    const size_t work_bytes =
        pb__pool_work_bytes(cfg->params.pool_kernel, capacity);
    pb__prefill_scratch prefill;
    if (pb__prefill_scratch_of(cfg->params.pool_kernel, work_bytes,
                               (size_t)cfg->prefill_max_len,
                               &prefill) != PB_OK)
        return PB_ERR_TOO_LARGE;
    prefill_bytes = prefill.total;
    if (!mul_ok(&pos_bytes, sizeof(uint32_t)) || !mul_ok(&ring_bytes, obs) ||
        !mul_ok(&ring_bytes, sizeof(float)) ||
        !mul_ok(&score_bytes, sizeof(double)) ||
        !mul_ok(&alive_bytes, sizeof(uint64_t)) ||
        !mul_ok(&hole_bytes, sizeof(size_t)) ||
        !mul_ok(&lazy_bytes, sizeof(size_t)) ||
        !mul_ok(&hist_bytes, sizeof(size_t)) ||
        !mul_ok(&cand_bytes, sizeof(struct pb__candidate)) ||
        !mul_ok(&heap_bytes, sizeof(double)))
        return PB_ERR_TOO_LARGE;

    /* The radix histogram (full path, prefill) and the candidates and heap
     * (filtered and streaming paths) are scratch of one call each, and no
     * call uses both: they share one region. */
    const size_t select_bytes = hist_bytes > cand_bytes + heap_bytes
                                    ? hist_bytes
                                    : cand_bytes + heap_bytes;
    size_t cursor = 0, off_struct = 0;
    if (!region(&cursor, sizeof(struct pb_kvcache), &off_struct) ||
        !region(&cursor, pos_bytes, &out->off_pos) ||
        !region(&cursor, ring_bytes, &out->off_ring) ||
        !region(&cursor, score_bytes, &out->off_scores) ||
        !region(&cursor, alive_bytes, &out->off_alive) ||
        !region(&cursor, hole_bytes, &out->off_holes) ||
        !region(&cursor, lazy_bytes, &out->off_lazy) ||
        !region(&cursor, work_bytes, &out->off_work) ||
        !region(&cursor, select_bytes, &out->off_hist) ||
        !region(&cursor, prefill_bytes, &out->off_prefill) ||
        cursor > SIZE_MAX - (PB__ALIGN - 1u))
        return PB_ERR_TOO_LARGE;
    assert(off_struct == 0u);
    (void)off_struct;
    out->off_cands = out->off_hist;
    out->off_heap = out->off_hist + cand_bytes; /* whole lines of candidates */
    out->row_stride = row_stride;
    out->max_holes = max_holes;
    out->work_bytes = work_bytes;
    out->prefill_bytes = prefill_bytes;
    out->span = cursor;
    /* The allocator's alignment is unknown: ask for enough to start on a
     * line wherever the block lands. */
    out->total = cursor + (PB__ALIGN - 1u);
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
    pb__layout layout;
    st = pb__layout_of(&cfg, &layout);
    if (st != PB_OK) return st;
    *bytes = layout.total;
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

