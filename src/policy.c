/*
 * policy.c - the per-layer PyramidKV/SnapKV policy: validation, the instance
 * layout and its exact size, and the native functions of pyramidkv.h
 * (create, size, destroy, observe, evict, reset and the introspection).
 *
 * It owns the rules of the policy (what is held, what is evictable, how many
 * go) and drives the ring, pooling and selection modules for the arithmetic.
 * The policybook vtables are a thin door in policy_vtable.c.
 *
 * Every public function validates all of its input before its first write,
 * so a call that returns an error has changed nothing. All memory is one
 * block obtained in create; nothing here allocates afterwards.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

pb_status pb__config_resolve(const pb_kvcache_pyramidkv_params *params,
                             const pb_kvcache_options *options,
                             pb__config *out) {
    const pb_kvcache_pyramidkv_params default_params =
        PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_options default_options = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_pyramidkv_params p = params ? *params : default_params;
    const pb_kvcache_options o = options ? *options : default_options;

    if (p.budget == 0u || p.budget == UINT32_MAX) return PB_ERR_PARAM;
    if (p.num_layers == 0u || p.layer >= p.num_layers) return PB_ERR_PARAM;
    if (p.pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (p.recent_window >= p.budget) return PB_ERR_PARAM;
    if (p.obs_window == 0u) return PB_ERR_PARAM;
    if (p.pool_kernel == 0u || p.pool_kernel % 2u == 0u) return PB_ERR_PARAM;
    if (o.pool > (uint32_t)PB_POOL_AVG) return PB_ERR_PARAM;
    if (o.prefill_scope > (uint32_t)PB_PREFILL_REFERENCE) return PB_ERR_PARAM;
    if (o.capacity != 0u &&
        (uint64_t)o.capacity < (uint64_t)p.recent_window + 2u)
        return PB_ERR_PARAM;

    const uint32_t share = pb_kvcache_pyramid_budget(
        p.budget, p.layer, p.num_layers, p.pyramid_ratio);
    /* recent_window < budget < UINT32_MAX, so recent_window + 1 fits. */
    const uint32_t effective =
        share > p.recent_window ? share : p.recent_window + 1u;
    uint64_t capacity = o.capacity;
    if (capacity == 0u)
        capacity = (uint64_t)(effective > p.budget ? effective : p.budget) + 1u;

    out->params = p;
    out->pool = o.pool;
    out->prefill_scope = o.prefill_scope;
    out->prefill_max_len = o.prefill_max_len;
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

pb_status pb__prefill_scratch_bytes(size_t len, size_t *bytes) {
    size_t b = len;
    if (!mul_ok(&b, PB__PREFILL_BYTES_PER_POSITION) ||
        b > SIZE_MAX - (PB__ALIGN - 1u))
        return PB_ERR_TOO_LARGE;
    *bytes = (b + PB__ALIGN - 1u) & ~(PB__ALIGN - 1u);
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

pb_status pb__layout_of(const pb__config *cfg, pb__layout *out) {
    if (cfg->capacity > (uint64_t)(SIZE_MAX / 64u)) return PB_ERR_TOO_LARGE;
    const size_t capacity = (size_t)cfg->capacity;
    const size_t obs = (size_t)cfg->params.obs_window;
    const size_t floats_per_line = PB__ALIGN / sizeof(float);

    size_t row_stride = (capacity + floats_per_line - 1u) &
                        ~(floats_per_line - 1u); /* rows start on lines */
    size_t pos_bytes = capacity, ring_bytes = row_stride;
    size_t score_bytes = capacity, alive_bytes = (capacity + 63u) / 64u;
    size_t hist_bytes = PB__HIST_BINS, prefill_bytes = 0;
    const size_t work_bytes =
        pb__pool_work_bytes(cfg->params.pool_kernel, capacity);
    if (pb__prefill_scratch_bytes((size_t)cfg->prefill_max_len,
                                  &prefill_bytes) != PB_OK)
        return PB_ERR_TOO_LARGE;
    if (!mul_ok(&pos_bytes, sizeof(uint32_t)) || !mul_ok(&ring_bytes, obs) ||
        !mul_ok(&ring_bytes, sizeof(float)) ||
        !mul_ok(&score_bytes, sizeof(double)) ||
        !mul_ok(&alive_bytes, sizeof(uint64_t)) ||
        !mul_ok(&hist_bytes, sizeof(size_t)))
        return PB_ERR_TOO_LARGE;

    size_t cursor = 0, off_struct = 0;
    if (!region(&cursor, sizeof(struct pb_kvcache), &off_struct) ||
        !region(&cursor, pos_bytes, &out->off_pos) ||
        !region(&cursor, ring_bytes, &out->off_ring) ||
        !region(&cursor, score_bytes, &out->off_scores) ||
        !region(&cursor, alive_bytes, &out->off_alive) ||
        !region(&cursor, work_bytes, &out->off_work) ||
        !region(&cursor, hist_bytes, &out->off_hist) ||
        !region(&cursor, prefill_bytes, &out->off_prefill) ||
        cursor > SIZE_MAX - (PB__ALIGN - 1u))
        return PB_ERR_TOO_LARGE;
    assert(off_struct == 0u);
    (void)off_struct;
    out->row_stride = row_stride;
    out->work_bytes = work_bytes;
    out->prefill_bytes = prefill_bytes;
    out->span = cursor;
    /* The allocator's alignment is unknown: ask for enough to start on a
     * line wherever the block lands. */
    out->total = cursor + (PB__ALIGN - 1u);
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Create, size, destroy, reset                                             */

static void *default_alloc(void *ctx, size_t n) {
    (void)ctx;
    return malloc(n);
}

static void default_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)n;
    free(p);
}

