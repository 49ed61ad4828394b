/*
 * window_scorer.c - the window scorer (SnapKV's, PyramidKV's): its entry
 * in the scorer table, its layout and sizing, and its create, reset and
 * observe. A step copies its weights into a row of the observation ring
 * (window_ring.c) and keeps the per-column array scores[] current for the
 * evict's fast paths: the quantised sums (window_sums.c) or the prefix
 * folds (score_stream.c), or nothing when evicts come far apart; it also
 * rewrites, one row per step, a ring left in the lazy state by a
 * compaction (window_internal.h). The evict and its paths are
 * window_evict.c. The rules the doors validate are policy.c's.
 *
 * What scores[] keeps current between evicts (see keep_up in
 * window_evict.c) follows the evict cadence, measured in observed steps:
 *   - at most PB__FILTER_MAX_GAP steps apart: the quantised sums while the
 *     filter decides, otherwise (exact ties defeat it; it backs off for
 *     longer after each miss) the prefix folds. Either costs each step a
 *     little more than a copy of the weights;
 *   - farther apart: nothing, so a step is a plain copy of its row; the
 *     victims' columns are then compacted lazily (each ring row when its
 *     slot is next written), so after obs_window steps every row is dense
 *     and no row was ever moved.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "window_internal.h"

_Static_assert(sizeof(pb__window) <= PB__STATE_BYTES,
               "the window scorer's state fits its reserve");

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */

