/*
 * policy.c - the doors of a per-layer policy instance: create, destroy,
 * observe, evict, reset and the introspection of pyramidkv.h, for every
 * scorer, and the internal peek of the positions an evict would take.
 *
 * It owns the rules of the policy (what is held, what is protected - the
 * newest recent_window, the sinks, the positions the scorer has not
 * observed - and how many go) and validates every argument against them;
 * then it hands the step to the instance's scorer through its table of
 * operations (policy_internal.h), chosen at create: the window scorer
 * (window_scorer.c, window_evict.c) or a score source (source_scorers.c,
 * score_sources.c). Reading, validating and sizing a configuration is
 * policy_config.c; the policybook vtables are a thin door in
 * policy_vtable.c.
 *
 * Every public function validates all of its input before its first write,
 * so a call that returns an error has changed nothing. All memory is one
 * block obtained in create; nothing here allocates afterwards.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "policy_internal.h"

/* A hint that the cache line holding addr is read (rw 0) or written (rw 1)
 * soon. It changes no value; compilers without the builtin get nothing. */
#if defined(__GNUC__) || defined(__clang__)
#define PB__PREFETCH(addr, rw) __builtin_prefetch((addr), (rw), 3)
#else
#define PB__PREFETCH(addr, rw) ((void)(addr))
#endif


/* How many of the ascending pos[0 .. n-1] are below `bound` (the sinks
 * held: few, and the oldest). A short walk, then a binary search without
 * branches on the data. The doors keep that count as they admit
 * (sinks_kept); debug builds check it against this at every evict. */
static inline size_t pb__count_below(const uint32_t *pos, size_t n,
                                     uint32_t bound) {
    size_t i = 0;
    for (; i < n && i < 8u; ++i)
        if (pos[i] >= bound) return i;
    if (i == n) return n;
    size_t lo = i, len = n - i; /* pos[lo - 1] < bound, len >= 1 */
    while (len > 1u) {
        const size_t half = len / 2u;
        lo = pos[lo + half] < bound ? lo + half : lo;
        len -= half;
    }
    return lo + (pos[lo] < bound);
}


/* ------------------------------------------------------------------------ */
/* Create, size, destroy, reset                                             */

pb_status pb_kvcache_create(const pb_kvcache_config *config,
                            const pb_allocator *allocator, pb_kvcache **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    pb__config cfg;
    pb_status st = pb__config_load(config, &cfg);
    if (st != PB_OK) return st;
    pb_allocator a;
    if (!pb__allocator_of(allocator, &a)) return PB_ERR_PARAM;
    const pb__scorer_ops *ops = pb__scorer_ops_of(cfg.scorer);
    size_t total = 0;
    st = ops->size(&cfg, &total);
    if (st != PB_OK) return st;

    void *block = a.alloc(a.ctx, total);
    if (block == NULL) return PB_ERR_NOMEM;

    unsigned char *base = pb__block_start(block);
    pb_kvcache *p = (pb_kvcache *)(void *)base;
    memset(base, 0, PB__STATE_BYTES);
    p->ops = ops;
    p->cfg = cfg;
    p->capacity = (size_t)cfg.capacity;
    p->allocator = a;
    p->block = block;
    p->block_bytes = total;
    p->k = pb__kernels_best();
    ops->init(p);
    *out = p;
    return PB_OK;
}

pb_status pb_kvcache_pyramidkv_create(const pb_kvcache_pyramidkv_params *params,
                                      const pb_kvcache_options *options,
                                      const pb_allocator *allocator,
                                      pb_kvcache **out) {
    if (out == NULL) return PB_ERR_NULL;
    pb_kvcache_config c;
    pb__config_from_params(params, options, &c);
    return pb_kvcache_create(&c, allocator, out);
}

void pb_kvcache_destroy(pb_kvcache *policy) {
    if (policy == NULL) return;
    const pb_allocator a = policy->allocator;
    a.free(a.ctx, policy->block, policy->block_bytes);
}

