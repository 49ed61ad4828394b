/*
 * pkm_cache.c - libpyramidkv driving the K/V cache of the bench/model
 * decoder: sizing, prefill compression, per-step observation, eviction and
 * compaction. See pkm_cache.h and docs/model.md ("The integration").
 */
#include "pkm_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pkm_cache_free(pkm_cache *kc)
{
    const size_t n = (size_t)kc->n_layers * kc->n_kv;
    if (kc->pol)
        for (size_t i = 0; i < n; i++) pb_kvcache_destroy(kc->pol[i]);
    if (kc->grp)
        for (uint32_t l = 0; l < kc->n_layers; l++)
            pb_kvcache_group_destroy(kc->grp[l]);
    free(kc->grp);
    free(kc->counts);
    free(kc->lens);
    if (kc->slots)
        for (size_t i = 0; i < n; i++) {
            if (kc->slots[i].row) { /* a view: its store is freed below */
                kc->slots[i].k = NULL;
                kc->slots[i].v = NULL;
            }
            pkm_slot_free(&kc->slots[i]);
        }
    if (kc->store)
        for (uint32_t l = 0; l < kc->n_layers; l++) free(kc->store[l]);
    free(kc->store);
    free(kc->store_rows);
    free(kc->pol);
    free(kc->slots);
    free(kc->shares);
    free(kc->red);
    free(kc->idx);
    memset(kc, 0, sizeof *kc);
}

/* The head configuration every instance of layer l starts from. */
static pb_kvcache_config head_config(const pkm_cache *kc,
                                     const pkm_cache_params *p, uint32_t l)
{
    pb_kvcache_config cfg = PB_KVCACHE_CONFIG_DEFAULT;
    cfg.budget = p->budget;
    cfg.layer = l;
    cfg.num_layers = kc->n_layers;
    cfg.pyramid_ratio = 1;
    cfg.share = kc->shares[l] > p->recent_window ? kc->shares[l]
                                                : p->recent_window + 1;
    cfg.recent_window = p->recent_window;
    cfg.obs_window = p->obs_window;
    cfg.pool_kernel = p->pool_kernel;
    cfg.scorer = p->method->scorer;
    cfg.sinks = p->method->sinks;
    return cfg;
}

/* Layer l of a head-adaptive row: one group over the layer's KV heads,
 * its pool n_kv x the layer's share. With the window scorer the layer's
 * K/V is pooled (pooled_rows): one store of pool_rows = layer_total +
 * n_kv x cadence rows, each head's slot a view of it through the rows the
 * group gives. A replayed prompt is held whole before its one evict, so
 * the group's slack must cover it and the pool would too: those rows keep
 * per-head slots sized to the most a head holds between evicts (head_max
 * + cadence). Returns 0, 1 (refused) or -1. */
static int group_init(pkm_cache *kc, const pkm_cache_params *p, uint32_t l,
                      char *err, size_t errlen)
{
    pb_kvcache_config cfg = head_config(kc, p, l);
    pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    gp.num_heads = kc->n_kv;
    gp.slack = kc->replay ? p->max_len : kc->cadence;
    gp.prefill_max_len = kc->replay ? 0 : p->max_len;
    gp.pooled_rows = kc->replay ? 0u : 1u;
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    pb_status st = pb_kvcache_group_plan(&cfg, &gp, &info);
    if (st == PB_OK) st = pb_kvcache_group_create(&cfg, &gp, NULL, &kc->grp[l]);
    if (st != PB_OK) {
        snprintf(err, errlen, "pb_kvcache_group_create: %s", pb_status_str(st));
        return st == PB_ERR_PARAM ? 1 : -1;
    }
    if (gp.pooled_rows) {
        const uint32_t rows = (uint32_t)info.pool_rows;
        const size_t hd = kc->head_dim;
        kc->store_rows[l] = rows;
        kc->store[l] = malloc(2u * (size_t)rows * hd * sizeof(float));
        if (!kc->store[l]) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
            s->cap = info.head_capacity;
            s->n = 0;
            s->k = kc->store[l];
            s->v = kc->store[l] + (size_t)rows * hd;
            s->pos = malloc((size_t)s->cap * sizeof *s->pos);
            s->row = malloc((size_t)s->cap * sizeof *s->row);
            s->stage = malloc(2u * hd * sizeof(float));
            if (!s->pos || !s->row || !s->stage) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
        }
        kc->capacity += rows;
        kc->positions += info.layer_total;
        kc->shares[l] = info.head_share;
        return 0;
    }
    for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
        const uint32_t cap = info.head_max + kc->cadence;
        if (pkm_slot_init(&kc->slots[(size_t)l * kc->n_kv + kv], cap,
                          kc->head_dim) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        kc->capacity += cap;
    }
    kc->positions += info.layer_total;
    kc->shares[l] = info.head_share;
    return 0;
}

