/*
 * workload_harness.c - the lockstep multi-layer harness (see
 * workload_harness.h). For every step t and every layer it generates the
 * layer's weights once, finds the top-k set once, then for every
 * configuration: shows the policy the weights of its held positions
 * (ascending, not renormalised), measures retained mass and hits before the
 * policy acts, records the step, admits t and evicts down to the layer's
 * effective share if it holds more. The harness keeps its own copy of the
 * held positions, updated from the victims the policy reports.
 */
#include "workload_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload_metrics.h"

/* One policy instance: a (configuration, layer) pair. */
typedef struct slot {
    pb_kvcache *policy;
    uint32_t *kept;          /* [positions] held positions, ascending */
    unsigned char *held;     /* [positions] 1 if held */
    size_t n_kept;
} slot;

typedef struct run_state {
    pb_wl_trace *traces; /* [layers] */
    slot *slots;         /* [n_configs * layers] */
    float *weights;      /* [positions], then attn's [positions] (one block) */
    float *attn;         /* [positions] */
    uint32_t *victims;   /* [positions] */
    uint64_t *held_now;  /* [n_configs] */
    size_t n_slots;
    uint32_t layers;
    const pb_kvcache_vtable *vtable; /* NULL: the native surface */
} run_state;

static void policy_destroy(const run_state *s, pb_kvcache *policy) {
    if (s->vtable != NULL)
        s->vtable->destroy(policy);
    else
        pb_kvcache_destroy(policy);
}