pb_status pb_kvcache_pyramidkv_size(const pb_kvcache_pyramidkv_params *params,
                                    const pb_kvcache_options *options,
                                    size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    pb__config cfg;
    pb_status st = pb__config_resolve(params, options, &cfg);
    if (st != PB_OK) return st;
    pb__layout layout;
    st = pb__layout_of(&cfg, &layout);
    if (st != PB_OK) return st;
    *bytes = layout.total;
    return PB_OK;
}

static void reset_state(pb_kvcache *p) {
    p->fresh = 1;
    p->kept = 1u;
    p->slot = 0u;
    p->pos[0] = 0u;
    pb__ring_clear_column(p->ring, p->row_stride, p->obs_window, 0u);
}

pb_status pb_kvcache_pyramidkv_create(const pb_kvcache_pyramidkv_params *params,
                                      const pb_kvcache_options *options,
                                      const pb_allocator *allocator,
                                      pb_kvcache **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    pb__config cfg;
    pb_status st = pb__config_resolve(params, options, &cfg);
    if (st != PB_OK) return st;
    if (allocator != NULL &&
        (allocator->alloc == NULL || allocator->free == NULL))
        return PB_ERR_PARAM;
    pb__layout layout;
    st = pb__layout_of(&cfg, &layout);
    if (st != PB_OK) return st;

    pb_allocator a = {default_alloc, default_free, NULL};
    if (allocator != NULL) a = *allocator;
    void *block = a.alloc(a.ctx, layout.total);
    if (block == NULL) return PB_ERR_NOMEM;

    const uintptr_t start =
        ((uintptr_t)block + (PB__ALIGN - 1u)) & ~(uintptr_t)(PB__ALIGN - 1u);
    unsigned char *base = (unsigned char *)block + (start - (uintptr_t)block);
    pb_kvcache *p = (pb_kvcache *)(void *)base;
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->capacity = (size_t)cfg.capacity;
    p->obs_window = cfg.params.obs_window;
    p->half_kernel = (size_t)(cfg.params.pool_kernel - 1u) / 2u;
    p->row_stride = layout.row_stride;
    p->pos = (uint32_t *)(void *)(base + layout.off_pos);
    p->ring = (float *)(void *)(base + layout.off_ring);
    p->scores = (double *)(void *)(base + layout.off_scores);
    p->alive = (uint64_t *)(void *)(base + layout.off_alive);
    p->work = layout.work_bytes ? (void *)(base + layout.off_work) : NULL;
    p->work_bytes = layout.work_bytes;
    p->hist = (size_t *)(void *)(base + layout.off_hist);
    p->prefill_scratch =
        layout.prefill_bytes ? (void *)(base + layout.off_prefill) : NULL;
    p->prefill_scratch_bytes = layout.prefill_bytes;
    p->allocator = a;
    p->block = block;
    p->block_bytes = layout.total;
    reset_state(p);
    *out = p;
    return PB_OK;
}

void pb_kvcache_destroy(pb_kvcache *policy) {
    if (policy == NULL) return;
    const pb_allocator a = policy->allocator;
    a.free(a.ctx, policy->block, policy->block_bytes);
}

pb_status pb_kvcache_reset(pb_kvcache *policy) {
    if (policy == NULL) return PB_ERR_NULL;
    reset_state(policy);
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

/* 1 if every weight is finite and not below zero (-0.0 is allowed), tested
 * on the bit patterns so the loop has no branch. */
static int weights_ok(const float *w, size_t n) {
    uint32_t bad = 0u;
    for (size_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, w + i, sizeof b);
        /* Above the largest finite positive: +inf, NaN or negative. */
        bad |= (uint32_t)(b > UINT32_C(0x7F7FFFFF)) &
               (uint32_t)(b != UINT32_C(0x80000000));
    }
    return bad == 0u;
}