int pkm_cache_init(pkm_cache *kc, const pkm_model *m,
                   const pkm_cache_params *p, char *err, size_t errlen)
{
    memset(kc, 0, sizeof *kc);
    const pkm_config *c = &m->c;
    kc->n_layers = c->n_layers;
    kc->n_kv = c->n_kv_heads;
    kc->group = c->n_heads / c->n_kv_heads;
    kc->head_dim = c->head_dim;
    kc->cadence = p->cadence ? p->cadence : 1;
    kc->obs_window = p->obs_window;
    kc->replay = p->method && (p->method->scorer != PB_SCORER_WINDOW ||
                               p->method->sinks != 0);
    const size_t n = (size_t)kc->n_layers * kc->n_kv;
    kc->pol = calloc(n, sizeof *kc->pol);
    kc->slots = calloc(n, sizeof *kc->slots);
    kc->shares = calloc(kc->n_layers, sizeof *kc->shares);
    const size_t red_rows = kc->replay ? p->max_len
                            : (p->obs_window > 1 ? p->obs_window : 1);
    const int adaptive = p->method && p->method->adaptive;
    const size_t heads = adaptive ? kc->n_kv : 1;
    kc->red_stride = red_rows * p->max_len;
    kc->red = malloc(heads * kc->red_stride * sizeof(float));
    kc->idx_cap = heads * p->max_len;
    kc->idx = malloc(kc->idx_cap * sizeof *kc->idx);
    kc->counts = calloc(kc->n_kv, sizeof *kc->counts);
    kc->lens = calloc(kc->n_kv, sizeof *kc->lens);
    if (adaptive) {
        kc->grp = calloc(kc->n_layers, sizeof *kc->grp);
        kc->store = calloc(kc->n_layers, sizeof *kc->store);
        kc->store_rows = calloc(kc->n_layers, sizeof *kc->store_rows);
    }
    if (!kc->pol || !kc->slots || !kc->shares || !kc->red || !kc->idx ||
        !kc->counts || !kc->lens ||
        (adaptive && (!kc->grp || !kc->store || !kc->store_rows))) {
        snprintf(err, errlen, "out of memory");
        pkm_cache_free(kc);
        return -1;
    }

    if (!p->method) { /* the full cache: every position, no policy */
        for (uint32_t l = 0; l < kc->n_layers; l++) kc->shares[l] = p->max_len;
        for (size_t i = 0; i < n; i++) {
            if (pkm_slot_init(&kc->slots[i], p->max_len, kc->head_dim) != 0) {
                snprintf(err, errlen, "out of memory");
                pkm_cache_free(kc);
                return -1;
            }
            kc->positions += p->max_len;
            kc->capacity += p->max_len;
        }
        return 0;
    }

    /* 1. The shares: one schedule call sizes every layer. */
    if (p->method->schedule(p->budget, kc->n_layers, p->method->schedule_arg,
                            kc->shares) != 0) {
        snprintf(err, errlen, "schedule not available in this library");
        pkm_cache_free(kc);
        return 1;
    }
    /* 2. One instance per (layer, KV head), its share given explicitly;
     * a head-adaptive row makes one group per layer instead. */
    for (uint32_t l = 0; l < kc->n_layers; l++) {
        if (adaptive) {
            const int r = group_init(kc, p, l, err, errlen);
            if (r != 0) {
                pkm_cache_free(kc);
                return r;
            }
            continue;
        }
        uint32_t hs[64];
        if (p->method->head_shares) {
            /* fixed per-head shares: the layer's n_kv x share apportioned
             * by each head's profile, each at least recent_window + 1 */
            const pb_kvcache_config c0 = head_config(kc, p, l);
            if (!pkm_head_profile || kc->n_kv > 64 ||
                pb_profile_head_shares(pkm_head_profile, l, kc->n_kv,
                                       c0.share, p->recent_window + 1,
                                       900000u, hs, 64) != PB_OK) {
                snprintf(err, errlen, "per-head shares not available");
                pkm_cache_free(kc);
                return 1;
            }
        }
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            pb_kvcache_config cfg = head_config(kc, p, l);
            if (p->method->head_shares) cfg.share = hs[kv];
            /* room for `cadence` admissions past the share between evicts;
             * a replayed prompt is held whole before its one evict */
            const uint32_t floor_ = cfg.sinks + cfg.recent_window;
            const uint32_t slot_cap =
                (cfg.share > floor_ ? cfg.share : floor_) + kc->cadence;
            cfg.capacity = kc->replay ? p->max_len + kc->cadence : slot_cap;
            cfg.prefill_max_len = kc->replay ? 0 : p->max_len;
            pb_kvcache **pp = &kc->pol[(size_t)l * kc->n_kv + kv];
            const pb_status st = pb_kvcache_create(&cfg, NULL, pp);
            if (st != PB_OK) {
                snprintf(err, errlen, "pb_kvcache_create: %s",
                         pb_status_str(st));
                pkm_cache_free(kc);
                return st == PB_ERR_PARAM ? 1 : -1;
            }
            /* 3. The K/V slot holds what the instance may hold during
             * decode: its share (or its sinks and recent window, which an
             * evict never drops) plus the admissions between evicts. */
            const size_t cap = slot_cap;
            if (pkm_slot_init(&kc->slots[(size_t)l * kc->n_kv + kv],
                              (uint32_t)cap, kc->head_dim) != 0) {
                snprintf(err, errlen, "out of memory");
                pkm_cache_free(kc);
                return -1;
            }
            /* held between evicts: the effective share, or the sinks and
             * recent window when they exceed it */
            kc->positions += slot_cap - kc->cadence;
            kc->capacity += cap;
        }
        kc->shares[l] = pb_kvcache_effective_budget(kc->pol[(size_t)l * kc->n_kv]);
    }
    return 0;
}