static void fail(char *err, size_t err_len, const char *fmt, ...) {
    if (err == NULL || err_len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

static void state_free(run_state *s) {
    if (s->slots != NULL) {
        for (size_t i = 0; i < s->n_slots; ++i) {
            if (s->slots[i].policy != NULL)
                policy_destroy(s, s->slots[i].policy);
            free(s->slots[i].kept);
            free(s->slots[i].held);
        }
    }
    if (s->traces != NULL)
        for (uint32_t l = 0; l < s->layers; ++l) pb_wl_trace_free(&s->traces[l]);
    free(s->slots);
    free(s->traces);
    free(s->weights); /* and attn */
    free(s->victims);
    free(s->held_now);
    memset(s, 0, sizeof *s);
}

void pb_wl_result_free(pb_wl_result *results, size_t n) {
    if (results == NULL) return;
    for (size_t i = 0; i < n; ++i) {
        free(results[i].layers);
        results[i].layers = NULL;
    }
}

static int check_params(const pb_wl_run_params *p, char *err, size_t err_len) {
    if (p->configs == NULL || p->n_configs == 0) {
        fail(err, err_len, "no policy or no configuration to run");
        return -1;
    }
    if (pb_wl_profile_name(p->profile) == NULL) {
        fail(err, err_len, "unknown trace profile");
        return -1;
    }
    if (p->layers == 0u || p->layers > PB_WL_MAX_LAYERS) {
        fail(err, err_len, "layers must be 1 .. %u", PB_WL_MAX_LAYERS);
        return -1;
    }
    if (p->positions < 2u || p->positions > PB_WL_POSITIONS * 16u) {
        fail(err, err_len, "positions must be 2 .. %u", PB_WL_POSITIONS * 16u);
        return -1;
    }
    if ((unsigned)p->params_kind > (unsigned)PB_WL_PARAMS_NATIVE ||
        (p->vtable == NULL) != (p->params_kind == PB_WL_PARAMS_NATIVE)) {
        fail(err, err_len, "a vtable is needed by every kind but the native "
             "one, which takes none");
        return -1;
    }
    const uint32_t floor = pb_wl_floor_of(p->params_kind, p->recent_window,
                                          p->sinks);
    for (size_t c = 0; c < p->n_configs; ++c) {
        const pb_wl_config *cf = &p->configs[c];
        if (cf->budget < floor || cf->budget == UINT32_MAX) {
            fail(err, err_len, "budget %u must be at least %u (the recent "
                 "window or the sinks, plus one)", cf->budget, floor);
            return -1;
        }
        if (cf->ratio == 0u) {
            fail(err, err_len, "ratio must be at least 1");
            return -1;
        }
    }
    return 0;
}

uint32_t pb_wl_floor_of(pb_wl_params_kind kind, uint32_t recent_window,
                        uint32_t sinks) {
    switch (kind) {
    case PB_WL_PARAMS_TOVA:
    case PB_WL_PARAMS_SLIDING_WINDOW:
        return 1u;
    case PB_WL_PARAMS_STREAMING_LLM:
        return sinks + 1u;
    default:
        return recent_window + 1u;
    }
}

/* The vtables of the policybook family that take {budget, ...} only. */
static pb_kvcache *create_family(const pb_wl_run_params *p,
                                 uint32_t effective) {
    switch (p->params_kind) {
    case PB_WL_PARAMS_H2O: {
        pb_kvcache_h2o_params hp = {effective, p->recent_window};
        return p->vtable->create(&hp, NULL, NULL);
    }
    case PB_WL_PARAMS_SCISSORHANDS: {
        pb_kvcache_scissorhands_params sp = {effective, p->recent_window};
        return p->vtable->create(&sp, NULL, NULL);
    }
    case PB_WL_PARAMS_TOVA: {
        pb_kvcache_tova_params tp = {effective};
        return p->vtable->create(&tp, NULL, NULL);
    }
    case PB_WL_PARAMS_STREAMING_LLM: {
        pb_kvcache_streaming_llm_params sp = {effective, p->sinks};
        return p->vtable->create(&sp, NULL, NULL);
    }
    default: {
        pb_kvcache_sliding_window_params wp = {effective};
        return p->vtable->create(&wp, NULL, NULL);
    }
    }
}

static pb_kvcache *create_policy(const pb_wl_run_params *p,
                                 const pb_wl_config *cf, uint32_t layer,
                                 uint32_t effective, const uint32_t *shares) {
    /* An explicit share: 0 would mean "the formula" to pb_kvcache_create;
     * 1 gives the same effective share (the floor). */
    const uint32_t share =
        shares != NULL ? (shares[layer] != 0u ? shares[layer] : 1u) : 0u;
    if (p->params_kind == PB_WL_PARAMS_NATIVE ||
        (shares != NULL && p->params_kind == PB_WL_PARAMS_PYRAMIDKV)) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.budget = cf->budget;
        c.layer = layer;
        c.num_layers = p->layers;
        c.pyramid_ratio = cf->ratio;
        c.share = share;
        c.recent_window = p->recent_window;
        c.obs_window = p->obs_window;
        c.pool_kernel = p->pool_kernel;
        if (p->params_kind == PB_WL_PARAMS_NATIVE) {
            c.scorer = p->scorer;
            c.sinks = p->sinks;
        }
        pb_kvcache *policy = NULL;
        return pb_kvcache_create(&c, NULL, &policy) == PB_OK ? policy : NULL;
    }
    if (p->params_kind != PB_WL_PARAMS_PYRAMIDKV &&
        p->params_kind != PB_WL_PARAMS_SNAPKV)
        return create_family(p, effective);
    if (p->params_kind == PB_WL_PARAMS_SNAPKV) {
        pb_kvcache_snapkv_params sp = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
        sp.budget = effective;
        sp.recent_window = p->recent_window;
        sp.obs_window = p->obs_window;
        sp.pool_kernel = p->pool_kernel;
        return p->vtable->create(&sp, NULL, NULL);
    }
    pb_kvcache_pyramidkv_params pp = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    pp.budget = cf->budget;
    pp.layer = layer;
    pp.num_layers = p->layers;
    pp.pyramid_ratio = cf->ratio;
    pp.recent_window = p->recent_window;
    pp.obs_window = p->obs_window;
    pp.pool_kernel = p->pool_kernel;
    return p->vtable->create(&pp, NULL, NULL);
}

static int setup(const pb_wl_run_params *p, run_state *s, pb_wl_result *res,
                 char *err, size_t err_len) {
    const uint32_t L = p->layers, P = p->positions;
    s->layers = L;
    s->vtable = p->vtable;
    s->n_slots = p->n_configs * L;
    s->traces = calloc(L, sizeof *s->traces);
    s->slots = calloc(s->n_slots, sizeof *s->slots);
    s->weights = malloc(2u * (size_t)P * sizeof *s->weights);
    s->attn = s->weights != NULL ? s->weights + P : NULL;
    s->victims = malloc((size_t)P * sizeof *s->victims);
    s->held_now = calloc(p->n_configs, sizeof *s->held_now);
    if (!s->traces || !s->slots || !s->weights || !s->victims ||
        !s->held_now) {
        fail(err, err_len, "out of memory");
        return -1;
    }
    for (uint32_t l = 0; l < L; ++l) {
        pb_wl_shape shape;
        if (pb_wl_layer_shape(p->profile, l, L, &shape) != 0 ||
            pb_wl_trace_init(&s->traces[l], &shape, P) != 0) {
            fail(err, err_len, "cannot build the trace of layer %u", l);
            return -1;
        }
    }
    for (size_t c = 0; c < p->n_configs; ++c) {
        pb_wl_result *r = &res[c];
        r->config = p->configs[c];
        r->layers = calloc(L, sizeof *r->layers);
        if (r->layers == NULL) {
            fail(err, err_len, "out of memory");
            return -1;
        }
        const uint32_t *shares = p->shares != NULL ? p->shares[c] : NULL;
        for (uint32_t l = 0; l < L; ++l) {
            pb_wl_layer_stats *ls = &r->layers[l];
            ls->share = shares != NULL
                            ? shares[l]
                            : pb_kvcache_pyramid_budget(r->config.budget, l,
                                                        L, r->config.ratio);
            const uint32_t floor =
                pb_wl_floor_of(p->params_kind, p->recent_window, p->sinks);
            ls->effective = ls->share > floor ? ls->share : floor;

            slot *sl = &s->slots[c * L + l];
            sl->kept = malloc((size_t)P * sizeof *sl->kept);
            sl->held = calloc(P, 1);
            if (sl->kept == NULL || sl->held == NULL) {
                fail(err, err_len, "out of memory");
                return -1;
            }
            sl->policy =
                create_policy(p, &r->config, l, ls->effective, shares);
            if (sl->policy == NULL) {
                fail(err, err_len, "the policy refused budget %u ratio %u "
                     "layer %u (or ran out of memory)", r->config.budget,
                     r->config.ratio, l);
                return -1;
            }
            if (p->params_kind == PB_WL_PARAMS_NATIVE)
                ls->effective = pb_kvcache_effective_budget(sl->policy);
            r->share_total += ls->share;
            r->effective_total += ls->effective;
            if (ls->effective > ls->share) r->floors_binding += 1u;
            sl->kept[0] = 0;
            sl->held[0] = 1;
            sl->n_kept = 1;
        }
    }
    return 0;
}

/* Removes the ascending victims[0 .. n-1] from the slot's held list;
 * returns -1 if one of them was not held. */
static int remove_victims(slot *sl, const uint32_t *victims, size_t n) {
    size_t w = 0, v = 0;
    for (size_t i = 0; i < sl->n_kept; ++i) {
        if (v < n && sl->kept[i] == victims[v]) {
            sl->held[victims[v]] = 0;
            ++v;
            continue;
        }
        sl->kept[w++] = sl->kept[i];
    }
    if (v != n) return -1;
    sl->n_kept = w;
    return 0;
}

/* How many positions an evict down to `target` drops (docs/spec.md
 * §13.4): all above the target, but never one of the protected newest or a
 * sink, so a native instance whose sinks and recent window together hold
 * more than its share stays above it. Only position t, admitted by this
 * step, is unobserved here (every step observes every held position). */
static size_t evictable_want(const pb_wl_run_params *p, const slot *sl,
                             size_t target) {
    const size_t held = sl->n_kept;
    size_t want = held - target;
    if (p->params_kind != PB_WL_PARAMS_NATIVE) return want;
    size_t newest = p->recent_window < held ? p->recent_window : held;
    if (p->scorer == (uint32_t)PB_SCORER_LAST && newest < 1u) newest = 1u;
    size_t sinks = 0;
    while (sinks < held && sl->kept[sinks] < p->sinks) ++sinks;
    const size_t end = held - newest;
    const size_t first = sinks < end ? sinks : end;
    if (end - first < want) want = end - first;
    return want;
}

/* One (configuration, layer) step: measure, observe, admit, evict. Adds
 * the count held right after admitting t to *held_total. */
static int step_slot(const pb_wl_run_params *p, run_state *s, slot *sl,
                     pb_wl_layer_stats *ls, uint32_t t, const uint32_t *top,
                     uint32_t n_top, uint64_t *held_total, char *err,
                     size_t err_len) {
    double retained = 0.0;
    for (size_t i = 0; i < sl->n_kept; ++i) {
        s->attn[i] = s->weights[sl->kept[i]];
        retained += (double)s->attn[i];
    }
    uint32_t hits = 0;
    for (uint32_t j = 0; j < n_top; ++j) hits += sl->held[top[j]];
    ls->retained_sum += retained;
    ls->hits += hits;
    ls->hit_slots += n_top;

    if (s->vtable != NULL) {
        s->vtable->on_decode_step(sl->policy, t, s->attn, sl->n_kept);
    } else {
        const pb_status st =
            pb_kvcache_observe(sl->policy, t, s->attn, sl->n_kept);
        if (st != PB_OK) {
            fail(err, err_len, "step %u: pb_kvcache_observe: %s", t,
                 pb_status_str(st));
            return -1;
        }
    }
    sl->kept[sl->n_kept++] = t;
    sl->held[t] = 1;
    if (sl->n_kept > ls->peak_held) ls->peak_held = (uint32_t)sl->n_kept;
    *held_total += sl->n_kept;

    if (sl->n_kept > ls->effective) {
        const size_t want = evictable_want(p, sl, ls->effective);
        size_t got = 0;
        if (s->vtable != NULL) {
            got = s->vtable->evict(sl->policy, ls->effective, s->victims,
                                   p->positions);
        } else {
            const pb_status st = pb_kvcache_evict(
                sl->policy, ls->effective, s->victims, p->positions, &got);
            if (st != PB_OK) {
                fail(err, err_len, "step %u: pb_kvcache_evict: %s", t,
                     pb_status_str(st));
                return -1;
            }
        }
        ls->evictions += 1u;
        if (got != want || remove_victims(sl, s->victims, got) != 0) {
            fail(err, err_len, "step %u: the policy evicted %zu positions, "
                 "expected %zu held ones", t, got, want);
            return -1;
        }
    }
    if (p->kept_count != NULL && p->kept_count(sl->policy) != sl->n_kept) {
        fail(err, err_len, "step %u: the policy holds %zu positions, the "
             "harness counts %zu (a decode step was refused?)", t,
             p->kept_count(sl->policy), sl->n_kept);
        return -1;
    }
    return 0;
}

/* Turns the sums into the reported figures. */
static void finish(const pb_wl_run_params *p, pb_wl_result *r) {
    const double steps = (double)(p->positions - 1u);
    double mass_sum = 0.0;
    uint64_t hits = 0, slots = 0;
    for (uint32_t l = 0; l < p->layers; ++l) {
        pb_wl_layer_stats *ls = &r->layers[l];
        ls->mass = pb_wl_round6(ls->retained_sum / steps);
        ls->recall = ls->hit_slots == 0u
                         ? 0.0
                         : pb_wl_round6((double)ls->hits /
                                        (double)ls->hit_slots);
        mass_sum += ls->retained_sum / steps;
        hits += ls->hits;
        slots += ls->hit_slots;
        r->evictions += ls->evictions;
    }
    r->mass = pb_wl_round6(mass_sum / (double)p->layers);
    r->recall = slots == 0u ? 0.0 : pb_wl_round6((double)hits / (double)slots);
}

int pb_wl_run(const pb_wl_run_params *p, pb_wl_result *results,
              pb_wl_layer_info *info, char *err, size_t err_len) {
    if (p == NULL || results == NULL) {
        fail(err, err_len, "no parameters or no results");
        return -1;
    }
    if (check_params(p, err, err_len) != 0) return -1;
    memset(results, 0, p->n_configs * sizeof *results);
    run_state s;
    memset(&s, 0, sizeof s);
    double *entropy = NULL;
    if (setup(p, &s, results, err, err_len) != 0) goto failed;
    const uint32_t L = p->layers, steps = p->positions - 1u;
    if (info != NULL) {
        entropy = calloc(L, sizeof *entropy);
        if (entropy == NULL) {
            fail(err, err_len, "out of memory");
            goto failed;
        }
    }

    uint32_t top[PB_WL_TOPK];
    for (uint32_t t = 1; t <= steps; ++t) {
        memset(s.held_now, 0, p->n_configs * sizeof *s.held_now);
        for (uint32_t l = 0; l < L; ++l) {
            pb_wl_trace_next(&s.traces[l], s.weights);
            const uint32_t n_top =
                pb_wl_top_positions(s.weights, t, PB_WL_TOPK, top);
            if (entropy != NULL) entropy[l] += pb_wl_entropy(s.weights, t);
            for (size_t c = 0; c < p->n_configs; ++c)
                if (step_slot(p, &s, &s.slots[c * L + l],
                              &results[c].layers[l], t, top, n_top,
                              &s.held_now[c], err, err_len) != 0)
                    goto failed;
        }
        for (size_t c = 0; c < p->n_configs; ++c)
            if (s.held_now[c] > results[c].peak_held)
                results[c].peak_held = s.held_now[c];
        if (p->progress != NULL) p->progress(p->progress_ctx, t, steps);
    }

    for (size_t c = 0; c < p->n_configs; ++c) finish(p, &results[c]);
    if (info != NULL)
        for (uint32_t l = 0; l < L; ++l) {
            info[l].shape = s.traces[l].shape;
            info[l].entropy = entropy[l] / (double)steps;
        }
    free(entropy);
    state_free(&s);
    return 0;

failed:
    free(entropy);
    state_free(&s);
    pb_wl_result_free(results, p->n_configs);
    return -1;
}