pb_status pb_kvcache_reset(pb_kvcache *policy) {
    if (policy == NULL) return PB_ERR_NULL;
    policy->ops->reset(policy);
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

/* Weights checked, and bytes prefetched ahead of the check, a piece at a
 * time (see check_weights). */
#define PB__CHECK_PIECE ((size_t)256)
#define PB__CHECK_AHEAD ((size_t)2)

/* The weight check of a step (flags as weight_flags gives them), a piece
 * at a time with the weights PB__CHECK_AHEAD pieces ahead and, when the
 * step will write one, the same span of its ring row prefetched. The first
 * reads of a step's weights and row miss the caches when many instances
 * take turns (a model's layers and heads), and a hardware prefetcher
 * starts each new stream late; asking for the lines ahead keeps several
 * misses in flight. The row is written after the check (into the slot's
 * columns 0 .. n+holes-1), so its lines are at hand by then. Measured in
 * docs/performance.md (model shape). */
static unsigned check_weights(const pb_kvcache *p, const float *attn,
                              size_t n) {
    /* A row within the first look-ahead is checked in one call: its
     * prefetches could come no earlier than its reads. */
    if (n <= (PB__CHECK_AHEAD + 1u) * PB__CHECK_PIECE)
        return p->k->weight_flags(attn, n, p->q_limit_bits);
    const float *row = p->ops->next_row ? p->ops->next_row(p) : NULL;
    const size_t line = PB__ALIGN / sizeof(float);
    size_t ahead = 0; /* weights prefetched: 0 .. ahead-1 */
    unsigned flags = 0u;
    for (size_t i = 0; i < n; i += PB__CHECK_PIECE) {
        const size_t want = i + (PB__CHECK_AHEAD + 1u) * PB__CHECK_PIECE;
        const size_t to = want < n ? want : n;
        for (; ahead < to; ahead += line) {
            PB__PREFETCH(attn + ahead, 0);
            if (row != NULL) PB__PREFETCH(row + ahead, 1);
        }
        const size_t len = n - i < PB__CHECK_PIECE ? n - i : PB__CHECK_PIECE;
        flags |= p->k->weight_flags(attn + i, len, p->q_limit_bits);
    }
    return flags;
}

pb_status pb_kvcache_observe(pb_kvcache *policy, uint32_t pos,
                             const float *attn, size_t attn_len) {
    if (policy == NULL) return PB_ERR_NULL;
    pb_kvcache *p = policy;
    /* With recent_window 0 an evict may leave nothing held. No hole
     * follows the newest held column (the window scorer trims them). */
    if (p->kept > 0u) {
        const pb__holes h = pb__holes_of(p);
        assert(h.n == 0u || h.at[h.n - 1u] < p->kept + h.n - 1u);
        if (pos <= p->pos[p->kept + h.n - 1u]) return PB_ERR_POSITION;
    }
    const int full = p->kept >= p->capacity;
    unsigned flags = 0u;
    if (attn != NULL) {
        if (attn_len != p->kept) return PB_ERR_LENGTH;
        /* Some scorers check the weights as they read them for the scores
         * (undoing the step if one is bad): one read of the row. */
        if (full || !p->self_checks) {
            flags = check_weights(p, attn, attn_len);
            if (flags & PB__WEIGHT_BAD) return PB_ERR_WEIGHT;
        }
    }
    if (full) return PB_ERR_FULL;
    return pb__kvcache_observe_checked(p, pos, attn, attn_len, flags);
}

unsigned pb__kvcache_check_row(const pb_kvcache *p, const float *attn,
                               size_t n) {
    return check_weights(p, attn, n);
}

pb_status pb__kvcache_observe_checked(pb_kvcache *p, uint32_t pos,
                                      const float *attn, size_t attn_len,
                                      unsigned flags) {
    const pb_status st = p->ops->observe(p, pos, attn, attn_len, flags);
    if (st == PB_OK) p->fresh = 0;
    return st;
}

/* ------------------------------------------------------------------------ */
/* Evict                                                                    */

/* How many held positions are sinks: those below cfg.sinks, the oldest
 * ranks (never evicted, so always a prefix). Instances with sinks have no
 * holes, so pos[] is dense. */
static size_t sinks_held(const pb_kvcache *p) {
    assert(p->cfg.sinks == 0u || pb__holes_of(p).n == 0u);
    assert(p->sinks_kept == pb__count_below(p->pos, p->kept, p->cfg.sinks));
    return p->sinks_kept;
}

/* The evictable ranks first .. end-1 and how many of them an evict to
 * `budget` takes (*needed, possibly 0). */
static inline void evict_range(const pb_kvcache *p, uint32_t budget, size_t *first,
                        size_t *end, size_t *needed) {
    const size_t target =
        budget < p->cfg.effective ? (size_t)budget : (size_t)p->cfg.effective;
    if (p->kept <= target) {
        *first = *end = *needed = 0u;
        return;
    }
    /* Protected: the newest min(recent_window, held) positions (also every
     * position the scorer has not observed yet, all of them among the
     * newest) and the sinks, all of them among the oldest. */
    const size_t recent_window = (size_t)p->cfg.recent_window;
    size_t recent = recent_window < p->kept ? recent_window : p->kept;
    if (p->ops->unobserved != NULL) {
        const size_t unobserved = p->ops->unobserved(p);
        if (unobserved > recent) recent = unobserved;
    }
    *end = p->kept - recent;
    const size_t sinks = sinks_held(p);
    *first = sinks < *end ? sinks : *end;
    *needed = p->kept - target;
    if (*needed > *end - *first) *needed = *end - *first;
}

uint32_t pb__recent_protected(uint32_t scorer, uint32_t recent_window) {
    const pb__scorer_ops *ops = pb__scorer_ops_of(scorer);
    if (recent_window == 0u && ops != NULL && ops->unobserved != NULL)
        return 1u;
    return recent_window;
}

pb_status pb_kvcache_evict(pb_kvcache *policy, uint32_t budget,
                           uint32_t *victims, size_t victims_cap,
                           size_t *n_victims) {
    if (policy == NULL || n_victims == NULL ||
        (victims == NULL && victims_cap > 0u))
        return PB_ERR_NULL;
    pb_kvcache *p = policy;
    size_t first, end, needed;
    evict_range(p, budget, &first, &end, &needed);
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }
    if (needed == 0u) {
        *n_victims = 0u;
        return PB_OK;
    }
    p->ops->evict(p, first, end, needed, victims);
    *n_victims = needed;
    return PB_OK;
}


