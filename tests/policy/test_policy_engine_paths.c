/*
 * test_policy_engine_paths.c - white-box tests of the engine: linked with
 * the library's objects (not the installed library) so that it can read the
 * instance and call the pb__ modules.
 *
 *   - selection, pooling (doubling and queue), the block window max and the
 *     rank -> column map against naive versions;
 *   - every variant of the hot loops this CPU runs (generic, AVX2,
 *     AVX-512) against the generic one, bit for bit, on random inputs;
 *   - every evict path (full; filtered and streamed, each with and without
 *     the ring compaction; a filter miss falling back to streaming; the
 *     sums dropped by a large weight and rebuilt) on decode-like workloads,
 *     where the engine as shipped, the engine with the filter switched off,
 *     the engine with only the full path, and tests/reference_model must
 *     agree on every victim and every window score; the run fails if any
 *     path was never taken. The three engines use different variants of
 *     the hot loops, rotating with the scenario.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "window_internal.h"
#include "reference_model.h"
#include "test_rng.h"
#include "test_main.h"

/* pb__window_max_span on a copy: out[k] = max of x[max(0, i-h) ..
 * min(n-1, i+h)] for i = i0 + k, k = 0 .. m-1, leaving x alone; buf holds
 * m + 2h doubles. */
static void window_max_block(const double *x, size_t n, size_t h, size_t i0,
                             size_t m, double *buf, double *out) {
    const size_t lo = i0 >= h ? i0 - h : 0u;
    const size_t hi = n - (i0 + m) > h ? i0 + m + h : n; /* [lo, hi) */
    memcpy(buf, x + lo, (hi - lo) * sizeof *buf);
    pb__window_max_span(pb__kernels_generic(), buf, hi - lo, h, i0 - lo, m,
                        out);
}

static int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ------------------------------------------------------------------------ */
/* Modules against naive versions                                           */

static void selection_matches_naive(void **state) {
    (void)state;
    pbt_rng r = {1};
    static double keys[300];
    static unsigned char naive[300];
    size_t hist[PB__HIST_BINS];
    for (int trial = 0; trial < 3000; ++trial) {
        const size_t n = 1 + pbt_below(&r, 300);
        const uint32_t style = pbt_below(&r, 4);
        for (size_t i = 0; i < n; ++i) {
            if (style == 0) keys[i] = pbt_unit(&r);
            if (style == 1) keys[i] = (double)pbt_below(&r, 4) * .25;
            if (style == 2)
                keys[i] = ldexp(pbt_unit(&r), -(int)pbt_below(&r, 1000));
            if (style == 3)
                keys[i] = pbt_below(&r, 2) ? 0.0 : 1e300 * pbt_unit(&r);
        }
        const size_t k = pbt_below(&r, (uint32_t)n + 1);
        /* Naive: k times the lowest not yet taken, ties to the lower. */
        memset(naive, 0, n);
        for (size_t v = 0; v < k; ++v) {
            size_t best = n;
            for (size_t i = 0; i < n; ++i)
                if (!naive[i] && (best == n || keys[i] < keys[best])) best = i;
            naive[best] = 1;
        }
        pb__cut cut;
        pb__select_lowest(keys, n, k, hist, &cut);
        for (size_t i = 0; i < n; ++i)
            assert_int_equal(pb__cut_takes(&cut, pb__key_bits(keys[i])),
                             naive[i]);
    }
}

