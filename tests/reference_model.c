/*
 * reference_model.c - the naive layer policy of every scorer (see the
 * header). Every rule is written the plainest way it can be, one loop per
 * rule, so that a reader can check it against the specification line by
 * line.
 */
#include "reference_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp_env.h"

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
    const pb_kvcache_config c = ref_config_of(&p, &o);
    return ref_create_config(r, &c);
}

pb_kvcache_config ref_config_of(const pb_kvcache_pyramidkv_params *p,
                                const pb_kvcache_options *o) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = p->budget;
    c.layer = p->layer;
    c.num_layers = p->num_layers;
    c.pyramid_ratio = p->pyramid_ratio;
    c.recent_window = p->recent_window;
    c.obs_window = p->obs_window;
    c.pool_kernel = p->pool_kernel;
    c.pool = o->pool;
    c.capacity = o->capacity;
    c.prefill_scope = o->prefill_scope;
    c.prefill_max_len = o->prefill_max_len;
    return c;
}

pb_status ref_create_config(ref_policy *r, const pb_kvcache_config *c) {
    memset(r, 0, sizeof *r);
    if (c->budget == 0u || c->budget == UINT32_MAX) return PB_ERR_PARAM;
    if (c->num_layers == 0u || c->layer >= c->num_layers) return PB_ERR_PARAM;
    if (c->pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (c->recent_window >= c->budget) return PB_ERR_PARAM;
    if (c->obs_window == 0u) return PB_ERR_PARAM;
    if (c->pool_kernel == 0u || c->pool_kernel % 2u == 0u) return PB_ERR_PARAM;
    if (c->pool > 1u || c->prefill_scope > 1u || c->row_stores > 1u)
        return PB_ERR_PARAM;
    if (c->scorer > (uint32_t)PB_SCORER_NONE) return PB_ERR_PARAM;
    if (c->prefill_max_len != 0u &&
        (c->scorer != (uint32_t)PB_SCORER_WINDOW || c->sinks != 0u))
        return PB_ERR_PARAM;
    if (c->capacity != 0u &&
        (uint64_t)c->capacity < (uint64_t)c->recent_window + 2u)
        return PB_ERR_PARAM;

    uint32_t share = c->share;
    if (share == 0u)
        share = pb_kvcache_pyramid_budget(c->budget, c->layer, c->num_layers,
                                          c->pyramid_ratio);
    uint32_t effective =
        share > c->recent_window ? share : c->recent_window + 1u;
    uint64_t capacity = c->capacity;
    if (capacity == 0u)
        capacity = (uint64_t)(effective > c->budget ? effective : c->budget) + 1u;
    if ((uint64_t)c->sinks + c->recent_window >= capacity) return PB_ERR_PARAM;
    if (capacity > REF_MAX_CAPACITY || c->obs_window > 4096u)
        return PB_ERR_TOO_LARGE;

    r->params.budget = c->budget;
    r->params.layer = c->layer;
    r->params.num_layers = c->num_layers;
    r->params.pyramid_ratio = c->pyramid_ratio;
    r->params.recent_window = c->recent_window;
    r->params.obs_window = c->obs_window;
    r->params.pool_kernel = c->pool_kernel;
    r->pool = c->pool;
    r->scorer = c->scorer;
    r->sinks = c->sinks;
    r->effective = effective;
    r->capacity = (size_t)capacity;
    r->pos = malloc(r->capacity * sizeof *r->pos);
    r->ring = malloc(r->capacity * c->obs_window * sizeof *r->ring);
    r->scratch = malloc(r->capacity * sizeof *r->scratch);
    r->pooled = malloc(r->capacity * sizeof *r->pooled);
    r->gone = malloc(r->capacity);
    r->cum = malloc(r->capacity * sizeof *r->cum);
    r->last = malloc(r->capacity * sizeof *r->last);
    r->observed = malloc(r->capacity);
    r->votes = malloc(r->capacity * sizeof *r->votes);
    if (!r->pos || !r->ring || !r->scratch || !r->pooled || !r->gone ||
        !r->cum || !r->last || !r->observed || !r->votes) {
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
    free(r->cum);
    free(r->last);
    free(r->observed);
    free(r->votes);
    memset(r, 0, sizeof *r);
}

/* A new held position at index i: nothing observed, every score 0. */
static void clear_at(ref_policy *r, size_t i) {
    memset(ring_of(r, i), 0, r->params.obs_window * sizeof(float));
    r->cum[i] = 0.0;
    r->last[i] = 0.0f;
    r->observed[i] = 0;
    r->votes[i] = 0;
}

void ref_reset(ref_policy *r) {
    r->kept = 1;
    r->slot = 0;
    r->pos[0] = 0;
    clear_at(r, 0);
}

static uint32_t bits_of(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return b;
}

pb_status ref_observe(ref_policy *r, uint32_t pos, const float *attn,
                      size_t attn_len) {
    if (r->kept > 0 && pos <= r->pos[r->kept - 1]) return PB_ERR_POSITION;
    if (attn != NULL) {
        if (attn_len != r->kept) return PB_ERR_LENGTH;
        for (size_t i = 0; i < attn_len; ++i)
            if (!pbt_weight_valid(attn[i])) return PB_ERR_WEIGHT;
    }
    if (r->kept >= r->capacity) return PB_ERR_FULL;

    if (attn != NULL) {
        /* Every scorer's record, whichever this instance ranks by. */
        for (size_t i = 0; i < r->kept; ++i)
            ring_of(r, i)[r->slot] = attn[i];
        r->slot = (r->slot + 1u) % r->params.obs_window;
        for (size_t i = 0; i < r->kept; ++i) r->cum[i] += (double)attn[i];
        for (size_t i = 0; i < r->kept; ++i) {
            /* -0.0 is recorded as the 0.0 it equals (told by its bits: a
             * float compare under x86's denormals-are-zero mode would take
             * a subnormal for 0 too). */
            r->last[i] = bits_of(attn[i]) == 0x80000000u ? 0.0f : attn[i];
            r->observed[i] = 1;
        }
        if (attn_len > 0) {
            const double share = 1.0 / (double)attn_len;
            for (size_t i = 0; i < r->kept; ++i)
                if ((double)attn[i] > share && r->votes[i] < UINT32_MAX)
                    r->votes[i] += 1u;
        }
    }
    r->pos[r->kept] = pos;
    clear_at(r, r->kept);
    r->kept += 1;
    return PB_OK;
}

static double window_score_at(const ref_policy *r, size_t i) {
    double sum = 0.0;
    for (uint32_t s = 0; s < r->params.obs_window; ++s)
        sum += (double)ring_of(r, i)[s];
    return sum;
}

static size_t index_of(const ref_policy *r, uint32_t pos) {
    for (size_t i = 0; i < r->kept; ++i)
        if (r->pos[i] == pos) return i;
    return r->kept;
}

pb_status ref_window_score(const ref_policy *r, uint32_t pos, double *score) {
    if (r->scorer != (uint32_t)PB_SCORER_WINDOW) return PB_ERR_PARAM;
    const size_t i = index_of(r, pos);
    if (i == r->kept) return PB_ERR_NOT_HELD;
    *score = window_score_at(r, i);
    return PB_OK;
}

pb_status ref_score(const ref_policy *r, uint32_t pos, double *score) {
    const size_t i = index_of(r, pos);
    if (i == r->kept) return PB_ERR_NOT_HELD;
    switch (r->scorer) {
    case PB_SCORER_WINDOW: *score = window_score_at(r, i); break;
    case PB_SCORER_CUMULATIVE: *score = r->cum[i]; break;
    case PB_SCORER_LAST:
        *score = r->observed[i] ? (double)r->last[i] : -1.0;
        break;
    case PB_SCORER_VOTES: *score = (double)r->votes[i]; break;
    default: *score = 0.0; break;
    }
    return PB_OK;
}

size_t ref_sink_count(const ref_policy *r) {
    size_t n = 0;
    for (size_t i = 0; i < r->kept; ++i)
        if (r->pos[i] < r->sinks) n += 1;
    return n;
}

/* The window scorer's pooled scores into r->pooled. */
static void pool_window_scores(ref_policy *r) {
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
}

pb_status ref_evict(ref_policy *r, uint32_t budget, uint32_t *victims,
                    size_t victims_cap, size_t *n_victims) {
    const size_t target = budget < r->effective ? budget : r->effective;
    if (r->kept <= target) {
        *n_victims = 0;
        return PB_OK;
    }
    /* gone[i] = 2 marks a protected position: one of the newest
     * recent_window, a sink, or (last scorer) never observed. */
    const size_t recent = r->params.recent_window < r->kept
                              ? r->params.recent_window
                              : r->kept;
    size_t evictable = 0;
    for (size_t i = 0; i < r->kept; ++i) {
        int protect = i >= r->kept - recent || r->pos[i] < r->sinks;
        if (r->scorer == (uint32_t)PB_SCORER_LAST && !r->observed[i])
            protect = 1;
        r->gone[i] = protect ? 2 : 0;
        if (!protect) evictable += 1;
    }
    size_t needed = r->kept - target;
    if (needed > evictable) needed = evictable;
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }

    /* The key each scorer ranks by (none: all equal, so the ties rule
     * takes the oldest). */
    if (r->scorer == (uint32_t)PB_SCORER_WINDOW) pool_window_scores(r);
    for (size_t i = 0; i < r->kept; ++i) {
        switch (r->scorer) {
        case PB_SCORER_WINDOW: break;
        case PB_SCORER_CUMULATIVE: r->pooled[i] = r->cum[i]; break;
        case PB_SCORER_LAST:
            /* The record's bit pattern, which orders as its value does
             * (records are >= +0) and, unlike a conversion, the same in
             * any floating-point environment, as the library ranks. */
            r->pooled[i] = (double)bits_of(r->last[i]);
            break;
        case PB_SCORER_VOTES: r->pooled[i] = (double)r->votes[i]; break;
        default: r->pooled[i] = 0.0; break;
        }
    }

    /* One full scan per victim: the lowest key among the evictable
     * positions not yet chosen; on equal keys the lower position. */
    for (size_t v = 0; v < needed; ++v) {
        size_t best = r->kept;
        for (size_t i = 0; i < r->kept; ++i) {
            if (r->gone[i]) continue;
            if (best == r->kept || r->pooled[i] < r->pooled[best]) best = i;
        }
        r->gone[best] = 1;
    }

    size_t n = 0, w = 0;
    for (size_t i = 0; i < r->kept; ++i) {
        if (r->gone[i] == 1) {
            victims[n++] = r->pos[i];
            continue;
        }
        if (w != i) {
            r->pos[w] = r->pos[i];
            memcpy(ring_of(r, w), ring_of(r, i),
                   r->params.obs_window * sizeof(float));
            r->cum[w] = r->cum[i];
            r->last[w] = r->last[i];
            r->observed[w] = r->observed[i];
            r->votes[w] = r->votes[i];
        }
        ++w;
    }
    r->kept = w;
    *n_victims = n;
    return PB_OK;
}
