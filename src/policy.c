/*
 * policy.c - the per-layer policy instance: create, destroy, observe,
 * evict, reset and the introspection of pyramidkv.h, for every scorer.
 *
 * It owns the rules of the policy (what is held, what is protected - the
 * newest recent_window, the sinks, the last scorer's unobserved positions -
 * and how many go) and drives the ring, pooling, selection and filter
 * modules for the window scorer's arithmetic, or score_sources.c for the
 * other scorers. Reading, validating and sizing a configuration is
 * policy_config.c; the policybook vtables are a thin door in
 * policy_vtable.c.
 *
 * The rest of this comment is about the window scorer (without sinks;
 * with sinks every evict takes the full path, which starts past them).
 * An evict takes one of three paths with identical results:
 *   - the full path: every window score, pooled, a radix selection, one
 *     compaction of the ring; O(held * obs_window);
 *   - for at most PB__FILTER_MAX_NEEDED victims (score_filter.c), the
 *     filtered path when the quantised sums are current: O(held) plus exact
 *     scores for the few undecided candidates;
 *   - for as few victims otherwise, the streaming path: exact scores a
 *     block at a time and a bounded heap, O(held * obs_window) but no
 *     scratch array (finishing the prefix folds when they are current).
 * After the last two the victims' ring columns become holes that a later
 * compaction removes.
 *
 * What the per-column array scores[] keeps current between evicts (see
 * keep_up) follows the evict cadence, measured in observed steps:
 *   - at most PB__FILTER_MAX_GAP steps apart: the quantised sums while the
 *     filter decides, otherwise (exact ties defeat it; it backs off for
 *     longer after each miss) the prefix folds. Either costs each step a
 *     little more than a copy of the weights;
 *   - farther apart: nothing, so a step is a plain copy of its row; the
 *     victims' columns are then compacted lazily (each ring row when its
 *     slot is next written), so after obs_window steps every row is dense
 *     and no row was ever moved.
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

/* ------------------------------------------------------------------------ */
/* Create, size, destroy, reset                                             */

static void reset_state(pb_kvcache *p) {
    p->fresh = 1;
    p->kept = 1u;
    p->sinks_kept = p->cfg.sinks != 0u; /* position 0 */
    p->slot = 0u;
    p->n_holes = 0u;
    p->prefix_valid = 0;
    p->n_lazy = 0u;
    p->dense_rows = 0u;
    p->zero_upto = 1u; /* column 0 is zeroed below; the rest is unknown */
    p->sums_valid = 0;
    p->gap = 0u;
    p->filter_wait = 0u;
    p->filter_backoff = 0u;
    p->last_path = PB__PATH_NONE;
    p->seed_col = SIZE_MAX;
    p->guess_m = -1.0;
    p->guess_step = 4u;
    p->pos[0] = 0u;
    pb__ring_clear_column(p->ring, p->row_stride, p->obs_window, 0u);
}