pb_status pb_kvcache_observe(pb_kvcache *policy, uint32_t pos,
                             const float *attn, size_t attn_len) {
    if (policy == NULL) return PB_ERR_NULL;
    pb_kvcache *p = policy;
    /* With recent_window 0 an evict may leave nothing held. */
    if (p->kept > 0u && pos <= p->pos[p->kept - 1u]) return PB_ERR_POSITION;
    if (attn != NULL) {
        if (attn_len != p->kept) return PB_ERR_LENGTH;
        if (!weights_ok(attn, attn_len)) return PB_ERR_WEIGHT;
    }
    if (p->kept >= p->capacity) return PB_ERR_FULL;

    if (attn != NULL) {
        pb__ring_store_row(p->ring, p->row_stride, p->slot, attn, attn_len);
        p->slot = p->slot + 1u == p->obs_window ? 0u : p->slot + 1u;
    }
    p->pos[p->kept] = pos;
    pb__ring_clear_column(p->ring, p->row_stride, p->obs_window, p->kept);
    p->kept += 1u;
    p->fresh = 0;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Evict                                                                    */

pb_status pb_kvcache_evict(pb_kvcache *policy, uint32_t budget,
                           uint32_t *victims, size_t victims_cap,
                           size_t *n_victims) {
    if (policy == NULL || n_victims == NULL ||
        (victims == NULL && victims_cap > 0u))
        return PB_ERR_NULL;
    pb_kvcache *p = policy;
    const size_t target =
        budget < p->cfg.effective ? (size_t)budget : (size_t)p->cfg.effective;
    if (p->kept <= target) {
        *n_victims = 0u;
        return PB_OK;
    }
    const size_t recent_window = (size_t)p->cfg.params.recent_window;
    const size_t recent = recent_window < p->kept ? recent_window : p->kept;
    const size_t evictable = p->kept - recent;
    size_t needed = p->kept - target;
    if (needed > evictable) needed = evictable;
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }
    if (needed == 0u) {
        *n_victims = 0u;
        return PB_OK;
    }

    /* Window scores, then pooled scores, in place, by rank. */
    const size_t n = p->kept;
    double *x = p->scores;
    pb__ring_window_scores(p->ring, p->row_stride, p->obs_window, n, x);
    if (p->cfg.pool == (uint32_t)PB_POOL_AVG)
        pb__pool_avg(x, n, p->half_kernel, p->cfg.params.pool_kernel, p->work,
                     p->work_bytes);
    else
        pb__pool_max(x, n, p->half_kernel, p->work, p->work_bytes);

    /* The `needed` lowest pooled scores among the evictable ranks. */
    pb__cut cut;
    pb__select_lowest(x, evictable, needed, p->hist, &cut);

    /* One pass: report victims in rank (= position) order, compact the
     * positions and mark the survivors for the ring. */
    const size_t words = (n + 63u) / 64u;
    memset(p->alive, 0, words * sizeof *p->alive);
    size_t nv = 0, w = 0;
    for (size_t i = 0; i < n; ++i) {
        if (i < evictable && pb__cut_takes(&cut, pb__key_bits(x[i]))) {
            victims[nv++] = p->pos[i];
        } else {
            p->alive[i / 64u] |= UINT64_C(1) << (i % 64u);
            p->pos[w++] = p->pos[i];
        }
    }
    assert(nv == needed);
    pb__ring_compact(p->ring, p->row_stride, p->obs_window, p->alive, n);
    p->kept = w;
    *n_victims = nv;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Introspection                                                            */

uint32_t pb_kvcache_effective_budget(const pb_kvcache *policy) {
    return policy ? policy->cfg.effective : 0u;
}

size_t pb_kvcache_kept_count(const pb_kvcache *policy) {
    return policy ? policy->kept : 0u;
}

size_t pb_kvcache_capacity(const pb_kvcache *policy) {
    return policy ? policy->capacity : 0u;
}

pb_status pb_kvcache_kept_positions(const pb_kvcache *policy, uint32_t *out,
                                    size_t out_cap, size_t *n) {
    if (policy == NULL || out == NULL || n == NULL) return PB_ERR_NULL;
    *n = policy->kept;
    if (out_cap < policy->kept) return PB_ERR_BUFFER;
    memcpy(out, policy->pos, policy->kept * sizeof *out);
    return PB_OK;
}

/* The rank of held position pos, or SIZE_MAX if it is not held. */
static size_t rank_of(const pb_kvcache *p, uint32_t pos) {
    size_t lo = 0, hi = p->kept; /* search [lo, hi) */
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (p->pos[mid] < pos)
            lo = mid + 1u;
        else
            hi = mid;
    }
    return lo < p->kept && p->pos[lo] == pos ? lo : SIZE_MAX;
}

pb_status pb_kvcache_window_score(const pb_kvcache *policy, uint32_t pos,
                                  double *score) {
    if (policy == NULL || score == NULL) return PB_ERR_NULL;
    const size_t r = rank_of(policy, pos);
    if (r == SIZE_MAX) return PB_ERR_NOT_HELD;
    *score = pb__ring_window_score(policy->ring, policy->row_stride,
                                   policy->obs_window, r);
    return PB_OK;
}

size_t pb_kvcache_memory_bytes(const pb_kvcache *policy) {
    return policy ? policy->block_bytes : 0u;
}