int pkm_cache_reset(pkm_cache *kc)
{
    const size_t n = (size_t)kc->n_layers * kc->n_kv;
    for (size_t i = 0; i < n; i++) {
        kc->slots[i].n = 0;
        if (kc->pol[i] && pb_kvcache_reset(kc->pol[i]) != PB_OK) return -1;
    }
    for (uint32_t l = 0; kc->grp && l < kc->n_layers; l++)
        if (pb_kvcache_group_reset(kc->grp[l]) != PB_OK) return -1;
    kc->since_evict = 0;
    return 0;
}

/* Copies the rows of `src` whose positions are in keep[0 .. nk-1]
 * (ascending; every one present in src) to dst. */
static void gather(pkm_slot *dst, const pkm_slot *src, const uint32_t *keep,
                   size_t nk, uint32_t hd)
{
    size_t j = 0;
    dst->n = 0;
    for (uint32_t i = 0; i < src->n && j < nk; i++) {
        if (src->pos[i] != keep[j]) continue;
        memcpy(dst->k + (size_t)dst->n * hd, src->k + (size_t)i * hd,
               hd * sizeof(float));
        memcpy(dst->v + (size_t)dst->n * hd, src->v + (size_t)i * hd,
               hd * sizeof(float));
        dst->pos[dst->n++] = src->pos[i];
        j++;
    }
}

/* Removes the rows of the victims (ascending positions) in place. */
static void compact(pkm_slot *s, const uint32_t *victims, size_t nv,
                    uint32_t hd)
{
    size_t j = 0, w = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (j < nv && s->pos[i] == victims[j]) {
            j++;
            continue;
        }
        if (w != i) {
            memmove(s->k + w * hd, s->k + (size_t)i * hd, hd * sizeof(float));
            memmove(s->v + w * hd, s->v + (size_t)i * hd, hd * sizeof(float));
            s->pos[w] = s->pos[i];
        }
        w++;
    }
    s->n = (uint32_t)w;
}