pb_status pb_kvcache_create(const pb_kvcache_config *config,
                            const pb_allocator *allocator, pb_kvcache **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    pb__config cfg;
    pb_status st = pb__config_load(config, &cfg);
    if (st != PB_OK) return st;
    pb_allocator a;
    if (!pb__allocator_of(allocator, &a)) return PB_ERR_PARAM;
    pb__layout layout;
    st = pb__layout_of(&cfg, &layout);
    if (st != PB_OK) return st;

    void *block = a.alloc(a.ctx, layout.total);
    if (block == NULL) return PB_ERR_NOMEM;

    const uintptr_t start =
        ((uintptr_t)block + (PB__ALIGN - 1u)) & ~(uintptr_t)(PB__ALIGN - 1u);
    unsigned char *base = (unsigned char *)block + (start - (uintptr_t)block);
    pb_kvcache *p = (pb_kvcache *)(void *)base;
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->capacity = (size_t)cfg.capacity;
    p->allocator = a;
    p->block = block;
    p->block_bytes = layout.total;
    p->k = pb__kernels_best();
    if (cfg.scorer != (uint32_t)PB_SCORER_WINDOW) {
        /* A score source: positions and one score each (score_sources.c). */
        const int scored = pb__source_score_bytes(cfg.scorer) != 0u;
        p->pos = (uint32_t *)(void *)(base + layout.off_pos);
        p->source = scored ? (void *)(base + layout.off_scores) : NULL;
        if (cfg.scorer == (uint32_t)PB_SCORER_LAST)
            p->source_spare = base + layout.off_spare;
        p->hist = scored ? (size_t *)(void *)(base + layout.off_hist) : NULL;
        p->columns = p->capacity;
        pb__source_reset(p);
        *out = p;
        return PB_OK;
    }
    p->obs_window = cfg.params.obs_window;
    p->half_kernel = (size_t)(cfg.params.pool_kernel - 1u) / 2u;
    p->row_stride = layout.row_stride;
    p->pos = (uint32_t *)(void *)(base + layout.off_pos);
    p->ring = (float *)(void *)(base + layout.off_ring);
    p->scores = (double *)(void *)(base + layout.off_scores);
    p->alive = (uint64_t *)(void *)(base + layout.off_alive);
    p->holes = (size_t *)(void *)(base + layout.off_holes);
    p->lazy_holes = (size_t *)(void *)(base + layout.off_lazy);
    p->lazy_ok = p->obs_window <= 64u;
    p->max_holes = layout.max_holes;
    p->columns = (size_t)cfg.capacity + layout.max_holes;
    p->cands = (struct pb__candidate *)(void *)(base + layout.off_cands);
    p->heap = (double *)(void *)(base + layout.off_heap);
    p->work = layout.work_bytes ? (void *)(base + layout.off_work) : NULL;
    p->work_bytes = layout.work_bytes;
    p->hist = (size_t *)(void *)(base + layout.off_hist);
    p->prefill_scratch =
        layout.prefill_bytes ? (void *)(base + layout.off_prefill) : NULL;
    p->prefill_scratch_bytes = layout.prefill_bytes;
    /* Whole groups of columns are summed even where a run ends early
     * (simd_kernels.c): give every cell a defined value once. */
    memset(p->ring, 0, layout.row_stride * (size_t)p->obs_window *
                           sizeof *p->ring);
    pb__filter_configure(p);
    if (cfg.sinks != 0u) {
        /* The filtered and streaming evicts choose among ranks from 0 on;
         * with sinks every evict takes the full path, which starts past
         * them. */
        p->stream_ok = 0;
        p->filter_ok = 0;
    }
    reset_state(p);
    p->zero_upto = p->row_stride; /* the whole ring was zeroed above */
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
    if (policy->cfg.scorer != (uint32_t)PB_SCORER_WINDOW)
        pb__source_reset(policy);
    else
        reset_state(policy);
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

/* Whether the instance writes the rows it copies past the caches. */
static int streamed_rows(const pb_kvcache *p) {
    return p->cfg.row_stores == (uint32_t)PB_ROW_STORES_STREAMED;
}

/* In the lazy state, after the step's row was written in the new layout:
 * zeroes the old layout's tail of the row (every column from kept +
 * n_holes on is then zero) and marks it dense; once all rows are, the old
 * layout is forgotten. */
static void mark_row_dense(pb_kvcache *p) {
    float *row = p->ring + (size_t)p->slot * p->row_stride;
    memset(row + p->kept + p->n_holes, 0, p->n_lazy * sizeof *row);
    p->dense_rows |= UINT64_C(1) << p->slot;
    const uint64_t all = p->obs_window == 64u
                             ? ~UINT64_C(0)
                             : (UINT64_C(1) << p->obs_window) - 1u;
    if (p->dense_rows == all) {
        p->n_lazy = 0u;
        p->dense_rows = 0u;
    }
}

/* Leaves the lazy state: moves the rows not yet rewritten to the new
 * layout (holes included; their tails zeroed as the dense ones are). */
static void finish_lazy(pb_kvcache *p) {
    if (p->n_lazy == 0u) return;
    const size_t n_new = p->kept + p->n_holes;
    for (uint32_t s = 0; s < p->obs_window; ++s) {
        if ((p->dense_rows >> s) & 1u) continue;
        float *row = p->ring + (size_t)s * p->row_stride;
        pb__ring_move_row(row, p->lazy_holes, p->n_lazy, n_new);
        memset(row + n_new, 0, p->n_lazy * sizeof *row);
    }
    p->n_lazy = 0u;
    p->dense_rows = 0u;
}

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
    const float *row =
        p->cfg.scorer == (uint32_t)PB_SCORER_WINDOW
            ? p->ring + (size_t)p->slot * p->row_stride
            : NULL;
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
     * follows the newest held column (drop_ranks trims them). */
    assert(p->kept == 0u || p->n_holes == 0u ||
           p->holes[p->n_holes - 1u] < p->kept + p->n_holes - 1u);
    if (p->kept > 0u && pos <= p->pos[p->kept + p->n_holes - 1u])
        return PB_ERR_POSITION;
    const int full = p->kept >= p->capacity;
    const int source = p->cfg.scorer != (uint32_t)PB_SCORER_WINDOW;
    unsigned flags = 0u;
    if (attn != NULL) {
        if (attn_len != p->kept) return PB_ERR_LENGTH;
        /* Some scorers check the weights as they read them for the scores
         * (undoing the step if one is bad): one read of the row. */
        if (full || !source || !pb__source_checks_weights(p)) {
            flags = check_weights(p, attn, attn_len);
            if (flags & PB__WEIGHT_BAD) return PB_ERR_WEIGHT;
        }
    }
    if (full) return PB_ERR_FULL;

    if (source) {
        const pb_status st = pb__source_observe(p, pos, attn, attn_len);
        if (st == PB_OK) p->fresh = 0;
        return st;
    }
    if (attn != NULL) {
        const int sums = p->sums_valid && !(flags & PB__WEIGHT_BIG);
        assert(p->n_lazy == 0u || !p->prefix_valid);
        /* The lazy state's rows are rewritten as they come (with the sums,
         * or as one copy when nothing else is kept and no hole has come
         * since it began); any other step ends it first. */
        if (p->n_lazy > 0u && !sums && (p->sums_valid || p->n_holes > 0u))
            finish_lazy(p);
        if (p->n_lazy > 0u && !sums) {
            pb__ring_store_row(p->ring, p->row_stride, p->slot, attn,
                               attn_len, NULL, 0u,
                               streamed_rows(p)); /* no holes: one copy */
            mark_row_dense(p);
        } else if (sums) {
            /* A row of the old layout moves first, now that the step
             * brings it into the caches anyway. */
            const int moved =
                p->n_lazy > 0u && !((p->dense_rows >> p->slot) & 1u);
            if (moved)
                pb__ring_move_row(p->ring + (size_t)p->slot * p->row_stride,
                                  p->lazy_holes, p->n_lazy,
                                  p->kept + p->n_holes);
            pb__filter_store_row(p, attn, attn_len);
            if (moved) mark_row_dense(p);
        } else {
            /* A row the prefix folds read next is kept in the caches. */
            pb__ring_store_row(p->ring, p->row_stride, p->slot, attn,
                               attn_len, p->holes, p->n_holes,
                               streamed_rows(p) && !p->prefix_valid);
            p->sums_valid = 0;
            if (p->prefix_valid)
                p->k->prefix_add(p->ring + (size_t)p->slot * p->row_stride,
                                 p->scores, p->holes, p->n_holes, attn_len,
                                 p->slot == 0u);
        }
        p->slot = p->slot + 1u == p->obs_window ? 0u : p->slot + 1u;
        if (p->gap < UINT32_MAX) p->gap += 1u;
    }
    const size_t at = p->kept + p->n_holes; /* in pos[] and the sums */
    p->pos[at] = pos;
    p->scores[at] = 0.0; /* the sum of a new position, if kept */
    const size_t col = at + p->n_lazy; /* in the rows of the old layout */
    if (col >= p->zero_upto) {
        /* Zero this column and the rest of its cache line in every row:
         * the next admissions find their columns zero already. */
        const size_t line = PB__ALIGN / sizeof(float);
        const size_t end = (col / line + 1u) * line;
        p->zero_upto = end < p->row_stride ? end : p->row_stride;
        pb__ring_clear_columns(p->ring, p->row_stride, p->obs_window, col,
                               p->zero_upto - col);
    }
    p->sinks_kept += pos < p->cfg.sinks;
    p->kept += 1u;
    p->fresh = 0;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Evict                                                                    */

/* How many held positions are sinks: those below cfg.sinks, the oldest
 * ranks (never evicted, so always a prefix). Instances with sinks have no
 * holes, so pos[] is dense. */
static size_t sinks_held(const pb_kvcache *p) {
    assert(p->cfg.sinks == 0u || p->n_holes == 0u);
    assert(p->sinks_kept == pb__count_below(p->pos, p->kept, p->cfg.sinks));
    return p->sinks_kept;
}

/* The longest evict cadence (observed steps between evicts that choose
 * victims) for which the sums are kept current. */
#define PB__FILTER_MAX_GAP UINT32_C(8)

/* Marks columns 0 .. n_cols-1 alive in p->alive except the holes and
 * dead[0 .. n_dead-1]. */
static void mark_alive(pb_kvcache *p, size_t n_cols, const size_t *dead,
                       size_t n_dead) {
    const size_t words = (n_cols + 63u) / 64u;
    memset(p->alive, 0xFF, words * sizeof *p->alive);
    if (n_cols % 64u != 0u)
        p->alive[words - 1u] = (UINT64_C(1) << (n_cols % 64u)) - 1u;
    for (size_t t = 0; t < p->n_holes; ++t)
        p->alive[p->holes[t] / 64u] &= ~(UINT64_C(1) << (p->holes[t] % 64u));
    for (size_t t = 0; t < n_dead; ++t)
        p->alive[dead[t] / 64u] &= ~(UINT64_C(1) << (dead[t] % 64u));
}

/* Moves the alive columns (p->alive) of the ring, pos[] and, when they are
 * wanted, the sums to the front; afterwards there is no hole. p->kept must
 * be the survivors' count already. */
static void compact_all(pb_kvcache *p, size_t n_cols, int with_sums) {
    pb__ring_compact(p->ring, p->row_stride, p->obs_window, p->alive, n_cols);
    pb__compact_columns(p->pos, sizeof *p->pos, p->alive, n_cols);
    if (with_sums)
        pb__compact_columns(p->scores, sizeof *p->scores, p->alive, n_cols);
    p->n_holes = 0u;
    /* The columns given up are stale. Zero them while their lines are at
     * hand when they are few (the usual, cheap evicts); after a big evict
     * just forget which columns were zero. */
    const size_t freed = n_cols - p->kept;
    if (freed <= p->max_holes + PB__FILTER_MAX_NEEDED) {
        pb__ring_clear_columns(p->ring, p->row_stride, p->obs_window, p->kept,
                               freed);
        if (p->zero_upto < n_cols) p->zero_upto = n_cols;
    } else {
        p->zero_upto = p->kept;
    }
}

/* Drops ranks[0 .. k-1] (ascending) after a cheap selection: writes their
 * positions to victims[] and turns their columns into holes, compacting
 * when too many have gathered or when long_gap is set. Nothing else
 * moves. */
static void drop_ranks(pb_kvcache *p, const size_t *ranks, size_t k,
                       uint32_t *victims, int filtered, int long_gap) {
    size_t cols[PB__FILTER_MAX_NEEDED];
    assert(k >= 1u && k <= PB__FILTER_MAX_NEEDED);
    /* While the sums are kept a compaction is lazy (no row moves on its
     * own), so the holes, which cost every step, are let gather only to
     * half the allowance, or PB__HOLES_MIN. */
    const size_t half =
        p->max_holes / 2u > PB__HOLES_MIN ? p->max_holes / 2u : PB__HOLES_MIN;
    const size_t allowed =
        p->sums_valid && p->lazy_ok && half < p->max_holes ? half
                                                           : p->max_holes;
    const int compact_due = p->n_holes + k > allowed || long_gap;
    const size_t room = pb__lazy_room(p->capacity);
    /* A lazy state gains holes until a compaction is due, while the old
     * layout stays within the ring (n_holes + n_lazy <= room) and the
     * newest column stays held (a trimmed hole would leave a stale cell
     * in a different column of each layout). */
    if (p->n_lazy > 0u &&
        (compact_due || p->n_holes + k + p->n_lazy > room ||
         ranks[k - 1u] + 1u == p->kept))
        finish_lazy(p);
    for (size_t t = 0; t < k; ++t) {
        cols[t] = pb__ring_column_of(p->holes, p->n_holes, ranks[t]);
        victims[t] = p->pos[cols[t]];
    }
    const size_t n_cols = p->kept + p->n_holes;
    p->kept -= k;

    /* When a compaction is due, compact pos[] (and the sums) now and let
     * each ring row be compacted by its next step's rewrite (the lazy
     * state): when evicts come far apart (every step until the next one
     * then copies its row in one piece, not one run between each pair of
     * holes), and while the sums are kept (each step rewrites its row and
     * its sums anyway, so no row is moved on its own). Where rows cannot
     * be tracked, compact everything now. */
    if (compact_due && p->lazy_ok && !p->prefix_valid &&
        (long_gap ? !p->sums_valid : p->sums_valid) &&
        p->n_holes + k <= room) {
        mark_alive(p, n_cols, cols, k);
        pb__compact_columns(p->pos, sizeof *p->pos, p->alive, n_cols);
        if (p->sums_valid)
            pb__compact_columns(p->scores, sizeof *p->scores, p->alive,
                                n_cols);
        size_t a = p->n_holes, b = k, out = p->n_holes + k;
        while (b > 0u) { /* lazy_holes = holes + cols, sorted */
            if (a > 0u && p->holes[a - 1u] > cols[b - 1u])
                p->lazy_holes[--out] = p->holes[--a];
            else
                p->lazy_holes[--out] = cols[--b];
        }
        while (a > 0u) {
            --a;
            p->lazy_holes[a] = p->holes[a];
        }
        p->n_lazy = p->n_holes + k;
        p->n_holes = 0u;
        p->dense_rows = 0u;
        p->last_path = filtered ? PB__PATH_FILTERED_COMPACTED
                                : PB__PATH_STREAMED_COMPACTED;
        return;
    }
    if (compact_due) {
        mark_alive(p, n_cols, cols, k);
        compact_all(p, n_cols, p->sums_valid || p->prefix_valid);
        p->last_path = filtered ? PB__PATH_FILTERED_COMPACTED
                                : PB__PATH_STREAMED_COMPACTED;
        return;
    }
    /* A hole's sum is 0 while the sums are kept: the filter's scan reads
     * it as a bound (score_filter.c). */
    if (p->sums_valid)
        for (size_t t = 0; t < k; ++t) p->scores[cols[t]] = 0.0;
    /* Merge the new dead columns into the sorted holes, from the back. */
    size_t a = p->n_holes, b = k, out = p->n_holes + k;
    while (b > 0u) {
        if (a > 0u && p->holes[a - 1u] > cols[b - 1u])
            p->holes[--out] = p->holes[--a];
        else
            p->holes[--out] = cols[--b];
    }
    p->n_holes += k;
    /* Holes after the last held column are no holes: the next position is
     * admitted there. Trimming them also keeps pos[] ascending, as a new
     * position may be below a dropped newest one. */
    while (p->n_holes > 0u &&
           p->holes[p->n_holes - 1u] == p->kept + p->n_holes - 1u) {
        p->n_holes -= 1u;
        p->zero_upto = p->kept + p->n_holes; /* that column is stale */
    }
    p->last_path = filtered ? PB__PATH_FILTERED : PB__PATH_STREAMED;
}

/* The full path: every window score, pooled, selected among the evictable
 * ranks first .. end-1; the victims' positions to victims[], one
 * compaction of the ring and pos[]. */
static void evict_full(pb_kvcache *p, size_t first, size_t end,
                       size_t needed, uint32_t *victims) {
    const size_t n = p->kept;
    double *x = p->scores; /* scratch by rank: the sums are dropped */
    pb__ring_window_scores(p->k, p->ring, p->row_stride, p->obs_window, n,
                           p->holes, p->n_holes, x);
    if (p->cfg.pool == (uint32_t)PB_POOL_AVG)
        pb__pool_avg(x, n, p->half_kernel, p->cfg.params.pool_kernel, p->work,
                     p->work_bytes);
    else
        pb__pool_max(x, n, p->half_kernel, p->work, p->work_bytes);

    /* The `needed` lowest pooled scores among the evictable ranks. */
    pb__cut cut;
    pb__select_lowest(x + first, end - first, needed, p->hist, &cut);

    /* One pass: report victims in rank (= position) order and mark the
     * surviving columns (holes stay unmarked). */
    const size_t n_cols = n + p->n_holes;
    const size_t words = (n_cols + 63u) / 64u;
    memset(p->alive, 0, words * sizeof *p->alive);
    size_t nv = 0;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, n, &run)) {
        for (size_t j = 0; j < run.len; ++j) {
            const size_t i = run.rank + j, col = run.col + j;
            if (i >= first && i < end &&
                pb__cut_takes(&cut, pb__key_bits(x[i])))
                victims[nv++] = p->pos[col];
            else
                p->alive[col / 64u] |= UINT64_C(1) << (col % 64u);
        }
    }
    assert(nv == needed);
    p->kept = n - nv;
    compact_all(p, n_cols, 0);
    p->last_path = PB__PATH_FULL;
}