static void pooling_matches_naive(void **state) {
    (void)state;
    pbt_rng r = {2};
    static double x[200], y[200], want[200];
    static unsigned char work[200 * 16];
    for (int trial = 0; trial < 4000; ++trial) {
        const size_t n = 1 + pbt_below(&r, 200);
        const size_t h =
            pbt_below(&r, 4) ? pbt_below(&r, 16) : pbt_below(&r, 120);
        const uint32_t kernel = (uint32_t)(2 * h + 1);
        for (size_t i = 0; i < n; ++i)
            x[i] = pbt_below(&r, 3) ? (double)pbt_below(&r, 5) : pbt_unit(&r);
        const int avg = (int)pbt_below(&r, 2);
        for (size_t i = 0; i < n; ++i) {
            const size_t lo = i >= h ? i - h : 0;
            const size_t hi = i + h < n - 1 ? i + h : n - 1;
            double acc = avg ? 0.0 : x[lo];
            for (size_t j = avg ? lo : lo + 1; j <= hi; ++j)
                acc = avg ? acc + x[j] : (x[j] > acc ? x[j] : acc);
            want[i] = avg ? acc / (double)kernel : acc;
        }
        memcpy(y, x, n * sizeof *x);
        const size_t wb = pb__pool_work_bytes(kernel, n);
        assert_true(wb <= sizeof work);
        if (avg)
            pb__pool_avg(y, n, h, kernel, work, wb);
        else
            pb__pool_max(y, n, h, work, wb);
        for (size_t i = 0; i < n; ++i) assert_true(same_double(y[i], want[i]));
        if (!avg && h <= PB__DOUBLING_MAX_HALF) {
            const size_t i0 = pbt_below(&r, (uint32_t)n);
            const size_t m = 1 + pbt_below(&r, (uint32_t)(n - i0));
            double buf[200 + 2 * PB__DOUBLING_MAX_HALF], out[200];
            window_max_block(x, n, h, i0, m, buf, out);
            for (size_t k = 0; k < m; ++k)
                assert_true(same_double(out[k], want[i0 + k]));
        }
    }
}

static void column_map_matches_walk(void **state) {
    (void)state;
    pbt_rng r = {3};
    size_t holes[40];
    for (int trial = 0; trial < 2000; ++trial) {
        const size_t n_cols = 1 + pbt_below(&r, 120);
        size_t nh = 0;
        for (size_t c = 0; c < n_cols && nh < 40; ++c)
            if (pbt_below(&r, 4) == 0) holes[nh++] = c;
        const size_t ranks = n_cols - nh;
        size_t rank = 0, h = 0;
        for (size_t c = 0; c < n_cols; ++c) {
            if (h < nh && holes[h] == c) {
                ++h;
                continue;
            }
            assert_int_equal(pb__ring_column_of(holes, nh, rank), c);
            ++rank;
        }
        assert_int_equal(rank, ranks);
        /* The runs cover the same columns. */
        pb__runs it = {0, 0, 0};
        pb__run run;
        size_t covered = 0;
        while (pb__run_next(&it, holes, nh, ranks, &run)) {
            for (size_t j = 0; j < run.len; ++j)
                assert_int_equal(pb__ring_column_of(holes, nh, run.rank + j),
                                 run.col + j);
            covered += run.len;
        }
        assert_int_equal(covered, ranks);
    }
}

