/*
 * group_reference.c - the naive layer group of group_reference.h: the plan
 * from docs/spec.md §16.1 in 64-bit integers, and an evict that scores
 * every evictable position of every head from scratch, sorts each head's
 * list and then all the candidates with qsort, and walks the global order.
 */
#include "group/group_reference.h"

#include <stdlib.h>
#include <string.h>

typedef struct cand {
    double key;
    uint32_t pos;
    uint32_t head;
} cand;

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    return 0;
}

pb_status ref_group_create(ref_group *g, const pb_kvcache_config *head,
                           uint32_t num_heads, uint32_t floor_permille,
                           uint32_t slack, uint32_t min_capacity) {
    memset(g, 0, sizeof *g);
    uint32_t share = head->share != 0u
                         ? head->share
                         : pb_kvcache_pyramid_budget(head->budget, head->layer,
                                                     head->num_layers,
                                                     head->pyramid_ratio);
    const uint64_t r = head->recent_window;
    const uint64_t s = share > r ? share : r + 1u;
    const uint64_t f = (s - r) * floor_permille / 1000u;
    uint64_t hmax = s + (uint64_t)(num_heads - 1u) * (s - r - f);
    if (r + head->sinks + f > hmax) hmax = r + head->sinks + f;
    uint64_t cap = hmax + slack;
    if (cap < min_capacity) cap = min_capacity;
    if (cap > UINT32_MAX - 1u) return PB_ERR_TOO_LARGE;
    pb_kvcache_config c = *head;
    c.share = (uint32_t)cap;
    c.capacity = (uint32_t)cap;
    g->num_heads = num_heads;
    g->floor = (uint32_t)f;
    g->layer_total = (uint64_t)num_heads * s;
    g->heads = calloc(num_heads, sizeof *g->heads);
    if (g->heads == NULL) return PB_ERR_NOMEM;
    for (uint32_t h = 0; h < num_heads; h++) {
        const pb_status st = ref_create_config(&g->heads[h], &c);
        if (st != PB_OK) {
            for (uint32_t i = 0; i < h; i++) ref_destroy(&g->heads[i]);
            free(g->heads);
            g->heads = NULL;
            return st;
        }
    }
    return PB_OK;
}

void ref_group_destroy(ref_group *g) {
    if (g->heads == NULL) return;
    for (uint32_t h = 0; h < g->num_heads; h++) ref_destroy(&g->heads[h]);
    free(g->heads);
    g->heads = NULL;
}

/* The key of rank i of head r, straight from the spec's definitions. */
static double key_of(const ref_policy *r, size_t i) {
    double x = 0.0;
    switch (r->scorer) {
    case PB_SCORER_NONE: return (double)r->pos[i];
    case PB_SCORER_WINDOW: break;
    default: ref_score(r, r->pos[i], &x); return x;
    }
    const size_t h = (r->params.pool_kernel - 1u) / 2u;
    const size_t lo = i >= h ? i - h : 0u;
    const size_t hi = i + h < r->kept ? i + h : r->kept - 1u;
    double m = 0.0, sum = 0.0;
    for (size_t j = lo; j <= hi; j++) {
        ref_window_score(r, r->pos[j], &x);
        if (j == lo || x > m) m = x;
        sum += x;
    }
    return r->pool == PB_POOL_MAX ? m : sum / (double)r->params.pool_kernel;
}

pb_status ref_group_evict(ref_group *g, uint64_t budget, uint32_t *victims,
                          size_t victims_cap, size_t *counts,
                          size_t *n_victims) {
    uint64_t held = 0;
    for (uint32_t h = 0; h < g->num_heads; h++) held += g->heads[h].kept;
    const uint64_t target = budget < g->layer_total ? budget : g->layer_total;
    size_t total = 0;
    for (uint32_t h = 0; h < g->num_heads; h++) counts[h] = 0;
    if (held > target) {
        cand *all = malloc(sizeof(cand) * (size_t)held);
        size_t n = 0;
        for (uint32_t h = 0; h < g->num_heads; h++) {
            const ref_policy *r = &g->heads[h];
            const size_t start = n;
            const size_t recent = r->params.recent_window < r->kept
                                      ? r->params.recent_window
                                      : r->kept;
            for (size_t i = 0; i < r->kept; i++) {
                if (i >= r->kept - recent || r->pos[i] < r->sinks) continue;
                if (r->scorer == PB_SCORER_LAST && !r->observed[i]) continue;
                all[n].key = key_of(r, i);
                all[n].pos = r->pos[i];
                all[n].head = h;
                n++;
            }
            /* The head keeps its floor best: drop them from its list. */
            qsort(all + start, n - start, sizeof(cand), cmp_cand);
            n = n - start > g->floor ? n - g->floor : start;
        }
        qsort(all, n, sizeof(cand), cmp_cand);
        const uint64_t k = held - target;
        for (size_t i = 0; i < n && total < k; i++) {
            counts[all[i].head]++;
            total++;
        }
        free(all);
    }
    if (total > victims_cap) {
        *n_victims = total;
        return PB_ERR_BUFFER;
    }
    size_t at = 0;
    for (uint32_t h = 0; h < g->num_heads; h++) {
        if (counts[h] == 0) continue;
        size_t n = 0;
        ref_policy *r = &g->heads[h];
        const pb_status st = ref_evict(r, (uint32_t)(r->kept - counts[h]),
                                       victims + at, counts[h], &n);
        if (st != PB_OK || n != counts[h]) return PB_ERR_PARAM;
        at += n;
    }
    *n_victims = at;
    return PB_OK;
}