size_t pb__kvcache_peek_work_bytes(const pb_kvcache *p) {
    return p->ops->peek_work_bytes(p);
}

size_t pb__peek_work_bound(const pb_kvcache_config *cfg) {
    /* The window scorer's: a score per held rank and its pooling scratch;
     * the score sources need none. */
    const size_t cap = (size_t)cfg->capacity;
    return cap * sizeof(double) + pb__pool_work_bytes(cfg->pool_kernel, cap);
}

size_t pb__kvcache_peek_lowest(const pb_kvcache *p, uint32_t budget,
                               uint32_t *positions, double *scores,
                               size_t cap, void *work) {
    size_t first, end, needed;
    evict_range(p, budget, &first, &end, &needed);
    const size_t k = needed < cap ? needed : cap;
    if (k > 0u) p->ops->peek_lowest(p, first, end, k, positions, scores, work);
    return needed;
}

size_t pb__kvcache_lowest(pb_kvcache *p, uint32_t budget,
                          uint32_t *positions, double *scores, size_t cap,
                          void *work) {
    if (p->ops->lowest == NULL)
        return pb__kvcache_peek_lowest(p, budget, positions, scores, cap,
                                       work);
    size_t first, end, needed;
    evict_range(p, budget, &first, &end, &needed);
    const size_t k = needed < cap ? needed : cap;
    if (k > 0u) p->ops->lowest(p, first, end, k, positions, scores, work);
    return needed;
}