/* *a = a * b, or 0 if that overflows size_t. */
static int mul_ok(size_t *a, size_t b) {
    if (b != 0u && *a > SIZE_MAX / b) return 0;
    *a *= b;
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

pb_status pb__window_layout_of(const pb__config *cfg, pb__layout *out) {
    memset(out, 0, sizeof *out);
    if (cfg->capacity > (uint64_t)(SIZE_MAX / 64u)) return PB_ERR_TOO_LARGE;
    const size_t capacity = (size_t)cfg->capacity;
    const size_t max_holes = max_holes_of(capacity);
    /* pos[] and the sums hold at most max_holes dead columns; a ring row of
     * the lazy state's old layout at most pb__lazy_room(capacity). */
    const size_t columns = capacity + max_holes;
    const size_t ring_columns = capacity + pb__lazy_room(capacity);
    const size_t obs = (size_t)cfg->obs_window;
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
        pb__pool_work_bytes(cfg->pool_kernel, capacity);
    pb__prefill_scratch prefill;
    if (pb__prefill_scratch_of(cfg->pool_kernel, work_bytes,
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
    pb__cursor c = {0, 0};
    const size_t off_struct = pb__part(&c, PB__STATE_BYTES);
    out->off_pos = pb__part(&c, pos_bytes);
    out->off_ring = pb__part(&c, ring_bytes);
    out->off_scores = pb__part(&c, score_bytes);
    out->off_alive = pb__part(&c, alive_bytes);
    out->off_holes = pb__part(&c, hole_bytes);
    out->off_lazy = pb__part(&c, lazy_bytes);
    out->off_work = pb__part(&c, work_bytes);
    out->off_hist = pb__part(&c, select_bytes);
    out->off_prefill = pb__part(&c, prefill_bytes);
    const size_t total = pb__block_bytes(&c);
    if (total == 0u) return PB_ERR_TOO_LARGE;
    assert(off_struct == 0u);
    (void)off_struct;
    out->off_cands = out->off_hist;
    out->off_heap = out->off_hist + cand_bytes; /* whole lines of candidates */
    out->row_stride = row_stride;
    out->max_holes = max_holes;
    out->work_bytes = work_bytes;
    out->prefill_bytes = prefill_bytes;
    out->span = c.at;
    /* The allocator's alignment is unknown: ask for enough to start on a
     * line wherever the block lands. */
    out->total = total;
    return PB_OK;
}

static pb_status window_size(const pb__config *cfg, size_t *total) {
    pb__layout layout;
    const pb_status st = pb__window_layout_of(cfg, &layout);
    if (st == PB_OK) *total = layout.total;
    return st;
}

/* ------------------------------------------------------------------------ */
/* Create, reset                                                            */

static void reset_state(pb__window *p) {
    p->c.fresh = 1;
    p->c.kept = 1u;
    p->c.sinks_kept = p->c.cfg.sinks != 0u; /* position 0 */
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
    for (unsigned i = 0; i < PB__GUESS_SLOTS; i++) {
        p->guess_m[i] = -1.0;
        p->guess_step[i] = 4u;
    }
    p->c.pos[0] = 0u;
    pb__ring_clear_column(p->ring, p->row_stride, p->obs_window, 0u);
}

static void window_reset(pb_kvcache *inst) {
    reset_state((pb__window *)(void *)inst);
}

static void window_init(pb_kvcache *inst) {
    pb__window *p = (pb__window *)(void *)inst;
    const pb__config cfg = p->c.cfg;
    pb__layout layout;
    const pb_status st = pb__window_layout_of(&cfg, &layout);
    assert(st == PB_OK); /* create sized the block by the same layout */
    (void)st;
    unsigned char *base = (unsigned char *)(void *)p;
    p->obs_window = cfg.obs_window;
    p->half_kernel = (size_t)(cfg.pool_kernel - 1u) / 2u;
    p->row_stride = layout.row_stride;
    p->c.pos = (uint32_t *)(void *)(base + layout.off_pos);
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
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

/* Whether the instance writes the rows it copies past the caches. */
static int streamed_rows(const pb__window *p) {
    return p->c.cfg.row_stores == (uint32_t)PB_ROW_STORES_STREAMED;
}

/* In the lazy state, after the step's row was written in the new layout:
 * zeroes the old layout's tail of the row (every column from kept +
 * n_holes on is then zero) and marks it dense; once all rows are, the old
 * layout is forgotten. */
static void mark_row_dense(pb__window *p) {
    float *row = p->ring + (size_t)p->slot * p->row_stride;
    memset(row + p->c.kept + p->n_holes, 0, p->n_lazy * sizeof *row);
    p->dense_rows |= UINT64_C(1) << p->slot;
    const uint64_t all = p->obs_window == 64u
                             ? ~UINT64_C(0)
                             : (UINT64_C(1) << p->obs_window) - 1u;
    if (p->dense_rows == all) {
        p->n_lazy = 0u;
        p->dense_rows = 0u;
    }
}

void pb__window_finish_lazy(pb__window *p) {
    if (p->n_lazy == 0u) return;
    const size_t n_new = p->c.kept + p->n_holes;
    for (uint32_t s = 0; s < p->obs_window; ++s) {
        if ((p->dense_rows >> s) & 1u) continue;
        float *row = p->ring + (size_t)s * p->row_stride;
        pb__ring_move_row(row, p->lazy_holes, p->n_lazy, n_new);
        memset(row + n_new, 0, p->n_lazy * sizeof *row);
    }
    p->n_lazy = 0u;
    p->dense_rows = 0u;
}

/* The ring row the next observed step writes. */
static const float *window_next_row(const pb_kvcache *inst) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    return p->ring + (size_t)p->slot * p->row_stride;
}

static pb_status window_observe(pb_kvcache *inst, uint32_t pos,
                                const float *attn, size_t attn_len,
                                unsigned flags) {
    pb__window *p = (pb__window *)(void *)inst;
    if (attn != NULL) {
        const int sums = p->sums_valid && !(flags & PB__WEIGHT_BIG);
        assert(p->n_lazy == 0u || !p->prefix_valid);
        /* The lazy state's rows are rewritten as they come (with the sums,
         * or as one copy when nothing else is kept and no hole has come
         * since it began); any other step ends it first. */
        if (p->n_lazy > 0u && !sums && (p->sums_valid || p->n_holes > 0u))
            pb__window_finish_lazy(p);
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
                                  p->c.kept + p->n_holes);
            pb__filter_store_row(p, attn, attn_len);
            if (moved) mark_row_dense(p);
        } else {
            /* A row the prefix folds read next is kept in the caches. */
            pb__ring_store_row(p->ring, p->row_stride, p->slot, attn,
                               attn_len, p->holes, p->n_holes,
                               streamed_rows(p) && !p->prefix_valid);
            p->sums_valid = 0;
            if (p->prefix_valid)
                p->c.k->prefix_add(p->ring + (size_t)p->slot * p->row_stride,
                                 p->scores, p->holes, p->n_holes, attn_len,
                                 p->slot == 0u);
        }
        p->slot = p->slot + 1u == p->obs_window ? 0u : p->slot + 1u;
        if (p->gap < UINT32_MAX) p->gap += 1u;
    }
    const size_t at = p->c.kept + p->n_holes; /* in pos[] and the sums */
    p->c.pos[at] = pos;
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
    p->c.sinks_kept += pos < p->c.cfg.sinks;
    p->c.kept += 1u;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Scores                                                                   */

static double window_score(const pb_kvcache *inst, size_t col) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    return pb__ring_window_score(p->ring, p->row_stride, p->obs_window, col,
                                 p->lazy_holes, p->n_lazy, p->dense_rows);
}

static pb__holes window_holes(const pb_kvcache *inst) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    const pb__holes h = {p->holes, p->n_holes};
    return h;
}

const pb__scorer_ops pb__window_ops = {
    .name = "window",
    .size = window_size,
    .init = window_init,
    .reset = window_reset,
    .next_row = window_next_row,
    .observe = window_observe,
    .evict = pb__window_evict,
    .evict_ranks = pb__window_evict_ranks,
    .peek_lowest = pb__window_peek_lowest,
    .peek_work_bytes = pb__window_peek_work_bytes,
    .lowest = pb__window_lowest,
    .score = window_score,
    .window = 1,
    .holes = window_holes,
    .prefill = pb__window_prefill,
    .prefill_workspace = pb__window_prefill_workspace,
    .prefill_lowest = pb__window_prefill_lowest,
};