/* After an evict: what the per-column array should hold until the next.
 * Evicts far apart: nothing (a step is a plain copy). Otherwise the sums
 * while the filter decides or once its backoff has run out, else the
 * prefix folds for the streaming path. */
static void keep_up(pb_kvcache *p, int short_gap) {
    if (!short_gap || !p->stream_ok) {
        p->sums_valid = 0;
        p->prefix_valid = 0;
        return;
    }
    if (p->sums_valid) return;
    if (p->filter_wait > 0u) {
        p->filter_wait -= 1u;
    } else if (p->filter_ok) {
        p->prefix_valid = 0;
        p->sums_valid = pb__filter_rebuild(p);
        if (p->sums_valid) return;
    }
    if (!p->prefix_valid) pb__prefix_rebuild(p);
}

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
    /* Protected: the newest min(recent_window, held) positions (for the
     * last scorer also every position not observed yet, all of them among
     * the newest) and the sinks, all of them among the oldest. */
    const size_t recent_window = (size_t)p->cfg.params.recent_window;
    size_t recent = recent_window < p->kept ? recent_window : p->kept;
    if (p->unobserved > recent) recent = p->unobserved;
    const size_t end = p->kept - recent;
    const size_t sinks = sinks_held(p);
    const size_t first = sinks < end ? sinks : end;
    size_t needed = p->kept - target;
    if (needed > end - first) needed = end - first;
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }
    if (needed == 0u) {
        *n_victims = 0u;
        return PB_OK;
    }
    if (p->cfg.scorer != (uint32_t)PB_SCORER_WINDOW) {
        pb__source_evict(p, first, end, needed, victims);
        *n_victims = needed;
        return PB_OK;
    }

    /* One layout for every row before any score, except for the filter,
     * which reads the sums and the few exact scores it needs through
     * either layout. */
    const int cheap = needed <= PB__FILTER_MAX_NEEDED && p->stream_ok;
    if (!cheap || !p->sums_valid) finish_lazy(p);
    const uint32_t gap = p->gap;
    const int short_gap = gap <= PB__FILTER_MAX_GAP;
    p->gap = 0u;
    if (cheap) {
        assert(first == 0u); /* no sinks on these paths */
        const size_t evictable = end;
        size_t ranks[PB__FILTER_MAX_NEEDED];
        int filtered = 0;
        if (p->sums_valid) {
            filtered = pb__filter_select(p, evictable, needed, ranks);
            if (filtered) {
                p->filter_backoff = 0u;
            } else {
                /* Exact ties (or a run of zeros) the bounds cannot split:
                 * stop paying for the sums for a while, longer after each
                 * miss in a row. */
                p->filter_backoff = p->filter_backoff == 0u ? 4u
                                    : p->filter_backoff < 4096u
                                        ? 2u * p->filter_backoff
                                        : p->filter_backoff;
                p->filter_wait = p->filter_backoff;
                p->sums_valid = 0; /* the array is not prefix folds either */
            }
        }
        if (!filtered) {
            finish_lazy(p);
            pb__stream_select(p, evictable, needed, ranks);
        }
        drop_ranks(p, ranks, needed, victims, filtered,
                   gap > PB__FILTER_MAX_GAP);
        keep_up(p, short_gap);
        *n_victims = needed;
        return PB_OK;
    }
    evict_full(p, first, end, needed, victims);
    /* The full path used the per-column array as scratch. */
    p->sums_valid = 0;
    p->prefix_valid = 0;
    keep_up(p, short_gap);
    *n_victims = needed;
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
    const pb_kvcache *p = policy;
    *n = p->kept;
    if (out_cap < p->kept) return PB_ERR_BUFFER;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, p->kept, &run))
        memcpy(out + run.rank, p->pos + run.col, run.len * sizeof *out);
    return PB_OK;
}