/* The prompt as decode steps, for scorers without a one-shot prefill:
 * positions before the first row are admitted unobserved, row j (the token
 * at q = len - rows + j) observes positions 0 .. q-1, then one evict down
 * to the share. The instance must be fresh and hold len positions. */
static int replay_prompt(pb_kvcache *pol, const float *red, uint32_t rows,
                         uint32_t len, uint32_t *victims)
{
    const uint32_t first = len - rows;
    for (uint32_t q = 1; q < len; q++) {
        const float *row = q >= first ? red + (size_t)(q - first) * len : NULL;
        if (pb_kvcache_observe(pol, q, row, row ? q : 0) != PB_OK) return -1;
    }
    size_t nv = 0;
    return pb_kvcache_evict(pol, UINT32_MAX, victims, len, &nv) == PB_OK ? 0
                                                                          : -1;
}

/* A pooled layer's views after the group changed its heads: each head's
 * held positions and their store rows, in held order (no K/V moves). */
static int sync_pooled(pkm_cache *kc, uint32_t l)
{
    for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
        pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
        size_t n = 0, nr = 0;
        if (pb_kvcache_kept_positions(pb_kvcache_group_head(kc->grp[l], kv),
                                      s->pos, s->cap, &n) != PB_OK ||
            pb_kvcache_group_head_rows(kc->grp[l], kv, s->row, s->cap, &nr) !=
                PB_OK ||
            n != nr)
            return -1;
        s->n = (uint32_t)n;
    }
    return 0;
}

/* A pooled layer after its prefill: every survivor's K/V copied from
 * `full` (positions 0 .. len-1 in order) to the row the group gave it. */
static int gather_pooled(pkm_cache *kc, const pkm_slot *full, uint32_t l)
{
    const size_t hd = kc->head_dim;
    if (sync_pooled(kc, l) != 0) return -1;
    for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
        const size_t si = (size_t)l * kc->n_kv + kv;
        const pkm_slot *s = &kc->slots[si];
        const pkm_slot *f = &full[si];
        for (uint32_t i = 0; i < s->n; i++) {
            const uint32_t at = s->pos[i];
            if (at >= f->n || f->pos[at] != at) return -1;
            memcpy(s->k + (size_t)s->row[i] * hd, f->k + (size_t)at * hd,
                   hd * sizeof(float));
            memcpy(s->v + (size_t)s->row[i] * hd, f->v + (size_t)at * hd,
                   hd * sizeof(float));
        }
    }
    return 0;
}

/* Gathers every head of layer l from `full` by its instance's kept
 * positions (a head-adaptive row). */
static int gather_group(pkm_cache *kc, const pkm_slot *full, uint32_t l,
                        uint32_t len)
{
    if (kc->store && kc->store[l]) return gather_pooled(kc, full, l);
    for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
        const size_t si = (size_t)l * kc->n_kv + kv;
        size_t nk = 0;
        if (pb_kvcache_kept_positions(pb_kvcache_group_head(kc->grp[l], kv),
                                      kc->idx, len, &nk) != PB_OK ||
            nk > kc->slots[si].cap)
            return -1;
        gather(&kc->slots[si], &full[si], kc->idx, nk, kc->head_dim);
        if (kc->slots[si].n != nk) return -1;
    }
    return 0;
}

/* Layer l of a head-adaptive row at the end of the prompt: every head's
 * group-reduced rows, then the group's one-shot prefill (window scorer) or
 * the prompt replayed as decode steps and one layer-wide evict. */
