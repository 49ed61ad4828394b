/*
 * reference_model.c - the naive PyramidKV layer policy (see the header).
 * Every rule is written the plainest way it can be, one loop per rule, so
 * that a reader can check it against the specification line by line.
 */
#include "reference_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX_CAPACITY ((size_t)1 << 26)

static float *ring_of(const ref_policy *r, size_t i) {
    return r->ring + i * r->params.obs_window;
}

pb_status ref_create(ref_policy *r, const pb_kvcache_pyramidkv_params *params,
                     const pb_kvcache_options *options) {
    const pb_kvcache_pyramidkv_params dp = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_options dopt = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_pyramidkv_params p = params ? *params : dp;
    const pb_kvcache_options o = options ? *options : dopt;
    memset(r, 0, sizeof *r);

    if (p.budget == 0u || p.budget == UINT32_MAX) return PB_ERR_PARAM;
    if (p.num_layers == 0u || p.layer >= p.num_layers) return PB_ERR_PARAM;
    if (p.pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (p.recent_window >= p.budget) return PB_ERR_PARAM;
    if (p.obs_window == 0u) return PB_ERR_PARAM;
    if (p.pool_kernel == 0u || p.pool_kernel % 2u == 0u) return PB_ERR_PARAM;
    if (o.pool > 1u || o.prefill_scope > 1u) return PB_ERR_PARAM;
    if (o.capacity != 0u && (uint64_t)o.capacity < (uint64_t)p.recent_window + 2u)
        return PB_ERR_PARAM;

    uint32_t share = pb_kvcache_pyramid_budget(p.budget, p.layer, p.num_layers,
                                               p.pyramid_ratio);
    uint32_t effective = share > p.recent_window ? share : p.recent_window + 1u;
    uint64_t capacity = o.capacity;
    if (capacity == 0u)
        capacity = (uint64_t)(effective > p.budget ? effective : p.budget) + 1u;
    if (capacity > REF_MAX_CAPACITY || p.obs_window > 4096u)
        return PB_ERR_TOO_LARGE;

    r->params = p;
    r->pool = o.pool;
    r->effective = effective;
    r->capacity = (size_t)capacity;
    r->pos = malloc(r->capacity * sizeof *r->pos);
    r->ring = malloc(r->capacity * p.obs_window * sizeof *r->ring);
    r->scratch = malloc(r->capacity * sizeof *r->scratch);
    r->pooled = malloc(r->capacity * sizeof *r->pooled);
    r->gone = malloc(r->capacity);
    if (!r->pos || !r->ring || !r->scratch || !r->pooled || !r->gone) {
        ref_destroy(r);
        return PB_ERR_NOMEM;
    }
    ref_reset(r);
    return PB_OK;
}

void ref_destroy(ref_policy *r) {
    free(r->pos);
    free(r->ring);
    free(r->scratch);
    free(r->pooled);
    free(r->gone);
    memset(r, 0, sizeof *r);
}

void ref_reset(ref_policy *r) {
    r->kept = 1;
    r->slot = 0;
    r->pos[0] = 0;
    memset(ring_of(r, 0), 0, r->params.obs_window * sizeof(float));
}

pb_status ref_observe(ref_policy *r, uint32_t pos, const float *attn,
                      size_t attn_len) {
    if (r->kept > 0 && pos <= r->pos[r->kept - 1]) return PB_ERR_POSITION;
    if (attn != NULL) {
        if (attn_len != r->kept) return PB_ERR_LENGTH;
        for (size_t i = 0; i < attn_len; ++i)
            if (!isfinite(attn[i]) || attn[i] < 0.0f) return PB_ERR_WEIGHT;
    }
    if (r->kept >= r->capacity) return PB_ERR_FULL;

    if (attn != NULL) {
        for (size_t i = 0; i < r->kept; ++i)
            ring_of(r, i)[r->slot] = attn[i];
        r->slot = (r->slot + 1u) % r->params.obs_window;
    }
    r->pos[r->kept] = pos;
    memset(ring_of(r, r->kept), 0, r->params.obs_window * sizeof(float));
    r->kept += 1;
    return PB_OK;
}

static double window_score_at(const ref_policy *r, size_t i) {
    double sum = 0.0;
    for (uint32_t s = 0; s < r->params.obs_window; ++s)
        sum += (double)ring_of(r, i)[s];
    return sum;
}

pb_status ref_window_score(const ref_policy *r, uint32_t pos, double *score) {
    for (size_t i = 0; i < r->kept; ++i) {
        if (r->pos[i] == pos) {
            *score = window_score_at(r, i);
            return PB_OK;
        }
    }
    return PB_ERR_NOT_HELD;
}

pb_status ref_evict(ref_policy *r, uint32_t budget, uint32_t *victims,
                    size_t victims_cap, size_t *n_victims) {
    const size_t target = budget < r->effective ? budget : r->effective;
    if (r->kept <= target) {
        *n_victims = 0;
        return PB_OK;
    }
    size_t needed = r->kept - target;
    const size_t recent = r->params.recent_window < r->kept
                              ? r->params.recent_window
                              : r->kept;
    const size_t evictable = r->kept - recent;
    if (needed > evictable) needed = evictable;
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }

    for (size_t i = 0; i < r->kept; ++i) r->scratch[i] = window_score_at(r, i);

    const size_t h = (r->params.pool_kernel - 1u) / 2u;
    for (size_t i = 0; i < r->kept; ++i) {
        const size_t lo = i >= h ? i - h : 0;
        const size_t hi = i + h < r->kept - 1 ? i + h : r->kept - 1;
        if (r->pool == PB_POOL_AVG) {
            double sum = 0.0;
            for (size_t j = lo; j <= hi; ++j) sum += r->scratch[j];
            r->pooled[i] = sum / (double)r->params.pool_kernel;
        } else {
            double best = r->scratch[lo];
            for (size_t j = lo + 1; j <= hi; ++j)
                if (r->scratch[j] > best) best = r->scratch[j];
            r->pooled[i] = best;
        }
    }

    /* One full scan per victim: the lowest pooled score among the evictable
     * positions not yet chosen; on equal scores the lower position. */
    memset(r->gone, 0, r->kept);
    for (size_t v = 0; v < needed; ++v) {
        size_t best = evictable;
        for (size_t i = 0; i < evictable; ++i) {
            if (r->gone[i]) continue;
            if (best == evictable || r->pooled[i] < r->pooled[best]) best = i;
        }
        r->gone[best] = 1;
    }

    size_t n = 0, w = 0;
    for (size_t i = 0; i < r->kept; ++i) {
        if (r->gone[i]) {
            victims[n++] = r->pos[i];
            continue;
        }
        if (w != i) {
            r->pos[w] = r->pos[i];
            memcpy(ring_of(r, w), ring_of(r, i),
                   r->params.obs_window * sizeof(float));
        }
        ++w;
    }
    r->kept = w;
    *n_victims = n;
    return PB_OK;
}