static void kernel_variants_agree(void **state) {
    (void)state;
    const pb__kernels *all[4];
    const size_t nk = pb__kernels_available(all, 4);
    const pb__kernels *g = pb__kernels_generic();
    printf("kernel variants on this CPU:");
    for (size_t v = 0; v < nk; ++v) printf(" %s", all[v]->name);
    printf(" (best: %s)\n", pb__kernels_best()->name);
    pbt_rng r = {5};
    enum { ROWS = 19, STRIDE = 160 };
    static float ring[ROWS * STRIDE], row_a[STRIDE], row_b[STRIDE], w[STRIDE];
    static double a[STRIDE], xa[STRIDE], xb[STRIDE];
    for (int trial = 0; trial < 400; ++trial) {
        for (size_t i = 0; i < ROWS * STRIDE; ++i)
            ring[i] = pbt_below(&r, 4)
                          ? ldexpf((float)pbt_unit(&r), -(int)pbt_below(&r, 60))
                          : (float)pbt_below(&r, 3);
        const uint32_t obs = 1 + pbt_below(&r, ROWS);
        const size_t col = pbt_below(&r, 40), n = pbt_below(&r, STRIDE - 40);
        const double scale = 0x1p40;
        for (size_t i = 0; i < STRIDE; ++i) {
            w[i] = pbt_below(&r, 50) ? (float)pbt_unit(&r)
                                     : (float)(20.0 * pbt_unit(&r));
            if (pbt_below(&r, 200) == 0) w[i] = pbt_below(&r, 2) ? NAN : -1.0f;
            xa[i] = xb[i] =
                pbt_below(&r, 3) ? pbt_unit(&r) : (double)pbt_below(&r, 3);
        }
        const uint32_t rb = pbt_below(&r, obs + 1);
        double init[STRIDE];
        for (size_t i = 0; i < STRIDE; ++i) init[i] = pbt_unit(&r);
        const double *use_init = pbt_below(&r, 2) ? init + col : NULL;
        g->fold_rows(ring, STRIDE, rb, obs, col, n, use_init, STRIDE - col, a);
        const unsigned fa = g->weight_flags(w, n, 0x41800000u);
        memcpy(row_a, ring, sizeof row_a);
        for (size_t v = 0; v < nk; ++v) {
            double out[STRIDE];
            all[v]->fold_rows(ring, STRIDE, rb, obs, col, n, use_init,
                              STRIDE - col, out);
            assert_memory_equal(out, a, n * sizeof *out);
            /* The fold of rows 0 .. obs in one go equals the prefix over
             * 0 .. rb finished over rb .. obs, in every variant. */
            double pre[STRIDE], whole[STRIDE], fin[STRIDE];
            all[v]->fold_rows(ring, STRIDE, 0u, rb, col, n, NULL,
                              STRIDE - col, pre);
            all[v]->fold_rows(ring, STRIDE, rb, obs, col, n, pre,
                              n, fin);
            g->fold_rows(ring, STRIDE, 0u, obs, col, n, NULL, STRIDE - col,
                         whole);
            assert_memory_equal(fin, whole, n * sizeof *fin);
            /* prefix_add over holes, restarting or not. */
            const size_t ph[2] = {2, 5};
            const size_t pnh = n > 8 ? 2 : 0, plive = n - pnh;
            double pa[STRIDE], pb[STRIDE];
            for (size_t i = 0; i < STRIDE; ++i) pa[i] = pb[i] = pbt_unit(&r);
            const unsigned restart = pbt_below(&r, 2);
            g->prefix_add(ring + col, pa, ph, pnh, plive, restart);
            all[v]->prefix_add(ring + col, pb, ph, pnh, plive, restart);
            assert_memory_equal(pa, pb, sizeof pa);
            assert_int_equal(all[v]->weight_flags(w, n, 0x41800000u), fa);
            /* Sums: a finite, in-range step on both copies. */
            float wf[STRIDE];
            for (size_t i = 0; i < n; ++i) wf[i] = (float)pbt_unit(&r);
            double sa[STRIDE], sb[STRIDE];
            for (size_t i = 0; i < n; ++i)
                sa[i] = sb[i] = (double)pbt_below(&r, 99);
            memcpy(row_a, ring, sizeof row_a);
            memcpy(row_b, ring, sizeof row_b);
            const size_t holes[3] = {3, 9, 10};
            const size_t nh = n > 12 ? 3 : 0, live = n - nh;
            /* Some weights q rounds (not multiples of 1 / scale). */
            for (size_t i = 0; i < n; i += 3)
                wf[i] = (float)pbt_below(&r, 1000) * 0x1p-30f;
            /* ... or none, now and then. */
            if (pbt_below(&r, 3) == 0)
                for (size_t i = 0; i < n; i += 3) wf[i] = 0.25f;
            const unsigned rca =
                g->store_sums(row_a, wf, sa, holes, nh, live, scale);
            const unsigned rcb =
                all[v]->store_sums(row_b, wf, sb, holes, nh, live, scale);
            assert_memory_equal(row_a, row_b, n * sizeof *row_a);
            assert_memory_equal(sa, sb, n * sizeof *sa);
            /* Whether q rounded a weight stored, as defined. */
            unsigned want = 0;
            for (size_t k = 0; k < live; ++k)
                want |= (double)wf[k] * scale !=
                        (double)(int64_t)((double)wf[k] * scale);
            assert_int_equal(rca, want);
            assert_int_equal(rcb, want);
            /* Valid weights only (the library never quantises others),
             * some at or above the limit of 16. */
            for (size_t i = 0; i < n; ++i)
                wf[i] =
                    pbt_below(&r, 30) ? (float)pbt_unit(&r) : 16.0f + (float)i;
            unsigned ca = 0, cb = 0, cw = 0;
            const unsigned qa =
                g->quantise_add(wf, sa, n, scale, 0x41800000u, &ca);
            const unsigned qb =
                all[v]->quantise_add(wf, sb, n, scale, 0x41800000u, &cb);
            assert_int_equal(qa, qb);
            for (size_t i = 0; i < n; ++i)
                cw |= (double)wf[i] * scale !=
                      (double)(int64_t)((double)wf[i] * scale);
            assert_int_equal(ca, cw);
            assert_int_equal(cb, cw);
            assert_memory_equal(sa, sb, n * sizeof *sa);
            /* Pooling helpers. */
            double ya[STRIDE], yb[STRIDE];
            memcpy(ya, xa, sizeof ya);
            memcpy(yb, xa, sizeof yb);
            const size_t d = 1 + pbt_below(&r, 8);
            g->widen(ya, n, d);
            all[v]->widen(yb, n, d);
            assert_memory_equal(ya, yb, n * sizeof *ya);
            g->max_of(xa, xb + 1, ya, n > 0 ? n - 1 : 0);
            all[v]->max_of(xa, xb + 1, yb, n > 0 ? n - 1 : 0);
            assert_memory_equal(ya, yb, (n > 0 ? n - 1 : 0) * sizeof *ya);
            const double t = pbt_unit(&r);
            const size_t fb = g->first_below(xa, n, t);
            assert_int_equal(fb, all[v]->first_below(xa, n, t));
            /* And it is the first: none before it, x[fb] below t. */
            for (size_t j = 0; j < fb; ++j) assert_false(xa[j] < t);
            if (fb < n) assert_true(xa[fb] < t);
            /* The bits of x < t: every variant, and each bit as defined;
             * the rest of the last word is 0. */
            uint64_t ba[(STRIDE + 63) / 64], bb[(STRIDE + 63) / 64];
            g->below_bits(xa, n, t, ba);
            all[v]->below_bits(xa, n, t, bb);
            assert_memory_equal(ba, bb, (n + 63) / 64 * sizeof *ba);
            for (size_t j = 0; j < (n + 63) / 64 * 64; ++j)
                assert_int_equal((ba[j / 64] >> (j % 64)) & 1u,
                                 j < n && xa[j] < t);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The evict paths on decode-like workloads                                 */

static unsigned long paths[6], misses, big_drops, rebuilt;
static unsigned long lazy_entered, lazy_finished_by_evict, lazy_left_by_steps;
static unsigned long lazy_kept_by_evict, lazy_with_holes, half_compactions;
static unsigned long prefix_streams, exact_evicts;
static unsigned long guess_misses, guess_huge_held;

typedef struct trio {
    pb_kvcache *fast;   /* the engine as shipped */
    pb_kvcache *stream; /* the same with the filter switched off */
    pb_kvcache *full;   /* the same with only the full path */
    ref_policy ref;
} trio;

static float decode_weight(pbt_rng *r, int style, size_t i, size_t n) {
    switch (style) {
    case 0: /* softmax-like: sinks, a few heavy hitters, a light tail */
        if (i < 4) return (float)(.05 + .05 * pbt_unit(r));
        return pbt_below(r, 50) == 0 ? (float)(.02 * pbt_unit(r))
                                 : (float)(pbt_unit(r) * 2e-4);
    case 1: return (float)pbt_unit(r) / (float)n;
    case 2: return (float)pbt_below(r, 3) * .125f; /* ties */
    case 3: return pbt_below(r, 3) ? 0.0f : (float)pbt_unit(r);
    case 4: /* decode-4096's kind: a flat floor every position shares
             * exactly, a local band and sinks, all multiples of 2^-16 (no
             * sum rounds: the exact selection, with many exact ties) */
        if (i < 2 || i + 8 >= n) return (float)(1 + pbt_below(r, 64)) * 0x1p-10f;
        return pbt_below(r, 16) == 0 ? (float)(1 + pbt_below(r, 8)) * 0x1p-16f
                                     : 0x1p-16f;
    default: /* now and then a weight the sums cannot take */
        return pbt_below(r, 4000) == 0 ? 20.0f + (float)pbt_unit(r)
                                   : (float)pbt_unit(r) * 1e-3f;
    }
}

static void compare_scores(trio *t, pbt_rng *r) {
    const size_t n = t->ref.kept;
    assert_int_equal(pb_kvcache_kept_count(t->fast), n);
    assert_int_equal(pb_kvcache_kept_count(t->stream), n);
    assert_int_equal(pb_kvcache_kept_count(t->full), n);
    for (int q = 0; q < 6 && n > 0; ++q) {
        const uint32_t pos = t->ref.pos[pbt_below(r, (uint32_t)n)];
        double a, b, c, d;
        assert_int_equal(pb_kvcache_window_score(t->fast, pos, &a), PB_OK);
        assert_int_equal(pb_kvcache_window_score(t->stream, pos, &d), PB_OK);
        assert_int_equal(pb_kvcache_window_score(t->full, pos, &b), PB_OK);
        assert_int_equal(ref_window_score(&t->ref, pos, &c), PB_OK);
        assert_true(same_double(a, c));
        assert_true(same_double(b, c));
        assert_true(same_double(d, c));
    }
}

static void run_decode(unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x9E3779B97F4A7C15) + 7};
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    /* Every eighth instance is large enough (capacity >= 1,088) that a
     * cheap evict with the sums kept compacts past half its allowance of
     * holes (drop_ranks). */
    p.budget = seed % 8u == 0u ? 1100 + pbt_below(&r, 600)
                               : 40 + pbt_below(&r, 700);
    p.recent_window = pbt_below(&r, 40);
    p.obs_window = 1 + pbt_below(&r, pbt_below(&r, 4) ? 20 : 70);
    p.pool_kernel = 1 + 2 * pbt_below(&r, 8);
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const uint32_t max_cadence = 1 + pbt_below(&r, 12);
    o.capacity = p.budget + max_cadence + 1;
    const int style = (int)pbt_below(&r, 6);

    trio t;
    const pb__kernels *variants[4];
    const size_t nk = pb__kernels_available(variants, 4);
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &t.fast), PB_OK);
    pb__window *const wf = pb__window_of(t.fast);
    t.fast->k = variants[seed % nk];
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &t.stream),
                     PB_OK);
    pb__window *const ws = pb__window_of(t.stream);
    ws->filter_ok = 0;
    t.stream->k = variants[(seed + 1) % nk];
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &t.full), PB_OK);
    pb__window *const wl = pb__window_of(t.full);
    wl->filter_ok = 0;
    wl->stream_ok = 0;
    t.full->k = variants[(seed + 2) % nk];
    /* Rows written past the caches change no value: alternate them. */
    t.fast->cfg.row_stores = (uint32_t)(seed % 2u);
    t.full->cfg.row_stores = (uint32_t)((seed + 1u) % 2u);
    assert_int_equal(ref_create(&t.ref, &p, &o), PB_OK);

    static float w[2048];
    static uint32_t va[2048], vb[2048], vc[2048], vd[2048];
    const uint32_t steps = 300 + pbt_below(&r, 1200);
    uint32_t since = 0, cadence = 1 + pbt_below(&r, max_cadence);
    for (uint32_t pos = 1; pos <= steps; ++pos) {
        const size_t n = t.ref.kept;
        for (size_t i = 0; i < n; ++i) w[i] = decode_weight(&r, style, i, n);
        const int was_valid = wf->sums_valid;
        const size_t lazy_before_step = wf->n_lazy;
        assert_int_equal(pb_kvcache_observe(t.fast, pos, w, n), PB_OK);
        assert_int_equal(pb_kvcache_observe(t.stream, pos, w, n), PB_OK);
        assert_int_equal(pb_kvcache_observe(t.full, pos, w, n), PB_OK);
        assert_int_equal(ref_observe(&t.ref, pos, w, n), PB_OK);
        if (was_valid && !wf->sums_valid) ++big_drops;
        if (lazy_before_step > 0u && wf->n_lazy == 0u) ++lazy_left_by_steps;
        if (++since < cadence && t.ref.kept < t.ref.capacity) continue;
        since = 0;
        if (pbt_below(&r, 20) == 0) cadence = 1 + pbt_below(&r, max_cadence);
        const uint32_t ask =
            pbt_below(&r, 10) ? p.budget : pbt_below(&r, p.budget + 1);
        size_t na = 0, nb = 0, nc = 0, nd = 0;
        const int valid_before = wf->sums_valid;
        const int exact_before = valid_before &&
                                 wf->obs_window <= 64u &&
                                 wf->rounded_rows == 0u;
        const size_t lazy_before = wf->n_lazy;
        const size_t holes_before = wf->n_holes;
        const uint32_t gap_before = wf->gap; /* <= 8: no long gap */
        const int prefix_before = wf->prefix_valid;
        /* The filtered scan's guessed bound is only a hint: one far too
         * low (the scan misses and runs again) or far too high changes no
         * victim. A miss from the least margin takes the margin up two
         * steps; a huge guess that held is replaced by the scan's own. */
        const unsigned force = pbt_below(&r, 6);
        for (unsigned g = 0; g < PB__GUESS_SLOTS && force < 2u; g++) {
            wf->guess_m[g] = force == 0u ? 0.0 : 0x1p60;
            wf->guess_step[g] = force == 0u ? PB__GUESS_STEPS : 0u;
        }
        assert_int_equal(pb_kvcache_evict(t.fast, ask, va, 2048, &na), PB_OK);
        for (unsigned g = 0; g < PB__GUESS_SLOTS; g++) {
            if (force == 0u && wf->guess_step[g] == PB__GUESS_STEPS - 2u)
                ++guess_misses;
            if (force == 1u && wf->guess_m[g] < 0x1p60) ++guess_huge_held;
        }
        assert_int_equal(pb_kvcache_evict(t.stream, ask, vd, 2048, &nd),
                         PB_OK);
        assert_int_equal(pb_kvcache_evict(t.full, ask, vb, 2048, &nb), PB_OK);
        assert_int_equal(ref_evict(&t.ref, ask, vc, 2048, &nc), PB_OK);
        assert_int_equal(na, nc);
        assert_int_equal(nb, nc);
        assert_int_equal(nd, nc);
        assert_memory_equal(va, vc, nc * sizeof *va);
        assert_memory_equal(vb, vc, nc * sizeof *vb);
        assert_memory_equal(vd, vc, nc * sizeof *vd);
        /* An evict in the lazy state either ends it or (the filter, with
         * the sums kept) reads both layouts and adds holes to the new. */
        if (lazy_before > 0u && nc > 0) {
            if (wf->n_lazy > 0u)
                ++lazy_kept_by_evict;
            else
                ++lazy_finished_by_evict;
        }
        if (nc > 0 && valid_before && gap_before <= 8u &&
            wf->last_path == PB__PATH_FILTERED_COMPACTED &&
            holes_before + nc <= wf->max_holes)
            ++half_compactions;
        if (wf->n_lazy > 0u && wf->n_holes > 0u) {
            ++lazy_with_holes;
            assert_true(wf->sums_valid);
        }
        if (prefix_before && nc > 0 &&
            (wf->last_path == PB__PATH_STREAMED ||
             wf->last_path == PB__PATH_STREAMED_COMPACTED))
            ++prefix_streams;
        if (wf->n_lazy > 0u) ++lazy_entered;
        if (nc > 0) {
            if (exact_before &&
                (wf->last_path == PB__PATH_FILTERED ||
                 wf->last_path == PB__PATH_FILTERED_COMPACTED))
                ++exact_evicts;
            paths[wf->last_path] += 1;
            paths[ws->last_path] += 1;
            assert_int_equal(wl->last_path, PB__PATH_FULL);
            assert_true(ws->last_path != PB__PATH_FILTERED &&
                        ws->last_path != PB__PATH_FILTERED_COMPACTED);
            if (valid_before && (wf->last_path == PB__PATH_STREAMED ||
                                 wf->last_path ==
                                     PB__PATH_STREAMED_COMPACTED))
                ++misses;
            if (!valid_before && wf->sums_valid) ++rebuilt;
        }
        compare_scores(&t, &r);
    }
    pb_kvcache_destroy(t.fast);
    pb_kvcache_destroy(t.stream);
    pb_kvcache_destroy(t.full);
    ref_destroy(&t.ref);
}