static int prefill_group(pkm_cache *kc, const pkm_slot *full,
                         const float *rows, uint32_t n_rows, uint32_t len,
                         uint32_t l)
{
    const uint32_t g = kc->group;
    const size_t block = (size_t)n_rows * len;
    const uint32_t use = kc->replay || n_rows < kc->obs_window
                             ? n_rows : kc->obs_window;
    for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
        if (full[(size_t)l * kc->n_kv + kv].n != len) return -1;
        const float *grp = rows + ((size_t)l * kc->n_kv * g + (size_t)kv * g) * block;
        if (pb_kvcache_head_reduce(grp + (size_t)(n_rows - use) * len, g, block,
                                   (size_t)use * len, PB_HEAD_REDUCE_MEAN,
                                   kc->red + kv * kc->red_stride) != PB_OK)
            return -1;
    }
    pb_kvcache_group *gr = kc->grp[l];
    size_t n = 0;
    if (!kc->replay) {
        if (pb_kvcache_group_prefill(gr, kc->red, kc->red_stride, use, len,
                                     UINT64_MAX, NULL, 0, NULL, 0, kc->counts,
                                     kc->n_kv, &n) != PB_OK)
            return -1;
        return gather_group(kc, full, l, len);
    }
    const uint32_t first = len - use;
    for (uint32_t q = 1; q < len; q++) {
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) kc->lens[kv] = q;
        const float *at = q >= first ? kc->red + (size_t)(q - first) * len : NULL;
        if (pb_kvcache_group_observe(gr, q, at, kc->red_stride, kc->lens) !=
            PB_OK)
            return -1;
    }
    if (pb_kvcache_group_evict(gr, UINT64_MAX, kc->idx, kc->idx_cap,
                               kc->counts, kc->n_kv,
                               &n) != PB_OK)
        return -1;
    return gather_group(kc, full, l, len);
}

int pkm_cache_prefill(pkm_cache *kc, const pkm_slot *full, const float *rows,
                      uint32_t n_rows, uint32_t len)
{
    const uint32_t hd = kc->head_dim, g = kc->group;
    const size_t block = (size_t)n_rows * len;
    for (uint32_t l = 0; l < kc->n_layers; l++) {
        if (kc->grp) {
            if (prefill_group(kc, full, rows, n_rows, len, l) != 0) return -1;
            continue;
        }
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            const size_t si = (size_t)l * kc->n_kv + kv;
            pkm_slot *dst = &kc->slots[si];
            const pkm_slot *src = &full[si];
            if (src->n != len) return -1;
            if (!kc->pol[si]) {
                if (len > dst->cap) return -1;
                for (uint32_t i = 0; i < len; i++) kc->idx[i] = i;
                gather(dst, src, kc->idx, len, hd);
                continue;
            }
            /* the group's query heads, [head][row][pos], reduced to one
             * rows x len block (the window scorer: its last obs_window
             * rows only, the ones its ring keeps) */
            const float *grp = rows + ((size_t)l * kc->n_kv * g + (size_t)kv * g) * block;
            const uint32_t use = kc->replay || n_rows < kc->obs_window
                                     ? n_rows : kc->obs_window;
            if (pb_kvcache_head_reduce(grp + (size_t)(n_rows - use) * len, g,
                                       block, (size_t)use * len,
                                       PB_HEAD_REDUCE_MEAN, kc->red) != PB_OK)
                return -1;
            size_t nk = 0;
            if (kc->replay) {
                if (replay_prompt(kc->pol[si], kc->red, use, len, kc->idx) != 0 ||
                    pb_kvcache_kept_positions(kc->pol[si], kc->idx, len, &nk) !=
                        PB_OK)
                    return -1;
            } else if (pb_kvcache_prefill(kc->pol[si], kc->red, use, len,
                                          UINT32_MAX, NULL, 0, kc->idx, len,
                                          NULL, 0, &nk) != PB_OK) {
                return -1;
            }
            if (nk > dst->cap) return -1;
            gather(dst, src, kc->idx, nk, hd);
            if (dst->n != nk) return -1;
        }
    }
    kc->since_evict = 0;
    return 0;
}

/* pkm_cache_after_step for a head-adaptive row: per layer, the heads'
 * reduced attention to one group observe, and a layer-wide evict every
 * `cadence` steps (or when a slot is full). */
