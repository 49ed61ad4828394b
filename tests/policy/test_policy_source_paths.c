/*
 * test_policy_source_paths.c - white-box tests of the score sources of the
 * scorers other than the window (score_sources.c) and of their hot loops
 * (simd_kernels.c), linked with the library's objects so that it can read
 * the instance and pick the kernel variant:
 *
 *   - every variant of the scorers' loops this CPU runs (least score,
 *     first score at most a bound, the updates that find the least score
 *     on the way, and the weight check without a quantising limit)
 *     against naive versions, bit for bit;
 *   - the weight check of every variant, with and without a quantising
 *     limit and with and without FTZ/DAZ, on a weight of every class of
 *     bit pattern at every place of rows of 1 to 48 weights (the AVX-512
 *     variant screens rows by class before the common check);
 *   - the vote against the fair share 1/n decided on the floats themselves
 *     is the comparison in double of docs/spec.md §13.2, on the floats
 *     next to 1/n for many n;
 *   - cumulative, last, votes and none, with and without sinks and recent
 *     windows, evicting after every step (where an observe finds the least
 *     score for the evict), every few steps or at random, with random asks,
 *     null steps and resets, against tests/reference_model: every victim
 *     and every score agree, with the kernel variant rotating with the
 *     scenario; the run fails if no evict used the least an observe found.
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

#include "source_internal.h"
#include "reference_model.h"
#include "fp_env.h"
#include "test_rng.h"
#include "test_main.h"

static uint64_t bits_of(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static uint32_t fbits_of(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* The weight check by definition: PB__WEIGHT_BAD for a bad weight,
 * PB__WEIGHT_BIG for one whose magnitude's pattern is at or above limit. */
static unsigned flags_naive(const float *w, size_t n, uint32_t limit) {
    unsigned f = 0u;
    for (size_t i = 0; i < n; ++i) {
        const uint32_t b = fbits_of(w[i]);
        if (!pbt_weight_valid(w[i])) f |= PB__WEIGHT_BAD;
        if ((b & UINT32_C(0x7FFFFFFF)) >= limit) f |= PB__WEIGHT_BIG;
    }
    return f;
}

/* A weight >= 0 (or -0.0) of one of several awkward kinds. */
static float weight(pbt_rng *r, int style, size_t n) {
    switch (style) {
    case 0: return (float)pbt_unit(r);
    case 1: return (float)pbt_below(r, 4) * .125f; /* exact ties */
    case 2: return pbt_below(r, 3) ? 0.0f : (float)pbt_unit(r);
    case 3: return pbt_below(r, 10) == 0 ? -0.0f : (float)pbt_unit(r) / (float)n;
    case 4: return ldexpf((float)pbt_unit(r), (int)pbt_below(r, 100) - 60);
    case 5: /* near the fair share, where a vote is decided */
        return nextafterf((float)(1.0 / (double)(n ? n : 1)),
                          pbt_below(r, 2) ? 0.0f : 1.0f);
    default: /* softmax-like: a few heavy hitters, a light tail */
        return pbt_below(r, 20) == 0 ? (float)(.1 + pbt_unit(r))
                                     : (float)(pbt_unit(r) * 1e-4);
    }
}

/* ------------------------------------------------------------------------ */
/* The loops against naive versions                                         */

