/*
 * window_prefill.c - the window scorer's prefill entry (pb__scorer_ops
 * prefill and prefill_workspace), behind the prefill door of prefill.c.
 *
 * It owns what is particular to a prompt: checking the rows x len block,
 * turning rows into the window scores of every prompt position (in one pass
 * over the rows, without ever holding len x obs_window values), the two
 * scopes' rules of how many survive, and writing the survivors into a fresh
 * instance with the ring records the rows give them. Pooling, selection and
 * the instance layout are the engine's (policy_internal.h); this file adds
 * no second copy of them.
 *
 * The rows as decode steps (documented in the header): row j is the step
 * that admits position q_j = len - rows + j and observes positions p < q_j;
 * a row for position 0 (rows == len) is no step. Steps are numbered
 * t = 0 .. steps-1 and step t writes ring slot t % obs_window, so the ring
 * keeps the last min(steps, obs_window) of them.
 */
#include <assert.h>
#include <string.h>

#include "lowest_select.h"
#include "window_internal.h"

/* ------------------------------------------------------------------------ */
/* The shape of one call                                                    */

typedef struct prefill_plan {
    size_t rows, len;
    size_t first;    /* q_0 = len - rows, the position of row 0 */
    size_t skip;     /* 1 if row 0 is position 0's row, which is no step */
    size_t steps;    /* observed steps: rows - skip */
    size_t live;     /* steps still in the ring: min(steps, obs_window) */
    size_t n_kept;   /* survivors */
    size_t needed;   /* victims chosen by score (0: nothing is scored) */
    size_t scored;   /* positions that take part in pooling */
    size_t eligible; /* the first `eligible` positions may be chosen */
} prefill_plan;

/* The row observed in ring slot s, or SIZE_MAX if no live step wrote it. */
static size_t row_of_slot(const prefill_plan *pl, size_t obs, size_t s) {
    if (pl->steps <= obs) return s < pl->steps ? s + pl->skip : SIZE_MAX;
    /* Every slot is live; slot s holds the last step t with t % obs == s. */
    const size_t last = pl->steps - 1u;
    const size_t back = (last % obs + obs - s) % obs;
    return last - back + pl->skip;
}

/* The shape of the rows: which positions they stand for, which are
 * steps, and how many of those the ring keeps. */
static void plan_rows(const pb__window *p, size_t rows, size_t len,
                      prefill_plan *pl) {
    pl->rows = rows;
    pl->len = len;
    pl->first = len - rows;
    pl->skip = rows == len ? 1u : 0u;
    pl->steps = rows - pl->skip;
    pl->live = pl->steps < (size_t)p->obs_window ? pl->steps
                                                  : (size_t)p->obs_window;
}

/* How many survive, by the rules of the instance's scope. */
static void plan_selection(const pb__window *p, uint32_t budget,
                           prefill_plan *pl) {
    const size_t len = pl->len;
    const size_t effective = (size_t)p->c.cfg.effective;
    const size_t target = (size_t)budget < effective ? (size_t)budget
                                                     : effective;
    pl->needed = 0;
    pl->n_kept = len;
    pl->scored = 0;
    pl->eligible = 0;
    if (len <= target) return; /* not compressed, in both scopes */
    if (p->c.cfg.prefill_scope == (uint32_t)PB_PREFILL_REFERENCE) {
        /* W = rows; keep the window and max(share - W, 0) of the prefix. */
        const size_t w = pl->rows;
        const size_t prefix = len - w;
        size_t keep = target > w ? target - w : 0u;
        if (keep > prefix) keep = prefix;
        pl->needed = prefix - keep;
        pl->scored = prefix;
        pl->eligible = prefix;
    } else {
        /* pb_kvcache_evict(budget) on the fed instance. */
        const size_t rw = (size_t)p->c.cfg.recent_window;
        const size_t recent = rw < len ? rw : len;
        const size_t evictable = len - recent;
        size_t needed = len - target;
        if (needed > evictable) needed = evictable;
        pl->needed = needed;
        pl->scored = len;
        pl->eligible = evictable;
    }
    if (pl->needed == 0u) pl->scored = pl->eligible = 0u; /* nothing to score */
    pl->n_kept = len - pl->needed;
}

/* ------------------------------------------------------------------------ */
/* Scratch                                                                  */