static int after_step_group(pkm_cache *kc, const float *attn, size_t stride,
                            uint32_t pos)
{
    const uint32_t g = kc->group, hd = kc->head_dim;
    kc->since_evict++;
    int evict_now = kc->since_evict >= kc->cadence;
    for (uint32_t l = 0; l < kc->n_layers; l++) {
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            const pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
            const float *grp = attn + ((size_t)l * kc->n_kv * g + (size_t)kv * g) * stride;
            kc->lens[kv] = s->n - 1; /* its own row, the last, is not observed */
            if (kc->lens[kv] &&
                pb_kvcache_head_reduce(grp, g, stride, kc->lens[kv],
                                       PB_HEAD_REDUCE_MEAN,
                                       kc->red + kv * kc->red_stride) != PB_OK)
                return -1;
            if (s->n >= s->cap) evict_now = 1;
        }
        if (pb_kvcache_group_observe(kc->grp[l], pos, kc->red, kc->red_stride,
                                     kc->lens) != PB_OK)
            return -1;
        if (kc->store[l]) {
            /* Each head's new token goes from the stage to its row. */
            if (pb_kvcache_group_new_rows(kc->grp[l], kc->idx, kc->n_kv) !=
                PB_OK)
                return -1;
            for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
                pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
                const uint32_t r = kc->idx[kv];
                if (r >= kc->store_rows[l]) return -1;
                memcpy(s->k + (size_t)r * hd, s->stage, hd * sizeof(float));
                memcpy(s->v + (size_t)r * hd, s->stage + hd,
                       hd * sizeof(float));
                s->row[s->n - 1] = r;
            }
        }
    }
    if (!evict_now) return 0;
    kc->since_evict = 0;
    for (uint32_t l = 0; l < kc->n_layers; l++) {
        size_t nv = 0;
        if (pb_kvcache_group_evict(kc->grp[l], UINT64_MAX, kc->idx,
                                   kc->idx_cap,
                                   kc->counts, kc->n_kv, &nv) != PB_OK)
            return -1;
        if (kc->store[l]) { /* the victims' rows are free: views only */
            if (sync_pooled(kc, l) != 0) return -1;
            continue;
        }
        const uint32_t *v = kc->idx;
        for (uint32_t kv = 0; kv < kc->n_kv; kv++) {
            pkm_slot *s = &kc->slots[(size_t)l * kc->n_kv + kv];
            compact(s, v, kc->counts[kv], hd);
            v += kc->counts[kv];
            if (s->n != pb_kvcache_kept_count(pb_kvcache_group_head(kc->grp[l], kv)))
                return -1;
        }
    }
    return 0;
}

int pkm_cache_after_step(pkm_cache *kc, const float *attn, size_t stride,
                         uint32_t pos)
{
    const uint32_t g = kc->group, hd = kc->head_dim;
    const size_t n_slots = (size_t)kc->n_layers * kc->n_kv;
    if (kc->grp) return after_step_group(kc, attn, stride, pos);
    if (!kc->pol[0]) return 0; /* full cache */
    kc->since_evict++;
    int evict_now = kc->since_evict >= kc->cadence;
    for (size_t si = 0; si < n_slots; si++) {
        const uint32_t l = (uint32_t)(si / kc->n_kv), kv = (uint32_t)(si % kc->n_kv);
        pkm_slot *s = &kc->slots[si];
        pb_kvcache *pol = kc->pol[si];
        /* the step's attention over what was held before it (its own row,
         * the last one, is not observed), reduced over the group */
        const float *grp = attn + ((size_t)l * kc->n_kv * g + (size_t)kv * g) * stride;
        const size_t held = s->n - 1;
        const pb_status st =
            held ? pb_kvcache_head_reduce(grp, g, stride, held,
                                          PB_HEAD_REDUCE_MEAN, kc->red)
                 : PB_OK;
        if (st != PB_OK) return -1;
        if (pb_kvcache_observe(pol, pos, held ? kc->red : NULL, held) != PB_OK)
            return -1;
        if (pb_kvcache_kept_count(pol) >= pb_kvcache_capacity(pol) ||
            s->n >= s->cap)
            evict_now = 1;
    }
    if (!evict_now) return 0;
    kc->since_evict = 0;
    for (size_t si = 0; si < n_slots; si++) {
        pkm_slot *s = &kc->slots[si];
        pb_kvcache *pol = kc->pol[si];
        size_t nv = 0;
        if (pb_kvcache_kept_count(pol) <= pb_kvcache_effective_budget(pol))
            continue;
        if (pb_kvcache_evict(pol, UINT32_MAX, kc->idx, s->cap, &nv) != PB_OK)
            return -1;
        compact(s, kc->idx, nv, hd);
        if (s->n != pb_kvcache_kept_count(pol)) return -1;
    }
    return 0;
}