static void every_path_agrees(void **state) {
    (void)state;
    for (unsigned long s = 1; s <= 160; ++s) run_decode(s);
    printf("evicts by path (two engines): full %lu, filtered %lu, "
           "filtered+compacted %lu, streamed %lu, streamed+compacted %lu; "
           "filter misses %lu; sums dropped by a large weight %lu, rebuilt "
           "%lu\n",
           paths[PB__PATH_FULL], paths[PB__PATH_FILTERED],
           paths[PB__PATH_FILTERED_COMPACTED], paths[PB__PATH_STREAMED],
           paths[PB__PATH_STREAMED_COMPACTED], misses, big_drops, rebuilt);
    printf("lazy compaction: entered %lu, finished early by an evict %lu, "
           "kept by a filtered evict %lu (with holes after it %lu), left "
           "after every row was rewritten %lu; compacted with the sums "
           "within the allowance of holes %lu; streamed on prefix folds "
           "%lu; filtered exactly (no sum rounds) %lu\n",
           lazy_entered, lazy_finished_by_evict, lazy_kept_by_evict,
           lazy_with_holes, lazy_left_by_steps, half_compactions,
           prefix_streams, exact_evicts);
    printf("filtered scans of one victim: a guess far too low missed "
           "%lu times, a huge one held %lu times\n",
           guess_misses, guess_huge_held);
    assert_true(exact_evicts > 0);
    assert_true(guess_misses > 0);
    assert_true(guess_huge_held > 0);
    for (unsigned k = PB__PATH_FULL; k <= PB__PATH_STREAMED_COMPACTED; ++k)
        assert_true(paths[k] > 0);
    assert_true(lazy_entered > 0);
    assert_true(lazy_finished_by_evict > 0);
    assert_true(lazy_kept_by_evict > 0);
    assert_true(lazy_with_holes > 0);
    assert_true(half_compactions > 0);
    assert_true(lazy_left_by_steps > 0);
    assert_true(prefix_streams > 0);
    assert_true(misses > 0);
    assert_true(big_drops > 0);
    assert_true(rebuilt > 0);
}

PB_TEST_MAIN(cmocka_unit_test(selection_matches_naive),
             cmocka_unit_test(pooling_matches_naive),
             cmocka_unit_test(column_map_matches_walk),
             cmocka_unit_test(kernel_variants_agree),
             cmocka_unit_test(every_path_agrees))