/* Restores the max-heap a[0 .. n-1] below i. */
static void sift_u32(uint32_t *a, size_t n, size_t i) {
    const uint32_t v = a[i];
    for (;;) {
        size_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && a[c + 1u] > a[c]) c++;
        if (a[c] <= v) break;
        a[i] = a[c];
        i = c;
    }
    a[i] = v;
}

/* Sorts a[0 .. n-1] ascending: insertion for the few of a decode step,
 * a heap sort beyond, so no count costs quadratic time. */
static void sort_u32(uint32_t *a, size_t n) {
    if (n <= 16u) {
        for (size_t i = 1; i < n; i++) {
            const uint32_t v = a[i];
            size_t j = i;
            for (; j > 0u && a[j - 1u] > v; j--) a[j] = a[j - 1u];
            a[j] = v;
        }
        return;
    }
    for (size_t i = n / 2u; i-- > 0u;) sift_u32(a, n, i);
    for (size_t m = n; m > 1u; m--) {
        const uint32_t t = a[0];
        a[0] = a[m - 1u];
        a[m - 1u] = t;
        sift_u32(a, m - 1u, 0u);
    }
}

void pb__kvcache_evict_positions(pb_kvcache *p, uint32_t *positions,
                                 size_t k, size_t *ranks, uint32_t *victims) {
    assert(k >= 1u && k <= p->kept);
    if (p->ops->evict_ranks == NULL) {
        /* The scorer's own evict of k chooses the same positions (they
         * are its k lowest), selecting a second time. */
        size_t first, end, needed;
        evict_range(p, (uint32_t)(p->kept - k), &first, &end, &needed);
        assert(needed == k);
        p->ops->evict(p, first, end, needed, victims);
        return;
    }
    sort_u32(positions, k);
    const pb__holes h = pb__holes_of(p);
    for (size_t t = 0; t < k; t++) {
        const size_t col = pb__column_at_least(p, h, positions[t]);
        assert(col < p->kept + h.n && p->pos[col] == positions[t]);
        ranks[t] = col - pb__holes_below(h, col);
    }
    p->ops->evict_ranks(p, ranks, k, victims);
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
    const pb_kvcache *p = policy;
    *n = p->kept;
    if (out_cap < p->kept) return PB_ERR_BUFFER;
    const pb__holes h = pb__holes_of(p);
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, h.at, h.n, p->kept, &run))
        memcpy(out + run.rank, p->pos + run.col, run.len * sizeof *out);
    return PB_OK;
}

/* The column of held position pos, or SIZE_MAX if it is not held. The
 * positions of all columns, holes included, ascend. */
static size_t column_of_pos(const pb_kvcache *p, uint32_t pos) {
    const pb__holes h = pb__holes_of(p);
    const size_t col = pb__column_at_least(p, h, pos);
    if (col == p->kept + h.n || p->pos[col] != pos) return SIZE_MAX;
    const size_t below = pb__holes_below(h, col); /* is col a hole? */
    return below < h.n && h.at[below] == col ? SIZE_MAX : col;
}

pb_status pb_kvcache_window_score(const pb_kvcache *policy, uint32_t pos,
                                  double *score) {
    if (policy == NULL || score == NULL) return PB_ERR_NULL;
    const pb_kvcache *p = policy;
    if (!p->ops->window) return PB_ERR_PARAM;
    const size_t col = column_of_pos(p, pos);
    if (col == SIZE_MAX) return PB_ERR_NOT_HELD;
    *score = p->ops->score(p, col);
    return PB_OK;
}

pb_status pb_kvcache_score(const pb_kvcache *policy, uint32_t pos,
                           double *score) {
    if (policy == NULL || score == NULL) return PB_ERR_NULL;
    const size_t col = column_of_pos(policy, pos);
    if (col == SIZE_MAX) return PB_ERR_NOT_HELD;
    *score = policy->ops->score(policy, col);
    return PB_OK;
}

size_t pb_kvcache_sink_count(const pb_kvcache *policy) {
    return policy ? sinks_held(policy) : 0u;
}

size_t pb_kvcache_memory_bytes(const pb_kvcache *policy) {
    return policy ? policy->block_bytes : 0u;
}