static void source_kernels_match_naive(void **state) {
    (void)state;
    const pb__kernels *all[4];
    const size_t nk = pb__kernels_available(all, 4);
    pbt_rng r = {11};
    enum { N = 300 };
    static double x[N], xa[N], xb[N];
    static uint32_t u[N], ua[N], ub[N];
    static float w[N];
    for (int trial = 0; trial < 3000; ++trial) {
        const size_t n = pbt_below(&r, N + 1);
        const int style = (int)pbt_below(&r, 7);
        for (size_t i = 0; i < N; ++i) {
            w[i] = weight(&r, style, n);
            x[i] = pbt_below(&r, 3) ? pbt_unit(&r)
                                    : (double)pbt_below(&r, 3) * .25;
            u[i] = pbt_below(&r, 4) ? pbt_below(&r, 6) : (uint32_t)pbt_next(&r);
            if (pbt_below(&r, 50) == 0) u[i] = UINT32_MAX;
        }
        /* Naive answers. */
        uint64_t least = UINT64_C(0x7FFFFFFFFFFFFFFF);
        uint32_t uleast = UINT32_MAX;
        for (size_t i = 0; i < n; ++i) {
            if (bits_of(x[i]) < least) least = bits_of(x[i]);
            if (u[i] < uleast) uleast = u[i];
        }
        const float bar = n ? (float)(1.0 / (double)n) : .5f;
        /* The range whose least is wanted: often all of it, else a part
         * (the sinks before it, the recent window after it). */
        size_t lo = 0, hi = n;
        if (n > 0 && pbt_below(&r, 2)) {
            lo = pbt_below(&r, (uint32_t)n + 1u);
            hi = lo + pbt_below(&r, (uint32_t)(n - lo) + 1u);
        }
        /* The weight check with no quantising limit (the scorers here):
         * bad weights only, as with a limit, in every variant. */
        static float wc[N];
        memcpy(wc, w, sizeof wc);
        static const float bad[] = {NAN, -1.0f, INFINITY, -INFINITY, -1e-40f,
                                    -0.0f, 3.4028235e38f, 1e-45f};
        if (n > 0 && pbt_below(&r, 2))
            wc[pbt_below(&r, (uint32_t)n)] = bad[pbt_below(&r, 8)];
        const unsigned want_flags = flags_naive(wc, n, UINT32_MAX);
        for (size_t v = 0; v < nk; ++v) {
            const pb__kernels *k = all[v];
            assert_int_equal(k->weight_flags(wc, n, UINT32_MAX), want_flags);
            assert_int_equal(k->weight_flags(wc, n, 0x41800000u) &
                                 PB__WEIGHT_BAD,
                             want_flags);
            if (n > 0) {
                size_t first = n;
                for (size_t i = 0; i < n && first == n; ++i)
                    if (bits_of(x[i]) == least) first = i;
                size_t at = n + 1u;
                assert_true(k->least_bits(x, n, NULL) == least);
                assert_true(k->least_bits(x, n, &at) == least);
                assert_int_equal(at, first);
                size_t ufirst = n;
                for (size_t i = 0; i < n && ufirst == n; ++i)
                    if (u[i] == uleast) ufirst = i;
                assert_int_equal(k->least_u32(u, n, NULL), uleast);
                assert_int_equal(k->least_u32(u, n, &at), uleast);
                assert_int_equal(at, ufirst);
            }

            /* cumulative: x += (double)w (its least comes from the
             * scorer's bounds, checked by the scenarios below). */
            memcpy(xa, x, sizeof xa);
            memcpy(xb, x, sizeof xb);
            for (size_t i = 0; i < n; ++i) xa[i] = xa[i] + (double)w[i];
            k->add_weights(xb, w, n);
            assert_memory_equal(xa, xb, sizeof xa);

            /* last: the bits with the sign cleared; the weights checked
             * on the way (wc may hold a bad one). */
            size_t at = 0, want_at = 0;
            unsigned flags = 0u;
            memcpy(ua, u, sizeof ua);
            memcpy(ub, u, sizeof ub);
            uint32_t uwant = UINT32_MAX;
            for (size_t i = 0; i < n; ++i) {
                ua[i] = fbits_of(wc[i]) & UINT32_C(0x7FFFFFFF);
                if (i >= lo && i < hi && ua[i] < uwant) uwant = ua[i];
            }
            for (want_at = lo; want_at < hi && ua[want_at] != uwant; ++want_at)
                ;
            if (hi == lo) want_at = lo;
            assert_int_equal(
                k->record_least(ub, wc, lo, hi, n, &at, &flags), uwant);
            assert_memory_equal(ua, ub, sizeof ua);
            assert_int_equal(at, want_at);
            assert_int_equal(flags, want_flags);
            flags = 0u;
            assert_int_equal(
                k->record_least(ub, wc, lo, hi, n, NULL, &flags), 0u);
            assert_memory_equal(ua, ub, sizeof ua);
            assert_int_equal(flags, want_flags);

            /* votes: one more above the bar, saturating (the least comes
             * from the scorer's bounds, checked by the scenarios below). */
            flags = 0u;
            memcpy(ua, u, sizeof ua);
            memcpy(ub, u, sizeof ub);
            for (size_t i = 0; i < n; ++i)
                if (wc[i] > bar && ua[i] != UINT32_MAX) ua[i] += 1u;
            k->votes(ub, wc, n, bar, &flags);
            assert_memory_equal(ua, ub, sizeof ua);
            assert_int_equal(flags, want_flags);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The vote decided on floats                                               */

/* A votes instance holding n positions, then one step whose weights are
 * the floats around 1/n: each position's vote must be the comparison in
 * double of docs/spec.md §13.2. */
static void votes_compare_in_double(void **state) {
    (void)state;
    enum { MAX_N = 700 };
    static float w[MAX_N];
    pbt_rng r = {3};
    for (uint32_t n = 1; n < MAX_N; n += 1u + pbt_below(&r, 5)) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.scorer = PB_SCORER_VOTES;
        c.budget = n + 1u;
        c.recent_window = 0;
        pb_kvcache *p = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
        for (uint32_t pos = 1; pos < n; ++pos)
            assert_int_equal(pb_kvcache_observe(p, pos, NULL, 0), PB_OK);
        const double share = 1.0 / (double)n;
        const float near = (float)share;
        for (uint32_t i = 0; i < n; ++i) {
            switch (pbt_below(&r, 5)) {
            case 0: w[i] = near; break;
            case 1: w[i] = nextafterf(near, 0.0f); break;
            case 2: w[i] = nextafterf(near, 1.0f); break;
            case 3: w[i] = nextafterf(nextafterf(near, 0.0f), 0.0f); break;
            default: w[i] = (float)pbt_unit(&r) * 2.0f * near; break;
            }
        }
        assert_int_equal(pb_kvcache_observe(p, n, w, n), PB_OK);
        for (uint32_t i = 0; i < n; ++i) {
            double votes = -1.0;
            assert_int_equal(pb_kvcache_score(p, i, &votes), PB_OK);
            assert_true(votes == ((double)w[i] > share ? 1.0 : 0.0));
        }
        pb_kvcache_destroy(p);
    }
}

/* ------------------------------------------------------------------------ */
/* Scorers against the reference, the kernel variant rotating               */

static unsigned long least_used, one_victim_evicts;

/* The cumulative and votes scorers' bounds, while they are kept, are at or
 * below every held score of their block (score_sources.c). */
static void bounds_hold(const pb_kvcache *p) {
    const pb__source *S = (const pb__source *)(const void *)p;
    if (!S->bounds_ok) return;
    const uint64_t *lb = (const uint64_t *)(const void *)S->hist;
    for (size_t i = 0; i < p->kept; ++i) {
        const uint64_t b =
            p->cfg.scorer == PB_SCORER_CUMULATIVE
                ? bits_of(((const double *)S->source)[i])
                : ((const uint32_t *)S->source)[i];
        assert_true(lb[i >> S->bounds_shift] <= b);
    }
    /* The floor is at or below every bound it covers. */
    for (size_t b = 0; b < S->bounds_floor_end; ++b)
        assert_true(S->bounds_floor <= lb[b]);
}

static void run_scenario(unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x9E3779B97F4A7C15) + 3};
    const pb__kernels *variants[4];
    const size_t nk = pb__kernels_available(variants, 4);
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.scorer = PB_SCORER_CUMULATIVE + pbt_below(&r, 4);
    c.budget = 2 + pbt_below(&r, pbt_below(&r, 3) ? 60 : 400);
    c.recent_window = pbt_below(&r, 3) ? pbt_below(&r, c.budget < 40
                                                          ? c.budget
                                                          : 40)
                                       : 0u;
    const uint32_t max_cadence = 1 + pbt_below(&r, 9);
    c.capacity = c.budget + max_cadence + 1u;
    if (pbt_below(&r, 2)) {
        const uint32_t room = c.capacity - c.recent_window - 1u;
        c.sinks = pbt_below(&r, (room < 8 ? room : 8) + 1u);
    }
    const int cadence_style = (int)pbt_below(&r, 3);
    const int style = (int)pbt_below(&r, 7);

    pb_kvcache *p = NULL;
    ref_policy ref;
    assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
    assert_int_equal(ref_create_config(&ref, &c), PB_OK);
    pb__source *const S = pb__source_of(p);
    p->k = variants[seed % nk];
    /* Votes that might saturate are checked before the update, the others
     * as it reads them (undone on a bad weight): both ways here. */
    const int votes_checked_first =
        c.scorer == PB_SCORER_VOTES && seed % 3u == 0u;
    if (votes_checked_first) {
        pb__votes_of(p)->gap = UINT32_MAX;
        p->self_checks = 0;
    }
    /* The cumulative and votes scorers' bounds over blocks of 2, 4, 8 or
     * 128 ranks on some seeds (32 and more otherwise): many blocks,
     * skipped, merged and remade, or a few long ones. */
    static const unsigned shifts[] = {1u, 2u, 3u, 7u};
    const unsigned small_blocks =
        (c.scorer == PB_SCORER_CUMULATIVE || c.scorer == PB_SCORER_VOTES) &&
                seed % 2u == 0u
            ? shifts[seed / 2u % 4u]
            : 0u;
    if (small_blocks) {
        assert_true((p->capacity - 1u) >> small_blocks <
                    PB__HIST_BINS * sizeof(size_t) / sizeof(uint64_t));
        S->bounds_shift = small_blocks;
    }

    static float w[1024];
    static uint32_t va[1024], vb[1024];
    const uint32_t steps = 100 + pbt_below(&r, 900);
    uint32_t since = 0, pos = 0;
    for (uint32_t step = 0; step < steps; ++step) {
        if (pbt_below(&r, 400) == 0) { /* now and then a reset */
            assert_int_equal(pb_kvcache_reset(p), PB_OK);
            if (votes_checked_first) {
                pb__votes_of(p)->gap = UINT32_MAX;
                p->self_checks = 0;
            }
            if (small_blocks) S->bounds_shift = small_blocks;
            ref_reset(&ref);
            pos = 0;
            since = 0;
            continue;
        }
        pos += 1u + (pbt_below(&r, 10) == 0 ? pbt_below(&r, 5) : 0u);
        const size_t n = ref.kept;
        if (n >= ref.capacity) { /* full: only an evict helps */
            size_t na = 0, nb = 0;
            assert_int_equal(pb_kvcache_evict(p, c.budget, va, 1024, &na),
                             PB_OK);
            assert_int_equal(ref_evict(&ref, c.budget, vb, 1024, &nb), PB_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(va, vb, na * sizeof *va);
            if (na == 0) { /* nothing evictable (the last scorer) */
                assert_int_equal(pb_kvcache_reset(p), PB_OK);
                if (small_blocks) S->bounds_shift = small_blocks;
                ref_reset(&ref);
                pos = 0;
            }
            continue;
        }
        const int null_step = pbt_below(&r, 25) == 0;
        for (size_t i = 0; i < n; ++i) w[i] = weight(&r, style, n);
        if (n > 0 && pbt_below(&r, 8) == 0) {
            /* The same step with one bad weight first: refused, and the
             * scores stay as they were (the comparisons below see it). */
            static const float bad[] = {NAN, -1.0f, INFINITY, -1e-40f};
            const size_t at = pbt_below(&r, 2) ? n - 1u
                                               : pbt_below(&r, (uint32_t)n);
            const float keep = w[at];
            w[at] = bad[pbt_below(&r, 4)];
            const int least_ok = S->least_ok;
            assert_int_equal(pb_kvcache_observe(p, pos, w, n), PB_ERR_WEIGHT);
            assert_int_equal(S->least_ok, least_ok);
            assert_int_equal(pb_kvcache_kept_count(p), n);
            w[at] = keep;
        }
        assert_int_equal(pb_kvcache_observe(p, pos, null_step ? NULL : w, n),
                         PB_OK);
        assert_int_equal(ref_observe(&ref, pos, null_step ? NULL : w, n),
                         PB_OK);
        bounds_hold(p);
        int evict = 0;
        switch (cadence_style) {
        case 0: evict = 1; break; /* after every step */
        case 1: evict = ++since >= max_cadence; break;
        default: evict = pbt_below(&r, 3) == 0; break;
        }
        if (!evict) continue;
        since = 0;
        const uint32_t ask = pbt_below(&r, 8) ? c.budget
                                              : pbt_below(&r, c.budget + 1);
        /* The least an observe found is the least score of the range the
         * evict will compute, and it is right. */
        const int had_least = S->least_ok;
        if (had_least) {
            const size_t kept = ref.kept;
            const size_t window = c.recent_window;
            size_t recent = window < kept ? window : kept;
            if (c.scorer == PB_SCORER_LAST) {
                const size_t u = ((const pb__last *)(const void *)p)->unobserved;
                if (u > recent) recent = u;
            }
            const size_t end = kept - recent;
            const size_t sinks = ref_sink_count(&ref);
            assert_int_equal(S->least_first, sinks < end ? sinks : end);
            assert_int_equal(S->least_end, end);
            uint64_t least = UINT64_MAX;
            size_t at = 0;
            for (size_t i = S->least_first; i < S->least_end; ++i) {
                const uint64_t b =
                    c.scorer == PB_SCORER_CUMULATIVE
                        ? bits_of(((const double *)S->source)[i])
                        : ((const uint32_t *)S->source)[i];
                if (b < least) {
                    least = b;
                    at = i;
                }
            }
            assert_true(S->least == least);
            assert_int_equal(S->least_at, at);
        }
        size_t na = 0, nb = 0;
        assert_int_equal(pb_kvcache_evict(p, ask, va, 1024, &na), PB_OK);
        assert_int_equal(ref_evict(&ref, ask, vb, 1024, &nb), PB_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(va, vb, na * sizeof *va);
        if (na == 1) {
            one_victim_evicts += 1;
            least_used += (unsigned long)had_least;
        }
        /* The bounds bound every held score of their block. */
        bounds_hold(p);
        /* Scores of a few held positions, bit for bit. */
        assert_int_equal(pb_kvcache_kept_count(p), ref.kept);
        for (int q = 0; q < 4 && ref.kept > 0; ++q) {
            const uint32_t at = ref.pos[pbt_below(&r, (uint32_t)ref.kept)];
            double a = 0.0, b = 0.0;
            assert_int_equal(pb_kvcache_score(p, at, &a), PB_OK);
            assert_int_equal(ref_score(&ref, at, &b), PB_OK);
            assert_true(bits_of(a) == bits_of(b));
        }
    }
    ref_destroy(&ref);
    pb_kvcache_destroy(p);
}

static void scorers_agree_rotating_kernels(void **state) {
    (void)state;
    for (unsigned long seed = 1; seed <= 600; ++seed) run_scenario(seed);
    printf("one-victim evicts: %lu, of which %lu used the least an observe "
           "found\n",
           one_victim_evicts, least_used);
    assert_true(least_used > one_victim_evicts / 4u);
}

/* One float of each class a classifier may tell apart, and the edges
 * between them: sign x exponent {0, 1, the limit's, the ones around it,
 * 0xFE, 0xFF} x fraction {0, 1, the quiet bit alone, the quiet bit - 1,
 * all ones}. */
static size_t class_patterns(uint32_t *out) {
    static const uint32_t exps[] = {0x00u, 0x01u, 0x7Fu, 0x82u,
                                    0x83u, 0x84u, 0xFEu, 0xFFu};
    static const uint32_t fracs[] = {0x000000u, 0x000001u, 0x400000u,
                                     0x3FFFFFu, 0x7FFFFFu};
    size_t n = 0;
    for (uint32_t sign = 0; sign < 2u; ++sign)
        for (size_t e = 0; e < sizeof exps / sizeof *exps; ++e)
            for (size_t f = 0; f < sizeof fracs / sizeof *fracs; ++f)
                out[n++] = sign << 31 | exps[e] << 23 | fracs[f];
    return n;
}

static void weight_check_every_class(void **state) {
    (void)state;
    const pb__kernels *all[4];
    const size_t nk = pb__kernels_available(all, 4);
    uint32_t pat[160];
    const size_t np = class_patterns(pat);
    /* No limit (the scorers here), the window scorer's 16.0f, and the
     * patterns of 1.0f and of infinity. */
    static const uint32_t limits[] = {UINT32_MAX, 0x41800000u, 0x3F800000u,
                                      0x7F800000u};
    float w[48];
    for (size_t n = 1; n <= 48; ++n)
        for (size_t at = 0; at < n; ++at)
            for (size_t p = 0; p < np; ++p) {
                /* Valid weights around it, a -0.0 in some rows. */
                for (size_t i = 0; i < n; ++i)
                    w[i] = (float)(i + 1u) * 0x1p-7f;
                if (p % 3u == 0u) w[(at + 1u) % n] = -0.0f;
                memcpy(&w[at], &pat[p], sizeof pat[p]);
                for (size_t l = 0; l < sizeof limits / sizeof *limits; ++l) {
                    const unsigned want = flags_naive(w, n, limits[l]);
                    for (size_t v = 0; v < nk; ++v)
                        assert_int_equal(
                            all[v]->weight_flags(w, n, limits[l]), want);
                }
            }
}

static void weight_check_every_class_under_daz(void **state) {
    PBT_RUN_UNDER_DAZ(weight_check_every_class, state);
}

PB_TEST_MAIN(cmocka_unit_test(source_kernels_match_naive),
             cmocka_unit_test(weight_check_every_class),
             cmocka_unit_test(weight_check_every_class_under_daz),
             cmocka_unit_test(votes_compare_in_double),
             cmocka_unit_test(scorers_agree_rotating_kernels))