pb_status pb__window_prefill_workspace(const pb_kvcache *inst, size_t len,
                                       size_t *bytes) {
    const pb__window *p = (const pb__window *)(const void *)inst;
    pb__prefill_scratch need;
    if (pb__prefill_scratch_of(inst->cfg.pool_kernel, p->work_bytes, len,
                               &need) != PB_OK)
        return PB_ERR_TOO_LARGE;
    *bytes = need.total;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* One pass over the rows                                                   */

static uint32_t check_only(const float *row, size_t from, size_t to) {
    uint32_t bad = 0u;
    for (size_t i = from; i < to; ++i) bad |= pb__weight_bad(row[i]);
    return bad;
}

static inline uint32_t bits_of(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return b;
}

/* The weights that are summed are checked in two cheap halves instead of
 * one exact test per weight: the OR of their bits has the sign bit set if
 * any is negative (or -0.0), and a NaN or infinity makes its sum NaN or
 * infinite (a sum of at most UINT32_MAX finite floats cannot overflow a
 * double). Only if either shows up is every weight tested exactly.
 *
 * The adders fold up to four rows into each score per pass, in row order,
 * so x[i] = (((x[i] + a[i]) + b[i]) + c[i]) + d[i] rounds exactly like four
 * separate passes while the scores travel through the cache a quarter as
 * often. */
static uint32_t add1(double *restrict x, const float *restrict a, size_t from,
                     size_t to) {
    uint32_t sign = 0u;
    for (size_t i = from; i < to; ++i) {
        sign |= bits_of(a[i]);
        x[i] += (double)a[i];
    }
    return sign;
}

static uint32_t add4(double *restrict x, const float *restrict a,
                     const float *restrict b, const float *restrict c,
                     const float *restrict d, size_t from, size_t to) {
    uint32_t sign = 0u;
    for (size_t i = from; i < to; ++i) {
        sign |= bits_of(a[i]) | bits_of(b[i]) | bits_of(c[i]) | bits_of(d[i]);
        x[i] = (((x[i] + (double)a[i]) + (double)b[i]) + (double)c[i]) +
               (double)d[i];
    }
    return sign;
}

/* 1 if some x[i], i < n, is NaN or infinite. */
static int any_not_finite(const double *x, size_t n) {
    int ok = 1;
    for (size_t i = 0; i < n; ++i) ok &= x[i] <= 1.7976931348623157e308;
    return !ok;
}

/* Adds rows[0 .. g-1] (g <= 4), in that order, to the scores of the
 * positions before each row's own limit lim[k]; returns the OR of the bits
 * of every weight added. Where all g rows apply they are folded together;
 * the few positions between the smallest and the largest limit (consistent
 * scope only) are added row by row, which keeps the per-position order. */
static uint32_t add_group(double *x, const float *const *rows,
                          const size_t *lim, size_t g) {
    size_t common = lim[0];
    for (size_t k = 1; k < g; ++k) common = lim[k] < common ? lim[k] : common;
    uint32_t sign = 0u;
    if (g < 4u) {
        for (size_t k = 0; k < g; ++k) sign |= add1(x, rows[k], 0, lim[k]);
        return sign;
    }
    sign |= add4(x, rows[0], rows[1], rows[2], rows[3], 0, common);
    for (size_t k = 0; k < g; ++k)
        if (lim[k] > common) sign |= add1(x, rows[k], common, lim[k]);
    return sign;
}

/* Checks every entry of the block and, if anything is to be scored, leaves
 * the scores of positions 0 .. pl->scored-1 in x. Returns nonzero on a bad
 * weight. Reads each entry once (twice only when a sign bit or a
 * non-finite sum calls for the exact check).
 *
 * A score is 0.0 plus its terms in a fixed order, exactly as the engine
 * folds a ring column: reference scope, the W rows in row order over the
 * prefix (every row's position is at or after the prefix, so it sees all of
 * it); consistent scope, the live rows in ring-slot order, each over the
 * positions before its own. Rows that have left the ring, position 0's
 * row and the unused parts of rows are checked exactly, not summed. */
static uint32_t score_rows(const pb__window *p, const prefill_plan *pl,
                           const float *attn, double *x) {
    const size_t len = pl->len, rows = pl->rows;
    uint32_t bad = 0u;
    if (pl->needed == 0u) {
        for (size_t j = 0; j < rows; ++j)
            bad |= check_only(attn + j * len, 0, len);
        return bad;
    }
    const int reference =
        p->c.cfg.prefill_scope == (uint32_t)PB_PREFILL_REFERENCE;
    const size_t obs = (size_t)p->obs_window;
    const size_t n_live = reference ? rows : pl->live;
    for (size_t i = 0; i < pl->scored; ++i) x[i] = 0.0;
    uint32_t sign = 0u;
    for (size_t k0 = 0; k0 < n_live; k0 += 4u) {
        const size_t g = n_live - k0 < 4u ? n_live - k0 : 4u;
        const float *grp[4];
        size_t lim[4];
        for (size_t k = 0; k < g; ++k) {
            /* Reference: row k; consistent: the row in ring slot k. */
            const size_t j = reference ? k0 + k : row_of_slot(pl, obs, k0 + k);
            grp[k] = attn + j * len;
            lim[k] = reference ? pl->scored : pl->first + j;
            bad |= check_only(grp[k], lim[k], len);
        }
        sign |= add_group(x, grp, lim, g);
    }
    for (size_t j = 0; j < rows - n_live; ++j)
        bad |= check_only(attn + j * len, 0, len);
    if ((sign >> 31) != 0u || any_not_finite(x, pl->scored)) {
        /* A sign bit (maybe only -0.0, which is valid) or a NaN or
         * infinity somewhere: test the summed weights exactly. */
        for (size_t k = 0; k < n_live; ++k) {
            const size_t j = reference ? k : row_of_slot(pl, obs, k);
            const size_t lim = reference ? pl->scored : pl->first + j;
            bad |= check_only(attn + j * len, 0, lim);
        }
    }
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Selection and the commit                                                 */

/* Pools the scores x[0 .. n-1] by the instance's rule. */
static void pool_scores(const pb__window *p, double *x, size_t n, void *work,
                        size_t work_bytes) {
    if (p->c.cfg.pool == (uint32_t)PB_POOL_AVG)
        pb__pool_avg(x, n, p->half_kernel, p->c.cfg.pool_kernel, work,
                     work_bytes);
    else
        pb__pool_max(x, n, p->half_kernel, work, work_bytes);
}

/* The victims among positions 0 .. pl->eligible-1 as a cut applied in
 * ascending position order (pb__cut's rule, with two additions).
 * Consistent scope: the `needed` lowest pooled scores, ties to the lower
 * position, which is the engine's cut as it is. Reference scope: the paper
 * keeps the highest scores with ties to the lower position, so among the
 * keys equal to the threshold the victims are the last ones: the first
 * (equal - take_equal) are skipped.
 *
 * Narrowing: usually few positions survive (2,048 of 32,768), so instead of
 * running the radix selection over every key, a threshold `floor` is taken
 * from a sample such that somewhat more keys than survive are at or above
 * it; those candidates are copied out in position order and the selection
 * runs on them alone. Every key below the floor is a victim. This is exact
 * whenever at least `keep` keys reach the floor (then every survivor, and
 * every key tied with the last survivor, is a candidate); otherwise, or
 * when the candidates overflow their room, the selection runs on all keys.
 * The result is the same either way; only the time differs. */
typedef struct victim_cut {
    uint64_t floor; /* keys below it are victims; 0 when not narrowed */
    pb__cut cut;    /* on the keys at or above the floor, in order */
    size_t skip_equal;
} victim_cut;

#define PREFILL_SAMPLE ((size_t)256)

/* Copies the keys at or above a sampled floor to cand[] in index order;
 * returns their count, or 0 when narrowing does not apply or fails. */
static size_t narrow(pb__window *p, const double *x, size_t n, size_t keep,
                     double *cand, size_t cand_cap, uint64_t *floor_out) {
    if (n < 8u * PREFILL_SAMPLE || keep == 0u || keep > cand_cap / 2u)
        return 0;
    /* Aim at 1.5 keep candidates: j of the sample's keys are at or above
     * the floor when the (S - j) lowest are below it. */
    double sample[PREFILL_SAMPLE];
    for (size_t k = 0; k < PREFILL_SAMPLE; ++k)
        sample[k] = x[(size_t)(((uint64_t)k * (uint64_t)n) / PREFILL_SAMPLE)];
    const size_t j =
        (size_t)(((uint64_t)keep * PREFILL_SAMPLE * 3u) / (2u * (uint64_t)n)) +
        4u;
    if (j >= PREFILL_SAMPLE) return 0;
    pb__cut cut;
    pb__select_lowest(sample, PREFILL_SAMPLE, PREFILL_SAMPLE - j, p->hist,
                      &cut);
    const uint64_t floor = cut.below; /* every unchosen sample key is >= */
    size_t c = 0;
    for (size_t i = 0; i < n; ++i) {
        uint64_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        cand[c] = x[i]; /* written always, kept only if it counts */
        c += bits >= floor;
        if (c == cand_cap) return 0; /* too many: not worth it */
    }
    if (c < keep) return 0; /* the floor was too high */
    *floor_out = floor;
    return c;
}

static void choose_victims(pb__window *p, const prefill_plan *pl,
                           const double *x, double *cand, size_t cand_cap,
                           victim_cut *out) {
    const size_t n = pl->eligible, keep = pl->eligible - pl->needed;
    const double *keys = x;
    size_t m = n, k = pl->needed;
    out->floor = 0u;
    const size_t c = narrow(p, x, n, keep, cand, cand_cap, &out->floor);
    if (c > 0u) {
        keys = cand;
        m = c;
        k = c - keep;
    }
    pb__select_lowest(keys, m, k, p->hist, &out->cut);
    out->skip_equal = 0;
    if (p->c.cfg.prefill_scope != (uint32_t)PB_PREFILL_REFERENCE ||
        out->cut.take_equal == 0u)
        return;
    /* Keys equal to the cut are at or above the floor, so counting them
     * among the selection's keys counts them all. */
    size_t equal = 0;
    for (size_t i = 0; i < m; ++i) {
        uint64_t bits;
        memcpy(&bits, &keys[i], sizeof bits);
        equal += bits == out->cut.below;
    }
    assert(equal >= out->cut.take_equal);
    out->skip_equal = equal - out->cut.take_equal;
}

/* The survivors' ring records: slot by slot, each survivor's entry from the
 * row in that slot if the row's position is after it, else 0. */
static void write_records(pb__window *p, const prefill_plan *pl,
                          const float *attn) {
    const size_t obs = (size_t)p->obs_window, n = pl->n_kept;
    for (size_t s = 0; s < obs; ++s) {
        float *dst = p->ring + s * p->row_stride;
        const size_t j = row_of_slot(pl, obs, s);
        if (j == SIZE_MAX) {
            memset(dst, 0, n * sizeof *dst);
            continue;
        }
        const float *row = attn + j * pl->len;
        const uint32_t q = (uint32_t)(pl->first + j);
        for (size_t c = 0; c < n; ++c) {
            const uint32_t pos = p->c.pos[c];
            dst[c] = pos < q ? row[pos] : 0.0f;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The entry                                                                */

pb_status pb__window_prefill(pb_kvcache *inst, const pb__prompt *in,
                            size_t *n_kept) {
    pb__window *p = (pb__window *)(void *)inst;
    const float *attn = in->attn;
    const size_t rows = in->rows, len = in->len;
    uint32_t *kept = in->kept, *victims = in->victims;
    void *workspace = in->workspace;
    pb__prefill_scratch need;
    if (pb__prefill_scratch_of(p->c.cfg.pool_kernel, p->work_bytes, len,
                               &need) != PB_OK ||
        rows > SIZE_MAX / len)
        return PB_ERR_TOO_LARGE;
    /* Fresh: nothing observed since create or reset, and position 0 still
     * held (an evict with recent_window 0 may have dropped it). */
    if (!p->c.fresh || p->c.kept != 1u || p->c.pos[0] != 0u)
        return PB_ERR_NOT_FRESH;
    /* A fresh instance has dense columns and no window sums to keep up:
     * the survivors are written to columns 0 .. n-1 and the engine rebuilds
     * its sums when an evict wants them. */
    assert(p->n_holes == 0u && !p->sums_valid);

    unsigned char *scratch = workspace;
    size_t scratch_bytes = in->workspace_bytes;
    if (workspace == NULL) {
        /* The reservation serves prompts up to prefill_max_len, not merely
         * what its rounded-up size would happen to hold. */
        if (len > (size_t)p->c.cfg.prefill_max_len) return PB_ERR_WORKSPACE;
        scratch = p->prefill_scratch;
        scratch_bytes = p->prefill_scratch_bytes;
    }
    if (scratch == NULL || scratch_bytes < need.total)
        return PB_ERR_WORKSPACE;
    double *x = (double *)(void *)scratch;
    void *pool_work =
        need.pool_bytes ? (void *)(scratch + need.score_bytes) : p->work;
    const size_t pool_work_bytes =
        need.pool_bytes ? need.pool_bytes : p->work_bytes;
    double *cand = (double *)(void *)(scratch + need.score_bytes +
                                      need.pool_bytes);
    const size_t cand_cap = need.cand_bytes / sizeof(double);

    prefill_plan pl;
    plan_rows(p, rows, len, &pl);
    plan_selection(p, in->budget, &pl);
    if (pl.n_kept > p->c.capacity) return PB_ERR_FULL;
    if ((kept != NULL && in->kept_cap < pl.n_kept) ||
        (victims != NULL && in->victims_cap < len - pl.n_kept)) {
        *n_kept = pl.n_kept;
        return PB_ERR_BUFFER;
    }
    if (score_rows(p, &pl, attn, x) != 0u) return PB_ERR_WEIGHT;

    /* Everything is checked: from here on the call cannot fail. */
    victim_cut vc = {UINT64_C(0), {UINT64_C(0), 0u}, 0u};
    if (pl.needed > 0u) {
        pool_scores(p, x, pl.scored, pool_work, pool_work_bytes);
        choose_victims(p, &pl, x, cand, cand_cap, &vc);
    }
    /* The cut applied in ascending position order; past the eligible
     * positions everything is kept. */
    size_t c = 0, v = 0;
    size_t take = vc.cut.take_equal, skip = vc.skip_equal;
    for (size_t i = 0; i < pl.eligible; ++i) {
        uint64_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        int victim = bits < vc.cut.below;
        if (bits < vc.floor) {
            victim = 1; /* below the narrowed selection's floor */
        } else if (bits == vc.cut.below) {
            if (skip > 0u) {
                --skip;
            } else if (take > 0u) {
                --take;
                victim = 1;
            }
        }
        if (victim) {
            if (victims != NULL) victims[v] = (uint32_t)i;
            ++v;
        } else {
            if (kept != NULL) kept[c] = (uint32_t)i;
            p->c.pos[c++] = (uint32_t)i;
        }
    }
    for (size_t i = pl.eligible; i < len; ++i) {
        if (kept != NULL) kept[c] = (uint32_t)i;
        p->c.pos[c++] = (uint32_t)i;
    }
    assert(c == pl.n_kept && v == pl.needed);
    write_records(p, &pl, attn);
    p->c.kept = c;
    p->slot = (uint32_t)(pl.steps % (size_t)p->obs_window);
    p->c.fresh = 0;
    *n_kept = c;
    return PB_OK;
}

void pb__window_prefill_lowest(pb_kvcache *inst, const pb__prompt *in,
                               size_t end, size_t k, uint32_t *positions,
                               double *keys) {
    pb__window *p = (pb__window *)(void *)inst;
    const size_t rows = in->rows, len = in->len;
    pb__prefill_scratch need;
    const pb_status st =
        pb__prefill_scratch_of(p->c.cfg.pool_kernel, p->work_bytes, len, &need);
    assert(st == PB_OK && k >= 1u && k <= end && end <= len);
    assert(in->workspace != NULL && in->workspace_bytes >= need.total);
    (void)st;
    unsigned char *scratch = in->workspace;
    double *x = (double *)(void *)scratch;
    void *pool_work =
        need.pool_bytes ? (void *)(scratch + need.score_bytes) : p->work;
    const size_t pool_work_bytes =
        need.pool_bytes ? need.pool_bytes : p->work_bytes;
    /* The consistent scope's scores of every position, pooled over the
     * whole prompt, as the prefill that evicts from them ranks them. */
    prefill_plan pl;
    plan_rows(p, rows, len, &pl);
    pl.needed = k;
    pl.scored = len;
    pl.eligible = end;
    pl.n_kept = len - k;
    const uint32_t bad = score_rows(p, &pl, in->attn, x);
    assert(bad == 0u);
    (void)bad;
    pool_scores(p, x, len, pool_work, pool_work_bytes);
    /* A pooled score is a sum of valid weights from +0.0: its bits order
     * as its value. */
    pb__lowest_ranks(x, 8u, 0u, end, k, positions);
    for (size_t t = 0; t < k; ++t) keys[t] = x[positions[t]];
}