/* The column of held position pos, or SIZE_MAX if it is not held. The
 * positions of all columns, holes included, ascend. */
static size_t column_of_pos(const pb_kvcache *p, uint32_t pos) {
    const size_t n_cols = p->kept + p->n_holes;
    size_t lo = 0, hi = n_cols; /* search [lo, hi) */
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (p->pos[mid] < pos)
            lo = mid + 1u;
        else
            hi = mid;
    }
    if (lo == n_cols || p->pos[lo] != pos) return SIZE_MAX;
    size_t a = 0, b = p->n_holes; /* is column lo a hole? */
    while (a < b) {
        const size_t mid = a + (b - a) / 2u;
        if (p->holes[mid] < lo)
            a = mid + 1u;
        else
            b = mid;
    }
    return a < p->n_holes && p->holes[a] == lo ? SIZE_MAX : lo;
}

pb_status pb_kvcache_window_score(const pb_kvcache *policy, uint32_t pos,
                                  double *score) {
    if (policy == NULL || score == NULL) return PB_ERR_NULL;
    const pb_kvcache *p = policy;
    if (p->cfg.scorer != (uint32_t)PB_SCORER_WINDOW) return PB_ERR_PARAM;
    const size_t col = column_of_pos(p, pos);
    if (col == SIZE_MAX) return PB_ERR_NOT_HELD;
    *score = pb__ring_window_score(p->ring, p->row_stride, p->obs_window,
                                   col, p->lazy_holes, p->n_lazy,
                                   p->dense_rows);
    return PB_OK;
}

pb_status pb_kvcache_score(const pb_kvcache *policy, uint32_t pos,
                           double *score) {
    if (policy == NULL || score == NULL) return PB_ERR_NULL;
    if (policy->cfg.scorer == (uint32_t)PB_SCORER_WINDOW)
        return pb_kvcache_window_score(policy, pos, score);
    const size_t rank = column_of_pos(policy, pos); /* no holes: a rank */
    if (rank == SIZE_MAX) return PB_ERR_NOT_HELD;
    *score = pb__source_score(policy, rank);
    return PB_OK;
}

size_t pb_kvcache_sink_count(const pb_kvcache *policy) {
    return policy ? sinks_held(policy) : 0u;
}

size_t pb_kvcache_memory_bytes(const pb_kvcache *policy) {
    return policy ? policy->block_bytes : 0u;
}
